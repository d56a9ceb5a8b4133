//! The Fake kind's rules, its row's admission, and upstream's store block translated and checked
//! as a store names it.

use keyward_crds::SecretStoreSpec;
use keyward_crds::rules::{
    ProviderIdentityNamespaces, StoreBackend, ValidationErrors, cluster_secret_store_references, secret_store_boundary,
    secret_store_warnings, store_backend, validate_secret_store,
};

use super::*;

fn store(yaml: &str) -> SecretStoreSpec {
    serde_yaml::from_str(yaml).expect("test manifest parses")
}

/// Field and message of each error.
fn errors(result: Result<(), ValidationErrors>) -> Vec<(String, String)> {
    result.err().map(|e| e.0).unwrap_or_default().into_iter().map(|e| (e.field, e.message)).collect()
}

#[test]
fn fake_config_table() {
    let cases = [
        ("entries", "data: [{key: a, value: x}, {key: a, version: v2, value: y}]\n", None),
        ("empty key", "data: [{key: '', value: x}]\n", Some(("spec.data[0].key", "must not be empty"))),
        (
            "duplicate",
            "data: [{key: a, value: x}, {key: a, value: y}]\n",
            Some(("spec.data[1]", "duplicate entry for key \"a\"")),
        ),
    ];
    for (case, text, want) in cases {
        let spec: FakeSpec = serde_yaml::from_str(text).expect("test manifest parses");
        let got = errors(validate_fake(&spec));
        match want {
            None => assert!(got.is_empty(), "{case}: {got:?}"),
            Some((field, message)) => assert!(
                got.len() == 1 && got[0].0 == field && got[0].1.contains(message),
                "{case}: want {field}: {message}, got {got:?}"
            ),
        }
    }
}

/// The row's admission reads the spec and reports its errors; a Fake reaches nothing.
#[test]
fn admission_reads_the_spec_and_reaches_nothing() {
    let unreadable = serde_json::json!({"data": "not a list"});
    assert!((KIND.admit)(&unreadable, &mut |_, _| {}).is_err(), "a spec that does not read is an error");
    let good = serde_json::json!({"data": [{"key": "k", "value": "v"}]});
    let mut reached = Vec::new();
    (KIND.admit)(&good, &mut |invalid, reach| reached.push((invalid.is_ok(), reach.named.len()))).expect("reads");
    assert_eq!(reached, [(true, 0)], "a valid Fake reaches nothing");
}

#[test]
fn fake_translates_values_versions_and_value_maps() {
    let s = store(
        "provider:\n  fake:\n    data:\n    - {key: /a, value: one, version: v1}\n    - {key: /b, valueMap: {x: '1', y: '2'}}\n    \
         - {key: /c, version: ''}\n    validationResult: 2\n",
    );
    let backend = store_backend(&s.provider, &[&KIND]).expect("served");
    assert_eq!((backend.provider_name(), backend.store_key()), ("fake", "fake"));
    let StoreBackend::Plugin { kind: row, spec, .. } = backend else { panic!("fake") };
    assert_eq!(row, &KIND);
    let spec: FakeSpec = serde_json::from_value(spec).expect("a Fake spec");
    assert_eq!(
        spec.data,
        vec![
            FakeEntry { key: "/a".into(), version: Some("v1".into()), value: "one".into() },
            FakeEntry { key: "/b".into(), version: None, value: r#"{"x":"1","y":"2"}"#.into() },
            FakeEntry { key: "/c".into(), version: None, value: String::new() },
        ]
    );
    let e = store_backend(&store("provider: {fake: {data: [{key: k, valueMap: 3}]}}").provider, &[&KIND])
        .expect_err("not upstream's block");
    assert!(e.to_string().starts_with("spec.provider.fake: not a Fake store block: "), "{e}");
}

/// A store's Fake block is checked by the kind's rules under its own key, warns of nothing and
/// reaches nothing, for a SecretStore and a ClusterSecretStore alike.
#[test]
fn a_fake_store_is_checked_by_the_kinds_rules() {
    let duplicate = store("provider: {fake: {data: [{key: k, value: a}, {key: k, value: b}]}}");
    let got = errors(validate_secret_store(Some("a"), &duplicate, &[&KIND]));
    assert!(got.len() == 1 && got[0].0 == "spec.provider.fake.data[1]", "{got:?}");
    assert!(got[0].1.starts_with("duplicate entry"), "{got:?}");
    let s = store("provider: {fake: {data: [{key: k, value: v}]}}");
    assert_eq!(validate_secret_store(None, &s, &[&KIND]), Ok(()));
    assert_eq!(secret_store_warnings(&s, &[&KIND]), Vec::<String>::new());
    assert_eq!(secret_store_boundary("a", &s, &[&KIND], &ProviderIdentityNamespaces::NONE), Ok(()));
    let backend = store_backend(&s.provider, &[&KIND]).expect("served");
    assert_eq!(cluster_secret_store_references(&backend), Ok(()), "a Fake store names nothing");
    // Without the row the block is not served (and, as every unserved block, not refused).
    assert!(secret_store_warnings(&s, &[])[0].starts_with("spec.provider.fake is not served"));
}

/// The store CRDs type the block as upstream's, described as the store field.
#[test]
fn the_store_block_schema_is_upstreams() {
    let schema = (KIND.stores[0].schema.expect("upstream's block"))().expect("a schema");
    assert_eq!(schema.description.as_deref(), Some("Static values for tests and demos (served by the Fake provider)."));
    let data = schema.properties.as_ref().and_then(|p| p.get("data")).expect("data");
    let item = data.items.as_ref().expect("items");
    let item = serde_json::to_value(item).expect("json");
    for field in ["key", "value", "valueMap", "version"] {
        assert!(item["properties"][field].is_object(), "{field}: {item}");
    }
    assert!(schema.properties.as_ref().is_some_and(|p| p.contains_key("validationResult")));
}
