//! Defaults the CRD schema cannot express, because they depend on another field.
//!
//! - ExternalSecret `spec.target.name` ← `metadata.name` when unset, so the written Secret is
//!   visible in the manifest.
//! - ExternalSecret `spec.refreshPolicy` ← `OnChange` when `refreshInterval` is zero (no periodic
//!   refresh), else `Periodic`.
//!
//! Store references are never given a kind: an omitted kind means a SecretStore, as upstream
//! (`keyward_crds::rules::store_ref_kind`), and stays omitted in the object.
//! - Provider/ClusterProvider `spec.config.providerRef.apiVersion` ← the provider config API
//!   version when the kind is one of Keyward's provider config kinds.

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, PatchOperation};
use keyward_crds::external_secret::DEFAULT_REFRESH_INTERVAL;
use keyward_crds::provider_config::PROVIDER_CONFIG_API_VERSION;
use keyward_crds::rules::parse_go_duration;
use keyward_provider_registry::provider_kind_named;
use serde_json::{Value, json};

fn add(tokens: &[&str], value: Value) -> PatchOperation {
    PatchOperation::Add(AddOperation { path: PointerBuf::from_tokens(tokens.iter().copied()), value })
}

fn non_empty_str<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer).and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// Defaults of an ExternalSecret (as JSON).
pub fn external_secret(object: &Value) -> Vec<PatchOperation> {
    let mut ops = Vec::new();
    let Some(spec) = object.get("spec").filter(|s| s.is_object()) else {
        return ops;
    };

    if let Some(name) = non_empty_str(object, "/metadata/name")
        && non_empty_str(spec, "/target/name").is_none()
    {
        match spec.get("target") {
            Some(Value::Object(_)) => ops.push(add(&["spec", "target", "name"], json!(name))),
            None | Some(Value::Null) => ops.push(add(&["spec", "target"], json!({ "name": name }))),
            Some(_) => {}
        }
    }

    if spec.get("refreshPolicy").is_none_or(Value::is_null) {
        let interval = spec.get("refreshInterval").and_then(Value::as_str).unwrap_or(DEFAULT_REFRESH_INTERVAL);
        if let Ok(d) = parse_go_duration(interval) {
            let policy = if d.is_zero() { "OnChange" } else { "Periodic" };
            ops.push(add(&["spec", "refreshPolicy"], json!(policy)));
        }
    }

    ops
}

/// Defaults of a Provider or ClusterProvider (as JSON).
pub fn provider_ref(object: &Value) -> Vec<PatchOperation> {
    let Some(r) = object.pointer("/spec/config/providerRef").filter(|r| r.is_object()) else {
        return Vec::new();
    };
    let known_kind = r.get("kind").and_then(Value::as_str).and_then(provider_kind_named).is_some();
    if known_kind && non_empty_str(r, "/apiVersion").is_none() {
        vec![add(&["spec", "config", "providerRef", "apiVersion"], json!(PROVIDER_CONFIG_API_VERSION))]
    } else {
        Vec::new()
    }
}
