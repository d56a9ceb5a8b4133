//! Every generator kind Keyward serves, in one table ([`GENERATOR_KINDS`]): which ones the
//! reconciler generates itself, and which a provider process generates. A kind without a row is
//! not served ([`GeneratorKind::served`] reads this table; its CRD is still installed so
//! upstream's manifests apply). The reconciler's routing, the webhook's admission, the chart's
//! generated RBAC and `keyward-provider-registry` (which resolves each provider row to its
//! configuration kind's row) all read it.
//!
//! A provider row names its configuration kind by name, not by that kind's row: the rows of most
//! configuration kinds are declared in their provider crates, above this one.
//! `keyward-provider-registry`'s tests check every name resolves to a registered kind.

use super::GeneratorKind;

/// Who generates a kind's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GeneratedBy {
    /// The reconciler, in process: no secret store is called.
    InProcess,
    /// The provider process serving this configuration kind (`ProviderKind::kind`), which
    /// reaches the store the spec names.
    Provider(&'static str),
}

/// One served generator kind.
#[derive(Debug, PartialEq, Eq)]
pub struct GeneratorRow {
    /// The kind.
    pub kind: GeneratorKind,
    /// Who generates it.
    pub generated_by: GeneratedBy,
    /// Whether the kind's spec is its provider's SecretStore block as written (upstream's
    /// Webhook generator and `spec.provider.webhook` share it), so admission checks it with that
    /// configuration kind's rules too.
    pub spec_is_store_block: bool,
}

const fn here(kind: GeneratorKind) -> GeneratorRow {
    GeneratorRow { kind, generated_by: GeneratedBy::InProcess, spec_is_store_block: false }
}

const fn by(kind: GeneratorKind, config_kind: &'static str) -> GeneratorRow {
    GeneratorRow { kind, generated_by: GeneratedBy::Provider(config_kind), spec_is_store_block: false }
}

/// The table, one row per served generator kind.
pub static GENERATOR_KINDS: &[GeneratorRow] = &[
    here(GeneratorKind::Password),
    here(GeneratorKind::Uuid),
    here(GeneratorKind::SshKey),
    here(GeneratorKind::Fake),
    here(GeneratorKind::Mfa),
    by(GeneratorKind::VaultDynamicSecret, "Vault"),
    by(GeneratorKind::EcrAuthorizationToken, "SecretsManager"),
    by(GeneratorKind::StsSessionToken, "SecretsManager"),
    GeneratorRow { spec_is_store_block: true, ..by(GeneratorKind::Webhook, "Webhook") },
    by(GeneratorKind::AcrAccessToken, "AzureKeyVault"),
    by(GeneratorKind::GcrAccessToken, "GCPSecretManager"),
];

/// The row of a generator kind; `None` when Keyward does not serve it.
pub fn generator_row(kind: GeneratorKind) -> Option<&'static GeneratorRow> {
    GENERATOR_KINDS.iter().find(|row| row.kind == kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_row_per_kind_and_the_unserved_are_upstreams_outside_calls() {
        let kinds: Vec<_> = GENERATOR_KINDS.iter().map(|r| r.kind).collect();
        assert!(kinds.iter().enumerate().all(|(i, k)| !kinds[..i].contains(k)), "a kind twice: {kinds:?}");
        let unserved: Vec<_> = GeneratorKind::ALL.iter().filter(|k| !k.served()).map(|k| k.as_str()).collect();
        assert_eq!(
            unserved,
            [
                "GithubAccessToken",
                "GitlabDeployToken",
                "QuayAccessToken",
                "CloudsmithAccessToken",
                "Grafana",
                "BeyondtrustWorkloadCredentialsDynamicSecret"
            ]
        );
    }
}
