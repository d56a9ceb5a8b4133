//! The `Kubernetes` configuration kind's types, and upstream's `spec.provider.kubernetes` block
//! that translates into it.

use keyward_crds::SecretKeySelector;
use keyward_crds::provider_config::{CaProvider, ServiceAccountSelector};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub(super) fn default_remote_namespace() -> String {
    "default".to_string()
}

/// Configuration of the Kubernetes provider: a cluster, credentials, and the namespace whose
/// Secrets it serves.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "provider.external-secrets.io",
    version = "v2alpha1",
    kind = "Kubernetes",
    doc = "Kubernetes configures the Kubernetes provider: the cluster, credentials and namespace it reads Secrets from.",
    plural = "kubernetes",
    singular = "kubernetes",
    category = "external-secrets",
    namespaced,
    printcolumn = r#"{"name":"Remote Namespace","type":"string","jsonPath":".spec.remoteNamespace"}"#,
    printcolumn = r#"{"name":"Server","type":"string","jsonPath":".spec.server.url"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct KubernetesSpec {
    /// The cluster to read from; defaults to the cluster the provider runs in.
    #[serde(default)]
    pub server: KubernetesServer,
    /// Credentials: exactly one of `cert`, `token` or `serviceAccount`. Mutually exclusive with
    /// `authRef`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<KubernetesAuth>,
    /// A kubeconfig stored in a Secret key. Mutually exclusive with `auth`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_ref: Option<SecretKeySelector>,
    /// Namespace of the remote Secrets.
    #[serde(default = "default_remote_namespace")]
    pub remote_namespace: String,
    /// Let PushSecrets choose another namespace than `remoteNamespace` (push metadata
    /// `spec.remoteNamespace`). Honoured only for a configuration owned by the cluster operator
    /// (reached through a ClusterProvider with `authenticationScope: ProviderNamespace`); refused
    /// in a tenant namespace.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_remote_namespace_override: bool,
}

/// The API server of the remote cluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubernetesServer {
    /// URL of the API server, for example `https://kubernetes.default.svc`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// PEM CA bundle that signs the API server's certificate, Base64 encoded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_bundle: Option<String>,
    /// A Secret or ConfigMap key holding the CA bundle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_provider: Option<CaProvider>,
}

/// Credentials for the remote cluster; exactly one method.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubernetesAuth {
    /// A client certificate and key stored in Secrets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert: Option<CertAuth>,
    /// A bearer token stored in a Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<TokenAuth>,
    /// A ServiceAccount whose token is requested with the TokenRequest API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account: Option<ServiceAccountSelector>,
}

impl KubernetesAuth {
    /// Names of the auth methods that are set, in schema order.
    pub fn methods(&self) -> Vec<&'static str> {
        let mut set = Vec::new();
        if self.cert.is_some() {
            set.push("cert");
        }
        if self.token.is_some() {
            set.push("token");
        }
        if self.service_account.is_some() {
            set.push("serviceAccount");
        }
        set
    }
}

/// Client certificate authentication.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CertAuth {
    /// Secret key holding the PEM client certificate.
    pub client_cert: SecretKeySelector,
    /// Secret key holding the PEM private key.
    pub client_key: SecretKeySelector,
}

/// Bearer token authentication.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TokenAuth {
    /// Secret key holding the token.
    pub bearer_token: SecretKeySelector,
}

/// Upstream's `spec.provider.kubernetes`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubernetesStoreProvider {
    /// The cluster to read from; defaults to the cluster the provider runs in.
    #[serde(default)]
    pub server: KubernetesServer,
    /// Credentials: exactly one of `cert`, `token` or `serviceAccount`. Mutually exclusive with
    /// `authRef`. References without a namespace resolve in the SecretStore's namespace, or for
    /// a ClusterSecretStore in the namespace of the ExternalSecret or PushSecret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<KubernetesAuth>,
    /// A kubeconfig stored in a Secret key. Mutually exclusive with `auth`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_ref: Option<SecretKeySelector>,
    /// Namespace of the remote Secrets (default `default`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_namespace: Option<String>,
}
