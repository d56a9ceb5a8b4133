//! Generator references: which kinds are served, and which namespaces may use a
//! ClusterGenerator (the conditions rule of ClusterProviders, [`conditions_admit`]).

use super::namespace::{NamespaceView, conditions_admit};
use crate::external_secret::GeneratorRef;
use crate::generators::{
    AcrAccessTokenSpec, BeyondtrustWorkloadCredentialsDynamicSecretSpec, CloudsmithAccessTokenSpec,
    ClusterGeneratorSpec, EcrAuthorizationTokenSpec, FakeSpec, GENERATOR_API_VERSION, GcrAccessTokenSpec,
    GeneratorKind, GeneratorSpec, GithubAccessTokenSpec, GitlabDeployTokenSpec, GrafanaSpec, MfaSpec, PasswordSpec,
    QuayAccessTokenSpec, SshKeySpec, StsSessionTokenSpec, UuidSpec, VaultDynamicSecretSpec, WebhookGeneratorSpec,
};
use crate::provider::ClusterProviderCondition;

/// The kind `generatorRef.kind` names for a ClusterGenerator.
pub const CLUSTER_GENERATOR_KIND: &str = "ClusterGenerator";

/// Whether `kind` is one of upstream's generator kinds that Keyward does not serve (they call
/// out to a service, or keep state): named in the refusal so a manifest's author knows it is not
/// a typo. Their CRDs are installed, so upstream's manifests apply; a kind is served when it has
/// a row in [`crate::generators::GENERATOR_KINDS`] ([`GeneratorKind::served`]).
pub fn is_unserved_generator_kind(kind: &str) -> bool {
    GeneratorKind::parse(kind).is_some_and(|k| !k.served())
}

/// What a `generatorRef` points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GeneratorTarget {
    /// A namespaced generator of this kind, in the namespace of the ExternalSecret or PushSecret.
    Namespaced(GeneratorKind),
    /// A cluster-scoped ClusterGenerator, subject to its namespace conditions.
    Cluster,
}

/// Checks a `generatorRef` names a served kind of Keyward's generator API version; the message
/// says what to change.
pub fn generator_target(r: &GeneratorRef) -> Result<GeneratorTarget, String> {
    if let Some(v) = r.api_version.as_deref().filter(|v| *v != GENERATOR_API_VERSION) {
        return Err(format!("apiVersion {v:?} is not served: use {GENERATOR_API_VERSION:?}"));
    }
    if r.kind == CLUSTER_GENERATOR_KIND {
        return Ok(GeneratorTarget::Cluster);
    }
    if let Some(k) = GeneratorKind::parse(&r.kind).filter(|k| k.served()) {
        return Ok(GeneratorTarget::Namespaced(k));
    }
    let served = served_kinds();
    if is_unserved_generator_kind(&r.kind) {
        Err(not_served(&r.kind))
    } else {
        Err(format!("unknown generator kind {:?}: use one of {served}", r.kind))
    }
}

/// The warning for a `generatorRef` to one of upstream's generator kinds Keyward does not
/// serve: such a reference is admitted, so upstream's manifests apply unchanged, and the object
/// reports `Ready=False` with [`generator_target`]'s message where the generator is used.
pub fn unserved_generator_warning(r: &GeneratorRef) -> Option<String> {
    let upstream_api = r.api_version.as_deref().is_none_or(|v| v == GENERATOR_API_VERSION);
    (upstream_api && is_unserved_generator_kind(&r.kind)).then(|| {
        format!(
            "generator kind {:?} is not served by Keyward: the object is admitted and reports Ready=False until it \
             names one of {}",
            r.kind,
            served_kinds()
        )
    })
}

/// The message for a generator of a kind Keyward does not serve: where a reference names one,
/// and where a ClusterGenerator holds one.
pub fn not_served(kind: &str) -> String {
    format!("generator kind {kind:?} is not served by Keyward (it serves {})", served_kinds())
}

fn served_kinds() -> String {
    let mut kinds: Vec<&str> = GeneratorKind::ALL.iter().filter(|k| k.served()).map(|k| k.as_str()).collect();
    kinds.push(CLUSTER_GENERATOR_KIND);
    kinds.join(", ")
}

