//! Every provider configuration kind Keyward ships, in one table ([`PROVIDER_KINDS`]).
//!
//! A row ([`ProviderKind`]) names the kind, the provider process that serves it, the SecretStore
//! `spec.provider.<key>` it serves and how admission reads it. The webhook (admission dispatch,
//! defaults, SecretStore validation), the reconciler (which process serves a store, which kinds
//! to watch), `make generate` (CRDs, the chart's webhook rules and RBAC) and the chart and image
//! checks all iterate this table. A new store is its provider crate, which declares its row
//! (`pub static KIND`), plus one line here; docs/providers/writing.md walks
//! through it.

pub use keyward_crds::registry::{ProviderKind, ProviderSpec};
use keyward_crds::registry::{VAULT_KIND, find_kind, find_kind_named};

mod generators;
pub use generators::{
    GENERATOR_KINDS, GeneratedBy, GeneratorRow, generator_provider, generator_row, generator_store_block,
};

/// The table, one row per configuration kind.
pub static PROVIDER_KINDS: &[&ProviderKind] = &[
    &keyward_provider_kubernetes::api::KIND,
    &keyward_provider_fake::api::KIND,
    &VAULT_KIND,
    &keyward_provider_aws::api::KIND,
    &keyward_provider_webhook::api::KIND,
    &keyward_provider_barbican::api::KIND,
    &keyward_provider_azure::api::KIND,
    &keyward_provider_gcp::api::KIND,
];

/// The row of a configuration kind, by group, version and kind.
pub fn provider_kind(group: &str, version: &str, kind: &str) -> Option<&'static ProviderKind> {
    find_kind(PROVIDER_KINDS, group, version, kind)
}

/// The row of a kind named in a `providerRef` (group and version defaulted elsewhere).
pub fn provider_kind_named(kind: &str) -> Option<&'static ProviderKind> {
    find_kind_named(PROVIDER_KINDS, kind)
}

/// The distinct provider processes of the table, in table order.
pub fn provider_names() -> Vec<&'static str> {
    keyward_crds::registry::provider_names(PROVIDER_KINDS)
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use keyward_crds::registry::{PROVIDER_CONFIG_GROUP, PROVIDER_CONFIG_VERSION};

    use super::*;

    /// Kinds, plurals and store keys are each unique (a store key may be a plural: the
    /// Kubernetes kind's `kubernetes` is both), and every row's CRD is the row's kind.
    #[test]
    fn rows_are_unique_and_match_their_crds() {
        let (mut kinds, mut plurals, mut keys) = (HashSet::new(), HashSet::new(), HashSet::new());
        for row in PROVIDER_KINDS {
            assert!(kinds.insert(row.kind.to_ascii_lowercase()), "{} twice", row.kind);
            assert!(plurals.insert(row.plural), "{} twice", row.plural);
            for key in row.stores.iter().map(|block| block.key) {
                assert!(keys.insert(key), "store key {key} twice");
                assert!(
                    !keyward_crds::rules::SERVED_STORE_PROVIDERS.contains(&key),
                    "{key} is translated by keyward-crds already"
                );
            }
            let crd = (row.crd)();
            assert_eq!(
                (crd.spec.group.as_str(), crd.spec.names.kind.as_str(), crd.spec.names.plural.as_str()),
                (PROVIDER_CONFIG_GROUP, row.kind, row.plural)
            );
            assert!(crd.spec.versions.iter().any(|v| v.name == PROVIDER_CONFIG_VERSION));
            assert_eq!(provider_kind(PROVIDER_CONFIG_GROUP, PROVIDER_CONFIG_VERSION, row.kind), Some(*row));
        }
        assert!(provider_kind("external-secrets.io", "v1", "Vault").is_none());
        assert_eq!(provider_names()[..4], ["kubernetes", "fake", "vault", "aws"]);
    }

    /// The manifests the end-to-end suite treats as valid pass the rules too (a configuration
    /// kind's through its row, a store's with every row), so the webhook will not reject what the
    /// schema accepts in those fixtures.
    #[test]
    fn e2e_valid_fixtures_pass_the_rules() {
        use keyward_crds::rules::{
            validate_cluster_external_secret, validate_cluster_provider, validate_external_secret, validate_provider,
            validate_push_secret, validate_secret_store,
        };
        fn spec<T: serde::de::DeserializeOwned>(doc: &serde_json::Value) -> T {
            serde_json::from_value(doc["spec"].clone()).expect("spec")
        }
        let dir = std::path::Path::new(
            &std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR when it runs a test"),
        )
        .join("../../e2e/fixtures/valid");
        let mut checked = 0;
        for entry in std::fs::read_dir(&dir).expect("fixtures").flatten() {
            let text = std::fs::read_to_string(entry.path()).expect("read");
            let doc: serde_json::Value = serde_yaml::from_str(&text).expect("a manifest");
            let result = match doc["kind"].as_str().unwrap_or_default() {
                "ExternalSecret" => validate_external_secret(&spec(&doc)),
                "PushSecret" => validate_push_secret(&spec(&doc)),
                "Provider" => validate_provider("any", &spec(&doc)),
                "ClusterProvider" => validate_cluster_provider(&spec(&doc)),
                "SecretStore" => validate_secret_store(Some("any"), &spec(&doc), PROVIDER_KINDS),
                "ClusterSecretStore" => validate_secret_store(None, &spec(&doc), PROVIDER_KINDS),
                "ClusterExternalSecret" => validate_cluster_external_secret(&spec(&doc)),
                kind => {
                    let row = provider_kind_named(kind)
                        .unwrap_or_else(|| panic!("unexpected kind {kind} in {}", entry.path().display()));
                    let mut result = Ok(());
                    (row.admit)(&doc["spec"], &mut |r, _| result = r).expect("a spec of its kind");
                    result
                }
            };
            assert!(result.is_ok(), "{}: {result:?}", entry.path().display());
            checked += 1;
        }
        assert!(checked >= 10, "only {checked} fixtures found in {}", dir.display());
    }
}
