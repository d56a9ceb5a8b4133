//! Compact forms for the two kinds the caches hold one of per ExternalSecret: the
//! ExternalSecret itself and its managed Secret. At 10,000 ExternalSecrets, a decoded object
//! costs far more than its bytes: an `ObjectMeta` of ~360 bytes with every optional field in
//! line, a B-tree node of ~540 bytes for a one-entry label map, a key copying the uid and
//! resource version. The caches keep these kinds as [`Packed`] JSON or as a [`ManagedSecret`]
//! of a few fields and hand out the decoded object to whoever reads one.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use keyward_crds::workload::{DATA_HASH_ANNOTATION, MANAGED_LABEL};
use kube::api::ObjectMeta;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{Lookup, ObjectRef, Store};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};

/// An object kept as its (stripped) JSON, with only its name and namespace decoded: what the
/// store's key and the controller's bookkeeping read. [`Packed::unpack`] decodes the rest.
pub struct Packed<K> {
    meta: ObjectMeta,
    json: Box<[u8]>,
    kind: PhantomData<fn() -> K>,
}

impl<K: Resource<DynamicType = ()> + Serialize + DeserializeOwned> Packed<K> {
    /// Packs `obj`. The body leaves out what every object of the kind repeats (`apiVersion`,
    /// `kind`) and what `meta` keeps (name, namespace): about a hundred bytes of each of 10,000
    /// ExternalSecrets. Typed kinds read back without them ([`Packed::unpack`] puts name and
    /// namespace back).
    pub fn pack(obj: &K) -> Self {
        let meta =
            ObjectMeta { name: obj.meta().name.clone(), namespace: obj.meta().namespace.clone(), ..Default::default() };
        // Serializing a typed object into JSON cannot fail: every map key is a string.
        let mut body = serde_json::to_value(obj).unwrap_or_default();
        if let Some(fields) = body.as_object_mut() {
            fields.remove("apiVersion");
            fields.remove("kind");
            if let Some(m) = fields.get_mut("metadata").and_then(serde_json::Value::as_object_mut) {
                m.remove("name");
                m.remove("namespace");
            }
        }
        let json = serde_json::to_vec(&body).unwrap_or_default().into_boxed_slice();
        Packed { meta, json, kind: PhantomData }
    }

    /// The object. It was packed from an object of the same type, so decoding fails only if the
    /// type does not read back what it writes; that is reported, never guessed around.
    pub fn unpack(&self) -> Result<K, UnpackError> {
        let mut obj: K = serde_json::from_slice(&self.json).map_err(|e| UnpackError {
            kind: K::kind(&()).into_owned(),
            name: format!(
                "{}/{}",
                self.meta.namespace.as_deref().unwrap_or(""),
                self.meta.name.as_deref().unwrap_or("")
            ),
            error: e.to_string(),
        })?;
        obj.meta_mut().name.clone_from(&self.meta.name);
        obj.meta_mut().namespace.clone_from(&self.meta.namespace);
        Ok(obj)
    }

    /// Bytes kept for the object's body.
    pub fn packed_len(&self) -> usize {
        self.json.len()
    }
}

/// The object `r` names in a store of packed objects, decoded. One that cannot be decoded is
/// logged and reads as absent.
pub fn get<K>(store: &Store<Packed<K>>, r: &ObjectRef<K>) -> Option<K>
where
    K: Resource<DynamicType = ()> + Serialize + DeserializeOwned + 'static,
{
    let packed_ref = ObjectRef::new(&r.name);
    let packed_ref = match &r.namespace {
        Some(ns) => packed_ref.within(ns),
        None => packed_ref,
    };
    match store.get(&packed_ref)?.unpack() {
        Ok(obj) => Some(obj),
        Err(e) => {
            tracing::error!(error = %e, "skipping a cached object");
            None
        }
    }
}

/// A cached object that could not be decoded.
#[derive(Debug, thiserror::Error)]
#[error("cached {kind} {name} cannot be decoded: {error}")]
pub struct UnpackError {
    kind: String,
    name: String,
    error: String,
}

impl<K> Clone for Packed<K> {
    fn clone(&self) -> Self {
        Packed { meta: self.meta.clone(), json: self.json.clone(), kind: PhantomData }
    }
}

