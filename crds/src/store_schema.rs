//! The typed `spec.provider.<key>` blocks of the SecretStore and ClusterSecretStore CRDs that a
//! provider crate adds: a registry row with a `store_key` serves the SecretStores whose block is
//! its configuration's spec as written, so the block's schema is that spec's schema, copied from
//! the row's own CRD when the CRDs are generated.
//!
//! Typed, a served block shows its fields in `kubectl explain` and the API server refuses (strict
//! field validation) or prunes a misspelt field in it. The other keys of `spec.provider` stay
//! open (`x-kubernetes-preserve-unknown-fields`), each bounded at admission by the free-form JSON
//! limits ([`crate::free_json`]).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{CustomResourceDefinition, JSONSchemaProps};

use crate::registry::{PROVIDER_CONFIG_VERSION, ProviderKind};

/// The CRD kinds whose served versions get the rows' blocks.
const STORE_KINDS: &[&str] = &["SecretStore", "ClusterSecretStore"];

/// Adds each row's block under `spec.provider.<store_key>` of every served version of a
/// SecretStore or ClusterSecretStore CRD; other CRDs are returned as they are.
pub fn with_store_blocks(
    mut crd: CustomResourceDefinition,
    kinds: &[&'static ProviderKind],
) -> CustomResourceDefinition {
    if !STORE_KINDS.contains(&crd.spec.names.kind.as_str()) {
        return crd;
    }
    let blocks: Vec<(&str, JSONSchemaProps)> =
        kinds.iter().filter_map(|row| Some((row.store_key?, block_schema(row)?))).collect();
    for version in crd.spec.versions.iter_mut().filter(|v| v.served) {
        let Some(provider) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
            .and_then(|s| child(s, "spec"))
            .and_then(|s| child(s, "provider"))
        else {
            continue;
        };
        let properties = provider.properties.get_or_insert_with(Default::default);
        for (key, schema) in &blocks {
            properties.insert((*key).to_string(), schema.clone());
        }
    }
    crd
}

/// The schema of a row's configuration spec, from its CRD's version `v2alpha1`, described as the
/// kind is.
fn block_schema(row: &ProviderKind) -> Option<JSONSchemaProps> {
    let crd = (row.crd)();
    let version = crd.spec.versions.into_iter().find(|v| v.name == PROVIDER_CONFIG_VERSION)?;
    let mut root = version.schema?.open_api_v3_schema?;
    let mut spec = root.properties.as_mut()?.remove("spec")?;
    spec.description = root.description.or(spec.description);
    Some(spec)
}

/// The schema of one named property.
fn child<'s>(schema: &'s mut JSONSchemaProps, name: &str) -> Option<&'s mut JSONSchemaProps> {
    schema.properties.as_mut()?.get_mut(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::all_crds;
    use crate::registry::{BUILTIN_KINDS, FAKE_KIND};

    /// A row as a provider crate declares it, here with the Fake kind's spec as its block.
    static FAKE_BLOCK: ProviderKind = ProviderKind { store_key: Some("fakeBlock"), ..FAKE_KIND };

    fn provider_blocks(crd: &CustomResourceDefinition, version: &str) -> Vec<String> {
        let v = crd.spec.versions.iter().find(|v| v.name == version).expect("version");
        let mut root = v.schema.clone().and_then(|s| s.open_api_v3_schema).expect("schema");
        let provider = child(&mut root, "spec").and_then(|s| child(s, "provider"));
        provider.and_then(|p| p.properties.as_ref()).map(|p| p.keys().cloned().collect()).unwrap_or_default()
    }

    /// A row's block is its kind's spec schema under `spec.provider.<key>` of both stores' served
    /// versions; the rows without a store key (typed by `SecretStoreProvider` itself) add nothing.
    #[test]
    fn a_row_with_a_store_key_types_its_block_in_both_stores() {
        let fake_spec = block_schema(&FAKE_KIND).expect("the Fake kind's spec");
        assert!(fake_spec.properties.as_ref().is_some_and(|p| p.contains_key("data")), "{fake_spec:?}");
        for crd in all_crds(&[]) {
            assert_eq!(with_store_blocks(crd.clone(), &BUILTIN_KINDS), crd, "{}", crd.spec.names.kind);
            let typed = with_store_blocks(crd.clone(), &[&FAKE_BLOCK]);
            if !STORE_KINDS.contains(&crd.spec.names.kind.as_str()) {
                assert_eq!(typed, crd);
                continue;
            }
            assert!(provider_blocks(&typed, "v1").contains(&"fakeBlock".to_string()), "{}", crd.spec.names.kind);
            assert!(!provider_blocks(&crd, "v1").contains(&"fakeBlock".to_string()));
            assert!(provider_blocks(&typed, "v1beta1").is_empty(), "a retired version stays open");
        }
    }
}
