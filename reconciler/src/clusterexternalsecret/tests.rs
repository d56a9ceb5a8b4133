//! The ExternalSecret a ClusterExternalSecret writes, and which ones it counts as its own.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use super::*;
use crate::fanout::reconcile::{desired, hash_of};

fn controlled_by(es: &ExternalSecret, owner: &str) -> bool {
    crate::fanout::reconcile::controlled_by::<ClusterExternalSecret>(es, owner)
}

fn es_with_owner(kind: &str, api_version: &str, name: &str, controller: Option<bool>) -> ExternalSecret {
    let mut es = ExternalSecret::new("db", Default::default());
    es.metadata.owner_references = Some(vec![OwnerReference {
        api_version: api_version.into(),
        kind: kind.into(),
        name: name.into(),
        uid: "u".into(),
        controller,
        block_owner_deletion: None,
    }]);
    es
}

#[test]
fn only_a_controller_reference_to_the_cluster_external_secret_counts() {
    let v1 = "external-secrets.io/v1";
    assert!(controlled_by(&es_with_owner("ClusterExternalSecret", v1, "shared", Some(true)), "shared"));
    assert!(!controlled_by(&es_with_owner("ClusterExternalSecret", v1, "other", Some(true)), "shared"));
    assert!(!controlled_by(&es_with_owner("ClusterExternalSecret", v1, "shared", None), "shared"));
    assert!(!controlled_by(&es_with_owner("Deployment", "apps/v1", "shared", Some(true)), "shared"));
    assert!(!controlled_by(&es_with_owner("ClusterExternalSecret", "evil.io/v1", "shared", Some(true)), "shared"));
    assert!(!controlled_by(&ExternalSecret::new("db", Default::default()), "shared"));
}

#[test]
fn the_manifest_carries_label_owner_metadata_and_force_sync() {
    let mut ces: ClusterExternalSecret = serde_yaml::from_str(
        "apiVersion: external-secrets.io/v1\nkind: ClusterExternalSecret\n\
         metadata: {name: shared, uid: abc, annotations: {force-sync: '5'}}\n\
         spec:\n  externalSecretMetadata: {labels: {app: x}, annotations: {note: y}}\n  \
         externalSecretSpec: {secretStoreRef: {name: s, kind: ClusterProvider}, data: [{secretKey: k, remoteRef: {key: r}}]}\n",
    )
    .expect("parses");
    let body = desired(&ces, "db");
    assert_eq!(body["metadata"]["name"], "db");
    assert_eq!(body["metadata"]["labels"]["app"], "x");
    assert_eq!(body["metadata"]["labels"][CLUSTER_EXTERNAL_SECRET_LABEL], "shared");
    assert_eq!(body["metadata"]["annotations"]["note"], "y");
    assert_eq!(body["metadata"]["annotations"]["force-sync"], "5");
    let owner = &body["metadata"]["ownerReferences"][0];
    assert_eq!(
        (owner["kind"].as_str(), owner["uid"].as_str(), owner["controller"].as_bool()),
        (Some("ClusterExternalSecret"), Some("abc"), Some(true))
    );
    assert_eq!(body["spec"]["secretStoreRef"]["name"], "s");
    assert_eq!(body["spec"]["data"][0]["remoteRef"]["key"], "r");
    let first = hash_of(&body);
    ces.spec.external_secret_spec.refresh_interval = "5m".into();
    assert_ne!(hash_of(&desired(&ces, "db")), first, "a spec change is a new manifest");
}
