//! The in-memory state every review is answered from. Watches (see [`crate::watch`]) feed it;
//! the request path only reads it, so answering never calls the API server.
//!
//! Only what decisions need is kept: namespace labels, ClusterProvider specs, ClusterSecretStore
//! and ClusterGenerator namespace conditions, the names of Providers and SecretStores, and for
//! ExternalSecrets and PushSecrets the ClusterProviders they reference.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use keyward_crds::{ClusterProviderCondition, ClusterProviderSpec};
use serde_json::Value;
use tokio::sync::Notify;

/// Labels of a namespace.
pub type Labels = BTreeMap<String, String>;

/// A watched source; the caches are synced when every source has listed once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// Namespaces (metadata only).
    Namespaces = 0,
    /// ClusterProviders.
    ClusterProviders = 1,
    /// Providers (metadata only).
    Providers = 2,
    /// ExternalSecrets (kept as store-reference index entries).
    ExternalSecrets = 3,
    /// PushSecrets (kept as store-reference index entries).
    PushSecrets = 4,
    /// ClusterSecretStores (kept as their namespace conditions).
    ClusterSecretStores = 5,
    /// SecretStores (metadata only).
    SecretStores = 6,
    /// ClusterGenerators (kept as their namespace conditions).
    ClusterGenerators = 7,
}

impl Source {
    /// Every source.
    pub const ALL: [Source; 8] = [
        Source::Namespaces,
        Source::ClusterProviders,
        Source::Providers,
        Source::ExternalSecrets,
        Source::PushSecrets,
        Source::ClusterSecretStores,
        Source::SecretStores,
        Source::ClusterGenerators,
    ];

    /// Name for logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Namespaces => "namespaces",
            Source::ClusterProviders => "clusterproviders",
            Source::Providers => "providers",
            Source::ExternalSecrets => "externalsecrets",
            Source::PushSecrets => "pushsecrets",
            Source::ClusterSecretStores => "clustersecretstores",
            Source::SecretStores => "secretstores",
            Source::ClusterGenerators => "clustergenerators",
        }
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

/// Which of the two user kinds references a ClusterProvider.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UserKind {
    /// An ExternalSecret.
    ExternalSecret,
    /// A PushSecret.
    PushSecret,
}

/// An ExternalSecret or PushSecret.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ObjectKey {
    /// Its kind.
    pub kind: UserKind,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

/// One ClusterProvider an object uses (by an explicit kind: an omitted kind is a SecretStore).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct StoreUse {
    /// Name of the ClusterProvider.
    pub cluster_provider: String,
}

/// How many objects of a namespace use one ClusterProvider.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UseCounts {
    /// ExternalSecrets.
    pub external_secrets: u32,
    /// PushSecrets.
    pub push_secrets: u32,
}

impl UseCounts {
    fn slot(&mut self, kind: UserKind) -> &mut u32 {
        match kind {
            UserKind::ExternalSecret => &mut self.external_secrets,
            UserKind::PushSecret => &mut self.push_secrets,
        }
    }

    fn is_zero(&self) -> bool {
        *self == UseCounts::default()
    }
}

/// ExternalSecret and PushSecret references to ClusterProviders, both ways.
#[derive(Debug, Default)]
pub struct RefIndex {
    by_object: HashMap<ObjectKey, Vec<StoreUse>>,
    by_cluster_provider: HashMap<String, BTreeMap<String, UseCounts>>,
}

impl RefIndex {
    /// Records the references of one object, replacing what was known about it.
    pub fn upsert(&mut self, key: ObjectKey, uses: Vec<StoreUse>) {
        self.remove(&key);
        if uses.is_empty() {
            return;
        }
        for u in &uses {
            let counts = self
                .by_cluster_provider
                .entry(u.cluster_provider.clone())
                .or_default()
                .entry(key.namespace.clone())
                .or_default();
            *counts.slot(key.kind) += 1;
        }
        self.by_object.insert(key, uses);
    }