impl<K: Resource> fmt::Debug for Packed<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Packed").field("name", &self.meta.name).field("namespace", &self.meta.namespace).finish()
    }
}

impl<K: Resource<DynamicType = ()>> Resource for Packed<K> {
    type DynamicType = ();
    type Scope = K::Scope;

    fn kind(dt: &()) -> Cow<'_, str> {
        K::kind(dt)
    }
    fn group(dt: &()) -> Cow<'_, str> {
        K::group(dt)
    }
    fn version(dt: &()) -> Cow<'_, str> {
        K::version(dt)
    }
    fn plural(dt: &()) -> Cow<'_, str> {
        K::plural(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        &self.meta
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.meta
    }
}

/// Read as the object it packs (the controller machinery asks for `DeserializeOwned`).
impl<'de, K: Resource<DynamicType = ()> + Serialize + DeserializeOwned> Deserialize<'de> for Packed<K> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        K::deserialize(d).map(|obj| Packed::pack(&obj))
    }
}

/// The owner of a managed Secret that is an ExternalSecret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    /// Its name.
    pub name: Box<str>,
    /// Its uid.
    pub uid: Box<str>,
    /// Whether it is the controller.
    pub controller: bool,
}

/// A managed Secret as the cache keeps it: what the ExternalSecret controller reads (name, the
/// data-hash annotation, its ExternalSecret owners), nothing else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManagedSecret {
    name: Box<str>,
    namespace: Box<str>,
    data_hash: Option<Box<str>>,
    owners: Box<[Owner]>,
}

impl ManagedSecret {
    /// The compact form of a managed Secret's metadata.
    pub fn pack(s: &PartialObjectMeta<Secret>) -> Self {
        let owners = s
            .owner_references()
            .iter()
            .filter(|o| o.kind == "ExternalSecret")
            .map(|o| Owner {
                name: o.name.as_str().into(),
                uid: o.uid.as_str().into(),
                controller: o.controller == Some(true),
            })
            .collect();
        ManagedSecret {
            name: s.metadata.name.as_deref().unwrap_or_default().into(),
            namespace: s.metadata.namespace.as_deref().unwrap_or_default().into(),
            data_hash: s.annotations().get(DATA_HASH_ANNOTATION).map(|h| h.as_str().into()),
            owners,
        }
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// Its ExternalSecret owners.
    pub fn owners(&self) -> &[Owner] {
        &self.owners
    }

    /// The metadata as the API server has it, as far as it was kept: name, namespace, the managed
    /// label the watch selects on, the data-hash annotation and the ExternalSecret owners.
    pub fn unpack(&self) -> PartialObjectMeta<Secret> {
        let owner_references = self
            .owners
            .iter()
            .map(|o| OwnerReference {
                api_version: String::new(),
                kind: "ExternalSecret".into(),
                name: o.name.to_string(),
                uid: o.uid.to_string(),
                controller: o.controller.then_some(true),
                block_owner_deletion: None,
            })
            .collect::<Vec<_>>();
        let metadata = ObjectMeta {
            name: Some(self.name.to_string()),
            namespace: Some(self.namespace.to_string()),
            labels: Some([(MANAGED_LABEL.to_string(), "true".to_string())].into()),
            annotations: self.data_hash.as_ref().map(|h| [(DATA_HASH_ANNOTATION.to_string(), h.to_string())].into()),
            owner_references: (!owner_references.is_empty()).then_some(owner_references),
            ..Default::default()
        };
        PartialObjectMeta { types: None, metadata, _phantom: PhantomData }
    }
}

impl Lookup for ManagedSecret {
    type DynamicType = ();