/// A namespace that no condition of a ClusterGenerator admits. As for ClusterProviders, the
/// message names only the ClusterGenerator and the namespace; why each condition failed
/// ([`Self::detail`]) is for the operator's logs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "ClusterGenerator {name:?} does not allow namespace {namespace:?}: its spec.conditions do not admit the namespace"
)]
pub struct GeneratorNamespaceDenied {
    /// The ClusterGenerator's name.
    pub name: String,
    /// The namespace that was refused.
    pub namespace: String,
    /// Why each condition failed, one entry per condition.
    pub reasons: Vec<String>,
}

impl GeneratorNamespaceDenied {
    /// Why each condition failed, for the operator's logs (never for the namespace owner).
    pub fn detail(&self) -> String {
        self.reasons.join("; ")
    }
}

/// Checks a namespace against a ClusterGenerator's conditions, with the rule of ClusterProviders.
pub fn check_generator_namespace_admitted(
    name: &str,
    conditions: &[ClusterProviderCondition],
    namespace: NamespaceView<'_>,
) -> Result<(), GeneratorNamespaceDenied> {
    conditions_admit(conditions, namespace).map_err(|reasons| GeneratorNamespaceDenied {
        name: name.to_string(),
        namespace: namespace.name.to_string(),
        reasons,
    })
}

