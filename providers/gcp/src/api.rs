//! `provider.external-secrets.io/v2alpha1` **GCPSecretManager**: the configuration of the GCP
//! Secret Manager provider (always built; the webhook and the reconciler read it with
//! `default-features = false`).
//!
//! The spec is upstream External Secrets' `spec.provider.gcpsm` block field for field (same JSON
//! names), so a SecretStore's block translates 1:1: the project of the secrets (`projectID`),
//! regional secrets (`location`), what a read of `latest` does when that version is disabled
//! (`secretVersionSelectionPolicy`), and the credentials (`auth`): a service-account key in a
//! Secret, GKE Workload Identity, Workload Identity Federation, or none (the provider's own
//! identity, for the operator's configurations only).

use keyward_crds::SecretKeySelector;
use keyward_crds::provider_config::ServiceAccountSelector;
use keyward_crds::rules::{Ambient, FieldError, NamedKind, NamedObject, Reach, ValidationErrors};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Configuration of the GCP Secret Manager provider: the project and the credentials.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "provider.external-secrets.io",
    version = "v2alpha1",
    kind = "GCPSecretManager",
    doc = "GCPSecretManager configures the GCP Secret Manager provider: the project (and location) of the secrets and the Google credentials it reads them with.",
    plural = "gcpsecretmanagers",
    category = "external-secrets",
    namespaced,
    printcolumn = r#"{"name":"Project","type":"string","jsonPath":".spec.projectID"}"#,
    printcolumn = r#"{"name":"Location","type":"string","jsonPath":".spec.location"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
pub struct GCPSecretManagerSpec {
    /// The credentials. Empty: the provider process's own Google identity (Application Default
    /// Credentials), which only a configuration owned by the cluster operator may use.
    #[serde(default, skip_serializing_if = "GCPSMAuth::is_empty")]
    pub auth: GCPSMAuth,
    /// The project holding the secrets. Empty: `auth.workloadIdentity.clusterProjectID`, else
    /// the provider's `KEYWARD_GCP_PROJECT_ID`.
    #[serde(rename = "projectID", default, skip_serializing_if = "String::is_empty")]
    pub project_id: String,
    /// A location for regional secrets (`us-east1`): read and written at
    /// `projects/<project>/locations/<location>/secrets/…` through the regional endpoint.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub location: String,
    /// What a read without a version does when `latest` is disabled or destroyed.
    #[serde(rename = "secretVersionSelectionPolicy", default, skip_serializing_if = "Option::is_none")]
    pub secret_version_selection_policy: Option<SecretVersionSelectionPolicy>,
}

/// Upstream's `secretVersionSelectionPolicy`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum SecretVersionSelectionPolicy {
    /// Read `latest`, or fail when it is disabled or destroyed (the default).
    #[default]
    LatestOrFail,
    /// When `latest` is disabled or destroyed, read the newest enabled version.
    LatestOrFetch,
}

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

/// The field of the service-account key.
pub const KEY_FIELD: &str = "spec.auth.secretRef.secretAccessKeySecretRef";
/// The field of GKE Workload Identity's ServiceAccount.
pub const WI_FIELD: &str = "spec.auth.workloadIdentity.serviceAccountRef";
/// The field of Workload Identity Federation's ServiceAccount.
pub const WIF_SA_FIELD: &str = "spec.auth.workloadIdentityFederation.serviceAccountRef";
/// The field of Workload Identity Federation's credential configuration.
pub const WIF_CONFIG_FIELD: &str = "spec.auth.workloadIdentityFederation.credConfig";
/// The field of Workload Identity Federation's AWS credentials.
pub const WIF_AWS_FIELD: &str = "spec.auth.workloadIdentityFederation.awsSecurityCredentials.awsCredentialsSecretRef";
/// What the provider's own identity is called in refusals.
pub const OWN_IDENTITY: &str = "a gcpsm configuration without spec.auth (Application Default Credentials)";

/// A Secret Manager secret ID (and a location, a project): letters, digits, `-` and `_`, at
/// most 255 characters, as the API accepts them.
pub fn check_secret_id(id: &str) -> Result<(), String> {
    if id.is_empty() {
        return Err("is empty".into());
    }
    if id.len() > 255 {
        return Err(format!("is {} characters long, more than 255", id.len()));
    }
    if let Some(c) = id.chars().find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_')) {
        return Err(format!("has {c:?}: Secret Manager IDs hold letters, digits, - and _ only"));
    }
    Ok(())
}

