//! Clients for the target cluster, built from a `Kubernetes` config object and cached per
//! config object, generation and store kind.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use base64::Engine;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};
use keyward_crds::common::SecretKeySelector;
use keyward_crds::provider_config::{CaProviderType, KubernetesSpec};
use keyward_provider_runtime::{ProviderError, RequestContext, StoreRefKind};
use kube::api::PostParams;
use kube::config::{AuthInfo, KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use crate::mapping::map_kube_error;

/// How long a built client is reused before its credentials are read again (rotated token
/// Secrets, expiring ServiceAccount tokens).
pub const CLIENT_TTL: Duration = Duration::from_secs(300);
/// Lifetime requested for ServiceAccount tokens (well above [`CLIENT_TTL`]).
const TOKEN_SECONDS: i64 = 3600;

/// Which cached client serves a request.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct CacheKey {
    /// Namespace of the config object.
    pub namespace: String,
    /// Name of the config object.
    pub name: String,
    /// `metadata.generation` of the config object.
    pub generation: i64,
    /// Store kind: Secret references resolve differently for ClusterProviders.
    pub store_kind: StoreRefKind,
}

struct Cached<C> {
    client: C,
    built: Instant,
}

/// Cached target-cluster clients.
pub struct ClientCache<C = Client> {
    entries: Mutex<HashMap<CacheKey, Cached<C>>>,
}

impl<C> Default for ClientCache<C> {
    fn default() -> Self {
        ClientCache { entries: Mutex::new(HashMap::new()) }
    }
}