    /// Forgets one object.
    pub fn remove(&mut self, key: &ObjectKey) {
        let Some(uses) = self.by_object.remove(key) else { return };
        for u in uses {
            let Some(per_ns) = self.by_cluster_provider.get_mut(&u.cluster_provider) else { continue };
            if let Some(counts) = per_ns.get_mut(&key.namespace) {
                let slot = counts.slot(key.kind);
                *slot = slot.saturating_sub(1);
                if counts.is_zero() {
                    per_ns.remove(&key.namespace);
                }
            }
            if per_ns.is_empty() {
                self.by_cluster_provider.remove(&u.cluster_provider);
            }
        }
    }

    /// Replaces every object of `kind` (after a relist).
    pub fn replace_kind(&mut self, kind: UserKind, objects: Vec<(ObjectKey, Vec<StoreUse>)>) {
        let stale: Vec<ObjectKey> = self.by_object.keys().filter(|k| k.kind == kind).cloned().collect();
        for key in stale {
            self.remove(&key);
        }
        for (key, uses) in objects {
            self.upsert(key, uses);
        }
    }

    /// Per namespace, how many objects use the ClusterProvider `name`.
    pub fn users_of(&self, name: &str) -> Option<&BTreeMap<String, UseCounts>> {
        self.by_cluster_provider.get(name)
    }

    /// Number of indexed objects.
    pub fn len(&self) -> usize {
        self.by_object.len()
    }

    /// Whether nothing is indexed.
    pub fn is_empty(&self) -> bool {
        self.by_object.is_empty()
    }
}

/// A ClusterProvider as cached: its spec, or why it could not be read.
pub type CachedClusterProvider = Result<ClusterProviderSpec, String>;

/// A ClusterSecretStore as cached: its namespace conditions (all admission needs of it), or why
/// they could not be read.
pub type CachedClusterSecretStore = Result<Vec<ClusterProviderCondition>, String>;

/// Everything a review reads.
#[derive(Debug, Default)]
pub struct State {
    /// Namespace name → labels.
    pub namespaces: HashMap<String, Labels>,
    /// ClusterProvider name → spec.
    pub cluster_providers: HashMap<String, CachedClusterProvider>,
    /// ClusterSecretStore name → namespace conditions.
    pub cluster_secret_stores: HashMap<String, CachedClusterSecretStore>,
    /// ClusterGenerator name → namespace conditions (cached like a ClusterSecretStore's).
    pub cluster_generators: HashMap<String, CachedClusterSecretStore>,
    /// Namespace → names of its Providers.
    pub providers: HashMap<String, HashSet<String>>,
    /// Namespace → names of its SecretStores.
    pub secret_stores: HashMap<String, HashSet<String>>,
    /// Store references of ExternalSecrets and PushSecrets.
    pub refs: RefIndex,
    /// ExternalSecret targets and managed Secret data hashes, for Pod injection and reload.
    pub injection: crate::inject::index::InjectionIndex,
    /// Namespaces whose own configurations may use a provider's identity (the operator's
    /// `--provider-identity-namespaces`, set once at start).
    pub provider_identity: keyward_crds::rules::ProviderIdentityNamespaces,
    /// The generic targets the operator turned on (`--generic-targets`, set once at start), for
    /// the warning the reconciler's rule gives.
    pub generic_targets: keyward_crds::rules::GenericTargets,
}

impl State {
    /// Whether a Provider `name` exists in `namespace`.
    pub fn provider_exists(&self, namespace: &str, name: &str) -> bool {
        self.providers.get(namespace).is_some_and(|names| names.contains(name))
    }

    /// Records a Provider.
    pub fn add_provider(&mut self, namespace: &str, name: &str) {
        add_name(&mut self.providers, namespace, name);
    }

    /// Forgets a Provider.
    pub fn remove_provider(&mut self, namespace: &str, name: &str) {
        remove_name(&mut self.providers, namespace, name);
    }

    /// Whether a SecretStore `name` exists in `namespace`.
    pub fn secret_store_exists(&self, namespace: &str, name: &str) -> bool {
        self.secret_stores.get(namespace).is_some_and(|names| names.contains(name))
    }

    /// Records a SecretStore.
    pub fn add_secret_store(&mut self, namespace: &str, name: &str) {
        add_name(&mut self.secret_stores, namespace, name);
    }

    /// Forgets a SecretStore.
    pub fn remove_secret_store(&mut self, namespace: &str, name: &str) {
        remove_name(&mut self.secret_stores, namespace, name);
    }
}

