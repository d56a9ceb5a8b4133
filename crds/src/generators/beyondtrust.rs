//! BeyondtrustWorkloadCredentialsDynamicSecret: upstream's dynamic secrets of BeyondTrust
//! Workload Credentials. Keyward installs its CRD with upstream's fields (release 2.9.0), so
//! upstream's manifests apply, and does not generate it: an ExternalSecret naming one reports
//! `Ready=False` naming the kind (`keyward_crds::rules::is_unserved_generator_kind`). The
//! `provider` block, a SecretStore's, is kept as written within the free-form JSON limits.

use kube::CustomResource;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

use crate::free_json::FreeJson;
use crate::secret_store::SecretStoreRetrySettings;

/// BeyondtrustWorkloadCredentialsDynamicSecret (not served by Keyward): temporary credentials
/// of a dynamic secret definition in BeyondTrust Workload Credentials.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "generators.external-secrets.io",
    version = "v1alpha1",
    kind = "BeyondtrustWorkloadCredentialsDynamicSecret",
    doc = "BeyondtrustWorkloadCredentialsDynamicSecret represents a generator that requests dynamic credentials from BeyondTrust Workload Credentials.",
    plural = "beyondtrustworkloadcredentialsdynamicsecrets",
    category = "external-secrets",
    category = "external-secrets-generators",
    namespaced
)]
#[serde(rename_all = "camelCase")]
pub struct BeyondtrustWorkloadCredentialsDynamicSecretSpec {
    /// The controller class that handles this generator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub controller: Option<String>,
    /// A SecretStore's `spec.provider.beyondtrustWorkloadCredentials` block (server, auth,
    /// `folderPath`), kept as written.
    #[schemars(schema_with = "provider_block")]
    pub provider: FreeJson,
    /// Retries of failed requests (`maxRetries`, `retryInterval`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_settings: Option<SecretStoreRetrySettings>,
}

fn provider_block(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
}