impl<C: Clone> ClientCache<C> {
    /// The cached client for `key`, if still fresh.
    pub fn get(&self, key: &CacheKey) -> Option<C> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.get(key).filter(|c| c.built.elapsed() < CLIENT_TTL).map(|c| c.client.clone())
    }

    /// Stores a client; older generations of the same config object are dropped.
    pub fn put(&self, key: CacheKey, client: C) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.retain(|k, c| {
            !(k.namespace == key.namespace && k.name == key.name && k.generation != key.generation)
                && c.built.elapsed() < CLIENT_TTL
        });
        entries.insert(key, Cached { client, built: Instant::now() });
    }

    /// Forgets a client (its credentials were refused).
    pub fn evict(&self, key: &CacheKey) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.remove(key);
    }

    /// Number of cached clients.
    pub fn len(&self) -> usize {
        self.entries.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One key of a Secret in the namespace [`RequestContext::ref_namespace`] resolves to.
async fn secret_key(
    own: &Client,
    ctx: &RequestContext,
    sel: &SecretKeySelector,
    field: &str,
) -> Result<String, ProviderError> {
    let ns = ctx.ref_namespace(sel.namespace.as_deref());
    let Some(key) = sel.key.as_deref().filter(|k| !k.is_empty()) else {
        return Err(ProviderError::BadConfig(format!("{field}.key is required")));
    };
    let api: Api<Secret> = Api::namespaced(own.clone(), ns);
    let secret = api.get_opt(&sel.name).await.map_err(|e| {
        match map_kube_error(e, &format!("{field}: Secret {ns}/{}", sel.name)) {
            ProviderError::NoSecret(m) => ProviderError::BadConfig(m),
            other => other,
        }
    })?;
    let secret =
        secret.ok_or_else(|| ProviderError::BadConfig(format!("{field}: Secret {ns}/{} not found", sel.name)))?;
    let value = secret
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .ok_or_else(|| ProviderError::BadConfig(format!("{field}: Secret {ns}/{} has no key {key:?}", sel.name)))?;
    String::from_utf8(value.0.clone())
        .map_err(|_| ProviderError::BadConfig(format!("{field}: Secret {ns}/{} key {key:?} is not UTF-8", sel.name)))
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

async fn ca_bundle(
    own: &Client,
    ctx: &RequestContext,
    spec: &KubernetesSpec,
) -> Result<Option<Vec<Vec<u8>>>, ProviderError> {
    if let Some(b64) = &spec.server.ca_bundle {
        let pem = base64::engine::general_purpose::STANDARD
            .decode(b64.trim())
            .map_err(|e| ProviderError::BadConfig(format!("spec.server.caBundle is not Base64: {e}")))?;
        return pem_to_der(&pem, "spec.server.caBundle").map(Some);
    }
    let Some(p) = &spec.server.ca_provider else {
        return Ok(None);
    };
    let ns = ctx.ref_namespace(p.namespace.as_deref());
    let field = "spec.server.caProvider";
    let pem = match p.type_ {
        CaProviderType::Secret => {
            let sel =
                SecretKeySelector { name: p.name.clone(), key: Some(p.key.clone()), namespace: p.namespace.clone() };
            secret_key(own, ctx, &sel, field).await?.into_bytes()
        }
        CaProviderType::ConfigMap => {
            let api: Api<ConfigMap> = Api::namespaced(own.clone(), ns);
            let cm = api
                .get_opt(&p.name)
                .await
                .map_err(|e| map_kube_error(e, &format!("{field}: ConfigMap {ns}/{}", p.name)))?
                .ok_or_else(|| ProviderError::BadConfig(format!("{field}: ConfigMap {ns}/{} not found", p.name)))?;
            cm.data
                .as_ref()
                .and_then(|d| d.get(&p.key))
                .ok_or_else(|| {
                    ProviderError::BadConfig(format!("{field}: ConfigMap {ns}/{} has no key {:?}", p.name, p.key))
                })?
                .clone()
                .into_bytes()
        }
    };
    pem_to_der(&pem, field).map(Some)
}

fn auth_info(value: serde_json::Value) -> Result<AuthInfo, ProviderError> {
    serde_json::from_value(value).map_err(|e| ProviderError::Internal(format!("building credentials: {e}")))
}

/// Builds a client for the cluster and credentials `spec` describes. `own` is the provider's
/// own client (for reading Secrets and requesting ServiceAccount tokens), `own_config` its
/// configuration (the default target cluster when `server.url` is unset).
pub async fn build_client(
    own: &Client,
    own_config: &Config,
    ctx: &RequestContext,
    spec: &KubernetesSpec,
) -> Result<Client, ProviderError> {
    if let Some(sel) = &spec.auth_ref {
        let yaml = secret_key(own, ctx, sel, "spec.authRef").await?;
        let kubeconfig = Kubeconfig::from_yaml(&yaml)
            .map_err(|e| ProviderError::BadConfig(format!("spec.authRef: not a kubeconfig: {e}")))?;
        let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .map_err(|e| ProviderError::BadConfig(format!("spec.authRef: unusable kubeconfig: {e}")))?;
        return Client::try_from(config).map_err(|e| ProviderError::BadConfig(format!("spec.authRef: {e}")));
    }

    let mut config = match &spec.server.url {
        Some(url) => {
            let uri = url
                .parse::<http::Uri>()
                .map_err(|e| ProviderError::BadConfig(format!("spec.server.url {url:?}: {e}")))?;
            Config::new(uri)
        }
        None => {
            // The provider's own cluster, without the provider's own credentials.
            let mut c = own_config.clone();
            c.auth_info = AuthInfo::default();
            c
        }
    };
    if let Some(ca) = ca_bundle(own, ctx, spec).await? {
        config.root_cert = Some(ca);
        config.root_cert_file = None;
    }

    let Some(auth) = &spec.auth else {
        return Err(ProviderError::BadConfig("set exactly one of spec.auth or spec.authRef".into()));
    };
    config.auth_info = if let Some(t) = &auth.token {
        let token = secret_key(own, ctx, &t.bearer_token, "spec.auth.token.bearerToken").await?;
        auth_info(serde_json::json!({ "token": token.trim() }))?
    } else if let Some(c) = &auth.cert {
        let cert = secret_key(own, ctx, &c.client_cert, "spec.auth.cert.clientCert").await?;
        let key = secret_key(own, ctx, &c.client_key, "spec.auth.cert.clientKey").await?;
        let b64 = base64::engine::general_purpose::STANDARD;
        auth_info(serde_json::json!({
            "client-certificate-data": b64.encode(cert),
            "client-key-data": b64.encode(key),
        }))?
    } else if let Some(sa) = &auth.service_account {
        let ns = ctx.ref_namespace(sa.namespace.as_deref());
        let api: Api<ServiceAccount> = Api::namespaced(own.clone(), ns);
        let request = TokenRequest {
            spec: Some(TokenRequestSpec {
                audiences: Some(sa.audiences.clone()).filter(|a| !a.is_empty()),
                expiration_seconds: Some(TOKEN_SECONDS),
                ..Default::default()
            }),
            ..Default::default()
        };
        let issued =
            api.create_token_request(&sa.name, &PostParams::default(), &request).await.map_err(
                |e| match map_kube_error(
                    e,
                    &format!("spec.auth.serviceAccount: token for ServiceAccount {ns}/{}", sa.name),
                ) {
                    ProviderError::NoSecret(m) => ProviderError::BadConfig(m),
                    other => other,
                },
            )?;
        let token = issued.status.and_then(|s| s.token).filter(|t| !t.is_empty()).ok_or_else(|| {
            ProviderError::Unavailable(format!("TokenRequest for ServiceAccount {ns}/{} returned no token", sa.name))
        })?;
        auth_info(serde_json::json!({ "token": token }))?
    } else {
        return Err(ProviderError::BadConfig("spec.auth: set exactly one of cert, token or serviceAccount".into()));
    };
    Client::try_from(config)
        .map_err(|e| ProviderError::BadConfig(format!("building a client for the target cluster: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str, generation: i64, store_kind: StoreRefKind) -> CacheKey {
        CacheKey { namespace: "team-a".into(), name: name.into(), generation, store_kind }
    }

    #[test]
    fn cache_is_keyed_by_config_generation_and_store_kind() {
        let cache = ClientCache::<&str>::default();
        cache.put(key("remote", 1, StoreRefKind::Provider), "gen1");
        assert_eq!(cache.get(&key("remote", 1, StoreRefKind::Provider)), Some("gen1"));
        assert_eq!(cache.get(&key("remote", 1, StoreRefKind::ClusterProvider)), None, "store kind matters");
        assert_eq!(cache.get(&key("other", 1, StoreRefKind::Provider)), None);
        // A new generation replaces the old one.
        cache.put(key("remote", 2, StoreRefKind::Provider), "gen2");
        assert_eq!(cache.get(&key("remote", 1, StoreRefKind::Provider)), None);
        assert_eq!(cache.get(&key("remote", 2, StoreRefKind::Provider)), Some("gen2"));
        assert_eq!(cache.len(), 1);
        cache.evict(&key("remote", 2, StoreRefKind::Provider));
        assert!(cache.is_empty());
    }

    #[test]
    fn pem_bundles() {
        assert!(pem_to_der(b"", "f").is_err());
        assert!(pem_to_der(b"garbage", "f").is_err());
    }
}
