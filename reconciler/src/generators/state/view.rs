//! What the GeneratorState controller keeps of each object: the fields it reads, decoded as
//! they arrive, and nothing else.
//!
//! GeneratorStates are written by tenants and watched cluster-wide, and `spec.state` and
//! `spec.resource` are free-form JSON of up to the object's 1.5 MB. Decoded whole (as a
//! `DynamicObject`), 25 of 1.4 MB each took the shared reconciler past its memory limit. Here
//! `spec.state` is skipped unread, `spec.resource` keeps its `apiVersion` and `kind`, the
//! deadline keeps a scalar and only the shape of anything else, and the metadata keeps what a
//! delete precondition, a finalizer patch and an event need (no managed fields, labels or
//! annotations). serde skips what is not kept without building it.

use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use keyward_crds::generators::GeneratorState;
use kube::Resource;
use serde::de::{IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

/// The view of one GeneratorState.
#[derive(Resource, Deserialize, Clone, Debug)]
#[resource(inherit = GeneratorState)]
pub struct StateObject {
    /// Name, namespace, uid, resourceVersion, deletionTimestamp and finalizers.
    #[serde(default, deserialize_with = "lean_meta")]
    pub metadata: ObjectMeta,
    /// The spec fields read.
    #[serde(default)]
    pub spec: SpecView,
    /// The status, which only controllers write (its schema is typed; tenants' `edit` rights
    /// do not reach the status subresource).
    #[serde(default)]
    pub status: Option<Value>,
}

/// The spec fields read: the deadline and what kind of generator made the state.
#[derive(Deserialize, Clone, Debug, Default)]
#[serde(rename_all = "camelCase")]
pub struct SpecView {
    /// `spec.garbageCollectionDeadline`: a scalar as written, a container as its empty shape.
    #[serde(default, deserialize_with = "shallow_opt")]
    pub garbage_collection_deadline: Option<Value>,
    /// `spec.resource`: an object with only its `apiVersion` and `kind`, or the shape of what
    /// else it is.
    #[serde(default, deserialize_with = "resource_opt")]
    pub resource: Option<Value>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct LeanMeta {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    generation: Option<i64>,
    deletion_timestamp: Option<Time>,
    finalizers: Option<Vec<String>>,
}

fn lean_meta<'de, D: Deserializer<'de>>(d: D) -> Result<ObjectMeta, D::Error> {
    let m = LeanMeta::deserialize(d)?;
    Ok(ObjectMeta {
        name: m.name,
        namespace: m.namespace,
        uid: m.uid,
        resource_version: m.resource_version,
        generation: m.generation,
        deletion_timestamp: m.deletion_timestamp,
        finalizers: m.finalizers,
        ..ObjectMeta::default()
    })
}

fn shallow_opt<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Ok(Some(d.deserialize_any(Shallow)?).filter(|v| !v.is_null()))
}

fn resource_opt<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Ok(Some(d.deserialize_any(ResourceFields)?).filter(|v| !v.is_null()))
}

/// A scalar as written; an array or object as an empty one, its content skipped.
struct Shallow;

impl<'de> Visitor<'de> for Shallow {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E: serde::de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Value::Array(Vec::new()))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Value::Object(Map::new()))
    }
}

/// A generator manifest's `apiVersion` and `kind` (each as [`Shallow`] reads it); anything that
/// is not an object, as [`Shallow`] reads it.
struct ResourceFields;

impl<'de> Visitor<'de> for ResourceFields {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a generator manifest")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut kept = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if key == "apiVersion" || key == "kind" {
                kept.insert(key, map.next_value_seed(ShallowSeed)?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(Value::Object(kept))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Value, A::Error> {
        Shallow.visit_seq(seq)
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Value, E> {
        Shallow.visit_str(v)
    }
    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Value, E> {
        Shallow.visit_bool(v)
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Value, E> {
        Shallow.visit_i64(v)
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Value, E> {
        Shallow.visit_u64(v)
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Value, E> {
        Shallow.visit_f64(v)
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E: serde::de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

struct ShallowSeed;

impl<'de> serde::de::DeserializeSeed<'de> for ShallowSeed {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(Shallow)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn only_what_the_controller_reads_is_kept() {
        let text = json!({
            "apiVersion": "generators.external-secrets.io/v1alpha1", "kind": "GeneratorState",
            "metadata": {"name": "s", "namespace": "n", "uid": "u", "resourceVersion": "7",
                         "finalizers": ["f"], "deletionTimestamp": "2026-01-01T00:00:00Z",
                         "annotations": {"a": "b"}, "labels": {"l": "v"},
                         "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}]},
            "spec": {"garbageCollectionDeadline": "2030-01-01T00:00:00Z", "state": {"pad": [0, 0, 0]},
                     "resource": {"apiVersion": "generators.external-secrets.io/v1alpha1", "kind": "Password",
                                  "metadata": {"name": "g"}, "spec": {"length": 8}}},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        })
        .to_string();
        let s: StateObject = serde_json::from_str(&text).unwrap();
        let m = &s.metadata;
        assert_eq!((m.name.as_deref(), m.namespace.as_deref(), m.uid.as_deref()), (Some("s"), Some("n"), Some("u")));
        assert_eq!((m.resource_version.as_deref(), m.finalizers.clone()), (Some("7"), Some(vec!["f".to_string()])));
        assert!(m.deletion_timestamp.is_some());
        assert!(m.annotations.is_none() && m.labels.is_none() && m.managed_fields.is_none());
        assert_eq!(s.spec.garbage_collection_deadline, Some(json!("2030-01-01T00:00:00Z")));
        assert_eq!(
            s.spec.resource,
            Some(json!({"apiVersion": "generators.external-secrets.io/v1alpha1", "kind": "Password"}))
        );
        assert_eq!(s.status.unwrap()["conditions"][0]["type"], "Ready");
    }

    #[test]
    fn containers_keep_their_shape_and_nothing_of_their_content() {
        let pad = format!("[{}0]", "0,".repeat(100_000));
        let text = format!(
            r#"{{"metadata": {{"name": "s"}}, "spec": {{"garbageCollectionDeadline": {pad}, "resource": {pad},
                 "state": {pad}}}}}"#
        );
        let s: StateObject = serde_json::from_str(&text).unwrap();
        assert_eq!(s.spec.garbage_collection_deadline, Some(json!([])));
        assert_eq!(s.spec.resource, Some(json!([])));
        let nested = r#"{"metadata": {}, "spec": {"resource": {"kind": {"deep": [1]}, "apiVersion": 3}}}"#;
        let s: StateObject = serde_json::from_str(nested).unwrap();
        assert_eq!(s.spec.resource, Some(json!({"kind": {}, "apiVersion": 3})));
        let empty: StateObject = serde_json::from_str(r#"{"metadata": {}, "spec": {"resource": null}}"#).unwrap();
        assert_eq!((empty.spec.resource, empty.spec.garbage_collection_deadline), (None, None));
    }
}
