//! QuayAccessToken and CloudsmithAccessToken: upstream's registry tokens obtained with a
//! ServiceAccount token (OIDC federation). Keyward installs their CRDs with upstream's fields
//! (release 2.9.0), so upstream's manifests apply, and does not generate them: an ExternalSecret
//! naming one reports `Ready=False` naming the kind
//! (`keyward_crds::rules::is_unserved_generator_kind`).

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::provider_config::ServiceAccountSelector;

/// QuayAccessToken (not served by Keyward): an OAuth token of a Quay robot account.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "generators.external-secrets.io",
    version = "v1alpha1",
    kind = "QuayAccessToken",
    doc = "QuayAccessToken generates Quay oauth token for pulling/pushing images",
    plural = "quayaccesstokens",
    category = "external-secrets",
    category = "external-secrets-generators",
    namespaced
)]
#[serde(rename_all = "camelCase")]
pub struct QuayAccessTokenSpec {
    /// The Quay instance (upstream's default: `quay.io`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 2048))]
    pub url: Option<String>,
    /// The robot account federated with.
    #[schemars(length(max = 253))]
    pub robot_account: String,
    /// The ServiceAccount whose token is exchanged.
    pub service_account_ref: ServiceAccountSelector,
}

/// CloudsmithAccessToken (not served by Keyward): a Cloudsmith token obtained through OIDC.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "generators.external-secrets.io",
    version = "v1alpha1",
    kind = "CloudsmithAccessToken",
    doc = "CloudsmithAccessToken generates Cloudsmith access token using OIDC authentication",
    plural = "cloudsmithaccesstokens",
    category = "external-secrets",
    category = "external-secrets-generators",
    namespaced
)]
#[serde(rename_all = "camelCase")]
pub struct CloudsmithAccessTokenSpec {
    /// The Cloudsmith API (upstream's default: `https://api.cloudsmith.io`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 2048))]
    pub api_url: Option<String>,
    /// The organization's slug.
    #[schemars(length(max = 253))]
    pub org_slug: String,
    /// The OIDC service's slug.
    #[schemars(length(max = 253))]
    pub service_slug: String,
    /// The ServiceAccount whose token is exchanged.
    pub service_account_ref: ServiceAccountSelector,
}