fn add_name(names: &mut HashMap<String, HashSet<String>>, namespace: &str, name: &str) {
    names.entry(namespace.to_string()).or_default().insert(name.to_string());
}

fn remove_name(names: &mut HashMap<String, HashSet<String>>, namespace: &str, name: &str) {
    if let Some(set) = names.get_mut(namespace) {
        set.remove(name);
        if set.is_empty() {
            names.remove(namespace);
        }
    }
}

/// The shared caches plus their sync state.
#[derive(Debug, Default)]
pub struct Caches {
    state: RwLock<State>,
    synced: AtomicU8,
    changed: Notify,
    /// Whether each source's watch is known to be current.
    pub freshness: crate::freshness::Freshness,
}

impl Caches {
    /// Empty, unsynced caches.
    pub fn new() -> Self {
        Caches::default()
    }

    /// Read access for one review.
    pub fn read(&self) -> RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Write access for a watch (or a benchmark feeding the caches directly). Waiters for a
    /// namespace are woken when the guard's change is announced with [`Caches::announce`].
    pub fn write(&self) -> RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Wakes reviews waiting for a namespace to appear.
    pub fn announce(&self) {
        self.changed.notify_waiters();
    }

    /// Marks a source as listed.
    pub fn mark_synced(&self, source: Source) {
        self.synced.fetch_or(source.bit(), Ordering::SeqCst);
    }

    /// Marks every source as listed (benchmarks and tests that feed the caches directly).
    pub fn mark_all_synced(&self) {
        for s in Source::ALL {
            self.mark_synced(s);
        }
    }

    /// Whether every source has listed once.
    pub fn is_synced(&self) -> bool {
        let all = Source::ALL.iter().fold(0u8, |acc, s| acc | s.bit());
        self.synced.load(Ordering::SeqCst) & all == all
    }

    /// Sources that have not listed yet.
    pub fn unsynced(&self) -> Vec<&'static str> {
        let bits = self.synced.load(Ordering::SeqCst);
        Source::ALL.iter().filter(|s| bits & s.bit() == 0).map(|s| s.as_str()).collect()
    }

    /// Waits up to `timeout` for `namespace` to be in the cache (a namespace created a moment
    /// ago may not have reached the watch yet). Returns whether it is known.
    pub async fn wait_for_namespace(&self, namespace: &str, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.read().namespaces.contains_key(namespace) {
                return true;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.read().namespaces.contains_key(namespace);
            }
        }
    }
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer).and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// The ClusterProviders an ExternalSecret (as JSON) references. Lenient: fields that do not
/// have the expected shape are skipped, so an odd object never stops a watch.
pub fn external_secret_uses(object: &Value) -> Vec<StoreUse> {
    let mut refs: Vec<&Value> = Vec::new();
    if let Some(r) = object.pointer("/spec/secretStoreRef") {
        refs.push(r);
    }
    for list in ["/spec/data", "/spec/dataFrom"] {
        if let Some(items) = object.pointer(list).and_then(Value::as_array) {
            refs.extend(items.iter().filter_map(|d| d.pointer("/sourceRef/storeRef")));
        }
    }
    let mut uses: Vec<StoreUse> = Vec::new();
    for r in refs {
        if str_at(r, "/kind") == Some("ClusterProvider")
            && let Some(name) = str_at(r, "/name")
        {
            let u = StoreUse { cluster_provider: name.to_string() };
            if !uses.contains(&u) {
                uses.push(u);
            }
        }
    }
    uses
}

