//! Grafana: upstream's generator of Grafana service-account tokens. Keyward installs its CRD
//! with upstream's fields (release 2.9.0), so upstream's manifests apply, and does not generate
//! it: an ExternalSecret naming one reports `Ready=False` naming the kind
//! (`keyward_crds::rules::is_unserved_generator_kind`); GeneratorStates it left are kept
//! (docs/generators.md, "GeneratorState").

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::SecretKeySelector;

/// Grafana (not served by Keyward): a service account and its token, created in Grafana.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "generators.external-secrets.io",
    version = "v1alpha1",
    kind = "Grafana",
    doc = "Grafana represents a generator for Grafana service account tokens.",
    plural = "grafanas",
    category = "external-secrets",
    category = "external-secrets-generators",
    namespaced
)]
#[serde(rename_all = "camelCase")]
pub struct GrafanaSpec {
    /// The Grafana instance's URL.
    #[schemars(length(max = 2048))]
    pub url: String,
    /// How to authenticate at Grafana: `token` or `basic`.
    pub auth: GrafanaAuth,
    /// The service account to create.
    pub service_account: GrafanaServiceAccount,
}

/// How a Grafana generator authenticates.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GrafanaAuth {
    /// A service-account token, from a Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<SecretKeySelector>,
    /// A user name and a password from a Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub basic: Option<GrafanaBasicAuth>,
}

/// Basic authentication at Grafana.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GrafanaBasicAuth {
    /// The user name.
    #[schemars(length(max = 253))]
    pub username: String,
    /// The password, from a Secret.
    pub password: SecretKeySelector,
}

/// The service account a Grafana generator creates.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GrafanaServiceAccount {
    /// Its name.
    #[schemars(length(max = 253))]
    pub name: String,
    /// Its basic role (`Viewer`, `Editor`, `Admin`, …).
    #[schemars(length(max = 253))]
    pub role: String,
    /// Seconds before its token expires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub seconds_to_live: Option<i64>,
}
