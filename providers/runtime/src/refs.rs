//! What provider configurations name in the cluster the provider runs in (feature `refs`):
//! the configuration object itself, Secret and ConfigMap keys, ServiceAccount tokens and CA
//! bundles. Shared by the store providers so every one reads them, and reports what is
//! missing, the same way.
//!
//! Callers resolve the namespace of each named object first with [`named_namespace`], which
//! applies the tenant boundary: a configuration may only name objects outside its own namespace
//! when it is owned by the cluster operator.

use std::sync::Arc;

use base64::Engine;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};
use keyward_crds::provider_config::{CaProvider, CaProviderType};
use keyward_crds::registry::{ProviderKind, ProviderSpec};
use keyward_crds::rules::{
    ConfigOwner, NamedObject, Plugins, Reach, StoreBackend, ambient_refusal, check_boundary_with,
};
use keyward_crds::{ClusterSecretStore, SecretKeySelector, SecretStore, SecretStoreSpec};
use keyward_proto::ProviderError;
use kube::api::PostParams;
use kube::{Api, Client};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use serde::de::DeserializeOwned;

pub use crate::client_cache::{CacheKey, ClientCache, note_expiry};
use crate::client_cache::{Input, InputKind, note_object};
use crate::config_watch::ConfigWatches;
pub use crate::context::Generation;
use crate::context::{RequestContext, StoreRefKind};

pub use keyward_crds::rules::NamedKind;

/// Whether the configuration a request reaches is owned by the cluster operator
/// ([`RequestContext::owner`]: reached through a ClusterProvider with `authenticationScope:
/// ProviderNamespace` naming its namespace, as the reconciler says on the wire). Everything else
/// — a Provider, a ManifestNamespace ClusterProvider, a request that does not say — is the
/// tenant's.
pub fn operator_owned(ctx: &RequestContext) -> bool {
    ctx.owner() == ConfigOwner::Operator
}

/// The namespace an object named by the configuration is read from, by the tenant boundary
/// ([`RequestContext::named_namespace`]): the configuration's own namespace unless the reference
/// names another one, which only an operator-owned configuration may do; a tenant-owned one
/// naming another namespace is refused with `PERMISSION_DENIED`.
pub fn named_namespace<'a>(
    ctx: &'a RequestContext,
    field: &'a str,
    kind: NamedKind,
    name: &'a str,
    namespace: Option<&'a str>,
) -> Result<&'a str, ProviderError> {
    ctx.named_namespace(&NamedObject { field, kind, name, namespace })
}

/// Whether the configuration may use the provider process's own identity (ambient
/// credentials: its ServiceAccount token file, its cloud credentials chain). Only the cluster
/// operator's configurations may, and those of the namespaces the operator lists
/// (`--provider-identity-namespaces`); any other tenant's must name credentials of its namespace.
pub fn require_operator_owned(ctx: &RequestContext, what: &str) -> Result<(), ProviderError> {
    ambient_refusal(ctx.owner(), ctx.config_namespace(), what, &ctx.provider_identity).map_err(|m| {
        ProviderError::PermissionDenied(format!("{} {}/{}: {m}", ctx.kind, ctx.config_namespace(), ctx.name))
    })
}

/// The tenant boundary for a whole configuration at once, before anything it names is read, so
/// the refusal lists every offending field (`keyward_crds::rules::check_boundary`).
pub fn check_reach(ctx: &RequestContext, reach: &Reach<'_>) -> Result<(), ProviderError> {
    let ns = ctx.config_namespace();
    check_boundary_with(ctx.owner(), ns, reach, &ctx.provider_identity)
        .map_err(|e| ProviderError::PermissionDenied(format!("{} {ns}/{}: {e}", ctx.kind, ctx.name)))
}

/// Maps an API error reading something the configuration names: missing means the
/// configuration is unusable (`FAILED_PRECONDITION`), not that a secret is missing.
pub fn map_ref_error(e: kube::Error, what: &str) -> ProviderError {
    match e {
        kube::Error::Api(s) => {
            let msg = format!("{what}: {} ({})", s.message, s.code);
            match s.code {
                404 => ProviderError::BadConfig(msg),
                401 => ProviderError::Unauthenticated(msg),
                403 => ProviderError::PermissionDenied(msg),
                400 | 422 => ProviderError::BadConfig(msg),
                _ => ProviderError::Unavailable(msg),
            }
        }
        other => ProviderError::Unavailable(format!("{what}: {other}")),
    }
}

