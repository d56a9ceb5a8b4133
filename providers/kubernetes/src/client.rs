//! Clients for the target cluster, built from a `Kubernetes` config object (and cached by the
//! provider per config object, generation and owner, in the runtime's shared client cache).
//!
//! Every object the config names (credential Secrets, the CA bundle, the ServiceAccount, the
//! kubeconfig) is read in the namespace the tenant boundary allows
//! ([`RequestContext::named_namespace`]), and a kubeconfig is read as data only
//! ([`crate::kubeconfig`]).

use base64::Engine;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};
use keyward_crds::common::SecretKeySelector;
use keyward_crds::provider_config::{CaProviderType, KubernetesSpec};
use keyward_crds::rules::{NamedKind, NamedObject};
use keyward_provider_runtime::body::LimitLayer;
use keyward_provider_runtime::{ProviderError, RequestContext};
use kube::api::PostParams;
use kube::client::ClientBuilder;
use kube::config::AuthInfo;
use kube::{Api, Client, Config};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use crate::kubeconfig::parse_inline;
use crate::mapping::map_kube_error;

/// Lifetime requested for ServiceAccount tokens (well above the client cache's
/// [`keyward_provider_runtime::refs::CLIENT_TTL`]).
const TOKEN_SECONDS: i64 = 3600;

/// One key of a Secret the config names, read in the namespace the boundary allows.
async fn secret_key(
    own: &Client,
    ctx: &RequestContext,
    sel: &SecretKeySelector,
    field: &'static str,
) -> Result<String, ProviderError> {
    let named = NamedObject { field, kind: NamedKind::Secret, name: &sel.name, namespace: sel.namespace.as_deref() };
    let ns = ctx.named_namespace(&named)?;
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
    let field = "spec.server.caProvider";
    let kind = match p.type_ {
        CaProviderType::Secret => NamedKind::Secret,
        CaProviderType::ConfigMap => NamedKind::ConfigMap,
    };
    let ns = ctx.named_namespace(&NamedObject { field, kind, name: &p.name, namespace: p.namespace.as_deref() })?;
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
        let inline = parse_inline(&yaml).map_err(|e| ProviderError::BadConfig(format!("spec.authRef: {e}")))?;
        let uri = inline
            .server
            .parse::<http::Uri>()
            .map_err(|e| ProviderError::BadConfig(format!("spec.authRef: server {:?}: {e}", inline.server)))?;
        let mut config = Config::new(uri);
        if let Some(pem) = &inline.ca_pem {
            config.root_cert = Some(pem_to_der(pem, "spec.authRef: certificate-authority-data")?);
        }
        config.accept_invalid_certs = inline.insecure_skip_tls_verify;
        config.tls_server_name = inline.tls_server_name.clone();
        config.auth_info = auth_info(inline.user)?;
        return target_client(config).map_err(|e| ProviderError::BadConfig(format!("spec.authRef: {e}")));
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
        let field = "spec.auth.serviceAccount";
        let named =
            NamedObject { field, kind: NamedKind::ServiceAccount, name: &sa.name, namespace: sa.namespace.as_deref() };
        let ns = ctx.named_namespace(&named)?;
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
    target_client(config)
        .map_err(|e| ProviderError::BadConfig(format!("building a client for the target cluster: {e}")))
}

/// The client for a target cluster. Its server is the configuration's to name (tenant-owned
/// configurations included), so every answer goes through the runtime's size and time cap: a
/// server answering with hundreds of megabytes, or dripping its answer, cannot take the shared
/// provider process down or hold a call. Only single objects and paged lists are read from it
/// (no watches), so one answer stays well under the cap.
fn target_client(config: Config) -> Result<Client, kube::Error> {
    Ok(ClientBuilder::try_from(config)?.with_layer(&LimitLayer::default()).build())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pem_bundles() {
        assert!(pem_to_der(b"", "f").is_err());
        assert!(pem_to_der(b"garbage", "f").is_err());
    }
}
