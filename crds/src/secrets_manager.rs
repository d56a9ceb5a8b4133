//! `provider.external-secrets.io/v2alpha1` **SecretsManager**: the configuration of the AWS
//! Secrets Manager provider.
//!
//! Field names follow the `aws` store spec of the External Secrets Operator (with `service:
//! SecretsManager`), so a `spec.provider.aws` block of an existing SecretStore translates 1:1.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::SecretKeySelector;
use crate::provider_config::ServiceAccountSelector;

/// Configuration of the AWS Secrets Manager provider: a region, credentials and roles.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "provider.external-secrets.io",
    version = "v2alpha1",
    kind = "SecretsManager",
    doc = "SecretsManager configures the AWS Secrets Manager provider: region, credentials and roles to assume.",
    plural = "secretsmanagers",
    singular = "secretsmanager",
    category = "external-secrets",
    namespaced,
    printcolumn = r#"{"name":"Region","type":"string","jsonPath":".spec.region"}"#,
    printcolumn = r#"{"name":"Role","type":"string","jsonPath":".spec.role"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct SecretsManagerSpec {
    /// AWS region of the secrets, for example `eu-west-1`.
    pub region: String,
    /// ARN of a role to assume (through STS) after authenticating.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// Roles assumed in order before `role` (role chaining).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub additional_roles: Vec<String>,
    /// External ID passed when assuming `role`.
    #[serde(default, rename = "externalID", skip_serializing_if = "Option::is_none")]
    pub external_id: Option<String>,
    /// Session tags passed when assuming `role`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub session_tags: Vec<AwsTag>,
    /// Session tag keys that pass on to roles assumed later in the chain.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub transitive_tag_keys: Vec<String>,
    /// Prefix added to every secret name (remote keys, finds, pushes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// Credentials: static keys from a Secret, or a ServiceAccount token exchanged through STS
    /// (web identity). Unset: the provider process's own credentials (default chain), allowed
    /// only for a configuration owned by the cluster operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<AwsAuth>,
    /// Secrets Manager options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secrets_manager: Option<SecretsManagerOptions>,
}

/// A tag.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct AwsTag {
    /// Tag key.
    pub key: String,
    /// Tag value.
    pub value: String,
}

/// AWS credentials; exactly one method.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AwsAuth {
    /// Static access keys stored in Secrets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<AwsAuthSecretRef>,
    /// A ServiceAccount token exchanged for credentials with STS AssumeRoleWithWebIdentity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwt: Option<AwsJwtAuth>,
}

/// Static access keys.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AwsAuthSecretRef {
    /// Secret key holding the access key ID.
    #[serde(rename = "accessKeyIDSecretRef")]
    pub access_key_id_secret_ref: SecretKeySelector,
    /// Secret key holding the secret access key.
    pub secret_access_key_secret_ref: SecretKeySelector,
    /// Secret key holding a session token, for temporary credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_token_secret_ref: Option<SecretKeySelector>,
}

/// Web identity: a ServiceAccount token exchanged through STS.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AwsJwtAuth {
    /// The ServiceAccount whose token is requested (audience `sts.amazonaws.com` unless its
    /// `audiences` say otherwise). The role to assume is the ServiceAccount's
    /// `eks.amazonaws.com/role-arn` annotation, else `spec.role`.
    pub service_account_ref: ServiceAccountSelector,
}

/// Options of Secrets Manager calls.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretsManagerOptions {
    /// Delete at once instead of scheduling the deletion after a recovery window.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub force_delete_without_recovery: bool,
    /// Days (7 to 30) a deleted secret can be restored; AWS's default (30) when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery_window_in_days: Option<i64>,
}

/// Upstream's `spec.provider.aws` of a SecretStore: which AWS service, and the same region,
/// credentials and roles as a `SecretsManager` configuration.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AwsStoreProvider {
    /// The AWS service the store reads and writes.
    pub service: AwsService,
    /// Region, credentials, roles, prefix and Secrets Manager options.
    #[serde(flatten)]
    pub config: SecretsManagerSpec,
    /// Upstream's session tag policy (`None`, `Simple`, `Custom`); only `None` is applied by
    /// Keyward (admission warns otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_tags_policy: Option<String>,
    /// Upstream's custom session tags for the `Custom` policy (not applied by Keyward).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub custom_session_tags: std::collections::BTreeMap<String, String>,
}

/// An AWS service a store can name.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum AwsService {
    /// AWS Secrets Manager.
    #[default]
    SecretsManager,
    /// AWS Systems Manager Parameter Store.
    ParameterStore,
    /// AWS Certificate Manager (upstream's; not served by Keyward).
    CertificateManager,
}

impl AwsService {
    /// The name as written in manifests.
    pub fn as_str(self) -> &'static str {
        match self {
            AwsService::SecretsManager => "SecretsManager",
            AwsService::ParameterStore => "ParameterStore",
            AwsService::CertificateManager => "CertificateManager",
        }
    }
}
