//! The typed `spec.provider.<key>` blocks of the SecretStore and ClusterSecretStore CRDs that a
//! provider crate adds: a registry row's store blocks ([`crate::registry::StoreBlock`]) serve the
//! SecretStores whose block is its configuration's spec as written, so the block's schema is that
//! spec's schema, copied from the row's own CRD when the CRDs are generated; a block in
//! upstream's shape instead gives its schema itself.
//!
//! Typed, a served block shows its fields in `kubectl explain` and the API server refuses (strict
//! field validation) or prunes a misspelt field in it. The other keys of `spec.provider` stay
//! open (`x-kubernetes-preserve-unknown-fields`), each bounded at admission by the free-form JSON
//! limits ([`crate::free_json`]).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{CustomResourceDefinition, JSONSchemaProps};
use schemars::JsonSchema;

use crate::registry::{PROVIDER_CONFIG_VERSION, ProviderKind, StoreBlock};

/// The CRD kinds whose served versions get the rows' blocks.
const STORE_KINDS: &[&str] = &["SecretStore", "ClusterSecretStore"];

/// Adds each row's blocks under `spec.provider.<key>` of every served version of a
/// SecretStore or ClusterSecretStore CRD; other CRDs are returned as they are.
pub fn with_store_blocks(
    mut crd: CustomResourceDefinition,
    kinds: &[&'static ProviderKind],
) -> CustomResourceDefinition {
    if !STORE_KINDS.contains(&crd.spec.names.kind.as_str()) {
        return crd;
    }
    let blocks: Vec<(&str, JSONSchemaProps)> = kinds
        .iter()
        .flat_map(|row| row.stores.iter().filter_map(|block| Some((block.key, block_schema(row, block)?))))
        .collect();
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

/// The schema of a row's store block: its own ([`StoreBlock::schema`]), else its configuration
/// spec's, from its CRD's version `v2alpha1`, described as the kind is.
fn block_schema(row: &ProviderKind, block: &StoreBlock) -> Option<JSONSchemaProps> {
    if let Some(schema) = block.schema {
        return schema();
    }
    let crd = (row.crd)();
    let version = crd.spec.versions.into_iter().find(|v| v.name == PROVIDER_CONFIG_VERSION)?;
    let mut root = version.schema?.open_api_v3_schema?;
    let mut spec = root.properties.as_mut()?.remove("spec")?;
    spec.description = root.description.or(spec.description);
    Some(spec)
}

/// The schema of the property `field` of `W` as a CRD carries it: generated with the settings and
/// structural rewrites of kube's `CustomResource` derive, so a block typed by a provider crate is
/// the schema it had as a typed field of `spec.provider` (its doc comment is the description).
pub fn field_schema<W: JsonSchema>(field: &str) -> Option<JSONSchemaProps> {
    let generator = schemars::generate::SchemaSettings::openapi3()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .with_transform(schemars::transform::AddNullable::default())
        .with_transform(kube::core::schema::StructuralSchemaRewriter)
        .with_transform(kube::core::schema::OptionalEnum)
        .with_transform(kube::core::schema::OptionalIntOrString)
        .into_generator();
    let root: JSONSchemaProps =
        serde_json::to_value(generator.into_root_schema_for::<W>()).and_then(serde_json::from_value).ok()?;
    root.properties?.remove(field)
}

/// The schema of one named property.
fn child<'s>(schema: &'s mut JSONSchemaProps, name: &str) -> Option<&'s mut JSONSchemaProps> {
    schema.properties.as_mut()?.get_mut(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::all_crds;
    use crate::registry::{BUILTIN_KINDS, VAULT_KIND};

    /// A row as a provider crate declares it, here with the Vault kind's spec as its blocks.
    static COPIED_BLOCK: ProviderKind =
        ProviderKind { stores: &[StoreBlock::spec("copiedBlock"), StoreBlock::spec("copiedTwice")], ..VAULT_KIND };

    /// A row whose block is upstream's shape: the field `upstream` of [`Upstream`].
    static UPSTREAM_BLOCK: ProviderKind = ProviderKind {
        stores: &[StoreBlock {
            schema: Some(|| field_schema::<Upstream>("upstream")),
            translate: Some(|v| Ok(v.clone())),
            ..StoreBlock::spec("upstream")
        }],
        ..VAULT_KIND
    };

    #[derive(JsonSchema)]
    #[allow(dead_code)]
    struct Upstream {
        /// Upstream's block.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        upstream: Option<UpstreamBlock>,
    }

    #[derive(JsonSchema)]
    #[allow(dead_code)]
    struct UpstreamBlock {
        /// A count.
        #[serde(default)]
        count: Option<i64>,
    }

    /// A row with its own block schema puts that schema (the field's description included) in
    /// both stores.
    #[test]
    fn a_row_with_an_upstream_block_types_it_with_its_own_schema() {
        let block = block_schema(&UPSTREAM_BLOCK, &UPSTREAM_BLOCK.stores[0]).expect("its schema");
        assert_eq!(block.description.as_deref(), Some("Upstream's block."));
        let count = block.properties.as_ref().and_then(|p| p.get("count")).expect("count");
        assert_eq!((count.type_.as_deref(), count.nullable), (Some("integer"), Some(true)), "{count:?}");
        assert!(field_schema::<Upstream>("absent").is_none());
        for crd in all_crds(&[]).into_iter().filter(|c| STORE_KINDS.contains(&c.spec.names.kind.as_str())) {
            let typed = with_store_blocks(crd, &[&UPSTREAM_BLOCK]);
            assert!(provider_blocks(&typed, "v1").contains(&"upstream".to_string()));
        }
    }

    fn provider_blocks(crd: &CustomResourceDefinition, version: &str) -> Vec<String> {
        let v = crd.spec.versions.iter().find(|v| v.name == version).expect("version");
        let mut root = v.schema.clone().and_then(|s| s.open_api_v3_schema).expect("schema");
        let provider = child(&mut root, "spec").and_then(|s| child(s, "provider"));
        provider.and_then(|p| p.properties.as_ref()).map(|p| p.keys().cloned().collect()).unwrap_or_default()
    }

    /// A row's blocks are its kind's spec schema under `spec.provider.<key>` of both stores' served
    /// versions; the rows without store blocks (typed by `SecretStoreProvider` itself) add nothing.
    #[test]
    fn a_row_with_store_blocks_types_them_in_both_stores() {
        let spec = block_schema(&VAULT_KIND, &StoreBlock::spec("any")).expect("the Vault kind's spec");
        assert!(spec.properties.as_ref().is_some_and(|p| p.contains_key("server")), "{spec:?}");
        for crd in all_crds(&[]) {
            assert_eq!(with_store_blocks(crd.clone(), &BUILTIN_KINDS), crd, "{}", crd.spec.names.kind);
            let typed = with_store_blocks(crd.clone(), &[&COPIED_BLOCK]);
            if !STORE_KINDS.contains(&crd.spec.names.kind.as_str()) {
                assert_eq!(typed, crd);
                continue;
            }
            for key in ["copiedBlock", "copiedTwice"] {
                assert!(provider_blocks(&typed, "v1").contains(&key.to_string()), "{key}: {}", crd.spec.names.kind);
            }
            assert!(!provider_blocks(&crd, "v1").contains(&"copiedBlock".to_string()));
            assert!(provider_blocks(&typed, "v1beta1").is_empty(), "a retired version stays open");
        }
    }
}
