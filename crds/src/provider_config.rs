//! Pieces of the `provider.external-secrets.io/v2alpha1` provider configuration kinds that
//! several kinds share (a CA reference, a ServiceAccount to request tokens for): the Vault kind
//! here and the Kubernetes provider crate's kind use them.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// API version of the provider configuration kinds.
pub const PROVIDER_CONFIG_API_VERSION: &str = "provider.external-secrets.io/v2alpha1";

/// Where a CA bundle is stored.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CaProvider {
    /// `Secret` or `ConfigMap`.
    #[serde(rename = "type")]
    pub type_: CaProviderType,
    /// Name of the object.
    pub name: String,
    /// Key holding the PEM bundle; `ca.crt` when left out.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub key: String,
    /// Namespace of the object. Only a configuration owned by the cluster operator (reached
    /// through a ClusterProvider with `authenticationScope: ProviderNamespace`) may name another
    /// namespace than its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

impl CaProvider {
    /// The key read when `key` is left out: the one `kube-root-ca.crt` ConfigMaps and
    /// cert-manager's Secrets hold the CA under.
    pub const DEFAULT_KEY: &str = "ca.crt";

    /// The key holding the PEM bundle: `key`, or [`Self::DEFAULT_KEY`] when it is empty.
    pub fn key_or_default(&self) -> &str {
        if self.key.is_empty() { Self::DEFAULT_KEY } else { &self.key }
    }
}

/// Kind of object holding a CA bundle.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum CaProviderType {
    /// A Secret.
    #[default]
    Secret,
    /// A ConfigMap.
    ConfigMap,
}

/// A ServiceAccount to request tokens for.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceAccountSelector {
    /// Name of the ServiceAccount.
    pub name: String,
    /// Namespace of the ServiceAccount. Only a configuration owned by the cluster operator
    /// (reached through a ClusterProvider with `authenticationScope: ProviderNamespace`) may
    /// name another namespace than its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Audiences of the requested token.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub audiences: Vec<String>,
}
