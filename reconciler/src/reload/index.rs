//! Who uses what, kept in step with the caches so that an event costs a lookup, not a scan:
//! ExternalSecret → (target Secret, data hash), target Secret → ExternalSecrets writing it, and
//! Secret or injected ExternalSecret → reloadable workloads using it.
//!
//! ExternalSecrets are indexed only in namespaces that hold a reloadable workload: elsewhere no
//! change of theirs can concern one, and most installs have none (the index cost 0.3 KB per
//! ExternalSecret at 10,000). When a namespace gets its first reloadable workload it is marked
//! to be filled in from the ExternalSecret cache, and every namespace so marked is filled in by
//! one pass over the cache before the index is next read ([`Index::take_pending`]): a re-list
//! of workloads in many namespaces costs one pass, not one per namespace. When a namespace
//! loses its last reloadable workload, its ExternalSecrets are dropped.

use std::collections::{BTreeSet, HashMap, HashSet};

use keyward_crds::workload::{self, secrets_used};

use super::workload::Kind;

/// A workload in the index.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WorkloadKey {
    /// Its kind.
    pub kind: Kind,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

/// An object of a namespace, as `namespace/name` (neither may hold a `/`): one allocation per
/// key, and there are two keys per ExternalSecret.
type Path = Box<str>;

fn path(namespace: &str, name: &str) -> Path {
    format!("{namespace}/{name}").into_boxed_str()
}

/// What is kept of an ExternalSecret: its target Secret and data hash.
type Writes = (Box<str>, Option<Box<str>>);

/// What a reloadable workload's pod template refers to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Uses {
    /// Secrets named directly (env, envFrom, volumes).
    pub secrets: BTreeSet<String>,
    /// ExternalSecrets named for injection.
    pub injected: BTreeSet<String>,
    /// The hash its template carries now.
    pub current: Option<String>,
}

/// The index.
#[derive(Debug, Default)]
pub struct Index {
    /// ExternalSecret → (target Secret, data hash).
    external_secrets: HashMap<Path, Writes>,
    /// Target Secret → ExternalSecrets writing it, sorted by name: nearly always one, so a
    /// vector (one small allocation) rather than a set (a B-tree node).
    targets: HashMap<Path, Vec<Box<str>>>,
    workloads: HashMap<WorkloadKey, Uses>,
    /// Reloadable workloads by namespace: the namespaces whose ExternalSecrets are indexed.
    namespaces: HashMap<String, usize>,
    /// Namespaces whose ExternalSecrets are still to be filled in from the cache.
    pending: HashSet<String>,
    by_secret: HashMap<Path, HashSet<WorkloadKey>>,
    by_injected: HashMap<Path, HashSet<WorkloadKey>>,
}

fn unlink(map: &mut HashMap<Path, HashSet<WorkloadKey>>, key: Path, w: &WorkloadKey) {
    if let Some(set) = map.get_mut(&key) {
        set.remove(w);
        if set.is_empty() {
            map.remove(&key);
        }
    }
}

impl Index {
    /// Records an ExternalSecret's target and data hash (`None` when it is gone); returns the
    /// workloads whose hash may have changed. Outside the namespaces with a reloadable workload
    /// nothing is kept, and none is.
    pub fn set_external_secret(
        &mut self,
        namespace: &str,
        name: &str,
        input: Option<(String, Option<String>)>,
    ) -> Vec<WorkloadKey> {
        if !self.namespaces.contains_key(namespace) {
            return Vec::new();
        }
        let key = path(namespace, name);
        let input: Option<Writes> = input.map(|(t, h)| (t.into_boxed_str(), h.map(String::into_boxed_str)));
        let old = match &input {
            Some(new) => self.external_secrets.insert(key.clone(), new.clone()),
            None => self.external_secrets.remove(&key),
        };
        if old == input {
            return Vec::new();
        }
        let mut touched_secrets = Vec::new();
        if let Some((target, _)) = &old {
            let t = path(namespace, target);
            if let Some(set) = self.targets.get_mut(&t) {
                set.retain(|w| &**w != name);
                if set.is_empty() {
                    self.targets.remove(&t);
                }
            }
            touched_secrets.push(t);
        }
        if let Some((target, _)) = &input {
            let t = path(namespace, target);
            let writers = self.targets.entry(t.clone()).or_default();
            if let Err(at) = writers.binary_search_by(|w| (**w).cmp(name)) {
                writers.insert(at, name.into());
            }
            touched_secrets.push(t);
        }
        let mut out: HashSet<WorkloadKey> = HashSet::new();
        for t in &touched_secrets {
            out.extend(self.by_secret.get(t).into_iter().flatten().cloned());
        }
        out.extend(self.by_injected.get(&key).into_iter().flatten().cloned());
        out.into_iter().collect()
    }

