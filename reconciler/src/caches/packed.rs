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

use super::codec;

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
    /// namespace back). The rest is kept coded ([`codec`]): less than half its JSON.
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
        let json = codec::encode(&serde_json::to_vec(&body).unwrap_or_default()).into_boxed_slice();
        Packed { meta, json, kind: PhantomData }
    }

    /// The object. It was packed from an object of the same type, so decoding fails only if the
    /// type does not read back what it writes; that is reported, never guessed around.
    pub fn unpack(&self) -> Result<K, UnpackError> {
        let error = |error: String| UnpackError {
            kind: K::kind(&()).into_owned(),
            name: format!(
                "{}/{}",
                self.meta.namespace.as_deref().unwrap_or(""),
                self.meta.name.as_deref().unwrap_or("")
            ),
            error,
        };
        let json = codec::decode(&self.json).ok_or_else(|| error("not a coded body".into()))?;
        let mut obj: K = serde_json::from_slice(&json).map_err(|e| error(e.to_string()))?;
        obj.meta_mut().name.clone_from(&self.meta.name);
        obj.meta_mut().namespace.clone_from(&self.meta.namespace);
        Ok(obj)
    }

    /// Bytes kept for the object's body (coded).
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
pub struct Owner<'a> {
    /// Its name.
    pub name: &'a str,
    /// Its uid.
    pub uid: &'a str,
    /// Whether it is the controller.
    pub controller: bool,
}

/// A managed Secret as the cache keeps it: what the ExternalSecret controller reads (name, the
/// data-hash annotation, its ExternalSecret owners), nothing else, in one allocation: each
/// string behind its length (LEB128), the name, the namespace, the data hash (behind a
/// present/absent byte), then per owner a controller byte, its name and its uid. There is one
/// per ExternalSecret; seven separate strings cost about a hundred bytes more each.
#[derive(Clone, PartialEq, Eq)]
pub struct ManagedSecret {
    fields: Box<[u8]>,
}

fn put(out: &mut Vec<u8>, field: &str) {
    let mut len = field.len();
    loop {
        let low = (len & 0x7F) as u8;
        len >>= 7;
        if len == 0 {
            out.push(low);
            break;
        }
        out.push(low | 0x80);
    }
    out.extend_from_slice(field.as_bytes());
}

/// Reads the fields [`put`] wrote, in order.
struct Fields<'a>(&'a [u8]);

impl<'a> Fields<'a> {
    fn byte(&mut self) -> u8 {
        let (first, rest) = self.0.split_first().unwrap_or((&0, &[]));
        self.0 = rest;
        *first
    }

    fn str(&mut self) -> &'a str {
        let (mut len, mut shift) = (0usize, 0);
        loop {
            let b = self.byte();
            len |= usize::from(b & 0x7F) << shift;
            shift += 7;
            if b & 0x80 == 0 || shift >= usize::BITS {
                break;
            }
        }
        let (field, rest) = self.0.split_at(len.min(self.0.len()));
        self.0 = rest;
        // Written from a `&str` by `put`.
        std::str::from_utf8(field).unwrap_or_default()
    }
}

impl ManagedSecret {
    /// The compact form of a managed Secret's metadata.
    pub fn pack(s: &PartialObjectMeta<Secret>) -> Self {
        let mut fields = Vec::with_capacity(128);
        put(&mut fields, s.metadata.name.as_deref().unwrap_or_default());
        put(&mut fields, s.metadata.namespace.as_deref().unwrap_or_default());
        match s.annotations().get(DATA_HASH_ANNOTATION) {
            Some(hash) => {
                fields.push(1);
                put(&mut fields, hash);
            }
            None => fields.push(0),
        }
        for o in s.owner_references().iter().filter(|o| o.kind == "ExternalSecret") {
            fields.push(u8::from(o.controller == Some(true)));
            put(&mut fields, &o.name);
            put(&mut fields, &o.uid);
        }
        ManagedSecret { fields: fields.into_boxed_slice() }
    }

    /// Name, namespace, data hash, and the owners still to read.
    fn read(&self) -> (&str, &str, Option<&str>, Fields<'_>) {
        let mut f = Fields(&self.fields);
        let (name, namespace) = (f.str(), f.str());
        let hash = (f.byte() == 1).then(|| f.str());
        (name, namespace, hash, f)
    }

    /// Its name.
    pub fn name(&self) -> &str {
        self.read().0
    }

    /// Its namespace.
    pub fn namespace(&self) -> &str {
        self.read().1
    }

    /// Its ExternalSecret owners.
    pub fn owners(&self) -> Vec<Owner<'_>> {
        let mut f = self.read().3;
        let mut owners = Vec::new();
        while !f.0.is_empty() {
            let controller = f.byte() == 1;
            let (name, uid) = (f.str(), f.str());
            owners.push(Owner { name, uid, controller });
        }
        owners
    }

    /// The metadata as the API server has it, as far as it was kept: name, namespace, the managed
    /// label the watch selects on, the data-hash annotation and the ExternalSecret owners.
    pub fn unpack(&self) -> PartialObjectMeta<Secret> {
        let (name, namespace, hash, _) = self.read();
        let owner_references = self
            .owners()
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
            name: Some(name.to_string()),
            namespace: Some(namespace.to_string()),
            labels: Some([(MANAGED_LABEL.to_string(), "true".to_string())].into()),
            annotations: hash.map(|h| [(DATA_HASH_ANNOTATION.to_string(), h.to_string())].into()),
            owner_references: (!owner_references.is_empty()).then_some(owner_references),
            ..Default::default()
        };
        PartialObjectMeta { types: None, metadata, _phantom: PhantomData }
    }
}

