//! The operations of the Azure Key Vault provider (`keyward_provider_runtime::Provider`), through
//! Microsoft's SDK clients (`SecretClient`, `KeyClient`, `CertificateClient`) on the provider's
//! own transport ([`crate::transport`]).

use std::net::IpAddr;
use std::sync::Arc;

use azure_core::http::StatusCode;
use azure_security_keyvault_certificates::models::{
    CertificateClientGetCertificateOptions, ImportCertificateParameters,
};
use azure_security_keyvault_certificates::{CertificateClient, CertificateClientOptions};
use azure_security_keyvault_keys::models::{
    CurveName, ImportKeyParameters, JsonWebKey, KeyAttributes, KeyClientGetKeyOptions, KeyType,
};
use azure_security_keyvault_keys::{KeyClient, KeyClientOptions};
use azure_security_keyvault_secrets::models::{
    Secret, SecretAttributes, SecretClientGetSecretOptions, SecretClientListSecretPropertiesOptions,
    SetSecretParameters,
};
use azure_security_keyvault_secrets::{ResourceExt, SecretClient, SecretClientOptions};
use base64::Engine;
use futures::TryStreamExt;
use keyward_proto::v1::{
    ExternalSecretDataRemoteRef, ExternalSecretFind, PushSecretData, PushSecretRemoteRef, SecretStoreCapabilities,
};
use keyward_provider_runtime::json::{self, find_regex};
use keyward_provider_runtime::netguard::DeniedNetworks;
use keyward_provider_runtime::refs::{CacheKey, ClientCache, ClusterRefs};
use keyward_provider_runtime::{Provider, ProviderError, RequestContext, SecretMap, body};

use crate::api::{AzureKeyVault, AzureKeyVaultSpec, KIND};
use crate::objects::{self, ObjectType};
use crate::transport::{Transport, provider_error};
use crate::{auth, push};

/// Most secrets a find lists.
const MAX_LISTED: usize = 10_000;

/// The times of a secret's, key's or certificate's attributes (three types of one shape).
macro_rules! attribute_times {
    ($attributes:expr) => {{
        let a = $attributes;
        [a.and_then(|a| a.created), a.and_then(|a| a.updated), a.and_then(|a| a.expires), a.and_then(|a| a.not_before)]
    }};
}

/// The three SDK clients of one configuration.
pub struct Vault {
    secrets: SecretClient,
    keys: KeyClient,
    certs: CertificateClient,
    url: String,
}

/// The Azure Key Vault provider.
pub struct AzureProvider {
    refs: ClusterRefs,
    tenant: Transport,
    operator: Transport,
    authority_override: Option<String>,
    clients: ClientCache<Arc<Vault>>,
}

/// The provider's error for an SDK error about `what`.
pub fn map_error(e: azure_core::Error, what: &str) -> ProviderError {
    if let Some(p) = provider_error(&e) {
        return match p {
            ProviderError::BadConfig(m) => ProviderError::BadConfig(format!("{what}: {m}")),
            ProviderError::Unauthenticated(m) => ProviderError::Unauthenticated(format!("{what}: {m}")),
            other => other,
        };
    }
    // The SDK's own message is often generic ("non-transport error…"); Entra ID's and Key
    // Vault's answers are in its causes.
    let msg = format!("{what}: {}", keyward_provider_runtime::store_tls::causes(&e));
    match e.http_status() {
        Some(StatusCode::NotFound) => ProviderError::NoSecret(msg),
        Some(StatusCode::Unauthorized) => ProviderError::Unauthenticated(msg),
        Some(StatusCode::Forbidden) => ProviderError::PermissionDenied(msg),
        Some(StatusCode::BadRequest) => ProviderError::InvalidArgument(msg),
        Some(StatusCode::Conflict) => ProviderError::BadConfig(msg),
        Some(s) if u16::from(s) == 429 || u16::from(s) >= 500 => ProviderError::Unavailable(msg),
        Some(_) => ProviderError::Internal(msg),
        None => match e.kind() {
            azure_core::error::ErrorKind::Credential => ProviderError::Unauthenticated(msg),
            azure_core::error::ErrorKind::Io | azure_core::error::ErrorKind::Connection => {
                ProviderError::Unavailable(msg)
            }
            _ => ProviderError::Internal(msg),
        },
    }
}

