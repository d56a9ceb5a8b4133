//! `external-secrets.io/v1` ClusterExternalSecret: one ExternalSecret spec, kept in every
//! namespace it selects.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::Condition;
use crate::external_secret::ExternalSecretSpec;

/// Default `refreshTime`, as upstream: how often namespaces are checked again.
pub const DEFAULT_REFRESH_TIME: &str = "1m";

/// Label on every ExternalSecret a ClusterExternalSecret manages, naming it (as upstream), so
/// the controller finds its ExternalSecrets again whatever their namespace or name.
pub const CLUSTER_EXTERNAL_SECRET_LABEL: &str = "externalsecrets.external-secrets.io/cluster-external-secret-name";

/// Finalizer that holds a ClusterExternalSecret until its ExternalSecrets are deleted (the same
/// name as upstream, so objects created under upstream's controller are cleaned up too).
pub const CLUSTER_EXTERNAL_SECRET_FINALIZER: &str = "externalsecrets.external-secrets.io/clusterexternalsecret-cleanup";

fn default_refresh_time() -> String {
    DEFAULT_REFRESH_TIME.to_string()
}

/// ClusterExternalSecret creates the same ExternalSecret in every namespace it selects.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "external-secrets.io",
    version = "v1",
    kind = "ClusterExternalSecret",
    doc = "ClusterExternalSecret creates, updates and removes an ExternalSecret in every namespace it selects.",
    plural = "clusterexternalsecrets",
    shortname = "ces",
    category = "external-secrets",
    status = "ClusterExternalSecretStatus",
    printcolumn = r#"{"name":"Store","type":"string","jsonPath":".spec.externalSecretSpec.secretStoreRef.name"}"#,
    printcolumn = r#"{"name":"Refresh Interval","type":"string","jsonPath":".spec.refreshTime"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterExternalSecretSpec {
    /// The spec of the ExternalSecrets to create.
    pub external_secret_spec: ExternalSecretSpec,
    /// Name of the ExternalSecrets; defaults to the ClusterExternalSecret's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_secret_name: Option<String>,
    /// Labels and annotations of the ExternalSecrets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_secret_metadata: Option<ExternalSecretMetadata>,
    /// Namespaces whose labels match this selector. Deprecated: use `namespaceSelectors`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    /// Namespaces whose labels match any of these selectors (an empty selector matches every
    /// namespace).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespace_selectors: Vec<LabelSelector>,
    /// Namespaces with exactly these names, in addition to those the selectors choose.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<String>,
    /// How often the selected namespaces and their ExternalSecrets are checked again, as a Go
    /// duration; `0` checks only when something changes.
    #[serde(default = "default_refresh_time")]
    pub refresh_time: String,
}

/// Labels and annotations of the objects a ClusterExternalSecret or ClusterPushSecret creates.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExternalSecretMetadata {
    /// Annotations of the objects.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Labels of the objects.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

/// A selected namespace where the ExternalSecret (or PushSecret) could not be created, updated or
/// removed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterExternalSecretNamespaceFailure {
    /// The namespace.
    pub namespace: String,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Observed state of a ClusterExternalSecret.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterExternalSecretStatus {
    /// Name of the ExternalSecrets it manages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_secret_name: Option<String>,
    /// Selected namespaces where the ExternalSecret could not be written, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_namespaces: Vec<ClusterExternalSecretNamespaceFailure>,
    /// Namespaces that hold its ExternalSecret, sorted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub provisioned_namespaces: Vec<String>,
    /// Conditions; `Ready` is `True` when every selected namespace holds the ExternalSecret.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// Reasons of the ClusterExternalSecret `Ready` condition.
pub mod reason {
    /// Every selected namespace holds the current ExternalSecret.
    pub const PROVISIONED: &str = "ExternalSecretsProvisioned";
    /// Some selected namespaces do not; `status.failedNamespaces` says why.
    pub const NAMESPACES_FAILED: &str = "NamespacesFailed";
    /// The spec is invalid; nothing was changed.
    pub const INVALID_SPEC: &str = "InvalidSpec";
}

impl ClusterExternalSecret {
    /// Name of the ExternalSecrets: `spec.externalSecretName`, else the ClusterExternalSecret's
    /// own name.
    pub fn external_secret_name(&self) -> String {
        self.spec
            .external_secret_name
            .clone()
            .filter(|n| !n.is_empty())
            .or_else(|| self.metadata.name.clone())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_manifest_reads_with_defaults() {
        let ces: ClusterExternalSecret = serde_yaml::from_str(
            "apiVersion: external-secrets.io/v1\nkind: ClusterExternalSecret\nmetadata: {name: shared}\nspec:\n  \
             namespaceSelectors: [{matchLabels: {team: a}}]\n  externalSecretSpec:\n    secretStoreRef: {name: s, \
             kind: ClusterSecretStore}\n    data: [{secretKey: k, remoteRef: {key: r}}]\n",
        )
        .expect("parses");
        assert_eq!(ces.spec.refresh_time, "1m");
        assert_eq!(ces.external_secret_name(), "shared");
        assert_eq!(ces.spec.external_secret_spec.refresh_interval, "1h");
        let named = ClusterExternalSecret::new(
            "shared",
            ClusterExternalSecretSpec { external_secret_name: Some("db".into()), ..Default::default() },
        );
        assert_eq!(named.external_secret_name(), "db");
    }
}
