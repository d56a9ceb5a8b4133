//! `external-secrets.io/v1alpha1` ClusterPushSecret: one PushSecret spec, kept in every
//! namespace it selects (upstream's kind, with its fields, status and printer columns).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::cluster_external_secret::{ClusterExternalSecretNamespaceFailure, ExternalSecretMetadata};
use crate::common::Condition;
use crate::push_secret::PushSecretSpec;

/// How often namespaces are checked again when `refreshTime` is omitted: upstream's controller
/// requeues a ClusterPushSecret every hour.
pub const DEFAULT_REFRESH_TIME: &str = "1h";

/// ClusterPushSecret creates the same PushSecret in every namespace it selects.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "external-secrets.io",
    version = "v1alpha1",
    kind = "ClusterPushSecret",
    doc = "ClusterPushSecret creates, updates and removes a PushSecret in every namespace it selects.",
    plural = "clusterpushsecrets",
    category = "external-secrets",
    status = "ClusterPushSecretStatus",
    printcolumn = r#"{"name":"AGE","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Status","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].reason"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterPushSecretSpec {
    /// The spec of the PushSecrets to create.
    pub push_secret_spec: PushSecretSpec,
    /// How often the selected namespaces and their PushSecrets are checked again, as a Go
    /// duration (default `1h`); `0` checks only when something changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_time: Option<String>,
    /// Name of the PushSecrets; defaults to the ClusterPushSecret's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push_secret_name: Option<String>,
    /// Labels and annotations of the PushSecrets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push_secret_metadata: Option<ExternalSecretMetadata>,
    /// Namespaces whose labels match any of these selectors (an empty selector matches every
    /// namespace; no selector selects none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespace_selectors: Vec<LabelSelector>,
}

/// A namespace where the PushSecret could not be created, updated or removed.
pub type ClusterPushSecretNamespaceFailure = ClusterExternalSecretNamespaceFailure;

/// Observed state of a ClusterPushSecret.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterPushSecretStatus {
    /// Name of the PushSecrets it manages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push_secret_name: Option<String>,
    /// Selected namespaces where the PushSecret could not be written, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_namespaces: Vec<ClusterPushSecretNamespaceFailure>,
    /// Namespaces that hold its PushSecret, sorted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub provisioned_namespaces: Vec<String>,
    /// Conditions; `Ready` is `True` when every selected namespace holds the PushSecret (each
    /// PushSecret reports its own pushes).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// Reasons of the ClusterPushSecret `Ready` condition.
pub mod reason {
    /// Every selected namespace holds the current PushSecret.
    pub const PROVISIONED: &str = "PushSecretsProvisioned";
    /// Some selected namespaces do not; `status.failedNamespaces` says why.
    pub const NAMESPACES_FAILED: &str = "NamespacesFailed";
    /// The spec is invalid; nothing was changed.
    pub const INVALID_SPEC: &str = "InvalidSpec";
}

impl ClusterPushSecret {
    /// Name of the PushSecrets: `spec.pushSecretName`, else the ClusterPushSecret's own name.
    pub fn push_secret_name(&self) -> String {
        self.spec
            .push_secret_name
            .clone()
            .filter(|n| !n.is_empty())
            .or_else(|| self.metadata.name.clone())
            .unwrap_or_default()
    }

    /// `spec.refreshTime`, or upstream's default.
    pub fn refresh_time(&self) -> &str {
        self.spec.refresh_time.as_deref().unwrap_or(DEFAULT_REFRESH_TIME)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_snippet_reads_with_defaults() {
        // The shape of upstream's full-cluster-push-secret.yaml.
        let cps: ClusterPushSecret = serde_yaml::from_str(
            "apiVersion: external-secrets.io/v1alpha1\nkind: ClusterPushSecret\nmetadata: {name: hello-world}\n\
             spec:\n  pushSecretMetadata: {labels: {}, annotations: {}}\n  namespaceSelectors: [{matchLabels: {cool: \
             label}}]\n  pushSecretSpec:\n    updatePolicy: Replace\n    deletionPolicy: Delete\n    \
             refreshInterval: 1h0m0s\n    secretStoreRefs: [{name: aws-parameterstore, kind: SecretStore}]\n    \
             selector: {secret: {name: source-secret}}\n    data: [{conversionStrategy: None, match: {secretKey: \
             best-pokemon, remoteRef: {remoteKey: destination-secret, property: best-pokemon-dst}}}]\n\
             status:\n  failedNamespaces: [{namespace: matching-ns-1, reason: push secret already exists in \
             namespace}]\n  provisionedNamespaces: [matching-ns-3, matching-ns-2]\n  conditions: [{type: Ready, \
             status: 'False', message: one or more namespaces failed}]\n",
        )
        .expect("parses");
        assert_eq!(cps.push_secret_name(), "hello-world");
        assert_eq!(cps.refresh_time(), "1h");
        assert_eq!(cps.spec.push_secret_spec.secret_store_refs[0].name.as_deref(), Some("aws-parameterstore"));
        let status = cps.status.expect("status");
        assert_eq!(status.failed_namespaces[0].namespace, "matching-ns-1");
        assert_eq!(status.provisioned_namespaces.len(), 2);
        let named = ClusterPushSecret::new(
            "hello-world",
            ClusterPushSecretSpec {
                push_secret_name: Some("hello-world-ps".into()),
                refresh_time: Some("1m".into()),
                ..Default::default()
            },
        );
        assert_eq!((named.push_secret_name().as_str(), named.refresh_time()), ("hello-world-ps", "1m"));
    }
}