fn is_not_found(e: &azure_core::Error) -> bool {
    e.http_status() == Some(StatusCode::NotFound) && provider_error(e).is_none()
}

fn rfc3339(t: Option<azure_core::time::OffsetDateTime>) -> Option<String> {
    t.map(|t| azure_core::time::to_rfc3339(&t))
}

impl AzureProvider {
    /// A provider reading configurations with `client`; tenants' configurations may not reach
    /// `tenant_denied`; `aliases` pin names to addresses (the operator's setting).
    ///
    /// # Errors
    /// When the HTTP clients cannot be built.
    pub fn new(
        client: kube::Client,
        tenant_denied: DeniedNetworks,
        aliases: &[(String, IpAddr)],
    ) -> Result<Self, ProviderError> {
        Ok(AzureProvider {
            refs: ClusterRefs::new(client),
            tenant: Transport::new(tenant_denied, aliases)?,
            operator: Transport::new(DeniedNetworks::none(), aliases)?,
            authority_override: std::env::var(auth::AUTHORITY_HOST_ENV).ok(),
            clients: ClientCache::default(),
        })
    }

    /// The transport of a configuration: the operator's, or the guarded one of tenants.
    pub(crate) fn transport(&self, operator: bool) -> &Transport {
        if operator { &self.operator } else { &self.tenant }
    }

    /// The operator's Entra ID authority host (`AZURE_AUTHORITY_HOST`), if set.
    pub(crate) fn authority_override(&self) -> Option<&str> {
        self.authority_override.as_deref()
    }

    /// What configurations' references are read with.
    pub(crate) fn refs(&self) -> &ClusterRefs {
        &self.refs
    }

    async fn vault(&self, ctx: &RequestContext) -> Result<(Arc<Vault>, CacheKey), ProviderError> {
        let config = self.refs.resolve_spec::<AzureKeyVault>(ctx, &KIND).await?;
        let key = CacheKey::of(ctx, config.generation);
        let spec = config.spec;
        let what = config.what;
        let vault = self
            .clients
            .get_or_build(&key, async { self.build(ctx, &spec, key.operator).await.map_err(|e| with_config(e, &what)) })
            .await?;
        Ok((vault, key))
    }

    async fn build(
        &self,
        ctx: &RequestContext,
        spec: &AzureKeyVaultSpec,
        operator: bool,
    ) -> Result<Arc<Vault>, ProviderError> {
        let transport = self.transport(operator);
        let authority = auth::authority_host(spec, self.authority_override.as_deref());
        let options = auth::client_options(transport, &authority);
        let credential = auth::credential(&self.refs, ctx, spec, options.clone(), &authority).await?;
        let url = spec.vault_url.trim_end_matches('/').to_string();
        let bad = |e: azure_core::Error| ProviderError::BadConfig(format!("spec.vaultUrl: {e}"));
        let secrets = SecretClient::new(
            &url,
            credential.clone(),
            Some(SecretClientOptions { client_options: options.clone(), ..Default::default() }),
        )
        .map_err(bad)?;
        let keys = KeyClient::new(
            &url,
            credential.clone(),
            Some(KeyClientOptions { client_options: options.clone(), ..Default::default() }),
        )
        .map_err(bad)?;
        let certs = CertificateClient::new(
            &url,
            credential,
            Some(CertificateClientOptions { client_options: options, ..Default::default() }),
        )
        .map_err(bad)?;
        Ok(Arc::new(Vault { secrets, keys, certs, url }))
    }

