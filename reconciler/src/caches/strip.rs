//! What is dropped from each object before it is cached: what no controller reads. Each
//! function keeps exactly what its readers use, and says who they are.

use k8s_openapi::api::core::v1::{Namespace, Secret};
use keyward_crds::workload::{DATA_HASH_ANNOTATION, MANAGED_LABEL};
use kube::Resource;
use kube::api::ObjectMeta;
use kube::core::PartialObjectMeta;

use crate::clientmanager::{CA_KEY, CERT_KEY, KEY_KEY};

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

/// Managed Secrets (metadata only): the ExternalSecret controller reads the name, the data-hash
/// annotation, and of the ExternalSecret owner references the name, uid and controller flag.
/// Nothing else is kept (there are as many of these as ExternalSecrets). Not even the managed
/// label: the watch selects on it, so every cached Secret carries it, and a one-entry label map
/// costs a whole B-tree node per Secret; [`with_managed_label`] puts it back on a copy.
pub fn managed_secret(s: &mut PartialObjectMeta<Secret>) {
    s.types = None;
    let m = &mut s.metadata;
    keep(m, &[], &[DATA_HASH_ANNOTATION]);
    m.uid = None;
    m.resource_version = None;
    m.creation_timestamp = None;
    m.generation = None;
    m.finalizers = None;
    if let Some(owners) = m.owner_references.as_mut() {
        owners.retain(|o| o.kind == "ExternalSecret");
        for o in owners.iter_mut() {
            o.api_version = String::new();
            o.block_owner_deletion = None;
        }
        if owners.is_empty() {
            m.owner_references = None;
        }
    }
}

/// A cached managed Secret as the API server has it: with the managed label its watch selects on.
pub fn with_managed_label(cached: &PartialObjectMeta<Secret>) -> PartialObjectMeta<Secret> {
    let mut s = cached.clone();
    s.metadata.labels.get_or_insert_default().insert(MANAGED_LABEL.to_string(), "true".to_string());
    s
}

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

/// Provider config objects (metadata only): only their name and namespace trigger checks.
pub fn config_object<K>(c: &mut PartialObjectMeta<K>) {
    keep(&mut c.metadata, &[], &[]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, OwnerReference};
    use keyward_crds::ExternalSecret;

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

    fn owner(kind: &str, name: &str) -> OwnerReference {
        OwnerReference {
            api_version: "external-secrets.io/v1".into(),
            kind: kind.into(),
            name: name.into(),
            uid: format!("uid-{name}"),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }

    #[test]
    fn managed_secrets_keep_the_label_hash_and_external_secret_owners_only() {
        let mut meta = noisy_meta();
        meta.uid = Some("secret-uid".into());
        meta.resource_version = Some("42".into());
        meta.generation = Some(1);
        meta.finalizers = Some(vec!["f".into()]);
        meta.owner_references = Some(vec![owner("ExternalSecret", "db"), owner("Deployment", "app")]);
        let mut s = PartialObjectMeta::<Secret> { metadata: meta, ..Default::default() };
        managed_secret(&mut s);
        let m = &s.metadata;
        assert!(s.types.is_none());
        assert!(m.managed_fields.is_none() && m.uid.is_none() && m.resource_version.is_none());
        assert!(m.generation.is_none() && m.finalizers.is_none() && m.creation_timestamp.is_none());
        assert_eq!((m.name.as_deref(), m.namespace.as_deref()), (Some("a"), Some("team-a")));
        assert!(m.labels.is_none(), "the watch's label selector implies the managed label");
        assert_eq!(m.annotations.as_ref().unwrap().keys().collect::<Vec<_>>(), [DATA_HASH_ANNOTATION]);
        let owners = m.owner_references.as_ref().unwrap();
        assert_eq!(owners.len(), 1);
        assert_eq!((owners[0].kind.as_str(), owners[0].name.as_str()), ("ExternalSecret", "db"));
        assert_eq!((owners[0].uid.as_str(), owners[0].controller), ("uid-db", Some(true)));
        let read = with_managed_label(&s);
        assert_eq!(
            read.metadata.labels.unwrap().into_iter().collect::<Vec<_>>(),
            [(MANAGED_LABEL.into(), "true".into())]
        );
        assert_eq!(read.metadata.annotations, s.metadata.annotations);
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
    fn namespaces_keep_their_labels() {
        let mut n = PartialObjectMeta::<Namespace> { metadata: noisy_meta(), ..Default::default() };
        namespace(&mut n);
        assert!(n.metadata.annotations.is_none() && n.metadata.managed_fields.is_none());
        assert_eq!(n.metadata.labels.unwrap().len(), 2);
    }
}
