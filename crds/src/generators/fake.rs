//! Fake: returns the data its spec holds, for tests and examples.

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Fake returns `spec.data` as generated values.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "generators.external-secrets.io",
    version = "v1alpha1",
    kind = "Fake",
    doc = "Fake returns the static data of its spec; for tests and examples.",
    plural = "fakes",
    category = "external-secrets",
    category = "external-secrets-generators",
    namespaced
)]
#[serde(rename_all = "camelCase")]
pub struct FakeSpec {
    /// Upstream's controller class field; accepted and not used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller: Option<String>,
    /// The data returned, key by key.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub data: BTreeMap<String, String>,
}
