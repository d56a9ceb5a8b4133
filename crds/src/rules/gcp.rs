//! Google Cloud credentials (`auth`, [`crate::gcp::GCPSMAuth`]) and the GCRAccessToken spec:
//! what the GCP provider needs before it asks Google anything, checked at admission (naming the
//! field) and again by the provider before each use. A GCPSecretManager configuration and a
//! GCRAccessToken write `auth` alike, so both are checked by [`validate_gcp_auth`] and reach the
//! cluster through [`gcp_auth_reach`]; who may use which identity (the tenant boundary) is the
//! provider's check, as for every store.

use super::{Ambient, FieldError, NamedKind, NamedObject, Reach};
use crate::gcp::GCPSMAuth;
use crate::generators::GcrAccessTokenSpec;
use crate::provider_config::ServiceAccountSelector;

/// The field of the service-account key.
pub const GCP_KEY_FIELD: &str = "spec.auth.secretRef.secretAccessKeySecretRef";
/// The field of GKE Workload Identity's ServiceAccount.
pub const GCP_WI_FIELD: &str = "spec.auth.workloadIdentity.serviceAccountRef";
/// The field of Workload Identity Federation's ServiceAccount.
pub const GCP_WIF_SA_FIELD: &str = "spec.auth.workloadIdentityFederation.serviceAccountRef";
/// The field of Workload Identity Federation's credential configuration.
pub const GCP_WIF_CONFIG_FIELD: &str = "spec.auth.workloadIdentityFederation.credConfig";
/// The field of Workload Identity Federation's AWS credentials.
pub const GCP_WIF_AWS_FIELD: &str =
    "spec.auth.workloadIdentityFederation.awsSecurityCredentials.awsCredentialsSecretRef";

/// What a credential configuration is called in refusals: its `credential_source` (a file, a
/// URL) is read in the provider's own environment, so using one is acting as the provider.
pub const CRED_CONFIG_IDENTITY: &str =
    "workloadIdentityFederation.credConfig (its credential_source is a file or URL of the provider's own environment)";

/// A project ID or a location as they appear in resource names: lowercase letters, digits
/// and `-` (project IDs may carry a `domain:` prefix).
pub fn check_gcp_name_part(v: &str) -> Result<(), String> {
    let ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.' || c == ':';
    match v.chars().find(|c| !ok(*c)) {
        Some(c) => Err(format!("{v:?} has {c:?}: lowercase letters, digits, -, . and : only")),
        None if v.len() > 100 => Err(format!("{v:?} is longer than 100 characters")),
        None => Ok(()),
    }
}

/// A service account's e-mail: one `@`, no `/`, `:` or spaces (it becomes a path segment of
/// the IAM Credentials call).
pub fn looks_like_email(s: &str) -> bool {
    let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '@' | '.' | '-' | '_');
    s.matches('@').count() == 1 && s.chars().all(ok) && !s.starts_with('@') && !s.ends_with('@')
}

fn require(errs: &mut Vec<FieldError>, field: String, value: &str) {
    if value.is_empty() {
        errs.push(FieldError::new(field, "is required"));
    }
}