    /// Runs `call` with the configuration's clients; a refused credential evicts them.
    async fn with_vault<T, F, Fut>(&self, ctx: &RequestContext, call: F) -> Result<T, ProviderError>
    where
        F: FnOnce(Arc<Vault>) -> Fut,
        Fut: std::future::Future<Output = Result<T, ProviderError>>,
    {
        let (vault, key) = self.vault(ctx).await?;
        call(vault).await.map_err(|e| self.clients.evict_if_refused(&key, e))
    }
}

/// A configuration error names the configuration.
fn with_config(e: ProviderError, what: &str) -> ProviderError {
    match e {
        ProviderError::BadConfig(m) => ProviderError::BadConfig(format!("{what}: {m}")),
        other => other,
    }
}

impl Vault {
    async fn secret(&self, name: &str, version: Option<&str>) -> Result<Secret, azure_core::Error> {
        let options =
            SecretClientGetSecretOptions { secret_version: version.map(str::to_string), ..Default::default() };
        self.secrets.get_secret(name, Some(options)).await?.into_model()
    }

    /// The current secret, or `None` when the vault has none of that name.
    async fn current_secret(&self, name: &str) -> Result<Option<Secret>, ProviderError> {
        match self.secret(name, None).await {
            Ok(s) => Ok(Some(s)),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(map_error(e, &format!("reading secret {name} of {}", self.url))),
        }
    }

    /// GetSecret of one object, as upstream answers it.
    async fn read(&self, r: &ExternalSecretDataRemoteRef) -> Result<Vec<u8>, ProviderError> {
        let (kind, name) = objects::object(&r.key)?;
        let version = objects::check_version(&r.version)?;
        let fetch = r.metadata_policy == "Fetch";
        let what = format!("{} {name} of {}", kind.prefix(), self.url);
        match kind {
            ObjectType::Secret => {
                let s = self.secret(name, version).await.map_err(|e| map_error(e, &format!("reading {what}")))?;
                if fetch {
                    return objects::metadata_value(&secret_metadata(&s), &r.property, &r.key);
                }
                let value = s.value.unwrap_or_default().into_bytes();
                if r.property.is_empty() { Ok(value) } else { json::value_property(&value, &r.key, &r.property) }
            }
            ObjectType::Key => {
                let options = KeyClientGetKeyOptions { key_version: version.map(str::to_string), ..Default::default() };
                let k = self
                    .keys
                    .get_key(name, Some(options))
                    .await
                    .and_then(|r| r.into_model())
                    .map_err(|e| map_error(e, &format!("reading {what}")))?;
                if fetch {
                    let times = attribute_times!(k.attributes.as_ref());
                    let meta = object_metadata(k.tags.as_ref(), times);
                    return objects::metadata_value(&meta, &r.property, &r.key);
                }
                let jwk = serde_json::to_value(k.key.unwrap_or_default())
                    .map_err(|e| ProviderError::Internal(e.to_string()))?;
                objects::key_value(&jwk, &r.property, &r.key)
            }
            ObjectType::Cert => {
                let options = CertificateClientGetCertificateOptions {
                    certificate_version: version.map(str::to_string),
                    ..Default::default()
                };
                let c = self
                    .certs
                    .get_certificate(name, Some(options))
                    .await
                    .and_then(|r| r.into_model())
                    .map_err(|e| map_error(e, &format!("reading {what}")))?;
                if fetch {
                    let times = attribute_times!(c.attributes.as_ref());
                    let meta = object_metadata(c.tags.as_ref(), times);
                    return objects::metadata_value(&meta, &r.property, &r.key);
                }
                Ok(c.cer.unwrap_or_default())
            }
        }
    }

