//! `provider.external-secrets.io/v2alpha1` **SecretsManager**: the configuration of the AWS
//! provider (always built; the webhook and the reconciler read it with `default-features =
//! false`), its rules, and upstream's `spec.provider.aws` store block, which translates into it.
//!
//! Field names follow upstream's `aws` store block (with `service: SecretsManager`), so a
//! `spec.provider.aws` block of an existing SecretStore reads as this spec plus the service it
//! names ([`store_spec`]). The credentials ([`AwsAuth`]) stay in `keyward_crds`: Vault's IAM login
//! and the AWS generators use them too.

use std::collections::BTreeMap;

pub use keyward_crds::aws_auth::{AwsAuth, AwsAuthSecretRef, AwsJwtAuth};
use keyward_crds::registry::{BlockError, ProviderKind, ProviderSpec, StoreBlock, admit_spec};
use keyward_crds::rules::{
    Ambient, NamedKind, NamedObject, Reach, ValidationErrors, check_aws_access_keys, check_aws_region, check_aws_role,
};
use keyward_crds::store_schema::field_schema;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

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
    /// The service a store's `spec.provider.aws` names, set by its translation ([`store_spec`]);
    /// not part of the kind's schema, so the API server prunes it from a `SecretsManager` object,
    /// which is Secrets Manager.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    pub service: Option<AwsService>,
}

impl SecretsManagerSpec {
    /// The service it reads and writes.
    pub fn service(&self) -> AwsService {
        self.service.unwrap_or_default()
    }
}

/// A tag.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct AwsTag {
    /// Tag key.
    pub key: String,
    /// Tag value.
    pub value: String,
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
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub custom_session_tags: BTreeMap<String, String>,
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

/// Validates a SecretsManager provider configuration.
pub fn validate_secrets_manager(spec: &SecretsManagerSpec) -> Result<(), ValidationErrors> {
    let mut errs = ValidationErrors::default();
    check_aws_region(&mut errs, "spec.region", &spec.region);
    if let Some(role) = &spec.role {
        check_aws_role(&mut errs, "spec.role", role);
    }
    for (i, role) in spec.additional_roles.iter().enumerate() {
        check_aws_role(&mut errs, &format!("spec.additionalRoles[{i}]"), role);
    }
    if let Some(auth) = &spec.auth {
        match (&auth.secret_ref, &auth.jwt) {
            (Some(s), None) => check_aws_access_keys(&mut errs, "spec.auth.secretRef", s),
            (None, Some(j)) if j.service_account_ref.name.is_empty() => {
                errs.push("spec.auth.jwt.serviceAccountRef.name", "must not be empty");
            }
            (None, Some(_)) => {}
            _ => {
                errs.push("spec.auth", "set exactly one of secretRef or jwt (or leave auth out for the default chain)")
            }
        }
    }
    if let Some(opts) = &spec.secrets_manager
        && let Some(days) = opts.recovery_window_in_days
    {
        if !(7..=30).contains(&days) {
            errs.push("spec.secretsManager.recoveryWindowInDays", format!("{days} is not between 7 and 30"));
        }
        if opts.force_delete_without_recovery {
            errs.push("spec.secretsManager", "set recoveryWindowInDays or forceDeleteWithoutRecovery, not both");
        }
    }
    for (i, t) in spec.session_tags.iter().enumerate() {
        if t.key.is_empty() {
            errs.push(format!("spec.sessionTags[{i}].key"), "must not be empty");
        }
    }
    if spec.service == Some(AwsService::CertificateManager) {
        errs.push("spec.service", "CertificateManager is not served by this controller");
    }
    errs.into_result()
}

/// What a `SecretsManager` configuration without credentials uses: the provider's own chain.
pub const AWS_DEFAULT_CHAIN: &str = "a SecretsManager config without spec.auth";