    /// Records what a workload uses (`None` when it is gone or does not reload); returns whether
    /// it changed. The namespace's first reloadable workload marks its ExternalSecrets to be
    /// filled in ([`Self::take_pending`]).
    pub fn set_workload(&mut self, w: WorkloadKey, uses: Option<Uses>) -> bool {
        let old = match &uses {
            Some(u) => self.workloads.insert(w.clone(), u.clone()),
            None => self.workloads.remove(&w),
        };
        if old == uses {
            return false;
        }
        let ns = w.namespace.as_str();
        match (old.is_some(), uses.is_some()) {
            (false, true) => {
                let count = self.namespaces.entry(ns.to_string()).or_default();
                *count += 1;
                if *count == 1 {
                    self.pending.insert(ns.to_string());
                }
            }
            (true, false) => self.leave(ns),
            _ => {}
        }
        if let Some(old) = old {
            for s in old.secrets {
                unlink(&mut self.by_secret, path(ns, &s), &w);
            }
            for e in old.injected {
                unlink(&mut self.by_injected, path(ns, &e), &w);
            }
        }
        if let Some(new) = uses {
            for s in new.secrets {
                self.by_secret.entry(path(ns, &s)).or_default().insert(w.clone());
            }
            for e in new.injected {
                self.by_injected.entry(path(ns, &e)).or_default().insert(w.clone());
            }
        }
        true
    }

    /// The namespaces whose ExternalSecrets are to be filled in now: the caller
    /// [`Self::set_external_secret`]s each cached ExternalSecret of them, in one pass over the
    /// cache, before it reads the index.
    pub fn take_pending(&mut self) -> HashSet<String> {
        std::mem::take(&mut self.pending)
    }

    /// One reloadable workload fewer in `ns`; the last one takes the namespace's ExternalSecrets
    /// out of the index.
    fn leave(&mut self, ns: &str) {
        let Some(count) = self.namespaces.get_mut(ns) else { return };
        *count -= 1;
        if *count > 0 {
            return;
        }
        self.namespaces.remove(ns);
        self.pending.remove(ns);
        let prefix = format!("{ns}/");
        self.external_secrets.retain(|k, _| !k.starts_with(&prefix));
        self.targets.retain(|k, _| !k.starts_with(&prefix));
    }

    /// The target Secret of an ExternalSecret.
    pub fn target_of(&self, namespace: &str, es: &str) -> Option<String> {
        self.external_secrets.get(&path(namespace, es)).map(|(t, _)| t.to_string())
    }

    /// The data hash of a managed Secret: from the first ExternalSecret (by name) that writes it
    /// and has synced, as the webhook does.
    pub fn data_hash_of(&self, namespace: &str, secret: &str) -> Option<String> {
        let writers = self.targets.get(&path(namespace, secret))?;
        writers.iter().find_map(|es| Some(self.external_secrets.get(&path(namespace, es))?.1.as_deref()?.to_string()))
    }

    /// Number of reloadable workloads indexed.
    pub fn workloads(&self) -> usize {
        self.workloads.len()
    }
}