/// A project ID or a location as they appear in resource names: lowercase letters, digits
/// and `-` (project IDs may carry a `domain:` prefix).
fn check_name_part(v: &str) -> Result<(), String> {
    let ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.' || c == ':';
    match v.chars().find(|c| !ok(*c)) {
        Some(c) => Err(format!("{v:?} has {c:?}: lowercase letters, digits, -, . and : only")),
        None if v.len() > 100 => Err(format!("{v:?} is longer than 100 characters")),
        None => Ok(()),
    }
}

fn require(errs: &mut Vec<FieldError>, field: &str, value: &str) {
    if value.is_empty() {
        errs.push(FieldError::new(field, "is required"));
    }
}

/// The field errors of a `GCPSecretManager` configuration, with paths as in the configuration
/// object (`spec.projectID`, `spec.auth.…`).
pub fn validate_gcpsm(spec: &GCPSecretManagerSpec) -> Result<(), ValidationErrors> {
    let mut errs = Vec::new();
    for (field, v) in [("spec.projectID", &spec.project_id), ("spec.location", &spec.location)] {
        if let Err(e) = check_name_part(v) {
            errs.push(FieldError::new(field, e));
        }
    }
    let auth = &spec.auth;
    if let Some(s) = &auth.secret_ref {
        let sel = &s.secret_access_key_secret_ref;
        require(&mut errs, &format!("{KEY_FIELD}.name"), &sel.name);
        require(&mut errs, &format!("{KEY_FIELD}.key"), sel.key.as_deref().unwrap_or_default());
        // Upstream: a key file has no project to fall back on.
        if spec.project_id.is_empty() {
            errs.push(FieldError::new("spec.projectID", "is required with spec.auth.secretRef"));
        }
    }
    if let Some(wi) = &auth.workload_identity {
        require(&mut errs, &format!("{WI_FIELD}.name"), &wi.service_account_ref.name);
        if let Err(e) = check_name_part(&wi.cluster_project_id) {
            errs.push(FieldError::new("spec.auth.workloadIdentity.clusterProjectID", e));
        }
    }
    if let Some(f) = &auth.workload_identity_federation {
        let base = "spec.auth.workloadIdentityFederation";
        let set = [f.cred_config.is_some(), f.service_account_ref.is_some(), f.aws_security_credentials.is_some()];
        if set.iter().filter(|s| **s).count() != 1 {
            errs.push(FieldError::new(
                base,
                "takes exactly one of credConfig, serviceAccountRef and awsSecurityCredentials",
            ));
        }
        if (f.service_account_ref.is_some() || f.aws_security_credentials.is_some()) && f.audience.is_empty() {
            errs.push(FieldError::new(
                format!("{base}.audience"),
                "is required with serviceAccountRef or awsSecurityCredentials: the workload identity provider's \
                 resource name",
            ));
        }
        if let Some(c) = &f.cred_config {
            require(&mut errs, &format!("{WIF_CONFIG_FIELD}.name"), &c.name);
            require(&mut errs, &format!("{WIF_CONFIG_FIELD}.key"), &c.key);
        }
        if let Some(a) = &f.aws_security_credentials {
            require(&mut errs, &format!("{base}.awsSecurityCredentials.region"), &a.region);
            if !a.region.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-') {
                errs.push(FieldError::new(
                    format!("{base}.awsSecurityCredentials.region"),
                    format!("{:?} is not an AWS region (lowercase letters, digits and -)", a.region),
                ));
            }
            match &a.aws_credentials_secret_ref {
                None => errs.push(FieldError::new(WIF_AWS_FIELD, "is required")),
                Some(r) => require(&mut errs, &format!("{WIF_AWS_FIELD}.name"), &r.name),
            }
        }
        if !f.gcp_service_account_email.is_empty() && !looks_like_email(&f.gcp_service_account_email) {
            errs.push(FieldError::new(
                format!("{base}.gcpServiceAccountEmail"),
                format!("{:?} is not a service account's e-mail address", f.gcp_service_account_email),
            ));
        }
    }
    ValidationErrors(errs).into_result()
}

