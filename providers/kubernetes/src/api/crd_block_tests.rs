use super::*;

fn crd(yaml: &str) -> CrdReadSpec {
    crd_read_spec(&serde_yaml::from_str(yaml).expect("test manifest parses"))
}

fn crd_errors(yaml: &str) -> Vec<String> {
    validate_crd(&crd(yaml))
        .err()
        .map(|e| e.0.iter().map(|e| format!("{}: {}", e.field, e.message)).collect())
        .unwrap_or_default()
}

#[test]
fn crd_rules() {
    let ok = "{auth: {serviceAccount: {name: r}}, resource: {group: '', version: v1, kind: ConfigMap}}";
    assert_eq!(crd_errors(ok), Vec::<String>::new());
    let c = crd(ok);
    assert_eq!((c.resource.kind.as_str(), c.connection.auth.is_some()), ("ConfigMap", true));
    let none = crd_errors("{resource: {group: '', version: v1, kind: ConfigMap}}");
    assert_eq!(none, ["spec: set exactly one of auth or authRef"]);
    let secret = crd_errors("{auth: {serviceAccount: {name: r}}, resource: {group: '', version: v1, kind: Secret}}");
    assert_eq!(secret, ["spec.resource.kind: Secrets are read through spec.provider.kubernetes, not crd"]);
    let empty = crd_errors("{auth: {serviceAccount: {name: r}}, resource: {group: x.io, version: '', kind: ''}}");
    assert_eq!(empty.len(), 2, "{empty:?}");
    let rules = crd_errors(
        "{auth: {serviceAccount: {name: r}}, resource: {group: x.io, version: v1, kind: W}, \
         whitelist: {rules: [{}, {name: '('}, {properties: ['^spec$', '[']}]}}",
    );
    assert_eq!(rules.len(), 3, "{rules:?}");
    assert!(rules[0].starts_with("spec.whitelist.rules[0]: set name, namespace or properties"), "{rules:?}");
    assert!(rules[1].starts_with("spec.whitelist.rules[1].name: \"(\" is not a regular expression"), "{rules:?}");
    assert!(rules[2].starts_with("spec.whitelist.rules[2].properties[1]: "), "{rules:?}");
}

/// The spec the provider is handed keeps the block's field paths (the connection flattened), and
/// reads back as what was translated.
#[test]
fn the_read_spec_keeps_the_blocks_paths() {
    let block = serde_json::json!({
        "server": {"caProvider": {"type": "ConfigMap", "name": "ca"}},
        "auth": {"serviceAccount": {"name": "r"}},
        "resource": {"group": "", "version": "v1", "kind": "ConfigMap"},
        "whitelist": {"rules": [{"name": "^a"}]},
    });
    let spec = translate(&block).expect("translates");
    assert_eq!(spec["server"]["caProvider"]["name"], "ca");
    assert_eq!(spec["auth"]["serviceAccount"]["name"], "r");
    let read: CrdReadSpec = serde_json::from_value(spec).expect("reads back");
    assert_eq!(read, crd_read_spec(&serde_json::from_value(block).expect("a block")));
    assert!(matches!(translate(&serde_json::json!({"resource": 1})), Err(BlockError::Unreadable(_))));
}

#[test]
fn a_secret_store_reads_its_own_namespace_only() {
    assert_eq!(crd_object_ref("app", Some("team-a")), Ok((Some("team-a"), "app")));
    let across = crd_object_ref("team-b/app", Some("team-a")).unwrap_err();
    assert!(across.contains("names a namespace") && across.contains("ClusterSecretStore"), "{across}");
    assert_eq!(crd_object_ref("team-b/app", None), Ok((Some("team-b"), "app")));
    assert_eq!(crd_object_ref("cluster-wide", None), Ok((None, "cluster-wide")));
    for bad in ["", "a/", "/a", "a/b/c", "..", "../x"] {
        assert!(crd_object_ref(bad, None).is_err(), "{bad:?}");
    }
    assert!(crd_object_ref("..", Some("team-a")).is_err());
}

#[test]
fn whitelist_rules_allow_as_upstream() {
    let rules =
        crd("{auth: {serviceAccount: {name: r}}, resource: {group: x, version: v1, kind: W}, whitelist: {rules: [\
         {name: '^app-'}, {name: '^team-', properties: ['^spec\\.password$']}, {namespace: '^prod$'}]}}")
        .whitelist;
    assert!(crd_whitelist_allows(&[], false, None, "anything", ""), "no rules: everything");
    assert!(crd_whitelist_allows(&rules, true, Some("a"), "app-x", ""));
    assert!(crd_whitelist_allows(&rules, true, Some("a"), "team-x", "spec.password"));
    assert!(!crd_whitelist_allows(&rules, true, Some("a"), "team-x", "spec.user"), "the property must match");
    assert!(!crd_whitelist_allows(&rules, true, Some("a"), "team-x", ""), "no property: rules needing one miss");
    assert!(crd_whitelist_allows(&rules, true, Some("prod"), "other", ""), "the namespace rule");
    assert!(!crd_whitelist_allows(&rules, true, Some("dev"), "other", ""));
    // A SecretStore ignores namespace filters, as upstream: the namespace-only rule then sets
    // nothing else and allows every object of the store's namespace.
    assert!(crd_whitelist_allows(&rules, false, Some("a"), "other", "spec.user"));
    let names = &rules[..2];
    assert!(!crd_whitelist_allows(names, false, Some("a"), "other", ""));
    let bad = [CrdWhitelistRule { name: "(".into(), ..Default::default() }];
    assert!(!crd_whitelist_allows(&bad, false, None, "x", ""), "a broken pattern matches nothing");
}