/// A `SecretsManager` configuration: its access key Secrets or web identity ServiceAccount, or
/// the provider's own credentials chain when it names neither.
pub fn secrets_manager_reach(spec: &SecretsManagerSpec) -> Reach<'_> {
    fn secret<'a>(field: &'a str, s: &'a keyward_crds::SecretKeySelector) -> NamedObject<'a> {
        NamedObject { field, kind: NamedKind::Secret, name: &s.name, namespace: s.namespace.as_deref() }
    }
    let mut named = Vec::new();
    let auth = spec.auth.as_ref();
    if let Some(s) = auth.and_then(|a| a.secret_ref.as_ref()) {
        named.push(secret("spec.auth.secretRef.accessKeyIDSecretRef", &s.access_key_id_secret_ref));
        named.push(secret("spec.auth.secretRef.secretAccessKeySecretRef", &s.secret_access_key_secret_ref));
        named.extend(
            s.session_token_secret_ref.as_ref().map(|t| secret("spec.auth.secretRef.sessionTokenSecretRef", t)),
        );
    }
    if let Some(j) = auth.and_then(|a| a.jwt.as_ref()) {
        let sa = &j.service_account_ref;
        named.push(NamedObject {
            field: "spec.auth.jwt.serviceAccountRef",
            kind: NamedKind::ServiceAccount,
            name: &sa.name,
            namespace: sa.namespace.as_deref(),
        });
    }
    let ambient = if named.is_empty() { vec![Ambient { field: "spec.auth", what: AWS_DEFAULT_CHAIN }] } else { vec![] };
    Reach { named, ambient, allow_remote_namespace_override: false }
}

impl ProviderSpec for SecretsManagerSpec {
    fn validate(&self) -> Result<(), ValidationErrors> {
        validate_secrets_manager(self)
    }
    fn reach(&self) -> Reach<'_> {
        secrets_manager_reach(self)
    }
}

/// The store CRDs' `spec.provider` field of the block, for its schema and description.
#[derive(JsonSchema)]
#[allow(dead_code)]
struct StoreField {
    /// AWS Secrets Manager or Parameter Store (served by the AWS provider).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    aws: Option<AwsStoreProvider>,
}

/// The `SecretsManager` configuration a store block stands for: its region, credentials, roles
/// and options, with the service it names.
pub fn store_spec(block: &AwsStoreProvider) -> SecretsManagerSpec {
    SecretsManagerSpec { service: Some(block.service), ..block.config.clone() }
}

fn translate(block: &serde_json::Value) -> Result<serde_json::Value, BlockError> {
    let unreadable = |e: serde_json::Error| BlockError::Unreadable(e.to_string());
    let block = AwsStoreProvider::deserialize(block).map_err(unreadable)?;
    if block.service == AwsService::CertificateManager {
        return Err(BlockError::NotServed { what: "service: CertificateManager".into(), checked: None });
    }
    serde_json::to_value(store_spec(&block)).map_err(unreadable)
}

/// Upstream's session tag settings, which Keyward does not apply.
fn warnings(block: &serde_json::Value) -> Vec<String> {
    let Ok(block) = AwsStoreProvider::deserialize(block) else { return Vec::new() };
    let mut out = Vec::new();
    if let Some(p) = block.session_tags_policy.as_deref().filter(|p| !p.is_empty() && *p != "None") {
        out.push(format!(
            "spec.sessionTagsPolicy: {p:?} is not applied by this controller (it behaves as None): no session tags \
             are derived from the ExternalSecret or PushSecret; set explicit sessionTags instead"
        ));
    }
    if !block.custom_session_tags.is_empty() {
        out.push(
            "spec.customSessionTags: not applied by this controller; set explicit sessionTags instead".to_string(),
        );
    }
    out
}

/// The registry row of `SecretsManager`: served by `keyward-provider-aws`, and by it also the
/// SecretStores with `spec.provider.aws` (upstream's block, translated; Secrets Manager and
/// Parameter Store are served, Certificate Manager is not).
pub static KIND: ProviderKind = ProviderKind {
    kind: "SecretsManager",
    plural: "secretsmanagers",
    provider: "aws",
    stores: &[StoreBlock {
        schema: Some(|| field_schema::<StoreField>("aws")),
        translate: Some(translate),
        warnings: Some(warnings),
        ..StoreBlock::spec("aws")
    }],
    admit: admit_spec::<SecretsManagerSpec>,
    crd: <SecretsManager as kube::CustomResourceExt>::crd,
};

#[cfg(test)]
#[path = "api_tests.rs"]
mod tests;
