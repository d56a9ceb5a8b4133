//! Google Cloud credentials as upstream External Secrets writes them (`GCPSMAuth` and the types
//! under it, release 2.9.0): one type for every object that names them, so a GCPSecretManager
//! configuration (a SecretStore's `spec.provider.gcpsm`) and a GCRAccessToken generator read the
//! same JSON and print the same schema. Their rules are in [`crate::rules`] (`validate_gcp_auth`,
//! `gcp_auth_reach`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::SecretKeySelector;
use crate::provider_config::ServiceAccountSelector;

/// The credentials; upstream tries them in this order.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GCPSMAuth {
    /// A service-account key (JSON) in a Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<GCPSMAuthSecretRef>,
    /// GKE Workload Identity: a ServiceAccount's token exchanged at Google's STS for the
    /// cluster's identity pool, then (when the ServiceAccount is annotated
    /// `iam.gke.io/gcp-service-account`) for that Google service account's token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload_identity: Option<GCPWorkloadIdentity>,
    /// Workload Identity Federation: a subject token (a ServiceAccount's, AWS credentials', or
    /// as an external-account credential configuration says) exchanged at Google's STS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload_identity_federation: Option<GCPWorkloadIdentityFederation>,
}

impl GCPSMAuth {
    /// No credentials named: the provider's own identity.
    pub fn is_empty(&self) -> bool {
        self.secret_ref.is_none() && self.workload_identity.is_none() && self.workload_identity_federation.is_none()
    }
}

/// The Secret key holding a service-account key file.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GCPSMAuthSecretRef {
    /// The service-account key JSON. Its namespace is honoured only for a configuration owned
    /// by the cluster operator.
    #[serde(default)]
    pub secret_access_key_secret_ref: SecretKeySelector,
}

/// GKE Workload Identity.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GCPWorkloadIdentity {
    /// The ServiceAccount whose token is exchanged.
    pub service_account_ref: ServiceAccountSelector,
    /// The cluster's location (region or zone). Empty: the provider's `KEYWARD_GCP_CLUSTER_LOCATION`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cluster_location: String,
    /// The cluster's name. Empty: the provider's `KEYWARD_GCP_CLUSTER_NAME`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cluster_name: String,
    /// The cluster's project. Empty: `projectID`, else the provider's `KEYWARD_GCP_PROJECT_ID`.
    #[serde(rename = "clusterProjectID", default, skip_serializing_if = "String::is_empty")]
    pub cluster_project_id: String,
}

/// Workload Identity Federation: exactly one of `credConfig`, `serviceAccountRef` and
/// `awsSecurityCredentials`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GCPWorkloadIdentityFederation {
    /// A ConfigMap key holding an `external_account` credential configuration (JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cred_config: Option<ConfigMapReference>,
    /// A ServiceAccount whose token (audience `audience`, plus `audiences`) is the subject token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_ref: Option<ServiceAccountSelector>,
    /// AWS credentials in a Secret: a signed `GetCallerIdentity` request is the subject token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aws_security_credentials: Option<AwsCredentialsConfig>,
    /// The workload identity provider's full resource name
    /// (`//iam.googleapis.com/projects/N/locations/global/workloadIdentityPools/P/providers/X`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub audience: String,
    /// The URL of a credential configuration's `credential_source.url`, which must equal it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub external_token_endpoint: String,
    /// A Google service account to impersonate after the exchange.
    #[serde(rename = "gcpServiceAccountEmail", default, skip_serializing_if = "String::is_empty")]
    pub gcp_service_account_email: String,
}

/// A ConfigMap key.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ConfigMapReference {
    /// The ConfigMap's name.
    pub name: String,
    /// Its namespace: honoured only for a configuration owned by the cluster operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The key.
    pub key: String,
}

/// AWS credentials for an AWS workload identity provider.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AwsCredentialsConfig {
    /// The AWS region of the signed request.
    pub region: String,
    /// A Secret with `aws_access_key_id`, `aws_secret_access_key` and optionally
    /// `aws_session_token`.
    pub aws_credentials_secret_ref: Option<SecretReference>,
}

/// A whole Secret.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct SecretReference {
    /// The Secret's name.
    pub name: String,
    /// Its namespace: honoured only for a configuration owned by the cluster operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}