/// A service account's e-mail: one `@`, no `/`, `:` or spaces (it becomes a path segment of
/// the IAM Credentials call).
pub fn looks_like_email(s: &str) -> bool {
    let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '@' | '.' | '-' | '_');
    s.matches('@').count() == 1 && s.chars().all(ok) && !s.starts_with('@') && !s.ends_with('@')
}

fn secret<'a>(field: &'a str, name: &'a str, namespace: Option<&'a str>) -> NamedObject<'a> {
    NamedObject { field, kind: NamedKind::Secret, name, namespace }
}

fn service_account<'a>(field: &'a str, s: &'a ServiceAccountSelector) -> NamedObject<'a> {
    NamedObject { field, kind: NamedKind::ServiceAccount, name: &s.name, namespace: s.namespace.as_deref() }
}

/// What a `GCPSecretManager` configuration reaches in the cluster: its key Secret, its
/// ServiceAccounts, its credential configuration and AWS credentials; and, without `auth`, the
/// provider's own identity.
pub fn gcpsm_reach(spec: &GCPSecretManagerSpec) -> Reach<'_> {
    let mut named = Vec::new();
    let auth = &spec.auth;
    if let Some(s) = &auth.secret_ref {
        let sel = &s.secret_access_key_secret_ref;
        named.push(secret(KEY_FIELD, &sel.name, sel.namespace.as_deref()));
    }
    if let Some(wi) = &auth.workload_identity {
        named.push(service_account(WI_FIELD, &wi.service_account_ref));
    }
    if let Some(f) = &auth.workload_identity_federation {
        named.extend(f.service_account_ref.as_ref().map(|s| service_account(WIF_SA_FIELD, s)));
        named.extend(f.cred_config.as_ref().map(|c| NamedObject {
            field: WIF_CONFIG_FIELD,
            kind: NamedKind::ConfigMap,
            name: &c.name,
            namespace: c.namespace.as_deref(),
        }));
        named.extend(
            f.aws_security_credentials
                .as_ref()
                .and_then(|a| a.aws_credentials_secret_ref.as_ref())
                .map(|r| secret(WIF_AWS_FIELD, &r.name, r.namespace.as_deref())),
        );
    }
    let ambient = if auth.is_empty() { vec![Ambient { field: "spec.auth", what: OWN_IDENTITY }] } else { vec![] };
    Reach { named, ambient, allow_remote_namespace_override: false }
}

impl keyward_crds::registry::ProviderSpec for GCPSecretManagerSpec {
    fn validate(&self) -> Result<(), ValidationErrors> {
        validate_gcpsm(self)
    }

    fn reach(&self) -> Reach<'_> {
        gcpsm_reach(self)
    }
}

/// The registry row of `GCPSecretManager`: served by `keyward-provider-gcp`, and by it also the
/// SecretStores with `spec.provider.gcpsm`.
pub static KIND: keyward_crds::registry::ProviderKind = keyward_crds::registry::ProviderKind {
    kind: "GCPSecretManager",
    plural: "gcpsecretmanagers",
    provider: "gcp",
    store_key: Some("gcpsm"),
    admit: keyward_crds::registry::admit_spec::<GCPSecretManagerSpec>,
    crd: <GCPSecretManager as kube::CustomResourceExt>::crd,
};

#[cfg(test)]
mod tests {
    use super::*;
    use keyward_crds::registry::ProviderSpec;
    use serde_json::json;

    fn fields(spec: &GCPSecretManagerSpec) -> Vec<String> {
        match spec.validate() {
            Ok(()) => Vec::new(),
            Err(e) => e.0.into_iter().map(|f| f.field).collect(),
        }
    }

    fn parse(v: serde_json::Value) -> GCPSecretManagerSpec {
        serde_json::from_value(v).expect("upstream's block")
    }

