//! Which objects belong to which cluster-scoped owner (by its label or controller reference,
//! `FanOut::owner_of`), and what this process last applied to each, so a reconcile neither
//! lists them nor writes what is current.

use std::collections::{HashMap, HashSet};

use kube::Resource;
use kube::runtime::reflector::ObjectRef;

/// Objects by the owner they name, both ways.
#[derive(Debug)]
pub struct OwnedIndex<K: Resource<DynamicType = ()>> {
    by_owner: HashMap<String, HashSet<ObjectRef<K>>>,
    owner_of: HashMap<ObjectRef<K>, String>,
}

// By hand: a derive would ask `K: Default`.
impl<K: Resource<DynamicType = ()>> Default for OwnedIndex<K> {
    fn default() -> Self {
        OwnedIndex { by_owner: HashMap::new(), owner_of: HashMap::new() }
    }
}

impl<K: Resource<DynamicType = ()>> OwnedIndex<K> {
    /// Records that `es` belongs to `owner` (or to none); returns the owner it had.
    pub fn set(&mut self, es: ObjectRef<K>, owner: Option<String>) -> Option<String> {
        let before = self.owner_of.remove(&es);
        if let Some(b) = &before
            && let Some(set) = self.by_owner.get_mut(b)
        {
            set.remove(&es);
            if set.is_empty() {
                self.by_owner.remove(b);
            }
        }
        if let Some(o) = owner {
            self.by_owner.entry(o.clone()).or_default().insert(es.clone());
            self.owner_of.insert(es, o);
        }
        before
    }

    /// The objects of `owner`.
    pub fn of(&self, owner: &str) -> Vec<ObjectRef<K>> {
        self.by_owner.get(owner).into_iter().flatten().cloned().collect()
    }

    /// The owners with an object in namespace `ns`.
    pub fn owners_in(&self, ns: &str) -> HashSet<String> {
        self.owner_of.iter().filter(|(es, _)| es.namespace.as_deref() == Some(ns)).map(|(_, o)| o.clone()).collect()
    }
}

/// What was applied to one object: the hash of the applied manifest, and the object it
/// produced. The object is current while its uid and generation are still those.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// Hash of the applied manifest (namespace aside).
    pub hash: u64,
    /// The object's uid after the apply.
    pub uid: Option<String>,
    /// Its generation after the apply.
    pub generation: Option<i64>,
}

#[cfg(test)]
mod tests {
    use keyward_crds::ExternalSecret;

    use super::*;

    fn es(ns: &str, name: &str) -> ObjectRef<ExternalSecret> {
        ObjectRef::new(name).within(ns)
    }

    #[test]
    fn follows_label_changes_and_removal() {
        let mut idx = OwnedIndex::default();
        assert_eq!(idx.set(es("a", "db"), Some("shared".into())), None);
        idx.set(es("b", "db"), Some("shared".into()));
        idx.set(es("b", "other"), Some("second".into()));
        let mut of = idx.of("shared");
        of.sort_by(|x, y| x.namespace.cmp(&y.namespace));
        assert_eq!(of, [es("a", "db"), es("b", "db")]);
        assert_eq!(idx.owners_in("b"), HashSet::from(["shared".to_string(), "second".to_string()]));

        // Relabelled to another owner, then unlabelled, then gone.
        assert_eq!(idx.set(es("a", "db"), Some("second".into())), Some("shared".into()));
        assert_eq!(idx.of("shared"), [es("b", "db")]);
        assert_eq!(idx.set(es("b", "db"), None), Some("shared".into()));
        assert!(idx.of("shared").is_empty());
        assert_eq!(idx.set(es("b", "db"), None), None);
        assert_eq!(idx.owners_in("a"), HashSet::from(["second".to_string()]));
    }
}
