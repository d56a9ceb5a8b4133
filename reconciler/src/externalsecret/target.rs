//! The target Secret: what is applied (server-side apply, field manager `keyward-reconciler`),
//! and whether the Secret already holds it.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use keyward_crds::ExternalSecret;
use keyward_crds::external_secret::CreationPolicy;
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::render::Rendered;
use sha2::{Digest, Sha256};

/// Field manager of every write the reconciler makes.
pub const FIELD_MANAGER: &str = "keyward-reconciler";
// One definition, shared with the webhook and the reload controller.
pub use keyward_crds::workload::{DATA_HASH_ANNOTATION, MANAGED_LABEL};

/// The key of the hashes of secret data the reconciler writes where more readers than the
/// Secret's see them: `status.syncedDataHash` (readable with `view` on ExternalSecrets), the
/// Secret's `reconcile.external-secrets.io/data-hash`, and through them the pod-template
/// `keyward.dev/secrets-hash` of workloads. A plain digest there would let anyone who can read
/// those objects test guesses of a low-entropy secret offline; an HMAC under a key of the
/// release cannot be tested without the key.
#[derive(Clone)]
pub struct HashKey(ring::hmac::Key);

impl std::fmt::Debug for HashKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HashKey(..)")
    }
}

/// Fewest bytes of key material a [`HashKey`] takes.
pub const MIN_HASH_KEY_BYTES: usize = 16;

impl HashKey {
    /// A key from its material (the bytes of the release's key Secret).
    pub fn new(material: &[u8]) -> Result<Self, String> {
        let material = material.trim_ascii();
        if material.len() < MIN_HASH_KEY_BYTES {
            return Err(format!(
                "the hash key holds {} bytes; at least {MIN_HASH_KEY_BYTES} random bytes are needed",
                material.len()
            ));
        }
        Ok(HashKey(ring::hmac::Key::new(ring::hmac::HMAC_SHA256, material)))
    }

    /// A key from a file (`--hash-key-file`: the chart mounts the release's key Secret).
    pub fn from_file(path: &std::path::Path) -> Result<Self, String> {
        let material = std::fs::read(path).map_err(|e| format!("reading the hash key {}: {e}", path.display()))?;
        HashKey::new(&material).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// One random key for this process (no key file given): every hash changes when the
    /// process restarts.
    pub fn of_process() -> &'static HashKey {
        static KEY: std::sync::OnceLock<HashKey> = std::sync::OnceLock::new();
        KEY.get_or_init(HashKey::random)
    }

    /// A random key.
    pub fn random() -> Self {
        use rand::RngCore;
        let mut material = [0u8; 32];
        rand::rng().fill_bytes(&mut material);
        HashKey(ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &material))
    }
}

/// Keyed hash (HMAC-SHA256 under `key`) of the data and of the policy bits that shape the
/// applied object.
pub fn data_hash(key: &HashKey, data: &BTreeMap<String, Vec<u8>>, policy: CreationPolicy, immutable: bool) -> String {
    let mut h = ring::hmac::Context::with_key(&key.0);
    for (k, v) in data {
        h.update(&(k.len() as u64).to_be_bytes());
        h.update(k.as_bytes());
        h.update(&(v.len() as u64).to_be_bytes());
        h.update(v);
    }
    h.update(format!("{policy:?}/{immutable}").as_bytes());
    hex::encode(&h.sign().as_ref()[..16])
}

