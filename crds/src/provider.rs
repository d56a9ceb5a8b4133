//! `external-secrets.io/v1` Provider and ClusterProvider: where a provider process listens and
//! which configuration object it uses.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::Condition;

/// A namespaced provider. It always authenticates in the namespace of the ExternalSecret or
/// PushSecret that uses it, so it can only read what that namespace may read.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "external-secrets.io",
    version = "v1",
    kind = "Provider",
    doc = "Provider connects a namespace to a provider process; it authenticates in the namespace of the manifest that uses it.",
    plural = "providers",
    shortname = "prov",
    category = "external-secrets",
    namespaced,
    status = "ProviderStatus",
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Address","type":"string","jsonPath":".spec.config.address"}"#,
    printcolumn = r#"{"name":"Capabilities","type":"string","jsonPath":".status.capabilities"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ProviderSpec {
    /// How to reach the provider process and which configuration object it reads.
    pub config: ProviderConfig,
}

/// A cluster-scoped provider that ExternalSecrets and PushSecrets in any admitted namespace use.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "external-secrets.io",
    version = "v1",
    kind = "ClusterProvider",
    doc = "ClusterProvider connects admitted namespaces of the cluster to a provider process.",
    plural = "clusterproviders",
    shortname = "cprov",
    category = "external-secrets",
    status = "ProviderStatus",
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Address","type":"string","jsonPath":".spec.config.address"}"#,
    printcolumn = r#"{"name":"AuthScope","type":"string","jsonPath":".spec.authenticationScope"}"#,
    printcolumn = r#"{"name":"Capabilities","type":"string","jsonPath":".status.capabilities"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterProviderSpec {
    /// How to reach the provider process and which configuration object it reads.
    pub config: ProviderConfig,
    /// Where the provider authenticates: `ProviderNamespace` (the namespace in
    /// `config.providerRef.namespace`, required then) or `ManifestNamespace` (the namespace of
    /// the ExternalSecret or PushSecret).
    #[serde(default)]
    pub authentication_scope: AuthenticationScope,
    /// Namespaces allowed to use this ClusterProvider; any one condition admits. Without
    /// conditions every namespace may use it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<ClusterProviderCondition>,
}

/// Connection to a provider process.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProviderConfig {
    /// gRPC address of the provider as `host:port`, for example
    /// `keyward-provider-kubernetes.keyward.svc:8443`.
    pub address: String,
    /// The provider configuration object (for example a `Kubernetes` object).
    pub provider_ref: ProviderRef,
}

/// Reference to a provider configuration object.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProviderRef {
    /// API version of the configuration object, for example `provider.external-secrets.io/v2alpha1`.
    pub api_version: String,
    /// Kind of the configuration object, for example `Kubernetes` or `Fake`.
    pub kind: String,
    /// Name of the configuration object.
    pub name: String,
    /// Namespace of the configuration object. Required for a ClusterProvider with
    /// `authenticationScope: ProviderNamespace`; otherwise the manifest's namespace is used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// Where a ClusterProvider authenticates.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum AuthenticationScope {
    /// In `spec.config.providerRef.namespace`: one identity for every namespace.
    #[default]
    ProviderNamespace,
    /// In the namespace of the ExternalSecret or PushSecret: each namespace brings its own
    /// credentials.
    ManifestNamespace,
}

impl AuthenticationScope {
    /// The scope as written in manifests.
    pub fn as_str(self) -> &'static str {
        match self {
            AuthenticationScope::ProviderNamespace => "ProviderNamespace",
            AuthenticationScope::ManifestNamespace => "ManifestNamespace",
        }
    }
}

/// One way a namespace is admitted; any of its criteria that matches admits the namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterProviderCondition {
    /// Namespaces whose labels match this selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    /// Namespaces with exactly these names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<String>,
    /// Namespaces whose names contain a match of one of these regular expressions (RE2 syntax,
    /// unanchored: use `^…$` to match whole names).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespace_regexes: Vec<String>,
}

/// What a provider can do.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum Capabilities {
    /// Read only: can back ExternalSecrets.
    ReadOnly,
    /// Write only: can back PushSecrets.
    WriteOnly,
    /// Read and write.
    ReadWrite,
}

impl Capabilities {
    /// Whether ExternalSecrets may read from a provider with these capabilities.
    pub fn can_read(self) -> bool {
        matches!(self, Capabilities::ReadOnly | Capabilities::ReadWrite)
    }

    /// Whether PushSecrets may write to a provider with these capabilities.
    pub fn can_write(self) -> bool {
        matches!(self, Capabilities::WriteOnly | Capabilities::ReadWrite)
    }
}

/// Observed state of a Provider or ClusterProvider.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProviderStatus {
    /// Conditions; `Ready` is `True` only after the provider answered Validate.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// What the provider reported it can do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<Capabilities>,
}
