//! `provider.external-secrets.io/v2alpha1` **Vault**: the configuration of the Vault provider.
//!
//! Field names follow the `vault` store spec of the External Secrets Operator, so a
//! `spec.provider.vault` block of an existing SecretStore translates 1:1 into a `Vault` spec.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::aws_auth::AwsAuthSecretRef;
use crate::common::SecretKeySelector;
use crate::provider_config::{CaProvider, ServiceAccountSelector};

/// Configuration of the Vault provider: a Vault server, a KV secrets engine and how to log in.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "provider.external-secrets.io",
    version = "v2alpha1",
    kind = "Vault",
    doc = "Vault configures the Vault provider: the server, the KV secrets engine and the login method.",
    plural = "vaults",
    category = "external-secrets",
    namespaced,
    printcolumn = r#"{"name":"Server","type":"string","jsonPath":".spec.server"}"#,
    printcolumn = r#"{"name":"Path","type":"string","jsonPath":".spec.path"}"#,
    printcolumn = r#"{"name":"Version","type":"string","jsonPath":".spec.version"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct VaultSpec {
    /// Address of the Vault server, for example `https://vault.example.com:8200`.
    pub server: String,
    /// Mount path of the KV secrets engine, for example `secret`. When unset, the first segment
    /// of each remote key is the mount path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Version of the KV secrets engine: `v1` or `v2` (default).
    #[serde(default)]
    pub version: VaultKvVersion,
    /// Vault Enterprise namespace (`X-Vault-Namespace`) of every request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// PEM CA bundle that signs the server's certificate, Base64 encoded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_bundle: Option<String>,
    /// A Secret or ConfigMap key holding the CA bundle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_provider: Option<CaProvider>,
    /// A client certificate for servers that require mutual TLS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<VaultClientTls>,
    /// How the provider logs in: one method. Without one (as upstream allows) the provider uses
    /// its own `VAULT_TOKEN`, or none for a Vault Agent in front of Vault: the provider's identity.
    #[serde(default)]
    pub auth: VaultAuth,
    /// Vault Enterprise performance standbys: send each request with the last state index
    /// Vault returned (`X-Vault-Index`), so a read follows the writes this provider made.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub read_your_writes: bool,
    /// Vault Enterprise: ask a standby to forward a request it cannot serve consistently to
    /// the active node (`X-Vault-Inconsistent: forward-active-node`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub forward_inconsistent: bool,
    /// Extra HTTP headers sent with every request to Vault.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub headers: std::collections::BTreeMap<String, String>,
    /// KV v2 check-and-set on writes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_and_set: Option<VaultCheckAndSet>,
}

/// KV v2 check-and-set.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VaultCheckAndSet {
    /// Every write carries `options.cas` with the version it replaces (0 for a new secret), so
    /// a concurrent write is refused instead of overwritten; mounts with `cas_required` need it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub required: bool,
}

/// Version of a KV secrets engine.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum VaultKvVersion {
    /// KV version 1: unversioned values.
    #[serde(rename = "v1")]
    V1,
    /// KV version 2: versioned values with metadata.
    #[default]
    #[serde(rename = "v2")]
    V2,
}

/// A client certificate and key stored in Secrets.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VaultClientTls {
    /// Secret key holding the PEM client certificate (key `tls.crt` when `key` is unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert_secret_ref: Option<SecretKeySelector>,
    /// Secret key holding the PEM private key (key `tls.key` when `key` is unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_secret_ref: Option<SecretKeySelector>,
}

/// Login methods; exactly one is set.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VaultAuth {
    /// Vault namespace to log in to, when it differs from `spec.namespace`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// A Vault token stored in a Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_secret_ref: Option<SecretKeySelector>,
    /// AppRole login with a role ID and a secret ID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_role: Option<VaultAppRole>,
    /// Kubernetes auth method: a ServiceAccount token exchanged for a Vault token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes: Option<VaultKubernetesAuth>,
    /// JWT/OIDC auth method.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwt: Option<VaultJwtAuth>,
    /// LDAP auth method: a user name and its password.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ldap: Option<VaultUserPassAuth>,
    /// userpass auth method: a user name and its password.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_pass: Option<VaultUserPassAuth>,
    /// TLS certificate auth method: the client certificate presented on the login request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert: Option<VaultCertAuth>,
    /// AWS auth method, IAM type: a signed STS `GetCallerIdentity` request exchanged for a
    /// Vault token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iam: Option<VaultIamAuth>,
    /// GCP auth method, IAM type: a JWT signed for a Google service account through IAM
    /// Credentials `signJwt`, exchanged for a Vault token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gcp: Option<VaultGcpAuth>,
}