/// DER certificates of a PEM bundle.
pub fn pem_to_der(pem: &[u8], field: &str) -> Result<Vec<Vec<u8>>, ProviderError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .map(|c| c.map(|c| c.to_vec()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ProviderError::BadConfig(format!("{field}: not a PEM certificate bundle: {e}")))?;
    if certs.is_empty() {
        return Err(ProviderError::BadConfig(format!("{field}: no certificate found")));
    }
    Ok(certs)
}

/// A provider's configuration as a request reached it ([`ClusterRefs::resolve_config`]).
#[derive(Debug, Clone)]
pub struct ResolvedConfig<S> {
    /// The provider configuration.
    pub spec: S,
    /// `metadata.generation` and `metadata.uid` of the object it came from (configuration
    /// object or store): what a cached client or answer of it is keyed by.
    pub generation: Generation,
    /// That object, for messages: `Vault team-a/v`, `SecretStore team-a/vault`,
    /// `ClusterSecretStore vault`.
    pub what: String,
}

/// A namespaced configuration object kind a provider reads (`Vault`, `Kubernetes`, …).
pub trait ConfigKind:
    kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
    + Clone
    + DeserializeOwned
    + std::fmt::Debug
    + Send
    + Sync
    + 'static
{
}

impl<K> ConfigKind for K where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static
{
}

/// Reads what configurations name, with the provider's own client; configuration objects and
/// stores from watches where a call allows ([`ConfigWatches`]).
#[derive(Clone)]
pub struct ClusterRefs {
    client: Client,
    watches: Arc<ConfigWatches>,
}

impl ClusterRefs {
    /// Reads with `client` (the provider's own identity).
    pub fn new(client: Client) -> Self {
        ClusterRefs { client, watches: Arc::default() }
    }

    /// The provider's own client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The watches of configuration objects and of the versions of Secrets and ConfigMaps.
    pub(crate) fn watches(&self) -> &ConfigWatches {
        &self.watches
    }

    /// Notes `object` as read by the client build under way, if any ([`ClientCache`]).
    fn note<K: kube::Resource>(&self, kind: InputKind, ns: &str, name: &str, object: &K) {
        let version = object.meta().resource_version.clone();
        note_object(self, Input { kind, namespace: ns.to_string(), name: name.to_string(), version });
    }

    /// The configuration object a request names, from [`RequestContext::config_namespace`].
    pub async fn config<K>(&self, ctx: &RequestContext) -> Result<K, ProviderError>
    where
        K: ConfigKind,
    {
        let ns = ctx.config_namespace();
        if let Some(config) = self.watches.lookup::<K>(&self.client, ctx, Some(ns), &ctx.name).await {
            return Ok(config);
        }
        let kind = K::kind(&());
        let api: Api<K> = Api::namespaced(self.client.clone(), ns);
        api.get_opt(&ctx.name)
            .await
            .map_err(|e| map_ref_error(e, &format!("reading {kind} {ns}/{}", ctx.name)))?
            .ok_or_else(|| {
                ProviderError::BadConfig(format!(
                    "{kind} {ns}/{} not found (looked up in providerRef.namespace, else the source namespace)",
                    ctx.name
                ))
            })
    }

