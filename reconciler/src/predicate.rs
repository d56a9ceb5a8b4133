//! The change filter of every controller: reconcile when what the object asks for changed
//! (spec generation, labels, annotations such as `force-sync`, finalizers, deletion), not when
//! the controller's own status write comes back through the watch.

use std::hash::{Hash, Hasher};

use kube::{Resource, ResourceExt};

/// A hash of the parts of an object a reconcile depends on.
pub fn spec_change<K: Resource>(obj: &K) -> Option<u64> {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    obj.meta().generation.hash(&mut h);
    obj.labels().hash(&mut h);
    obj.annotations().hash(&mut h);
    obj.finalizers().hash(&mut h);
    obj.meta().deletion_timestamp.is_some().hash(&mut h);
    obj.uid().hash(&mut h);
    Some(h.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use keyward_crds::{ExternalSecret, ExternalSecretStatus};

    #[test]
    fn status_changes_are_ignored_and_spec_changes_are_not() {
        let mut es = ExternalSecret::new("a", Default::default());
        es.metadata.generation = Some(1);
        let base = spec_change(&es);
        es.status = Some(ExternalSecretStatus { synced_resource_version: Some("x".into()), ..Default::default() });
        es.metadata.resource_version = Some("42".into());
        assert_eq!(spec_change(&es), base);
        es.annotations_mut().insert("force-sync".into(), "now".into());
        assert_ne!(spec_change(&es), base);
        let with_annotation = spec_change(&es);
        es.metadata.generation = Some(2);
        assert_ne!(spec_change(&es), with_annotation);
    }
}