impl fmt::Debug for ManagedSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (name, namespace, data_hash, _) = self.read();
        f.debug_struct("ManagedSecret")
            .field("name", &name)
            .field("namespace", &namespace)
            .field("data_hash", &data_hash)
            .field("owners", &self.owners())
            .finish()
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
        Some(Cow::Borrowed(ManagedSecret::name(self)))
    }
    fn namespace(&self) -> Option<Cow<'_, str>> {
        Some(Cow::Borrowed(ManagedSecret::namespace(self)))
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
        let body: serde_json::Value = serde_json::from_slice(&codec::decode(&packed.json).unwrap()).unwrap();
        assert!(body.get("apiVersion").is_none() && body.get("kind").is_none());
        assert!(body["metadata"].get("name").is_none() && body["metadata"].get("namespace").is_none());
        assert_eq!(body["metadata"]["uid"], "u-1");
        // What the controller machinery deserializes into is the same.
        let read: Packed<ExternalSecret> = serde_json::from_value(serde_json::to_value(&es).unwrap()).unwrap();
        assert_eq!(json(&read.unpack().unwrap()), json(&es));
    }

    #[test]
    fn a_synced_external_secret_is_kept_in_under_half_its_json() {
        // As the API server returns one after its first sync: defaults filled in, status written.
        let es: ExternalSecret = serde_json::from_value(serde_json::json!({
            "apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
            "metadata": {"name": "es-1234", "namespace": "bench-7f3a", "uid": "6b1e0c9e-4f6d-4d2b-9a57-2f0d3c1e8a44",
                         "resourceVersion": "184467", "generation": 1, "creationTimestamp": "2026-12-07T15:10:02Z",
                         "labels": {"keyward.dev/controller-class": "bench-7f3a"}},
            "spec": {"refreshInterval": "0", "refreshPolicy": "Periodic",
                     "secretStoreRef": {"name": "fake", "kind": "Provider"},
                     "target": {"name": "es-1234", "creationPolicy": "Owner", "deletionPolicy": "Retain"},
                     "data": [{"secretKey": "k", "remoteRef": {"key": "key-1234", "conversionStrategy": "Default",
                                                                "decodingStrategy": "None", "metadataPolicy": "None"}}]},
            "status": {"refreshTime": "2026-12-07T15:10:40Z", "syncedResourceVersion": "1-4c1b6f0e2d9a8e7f",
                       "conditions": [{"type": "Ready", "status": "True", "reason": "SecretSynced",
                                       "message": "Secret was synced", "lastTransitionTime": "2026-12-07T15:10:40Z"}],
                       "binding": {"name": "es-1234"}, "syncedDataHash": "9f86d081884c7d659a2feaa0c55ad015"}
        }))
        .unwrap();
        let packed = Packed::pack(&es);
        let json = serde_json::to_vec(&es).unwrap().len();
        assert!(packed.packed_len() * 2 < json, "{} of {json} bytes", packed.packed_len());
        assert_eq!(serde_json::to_value(packed.unpack().unwrap()).unwrap(), serde_json::to_value(&es).unwrap());
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
        assert_eq!(m.owners(), [Owner { name: "db", uid: "u-1", controller: true }]);
        assert_eq!((m.name(), m.namespace()), ("db-secret", "team-a"));
        let read = m.unpack();
        assert_eq!(read.labels().get(MANAGED_LABEL).map(String::as_str), Some("true"));
        assert_eq!(read.labels().len(), 1);
        assert_eq!(read.annotations().get(DATA_HASH_ANNOTATION).map(String::as_str), Some("h"));
        assert_eq!(read.annotations().len(), 1);
        let owners = read.owner_references();
        assert_eq!((owners.len(), owners[0].name.as_str(), owners[0].uid.as_str()), (1, "db", "u-1"));
        assert_eq!(owners[0].controller, Some(true));
    }

    #[test]
    fn a_managed_secret_reads_back_long_fields_several_owners_and_none() {
        let long = "h".repeat(70_000);
        let owner = |name: &str, uid: &str, controller| {
            serde_json::json!({"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret", "name": name,
                               "uid": uid, "controller": controller})
        };
        let s: PartialObjectMeta<Secret> = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n".repeat(253), "namespace": "ü-ns", "annotations": {DATA_HASH_ANNOTATION: long},
                         "ownerReferences": [owner("a", "u-a", false), owner("b", &"u".repeat(200), true)]}
        }))
        .unwrap();
        let m = ManagedSecret::pack(&s);
        assert_eq!((m.name(), m.namespace()), ("n".repeat(253).as_str(), "ü-ns"));
        let owners = m.owners();
        assert_eq!(owners[0], Owner { name: "a", uid: "u-a", controller: false });
        assert_eq!(owners[1], Owner { name: "b", uid: &"u".repeat(200), controller: true });
        assert_eq!(m.unpack().annotations()[DATA_HASH_ANNOTATION], "h".repeat(70_000));
        let bare: PartialObjectMeta<Secret> =
            serde_json::from_value(serde_json::json!({"metadata": {"name": "s", "namespace": "ns"}})).unwrap();
        let m = ManagedSecret::pack(&bare);
        assert!(m.owners().is_empty() && m.unpack().metadata.annotations.is_none());
        assert_eq!(m.unpack().metadata.owner_references, None);
    }
}