    async fn push_secret(&self, name: &str, value: Vec<u8>, meta: &objects::PushMetadata) -> Result<(), ProviderError> {
        let current = self.current_secret(name).await?;
        let value = String::from_utf8(value).map_err(|_| {
            ProviderError::InvalidArgument(format!(
                "secret {name}: Key Vault secrets hold text, and the value is not UTF-8"
            ))
        })?;
        let expires = match meta.expiration_date.as_str() {
            "" => None,
            d => Some(azure_core::time::parse_rfc3339(d).map_err(|e| {
                ProviderError::InvalidArgument(format!(
                    "push metadata spec.expirationDate {d:?}: {e}; expected RFC 3339, e.g. 2024-12-31T20:00:00Z"
                ))
            })?),
        };
        let content_type = Some(meta.content_type.clone()).filter(|c| !c.is_empty());
        if let Some(s) = &current {
            if !objects::is_managed(s.tags.as_ref()) {
                return Err(ProviderError::PermissionDenied(format!(
                    "secret {name} of {} exists and is not managed by external-secrets (no managed-by tag): not \
                     overwritten",
                    self.url
                )));
            }
            let same_expiry = s.attributes.as_ref().and_then(|a| a.expires) == expires;
            let same_type = content_type.is_none() || s.content_type == content_type;
            if s.value.as_deref() == Some(value.as_str()) && same_expiry && same_type {
                return Ok(());
            }
        }
        let params = SetSecretParameters {
            value: Some(value),
            tags: Some(objects::push_tags(meta)),
            content_type: content_type.or_else(|| current.and_then(|s| s.content_type)),
            secret_attributes: Some(SecretAttributes { enabled: Some(true), expires, ..Default::default() }),
        };
        let body = params.try_into().map_err(|e| map_error(e, "encoding the secret"))?;
        self.secrets
            .set_secret(name, body, None)
            .await
            .map(|_| ())
            .map_err(|e| map_error(e, &format!("setting secret {name} of {}", self.url)))
    }

    async fn push_key(&self, name: &str, value: &[u8], meta: &objects::PushMetadata) -> Result<(), ProviderError> {
        let local = push::jwk(value)?;
        let existing = match self.keys.get_key(name, None).await.and_then(|r| r.into_model()) {
            Ok(k) => Some(k),
            Err(e) if is_not_found(&e) => None,
            Err(e) => return Err(map_error(e, &format!("reading key {name} of {}", self.url))),
        };
        if let Some(k) = &existing {
            if !objects::is_managed(k.tags.as_ref()) {
                return Err(ProviderError::PermissionDenied(format!(
                    "key {name} of {} exists and is not managed by external-secrets: not overwritten",
                    self.url
                )));
            }
            // As upstream: the same public key is not imported again.
            if let Some(jwk) = &k.key {
                let same = |p: &str, v: &Option<Vec<u8>>| local.part(p).is_some() && local.part(p) == v.as_deref();
                let public_same = match local.kty {
                    "RSA" => same("n", &jwk.n) && same("e", &jwk.e),
                    "EC" => same("x", &jwk.x) && same("y", &jwk.y),
                    _ => false,
                };
                if public_same {
                    return Ok(());
                }
            }
        }
        let mut key = JsonWebKey {
            kty: Some(match local.kty {
                "RSA" => KeyType::Rsa,
                "EC" => KeyType::Ec,
                _ => KeyType::Oct,
            }),
            crv: local.crv.map(|c| match c {
                "P-256" => CurveName::P256,
                "P-384" => CurveName::P384,
                _ => CurveName::P521,
            }),
            ..Default::default()
        };
        for (part, bytes) in local.parts {
            let slot = match part {
                "n" => &mut key.n,
                "e" => &mut key.e,
                "d" => &mut key.d,
                "p" => &mut key.p,
                "q" => &mut key.q,
                "dp" => &mut key.dp,
                "dq" => &mut key.dq,
                "qi" => &mut key.qi,
                "x" => &mut key.x,
                "y" => &mut key.y,
                _ => &mut key.k,
            };
            *slot = Some(bytes);
        }
        let params = ImportKeyParameters {
            key: Some(key),
            key_attributes: Some(KeyAttributes { enabled: Some(true), ..Default::default() }),
            tags: Some(objects::push_tags(meta)),
            ..Default::default()
        };
        let body = params.try_into().map_err(|e| map_error(e, "encoding the key"))?;
        self.keys
            .import_key(name, body, None)
            .await
            .map(|_| ())
            .map_err(|e| map_error(e, &format!("importing key {name} into {}", self.url)))
    }

