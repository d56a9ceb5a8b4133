//! `external-secrets.io/v1alpha1` PushSecret: a Kubernetes Secret written out to stores.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{Condition, StoreKind};
use crate::external_secret::{
    ExternalSecretRewrite, ExternalSecretTemplate, GeneratorRef, RewriteRegexp, RewriteTransform,
};
use crate::free_json::FreeJson;
use crate::schema::preserve_unknown_fields;

fn default_refresh_interval() -> String {
    crate::external_secret::DEFAULT_REFRESH_INTERVAL.to_string()
}

/// PushSecret copies keys of a Kubernetes Secret to one or more stores.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "external-secrets.io",
    version = "v1alpha1",
    kind = "PushSecret",
    doc = "PushSecret copies keys of a Kubernetes Secret to one or more Providers or ClusterProviders.",
    plural = "pushsecrets",
    shortname = "ps",
    category = "external-secrets",
    namespaced,
    status = "PushSecretStatus",
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Status","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].reason"}"#,
    printcolumn = r#"{"name":"Last Sync","type":"date","jsonPath":".status.refreshTime"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct PushSecretSpec {
    /// How often to push again, as a Go duration.
    #[serde(default = "default_refresh_interval")]
    pub refresh_interval: String,
    /// The stores to push to, by name or by label selector.
    pub secret_store_refs: Vec<PushSecretStoreRef>,
    /// `Replace` remote values, or push only `IfNotExists`.
    #[serde(default)]
    pub update_policy: PushSecretUpdatePolicy,
    /// `Delete` removes the remote copies when the PushSecret (or an entry) goes away; `None`
    /// keeps them.
    #[serde(default)]
    pub deletion_policy: PushSecretDeletionPolicy,
    /// The Secret to push.
    pub selector: PushSecretSelector,
    /// Which keys go where.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub data: Vec<PushSecretData>,
    /// Bulk pushes: the keys of the source Secret that match, to one store each entry. An
    /// explicit `data` entry for the same source key wins over a per-key `dataTo` push.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub data_to: Vec<PushSecretDataTo>,
    /// Renders the values to push from the source Secret (the same template as an
    /// ExternalSecret's target; `.key` sees the source Secret's keys). Rendered keys are added to
    /// the source's keys, overriding same-named ones; the source Secret itself is never changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<ExternalSecretTemplate>,
}

/// One bulk push rule.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PushSecretDataTo {
    /// The store this rule pushes to, by name (listed in `secretStoreRefs`) or by labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_ref: Option<PushSecretStoreRef>,
    /// Bundle mode: every matched key goes into this one remote value (the provider receives
    /// them as one map). Without it, each matched key is its own remote value, named by the key
    /// after `rewrite`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_key: Option<String>,
    /// Which keys of the source Secret; all of them when omitted.
    #[serde(default, rename = "match", skip_serializing_if = "Option::is_none")]
    pub match_: Option<PushSecretDataToMatch>,
    /// Per-key mode only: rewrites of the key into the remote key, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rewrite: Vec<PushSecretRewrite>,
    /// Provider-specific metadata of every push of this rule, passed untouched (kept as
    /// text within the free-form JSON limits, `crate::free_json`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserve_unknown_fields")]
    pub metadata: Option<FreeJson>,
    /// `ReverseUnicode` turns `_UXXXX_` escapes in source keys back into characters before
    /// matching; `None` (default) keeps keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "conversion_strategy_schema")]
    pub conversion_strategy: Option<PushSecretConversionStrategy>,
}

/// Which source keys a bulk push takes.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PushSecretDataToMatch {
    /// Regular expression (unanchored) the key must match; every key when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regexp: Option<String>,
}

/// A rewrite of a source key into a remote key (one of regexp, transform).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PushSecretRewrite {
    /// Replace matches of `source` by `target`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regexp: Option<RewriteRegexp>,
    /// A template that sees the key as `.value`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transform: Option<RewriteTransform>,
}

impl From<&PushSecretRewrite> for ExternalSecretRewrite {
    fn from(r: &PushSecretRewrite) -> Self {
        ExternalSecretRewrite { merge: None, regexp: r.regexp.clone(), transform: r.transform.clone() }
    }
}

/// A store to push to.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PushSecretStoreRef {
    /// Name of the store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Kind of the store. When omitted, a SecretStore (for a labelSelector: the SecretStores it
    /// matches), as upstream (`rules::store_ref_kind`); the omission is kept as written (it is
    /// never defaulted) and carried to the provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<StoreKind>,
    /// Push to every store whose labels match, instead of a name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
}

