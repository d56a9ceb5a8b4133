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

pub use keyward_crds::gcp::{
    AwsCredentialsConfig, ConfigMapReference, GCPSMAuth, GCPSMAuthSecretRef, GCPWorkloadIdentity,
    GCPWorkloadIdentityFederation, SecretReference,
};
use keyward_crds::rules::{
    FieldError, Reach, ValidationErrors, check_gcp_name_part, gcp_auth_reach, validate_gcp_auth,
};
pub use keyward_crds::rules::{
    GCP_KEY_FIELD as KEY_FIELD, GCP_WI_FIELD as WI_FIELD, GCP_WIF_AWS_FIELD as WIF_AWS_FIELD,
    GCP_WIF_CONFIG_FIELD as WIF_CONFIG_FIELD, GCP_WIF_SA_FIELD as WIF_SA_FIELD, looks_like_email,
};
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

/// The field errors of a `GCPSecretManager` configuration, with paths as in the configuration
/// object (`spec.projectID`, `spec.auth.…`).
pub fn validate_gcpsm(spec: &GCPSecretManagerSpec) -> Result<(), ValidationErrors> {
    let mut errs = Vec::new();
    for (field, v) in [("spec.projectID", &spec.project_id), ("spec.location", &spec.location)] {
        if let Err(e) = check_gcp_name_part(v) {
            errs.push(FieldError::new(field, e));
        }
    }
    errs.extend(validate_gcp_auth("spec", &spec.auth));
    // Upstream: a key file has no project to fall back on.
    if spec.auth.secret_ref.is_some() && spec.project_id.is_empty() {
        errs.push(FieldError::new("spec.projectID", "is required with spec.auth.secretRef"));
    }
    ValidationErrors(errs).into_result()
}

/// What a `GCPSecretManager` configuration reaches in the cluster: its key Secret, its
/// ServiceAccounts, its credential configuration and AWS credentials; and, without `auth`, the
/// provider's own identity.
pub fn gcpsm_reach(spec: &GCPSecretManagerSpec) -> Reach<'_> {
    gcp_auth_reach(&spec.auth, OWN_IDENTITY)
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
    stores: &[keyward_crds::registry::StoreBlock::spec("gcpsm")],
    admit: keyward_crds::registry::admit_spec::<GCPSecretManagerSpec>,
    crd: <GCPSecretManager as kube::CustomResourceExt>::crd,
};

#[cfg(test)]
mod tests {
    use super::*;
    use keyward_crds::registry::ProviderSpec;
    use keyward_crds::rules::NamedKind;
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