/// The apply body. `Owner` adds a controller owner reference so the Secret is garbage
/// collected with the ExternalSecret; `Merge` writes only the data keys (and the hash) into a
/// Secret someone else owns.
/// A rendered template adds the Secret type, labels, annotations and finalizers.
pub fn desired(
    es: &ExternalSecret,
    data: &BTreeMap<String, Vec<u8>>,
    hash: &str,
    rendered: Option<&Rendered>,
) -> serde_json::Value {
    let policy = es.spec.target.creation_policy;
    let data: BTreeMap<&String, ByteString> = data.iter().map(|(k, v)| (k, ByteString(v.clone()))).collect();
    let mut metadata = json!({
        "name": es.target_secret_name(),
        "namespace": es.namespace(),
        "annotations": { DATA_HASH_ANNOTATION: hash },
    });
    if policy.manages_target() {
        metadata["labels"] = json!({ MANAGED_LABEL: "true" });
    }
    if policy == CreationPolicy::Owner
        && let Some(owner) = es.controller_owner_ref(&())
    {
        metadata["ownerReferences"] = json!([owner]);
    }
    let mut body = json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata,
        "data": data,
    });
    if es.spec.target.immutable {
        body["immutable"] = json!(true);
    }
    if let Some(r) = rendered {
        if let Some(t) = &r.type_ {
            body["type"] = json!(t);
        }
        for (k, v) in &r.labels {
            body["metadata"]["labels"][k] = json!(v);
        }
        for (k, v) in &r.annotations {
            body["metadata"]["annotations"][k] = json!(v);
        }
        if !r.finalizers.is_empty() {
            body["metadata"]["finalizers"] = json!(r.finalizers);
        }
    }
    body
}

/// Extends a data hash with a template's type, labels, annotations and finalizers, so a change
/// in rendered metadata is written too.
pub fn with_rendered_metadata(hash: &str, rendered: &Rendered) -> String {
    let mut h = Sha256::new();
    h.update(hash.as_bytes());
    let metadata = (&rendered.type_, &rendered.labels, &rendered.annotations);
    h.update(serde_json::to_vec(&metadata).unwrap_or_default());
    // Only a template with finalizers changes the hash, so existing Secrets are not rewritten.
    if !rendered.finalizers.is_empty() {
        h.update(serde_json::to_vec(&rendered.finalizers).unwrap_or_default());
    }
    hex::encode(&h.finalize()[..16])
}

/// Whether `existing` (its metadata is enough) already holds exactly what would be applied.
pub fn up_to_date(existing: &impl Resource, es: &ExternalSecret, hash: &str) -> bool {
    existing.annotations().get(DATA_HASH_ANNOTATION).map(String::as_str) == Some(hash) && managed_here(existing, es)
}

/// Whether `existing` is a Secret upstream's controller wrote with exactly this data (and the
/// template's labels and annotations), under the same ownership: after a switch from upstream,
/// such a Secret is current and is not written again. Upstream's hash covers the data only.
pub fn written_by_upstream(
    existing: &impl Resource,
    es: &ExternalSecret,
    data: &BTreeMap<String, Vec<u8>>,
    rendered: Option<&Rendered>,
) -> bool {
    let Some(found) = existing.annotations().get(DATA_HASH_ANNOTATION) else { return false };
    let metadata_present = rendered.is_none_or(|r| {
        r.finalizers.is_empty()
            && r.labels.iter().all(|(k, v)| existing.labels().get(k) == Some(v))
            && r.annotations.iter().all(|(k, v)| existing.annotations().get(k) == Some(v))
    });
    metadata_present && *found == upstream_data_hash(data) && managed_here(existing, es)
}

/// The data hash upstream's controller writes (`reconcile.external-secrets.io/data-hash`):
/// SHA3-224 of Go's `%+v` rendering of the data map, `map[key:[byte byte …] …]` with the keys
/// sorted.
pub fn upstream_data_hash(data: &BTreeMap<String, Vec<u8>>) -> String {
    use sha3::Digest as _;
    let entries: Vec<String> = data
        .iter()
        .map(|(k, v)| {
            let bytes: Vec<String> = v.iter().map(u8::to_string).collect();
            format!("{k}:[{}]", bytes.join(" "))
        })
        .collect();
    hex::encode(sha3::Sha3_224::digest(format!("map[{}]", entries.join(" ")).as_bytes()))
}

/// The ownership an apply would give the Secret is already there.
fn managed_here(existing: &impl Resource, es: &ExternalSecret) -> bool {
    match es.spec.target.creation_policy {
        CreationPolicy::Owner => {
            let uid = es.uid();
            existing.labels().get(MANAGED_LABEL).map(String::as_str) == Some("true")
                && existing.owner_references().iter().any(|o| Some(&o.uid) == uid.as_ref())
        }
        CreationPolicy::Orphan | CreationPolicy::CreateOrMerge => {
            existing.labels().get(MANAGED_LABEL).map(String::as_str) == Some("true")
        }
        CreationPolicy::Merge | CreationPolicy::None => true,
    }
}