/// The ClusterProviders a PushSecret (as JSON) references by name (a reference without a kind
/// is a SecretStore).
pub fn push_secret_uses(object: &Value) -> Vec<StoreUse> {
    let mut uses: Vec<StoreUse> = Vec::new();
    let Some(items) = object.pointer("/spec/secretStoreRefs").and_then(Value::as_array) else {
        return uses;
    };
    for r in items {
        let Some(name) = str_at(r, "/name") else { continue };
        if r.get("kind").and_then(Value::as_str) != Some("ClusterProvider") {
            continue;
        }
        let u = StoreUse { cluster_provider: name.to_string() };
        if !uses.contains(&u) {
            uses.push(u);
        }
    }
    uses
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(kind: UserKind, ns: &str, name: &str) -> ObjectKey {
        ObjectKey { kind, namespace: ns.into(), name: name.into() }
    }

    fn uses(names: &[&str]) -> Vec<StoreUse> {
        names.iter().map(|n| StoreUse { cluster_provider: n.to_string() }).collect()
    }

    #[test]
    fn index_counts_follow_updates_and_deletes() {
        let mut idx = RefIndex::default();
        idx.upsert(key(UserKind::ExternalSecret, "a", "es1"), uses(&["shared"]));
        idx.upsert(key(UserKind::ExternalSecret, "a", "es2"), uses(&["shared", "other"]));
        idx.upsert(key(UserKind::PushSecret, "b", "ps1"), uses(&["shared"]));
        let shared = idx.users_of("shared").expect("used");
        assert_eq!(shared["a"].external_secrets, 2);
        assert_eq!(shared["b"].push_secrets, 1);

        // es2 stops using "shared".
        idx.upsert(key(UserKind::ExternalSecret, "a", "es2"), uses(&["other"]));
        assert_eq!(idx.users_of("shared").expect("used")["a"].external_secrets, 1);
        idx.remove(&key(UserKind::ExternalSecret, "a", "es1"));
        assert!(!idx.users_of("shared").expect("used").contains_key("a"));
        idx.remove(&key(UserKind::PushSecret, "b", "ps1"));
        assert!(idx.users_of("shared").is_none());

        // A relist of ExternalSecrets drops the ones that are gone and keeps PushSecrets.
        idx.upsert(key(UserKind::PushSecret, "b", "ps1"), uses(&["other"]));
        idx.replace_kind(UserKind::ExternalSecret, vec![(key(UserKind::ExternalSecret, "c", "es3"), uses(&["x"]))]);
        assert!(idx.users_of("x").is_some());
        assert_eq!(idx.users_of("other").expect("ps")["b"].push_secrets, 1);
        assert!(!idx.users_of("other").expect("ps").contains_key("a"));
        assert_eq!(idx.len(), 2);
    }

    #[test]
    fn extracts_cluster_provider_references_leniently() {
        let es = json!({"spec": {
            "secretStoreRef": {"name": "shared", "kind": "ClusterProvider"},
            "data": [
                {"sourceRef": {"storeRef": {"name": "shared", "kind": "ClusterProvider"}}},
                {"sourceRef": {"storeRef": {"name": "local"}}},
                {"sourceRef": {"storeRef": {"name": "second", "kind": "ClusterProvider"}}},
                {"sourceRef": 7}
            ],
            "dataFrom": [{"sourceRef": {"storeRef": {"name": "third", "kind": "ClusterProvider"}}}, "odd"]
        }});
        let names: Vec<String> = external_secret_uses(&es).into_iter().map(|u| u.cluster_provider).collect();
        assert_eq!(names, ["shared", "second", "third"]);
        assert!(external_secret_uses(&json!("not an object")).is_empty());

        let ps = json!({"spec": {"secretStoreRefs": [
            {"name": "a", "kind": "ClusterProvider"},
            {"name": "b"},
            {"name": "c", "kind": "Provider"},
            {"labelSelector": {}}
        ]}});
        assert_eq!(push_secret_uses(&ps), vec![StoreUse { cluster_provider: "a".into() }], "no kind: a SecretStore");
    }

    #[tokio::test]
    async fn waiting_for_a_namespace_wakes_up_when_it_arrives() {
        let caches = std::sync::Arc::new(Caches::new());
        assert!(!caches.wait_for_namespace("late", Duration::from_millis(20)).await);
        let feeder = caches.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(30)).await;
            feeder.write().namespaces.insert("late".into(), Labels::new());
            feeder.announce();
        });
        assert!(caches.wait_for_namespace("late", Duration::from_secs(5)).await);
    }

    #[test]
    fn synced_only_when_every_source_listed() {
        let caches = Caches::new();
        assert!(!caches.is_synced());
        for s in Source::ALL.iter().filter(|s| **s != Source::PushSecrets) {
            caches.mark_synced(*s);
        }
        assert_eq!(caches.unsynced(), ["pushsecrets"]);
        caches.mark_synced(Source::PushSecrets);
        assert!(caches.is_synced());
    }
}