/// The field errors of `auth` at `path` (`spec`, or a ClusterGenerator's
/// `spec.generator.gcrAccessTokenSpec`): each method's required fields, one subject token
/// source for Workload Identity Federation, an AWS region's characters, an e-mail's shape.
pub fn validate_gcp_auth(path: &str, auth: &GCPSMAuth) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let base = format!("{path}.auth");
    if let Some(s) = &auth.secret_ref {
        let sel = &s.secret_access_key_secret_ref;
        let field = format!("{base}.secretRef.secretAccessKeySecretRef");
        require(&mut errs, format!("{field}.name"), &sel.name);
        require(&mut errs, format!("{field}.key"), sel.key.as_deref().unwrap_or_default());
    }
    if let Some(wi) = &auth.workload_identity {
        require(&mut errs, format!("{base}.workloadIdentity.serviceAccountRef.name"), &wi.service_account_ref.name);
        if let Err(e) = check_gcp_name_part(&wi.cluster_project_id) {
            errs.push(FieldError::new(format!("{base}.workloadIdentity.clusterProjectID"), e));
        }
    }
    if let Some(f) = &auth.workload_identity_federation {
        let base = format!("{base}.workloadIdentityFederation");
        let set = [f.cred_config.is_some(), f.service_account_ref.is_some(), f.aws_security_credentials.is_some()];
        if set.iter().filter(|s| **s).count() != 1 {
            errs.push(FieldError::new(
                base.clone(),
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
            require(&mut errs, format!("{base}.credConfig.name"), &c.name);
            require(&mut errs, format!("{base}.credConfig.key"), &c.key);
        }
        if let Some(a) = &f.aws_security_credentials {
            let region = format!("{base}.awsSecurityCredentials.region");
            require(&mut errs, region.clone(), &a.region);
            if !a.region.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-') {
                errs.push(FieldError::new(
                    region,
                    format!("{:?} is not an AWS region (lowercase letters, digits and -)", a.region),
                ));
            }
            let field = format!("{base}.awsSecurityCredentials.awsCredentialsSecretRef");
            match &a.aws_credentials_secret_ref {
                None => errs.push(FieldError::new(field, "is required")),
                Some(r) => require(&mut errs, format!("{field}.name"), &r.name),
            }
        }
        if !f.gcp_service_account_email.is_empty() && !looks_like_email(&f.gcp_service_account_email) {
            errs.push(FieldError::new(
                format!("{base}.gcpServiceAccountEmail"),
                format!("{:?} is not a service account's e-mail address", f.gcp_service_account_email),
            ));
        }
    }
    errs
}

fn secret<'a>(field: &'a str, name: &'a str, namespace: Option<&'a str>) -> NamedObject<'a> {
    NamedObject { field, kind: NamedKind::Secret, name, namespace }
}

fn service_account<'a>(field: &'a str, s: &'a ServiceAccountSelector) -> NamedObject<'a> {
    NamedObject { field, kind: NamedKind::ServiceAccount, name: &s.name, namespace: s.namespace.as_deref() }
}

/// What `auth` reaches in the cluster (its key Secret, its ServiceAccounts, its credential
/// configuration and AWS credentials, at the fields of an object's `spec.auth`), and, when it
/// names none, the provider's own identity, called `own` in refusals.
pub fn gcp_auth_reach<'a>(auth: &'a GCPSMAuth, own: &'static str) -> Reach<'a> {
    let mut named = Vec::new();
    if let Some(s) = &auth.secret_ref {
        let sel = &s.secret_access_key_secret_ref;
        named.push(secret(GCP_KEY_FIELD, &sel.name, sel.namespace.as_deref()));
    }
    if let Some(wi) = &auth.workload_identity {
        named.push(service_account(GCP_WI_FIELD, &wi.service_account_ref));
    }
    if let Some(f) = &auth.workload_identity_federation {
        named.extend(f.service_account_ref.as_ref().map(|s| service_account(GCP_WIF_SA_FIELD, s)));
        named.extend(f.cred_config.as_ref().map(|c| NamedObject {
            field: GCP_WIF_CONFIG_FIELD,
            kind: NamedKind::ConfigMap,
            name: &c.name,
            namespace: c.namespace.as_deref(),
        }));
        named.extend(
            f.aws_security_credentials
                .as_ref()
                .and_then(|a| a.aws_credentials_secret_ref.as_ref())
                .map(|r| secret(GCP_WIF_AWS_FIELD, &r.name, r.namespace.as_deref())),
        );
    }
    let mut ambient = if auth.is_empty() { vec![Ambient { field: "spec.auth", what: own }] } else { vec![] };
    if auth.workload_identity_federation.as_ref().is_some_and(|f| f.cred_config.is_some()) {
        ambient.push(Ambient { field: GCP_WIF_CONFIG_FIELD, what: CRED_CONFIG_IDENTITY });
    }
    Reach { named, ambient, allow_remote_namespace_override: false }
}

