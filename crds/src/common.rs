//! Types shared by several Keyward resources.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// API group of ExternalSecret, PushSecret, Provider and ClusterProvider.
pub const GROUP: &str = "external-secrets.io";
/// API group of the provider configuration kinds (Kubernetes, Fake).
pub const PROVIDER_GROUP: &str = "provider.external-secrets.io";
/// Category shared by every Keyward kind, so `kubectl get external-secrets` lists them all.
///
/// It must never equal a resource name: kubectl expands categories before resources, so a
/// category spelled like the ExternalSecret plural would turn `kubectl delete externalsecrets
/// --all -n X` into a delete of every Keyward kind, cluster-scoped ClusterProviders included.
/// Upstream External Secrets uses the same category.
pub const CATEGORY: &str = "external-secrets";

/// kubectl's copy of the whole object as last applied: as large as the spec, never read.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Drops what only records how an object was written (managed fields, the last-applied copy),
/// keeping every other label and annotation: the first thing the webhook's and the reconciler's
/// watches drop before they keep an object.
pub fn strip_write_history(m: &mut ObjectMeta) {
    m.managed_fields = None;
    if let Some(a) = m.annotations.as_mut() {
        a.remove(LAST_APPLIED);
        if a.is_empty() {
            m.annotations = None;
        }
    }
}

/// The kind of store an ExternalSecret or PushSecret points at.
///
/// `SecretStore` and `ClusterSecretStore` are the upstream stores; Keyward serves them through
/// its provider processes (`keyward_crds::rules::store_backend`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, JsonSchema)]
pub enum StoreKind {
    /// A namespaced v1 SecretStore: its configuration stays in its namespace.
    SecretStore,
    /// A cluster-scoped v1 ClusterSecretStore, subject to its namespace conditions.
    ClusterSecretStore,
    /// A namespaced Provider: authenticates in the namespace of the manifest that uses it.
    Provider,
    /// A cluster-scoped ClusterProvider, subject to its namespace conditions.
    ClusterProvider,
}

impl StoreKind {
    /// The kind name as written in manifests.
    pub fn as_str(self) -> &'static str {
        match self {
            StoreKind::SecretStore => "SecretStore",
            StoreKind::ClusterSecretStore => "ClusterSecretStore",
            StoreKind::Provider => "Provider",
            StoreKind::ClusterProvider => "ClusterProvider",
        }
    }
}

impl std::str::FromStr for StoreKind {
    type Err = String;

    /// Parses a kind as written by [`StoreKind::as_str`] (status keys such as
    /// `status.syncedPushSecrets` are `Kind/Name`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [StoreKind::SecretStore, StoreKind::ClusterSecretStore, StoreKind::Provider, StoreKind::ClusterProvider]
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| format!("unknown store kind {s:?}"))
    }
}

impl std::fmt::Display for StoreKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Reference to the store (Provider or ClusterProvider) that serves an ExternalSecret.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretStoreRef {
    /// Name of the Provider or ClusterProvider.
    pub name: String,
    /// Kind of the store: `SecretStore`, `ClusterSecretStore`, `Provider` or `ClusterProvider`.
    /// When omitted, the SecretStore of that name in the same namespace, as upstream
    /// (`rules::store_ref_kind`); the omission is kept in the object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<StoreKind>,
}

/// A status condition, in the shape External Secrets users already parse.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// Type of the condition, for example `Ready`.
    #[serde(rename = "type")]
    pub type_: String,
    /// Status of the condition: `True`, `False` or `Unknown`.
    pub status: String,
    /// Machine-readable reason for the last transition, for example `SecretSynced`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Human-readable explanation of the last transition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When the condition last changed status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// The `metadata.generation` the condition was computed for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// Name of the condition every Keyward resource reports.
pub const CONDITION_READY: &str = "Ready";

/// Finds the condition of the given type.
pub fn find_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Reference to a key of a Secret, resolved in the authentication namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretKeySelector {
    /// Name of the Secret.
    pub name: String,
    /// Key inside the Secret's data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Namespace of the Secret. Only a configuration owned by the cluster operator (reached
    /// through a ClusterProvider with `authenticationScope: ProviderNamespace`) may name another
    /// namespace than its own; a configuration in a tenant namespace that does is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// Reference to an object by name in the same namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocalObjectReference {
    /// Name of the referenced object.
    #[serde(default)]
    pub name: String,
}

#[cfg(test)]
mod tests {
    use super::StoreKind;

    #[test]
    fn store_kinds_parse_as_they_are_written() {
        for k in
            [StoreKind::SecretStore, StoreKind::ClusterSecretStore, StoreKind::Provider, StoreKind::ClusterProvider]
        {
            assert_eq!(k.as_str().parse::<StoreKind>(), Ok(k));
        }
        assert!("secretstore".parse::<StoreKind>().is_err(), "kinds are case-sensitive, as in manifests");
        assert!("".parse::<StoreKind>().is_err());
    }
}
