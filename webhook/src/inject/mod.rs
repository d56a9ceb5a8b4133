//! Pod secret injection and workload reload hashes at admission.
//!
//! Pods in namespaces labelled `keyward.dev/injection: enabled` that name ExternalSecrets in
//! `keyward.dev/inject` get the synced Secrets wired in by reference; Deployments,
//! StatefulSets and DaemonSets labelled `keyward.dev/reload: "true"` (the only ones the
//! chart's workloads webhook selects) get a pod-template
//! annotation hashing the data of the Keyward-managed Secrets they use, so a rotation (which
//! the reconciler writes into that annotation) rolls them. The rules themselves live in
//! `keyward_crds::workload`; this module adapts them to admission requests and the caches.

pub mod index;

use std::collections::BTreeMap;

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, Patch, PatchOperation};
use k8s_openapi::api::core::v1::PodSpec;
use keyward_crds::workload::{self, INJECTED_ANNOTATION, SECRETS_HASH_ANNOTATION, TargetState};
use serde_json::{Value, json};

use crate::cache::State;
use crate::review::{Decision, Operation, Request, json_of};

/// The workload kinds whose pod templates get a reload hash.
const WORKLOADS: [&str; 3] = ["Deployment", "StatefulSet", "DaemonSet"];

/// Whether this request is for a kind handled here (Pods and workloads).
pub fn handles(req: &Request) -> bool {
    let k = &req.kind;
    (k.group.is_empty() && k.version == "v1" && k.kind == "Pod")
        || (k.group == "apps" && k.version == "v1" && WORKLOADS.contains(&k.kind.as_str()))
}

/// Answers a mutating review of a Pod or workload.
pub fn mutate(req: &Request, state: &State) -> Decision {
    let Some(object) = req.object.as_ref() else {
        return Decision::allow();
    };
    let object = &json_of(object);
    let namespace = req.namespace.clone().unwrap_or_default();
    if req.kind.kind == "Pod" { pod(&namespace, object, state) } else { workload(req, &namespace, object, state) }
}

fn annotations_at(object: &Value, pointer: &str) -> BTreeMap<String, String> {
    object.pointer(pointer).and_then(|a| serde_json::from_value(a.clone()).ok()).unwrap_or_default()
}

fn pod(namespace: &str, object: &Value, state: &State) -> Decision {
    let annotations = annotations_at(object, "/metadata/annotations");
    let request = match workload::parse_injection_request(&annotations) {
        Ok(Some(r)) => r,
        Ok(None) => return Decision::allow(),
        Err(e) => return Decision::deny(400, e),
    };
    let Some(spec) = object.get("spec").and_then(|s| serde_json::from_value::<PodSpec>(s.clone()).ok()) else {
        return Decision::deny(400, "the Pod's spec could not be read".to_string());
    };
    let injected = match workload::inject(namespace, &spec, &request, |es| state.injection.target(namespace, es)) {
        Ok(i) => i,
        Err(message) => return Decision::deny(403, message),
    };
    let mut ops = spec_ops(object, &injected.spec);
    ops.extend(annotation_ops(object, &["metadata"], INJECTED_ANNOTATION, &injected.annotation));
    Decision { patch: Some(Patch(ops)), ..Decision::allow() }.with_warnings(injected.warnings)
}

fn workload(req: &Request, namespace: &str, object: &Value, state: &State) -> Decision {
    let (labels, annotations) =
        (annotations_at(object, "/metadata/labels"), annotations_at(object, "/metadata/annotations"));
    if !workload::wants_reload(Some(&labels), Some(&annotations)) {
        return Decision::allow();
    }
    let template_annotations = annotations_at(object, "/spec/template/metadata/annotations");
    // After creation the reconciler owns the hash: it writes the rotated value, and an update
    // answered from a cache a moment behind must not write the old one back.
    if req.operation == Operation::Update && template_annotations.contains_key(SECRETS_HASH_ANNOTATION) {
        return Decision::allow();
    }
    let Some(spec) =
        object.pointer("/spec/template/spec").and_then(|s| serde_json::from_value::<PodSpec>(s.clone()).ok())
    else {
        return Decision::allow();
    };
    let hash = workload::template_secrets_hash(
        &spec,
        &template_annotations,
        |es| match state.injection.target(namespace, es) {
            TargetState::Synced { secret }
            | TargetState::NotSynced { secret, .. }
            | TargetState::Stale { secret, .. } => Some(secret),
            TargetState::Missing => None,
        },
        |secret| state.injection.data_hash(namespace, secret).map(str::to_string),
    );
    let Some(hash) = hash else {
        return Decision::allow();
    };
    let ops = annotation_ops(object, &["spec", "template", "metadata"], SECRETS_HASH_ANNOTATION, &hash);
    Decision { patch: Some(Patch(ops)), ..Decision::allow() }
}

/// Replaces the Pod spec fields injection may change: containers and volumes.
fn spec_ops(object: &Value, spec: &PodSpec) -> Vec<PatchOperation> {
    let new = serde_json::to_value(spec).unwrap_or(Value::Null);
    ["containers", "volumes"]
        .into_iter()
        .filter_map(|field| {
            let value = new.get(field)?;
            (object.pointer(&format!("/spec/{field}")) != Some(value)).then(|| add(&["spec", field], value.clone()))
        })
        .collect()
}

/// Sets one annotation of the metadata at `metadata`, creating the maps that are missing.
fn annotation_ops(object: &Value, metadata: &[&str], key: &str, value: &str) -> Vec<PatchOperation> {
    let mut ops = Vec::new();
    let pointer = |tokens: &[&str]| PointerBuf::from_tokens(tokens.iter().copied()).to_string();
    if object.pointer(&pointer(metadata)).is_none() {
        ops.push(add(metadata, json!({})));
    }
    let annotations: Vec<&str> = metadata.iter().copied().chain(["annotations"]).collect();
    if object.pointer(&pointer(&annotations)).is_none() {
        ops.push(add(&annotations, json!({})));
    }
    let entry: Vec<&str> = annotations.iter().copied().chain([key]).collect();
    ops.push(add(&entry, json!(value)));
    ops
}

fn add(tokens: &[&str], value: Value) -> PatchOperation {
    PatchOperation::Add(AddOperation { path: PointerBuf::from_tokens(tokens.iter().copied()), value })
}

#[cfg(test)]
mod tests;
