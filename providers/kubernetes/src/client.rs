//! Clients for the target cluster, built from a `Kubernetes` config object (and cached by the
//! provider per config object, generation and owner, in the runtime's shared client cache).
//!
//! Every object the config names (credential Secrets, the CA bundle, the ServiceAccount, the
//! kubeconfig) is read through the runtime's [`ClusterRefs`], in the namespace the tenant
//! boundary allows, and a kubeconfig is read as data only ([`crate::kubeconfig`]).

use crate::api::KubernetesSpec;
use base64::Engine;
use keyward_provider_runtime::netguard::{CallNames, DeniedNetworks, kube_client};
use keyward_provider_runtime::refs::{ClusterRefs, NamedKind, named_namespace, pem_to_der};
use keyward_provider_runtime::{ProviderError, RequestContext};
use kube::config::AuthInfo;
use kube::{Client, Config};

use crate::kubeconfig::parse_inline;

/// Lifetime requested for ServiceAccount tokens; a client built from one is built again two
/// thirds into it ([`keyward_provider_runtime::client_cache`]).
const TOKEN_SECONDS: i64 = 3600;

/// The config's Secret references have no default key: each must name its own
/// ([`ClusterRefs::selected_secret_key`] refuses an empty one).
const NO_DEFAULT_KEY: &str = "";

fn auth_info(value: serde_json::Value) -> Result<AuthInfo, ProviderError> {
    serde_json::from_value(value).map_err(|e| ProviderError::Internal(format!("building credentials: {e}")))
}

/// How target-cluster requests count as store calls: upstream's provider and call names.
const CALLS: CallNames = CallNames { provider: "Kubernetes", call: kubernetes_call };

/// The call a request to the target cluster is: a Secret read, list, write or delete, or the
/// access review Validate makes.
pub fn kubernetes_call(method: &http::Method, path: &str) -> &'static str {
    let resource = path.trim_end_matches('/').rsplit('/').nth(1).unwrap_or_default();
    let collection = path.trim_end_matches('/').rsplit('/').next().unwrap_or_default();
    match (method.as_str(), collection) {
        (_, "selfsubjectaccessreviews") => "CreateSelfSubjectAccessReview",
        (_, "selfsubjectrulesreviews") => "CreateSelfSubjectRulesReview",
        ("GET", "secrets") => "ListSecrets",
        ("POST", "secrets") => "CreateSecret",
        ("GET", _) if resource == "secrets" => "GetSecret",
        ("PUT" | "PATCH", _) => "UpdateSecret",
        ("DELETE", _) => "DeleteSecret",
        _ => "Other",
    }
}

/// Builds a client for the cluster and credentials `spec` describes. `refs` reads what the
/// config names with the provider's own client (Secrets, ConfigMaps, ServiceAccount tokens),
/// `own_config` is the provider's configuration (the default target cluster when `server.url`
/// is unset). A server the configuration names (`server.url`, the kubeconfig's) is reached
/// only where `denied` allows; the provider's own cluster is the operator's choice.
pub async fn build_client(
    refs: &ClusterRefs,
    own_config: &Config,
    ctx: &RequestContext,
    spec: &KubernetesSpec,
    denied: &DeniedNetworks,
) -> Result<Client, ProviderError> {
    if let Some(sel) = &spec.auth_ref {
        let yaml = refs.selected_secret_text(ctx, "spec.authRef", sel).await?;
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
        return kube_client(config, denied, "spec.authRef", CALLS);
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
    let server = &spec.server;
    if let Some(ca) =
        refs.ca_bundle(ctx, "spec.server", server.ca_bundle.as_deref(), server.ca_provider.as_ref()).await?
    {
        config.root_cert = Some(ca);
        config.root_cert_file = None;
    }

    let Some(auth) = &spec.auth else {
        return Err(ProviderError::BadConfig("set exactly one of spec.auth or spec.authRef".into()));
    };
    config.auth_info = if let Some(t) = &auth.token {
        let token = refs.selected_secret_text(ctx, "spec.auth.token.bearerToken", &t.bearer_token).await?;
        auth_info(serde_json::json!({ "token": token }))?
    } else if let Some(c) = &auth.cert {
        let cert = refs.selected_secret_key(ctx, "spec.auth.cert.clientCert", &c.client_cert, NO_DEFAULT_KEY).await?;
        let key = refs.selected_secret_key(ctx, "spec.auth.cert.clientKey", &c.client_key, NO_DEFAULT_KEY).await?;
        let b64 = base64::engine::general_purpose::STANDARD;
        auth_info(serde_json::json!({
            "client-certificate-data": b64.encode(cert),
            "client-key-data": b64.encode(key),
        }))?
    } else if let Some(sa) = &auth.service_account {
        let field = "spec.auth.serviceAccount";
        let ns = named_namespace(ctx, field, NamedKind::ServiceAccount, &sa.name, sa.namespace.as_deref())?;
        let token = refs.service_account_token(ns, &sa.name, &sa.audiences, TOKEN_SECONDS, field).await?;
        auth_info(serde_json::json!({ "token": token }))?
    } else {
        return Err(ProviderError::BadConfig("spec.auth: set exactly one of cert, token or serviceAccount".into()));
    };
    // Every answer goes through the runtime's size and time cap (in `kube_client`): a server
    // answering with hundreds of megabytes, or dripping its answer, cannot take the shared
    // provider process down or hold a call. Only single objects and paged lists are read from
    // it (no watches), so one answer stays well under the cap.
    match &spec.server.url {
        Some(_) => kube_client(config, denied, "spec.server.url", CALLS),
        None => kube_client(config, &DeniedNetworks::none(), "the provider's own cluster", CALLS),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_have_upstreams_names() {
        let get = http::Method::GET;
        assert_eq!(kubernetes_call(&get, "/api/v1/namespaces/a/secrets/db"), "GetSecret");
        assert_eq!(kubernetes_call(&get, "/api/v1/namespaces/a/secrets"), "ListSecrets");
        assert_eq!(kubernetes_call(&http::Method::POST, "/api/v1/namespaces/a/secrets"), "CreateSecret");
        assert_eq!(kubernetes_call(&http::Method::PUT, "/api/v1/namespaces/a/secrets/db"), "UpdateSecret");
        assert_eq!(kubernetes_call(&http::Method::DELETE, "/api/v1/namespaces/a/secrets/db"), "DeleteSecret");
        assert_eq!(
            kubernetes_call(&http::Method::POST, "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"),
            "CreateSelfSubjectAccessReview"
        );
    }
}