    /// The provider configuration a request reaches, written once for every provider: the
    /// configuration object of kind `K` (its spec taken by `spec_of`), or the `spec.provider`
    /// block of the SecretStore or ClusterSecretStore the request names, translated by
    /// `keyward_crds::rules::store_backend` and taken by `from_store` (which hands back a
    /// backend this provider does not serve). Either way it is checked with `check`, the
    /// configuration kind's rules; what breaks them is `FAILED_PRECONDITION` naming the object.
    pub async fn resolve_config<K, S, E>(
        &self,
        ctx: &RequestContext,
        spec_of: impl FnOnce(K) -> S,
        from_store: impl FnOnce(StoreBackend) -> Result<S, StoreBackend>,
        check: impl FnOnce(&S) -> Result<(), E>,
    ) -> Result<ResolvedConfig<S>, ProviderError>
    where
        K: ConfigKind,
        E: std::fmt::Display,
    {
        // The store block this process serves: its configuration kind's (a built-in kind's
        // store key is its provider's name).
        let row = keyward_crds::registry::BUILTIN_KINDS.iter().find(|r| r.kind == K::kind(&()));
        if let Some(row) = row {
            self.watches.serve_store_keys([row.provider]);
        }
        let ns = ctx.config_namespace();
        let (spec, generation, what) = match store_backend(self, ctx, &[]).await? {
            Some((backend, generation)) => {
                let what = match ctx.store_ref_kind {
                    StoreRefKind::ClusterSecretStore => format!("{} {}", ctx.kind, ctx.name),
                    _ => format!("{} {ns}/{}", ctx.kind, ctx.name),
                };
                let spec = from_store(backend).map_err(|other| {
                    ProviderError::BadConfig(format!(
                        "{what}: spec.provider.{} is served by another provider process",
                        other.provider_name()
                    ))
                })?;
                (spec, generation, what)
            }
            None => {
                let config: K = self.config(ctx).await?;
                let generation = Generation::of(config.meta());
                (spec_of(config), generation, format!("{} {ns}/{}", K::kind(&()), ctx.name))
            }
        };
        check(&spec).map_err(|e| ProviderError::BadConfig(format!("{what}: {e}")))?;
        Ok(ResolvedConfig { spec, generation, what })
    }

    /// The configuration a request reaches, for a provider crate's kind `K` (row `kind`): the
    /// `K` object the request names, or the `spec.provider.<store_key>` block of the SecretStore
    /// or ClusterSecretStore it names, read as `K`'s spec. Either way its own rules
    /// ([`ProviderSpec::validate`]) and the tenant boundary of what it reaches
    /// ([`ProviderSpec::reach`], [`check_reach`]) are checked before anything it names is read.
    pub async fn resolve_spec<K>(
        &self,
        ctx: &RequestContext,
        kind: &'static ProviderKind,
    ) -> Result<ResolvedConfig<K::Spec>, ProviderError>
    where
        K: ConfigKind + kube::core::object::HasSpec,
        K::Spec: ProviderSpec + Clone,
    {
        self.resolve_block::<K, K::Spec>(
            ctx,
            kind,
            |config| config.spec().clone(),
            |_, block| serde_json::from_value(block),
        )
        .await
    }