fn default_gcp_path() -> String {
    "gcp".to_string()
}

/// Vault's GCP auth method (upstream's `VaultGCPAuth`, release 2.9.0). `secretRef` and
/// `workloadIdentity` are the GCP Secret Manager provider's credentials ([`crate::gcp`]); without
/// either, upstream logs in with the GCE metadata server's identity, which Keyward does not
/// serve.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VaultGcpAuth {
    /// Mount path of the GCP auth method.
    #[serde(default = "default_gcp_path")]
    pub path: String,
    /// The Vault role (of type `iam`) to log in as.
    pub role: String,
    /// The project of the Google service account (for `workloadIdentity`'s cluster project).
    #[serde(rename = "projectID", default, skip_serializing_if = "String::is_empty")]
    pub project_id: String,
    /// Upstream's field; not used by the login.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub location: String,
    /// A service-account key (JSON) in a Secret: its account signs the login JWT.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<crate::gcp::GCPSMAuthSecretRef>,
    /// GKE Workload Identity: the Google service account the ServiceAccount's
    /// `iam.gke.io/gcp-service-account` annotation names signs the login JWT.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload_identity: Option<crate::gcp::GCPWorkloadIdentity>,
    /// Upstream: the controller Pod's own identity through GCE's metadata server (not served).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_ref: Option<ServiceAccountSelector>,
}

impl VaultGcpAuth {
    /// The credentials as the GCP Secret Manager provider's `auth` block names them.
    pub fn credentials(&self) -> crate::gcp::GCPSMAuth {
        crate::gcp::GCPSMAuth {
            secret_ref: self.secret_ref.clone(),
            workload_identity: self.workload_identity.clone(),
            workload_identity_federation: None,
        }
    }

    /// Whether this is upstream's GCE login (no `secretRef` or `workloadIdentity`), which reads
    /// the GCE metadata server's identity document: not served.
    pub fn is_gce(&self) -> bool {
        self.secret_ref.is_none() && self.workload_identity.is_none()
    }
}

impl VaultAuth {
    /// Names of the login methods that are set, in schema order.
    pub fn methods(&self) -> Vec<&'static str> {
        let mut set = Vec::new();
        if self.token_secret_ref.is_some() {
            set.push("tokenSecretRef");
        }
        if self.app_role.is_some() {
            set.push("appRole");
        }
        if self.kubernetes.is_some() {
            set.push("kubernetes");
        }
        if self.jwt.is_some() {
            set.push("jwt");
        }
        if self.ldap.is_some() {
            set.push("ldap");
        }
        if self.user_pass.is_some() {
            set.push("userPass");
        }
        if self.cert.is_some() {
            set.push("cert");
        }
        if self.iam.is_some() {
            set.push("iam");
        }
        if self.gcp.is_some() {
            set.push("gcp");
        }
        set
    }

    /// The login method set that Keyward's Vault provider does not serve (a store naming it is
    /// admitted with a warning and reports it unsupported): upstream's GCE login, `gcp` without
    /// `secretRef` or `workloadIdentity`.
    pub fn unserved(&self) -> Option<&'static str> {
        self.gcp.as_ref().filter(|g| g.is_gce()).map(|_| "gcp")
    }
}

fn default_approle_path() -> String {
    "approle".to_string()
}

fn default_kubernetes_path() -> String {
    "kubernetes".to_string()
}

fn default_jwt_path() -> String {
    "jwt".to_string()
}

fn default_cert_path() -> String {
    "cert".to_string()
}