/// Whether this ExternalSecret owns the Secret (its controller owner reference points here).
pub fn owned_by(existing: &impl Resource, es: &ExternalSecret) -> bool {
    let uid = es.uid();
    existing.owner_references().iter().any(|o| o.controller == Some(true) && Some(&o.uid) == uid.as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Secret;
    use keyward_crds::external_secret::ExternalSecretTarget;

    fn es(policy: CreationPolicy, immutable: bool) -> ExternalSecret {
        let mut es = ExternalSecret::new("db", Default::default());
        es.metadata.namespace = Some("team-a".into());
        es.metadata.uid = Some("uid-1".into());
        es.spec.target = ExternalSecretTarget {
            name: Some("db-secret".into()),
            creation_policy: policy,
            immutable,
            ..Default::default()
        };
        es
    }

    fn data() -> BTreeMap<String, Vec<u8>> {
        [("password".to_string(), b"s3cret".to_vec())].into()
    }

    #[test]
    fn owner_policy_sets_label_owner_and_data() {
        let e = es(CreationPolicy::Owner, false);
        let body = desired(&e, &data(), "h", None);
        assert_eq!(body["metadata"]["name"], "db-secret");
        assert_eq!(body["metadata"]["labels"][MANAGED_LABEL], "true");
        assert_eq!(body["metadata"]["ownerReferences"][0]["kind"], "ExternalSecret");
        assert_eq!(body["metadata"]["ownerReferences"][0]["uid"], "uid-1");
        assert_eq!(body["metadata"]["ownerReferences"][0]["controller"], true);
        assert_eq!(body["data"]["password"], "czNjcmV0");
        assert!(body.get("immutable").is_none());
        let secret: Secret = serde_json::from_value(body).unwrap();
        assert!(up_to_date(&secret, &e, "h"));
        assert!(!up_to_date(&secret, &e, "other"));
        assert!(owned_by(&secret, &e));
    }

    #[test]
    fn orphan_and_merge_policies() {
        let orphan = desired(&es(CreationPolicy::Orphan, true), &data(), "h", None);
        assert!(orphan["metadata"].get("ownerReferences").is_none());
        assert_eq!(orphan["metadata"]["labels"][MANAGED_LABEL], "true");
        assert_eq!(orphan["immutable"], true);
        let merge = desired(&es(CreationPolicy::Merge, false), &data(), "h", None);
        assert!(merge["metadata"].get("labels").is_none(), "a merged Secret is not ours to label");
        assert!(merge["metadata"].get("ownerReferences").is_none());
    }

    #[test]
    fn upstream_hash_matches_what_upstreams_controller_writes() {
        // Reference values from Go: fmt.Sprintf("%x", sha3.Sum224([]byte(fmt.Sprintf("%+v", data)))).
        let data: BTreeMap<String, Vec<u8>> =
            [("foobar", "s3cr3t"), ("developer", "alice"), ("tags", r#"{"dev":"alice"}"#)]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
                .collect();
        assert_eq!(upstream_data_hash(&data), "6328cce128da98105c1ebc07804bc3643d3c789280486dcc4b04dd18");
        assert_eq!(upstream_data_hash(&BTreeMap::new()), "74a974446e359fb3e6baff9bd0058950e6edd0f040888d9989b0a11b");
    }

    #[test]
    fn a_secret_upstream_wrote_is_current_only_with_the_same_data_and_ownership() {
        let es = es(CreationPolicy::Owner, false);
        let data: BTreeMap<String, Vec<u8>> = [("k".to_string(), b"v".to_vec())].into();
        let mut secret = Secret::default();
        secret.metadata.annotations = Some([(DATA_HASH_ANNOTATION.to_string(), upstream_data_hash(&data))].into());
        secret.metadata.labels = Some([(MANAGED_LABEL.to_string(), "true".to_string())].into());
        assert!(!written_by_upstream(&secret, &es, &data, None), "no owner reference to this ExternalSecret");
        secret.metadata.owner_references = Some(vec![es.controller_owner_ref(&()).expect("owner ref")]);
        assert!(written_by_upstream(&secret, &es, &data, None));
        let other: BTreeMap<String, Vec<u8>> = [("k".to_string(), b"w".to_vec())].into();
        assert!(!written_by_upstream(&secret, &es, &other, None), "other data");
        let rendered = Rendered { labels: [("team".to_string(), "a".to_string())].into(), ..Default::default() };
        assert!(!written_by_upstream(&secret, &es, &data, Some(&rendered)), "template label missing");
    }

    fn key(material: &str) -> HashKey {
        HashKey::new(material.as_bytes()).expect("key")
    }

    #[test]
    fn hash_covers_data_and_policy() {
        let k = key("release-key-0123456789");
        let a = data_hash(&k, &data(), CreationPolicy::Owner, false);
        assert_eq!(a, data_hash(&k, &data(), CreationPolicy::Owner, false));
        assert_ne!(a, data_hash(&k, &data(), CreationPolicy::Orphan, false));
        assert_ne!(a, data_hash(&k, &data(), CreationPolicy::Owner, true));
        assert_ne!(a, data_hash(&k, &BTreeMap::new(), CreationPolicy::Owner, false));
    }

    /// What `view` reads (status.syncedDataHash, the data-hash annotation) cannot be tested
    /// against guesses without the release's key: it is no plain digest of the data, and another
    /// key gives another hash (which is what rotating the key does: every Secret is written again
    /// with the new hash on its next sync, and opted-in workloads roll once).
    #[test]
    fn the_hash_is_keyed() {
        let (k, other) = (key("release-key-0123456789"), key("another-key-0123456789"));
        let hash = data_hash(&k, &data(), CreationPolicy::Owner, false);
        assert_ne!(hash, data_hash(&other, &data(), CreationPolicy::Owner, false), "another key, another hash");
        let mut plain = Sha256::new();
        for (k, v) in data() {
            plain.update((k.len() as u64).to_be_bytes());
            plain.update(k.as_bytes());
            plain.update((v.len() as u64).to_be_bytes());
            plain.update(&v);
        }
        plain.update(format!("{:?}/{}", CreationPolicy::Owner, false).as_bytes());
        assert_ne!(hash, hex::encode(&plain.finalize()[..16]), "not the plain digest");
        assert_ne!(hash, upstream_data_hash(&data()));
        // After a rotation the Secret written under the old key is no longer up to date.
        let es = es(CreationPolicy::Owner, false);
        let mut secret = Secret::default();
        secret.metadata.annotations = Some([(DATA_HASH_ANNOTATION.to_string(), hash.clone())].into());
        secret.metadata.labels = Some([(MANAGED_LABEL.to_string(), "true".to_string())].into());
        secret.metadata.owner_references = Some(vec![es.controller_owner_ref(&()).expect("owner ref")]);
        assert!(up_to_date(&secret, &es, &hash));
        assert!(!up_to_date(&secret, &es, &data_hash(&other, &data(), CreationPolicy::Owner, false)));
        assert!(HashKey::new(b"short").is_err(), "too little key material is refused");
        let random = HashKey::random();
        assert_ne!(data_hash(&random, &data(), CreationPolicy::Owner, false), hash);
    }

    #[test]
    fn template_finalizers_are_applied_and_change_the_hash() {
        let plain = Rendered { labels: [("a".to_string(), "b".to_string())].into(), ..Default::default() };
        let finalized = Rendered { finalizers: vec!["example.com/keep".into()], ..plain.clone() };
        let body = desired(&es(CreationPolicy::Owner, false), &data(), "h", Some(&finalized));
        assert_eq!(body["metadata"]["finalizers"], json!(["example.com/keep"]));
        assert!(
            desired(&es(CreationPolicy::Owner, false), &data(), "h", Some(&plain))["metadata"]
                .get("finalizers")
                .is_none()
        );
        assert_ne!(with_rendered_metadata("h", &plain), with_rendered_metadata("h", &finalized));
    }
}