/// The field errors of a GCRAccessToken spec at `path` (`spec`, or a ClusterGenerator's
/// `spec.generator.gcrAccessTokenSpec`): the project (upstream requires it), and `auth`.
pub fn validate_gcr_access_token(path: &str, spec: &GcrAccessTokenSpec) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let project = format!("{path}.projectID");
    if spec.project_id.is_empty() {
        errs.push(FieldError::new(project, "is required: the project whose registry the token is for"));
    } else if let Err(e) = check_gcp_name_part(&spec.project_id) {
        errs.push(FieldError::new(project, e));
    }
    errs.extend(validate_gcp_auth(path, &spec.auth));
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields(spec: serde_json::Value) -> Vec<String> {
        let spec: GcrAccessTokenSpec = serde_json::from_value(spec).expect("a GCRAccessToken spec");
        validate_gcr_access_token("spec", &spec).into_iter().map(|e| e.field).collect()
    }

    /// Upstream's examples (release 2.9.0, docs/snippets/generator-gcr.yaml): each method.
    #[test]
    fn upstreams_examples_are_valid() {
        for auth in [
            json!({"secretRef": {"secretAccessKeySecretRef": {"name": "gcp-sa", "key": "key.json"}}}),
            json!({"workloadIdentity": {"clusterLocation": "europe-west1", "clusterName": "c",
                                        "clusterProjectID": "p", "serviceAccountRef": {"name": "sa"}}}),
            json!({"workloadIdentityFederation": {"audience": "//iam.googleapis.com/x",
                                                  "serviceAccountRef": {"name": "sa"}}}),
            json!({}),
        ] {
            assert_eq!(fields(json!({"projectID": "my-project", "auth": auth})), Vec::<String>::new(), "{auth}");
        }
    }

    #[test]
    fn errors_name_the_fields() {
        assert_eq!(
            fields(json!({"projectID": "", "auth": {"secretRef": {"secretAccessKeySecretRef": {"name": "s"}}}})),
            ["spec.projectID", "spec.auth.secretRef.secretAccessKeySecretRef.key"]
        );
        let wif = json!({"projectID": "My Project", "auth": {"workloadIdentityFederation": {
            "serviceAccountRef": {"name": "a"}, "awsSecurityCredentials": {"region": "x/y"},
            "gcpServiceAccountEmail": "nobody"}}});
        assert_eq!(
            fields(wif),
            [
                "spec.projectID",
                "spec.auth.workloadIdentityFederation",
                "spec.auth.workloadIdentityFederation.audience",
                "spec.auth.workloadIdentityFederation.awsSecurityCredentials.region",
                "spec.auth.workloadIdentityFederation.awsSecurityCredentials.awsCredentialsSecretRef",
                "spec.auth.workloadIdentityFederation.gcpServiceAccountEmail",
            ]
        );
        let spec: GcrAccessTokenSpec = serde_json::from_value(
            json!({"projectID": "p", "auth": {"workloadIdentity": {"serviceAccountRef": {"name": ""}}}}),
        )
        .expect("spec");
        let at = validate_gcr_access_token("spec.generator.gcrAccessTokenSpec", &spec);
        assert_eq!(at[0].field, "spec.generator.gcrAccessTokenSpec.auth.workloadIdentity.serviceAccountRef.name");
    }

    #[test]
    fn reach_names_every_reference_and_the_own_identity() {
        let spec: GcrAccessTokenSpec = serde_json::from_value(json!({"projectID": "p", "auth": {
            "workloadIdentityFederation": {"audience": "a", "credConfig": {"name": "c", "key": "k", "namespace": "o"}}}}))
        .expect("spec");
        let reach = gcp_auth_reach(&spec.auth, "own");
        assert_eq!(reach.ambient, [Ambient { field: GCP_WIF_CONFIG_FIELD, what: CRED_CONFIG_IDENTITY }]);
        assert_eq!(
            reach.named.iter().map(|n| (n.field, n.kind, n.namespace)).collect::<Vec<_>>(),
            [(GCP_WIF_CONFIG_FIELD, NamedKind::ConfigMap, Some("o"))]
        );
        let none = GcrAccessTokenSpec { project_id: "p".into(), ..Default::default() };
        assert_eq!(gcp_auth_reach(&none.auth, "own").ambient.len(), 1, "the provider's own identity");
        assert!(looks_like_email("sa@p.iam.gserviceaccount.com"));
        assert!(!looks_like_email("sa@p/x") && !looks_like_email("nobody"));
    }
}
