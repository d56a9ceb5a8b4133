//! GithubAccessToken and GitlabDeployToken: upstream's tokens of GitHub Apps and GitLab deploy
//! tokens. Keyward installs their CRDs with upstream's fields (release 2.9.0), so upstream's
//! manifests apply, and does not generate them: an ExternalSecret naming one reports
//! `Ready=False` naming the kind (`keyward_crds::rules::is_unserved_generator_kind`).

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::SecretKeySelector;

/// GithubAccessToken (not served by Keyward): an installation token of a GitHub App.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "generators.external-secrets.io",
    version = "v1alpha1",
    kind = "GithubAccessToken",
    doc = "GithubAccessToken generates ghs_ accessToken",
    plural = "githubaccesstokens",
    category = "external-secrets",
    category = "external-secrets-generators",
    namespaced
)]
#[serde(rename_all = "camelCase")]
pub struct GithubAccessTokenSpec {
    /// The GitHub instance's URL (upstream's default: `https://github.com/`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 2048))]
    pub url: Option<String>,
    /// The GitHub App's ID.
    #[serde(rename = "appID")]
    #[schemars(length(max = 253))]
    pub app_id: String,
    /// The App installation's ID.
    #[serde(rename = "installID")]
    #[schemars(length(max = 253))]
    pub install_id: String,
    /// Repositories the token reaches (all the App's when unset).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 500), inner(length(max = 253)))]
    pub repositories: Vec<String>,
    /// Permissions of the token (all the App's when unset).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 64))]
    pub permissions: BTreeMap<String, String>,
    /// The App's private key.
    pub auth: GithubAuth,
}

/// How a GithubAccessToken authenticates.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GithubAuth {
    /// The App's private key, from a Secret.
    pub private_key: SecretRefHolder,
}

/// A `secretRef` block.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretRefHolder {
    /// The Secret and key.
    pub secret_ref: SecretKeySelector,
}

/// GitlabDeployToken (not served by Keyward): a deploy token of a GitLab project or group.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "generators.external-secrets.io",
    version = "v1alpha1",
    kind = "GitlabDeployToken",
    doc = "GitlabDeployToken generates a GitLab deploy token.",
    plural = "gitlabdeploytokens",
    category = "external-secrets",
    category = "external-secrets-generators",
    namespaced
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "has(self.projectID) != has(self.groupID)", "message": "exactly one of projectID or groupID must be set"}
]))]
pub struct GitlabDeployTokenSpec {
    /// The GitLab instance's URL (upstream's default: `https://gitlab.com`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 2048))]
    pub url: Option<String>,
    /// The project's numeric ID or path; or `groupID`.
    #[serde(default, rename = "projectID", skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    pub project_id: Option<String>,
    /// The group's numeric ID or path; or `projectID`.
    #[serde(default, rename = "groupID", skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    pub group_id: Option<String>,
    /// The deploy token's name.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Scopes granted to the token.
    #[schemars(length(min = 1, max = 7))]
    pub scopes: Vec<GitlabDeployTokenScope>,
    /// When the token expires (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64), extend("format" = "date-time"))]
    pub expires_at: Option<String>,
    /// The token's user name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub username: Option<String>,
    /// The GitLab access token that creates deploy tokens.
    pub auth: GitlabDeployTokenAuth,
}

/// A scope of a GitLab deploy token.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum GitlabDeployTokenScope {
    /// Read the repository.
    ReadRepository,
    /// Read the container registry.
    ReadRegistry,
    /// Write the container registry.
    WriteRegistry,
    /// Read the package registry.
    ReadPackageRegistry,
    /// Write the package registry.
    WritePackageRegistry,
    /// Read the virtual registry.
    ReadVirtualRegistry,
    /// Write the virtual registry.
    WriteVirtualRegistry,
}

/// How a GitlabDeployToken authenticates.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GitlabDeployTokenAuth {
    /// A GitLab access token, from a Secret.
    pub token: SecretRefHolder,
}
