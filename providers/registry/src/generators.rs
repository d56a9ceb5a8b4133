//! The generator table ([`GENERATOR_KINDS`], `keyward_crds::generators`: which kinds are
//! served, and who generates each) joined to the configuration kinds' rows: which provider
//! process generates a kind, and which configuration kind's SecretStore block a spec is. The
//! reconciler's routing, the webhook's admission of a generator spec that is a store block, and
//! the chart's generated RBAC (`make generate`) read it.

use keyward_crds::generators::GeneratorKind;
pub use keyward_crds::generators::{GENERATOR_KINDS, GeneratedBy, GeneratorRow, generator_row};

use crate::{ProviderKind, provider_kind_named};

/// The configuration kind's row of the provider process that generates `kind`; `None` when
/// the reconciler generates it itself or does not serve it.
fn generator_config_row(kind: GeneratorKind) -> Option<&'static ProviderKind> {
    match generator_row(kind)?.generated_by {
        GeneratedBy::Provider(config_kind) => provider_kind_named(config_kind),
        GeneratedBy::InProcess => None,
    }
}

/// The provider process that generates `kind` (the name its address is keyed by), or `None`
/// when the reconciler generates it itself or does not serve it.
pub fn generator_provider(kind: GeneratorKind) -> Option<&'static str> {
    generator_config_row(kind).map(|row| row.provider)
}

/// The configuration row whose SecretStore block `kind`'s spec is, when it is one.
pub fn generator_store_block(kind: GeneratorKind) -> Option<&'static ProviderKind> {
    generator_row(kind)?.spec_is_store_block.then(|| generator_config_row(kind)).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PROVIDER_KINDS;

    /// Each provider row names a configuration kind of the provider table.
    #[test]
    fn rows_name_registered_providers() {
        for row in GENERATOR_KINDS {
            if let GeneratedBy::Provider(config_kind) = row.generated_by {
                assert!(
                    provider_kind_named(config_kind).is_some(),
                    "{}: {config_kind} is not in PROVIDER_KINDS",
                    row.kind
                );
            }
            if row.spec_is_store_block {
                assert!(generator_store_block(row.kind).is_some_and(|p| !p.stores.is_empty()), "{}", row.kind);
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
        assert_eq!(generator_store_block(GeneratorKind::Webhook).map(|p| p.stores[0].key), Some("webhook"));
        assert!(generator_store_block(GeneratorKind::VaultDynamicSecret).is_none());
        assert!(generator_provider(GeneratorKind::Password).is_none());
    }
}