/// Login with a user name and password (the `userpass` and `ldap` auth methods).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VaultUserPassAuth {
    /// Mount path of the auth method (upstream's default: `userpass` for userPass, `ldap` for
    /// ldap).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The user name.
    pub username: String,
    /// A Secret key holding the password.
    #[serde(default)]
    pub secret_ref: SecretKeySelector,
}

/// TLS certificate login.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VaultCertAuth {
    /// Mount path of the cert auth method.
    #[serde(default = "default_cert_path")]
    pub path: String,
    /// Name of the certificate role to log in as (Vault tries every role when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vault_role: Option<String>,
    /// A Secret key holding the PEM client certificate.
    #[serde(default)]
    pub client_cert: SecretKeySelector,
    /// A Secret key holding the PEM private key of the certificate.
    #[serde(default)]
    pub secret_ref: SecretKeySelector,
}

/// AppRole login.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VaultAppRole {
    /// Mount path of the AppRole auth method.
    #[serde(default = "default_approle_path")]
    pub path: String,
    /// The role ID, inline. Set this or `roleRef`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role_id: Option<String>,
    /// A Secret key holding the role ID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role_ref: Option<SecretKeySelector>,
    /// A Secret key holding the secret ID.
    pub secret_ref: SecretKeySelector,
}

/// Kubernetes auth method login.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VaultKubernetesAuth {
    /// Mount path of the Kubernetes auth method.
    #[serde(default = "default_kubernetes_path")]
    pub mount_path: String,
    /// Vault role to log in as.
    pub role: String,
    /// A ServiceAccount whose token the provider requests through the TokenRequest API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_ref: Option<ServiceAccountSelector>,
    /// A Secret key holding a ServiceAccount token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretKeySelector>,
}

/// JWT/OIDC auth method login.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VaultJwtAuth {
    /// Mount path of the JWT auth method.
    #[serde(default = "default_jwt_path")]
    pub path: String,
    /// Vault role to log in as (the auth method's default role when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// A Secret key holding the JWT.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretKeySelector>,
    /// A ServiceAccount token requested through the TokenRequest API, used as the JWT.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes_service_account_token: Option<VaultKubernetesServiceAccountTokenAuth>,
}

/// A ServiceAccount token used as a JWT.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VaultKubernetesServiceAccountTokenAuth {
    /// The ServiceAccount.
    pub service_account_ref: ServiceAccountSelector,
    /// Audiences of the token (default: `vault`), overriding `serviceAccountRef.audiences`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audiences: Option<Vec<String>>,
    /// Lifetime of the token in seconds (default 600).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiration_seconds: Option<i64>,
}

/// AWS auth method login, IAM type: the provider signs an STS `GetCallerIdentity` request with
/// AWS credentials and Vault has STS answer it, learning who signed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VaultIamAuth {
    /// Mount path of the AWS auth method (default `aws`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// AWS region the request is signed for (default `us-east-1`, signed for the global STS
    /// endpoint; another region is signed for its regional endpoint).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// ARN of an IAM role assumed (STS `AssumeRole`) with the credentials before signing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// Vault role to log in as.
    pub vault_role: String,
    /// External ID of the `AssumeRole` call for `role`.
    #[serde(default, rename = "externalID", skip_serializing_if = "Option::is_none")]
    pub external_id: Option<String>,
    /// Value of the `X-Vault-AWS-IAM-Server-ID` header, signed with the request, for an auth
    /// method configured with `iam_server_id_header_value`.
    #[serde(default, rename = "vaultAwsIamServerID", skip_serializing_if = "Option::is_none")]
    pub vault_aws_iam_server_id: Option<String>,
    /// Static access keys stored in Secrets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<AwsAuthSecretRef>,
    /// Web identity: a ServiceAccount token exchanged through STS `AssumeRoleWithWebIdentity`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwt: Option<VaultIamJwtAuth>,
}

/// Web identity credentials for the IAM login.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VaultIamJwtAuth {
    /// The ServiceAccount whose token is requested (audience `sts.amazonaws.com`, or its
    /// `eks.amazonaws.com/audience` annotation, plus its `audiences`); the role the token
    /// assumes is its `eks.amazonaws.com/role-arn` annotation.
    pub service_account_ref: ServiceAccountSelector,
}
