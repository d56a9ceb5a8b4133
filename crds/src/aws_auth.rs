//! AWS credentials as upstream writes them (`auth.secretRef`, `auth.jwt`): the AWS provider's
//! `SecretsManager` configuration (`keyward_provider_aws::api`), the ECRAuthorizationToken and
//! STSSessionToken generators and Vault's IAM login all name them, so they live here.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::SecretKeySelector;
use crate::provider_config::ServiceAccountSelector;

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