    fn kind(dt: &()) -> Cow<'_, str> {
        <Secret as Resource>::kind(dt)
    }
    fn group(dt: &()) -> Cow<'_, str> {
        <Secret as Resource>::group(dt)
    }
    fn version(dt: &()) -> Cow<'_, str> {
        <Secret as Resource>::version(dt)
    }
    fn plural(dt: &()) -> Cow<'_, str> {
        <Secret as Resource>::plural(dt)
    }
    fn name(&self) -> Option<Cow<'_, str>> {
        Some(Cow::Borrowed(&self.name))
    }
    fn namespace(&self) -> Option<Cow<'_, str>> {
        Some(Cow::Borrowed(&self.namespace))
    }
    // Not kept: store keys are namespace and name, as for every cache.
    fn resource_version(&self) -> Option<Cow<'_, str>> {
        None
    }
    fn uid(&self) -> Option<Cow<'_, str>> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keyward_crds::ExternalSecret;

    fn external_secret() -> ExternalSecret {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
            "metadata": {"name": "db", "namespace": "team-a", "uid": "u-1", "resourceVersion": "7", "generation": 2,
                         "labels": {"keyward.dev/controller-class": "c"}, "annotations": {"force-sync": "1"},
                         "finalizers": ["externalsecrets.external-secrets.io/finalizer"]},
            "spec": {"refreshInterval": "1h", "secretStoreRef": {"name": "fake", "kind": "Provider"},
                     "target": {"name": "db-secret", "creationPolicy": "Orphan", "template": {"data": {"a": "{{ .k }}"}}},
                     "data": [{"secretKey": "k", "remoteRef": {"key": "k", "property": "p"}}],
                     "dataFrom": [{"extract": {"key": "all"}}]},
            "status": {"refreshTime": "2026-12-03T10:00:01Z", "syncedResourceVersion": "1-abc",
                       "conditions": [{"type": "Ready", "status": "True", "reason": "SecretSynced",
                                       "message": "Secret was synced", "lastTransitionTime": "2026-12-03T10:00:01Z"}],
                       "binding": {"name": "db-secret"}, "syncedDataHash": "h"}
        }))
        .unwrap()
    }

    #[test]
    fn a_packed_external_secret_reads_back_as_it_was() {
        let es = external_secret();
        let packed = Packed::pack(&es);
        let json = |es: &ExternalSecret| serde_json::to_value(es).unwrap();
        assert_eq!(json(&packed.unpack().unwrap()), json(&es));
        // Only what keys and bookkeeping read is decoded; the store key carries no version or uid.
        assert_eq!(ObjectRef::from_obj(&packed), ObjectRef::new("db").within("team-a"));
        assert!(packed.meta.labels.is_none() && packed.meta.uid.is_none());
        // The body does not repeat the kind's constants, nor the name and namespace `meta` keeps.
        let body: serde_json::Value = serde_json::from_slice(&packed.json).unwrap();
        assert!(body.get("apiVersion").is_none() && body.get("kind").is_none());
        assert!(body["metadata"].get("name").is_none() && body["metadata"].get("namespace").is_none());
        assert_eq!(body["metadata"]["uid"], "u-1");
        // What the controller machinery deserializes into is the same.
        let read: Packed<ExternalSecret> = serde_json::from_value(serde_json::to_value(&es).unwrap()).unwrap();
        assert_eq!(json(&read.unpack().unwrap()), json(&es));
    }

    #[test]
    fn a_managed_secret_keeps_its_hash_and_external_secret_owners_only() {
        let s: PartialObjectMeta<Secret> = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "db-secret", "namespace": "team-a", "uid": "s-1", "resourceVersion": "9",
                         "labels": {MANAGED_LABEL: "true", "app": "x"},
                         "annotations": {DATA_HASH_ANNOTATION: "h", "other": "y"},
                         "ownerReferences": [
                             {"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret", "name": "db", "uid": "u-1",
                              "controller": true, "blockOwnerDeletion": true},
                             {"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "u-2"}]}
        }))
        .unwrap();
        let m = ManagedSecret::pack(&s);
        assert_eq!(m.to_object_ref(()), ObjectRef::new("db-secret").within("team-a"));
        assert_eq!(m.owners(), &[Owner { name: "db".into(), uid: "u-1".into(), controller: true }]);
        let read = m.unpack();
        assert_eq!(read.labels().get(MANAGED_LABEL).map(String::as_str), Some("true"));
        assert_eq!(read.labels().len(), 1);
        assert_eq!(read.annotations().get(DATA_HASH_ANNOTATION).map(String::as_str), Some("h"));
        assert_eq!(read.annotations().len(), 1);
        let owners = read.owner_references();
        assert_eq!((owners.len(), owners[0].name.as_str(), owners[0].uid.as_str()), (1, "db", "u-1"));
        assert_eq!(owners[0].controller, Some(true));
    }
}