/// What a reloadable pod template uses, without resolving injected ExternalSecrets (their
/// targets change on their own and are looked up when the hash is computed).
pub fn uses(
    spec: &k8s_openapi::api::core::v1::PodSpec,
    annotations: &std::collections::BTreeMap<String, String>,
) -> Uses {
    let secrets = secrets_used(spec, annotations, |_| None).into_iter().collect();
    let injected = annotations
        .get(workload::INJECT_ANNOTATION)
        .map(|v| v.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect())
        .unwrap_or_default();
    Uses { secrets, injected, current: annotations.get(workload::SECRETS_HASH_ANNOTATION).cloned() }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(name: &str) -> WorkloadKey {
        WorkloadKey { kind: Kind::Deployment, namespace: "a".into(), name: name.into() }
    }

    fn using(secrets: &[&str], injected: &[&str]) -> Option<Uses> {
        Some(Uses {
            secrets: secrets.iter().map(|s| s.to_string()).collect(),
            injected: injected.iter().map(|s| s.to_string()).collect(),
            current: None,
        })
    }

    #[test]
    fn an_external_secret_change_reaches_exactly_the_workloads_using_it() {
        let mut i = Index::default();
        assert!(i.set_workload(w("direct"), using(&["db"], &[])));
        assert_eq!(i.take_pending(), ["a".to_string()].into(), "the namespace's first");
        assert!(i.set_workload(w("injects"), using(&[], &["db-es"])));
        assert!(i.set_workload(w("other"), using(&["cache"], &[])));
        assert!(!i.set_workload(w("other"), using(&["cache"], &[])), "unchanged");
        assert!(i.take_pending().is_empty(), "filled in once");
        let mut hit = i.set_external_secret("a", "db-es", Some(("db".into(), Some("h1".into()))));
        hit.sort_by(|x, y| x.name.cmp(&y.name));
        assert_eq!(hit, vec![w("direct"), w("injects")]);
        assert!(i.set_external_secret("a", "db-es", Some(("db".into(), Some("h1".into())))).is_empty(), "no-op");
        assert_eq!(i.data_hash_of("a", "db").as_deref(), Some("h1"));
        assert_eq!(i.target_of("a", "db-es").as_deref(), Some("db"));
        // A new target: workloads of the old and the new Secret are both concerned.
        assert!(i.set_workload(w("new"), using(&["db2"], &[])));
        let hit: HashSet<_> =
            i.set_external_secret("a", "db-es", Some(("db2".into(), Some("h1".into())))).into_iter().collect();
        assert_eq!(hit, [w("direct"), w("injects"), w("new")].into_iter().collect());
        assert_eq!(i.data_hash_of("a", "db"), None);
        // Gone: its Secret no longer has a hash; nothing is left behind.
        assert_eq!(i.set_external_secret("a", "db-es", None).len(), 2);
        assert_eq!(i.data_hash_of("a", "db2"), None);
        assert!(i.external_secrets.is_empty() && i.targets.is_empty());
        for n in ["direct", "injects", "other", "new"] {
            i.set_workload(w(n), None);
        }
        assert!(i.by_secret.is_empty() && i.by_injected.is_empty() && i.workloads() == 0);
        assert!(i.namespaces.is_empty());
    }

    #[test]
    fn only_namespaces_with_a_reloadable_workload_index_their_external_secrets() {
        let mut i = Index::default();
        let synced = || Some(("db".to_string(), Some("h1".to_string())));
        assert!(i.set_external_secret("a", "db-es", synced()).is_empty());
        assert!(i.external_secrets.is_empty() && i.targets.is_empty(), "no workload in a: nothing kept");
        // The first workload of the namespace asks for its ExternalSecrets to be filled in.
        assert!(i.set_workload(w("direct"), using(&["db"], &[])));
        assert_eq!(i.take_pending(), ["a".to_string()].into());
        assert_eq!(i.set_external_secret("a", "db-es", synced()), vec![w("direct")]);
        assert_eq!(i.data_hash_of("a", "db").as_deref(), Some("h1"));
        // A workload of another namespace does not index this one's.
        let elsewhere = WorkloadKey { kind: Kind::Deployment, namespace: "b".into(), name: "x".into() };
        assert!(i.set_workload(elsewhere.clone(), using(&["db"], &[])));
        assert!(i.set_external_secret("c", "db-es", synced()).is_empty());
        assert_eq!(i.external_secrets.len(), 1);
        // No longer reloading (still there, without the annotation): its namespace's entries go.
        assert!(i.set_workload(w("direct"), None));
        assert_eq!(i.data_hash_of("a", "db"), None);
        assert!(i.external_secrets.is_empty() && i.targets.is_empty());
        assert_eq!(i.namespaces.keys().collect::<Vec<_>>(), vec!["b"]);
        i.set_workload(elsewhere, None);
        assert!(i.namespaces.is_empty());
        assert!(i.take_pending().is_empty(), "b left before it was filled in: nothing to fill");
    }

    #[test]
    fn two_writers_of_one_secret_agree_on_the_first_synced_by_name() {
        let mut i = Index::default();
        i.set_workload(w("uses-s"), using(&["s"], &[]));
        i.set_external_secret("a", "b-es", Some(("s".into(), Some("hb".into()))));
        i.set_external_secret("a", "a-es", Some(("s".into(), None)));
        assert_eq!(i.data_hash_of("a", "s").as_deref(), Some("hb"), "a-es has not synced");
        i.set_external_secret("a", "a-es", Some(("s".into(), Some("ha".into()))));
        assert_eq!(i.data_hash_of("a", "s").as_deref(), Some("ha"));
    }
}