    async fn push_cert(&self, name: &str, value: &[u8], meta: &objects::PushMetadata) -> Result<(), ProviderError> {
        let der = push::certificate_der(value)?;
        match self.certs.get_certificate(name, None).await.and_then(|r| r.into_model()) {
            Ok(c) => {
                if !objects::is_managed(c.tags.as_ref()) {
                    return Err(ProviderError::PermissionDenied(format!(
                        "certificate {name} of {} exists and is not managed by external-secrets: not overwritten",
                        self.url
                    )));
                }
                if c.cer.as_deref() == Some(der.as_slice()) {
                    return Ok(());
                }
            }
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(map_error(e, &format!("reading certificate {name} of {}", self.url))),
        }
        let params = ImportCertificateParameters {
            base64_encoded_certificate: Some(base64::engine::general_purpose::STANDARD.encode(value)),
            tags: Some(objects::push_tags(meta)),
            ..Default::default()
        };
        let body = params.try_into().map_err(|e| map_error(e, "encoding the certificate"))?;
        self.certs
            .import_certificate(name, body, None)
            .await
            .map(|_| ())
            .map_err(|e| map_error(e, &format!("importing certificate {name} into {}", self.url)))
    }

    /// Deletes an object upstream's marker says was pushed; a missing one is already gone.
    async fn delete(&self, kind: ObjectType, name: &str) -> Result<(), ProviderError> {
        let what = format!("{} {name} of {}", kind.prefix(), self.url);
        let tags = match kind {
            ObjectType::Secret => self.secret(name, None).await.map(|s| s.tags),
            ObjectType::Key => self.keys.get_key(name, None).await.and_then(|r| r.into_model()).map(|k| k.tags),
            ObjectType::Cert => {
                self.certs.get_certificate(name, None).await.and_then(|r| r.into_model()).map(|c| c.tags)
            }
        };
        let tags = match tags {
            Ok(t) => t,
            Err(e) if is_not_found(&e) => return Ok(()),
            Err(e) => return Err(map_error(e, &format!("reading {what}"))),
        };
        if !objects::is_managed(tags.as_ref()) {
            return Err(ProviderError::PermissionDenied(format!(
                "{what} is not managed by external-secrets (no managed-by tag): not deleted"
            )));
        }
        let deleted = match kind {
            ObjectType::Secret => self.secrets.delete_secret(name, None).await.map(|_| ()),
            ObjectType::Key => self.keys.delete_key(name, None).await.map(|_| ()),
            ObjectType::Cert => self.certs.delete_certificate(name, None).await.map(|_| ()),
        };
        match deleted {
            Err(e) if !is_not_found(&e) => Err(map_error(e, &format!("deleting {what}"))),
            _ => Ok(()),
        }
    }
}

/// Upstream's metadata of an object: its tags, and its times as `attribute.*` (RFC 3339).
fn object_metadata(
    tags: Option<&std::collections::HashMap<String, String>>,
    [created, updated, expires, not_before]: [Option<azure_core::time::OffsetDateTime>; 4],
) -> std::collections::BTreeMap<String, String> {
    objects::metadata(
        tags,
        &[
            ("created", rfc3339(created)),
            ("updated", rfc3339(updated)),
            ("expires", rfc3339(expires)),
            ("notBefore", rfc3339(not_before)),
        ],
    )
}

/// A secret's tags and attributes, as upstream's metadata.
fn secret_metadata(s: &Secret) -> std::collections::BTreeMap<String, String> {
    object_metadata(s.tags.as_ref(), attribute_times!(s.attributes.as_ref()))
}

#[tonic::async_trait]
impl Provider for AzureProvider {
    async fn get_secret(
        &self,
        ctx: &RequestContext,
        remote_ref: &ExternalSecretDataRemoteRef,
    ) -> Result<Vec<u8>, ProviderError> {
        objects::object(&remote_ref.key)?;
        self.with_vault(ctx, |v| async move { v.read(remote_ref).await }).await
    }