/// Whether existing remote values are overwritten.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum PushSecretUpdatePolicy {
    /// Overwrite the remote value.
    #[default]
    Replace,
    /// Push only when the remote value does not exist.
    IfNotExists,
}

/// Whether remote copies are deleted.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum PushSecretDeletionPolicy {
    /// Delete remote copies that are no longer pushed.
    Delete,
    /// Keep remote copies.
    #[default]
    None,
}

/// The source of the pushed values.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PushSecretSelector {
    /// A Secret in the PushSecret's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<PushSecretSecret>,
    /// A generator producing the values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generator_ref: Option<GeneratorRef>,
}

/// The source Secrets: one by name, or every Secret of the namespace a label selector matches
/// (`name` wins when both are set, as upstream).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PushSecretSecret {
    /// Name of the Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Labels of the Secrets to push, each to the same remote keys (two Secrets producing one
    /// remote key is an error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
}

/// One pushed entry.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PushSecretData {
    /// Which key goes to which remote value.
    #[serde(rename = "match")]
    pub match_: PushSecretMatch,
    /// Provider-specific metadata, passed to the provider untouched (for the Kubernetes
    /// provider: labels, annotations and `remoteNamespace`); kept as text within the
    /// free-form JSON limits (`crate::free_json`) until a push sends it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserve_unknown_fields")]
    pub metadata: Option<FreeJson>,
    /// How keys are converted: `None` keeps them, `ReverseUnicode` undoes Unicode escaping.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "conversion_strategy_schema")]
    pub conversion_strategy: Option<PushSecretConversionStrategy>,
}

/// Upstream's schema of a push's `conversionStrategy`: defaulted to `None`, not nullable. The
/// API server prunes a `null` (upstream's webhook guide writes `conversionStrategy: null`) and
/// then writes the default, as upstream's CRD does; a nullable enum would refuse the `null`.
fn conversion_strategy_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "string", "enum": ["None", "ReverseUnicode"], "default": "None"})
}

/// Key conversion for pushes.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum PushSecretConversionStrategy {
    /// Keep keys as they are.
    None,
    /// Undo the Unicode escaping of `ConversionStrategy: Unicode`.
    ReverseUnicode,
}

/// Maps a Secret key to a remote value.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PushSecretMatch {
    /// Key of the source Secret; when omitted the whole Secret is pushed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_key: Option<String>,
    /// Where the value goes.
    pub remote_ref: PushSecretRemoteRef,
}

/// A remote location to push to.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PushSecretRemoteRef {
    /// Key of the remote value (for the Kubernetes provider: the remote Secret's name).
    pub remote_key: String,
    /// Property inside the remote value (for the Kubernetes provider: the remote Secret's key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub property: Option<String>,
}

/// Observed state of a PushSecret.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PushSecretStatus {
    /// When the values were last pushed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_time: Option<Time>,
    /// A hash of the spec the last push was made for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub synced_resource_version: Option<String>,
    /// What was pushed where, keyed `Kind/Name` of the store, then by remote key.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub synced_push_secrets: BTreeMap<String, BTreeMap<String, PushSecretData>>,
    /// Conditions; `Ready` reports the last push.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

#[cfg(test)]
mod tests {
    use kube::CustomResourceExt;
    use serde_json::{Value, json};

    use super::*;

    /// The schema of `conversionStrategy` under `spec.<list>` of a PushSecret's CRD.
    fn conversion_strategy(list: &str) -> Value {
        let crd = serde_json::to_value(PushSecret::crd()).expect("CRD as JSON");
        let spec = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
        spec[list]["items"]["properties"]["conversionStrategy"].clone()
    }

    /// Upstream's webhook guide writes `conversionStrategy: null`: the API server prunes a null
    /// only for a field that is not nullable and has a default, then writes the default; a
    /// nullable enum refuses it ("Unsupported value: null").
    #[test]
    fn a_null_conversion_strategy_is_defaulted_as_upstream() {
        for list in ["data", "dataTo"] {
            let schema = conversion_strategy(list);
            assert_eq!(schema["default"], json!("None"), "{list}: {schema}");
            assert_ne!(schema["nullable"], json!(true), "{list}: {schema}");
            assert_eq!(schema["enum"], json!(["None", "ReverseUnicode"]), "{list}: {schema}");
        }
        let spec: PushSecretData = serde_json::from_value(
            json!({"match": {"secretKey": "k", "remoteRef": {"remoteKey": "r"}}, "conversionStrategy": "None"}),
        )
        .expect("reads");
        assert_eq!(spec.conversion_strategy, Some(PushSecretConversionStrategy::None));
    }
}
