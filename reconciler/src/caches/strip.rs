//! What is dropped from each object before it is cached: what no controller reads. Each
//! function keeps exactly what its readers use, and says who they are.

use k8s_openapi::api::core::v1::{Namespace, Secret};
use keyward_crds::{ClusterSecretStore, SecretStore, SecretStoreProvider};
use kube::Resource;
use kube::api::ObjectMeta;
use kube::core::PartialObjectMeta;

use keyward_provider_client::{CA_KEY, CERT_KEY, KEY_KEY};

pub use keyward_crds::common::LAST_APPLIED;

/// Drops managed fields and the last-applied copy; keeps every other label and annotation
/// (controllers read `force-sync`, the controller class and user annotations).
pub fn meta(m: &mut ObjectMeta) {
    keyward_crds::common::strip_write_history(m);
}

/// ExternalSecrets, ClusterExternalSecrets, PushSecrets, Providers, ClusterProviders: spec and
/// status are read.
pub fn object<K: Resource>(obj: &mut K) {
    meta(obj.meta_mut());
}

/// SecretStores: a `spec.provider` block no provider process serves keeps its name only (the
/// store reports it as not supported by name); served blocks are read when the store is used.
/// Blocks Keyward does not type arrive within the free-form JSON limits (`keyward_crds::free_json`).
pub fn secret_store(s: &mut SecretStore) {
    object(s);
    unserved_blocks(&mut s.spec.provider);
}

/// ClusterSecretStores, as [`secret_store`].
pub fn cluster_secret_store(s: &mut ClusterSecretStore) {
    object(s);
    unserved_blocks(&mut s.spec.store.provider);
}

fn unserved_blocks(p: &mut SecretStoreProvider) {
    let plugins = keyward_provider_registry::PROVIDER_KINDS;
    p.other.keep_content(|name| plugins.iter().flat_map(|k| k.stores).any(|b| b.key == name));
}

/// Keeps only the labels and annotations named.
fn keep(m: &mut ObjectMeta, labels: &[&str], annotations: &[&str]) {
    m.managed_fields = None;
    for (map, wanted) in [(&mut m.labels, labels), (&mut m.annotations, annotations)] {
        if let Some(entries) = map.as_mut() {
            entries.retain(|k, _| wanted.contains(&k.as_str()));
            if entries.is_empty() {
                *map = None;
            }
        }
    }
}

/// Kinds whose cache keeps a compact form of its own ([`super::packed::ManagedSecret`]).
pub fn none<K>(_: &mut K) {}

/// Provider TLS Secrets: the client manager reads the three PEM keys.
pub fn tls_secret(s: &mut Secret) {
    keep(&mut s.metadata, &[], &[]);
    s.string_data = None;
    if let Some(data) = s.data.as_mut() {
        data.retain(|k, _| [CA_KEY, CERT_KEY, KEY_KEY].contains(&k.as_str()));
    }
}

/// Namespaces (metadata only): ClusterProvider conditions read the labels.
pub fn namespace(n: &mut PartialObjectMeta<Namespace>) {
    n.metadata.managed_fields = None;
    n.metadata.annotations = None;
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
    use keyward_crds::ExternalSecret;
    use keyward_crds::workload::{DATA_HASH_ANNOTATION, MANAGED_LABEL};

    fn noisy_meta() -> ObjectMeta {
        ObjectMeta {
            name: Some("a".into()),
            namespace: Some("team-a".into()),
            labels: Some([(MANAGED_LABEL.to_string(), "true".to_string()), ("app".into(), "x".into())].into()),
            annotations: Some(
                [
                    (LAST_APPLIED.to_string(), "{\"huge\": true}".to_string()),
                    (DATA_HASH_ANNOTATION.to_string(), "h".to_string()),
                    ("force-sync".to_string(), "1".to_string()),
                ]
                .into(),
            ),
            managed_fields: Some(vec![ManagedFieldsEntry { manager: Some("kubectl".into()), ..Default::default() }]),
            ..Default::default()
        }
    }

    #[test]
    fn objects_lose_managed_fields_and_the_last_applied_copy_only() {
        let mut es = ExternalSecret::new("a", Default::default());
        es.metadata = noisy_meta();
        object(&mut es);
        assert!(es.metadata.managed_fields.is_none());
        let a = es.metadata.annotations.as_ref().unwrap();
        assert!(!a.contains_key(LAST_APPLIED));
        assert_eq!(a["force-sync"], "1");
        assert_eq!(es.metadata.labels.as_ref().unwrap().len(), 2);
    }

    #[test]
    fn tls_secrets_keep_the_pem_keys_only() {
        let mut s = Secret {
            metadata: noisy_meta(),
            data: Some(
                [CA_KEY, CERT_KEY, KEY_KEY, "extra"]
                    .iter()
                    .map(|k| (k.to_string(), ByteString(b"x".to_vec())))
                    .collect(),
            ),
            ..Default::default()
        };
        tls_secret(&mut s);
        assert!(s.metadata.labels.is_none() && s.metadata.annotations.is_none());
        assert_eq!(s.data.unwrap().keys().collect::<Vec<_>>(), [CA_KEY, CERT_KEY, KEY_KEY]);
        assert_eq!(s.metadata.name.as_deref(), Some("a"));
    }

    #[test]
    fn stores_keep_only_the_names_of_blocks_no_provider_serves() {
        let mut s: SecretStore = serde_json::from_value(serde_json::json!({
            "apiVersion": "external-secrets.io/v1", "kind": "SecretStore", "metadata": {"name": "s"},
            "spec": {"provider": {"webhook": {"url": "u"}, "alibaba": {"regionID": "r"}}}}))
        .unwrap();
        secret_store(&mut s);
        let other = &s.spec.provider.other;
        assert_eq!(other.keys().collect::<Vec<_>>(), ["alibaba", "webhook"]);
        assert!(other.get("alibaba").unwrap().is_null());
        assert_eq!(other.get("webhook").unwrap().value().unwrap(), serde_json::json!({"url": "u"}));
    }

    #[test]
    fn namespaces_keep_their_labels() {
        let mut n = PartialObjectMeta::<Namespace> { metadata: noisy_meta(), ..Default::default() };
        namespace(&mut n);
        assert!(n.metadata.annotations.is_none() && n.metadata.managed_fields.is_none());
        assert_eq!(n.metadata.labels.unwrap().len(), 2);
    }
}
