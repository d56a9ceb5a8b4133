//! Every generator kind Keyward serves, in one table ([`GENERATOR_KINDS`]): which ones the
//! reconciler generates itself, and which a provider process generates (named by that provider's
//! configuration row, so a generator follows its provider crate). The reconciler's routing, the
//! webhook's admission of a generator spec that is a store block, and the chart's generated
//! RBAC (`make generate`) iterate it; a kind without a row is not served.

use keyward_crds::generators::GeneratorKind;
use keyward_crds::registry::{SECRETS_MANAGER_KIND, VAULT_KIND};

use crate::ProviderKind;

/// Who generates a kind's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GeneratedBy {
    /// The reconciler, in process: no secret store is called.
    InProcess,
    /// The provider process of this configuration row, which reaches the store the spec names.
    Provider(&'static ProviderKind),
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
    /// row's rules too.
    pub spec_is_store_block: bool,
}

const fn here(kind: GeneratorKind) -> GeneratorRow {
    GeneratorRow { kind, generated_by: GeneratedBy::InProcess, spec_is_store_block: false }
}

const fn by(kind: GeneratorKind, provider: &'static ProviderKind) -> GeneratorRow {
    GeneratorRow { kind, generated_by: GeneratedBy::Provider(provider), spec_is_store_block: false }
}

/// The table, one row per served generator kind.
pub static GENERATOR_KINDS: &[GeneratorRow] = &[
    here(GeneratorKind::Password),
    here(GeneratorKind::Uuid),
    here(GeneratorKind::SshKey),
    here(GeneratorKind::Fake),
    here(GeneratorKind::Mfa),
    by(GeneratorKind::VaultDynamicSecret, &VAULT_KIND),
    by(GeneratorKind::EcrAuthorizationToken, &SECRETS_MANAGER_KIND),
    by(GeneratorKind::StsSessionToken, &SECRETS_MANAGER_KIND),
    GeneratorRow { spec_is_store_block: true, ..by(GeneratorKind::Webhook, &keyward_provider_webhook::api::KIND) },
    by(GeneratorKind::AcrAccessToken, &keyward_provider_azure::api::KIND),
    by(GeneratorKind::GcrAccessToken, &keyward_provider_gcp::api::KIND),
];

/// The row of a generator kind; `None` when Keyward does not serve it.
pub fn generator_row(kind: GeneratorKind) -> Option<&'static GeneratorRow> {
    GENERATOR_KINDS.iter().find(|row| row.kind == kind)
}

/// The provider process that generates `kind` (the name its address is keyed by), or `None`
/// when the reconciler generates it itself or does not serve it.
pub fn generator_provider(kind: GeneratorKind) -> Option<&'static str> {
    match generator_row(kind)?.generated_by {
        GeneratedBy::Provider(row) => Some(row.provider),
        GeneratedBy::InProcess => None,
    }
}

/// The configuration row whose SecretStore block `kind`'s spec is, when it is one.
pub fn generator_store_block(kind: GeneratorKind) -> Option<&'static ProviderKind> {
    match generator_row(kind)? {
        GeneratorRow { generated_by: GeneratedBy::Provider(row), spec_is_store_block: true, .. } => Some(*row),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PROVIDER_KINDS;

    /// A kind has a row exactly when it is served; each provider row is in the provider table.
    #[test]
    fn rows_are_the_served_kinds_and_name_registered_providers() {
        for kind in GeneratorKind::ALL {
            assert_eq!(generator_row(*kind).is_some(), kind.served(), "{kind}");
        }
        let kinds: Vec<_> = GENERATOR_KINDS.iter().map(|r| r.kind).collect();
        assert!(kinds.iter().enumerate().all(|(i, k)| !kinds[..i].contains(k)), "a kind twice: {kinds:?}");
        for row in GENERATOR_KINDS {
            if let GeneratedBy::Provider(p) = row.generated_by {
                assert!(PROVIDER_KINDS.contains(&p), "{}: {} is not in PROVIDER_KINDS", row.kind, p.kind);
            }
            if row.spec_is_store_block {
                assert!(generator_store_block(row.kind).is_some_and(|p| p.store_key.is_some()), "{}", row.kind);
            }
        }
    }

    /// The chart's reconciler RBAC reads exactly the resources of the rows' kinds.
    #[test]
    fn the_charts_generator_rbac_lists_the_rows() {
        use keyward_crds::generate::{Layout, all_crds, render_all};
        let files = render_all(Layout::HelmTemplate, PROVIDER_KINDS).expect("render");
        let (_, partials) = files.iter().find(|(name, _)| name == "_provider_kinds.tpl").expect("partials");
        let define = "{{- define \"keyward.servedGeneratorResources\" -}}";
        let listed = partials.lines().find_map(|l| l.strip_prefix(define)).expect("the partial");
        let listed = listed.strip_suffix("{{- end -}}").expect("closed");
        let mut listed: Vec<String> = serde_json::from_str(listed).expect("a JSON list");
        let mut rows: Vec<String> = all_crds(&[])
            .into_iter()
            .filter(|crd| GENERATOR_KINDS.iter().any(|r| r.kind.as_str() == crd.spec.names.kind))
            .filter(|crd| crd.spec.group == keyward_crds::generators::GENERATOR_GROUP)
            .map(|crd| crd.spec.names.plural)
            .collect();
        listed.sort();
        rows.sort();
        assert_eq!(listed, rows);
    }

    /// The routing the reconciler had as a hand-written list, unchanged.
    #[test]
    fn the_remote_kinds_and_their_providers_are_unchanged() {
        let remote: Vec<(&str, &str)> =
            GeneratorKind::ALL.iter().filter_map(|k| Some((k.as_str(), generator_provider(*k)?))).collect();
        assert_eq!(
            remote,
            [
                ("VaultDynamicSecret", "vault"),
                ("ECRAuthorizationToken", "aws"),
                ("STSSessionToken", "aws"),
                ("Webhook", "webhook"),
                ("ACRAccessToken", "azure"),
                ("GCRAccessToken", "gcp"),
            ]
        );
        assert_eq!(generator_store_block(GeneratorKind::Webhook).and_then(|p| p.store_key), Some("webhook"));
        assert!(generator_store_block(GeneratorKind::VaultDynamicSecret).is_none());
        assert!(generator_provider(GeneratorKind::Password).is_none());
    }
}
