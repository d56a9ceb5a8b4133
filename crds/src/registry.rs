//! Every provider configuration kind Keyward serves (`provider.external-secrets.io/v2alpha1`), in
//! one table. The webhook's admission dispatch and defaults, the chart's webhook rules (generated
//! from [`PROVIDER_KINDS`] by `make generate`) and the checks that the chart and the image carry a
//! provider for every row all iterate it; adding a store is its provider crate plus one row here.

use serde::Deserialize;
use serde_json::Value;

use crate::rules::{
    Reach, ValidationErrors, kubernetes_reach, secrets_manager_reach, validate_fake, validate_kubernetes,
    validate_secrets_manager, validate_vault, vault_reach,
};
use crate::{Fake, Kubernetes, SecretsManager, Vault};

/// The API group of provider configuration kinds.
pub const PROVIDER_CONFIG_GROUP: &str = "provider.external-secrets.io";
/// Their version.
pub const PROVIDER_CONFIG_VERSION: &str = "v2alpha1";

/// Where admission hands on what it read from one configuration object: its field errors, and
/// the objects and identities it reaches (None when it can reach nothing outside itself).
pub type AdmitSink<'s> = dyn FnMut(Result<(), ValidationErrors>, Option<&Reach<'_>>) + 's;

/// Reads a configuration object (an error when it is not one of this kind) into an [`AdmitSink`].
pub type AdmitFn = fn(&Value, &mut AdmitSink<'_>) -> Result<(), serde_json::Error>;

/// One provider configuration kind.
#[derive(Debug)]
pub struct ProviderKind {
    /// The kind, e.g. `Vault`.
    pub kind: &'static str,
    /// Its resource (plural) name, e.g. `vaults`.
    pub plural: &'static str,
    /// The provider process that serves it: the chart's `providers.<name>`, the binary
    /// `keyward-provider-<name>`, and the `spec.provider.<name>` key of the SecretStores it serves.
    pub provider: &'static str,
    /// Reads an admitted object and reports its field errors and reach.
    pub admit: AdmitFn,
}

impl PartialEq for ProviderKind {
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind
    }
}

impl Eq for ProviderKind {}

impl std::hash::Hash for ProviderKind {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.kind.hash(state);
    }
}

/// The table.
pub const PROVIDER_KINDS: &[ProviderKind] = &[
    ProviderKind { kind: "Kubernetes", plural: "kubernetes", provider: "kubernetes", admit: admit_kubernetes },
    ProviderKind { kind: "Fake", plural: "fakes", provider: "fake", admit: admit_fake },
    ProviderKind { kind: "Vault", plural: "vaults", provider: "vault", admit: admit_vault },
    ProviderKind { kind: "SecretsManager", plural: "secretsmanagers", provider: "aws", admit: admit_secrets_manager },
];

/// The row of a configuration kind, by group, version and kind.
pub fn provider_kind(group: &str, version: &str, kind: &str) -> Option<&'static ProviderKind> {
    if group != PROVIDER_CONFIG_GROUP || version != PROVIDER_CONFIG_VERSION {
        return None;
    }
    PROVIDER_KINDS.iter().find(|p| p.kind == kind)
}

/// The row of a kind named in a `providerRef` (group and version defaulted elsewhere).
pub fn provider_kind_named(kind: &str) -> Option<&'static ProviderKind> {
    PROVIDER_KINDS.iter().find(|p| p.kind == kind)
}

/// The distinct provider processes of the table, in table order.
pub fn provider_names() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = Vec::new();
    for p in PROVIDER_KINDS {
        if !names.contains(&p.provider) {
            names.push(p.provider);
        }
    }
    names
}

fn admit_kubernetes(object: &Value, out: &mut AdmitSink<'_>) -> Result<(), serde_json::Error> {
    let k = Kubernetes::deserialize(object)?;
    out(validate_kubernetes(&k.spec), Some(&kubernetes_reach(&k.spec)));
    Ok(())
}

