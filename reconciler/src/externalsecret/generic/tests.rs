use super::*;
use crate::externalsecret::render::{RenderFor, Sources, render_for};
use keyward_template::Limits;

fn external_secret(target: Value) -> ExternalSecret {
    serde_json::from_value(json!({
        "apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
        "metadata": {"name": "app", "namespace": "team-a", "uid": "e1"},
        "spec": {"target": target},
    }))
    .unwrap()
}

fn manifest(api_version: &str, kind: &str) -> ManifestReference {
    ManifestReference { api_version: api_version.into(), kind: kind.into() }
}

fn data(pairs: &[(&str, &[u8])]) -> BTreeMap<String, Vec<u8>> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_vec())).collect()
}

fn rendered(target: &ExternalSecret, fetched: &BTreeMap<String, Vec<u8>>) -> Rendered {
    let template = target.spec.target.template.as_ref().unwrap();
    render_for(RenderFor::Generic, template, &Sources::default(), fetched, &Limits::default()).unwrap()
}

#[test]
fn a_config_map_holds_the_values_as_text_and_binary_and_is_owned() {
    let es = external_secret(json!({"name": "app-config"}));
    let body =
        desired(&es, &manifest("v1", "ConfigMap"), &data(&[("host", b"db"), ("raw", &[0xff, 0])]), None).unwrap();
    assert_eq!(body["metadata"]["name"], "app-config");
    assert_eq!(body["metadata"]["namespace"], "team-a");
    assert_eq!(body["metadata"]["labels"][MANAGED_LABEL], "true");
    assert_eq!(body["metadata"]["ownerReferences"][0]["uid"], "e1");
    assert_eq!(body["metadata"]["ownerReferences"][0]["controller"], true);
    assert_eq!(body["data"], json!({"host": "db"}));
    assert_eq!(body["binaryData"], json!({"raw": "/wA="}));
    let orphan = external_secret(json!({"creationPolicy": "Orphan"}));
    let body = desired(&orphan, &manifest("v1", "ConfigMap"), &data(&[]), None).unwrap();
    assert_eq!(body["metadata"]["name"], "app", "the target name defaults to the ExternalSecret's, as a Secret's");
    assert!(body["metadata"].get("ownerReferences").is_none());
    assert_eq!(body["data"], json!({}));
}

#[test]
fn another_kind_gets_spec_data_without_a_template_and_text_only() {
    let es = external_secret(json!({}));
    let body = desired(&es, &manifest("config.example.com/v1", "AppConfig"), &data(&[("a", b"1")]), None).unwrap();
    assert_eq!(body["apiVersion"], "config.example.com/v1");
    assert_eq!(body["kind"], "AppConfig");
    assert_eq!(body["spec"], json!({"data": {"a": "1"}}));
    let e = desired(&es, &manifest("config.example.com/v1", "AppConfig"), &data(&[("a", &[0xff])]), None).unwrap_err();
    assert!(e.contains("\"a\" is not text"), "{e}");
}

#[test]
fn templates_write_data_metadata_and_paths_as_upstream_documents() {
    // Upstream's manifest-advanced-path example: literals placed at spec.database and spec.logging.
    let es = external_secret(json!({"template": {"metadata": {"labels": {"app": "{{ .app }}"}}, "templateFrom": [
        {"literal": "host: {{ .dbHost }}\nport: {{ .dbPort }}\ncredentials:\n  username: {{ .dbUser }}\n", "target": "spec.database"},
        {"literal": "level: info\nformat: json\n", "target": "spec.logging"},
        {"literal": "- 10.0.0.0/8\n", "target": "spec.rules[1].from[0].source.notRemoteIpBlocks"},
    ]}}));
    let fetched = data(&[("dbHost", b"db"), ("dbPort", b"5432"), ("dbUser", b"app"), ("app", b"shop")]);
    let r = rendered(&es, &fetched);
    assert!(r.data.is_empty(), "a template's fetched data is not passed through into a generic target");
    let body = desired(&es, &manifest("config.example.com/v1", "AppConfig"), &r.data, Some(&r)).unwrap();
    assert_eq!(body["spec"]["database"], json!({"host": "db", "port": 5432, "credentials": {"username": "app"}}));
    assert_eq!(body["spec"]["logging"], json!({"level": "info", "format": "json"}));
    assert_eq!(body["spec"]["rules"], json!([null, {"from": [{"source": {"notRemoteIpBlocks": ["10.0.0.0/8"]}}]}]));
    assert_eq!(body["metadata"]["labels"], json!({"app": "shop", MANAGED_LABEL: "true"}));
    assert!(body.get("data").is_none(), "no data field for a kind that has none");

    // Upstream's manifest-templated-configmap: template.data into the ConfigMap's data.
    let es = external_secret(json!({"template": {"data": {"database.yaml": "host: {{ .dbHost }}\n"}}}));
    let r = rendered(&es, &fetched);
    let body = desired(&es, &manifest("v1", "ConfigMap"), &r.data, Some(&r)).unwrap();
    assert_eq!(body["data"], json!({"database.yaml": "host: db\n"}));
}