    async fn get_secret_map(
        &self,
        ctx: &RequestContext,
        remote_ref: &ExternalSecretDataRemoteRef,
    ) -> Result<SecretMap, ProviderError> {
        let (kind, name) = objects::object(&remote_ref.key)?;
        if kind != ObjectType::Secret {
            // As upstream: keys and certificates have no properties to extract.
            return Err(ProviderError::InvalidArgument(format!(
                "remote key {:?}: dataFrom cannot read a {} (as upstream); use data with {}/{name}",
                remote_ref.key,
                if kind == ObjectType::Key { "key" } else { "certificate" },
                kind.prefix()
            )));
        }
        self.with_vault(ctx, |v| async move {
            if remote_ref.metadata_policy == "Fetch" {
                let version = objects::check_version(&remote_ref.version)?;
                let s = v.secret(name, version).await.map_err(|e| map_error(e, &format!("reading secret {name}")))?;
                return Ok(objects::metadata_map(&secret_metadata(&s), name, &remote_ref.key, &remote_ref.property));
            }
            let value = v.read(remote_ref).await?;
            json::value_map(&value, &remote_ref.key, "")
        })
        .await
    }

    async fn get_all_secrets(
        &self,
        ctx: &RequestContext,
        find: &ExternalSecretFind,
    ) -> Result<SecretMap, ProviderError> {
        if !find.path.is_empty() {
            return Err(ProviderError::InvalidArgument(
                "find.path: Key Vault secrets have no paths; find them by find.name.regexp or find.tags".into(),
            ));
        }
        let name = find_regex(find)?;
        self.with_vault(ctx, |v| async move {
            let what = format!("listing the secrets of {}", v.url);
            let options = SecretClientListSecretPropertiesOptions { maxresults: Some(25), ..Default::default() };
            let mut pager = v.secrets.list_secret_properties(Some(options)).map_err(|e| map_error(e, &what))?;
            let mut matched = Vec::new();
            let mut listed = 0;
            while let Some(item) = pager.try_next().await.map_err(|e| map_error(e, &what))? {
                listed += 1;
                if listed > MAX_LISTED {
                    return Err(ProviderError::InvalidArgument(format!(
                        "{what}: more than {MAX_LISTED} secrets; narrow the find with find.tags"
                    )));
                }
                let enabled = item.attributes.as_ref().and_then(|a| a.enabled).unwrap_or(false);
                // Certificates' secrets are managed by Key Vault; upstream lists them too.
                if !enabled || !objects::has_tags(item.tags.as_ref(), &find.tags) {
                    continue;
                }
                let Ok(id) = item.resource_id() else { continue };
                if objects::check_name(&id.name, &id.name).is_err()
                    || name.as_ref().is_some_and(|r| !r.is_match(&id.name))
                {
                    continue;
                }
                matched.push(id.name);
            }
            let mut out =
                body::FindAnswer::new(format!("the secrets of {} that the find selects", v.url), "narrow the find");
            for name in matched {
                let s = v.secret(&name, None).await.map_err(|e| map_error(e, &format!("reading secret {name}")))?;
                if let Some(value) = s.value {
                    out.keep(name, value.into_bytes())?;
                }
            }
            Ok(out.into_secrets())
        })
        .await
    }

    async fn push_secret(
        &self,
        ctx: &RequestContext,
        secret_data: &SecretMap,
        data: &PushSecretData,
    ) -> Result<(), ProviderError> {
        let (kind, name) = objects::object(&data.remote_key)?;
        let meta = objects::push_metadata(&data.metadata)?;
        self.with_vault(ctx, |v| async move {
            match kind {
                ObjectType::Secret => {
                    let current = if data.property.is_empty() {
                        None
                    } else {
                        v.current_secret(name).await?.and_then(|s| s.value)
                    };
                    let value = json::push_value(current.as_deref().map(str::as_bytes), secret_data, data, name)?;
                    v.push_secret(name, value, &meta).await
                }
                ObjectType::Key | ObjectType::Cert => {
                    let value = secret_data.get(&data.secret_key).ok_or_else(|| {
                        ProviderError::InvalidArgument(format!(
                            "pushing to {}: name the source Secret's key holding the {}",
                            data.remote_key,
                            if kind == ObjectType::Key { "private key" } else { "certificate" }
                        ))
                    })?;
                    if kind == ObjectType::Key {
                        v.push_key(name, value, &meta).await
                    } else {
                        v.push_cert(name, value, &meta).await
                    }
                }
            }
        })
        .await
    }

