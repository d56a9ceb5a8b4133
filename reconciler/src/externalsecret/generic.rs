//! Generic targets: an ExternalSecret whose `spec.target.manifest` names a kind other than
//! Secret writes an object of that kind, in its own namespace, under the same name rule as a
//! Secret, by server-side apply with the reconciler's field manager. Only while the operator
//! turned them on and listed the resource (`keyward_crds::rules::generic_target_refusal`, the
//! rule the webhook warns with); the kind is resolved to its resource by the API server's
//! discovery, so a cluster-scoped kind is refused.
//!
//! What is written, as upstream: without a template, a ConfigMap's `data` (`binaryData` for a
//! value that is not UTF-8) or another kind's `spec.data`; with one, the rendered `data`, labels
//! and annotations, and what `templateFrom[].target` paths place into the object.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use keyward_crds::ExternalSecret;
use keyward_crds::external_secret::{CreationPolicy, ManifestReference};
use keyward_crds::rules::{GenericTargets, PathStep, api_group, generic_target_refusal, generic_targets_off};
use kube::api::{Patch, PatchParams};
use kube::core::{DynamicObject, GroupVersionKind, PartialObjectMeta, PartialObjectMetaExt};
use kube::discovery::Scope;
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::{Map, Value, json};

use super::render::{AtPath, Rendered};
use super::target::{FIELD_MANAGER, MANAGED_LABEL};

/// The object a generic target is written as, resolved and allowed.
pub struct GenericTarget {
    /// The API of its resource in the ExternalSecret's namespace.
    pub api: Api<DynamicObject>,
    /// The manifest's apiVersion and kind.
    pub manifest: ManifestReference,
}

/// Why a generic target is not written.
#[derive(Debug)]
pub enum Refused {
    /// The operator's rule refuses it: said once, not retried until something changes.
    Rule(String),
    /// The API server could not say what the kind is (not served, or discovery failed): retried,
    /// since a CRD may be installed later.
    Discovery(String),
}

/// Resolves `manifest` to its resource in `namespace` and checks the operator's rule. Nothing is
/// asked of the API server while generic targets are off.
pub async fn resolve(
    client: &Client,
    targets: &GenericTargets,
    namespace: &str,
    manifest: &ManifestReference,
) -> Result<GenericTarget, Refused> {
    let (api_version, kind) = (manifest.api_version.as_str(), manifest.kind.as_str());
    if !targets.enabled {
        return Err(Refused::Rule(format!("{}; nothing was written", generic_targets_off(api_version, kind))));
    }
    let version = api_version.rsplit_once('/').map_or(api_version, |(_, v)| v);
    let gvk = GroupVersionKind::gvk(api_group(api_version), version, kind);
    let (resource, caps) = kube::discovery::pinned_kind(client, &gvk).await.map_err(|e| {
        Refused::Discovery(format!(
            "spec.target.manifest ({api_version} {kind}): the API server does not say which resource this is: {e}; \
             nothing was written"
        ))
    })?;
    let namespaced = caps.scope == Scope::Namespaced;
    if let Some(refusal) = generic_target_refusal(targets, api_version, kind, &resource.plural, namespaced) {
        return Err(Refused::Rule(format!("{refusal}; nothing was written")));
    }
    Ok(GenericTarget { api: Api::namespaced_with(client.clone(), namespace, &resource), manifest: manifest.clone() })
}

impl GenericTarget {
    /// The kind, for messages.
    pub fn kind(&self) -> &str {
        &self.manifest.kind
    }

    /// The object's metadata as it stands (only the metadata is read, whatever its kind).
    pub async fn existing(&self, name: &str) -> Result<Option<Arc<PartialObjectMeta<Secret>>>, kube::Error> {
        let found = self.api.get_metadata_opt(name).await?;
        Ok(found.map(|o| Arc::new(o.metadata.into_response_partial::<Secret>())))
    }

    /// Applies `body`; whether the API server changed the object (a no-op apply keeps its
    /// resourceVersion).
    pub async fn apply(&self, name: &str, body: Value, before: Option<&str>) -> Result<bool, kube::Error> {
        let applied = self.api.patch(name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(body)).await?;
        Ok(applied.resource_version().as_deref() != before)
    }
}