fn admit_fake(object: &Value, out: &mut AdmitSink<'_>) -> Result<(), serde_json::Error> {
    // Its data is in the object itself: nothing to reach.
    let f = Fake::deserialize(object)?;
    out(validate_fake(&f.spec), None);
    Ok(())
}

fn admit_vault(object: &Value, out: &mut AdmitSink<'_>) -> Result<(), serde_json::Error> {
    let v = Vault::deserialize(object)?;
    out(validate_vault(&v.spec), Some(&vault_reach(&v.spec)));
    Ok(())
}

fn admit_secrets_manager(object: &Value, out: &mut AdmitSink<'_>) -> Result<(), serde_json::Error> {
    let a = SecretsManager::deserialize(object)?;
    out(validate_secrets_manager(&a.spec), Some(&secrets_manager_reach(&a.spec)));
    Ok(())
}

#[cfg(test)]
mod tests {
    use kube::CustomResourceExt;

    use super::*;

    /// The table agrees with the CRDs the types generate: same group, version, kind and plural.
    #[test]
    fn every_row_matches_its_crd() {
        let crds = [Kubernetes::crd(), Fake::crd(), Vault::crd(), SecretsManager::crd()];
        assert_eq!(crds.len(), PROVIDER_KINDS.len(), "a config CRD without a row, or a row without a CRD");
        for crd in crds {
            let row = provider_kind(&crd.spec.group, PROVIDER_CONFIG_VERSION, &crd.spec.names.kind)
                .unwrap_or_else(|| panic!("no row for {}", crd.spec.names.kind));
            assert_eq!(row.plural, crd.spec.names.plural);
            assert!(crd.spec.versions.iter().any(|v| v.name == PROVIDER_CONFIG_VERSION));
        }
        assert!(provider_kind("external-secrets.io", "v1", "Vault").is_none());
        assert!(provider_kind(PROVIDER_CONFIG_GROUP, "v1", "Vault").is_none());
        assert_eq!(provider_names(), ["kubernetes", "fake", "vault", "aws"]);
    }

    /// Each row's admission reads its own kind and reports field errors; a row that reaches
    /// references reports them.
    #[test]
    fn admission_reads_the_object_and_reports_errors_and_reach() {
        let vault = serde_json::json!({
            "apiVersion": "provider.external-secrets.io/v2alpha1", "kind": "Vault",
            "metadata": {"name": "v", "namespace": "team-a"},
            "spec": {"server": "ftp://vault", "auth": {"tokenSecretRef": {"name": "t", "key": "token"}}}});
        let mut seen = Vec::new();
        let row = provider_kind_named("Vault").expect("Vault row");
        (row.admit)(&vault, &mut |invalid, reach| {
            seen.push((invalid.is_err(), reach.map(|r| r.named.len())));
        })
        .expect("a Vault object reads");
        assert_eq!(seen, [(true, Some(1))], "the bad server is a field error; the token Secret is reached");
        let fake = provider_kind_named("Fake").expect("Fake row");
        let unreadable = serde_json::json!({"apiVersion": "provider.external-secrets.io/v2alpha1", "kind": "Fake",
                                            "metadata": {"name": "f"}, "spec": {"data": "not a list"}});
        assert!((fake.admit)(&unreadable, &mut |_, _| {}).is_err(), "a spec that does not read is an error");
        let good = serde_json::json!({"apiVersion": "provider.external-secrets.io/v2alpha1", "kind": "Fake",
                                      "metadata": {"name": "f"}, "spec": {"data": [{"key": "k", "value": "v"}]}});
        let mut reached = Vec::new();
        (fake.admit)(&good, &mut |invalid, reach| reached.push((invalid.is_ok(), reach.is_some()))).expect("reads");
        assert_eq!(reached, [(true, false)], "a valid Fake reaches nothing");
    }
}