    async fn delete_secret(&self, ctx: &RequestContext, remote_ref: &PushSecretRemoteRef) -> Result<(), ProviderError> {
        let (kind, name) = objects::object(&remote_ref.remote_key)?;
        self.with_vault(ctx, |v| async move {
            if kind == ObjectType::Secret && !remote_ref.property.is_empty() {
                let Some(s) = v.current_secret(name).await? else { return Ok(()) };
                let raw = s.value.clone().unwrap_or_default();
                return match json::without_property(raw.as_bytes(), name, &remote_ref.property)? {
                    None => v.delete(kind, name).await,
                    Some(rest) if rest == raw.as_bytes() => Ok(()),
                    Some(rest) => {
                        let meta = objects::PushMetadata {
                            content_type: s.content_type.clone().unwrap_or_default(),
                            tags: s
                                .tags
                                .clone()
                                .unwrap_or_default()
                                .into_iter()
                                .filter(|(k, _)| k != objects::MANAGED_BY)
                                .collect(),
                            ..Default::default()
                        };
                        v.push_secret(name, rest, &meta).await
                    }
                };
            }
            v.delete(kind, name).await
        })
        .await
    }

    async fn secret_exists(
        &self,
        ctx: &RequestContext,
        remote_ref: &PushSecretRemoteRef,
    ) -> Result<bool, ProviderError> {
        let (kind, name) = objects::object(&remote_ref.remote_key)?;
        self.with_vault(ctx, |v| async move {
            let found = match kind {
                ObjectType::Secret => {
                    return Ok(v.current_secret(name).await?.is_some_and(|s| {
                        remote_ref.property.is_empty()
                            || json::has_property(s.value.unwrap_or_default().as_bytes(), &remote_ref.property)
                    }));
                }
                ObjectType::Key => v.keys.get_key(name, None).await.map(|_| ()),
                ObjectType::Cert => v.certs.get_certificate(name, None).await.map(|_| ()),
            };
            match found {
                Ok(()) => Ok(true),
                Err(e) if is_not_found(&e) => Ok(false),
                Err(e) => Err(map_error(e, &format!("reading {}", remote_ref.remote_key))),
            }
        })
        .await
    }

    /// Answers are kept per configuration object (UID and generation): a store re-created under
    /// the same name is served with its own credentials at once.
    async fn object(&self, ctx: &RequestContext) -> keyward_provider_runtime::Generation {
        self.refs.generation_of::<AzureKeyVault>(ctx).await
    }

    async fn validate(&self, ctx: &RequestContext) -> Result<Vec<String>, ProviderError> {
        // The configuration, its credentials at Entra ID, and one page of the vault's secrets.
        self.with_vault(ctx, |v| async move {
            let what = format!("listing the secrets of {}", v.url);
            let options = SecretClientListSecretPropertiesOptions { maxresults: Some(1), ..Default::default() };
            let mut pages =
                v.secrets.list_secret_properties(Some(options)).map_err(|e| map_error(e, &what))?.into_pages();
            pages.try_next().await.map_err(|e| map_error(e, &what))?;
            Ok(Vec::new())
        })
        .await
    }

    fn capabilities(&self) -> SecretStoreCapabilities {
        SecretStoreCapabilities::ReadWrite
    }

    async fn generate(&self, ctx: &RequestContext, spec_json: &str) -> Result<SecretMap, ProviderError> {
        crate::generate::generate(self, ctx, spec_json).await
    }
}