/// The spec of one generator kind, borrowed from a namespaced generator or a ClusterGenerator.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum AnyGeneratorSpec<'a> {
    /// A Password spec.
    Password(&'a PasswordSpec),
    /// A UUID spec.
    Uuid(&'a UuidSpec),
    /// An SSHKey spec.
    SshKey(&'a SshKeySpec),
    /// A Fake spec.
    Fake(&'a FakeSpec),
    /// A VaultDynamicSecret spec (generated by the Vault provider).
    VaultDynamicSecret(&'a VaultDynamicSecretSpec),
    /// An ECRAuthorizationToken spec (generated by the AWS provider).
    EcrAuthorizationToken(&'a EcrAuthorizationTokenSpec),
    /// An STSSessionToken spec (generated by the AWS provider).
    StsSessionToken(&'a StsSessionTokenSpec),
    /// A Webhook spec (generated by the webhook provider).
    Webhook(&'a WebhookGeneratorSpec),
    /// An ACRAccessToken spec (generated by the Azure provider).
    AcrAccessToken(&'a AcrAccessTokenSpec),
    /// A GCRAccessToken spec (generated by the GCP provider).
    GcrAccessToken(&'a GcrAccessTokenSpec),
    /// An MFA spec.
    Mfa(&'a MfaSpec),
    /// A GithubAccessToken spec (not served).
    GithubAccessToken(&'a GithubAccessTokenSpec),
    /// A GitlabDeployToken spec (not served).
    GitlabDeployToken(&'a GitlabDeployTokenSpec),
    /// A QuayAccessToken spec (not served).
    QuayAccessToken(&'a QuayAccessTokenSpec),
    /// A CloudsmithAccessToken spec (not served).
    CloudsmithAccessToken(&'a CloudsmithAccessTokenSpec),
    /// A Grafana spec (not served).
    Grafana(&'a GrafanaSpec),
    /// A BeyondtrustWorkloadCredentialsDynamicSecret spec (not served).
    BeyondtrustWorkloadCredentialsDynamicSecret(&'a BeyondtrustWorkloadCredentialsDynamicSecretSpec),
}

impl AnyGeneratorSpec<'_> {
    /// The kind of the spec.
    pub fn kind(&self) -> GeneratorKind {
        match self {
            AnyGeneratorSpec::Password(_) => GeneratorKind::Password,
            AnyGeneratorSpec::Uuid(_) => GeneratorKind::Uuid,
            AnyGeneratorSpec::SshKey(_) => GeneratorKind::SshKey,
            AnyGeneratorSpec::Fake(_) => GeneratorKind::Fake,
            AnyGeneratorSpec::VaultDynamicSecret(_) => GeneratorKind::VaultDynamicSecret,
            AnyGeneratorSpec::EcrAuthorizationToken(_) => GeneratorKind::EcrAuthorizationToken,
            AnyGeneratorSpec::StsSessionToken(_) => GeneratorKind::StsSessionToken,
            AnyGeneratorSpec::Webhook(_) => GeneratorKind::Webhook,
            AnyGeneratorSpec::AcrAccessToken(_) => GeneratorKind::AcrAccessToken,
            AnyGeneratorSpec::GcrAccessToken(_) => GeneratorKind::GcrAccessToken,
            AnyGeneratorSpec::Mfa(_) => GeneratorKind::Mfa,
            AnyGeneratorSpec::GithubAccessToken(_) => GeneratorKind::GithubAccessToken,
            AnyGeneratorSpec::GitlabDeployToken(_) => GeneratorKind::GitlabDeployToken,
            AnyGeneratorSpec::QuayAccessToken(_) => GeneratorKind::QuayAccessToken,
            AnyGeneratorSpec::CloudsmithAccessToken(_) => GeneratorKind::CloudsmithAccessToken,
            AnyGeneratorSpec::Grafana(_) => GeneratorKind::Grafana,
            AnyGeneratorSpec::BeyondtrustWorkloadCredentialsDynamicSecret(_) => {
                GeneratorKind::BeyondtrustWorkloadCredentialsDynamicSecret
            }
        }
    }

    /// The spec as JSON, as the manifest writes it (what a provider process that generates
    /// the kind is sent).
    pub fn to_json(&self) -> Result<serde_json::Value, serde_json::Error> {
        match self {
            AnyGeneratorSpec::Password(s) => serde_json::to_value(s),
            AnyGeneratorSpec::Uuid(s) => serde_json::to_value(s),
            AnyGeneratorSpec::SshKey(s) => serde_json::to_value(s),
            AnyGeneratorSpec::Fake(s) => serde_json::to_value(s),
            AnyGeneratorSpec::VaultDynamicSecret(s) => serde_json::to_value(s),
            AnyGeneratorSpec::EcrAuthorizationToken(s) => serde_json::to_value(s),
            AnyGeneratorSpec::StsSessionToken(s) => serde_json::to_value(s),
            AnyGeneratorSpec::Webhook(s) => serde_json::to_value(s),
            AnyGeneratorSpec::AcrAccessToken(s) => serde_json::to_value(s),
            AnyGeneratorSpec::GcrAccessToken(s) => serde_json::to_value(s),
            AnyGeneratorSpec::Mfa(s) => serde_json::to_value(s),
            AnyGeneratorSpec::GithubAccessToken(s) => serde_json::to_value(s),
            AnyGeneratorSpec::GitlabDeployToken(s) => serde_json::to_value(s),
            AnyGeneratorSpec::QuayAccessToken(s) => serde_json::to_value(s),
            AnyGeneratorSpec::CloudsmithAccessToken(s) => serde_json::to_value(s),
            AnyGeneratorSpec::Grafana(s) => serde_json::to_value(s),
            AnyGeneratorSpec::BeyondtrustWorkloadCredentialsDynamicSecret(s) => serde_json::to_value(s),
        }
    }
}

/// The spec a ClusterGenerator holds: the field of `spec.generator` that matches `spec.kind`,
/// and no other.
pub fn cluster_generator_spec(spec: &ClusterGeneratorSpec) -> Result<AnyGeneratorSpec<'_>, String> {
    let g = &spec.generator;
    let set = [
        g.password_spec.is_some(),
        g.uuid_spec.is_some(),
        g.ssh_key_spec.is_some(),
        g.fake_spec.is_some(),
        g.vault_dynamic_secret_spec.is_some(),
        g.ecr_authorization_token_spec.is_some(),
        g.sts_session_token_spec.is_some(),
        g.webhook_spec.is_some(),
        g.acr_access_token_spec.is_some(),
        g.gcr_access_token_spec.is_some(),
        g.mfa_spec.is_some(),
        g.github_access_token_spec.is_some(),
        g.gitlab_deploy_token_spec.is_some(),
        g.quay_access_token_spec.is_some(),
        g.cloudsmith_access_token_spec.is_some(),
        g.grafana_spec.is_some(),
        g.beyondtrust_workload_credentials_dynamic_secret_spec.is_some(),
    ]
    .into_iter()
    .filter(|s| *s)
    .count();
    let found = spec_of_kind(spec.kind, g);
    let field = super::generator_specs::generator_spec_field(spec.kind);
    match found {
        Some(s) if set == 1 => Ok(s),
        Some(_) => Err(format!("spec.generator sets several specs; set only {field} for kind {}", spec.kind)),
        None => Err(format!("spec.generator.{field} is required for kind {}", spec.kind)),
    }
}

/// The field of `g` that holds a spec of `kind`, if set.
pub fn spec_of_kind(kind: GeneratorKind, g: &GeneratorSpec) -> Option<AnyGeneratorSpec<'_>> {
    match kind {
        GeneratorKind::Password => g.password_spec.as_ref().map(AnyGeneratorSpec::Password),
        GeneratorKind::Uuid => g.uuid_spec.as_ref().map(AnyGeneratorSpec::Uuid),
        GeneratorKind::SshKey => g.ssh_key_spec.as_ref().map(AnyGeneratorSpec::SshKey),
        GeneratorKind::Fake => g.fake_spec.as_ref().map(AnyGeneratorSpec::Fake),
        GeneratorKind::VaultDynamicSecret => {
            g.vault_dynamic_secret_spec.as_ref().map(AnyGeneratorSpec::VaultDynamicSecret)
        }
        GeneratorKind::EcrAuthorizationToken => {
            g.ecr_authorization_token_spec.as_ref().map(AnyGeneratorSpec::EcrAuthorizationToken)
        }
        GeneratorKind::StsSessionToken => g.sts_session_token_spec.as_ref().map(AnyGeneratorSpec::StsSessionToken),
        GeneratorKind::Webhook => g.webhook_spec.as_ref().map(AnyGeneratorSpec::Webhook),
        GeneratorKind::AcrAccessToken => g.acr_access_token_spec.as_ref().map(AnyGeneratorSpec::AcrAccessToken),
        GeneratorKind::GcrAccessToken => g.gcr_access_token_spec.as_ref().map(AnyGeneratorSpec::GcrAccessToken),
        GeneratorKind::Mfa => g.mfa_spec.as_ref().map(AnyGeneratorSpec::Mfa),
        GeneratorKind::GithubAccessToken => {
            g.github_access_token_spec.as_ref().map(AnyGeneratorSpec::GithubAccessToken)
        }
        GeneratorKind::GitlabDeployToken => {
            g.gitlab_deploy_token_spec.as_ref().map(AnyGeneratorSpec::GitlabDeployToken)
        }
        GeneratorKind::QuayAccessToken => g.quay_access_token_spec.as_ref().map(AnyGeneratorSpec::QuayAccessToken),
        GeneratorKind::CloudsmithAccessToken => {
            g.cloudsmith_access_token_spec.as_ref().map(AnyGeneratorSpec::CloudsmithAccessToken)
        }
        GeneratorKind::Grafana => g.grafana_spec.as_ref().map(AnyGeneratorSpec::Grafana),
        GeneratorKind::BeyondtrustWorkloadCredentialsDynamicSecret => g
            .beyondtrust_workload_credentials_dynamic_secret_spec
            .as_ref()
            .map(AnyGeneratorSpec::BeyondtrustWorkloadCredentialsDynamicSecret),
    }
}

/// A namespaced generator's `spec` (a Password's, a Webhook's, …) read as its kind's type, in
/// the field of [`GeneratorSpec`] that kind uses (admission reads it from the review's tree).
pub fn read_generator_spec<'de, D: serde::Deserializer<'de>>(
    kind: GeneratorKind,
    spec: D,
) -> Result<GeneratorSpec, D::Error> {
    use serde::Deserialize;
    let mut g = GeneratorSpec::default();
    match kind {
        GeneratorKind::Password => g.password_spec = Some(Deserialize::deserialize(spec)?),
        GeneratorKind::Uuid => g.uuid_spec = Some(Deserialize::deserialize(spec)?),
        GeneratorKind::SshKey => g.ssh_key_spec = Some(Deserialize::deserialize(spec)?),
        GeneratorKind::Fake => g.fake_spec = Some(Deserialize::deserialize(spec)?),
        GeneratorKind::VaultDynamicSecret => g.vault_dynamic_secret_spec = Some(Deserialize::deserialize(spec)?),
        GeneratorKind::EcrAuthorizationToken => g.ecr_authorization_token_spec = Some(Deserialize::deserialize(spec)?),
        GeneratorKind::StsSessionToken => g.sts_session_token_spec = Some(Deserialize::deserialize(spec)?),
        GeneratorKind::Webhook => g.webhook_spec = Some(Deserialize::deserialize(spec)?),
        GeneratorKind::AcrAccessToken => g.acr_access_token_spec = Some(Deserialize::deserialize(spec)?),
        GeneratorKind::GcrAccessToken => g.gcr_access_token_spec = Some(Deserialize::deserialize(spec)?),
        GeneratorKind::Mfa => g.mfa_spec = Some(Deserialize::deserialize(spec)?),
        GeneratorKind::GithubAccessToken => g.github_access_token_spec = Some(Deserialize::deserialize(spec)?),
        GeneratorKind::GitlabDeployToken => g.gitlab_deploy_token_spec = Some(Deserialize::deserialize(spec)?),
        GeneratorKind::QuayAccessToken => g.quay_access_token_spec = Some(Deserialize::deserialize(spec)?),
        GeneratorKind::CloudsmithAccessToken => g.cloudsmith_access_token_spec = Some(Deserialize::deserialize(spec)?),
        GeneratorKind::Grafana => g.grafana_spec = Some(Deserialize::deserialize(spec)?),
        GeneratorKind::BeyondtrustWorkloadCredentialsDynamicSecret => {
            g.beyondtrust_workload_credentials_dynamic_secret_spec = Some(Deserialize::deserialize(spec)?)
        }
    }
    Ok(g)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn r(kind: &str, api_version: Option<&str>) -> GeneratorRef {
        GeneratorRef { api_version: api_version.map(String::from), kind: kind.into(), name: "g".into() }
    }

    #[test]
    fn upstreams_unserved_kinds_are_admitted_with_a_warning_and_unknown_ones_are_not() {
        let w = unserved_generator_warning(&r("QuayAccessToken", None)).expect("a warning");
        assert!(w.contains("\"QuayAccessToken\" is not served") && w.contains("Password"), "{w}");
        assert_eq!(unserved_generator_warning(&r("GCRAccessToken", None)), None, "served by the GCP provider");
        assert!(unserved_generator_warning(&r("GithubAccessToken", Some(GENERATOR_API_VERSION))).is_some());
        assert_eq!(unserved_generator_warning(&r("VaultDynamicSecret", None)), None, "served by the Vault provider");
        assert_eq!(unserved_generator_warning(&r("ECRAuthorizationToken", None)), None, "served by the AWS provider");
        assert_eq!(unserved_generator_warning(&r("STSSessionToken", None)), None, "served by the AWS provider");
        assert_eq!(unserved_generator_warning(&r("Webhook", None)), None, "served by the webhook provider");
        assert_eq!(unserved_generator_warning(&r("Password", None)), None, "served");
        assert_eq!(unserved_generator_warning(&r("Passwords", None)), None, "unknown: refused by generator_target");
        assert_eq!(unserved_generator_warning(&r("QuayAccessToken", Some("example.com/v1"))), None);
    }

    #[test]
    fn served_kinds_resolve_and_others_are_refused_by_name() {
        assert_eq!(generator_target(&r("Password", None)), Ok(GeneratorTarget::Namespaced(GeneratorKind::Password)));
        assert_eq!(
            generator_target(&r("UUID", Some(GENERATOR_API_VERSION))),
            Ok(GeneratorTarget::Namespaced(GeneratorKind::Uuid))
        );
        assert_eq!(generator_target(&r("SSHKey", None)), Ok(GeneratorTarget::Namespaced(GeneratorKind::SshKey)));
        assert_eq!(generator_target(&r("Fake", None)), Ok(GeneratorTarget::Namespaced(GeneratorKind::Fake)));
        assert_eq!(generator_target(&r("ClusterGenerator", None)), Ok(GeneratorTarget::Cluster));
        assert_eq!(
            generator_target(&r("VaultDynamicSecret", None)),
            Ok(GeneratorTarget::Namespaced(GeneratorKind::VaultDynamicSecret))
        );
        assert_eq!(
            generator_target(&r("ECRAuthorizationToken", None)),
            Ok(GeneratorTarget::Namespaced(GeneratorKind::EcrAuthorizationToken))
        );
        assert_eq!(
            generator_target(&r("STSSessionToken", None)),
            Ok(GeneratorTarget::Namespaced(GeneratorKind::StsSessionToken))
        );
        assert_eq!(generator_target(&r("Webhook", None)), Ok(GeneratorTarget::Namespaced(GeneratorKind::Webhook)));
        assert_eq!(generator_target(&r("MFA", None)), Ok(GeneratorTarget::Namespaced(GeneratorKind::Mfa)));
        assert_eq!(
            generator_target(&r("ACRAccessToken", None)),
            Ok(GeneratorTarget::Namespaced(GeneratorKind::AcrAccessToken))
        );
        assert_eq!(
            generator_target(&r("GCRAccessToken", None)),
            Ok(GeneratorTarget::Namespaced(GeneratorKind::GcrAccessToken))
        );
        let e = generator_target(&r("Grafana", None)).unwrap_err();
        assert!(e.contains("\"Grafana\" is not served") && e.contains("Password, UUID") && e.contains("MFA"), "{e}");
        assert!(!e.contains("GithubAccessToken"), "only served kinds are offered: {e}");
        let e = generator_target(&r("password", None)).unwrap_err();
        assert!(e.contains("unknown generator kind \"password\""), "{e}");
        let e = generator_target(&r("Password", Some("generators.external-secrets.io/v1"))).unwrap_err();
        assert!(e.contains("apiVersion"), "{e}");
    }

    #[test]
    fn the_unserved_list_and_the_served_kinds_agree() {
        for kind in GeneratorKind::ALL {
            assert_eq!(is_unserved_generator_kind(kind.as_str()), !kind.served(), "{kind}");
            assert_eq!(GeneratorKind::parse(kind.as_str()), Some(*kind));
        }
        assert!(!is_unserved_generator_kind("Passwords"), "unknown, not unserved");
        let e = generator_target(&r("GithubAccessToken", None)).unwrap_err();
        assert_eq!(e, not_served("GithubAccessToken"));
        assert!(unserved_generator_warning(&r("MFA", None)).is_none(), "served in the reconciler");
        assert!(unserved_generator_warning(&r("BeyondtrustWorkloadCredentialsDynamicSecret", None)).is_some());
    }

    #[test]
    fn cluster_generator_conditions_use_the_cluster_provider_rule() {
        let labels: BTreeMap<String, String> = BTreeMap::new();
        let only_a = vec![ClusterProviderCondition { namespaces: vec!["a".into()], ..Default::default() }];
        let view = |name| NamespaceView { name, labels: &labels };
        assert!(check_generator_namespace_admitted("g", &[], view("b")).is_ok(), "no conditions: every namespace");
        assert!(check_generator_namespace_admitted("g", &only_a, view("a")).is_ok());
        let denied = check_generator_namespace_admitted("g", &only_a, view("b")).unwrap_err();
        assert!(denied.to_string().contains("ClusterGenerator \"g\" does not allow namespace \"b\""), "{denied}");
        assert!(!denied.to_string().contains("[a]"), "the conditions stay out of the message");
        assert!(denied.detail().contains("namespaces [a]"), "{}", denied.detail());
    }

    #[test]
    fn a_cluster_generator_holds_the_spec_of_its_kind_only() {
        let spec = |kind, generator| ClusterGeneratorSpec { kind, generator, conditions: vec![] };
        let password = GeneratorSpec { password_spec: Some(PasswordSpec::default()), ..Default::default() };
        assert!(matches!(
            cluster_generator_spec(&spec(GeneratorKind::Password, password.clone())),
            Ok(AnyGeneratorSpec::Password(_))
        ));
        let e = cluster_generator_spec(&spec(GeneratorKind::Uuid, password.clone())).unwrap_err();
        assert!(e.contains("spec.generator.uuidSpec is required"), "{e}");
        let both = GeneratorSpec { uuid_spec: Some(UuidSpec {}), ..password };
        let e = cluster_generator_spec(&spec(GeneratorKind::Uuid, both)).unwrap_err();
        assert!(e.contains("several specs"), "{e}");
    }
}
