//! The typed `spec.provider.<key>` blocks of the generated SecretStore and ClusterSecretStore
//! CRDs: every row with a store key has one, and every typed block takes every field upstream's
//! CRD (release 2.9.0, `e2e/fixtures/upstream-crds-2.9.0.yaml.gz`) takes there, with the same
//! JSON type, so upstream's manifests still apply. Keyward's stricter value rules (required
//! names, patterns, enums) are its own and not compared.

use serde_json::Value;

use keyward_provider_registry::PROVIDER_KINDS;

const STORES: [&str; 2] = ["secretstores.external-secrets.io", "clustersecretstores.external-secrets.io"];

/// `spec.provider` of version `v1` of the CRD named `name`.
fn provider_schema<'v>(crds: &'v [Value], name: &str) -> &'v Value {
    let crd = crds.iter().find(|c| c["metadata"]["name"] == name).unwrap_or_else(|| panic!("{name}"));
    let versions = crd["spec"]["versions"].as_array().expect("versions");
    let v1 = versions.iter().find(|v| v["name"] == "v1").expect("v1");
    &v1["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["provider"]
}

fn upstream_crds() -> Vec<Value> {
    let path = std::path::Path::new(
        &std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR when it runs a test"),
    )
    .join("../../e2e/fixtures/upstream-crds-2.9.0.yaml.gz");
    let out = std::process::Command::new("gzip").arg("-dc").arg(&path).output().expect("run gzip");
    assert!(out.status.success(), "gzip -dc {}", path.display());
    let text = String::from_utf8(out.stdout).expect("utf-8");
    serde_yaml::Deserializer::from_str(&text)
        .map(|doc| serde::Deserialize::deserialize(doc).expect("upstream CRD YAML"))
        .filter(|v: &Value| !v.is_null())
        .collect()
}

fn ours() -> Vec<Value> {
    keyward_crds::generate::all_crds(PROVIDER_KINDS)
        .into_iter()
        .map(|crd| serde_json::to_value(crd).expect("CRD as JSON"))
        .collect()
}

/// Where `ours` would refuse or prune what `upstream` takes: a field it does not have, another
/// JSON type, or an enum value it lacks.
fn gaps(upstream: &Value, ours: &Value, path: &str, out: &mut Vec<String>) {
    let open = ours["x-kubernetes-preserve-unknown-fields"] == true;
    if open && ours.get("properties").is_none() {
        return;
    }
    let int_or_string = |s: &Value| s["x-kubernetes-int-or-string"] == true;
    if upstream["type"] != ours["type"] && !int_or_string(ours) && !upstream["type"].is_null() {
        out.push(format!("{path}: type {} upstream, {} here", upstream["type"], ours["type"]));
    }
    if let (Some(up), Some(here)) = (upstream["enum"].as_array(), ours["enum"].as_array()) {
        out.extend(up.iter().filter(|v| !here.contains(v)).map(|v| format!("{path}: enum value {v} missing")));
    }
    if let Some(properties) = upstream["properties"].as_object() {
        for (name, schema) in properties {
            match ours["properties"].get(name) {
                Some(here) => gaps(schema, here, &format!("{path}.{name}"), out),
                None if open => {}
                None => out.push(format!("{path}.{name}: missing")),
            }
        }
    }
    if upstream["additionalProperties"].is_object() {
        match ours.get("additionalProperties") {
            Some(here) => gaps(&upstream["additionalProperties"], here, &format!("{path}.*"), out),
            None if open => {}
            None => out.push(format!("{path}.*: a map upstream, not here")),
        }
    }
    if upstream["items"].is_object() {
        gaps(&upstream["items"], &ours["items"], &format!("{path}[]"), out);
    }
}

#[test]
fn every_store_block_of_a_row_is_typed_in_both_stores() {
    let ours = ours();
    for store in STORES {
        let provider = provider_schema(&ours, store);
        assert_eq!(provider["x-kubernetes-preserve-unknown-fields"], true, "{store}: other keys stay open");
        for key in PROVIDER_KINDS.iter().flat_map(|row| row.stores).map(|block| block.key) {
            let block = &provider["properties"][key];
            assert!(block["properties"].is_object(), "{store}: spec.provider.{key} is not typed: {block}");
            assert_ne!(block["x-kubernetes-preserve-unknown-fields"], true, "{store}: spec.provider.{key} is open");
        }
    }
}

#[test]
fn every_typed_block_takes_what_upstream_takes() {
    let (upstream, ours) = (upstream_crds(), ours());
    let mut out = Vec::new();
    for store in STORES {
        let (up, here) = (provider_schema(&upstream, store), provider_schema(&ours, store));
        let typed = here["properties"].as_object().expect("typed blocks");
        assert!(typed.len() >= 10, "{store}: {:?}", typed.keys().collect::<Vec<_>>());
        for (key, block) in typed {
            let upstream_block = &up["properties"][key.as_str()];
            assert!(upstream_block.is_object(), "{store}: spec.provider.{key} is not upstream's");
            gaps(upstream_block, block, &format!("{store} spec.provider.{key}"), &mut out);
        }
    }
    assert!(out.is_empty(), "fields upstream takes that the generated CRDs refuse or prune:\n{}", out.join("\n"));
}

/// Paths under `ours` where a `null` is refused but upstream's schema prunes it: an enum that is
/// nullable here (the API server checks `null` against the enum) where upstream's is not
/// (the API server drops the `null` before it validates).
fn null_refusals(upstream: &Value, ours: &Value, path: &str, out: &mut Vec<String>) {
    if ours["nullable"] == true && ours["enum"].is_array() && upstream["nullable"] != true {
        out.push(path.to_string());
    }
    if let Some(properties) = upstream["properties"].as_object() {
        for (name, schema) in properties {
            if let Some(here) = ours["properties"].get(name) {
                null_refusals(schema, here, &format!("{path}.{name}"), out);
            }
        }
    }
    if upstream["items"].is_object() && ours["items"].is_object() {
        null_refusals(&upstream["items"], &ours["items"], &format!("{path}[]"), out);
    }
}

/// Upstream's manifests write `conversionStrategy: null` and the like; upstream's CRDs prune the
/// `null`, so no CRD here that upstream also has may refuse it.
#[test]
fn every_crd_takes_the_nulls_upstream_takes() {
    let (upstream, ours) = (upstream_crds(), ours());
    // The schema of the version `name` of a CRD.
    let schema = |crd: &Value, version: &Value| {
        let versions = crd["spec"]["versions"].as_array().expect("versions").clone();
        versions.into_iter().find(|v| &v["name"] == version).map(|v| v["schema"]["openAPIV3Schema"].clone())
    };
    let mut compared = 0;
    for theirs in &upstream {
        let name = &theirs["metadata"]["name"];
        let Some(here) = ours.iter().find(|c| &c["metadata"]["name"] == name) else { continue };
        let served = here["spec"]["versions"].as_array().expect("versions").iter().find(|v| v["served"] == true);
        let version = &served.expect("a served version")["name"];
        let (Some(theirs), Some(here)) = (schema(theirs, version), schema(here, version)) else { continue };
        let mut out = Vec::new();
        null_refusals(&theirs, &here, "", &mut out);
        assert!(out.is_empty(), "{name}: a null upstream takes is refused at {out:#?}");
        compared += 1;
    }
    assert_eq!(compared, 6, "the fixture holds the six API kinds; compared {compared}");
}