    /// [`Self::resolve_spec`] for a kind whose store blocks do not all read as its spec: the
    /// configuration `S` is `spec_of` the `K` object the request names, or `from_block` of the
    /// store block it names, told which block it is (its key) and handed it as the row
    /// translated it (a Kubernetes `crd` block is a read of other kinds, not a `Kubernetes`
    /// spec). Its rules and reach are checked as [`Self::resolve_spec`] checks them.
    pub async fn resolve_block<K, S>(
        &self,
        ctx: &RequestContext,
        kind: &'static ProviderKind,
        spec_of: impl FnOnce(K) -> S,
        from_block: impl FnOnce(&'static str, serde_json::Value) -> Result<S, serde_json::Error>,
    ) -> Result<ResolvedConfig<S>, ProviderError>
    where
        K: ConfigKind,
        S: ProviderSpec,
    {
        self.watches.serve_store_keys(kind.stores.iter().map(|block| block.key));
        let ns = ctx.config_namespace();
        let resolved = match store_backend(self, ctx, &[kind]).await? {
            Some((StoreBackend::Plugin { kind: row, key, spec: block }, generation)) if row == kind => {
                let what = match ctx.store_ref_kind {
                    StoreRefKind::ClusterSecretStore => format!("{} {}", ctx.kind, ctx.name),
                    _ => format!("{} {ns}/{}", ctx.kind, ctx.name),
                };
                let spec = from_block(key, block)
                    .map_err(|e| ProviderError::BadConfig(format!("{what}: spec.provider.{key}: {e}")))?;
                ResolvedConfig { spec, generation, what }
            }
            Some((other, _)) => {
                return Err(ProviderError::BadConfig(format!(
                    "{} {ns}/{}: spec.provider.{} is served by another provider process",
                    ctx.kind,
                    ctx.name,
                    other.store_key()
                )));
            }
            None => {
                let config: K = self.config(ctx).await?;
                let generation = Generation::of(config.meta());
                ResolvedConfig { spec: spec_of(config), generation, what: format!("{} {ns}/{}", kind.kind, ctx.name) }
            }
        };
        resolved.spec.validate().map_err(|e| ProviderError::BadConfig(format!("{}: {e}", resolved.what)))?;
        check_reach(ctx, &resolved.spec.reach())?;
        Ok(resolved)
    }

    /// The UID and generation of the configuration object a request names (a store, or a
    /// configuration object of kind `K`), which the answers kept for it are keyed by
    /// ([`crate::Provider::object`]); the default when it cannot be read (the call that follows
    /// reports why).
    pub async fn generation_of<K>(&self, ctx: &RequestContext) -> Generation
    where
        K: ConfigKind,
    {
        match store_spec(self, ctx).await {
            Ok(Some((_, generation, _))) => generation,
            Ok(None) => self.config::<K>(ctx).await.map(|c| Generation::of(c.meta())).unwrap_or_default(),
            Err(_) => Generation::default(),
        }
    }

    /// The key a configuration's Secret reference selects (`default_key` when it names none;
    /// an empty `default_key` makes the reference name its key), read in the namespace the
    /// tenant boundary allows ([`named_namespace`]).
    pub async fn selected_secret_key(
        &self,
        ctx: &RequestContext,
        field: &str,
        sel: &SecretKeySelector,
        default_key: &str,
    ) -> Result<Vec<u8>, ProviderError> {
        let ns = named_namespace(ctx, field, NamedKind::Secret, &sel.name, sel.namespace.as_deref())?;
        let key = sel.key.as_deref().filter(|k| !k.is_empty()).unwrap_or(default_key);
        self.secret_key(ns, &sel.name, key, field).await
    }

    /// Like [`Self::selected_secret_key`], as trimmed text (tokens, IDs); the reference must
    /// name its key.
    pub async fn selected_secret_text(
        &self,
        ctx: &RequestContext,
        field: &str,
        sel: &SecretKeySelector,
    ) -> Result<String, ProviderError> {
        let ns = named_namespace(ctx, field, NamedKind::Secret, &sel.name, sel.namespace.as_deref())?;
        self.secret_text(ns, &sel.name, sel.key.as_deref().unwrap_or_default(), field).await
    }

    /// A whole Secret a configuration's reference names (every key, its labels), read in the
    /// namespace the tenant boundary allows ([`named_namespace`]); the reference's key is not used.
    pub async fn selected_secret(
        &self,
        ctx: &RequestContext,
        field: &str,
        sel: &SecretKeySelector,
    ) -> Result<Secret, ProviderError> {
        let ns = named_namespace(ctx, field, NamedKind::Secret, &sel.name, sel.namespace.as_deref())?;
        self.secret(ns, &sel.name, field).await
    }

    /// A Secret by namespace and name; missing is `FAILED_PRECONDITION` naming `field`.
    pub async fn secret(&self, ns: &str, name: &str, field: &str) -> Result<Secret, ProviderError> {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), ns);
        let secret = api
            .get_opt(name)
            .await
            .map_err(|e| map_ref_error(e, &format!("{field}: Secret {ns}/{name}")))?
            .ok_or_else(|| ProviderError::BadConfig(format!("{field}: Secret {ns}/{name} not found")))?;
        self.note(InputKind::Secret, ns, name, &secret);
        Ok(secret)
    }

    /// One key of a Secret.
    pub async fn secret_key(&self, ns: &str, name: &str, key: &str, field: &str) -> Result<Vec<u8>, ProviderError> {
        if name.is_empty() || key.is_empty() {
            return Err(ProviderError::BadConfig(format!("{field}: name and key are required")));
        }
        self.secret(ns, name, field)
            .await?
            .data
            .and_then(|mut d| d.remove(key))
            .map(|v| v.0)
            .ok_or_else(|| ProviderError::BadConfig(format!("{field}: Secret {ns}/{name} has no key {key:?}")))
    }

    /// One key of a Secret as trimmed text (tokens, IDs).
    pub async fn secret_text(&self, ns: &str, name: &str, key: &str, field: &str) -> Result<String, ProviderError> {
        let bytes = self.secret_key(ns, name, key, field).await?;
        String::from_utf8(bytes)
            .map(|s| s.trim().to_string())
            .map_err(|_| ProviderError::BadConfig(format!("{field}: Secret {ns}/{name} key {key:?} is not UTF-8")))
    }

    /// One key of a ConfigMap.
    pub async fn config_map_key(&self, ns: &str, name: &str, key: &str, field: &str) -> Result<String, ProviderError> {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), ns);
        let cm = api
            .get_opt(name)
            .await
            .map_err(|e| map_ref_error(e, &format!("{field}: ConfigMap {ns}/{name}")))?
            .ok_or_else(|| ProviderError::BadConfig(format!("{field}: ConfigMap {ns}/{name} not found")))?;
        self.note(InputKind::ConfigMap, ns, name, &cm);
        cm.data
            .and_then(|mut d| d.remove(key))
            .ok_or_else(|| ProviderError::BadConfig(format!("{field}: ConfigMap {ns}/{name} has no key {key:?}")))
    }

    /// A token of a ServiceAccount from the TokenRequest API.
    pub async fn service_account_token(
        &self,
        ns: &str,
        name: &str,
        audiences: &[String],
        expiration_seconds: i64,
        field: &str,
    ) -> Result<String, ProviderError> {
        let api: Api<ServiceAccount> = Api::namespaced(self.client.clone(), ns);
        let request = TokenRequest {
            spec: Some(TokenRequestSpec {
                audiences: Some(audiences.to_vec()).filter(|a| !a.is_empty()),
                expiration_seconds: Some(expiration_seconds),
                ..Default::default()
            }),
            ..Default::default()
        };
        let issued = api
            .create_token_request(name, &PostParams::default(), &request)
            .await
            .map_err(|e| map_ref_error(e, &format!("{field}: token for ServiceAccount {ns}/{name}")))?;
        let status = issued.status.unwrap_or_default();
        let token = status.token.filter(|t| !t.is_empty()).ok_or_else(|| {
            ProviderError::Unavailable(format!("TokenRequest for ServiceAccount {ns}/{name} returned no token"))
        })?;
        // A client built from the token is built again before it expires.
        let asked = std::time::SystemTime::now() + std::time::Duration::from_secs(expiration_seconds.max(0) as u64);
        note_expiry(status.expiration_timestamp.map_or(asked, |t| t.0.into()));
        Ok(token)
    }

    /// An annotation of a ServiceAccount.
    pub async fn service_account_annotation(
        &self,
        ns: &str,
        name: &str,
        annotation: &str,
        field: &str,
    ) -> Result<Option<String>, ProviderError> {
        let api: Api<ServiceAccount> = Api::namespaced(self.client.clone(), ns);
        let sa = api
            .get_opt(name)
            .await
            .map_err(|e| map_ref_error(e, &format!("{field}: ServiceAccount {ns}/{name}")))?
            .ok_or_else(|| ProviderError::BadConfig(format!("{field}: ServiceAccount {ns}/{name} not found")))?;
        self.note(InputKind::ServiceAccount, ns, name, &sa);
        Ok(sa.metadata.annotations.and_then(|mut a| a.remove(annotation)))
    }

    /// A CA bundle given inline (Base64 PEM) or through `caProvider`, as DER certificates.
    /// `field` is the path of the object holding `caBundle` / `caProvider`.
    pub async fn ca_bundle(
        &self,
        ctx: &RequestContext,
        field: &str,
        bundle: Option<&str>,
        provider: Option<&CaProvider>,
    ) -> Result<Option<Vec<Vec<u8>>>, ProviderError> {
        if let Some(b64) = bundle {
            let pem = base64::engine::general_purpose::STANDARD
                .decode(b64.trim())
                .map_err(|e| ProviderError::BadConfig(format!("{field}.caBundle is not Base64: {e}")))?;
            return pem_to_der(&pem, &format!("{field}.caBundle")).map(Some);
        }
        let Some(p) = provider else {
            return Ok(None);
        };
        let f = format!("{field}.caProvider");
        let pem = match p.type_ {
            CaProviderType::Secret => {
                let ns = named_namespace(ctx, &f, NamedKind::Secret, &p.name, p.namespace.as_deref())?;
                self.secret_key(ns, &p.name, p.key_or_default(), &f).await?
            }
            CaProviderType::ConfigMap => {
                let ns = named_namespace(ctx, &f, NamedKind::ConfigMap, &p.name, p.namespace.as_deref())?;
                self.config_map_key(ns, &p.name, p.key_or_default(), &f).await?.into_bytes()
            }
        };
        pem_to_der(&pem, &f).map(Some)
    }
}

