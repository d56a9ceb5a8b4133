//! The client cache: one entry per (store kind, store name, manifest namespace), valid while
//! the store's generation and the TLS fingerprint it was built with stay the same.

use std::collections::HashMap;

use keyward_crds::StoreKind;

/// Identifies a cached client. The manifest namespace is part of the key because a namespaced
/// Provider authenticates in it, and so may a ClusterProvider with ManifestNamespace scope.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CacheKey {
    /// Provider or ClusterProvider.
    pub kind: StoreKind,
    /// Name of the store.
    pub name: String,
    /// Namespace of the ExternalSecret or PushSecret.
    pub manifest_namespace: String,
}

/// What a cached client was built from; any change makes it stale.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stamp {
    /// `metadata.uid` of the store: a deleted and recreated store starts at generation 1 again.
    pub uid: Option<String>,
    /// `metadata.generation` of the Provider or ClusterProvider.
    pub generation: Option<i64>,
    /// Fingerprint of the TLS material.
    pub tls_fingerprint: String,
}

/// Outcome of a lookup.
#[derive(Debug, PartialEq, Eq)]
pub enum Lookup<V> {
    /// A client built from the same stamp.
    Hit(V),
    /// Nothing cached for the key.
    Miss,
    /// A client exists but was built from another generation or TLS material; it was dropped.
    Stale,
}

/// The cache itself, without locking (the manager holds it behind a mutex).
#[derive(Debug)]
pub struct ClientCache<V> {
    entries: HashMap<CacheKey, (Stamp, V)>,
}

impl<V> Default for ClientCache<V> {
    fn default() -> Self {
        ClientCache { entries: HashMap::new() }
    }
}

impl<V: Clone> ClientCache<V> {
    /// Looks `key` up for `stamp`; a stale entry is removed.
    pub fn get(&mut self, key: &CacheKey, stamp: &Stamp) -> Lookup<V> {
        match self.entries.get(key) {
            None => Lookup::Miss,
            Some((s, v)) if s == stamp => Lookup::Hit(v.clone()),
            Some(_) => {
                self.entries.remove(key);
                Lookup::Stale
            }
        }
    }

    /// Stores a client.
    pub fn insert(&mut self, key: CacheKey, stamp: Stamp, value: V) {
        self.entries.insert(key, (stamp, value));
    }

    /// Drops every client of one store (it was deleted).
    pub fn remove_store(&mut self, kind: StoreKind, name: &str) {
        self.entries.retain(|k, _| !(k.kind == kind && k.name == name));
    }

    /// Number of cached clients.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Drops everything (manager shutdown).
    pub fn clear(&mut self) {
        self.entries.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(kind: StoreKind, name: &str, ns: &str) -> CacheKey {
        CacheKey { kind, name: name.into(), manifest_namespace: ns.into() }
    }

    fn stamp(generation: i64, fp: &str) -> Stamp {
        Stamp { uid: Some("u".into()), generation: Some(generation), tls_fingerprint: fp.into() }
    }

    #[test]
    fn key_separates_kind_name_and_manifest_namespace() {
        let mut c = ClientCache::default();
        c.insert(key(StoreKind::Provider, "p", "a"), stamp(1, "f"), 1);
        assert_eq!(c.get(&key(StoreKind::Provider, "p", "a"), &stamp(1, "f")), Lookup::Hit(1));
        assert_eq!(c.get(&key(StoreKind::Provider, "p", "b"), &stamp(1, "f")), Lookup::Miss);
        assert_eq!(c.get(&key(StoreKind::ClusterProvider, "p", "a"), &stamp(1, "f")), Lookup::Miss);
        assert_eq!(c.get(&key(StoreKind::Provider, "q", "a"), &stamp(1, "f")), Lookup::Miss);
    }

    #[test]
    fn generation_change_invalidates() {
        let mut c = ClientCache::default();
        let k = key(StoreKind::ClusterProvider, "shared", "team-a");
        c.insert(k.clone(), stamp(1, "f"), "old");
        assert_eq!(c.get(&k, &stamp(2, "f")), Lookup::Stale);
        assert_eq!(c.get(&k, &stamp(1, "f")), Lookup::Miss, "stale entry is dropped");
    }

    #[test]
    fn tls_change_invalidates() {
        let mut c = ClientCache::default();
        let k = key(StoreKind::Provider, "p", "a");
        c.insert(k.clone(), stamp(1, "f1"), "old");
        assert_eq!(c.get(&k, &stamp(1, "f2")), Lookup::Stale);
    }

    #[test]
    fn remove_store_drops_all_namespaces_of_that_store_only() {
        let mut c = ClientCache::default();
        c.insert(key(StoreKind::ClusterProvider, "s", "a"), stamp(1, "f"), 1);
        c.insert(key(StoreKind::ClusterProvider, "s", "b"), stamp(1, "f"), 2);
        c.insert(key(StoreKind::Provider, "s", "a"), stamp(1, "f"), 3);
        c.remove_store(StoreKind::ClusterProvider, "s");
        assert_eq!(c.len(), 1);
        assert_eq!(c.get(&key(StoreKind::Provider, "s", "a"), &stamp(1, "f")), Lookup::Hit(3));
    }
}
