//! Provider configuration kinds (`provider.external-secrets.io/v2alpha1`) as table rows. A row
//! says what a kind is called, which provider process serves it, which SecretStore
//! `spec.provider.<key>` it serves, how admission reads it and which CRD it installs. The table
//! of every kind Keyward ships is `keyward_provider_registry::PROVIDER_KINDS`: the webhook's
//! dispatch and defaults, the reconciler's store translation and watches, `make generate` (CRDs,
//! the chart's webhook rules and RBAC) and the checks that the chart and the image carry a
//! provider for every row all iterate it. Adding a store is its provider crate, which declares
//! its row, plus one line in that table.
//!
//! This crate declares the row type, the [`ProviderSpec`] contract of a configuration, and the
//! rows of the kinds whose types live here.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{CustomResourceDefinition, JSONSchemaProps};
use kube::CustomResourceExt;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::rules::{Reach, ValidationErrors, validate_vault, vault_reach};
use crate::{Vault, VaultSpec};

/// The API group of provider configuration kinds.
pub const PROVIDER_CONFIG_GROUP: &str = "provider.external-secrets.io";
/// Their version.
pub const PROVIDER_CONFIG_VERSION: &str = "v2alpha1";

/// What a provider configuration's spec answers for admission and for the provider that serves
/// it: its field errors, and everything it reaches outside itself (the tenant boundary).
pub trait ProviderSpec: DeserializeOwned + Serialize + Clone + std::fmt::Debug + Send + Sync + 'static {
    /// Field errors, named as in the configuration object (`spec.server`).
    fn validate(&self) -> Result<(), ValidationErrors>;
    /// The Secrets, ConfigMaps and ServiceAccounts it names, and the provider's own identities
    /// it would use (`crate::rules::check_boundary` judges them).
    fn reach(&self) -> Reach<'_>;
}

/// Where admission hands on what it read from one configuration: its field errors, and what it
/// reaches.
pub type AdmitSink<'s> = dyn FnMut(Result<(), ValidationErrors>, &Reach<'_>) + 's;

/// Reads a configuration's spec (an error when it is not one of this kind) into an
/// [`AdmitSink`].
pub type AdmitFn = fn(&Value, &mut AdmitSink<'_>) -> Result<(), serde_json::Error>;

/// The [`AdmitFn`] of a kind whose spec type is `S`.
pub fn admit_spec<S: ProviderSpec>(spec: &Value, out: &mut AdmitSink<'_>) -> Result<(), serde_json::Error> {
    let spec = S::deserialize(spec)?;
    out(spec.validate(), &spec.reach());
    Ok(())
}

/// One provider configuration kind.
#[derive(Debug)]
pub struct ProviderKind {
    /// The kind, e.g. `Vault`.
    pub kind: &'static str,
    /// Its resource (plural) name, e.g. `vaults`.
    pub plural: &'static str,
    /// The provider process that serves it: the chart's `providers.<name>` and the binary
    /// `keyward-provider-<name>`.
    pub provider: &'static str,
    /// The SecretStore `spec.provider.<key>` blocks this kind serves, which is how a provider
    /// crate adds stores (one kind may serve several: upstream's `vault` and `openBao`). Empty for
    /// the kinds of this crate, which `crate::rules::store_backend` translates itself.
    pub stores: &'static [StoreBlock],
    /// Reads an admitted object's spec and reports its field errors and reach.
    pub admit: AdmitFn,
    /// Its CustomResourceDefinition.
    pub crd: fn() -> CustomResourceDefinition,
}

/// One SecretStore block a kind serves: its key under `spec.provider`, and where it is not the
/// kind's spec as written, how it differs (upstream's block shape, which the store CRDs type and
/// which is translated into the spec before anything reads it).
#[derive(Debug, Clone, Copy)]
pub struct StoreBlock {
    /// The key under `spec.provider`, e.g. `vault`.
    pub key: &'static str,
    /// The block's schema under `spec.provider.<key>` (description included), as the store CRDs
    /// carry it ([`crate::store_schema::field_schema`] derives one from a Rust type); the inner
    /// `None` leaves the block open. Unset: the kind's spec schema, from its CRD.
    pub schema: Option<fn() -> Option<JSONSchemaProps>>,
    /// The block as written into the kind's spec, or why it cannot be served. Unset: the block is
    /// the spec as written.
    pub translate: Option<TranslateFn>,
    /// Where the block as written differs from what Keyward does with it (admission returns them
    /// as warnings; the store still applies), fields named as in a configuration (`spec.auth`),
    /// which the store's warnings move under `spec.provider.<key>`.
    pub warnings: Option<fn(&Value) -> Vec<String>>,
    /// How admission reads the block as written, when its rules are not the kind's rules of its
    /// translated spec (a block with rules of its own, such as a login it requires). Unset:
    /// [`ProviderKind::admit`] of the translated spec.
    pub admit: Option<AdmitFn>,
    /// The references in the block's spec (as translated) that a ClusterSecretStore must give a
    /// namespace, as upstream requires: what the operator's configuration trusts or sends (a CA,
    /// an operator's token or client certificate), which a tenant must not supply by leaving the
    /// namespace to the ExternalSecret's. Paths are dotted, `[]` for each item of a list
    /// (`secrets[].secretRef`); every block's `caProvider` is pinned without being listed
    /// (`crate::rules::cluster_secret_store_references`). Empty: only that.
    pub pinned: &'static [&'static str],
}