/// The configuration of the SecretStore or ClusterSecretStore a request names, translated into
/// the provider configuration Keyward serves it with (`keyward_crds::rules::store_backend`), with
/// the store's generation; `None` when the request names a configuration object instead. A
/// store whose provider this process does not serve, or that names none, is `FAILED_PRECONDITION`.
/// `plugins` are the provider crate kinds the caller serves (its own row), beside the kinds
/// `keyward_crds` translates itself.
async fn store_backend(
    refs: &ClusterRefs,
    ctx: &RequestContext,
    plugins: Plugins<'_>,
) -> Result<Option<(StoreBackend, Generation)>, ProviderError> {
    let Some((spec, generation, what)) = store_spec(refs, ctx).await? else { return Ok(None) };
    let backend = keyward_crds::rules::store_backend(&spec.provider, plugins)
        .map_err(|e| ProviderError::BadConfig(format!("{what}: {e}")))?;
    // Admission refuses these too; a store written while the webhook was away is refused here,
    // before anything it names is read in the tenant's namespace.
    if ctx.store_ref_kind == StoreRefKind::ClusterSecretStore {
        keyward_crds::rules::cluster_secret_store_references(&backend)
            .map_err(|e| ProviderError::BadConfig(format!("{what}: {e}")))?;
    }
    Ok(Some((backend, generation)))
}