    #[test]
    fn upstream_docs_blocks_read_and_round_trip() {
        for block in [
            json!({"auth": {"secretRef": {"secretAccessKeySecretRef": {"name": "gcp-sa-secret", "key": "secret-access-credentials"}}}, "projectID": "p"}),
            json!({"projectID": "p"}),
            json!({"projectID": "p", "auth": {"workloadIdentity": {"serviceAccountRef": {"name": "demo-secrets-sa"}}}}),
            json!({"projectID": "p", "auth": {"workloadIdentity": {"clusterProjectID": "c", "clusterLocation": "europe-west1", "clusterName": "k", "serviceAccountRef": {"name": "demo-secrets-sa"}}}}),
            json!({"projectID": "p", "auth": {"workloadIdentityFederation": {"audience": "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/x", "serviceAccountRef": {"name": "demo-secrets-sa", "namespace": "demo", "audiences": ["demo-audience"]}}}}),
            json!({"projectID": "p", "location": "us-east1", "secretVersionSelectionPolicy": "LatestOrFetch"}),
        ] {
            let spec = parse(block.clone());
            assert_eq!(serde_json::to_value(&spec).expect("json"), block, "the same JSON names");
            assert_eq!(fields(&spec), Vec::<String>::new(), "{block}");
        }
    }

    #[test]
    fn field_errors_name_the_fields() {
        let spec =
            parse(json!({"auth": {"secretRef": {"secretAccessKeySecretRef": {"name": ""}}}, "location": "US East"}));
        assert_eq!(
            fields(&spec),
            [
                "spec.location",
                "spec.auth.secretRef.secretAccessKeySecretRef.name",
                "spec.auth.secretRef.secretAccessKeySecretRef.key",
                "spec.projectID"
            ]
        );
        let wif = parse(json!({"projectID": "p", "auth": {"workloadIdentityFederation": {
            "serviceAccountRef": {"name": "a"}, "credConfig": {"name": "c", "key": "k"}, "gcpServiceAccountEmail": "x/y"}}}));
        assert_eq!(
            fields(&wif),
            [
                "spec.auth.workloadIdentityFederation",
                "spec.auth.workloadIdentityFederation.audience",
                "spec.auth.workloadIdentityFederation.gcpServiceAccountEmail"
            ]
        );
        // The region names the STS host of the signed request: a region's characters only.
        let aws = parse(json!({"projectID": "p", "auth": {"workloadIdentityFederation": {"audience": "a",
            "awsSecurityCredentials": {"region": "evil.example/x", "awsCredentialsSecretRef": {"name": "aws"}}}}}));
        assert_eq!(fields(&aws), ["spec.auth.workloadIdentityFederation.awsSecurityCredentials.region"]);
    }

    #[test]
    fn reach_names_every_reference_and_the_own_identity() {
        let own = parse(json!({"projectID": "p"}));
        assert_eq!(own.reach().ambient.len(), 1);
        let wif = parse(json!({"projectID": "p", "auth": {"workloadIdentityFederation": {
            "audience": "a", "awsSecurityCredentials": {"region": "eu-west-1", "awsCredentialsSecretRef": {"name": "aws", "namespace": "other"}}}}}));
        let reach = wif.reach();
        assert!(reach.ambient.is_empty());
        let named: Vec<_> = reach.named.iter().map(|n| (n.field, n.name, n.namespace)).collect();
        assert_eq!(named, [(WIF_AWS_FIELD, "aws", Some("other"))]);
        let cm = parse(
            json!({"projectID": "p", "auth": {"workloadIdentityFederation": {"credConfig": {"name": "c", "key": "k"}}}}),
        );
        assert_eq!(cm.reach().named[0].kind, NamedKind::ConfigMap);
    }

    #[test]
    fn secret_ids() {
        assert_eq!(check_secret_id("db_Pass-1"), Ok(()));
        for bad in ["", "a/b", "..", "a.b", "a b", &"x".repeat(256)] {
            assert!(check_secret_id(bad).is_err(), "{bad}");
        }
        assert!(looks_like_email("sa@p.iam.gserviceaccount.com"));
        assert!(!looks_like_email("sa@p/x") && !looks_like_email("nobody"));
    }

    #[test]
    fn the_crd_is_namespaced_in_the_provider_group() {
        let crd = (KIND.crd)();
        assert_eq!(crd.spec.group, "provider.external-secrets.io");
        assert_eq!(crd.spec.names.plural, "gcpsecretmanagers");
        assert_eq!(crd.spec.scope, "Namespaced");
        let schema = serde_json::to_string(&crd.spec.versions[0].schema).expect("schema");
        for f in ["projectID", "secretVersionSelectionPolicy", "workloadIdentityFederation", "clusterProjectID"] {
            assert!(schema.contains(f), "{f}");
        }
    }
}
