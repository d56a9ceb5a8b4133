//! Clients for the target cluster, built from a `Kubernetes` config object (and cached by the
//! provider per config object, generation and owner, in the runtime's shared client cache).
//!
//! Every object the config names (credential Secrets, the CA bundle, the ServiceAccount, the
//! kubeconfig) is read through the runtime's [`ClusterRefs`], in the namespace the tenant
//! boundary allows, and a kubeconfig is read as data only ([`crate::kubeconfig`]).

use base64::Engine;
use keyward_crds::provider_config::KubernetesSpec;
use keyward_provider_runtime::body::LimitLayer;
use keyward_provider_runtime::refs::{ClusterRefs, NamedKind, named_namespace, pem_to_der};
use keyward_provider_runtime::{ProviderError, RequestContext};
use kube::client::ClientBuilder;
use kube::config::AuthInfo;
use kube::{Client, Config};

use crate::kubeconfig::parse_inline;

/// Lifetime requested for ServiceAccount tokens (well above the client cache's
/// [`keyward_provider_runtime::refs::CLIENT_TTL`]).
const TOKEN_SECONDS: i64 = 3600;

/// The config's Secret references have no default key: each must name its own
/// ([`ClusterRefs::selected_secret_key`] refuses an empty one).
const NO_DEFAULT_KEY: &str = "";

fn auth_info(value: serde_json::Value) -> Result<AuthInfo, ProviderError> {
    serde_json::from_value(value).map_err(|e| ProviderError::Internal(format!("building credentials: {e}")))
}

/// Builds a client for the cluster and credentials `spec` describes. `refs` reads what the
/// config names with the provider's own client (Secrets, ConfigMaps, ServiceAccount tokens),
/// `own_config` is the provider's configuration (the default target cluster when `server.url`
/// is unset).
pub async fn build_client(
    refs: &ClusterRefs,
    own_config: &Config,
    ctx: &RequestContext,
    spec: &KubernetesSpec,
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