/// The apply body of a generic target. The ownership is a Secret's: the managed label for the
/// policies that manage it, a controller owner reference for `Owner`.
pub fn desired(
    es: &ExternalSecret,
    manifest: &ManifestReference,
    data: &BTreeMap<String, Vec<u8>>,
    rendered: Option<&Rendered>,
) -> Result<Value, String> {
    let policy = es.spec.target.creation_policy;
    let mut metadata = json!({ "name": es.target_secret_name(), "namespace": es.namespace() });
    if policy.manages_target() {
        metadata["labels"] = json!({ MANAGED_LABEL: "true" });
    }
    if policy == CreationPolicy::Owner
        && let Some(owner) = es.controller_owner_ref(&())
    {
        metadata["ownerReferences"] = json!([owner]);
    }
    let mut body = json!({ "apiVersion": manifest.api_version, "kind": manifest.kind, "metadata": metadata });
    let config_map = manifest.api_version == "v1" && manifest.kind == "ConfigMap";
    match (config_map, rendered.is_some()) {
        (true, _) => {
            let (text, binary) = split_text(data);
            if !text.is_empty() || binary.is_empty() {
                body["data"] = json!(text);
            }
            if !binary.is_empty() {
                body["binaryData"] = json!(binary);
            }
        }
        // Another kind: the fetched values under spec.data, a template's data under data.
        (false, false) => body["spec"] = json!({ "data": texts(data)? }),
        (false, true) if !data.is_empty() => body["data"] = json!(texts(data)?),
        (false, true) => {}
    }
    if let Some(r) = rendered {
        for (k, v) in &r.labels {
            body["metadata"]["labels"][k] = json!(v);
        }
        for (k, v) in &r.annotations {
            body["metadata"]["annotations"][k] = json!(v);
        }
        // One budget for every path of the object: each may name an index up to
        // MAX_PATH_INDEX, and a template may hold many paths.
        let mut list_slots = MAX_LIST_SLOTS;
        for at in &r.at_paths {
            set_at(&mut body, at, &mut list_slots)?;
        }
    }
    Ok(body)
}

/// A ConfigMap's `data` (UTF-8 values) and `binaryData` (the others, base64 on the wire).
fn split_text(data: &BTreeMap<String, Vec<u8>>) -> (BTreeMap<&str, &str>, BTreeMap<&str, k8s_openapi::ByteString>) {
    let (mut text, mut binary) = (BTreeMap::new(), BTreeMap::new());
    for (k, v) in data {
        match std::str::from_utf8(v) {
            Ok(s) => {
                text.insert(k.as_str(), s);
            }
            Err(_) => {
                binary.insert(k.as_str(), k8s_openapi::ByteString(v.clone()));
            }
        }
    }
    (text, binary)
}

fn texts(data: &BTreeMap<String, Vec<u8>>) -> Result<BTreeMap<&str, &str>, String> {
    data.iter()
        .map(|(k, v)| {
            let v = std::str::from_utf8(v)
                .map_err(|_| format!("the value of {k:?} is not text; only a ConfigMap takes binary values"))?;
            Ok((k.as_str(), v))
        })
        .collect()
}

/// Most list elements the paths of one object may create in all: a path's index grows its list
/// to it, and the indexes are tenant input (each up to `MAX_PATH_INDEX`), so without a total
/// many paths of large indexes would fill the shared reconciler's memory.
pub const MAX_LIST_SLOTS: usize = keyward_crds::rules::MAX_PATH_INDEX + 1;

/// Places `at.value` at its path, creating the maps and lists on the way (a list grows to the
/// index, taking what it adds from `list_slots`); a map meets a map by merging when `at.merge`,
/// anything else is replaced.
pub fn set_at(body: &mut Value, at: &AtPath, list_slots: &mut usize) -> Result<(), String> {
    let mut node = body;
    for (depth, step) in at.steps.iter().enumerate() {
        let here = || format!("at step {} of the path", depth + 1);
        node = match step {
            PathStep::Key(k) => {
                if node.is_null() {
                    *node = Value::Object(Map::new());
                }
                let Value::Object(map) = node else { return Err(format!("{}: {k:?} is not in a map", here())) };
                map.entry(k.clone()).or_insert(Value::Null)
            }
            PathStep::Index(i) => {
                if node.is_null() {
                    *node = Value::Array(Vec::new());
                }
                let Value::Array(list) = node else { return Err(format!("{}: [{i}] is not in a list", here())) };
                if list.len() <= *i {
                    let added = i.saturating_add(1).saturating_sub(list.len());
                    *list_slots = list_slots.checked_sub(added).ok_or_else(|| {
                        format!("{}: [{i}] would grow the object's lists past {MAX_LIST_SLOTS} elements in all", here())
                    })?;
                    list.resize(i + 1, Value::Null);
                }
                &mut list[*i]
            }
        };
    }
    match (node, &at.value) {
        (Value::Object(existing), Value::Object(new)) if at.merge => {
            existing.extend(new.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        (node, value) => *node = value.clone(),
    }
    Ok(())
}

#[cfg(test)]
mod tests;
