//! `provider.external-secrets.io/v2alpha1` **Fake**: the configuration of the Fake provider
//! (always built; the webhook and the reconciler read it with `default-features = false`), and
//! upstream's `spec.provider.fake` store block, which translates into it.
//!
//! The store block is upstream's shape, not the kind's spec: a value may be missing or be a
//! deprecated `valueMap`, and `validationResult` is accepted and not used. Its row's
//! [`StoreBlock`] types it in the store CRDs and translates it ([`store_spec`]).

use std::collections::{BTreeMap, BTreeSet};

use keyward_crds::registry::{BlockError, ProviderKind, ProviderSpec, StoreBlock, admit_spec};
use keyward_crds::rules::{Reach, ValidationErrors};
use keyward_crds::store_schema::field_schema;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Configuration of the Fake provider: static entries, for tests and demos.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "provider.external-secrets.io",
    version = "v2alpha1",
    kind = "Fake",
    doc = "Fake configures the Fake provider with static values, for tests and demos.",
    plural = "fakes",
    category = "external-secrets",
    namespaced,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct FakeSpec {
    /// The values the provider serves.
    #[serde(default)]
    pub data: Vec<FakeEntry>,
}

/// One static value.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FakeEntry {
    /// Key of the value.
    pub key: String,
    /// Version of the value; requests without a version get the entry without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The value. A JSON object value can be read property by property.
    pub value: String,
}

/// Validates a Fake provider configuration.
pub fn validate_fake(spec: &FakeSpec) -> Result<(), ValidationErrors> {
    let mut errs = ValidationErrors::default();
    let mut seen = BTreeSet::new();
    for (i, e) in spec.data.iter().enumerate() {
        if e.key.is_empty() {
            errs.push(format!("spec.data[{i}].key"), "must not be empty");
        } else if !seen.insert((e.key.as_str(), e.version.as_deref())) {
            errs.push(
                format!("spec.data[{i}]"),
                format!("duplicate entry for key {:?} and version {:?}", e.key, e.version.as_deref().unwrap_or("")),
            );
        }
    }
    errs.into_result()
}

impl ProviderSpec for FakeSpec {
    fn validate(&self) -> Result<(), ValidationErrors> {
        validate_fake(self)
    }
    /// Its data is in the object itself: nothing to reach.
    fn reach(&self) -> Reach<'_> {
        Reach::default()
    }
}

/// Upstream's `spec.provider.fake`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FakeStoreProvider {
    /// The values served.
    #[serde(default)]
    pub data: Vec<FakeStoreData>,
    /// Upstream's forced outcome of the store check (an integer its tests set); accepted so its
    /// manifests apply, and not used: Keyward's Fake store is always valid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation_result: Option<i64>,
}

/// One value of upstream's Fake provider.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FakeStoreData {
    /// Key of the value.
    pub key: String,
    /// The value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// Deprecated upstream: a map served as a JSON object (read property by property).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_map: Option<BTreeMap<String, String>>,
    /// Version of the value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// The store CRDs' `spec.provider` field of the block, for its schema and description.
#[derive(JsonSchema)]
#[allow(dead_code)]
struct StoreField {
    /// Static values for tests and demos (served by the Fake provider).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    fake: Option<FakeStoreProvider>,
}

/// The `Fake` configuration a store block stands for: a deprecated `valueMap` becomes its JSON
/// object text, which the provider reads property by property as upstream does; an empty
/// version is none.
pub fn store_spec(block: &FakeStoreProvider) -> FakeSpec {
    let data = block
        .data
        .iter()
        .map(|d| {
            let value = match (&d.value, &d.value_map) {
                (Some(v), _) => v.clone(),
                // A map of strings always serialises.
                (None, Some(m)) => serde_json::to_string(m).unwrap_or_default(),
                (None, None) => String::new(),
            };
            FakeEntry { key: d.key.clone(), version: d.version.clone().filter(|v| !v.is_empty()), value }
        })
        .collect();
    FakeSpec { data }
}

fn translate(block: &serde_json::Value) -> Result<serde_json::Value, BlockError> {
    let unreadable = |e: serde_json::Error| BlockError::Unreadable(e.to_string());
    let block = FakeStoreProvider::deserialize(block).map_err(unreadable)?;
    serde_json::to_value(store_spec(&block)).map_err(unreadable)
}

/// The registry row of `Fake`: served by `keyward-provider-fake`, and by it also the SecretStores
/// with `spec.provider.fake` (upstream's block, translated).
pub static KIND: ProviderKind = ProviderKind {
    kind: "Fake",
    plural: "fakes",
    provider: "fake",
    stores: &[StoreBlock {
        schema: Some(|| field_schema::<StoreField>("fake")),
        translate: Some(translate),
        ..StoreBlock::spec("fake")
    }],
    admit: admit_spec::<FakeSpec>,
    crd: <Fake as kube::CustomResourceExt>::crd,
};

#[cfg(test)]
#[path = "api_tests.rs"]
mod tests;