impl StoreBlock {
    /// A block that is the kind's spec as written.
    pub const fn spec(key: &'static str) -> StoreBlock {
        StoreBlock { key, schema: None, translate: None, warnings: None, admit: None, pinned: &[] }
    }
}

/// Reads a store block as written into its kind's spec ([`StoreBlock::translate`]).
pub type TranslateFn = fn(&Value) -> Result<Value, BlockError>;

/// Why a store block has no spec ([`StoreBlock::translate`]).
#[derive(Debug, Clone, PartialEq)]
pub enum BlockError {
    /// It does not read as upstream's shape (the store CRDs type it, so only an object the API
    /// server did not check gets here).
    Unreadable(String),
    /// It reads, and asks for something Keyward does not serve (the store reports
    /// `ProviderNotSupported`).
    NotServed {
        /// What, named from the block (`auth.gcp`, `service: CertificateManager`).
        what: String,
        /// The spec admission still checks with the kind's rules, if any (a Vault block with an
        /// unserved login is still a Vault block).
        checked: Option<Value>,
    },
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

/// The row of a configuration kind in `table`, by group, version and kind.
pub fn find_kind(
    table: &[&'static ProviderKind],
    group: &str,
    version: &str,
    kind: &str,
) -> Option<&'static ProviderKind> {
    if group != PROVIDER_CONFIG_GROUP || version != PROVIDER_CONFIG_VERSION {
        return None;
    }
    find_kind_named(table, kind)
}

/// The row of a kind named in a `providerRef` (group and version defaulted elsewhere).
pub fn find_kind_named(table: &[&'static ProviderKind], kind: &str) -> Option<&'static ProviderKind> {
    table.iter().copied().find(|p| p.kind == kind)
}

/// The distinct provider processes of `table`, in table order.
pub fn provider_names(table: &[&'static ProviderKind]) -> Vec<&'static str> {
    let mut names: Vec<&'static str> = Vec::new();
    for p in table {
        if !names.contains(&p.provider) {
            names.push(p.provider);
        }
    }
    names
}

/// The kinds whose types this crate holds.
pub static BUILTIN_KINDS: [&ProviderKind; 1] = [&VAULT_KIND];

/// `Vault`: HashiCorp Vault's KV engines.
pub static VAULT_KIND: ProviderKind = ProviderKind {
    kind: "Vault",
    plural: "vaults",
    provider: "vault",
    stores: &[],
    admit: admit_spec::<VaultSpec>,
    crd: Vault::crd,
};

impl ProviderSpec for VaultSpec {
    fn validate(&self) -> Result<(), ValidationErrors> {
        validate_vault(self)
    }
    fn reach(&self) -> Reach<'_> {
        vault_reach(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each row agrees with the CRD it installs: same group, version, kind and plural.
    #[test]
    fn every_row_matches_its_crd() {
        for row in BUILTIN_KINDS {
            let crd = (row.crd)();
            assert_eq!(crd.spec.group, PROVIDER_CONFIG_GROUP);
            assert_eq!(crd.spec.names.kind, row.kind);
            assert_eq!(crd.spec.names.plural, row.plural);
            assert!(crd.spec.versions.iter().any(|v| v.name == PROVIDER_CONFIG_VERSION));
        }
        assert_eq!(
            find_kind(&BUILTIN_KINDS, PROVIDER_CONFIG_GROUP, PROVIDER_CONFIG_VERSION, "Vault"),
            Some(&VAULT_KIND)
        );
        assert!(find_kind(&BUILTIN_KINDS, "external-secrets.io", "v1", "Vault").is_none());
        assert!(find_kind(&BUILTIN_KINDS, PROVIDER_CONFIG_GROUP, "v1", "Vault").is_none());
        assert_eq!(provider_names(&BUILTIN_KINDS), ["vault"]);
    }

    /// Each row's admission reads its own spec and reports field errors and what it reaches.
    #[test]
    fn admission_reads_the_spec_and_reports_errors_and_reach() {
        let vault =
            serde_json::json!({"server": "ftp://vault", "auth": {"tokenSecretRef": {"name": "t", "key": "token"}}});
        let mut seen = Vec::new();
        (VAULT_KIND.admit)(&vault, &mut |invalid, reach| seen.push((invalid.is_err(), reach.named.len())))
            .expect("a Vault spec reads");
        assert_eq!(seen, [(true, 1)], "the bad server is a field error; the token Secret is reached");
        let unreadable = serde_json::json!({"server": ["not a text"]});
        assert!((VAULT_KIND.admit)(&unreadable, &mut |_, _| {}).is_err(), "a spec that does not read is an error");
    }
}