/// The spec, generation and name (for messages) of the SecretStore or ClusterSecretStore a
/// request names; `None` when it names a configuration object.
async fn store_spec(
    refs: &ClusterRefs,
    ctx: &RequestContext,
) -> Result<Option<(SecretStoreSpec, Generation, String)>, ProviderError> {
    let (client, watches) = (&refs.client, &refs.watches);
    Ok(Some(match ctx.store_ref_kind {
        StoreRefKind::SecretStore => {
            let ns = ctx.config_namespace();
            let what = format!("SecretStore {ns}/{}", ctx.name);
            let found = match watches.lookup_store::<SecretStore>(client, ctx, Some(ns), &ctx.name).await {
                Some(store) => Some(store),
                None => Api::<SecretStore>::namespaced(client.clone(), ns)
                    .get_opt(&ctx.name)
                    .await
                    .map_err(|e| map_ref_error(e, &format!("reading {what}")))?,
            };
            let store = found.ok_or_else(|| ProviderError::BadConfig(format!("{what} not found")))?;
            (store.spec, Generation::of(&store.metadata), what)
        }
        StoreRefKind::ClusterSecretStore => {
            let what = format!("ClusterSecretStore {}", ctx.name);
            let found = match watches.lookup_store::<ClusterSecretStore>(client, ctx, None, &ctx.name).await {
                Some(store) => Some(store),
                None => Api::<ClusterSecretStore>::all(client.clone())
                    .get_opt(&ctx.name)
                    .await
                    .map_err(|e| map_ref_error(e, &format!("reading {what}")))?,
            };
            let store = found.ok_or_else(|| ProviderError::BadConfig(format!("{what} not found")))?;
            (store.spec.store, Generation::of(&store.metadata), what)
        }
        StoreRefKind::Provider | StoreRefKind::ClusterProvider => return Ok(None),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(ns: &str, kind: &str) -> RequestContext {
        scoped(ns, kind, "")
    }

    fn scoped(ns: &str, kind: &str, scope: &str) -> RequestContext {
        crate::context::vault_request("GetSecret", ns, kind, scope)
    }

    fn operator() -> RequestContext {
        scoped("keyward", "ClusterProvider", "ProviderNamespace")
    }

    /// Every path that reaches a tenant-owned configuration.
    fn tenants() -> [RequestContext; 5] {
        [
            ctx("", "Provider"),
            ctx("team-a", "Provider"),
            // What the reconciler sends for a ManifestNamespace ClusterProvider.
            scoped("team-a", "ClusterProvider", "ManifestNamespace"),
            // A ClusterProvider request that does not say its scope gets the narrow rule.
            ctx("keyward", "ClusterProvider"),
            // A Provider claiming a scope is still a Provider.
            scoped("team-a", "Provider", "ProviderNamespace"),
        ]
    }

    #[test]
    fn tenant_configs_name_objects_of_their_namespace_only() {
        for tenant in tenants() {
            assert!(!operator_owned(&tenant));
            let own = tenant.config_namespace().to_string();
            assert_eq!(named_namespace(&tenant, "f", NamedKind::Secret, "s", None).expect("own"), own);
            assert_eq!(named_namespace(&tenant, "f", NamedKind::Secret, "s", Some(&own)).expect("own"), own);
            let e = named_namespace(&tenant, "spec.auth.tokenSecretRef", NamedKind::Secret, "s", Some("team-b"))
                .expect_err("another namespace");
            assert_eq!(e.code(), tonic::Code::PermissionDenied);
            let m = e.to_string();
            let want = format!("Vault {own}/v: spec.auth.tokenSecretRef.namespace: \"team-b\" names Secret \"s\"");
            assert!(m.contains(&want), "{m}");
        }
        let operator = operator();
        assert!(operator_owned(&operator));
        assert_eq!(named_namespace(&operator, "f", NamedKind::Secret, "s", Some("creds")).expect("operator"), "creds");
        assert_eq!(named_namespace(&operator, "f", NamedKind::Secret, "s", None).expect("own"), "keyward");
    }

    #[test]
    fn ambient_credentials_are_for_the_operator_only() {
        assert!(require_operator_owned(&operator(), "x").is_ok());
        for c in tenants() {
            let e = require_operator_owned(&c, "the default credentials chain").expect_err("tenant");
            assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e}");
            assert!(e.to_string().contains("the default credentials chain uses the provider's own credentials"), "{e}");
        }
        // The operator's switch: a listed namespace's own configurations may; others still not.
        let listed = std::sync::Arc::new(keyward_crds::rules::ProviderIdentityNamespaces::parse("team-a").unwrap());
        let with = |c: RequestContext| RequestContext { provider_identity: listed.clone(), ..c };
        assert!(require_operator_owned(&with(ctx("team-a", "Provider")), "x").is_ok());
        assert!(require_operator_owned(&with(ctx("", "Provider")), "x").is_ok(), "team-a is the source namespace");
        assert!(
            require_operator_owned(&with(ctx("keyward", "ClusterProvider")), "x").is_err(),
            "keyward is not listed"
        );
    }

    #[test]
    fn a_whole_configuration_is_judged_at_once() {
        let reach = Reach {
            named: vec![
                NamedObject { field: "spec.a", kind: NamedKind::Secret, name: "s", namespace: Some("x") },
                NamedObject { field: "spec.b", kind: NamedKind::ServiceAccount, name: "sa", namespace: Some("y") },
            ],
            ..Reach::default()
        };
        let e = check_reach(&ctx("", "Provider"), &reach).expect_err("tenant");
        assert_eq!(e.code(), tonic::Code::PermissionDenied);
        assert!(e.to_string().contains("spec.a.namespace") && e.to_string().contains("spec.b.namespace"), "{e}");
        assert!(check_reach(&operator(), &reach).is_ok());
    }

    #[test]
    fn pem_bundles() {
        assert!(pem_to_der(b"", "f").is_err());
        assert!(pem_to_der(b"garbage", "f").is_err());
    }
}