#[test]
fn a_nested_literal_merges_into_a_map_and_a_single_key_replaces() {
    let mut body = json!({"spec": {"database": {"host": "old", "keep": true}}});
    let merge = AtPath {
        steps: keyward_crds::rules::parse_target_path("spec.database").unwrap(),
        value: json!({"host": "new"}),
        merge: true,
    };
    set_at(&mut body, &merge, &mut MAX_LIST_SLOTS.clone()).unwrap();
    assert_eq!(body["spec"]["database"], json!({"host": "new", "keep": true}));
    let replace = AtPath { steps: vec![PathStep::Key("spec".into())], value: json!({"x": 1}), merge: false };
    set_at(&mut body, &replace, &mut MAX_LIST_SLOTS.clone()).unwrap();
    assert_eq!(body["spec"], json!({"x": 1}));
    let into_scalar =
        AtPath { steps: keyward_crds::rules::parse_target_path("spec.x.y").unwrap(), value: json!(1), merge: false };
    let e = set_at(&mut body, &into_scalar, &mut MAX_LIST_SLOTS.clone()).unwrap_err();
    assert!(e.contains("\"y\" is not in a map"), "{e}");
    let into_map =
        AtPath { steps: keyward_crds::rules::parse_target_path("spec[0]").unwrap(), value: json!(1), merge: false };
    assert!(set_at(&mut body, &into_map, &mut MAX_LIST_SLOTS.clone()).unwrap_err().contains("[0] is not in a list"));
}

#[test]
fn a_path_is_refused_for_a_secret_and_items_under_spec_are_keys() {
    let es = external_secret(json!({"template": {"templateFrom": [{"literal": "a: b", "target": "spec.x"}]}}));
    let template = es.spec.target.template.as_ref().unwrap();
    let e = render_for(RenderFor::Secret, template, &Sources::default(), &data(&[]), &Limits::default()).unwrap_err();
    assert!(e.to_string().contains("names no part of a Secret"), "{e}");

    let es = external_secret(json!({"template": {"templateFrom": [
        {"configMap": {"name": "tpl", "items": [{"key": "url"}]}, "target": "Spec"},
        {"configMap": {"name": "tpl", "items": [{"key": "list"}]}, "target": "spec.hosts"},
    ]}}));
    let mut sources = Sources::default();
    sources.config_maps.insert(
        "tpl".into(),
        [("url".to_string(), "https://{{ .h }}".into()), ("list".to_string(), "[a, '{{ .h }}']".into())].into(),
    );
    let template = es.spec.target.template.as_ref().unwrap();
    let r = render_for(RenderFor::Generic, template, &sources, &data(&[("h", b"x")]), &Limits::default()).unwrap();
    let body = desired(&es, &manifest("example.com/v1", "Thing"), &r.data, Some(&r)).unwrap();
    assert_eq!(body["spec"], json!({"url": "https://x", "hosts": ["a", "x"]}));
}

#[test]
fn the_paths_of_one_object_share_one_budget_of_list_elements() {
    let at = |path: &str| AtPath {
        steps: keyward_crds::rules::parse_target_path(path).unwrap(),
        value: json!(1),
        merge: false,
    };
    // One path at upstream's highest index fits.
    let mut body = json!({});
    let mut slots = MAX_LIST_SLOTS;
    set_at(&mut body, &at("spec.a[10000]"), &mut slots).unwrap();
    assert_eq!(body["spec"]["a"].as_array().map(Vec::len), Some(10_001));
    // A second large list of the same object is refused, naming the step, and grows nothing.
    let e = set_at(&mut body, &at("spec.b[10000]"), &mut slots).unwrap_err();
    assert!(e.contains("[10000] would grow the object's lists past 10001 elements"), "{e}");
    assert!(body["spec"]["b"].as_array().is_none_or(Vec::is_empty), "{}", body["spec"]["b"]);
    // Writing into what exists costs nothing.
    set_at(&mut body, &at("spec.a[5]"), &mut slots).unwrap();
    assert_eq!(body["spec"]["a"][5], json!(1));
}
