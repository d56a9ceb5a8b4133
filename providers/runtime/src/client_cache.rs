//! Store clients built from configuration objects, kept until what they were built from changes
//! (feature `refs`).
//!
//! A client is built from a configuration object, whose generation is part of its key
//! ([`CacheKey`]), and from what that configuration names: Secrets and ConfigMaps (credentials,
//! CA bundles, template values), ServiceAccounts (an IAM role annotation) and ServiceAccount
//! tokens. While [`ClientCache::get_or_build`] builds a client, every object read through
//! [`ClusterRefs`] is noted with its resourceVersion, and every expiring credential with its
//! expiry ([`note_expiry`]). The client is then reused, with no timer, until:
//!
//! - an object it was built from changes or goes: seen by a metadata GET of it at most every
//!   [`RECHECK`]. A provider started with `--watch-referenced-objects` (which then needs `list`
//!   and `watch` on Secrets and ConfigMaps) sees Secrets and ConfigMaps change on the next call
//!   instead, through metadata-only watches ([`crate::config_watch::ConfigWatches::version_of`]);
//!   ServiceAccounts, and any object while those watches cannot answer (not listed yet), are
//!   still looked at with the GET. The default keeps a provider's access to Secrets to reading
//!   the ones configurations name;
//! - two thirds of the time left on a noted credential have passed, so it is renewed before it
//!   expires;
//! - the store refuses its credentials (`UNAUTHENTICATED`, [`ClientCache::evict_if_refused`]);
//! - no call has used it for [`IDLE`], or [`MAX_CLIENTS`] others were used since (the least
//!   recently used goes first): nothing tells the cache that a configuration was deleted or is
//!   no longer read, and tenants create configurations at will.
//!
//! Reads in tasks a build spawns are not noted: builds read what they name in their own task.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};
use keyward_proto::ProviderError;
use kube::Api;

use crate::context::{Generation, RequestContext};
use crate::refs::{ClusterRefs, operator_owned};

/// How often an object a client was built from, which no watch vouches for, is read again
/// (metadata only) to see whether it changed.
pub const RECHECK: Duration = Duration::from_secs(120);

/// How long a client no call uses is kept. A configuration read at least this often (a store
/// refreshed every few minutes) keeps its client; one read less often has it built again, which
/// costs the reads of what it is built from and, for some stores, a login. Without a limit a
/// deleted or forgotten configuration would pin its client, and what the client holds (a
/// webhook's template Secrets), for the life of the process.
pub const IDLE: Duration = Duration::from_secs(600);

/// Most clients kept: past it the least recently used goes, so configurations created faster
/// than [`IDLE`] drops them cannot grow the cache either. Well above the configurations one
/// provider process usually serves within [`IDLE`]; past it clients are built again more often,
/// nothing fails.
pub const MAX_CLIENTS: usize = 1024;

/// Whether Secrets and ConfigMaps are watched ([`watch_referenced_objects`]).
static WATCH_REFERENCED: AtomicBool = AtomicBool::new(false);

/// Sets whether this process watches Secrets and ConfigMaps (metadata only) to see at once that
/// one a cached client was built from changed (`--watch-referenced-objects`); off, it looks with
/// a GET every [`RECHECK`].
pub fn watch_referenced_objects(on: bool) {
    WATCH_REFERENCED.store(on, Ordering::Relaxed);
}

/// Which cached client serves a request: the configuration object (by its UID too), its
/// generation and whether the request reached it as the operator's ([`operator_owned`]): what a
/// configuration may name depends on that, so a client built for the operator never serves a
/// tenant's request.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct CacheKey {
    /// Kind of the config object (a SecretStore and a Kubernetes object may share a name).
    pub kind: String,
    /// Namespace of the config object.
    pub namespace: String,
    /// Name of the config object.
    pub name: String,
    /// `metadata.uid` of the config object: a re-created one gets its own clients.
    pub uid: String,
    /// `metadata.generation` of the config object.
    pub generation: i64,
    /// Whether the config was reached as operator-owned.
    pub operator: bool,
}

impl CacheKey {
    /// The key of a request's configuration object at `generation` (with its UID).
    pub fn of(ctx: &RequestContext, generation: impl Into<Generation>) -> Self {
        let Generation { uid, number } = generation.into();
        CacheKey {
            kind: ctx.kind.clone(),
            namespace: ctx.config_namespace().to_string(),
            name: ctx.name.clone(),
            uid,
            generation: number,
            operator: operator_owned(ctx),
        }
    }

    /// The configuration object's UID and generation (what [`crate::read_cache::ReadCache::read`]
    /// keys answers by).
    pub fn object(&self) -> Generation {
        Generation { uid: self.uid.clone(), number: self.generation }
    }

    /// Whether `other` is the same configuration object, whatever its generation.
    pub fn same_object(&self, other: &CacheKey) -> bool {
        (&self.kind, &self.namespace, &self.name, &self.uid, self.operator)
            == (&other.kind, &other.namespace, &other.name, &other.uid, other.operator)
    }
}

/// The kinds of object a client can be built from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum InputKind {
    Secret,
    ConfigMap,
    ServiceAccount,
}

/// One object a client was built from, at the version it was read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Input {
    pub(crate) kind: InputKind,
    pub(crate) namespace: String,
    pub(crate) name: String,
    pub(crate) version: Option<String>,
}

/// What one client build read.
#[derive(Default)]
struct Inputs {
    objects: Vec<Input>,
    /// When the client is built again: two thirds into the life of its shortest-lived credential.
    renew_at: Option<Instant>,
    /// The reader the objects were read with, to look at them again.
    refs: Option<ClusterRefs>,
}

tokio::task_local! {
    static BUILDING: Arc<Mutex<Inputs>>;
}

fn noting(f: impl FnOnce(&mut Inputs)) {
    // Outside a build (a read for one call only) there is nothing to note.
    let _ = BUILDING.try_with(|inputs| f(&mut inputs.lock().unwrap_or_else(PoisonError::into_inner)));
}

/// Notes, while a client is built, an object it is built from.
pub(crate) fn note_object(refs: &ClusterRefs, input: Input) {
    noting(|inputs| {
        inputs.refs.get_or_insert_with(|| refs.clone());
        if !inputs.objects.contains(&input) {
            inputs.objects.push(input);
        }
    });
}

/// Notes, while a client is built, that a credential it holds expires at `expiry`: the client
/// is built again once two thirds of the time left have passed, before the credential expires.
/// Does nothing outside a build.
pub fn note_expiry(expiry: SystemTime) {
    let left = expiry.duration_since(SystemTime::now()).unwrap_or_default();
    let renew_at = Instant::now() + left * 2 / 3;
    noting(|inputs| inputs.renew_at = Some(inputs.renew_at.map_or(renew_at, |r| r.min(renew_at))));
}

/// Whether a cached client may serve.
enum Verdict {
    Fresh,
    Stale,
    /// Fresh as far as the watches know; these inputs are to be read again.
    Recheck(Vec<Input>, ClusterRefs),
}

struct Cached<C> {
    client: C,
    inputs: Inputs,
    checked: Instant,
    /// When a call last used it.
    used: Instant,
    /// Tells this entry from one built later under the same key.
    id: u64,
}

impl<C> Cached<C> {
    fn verdict(&mut self, now: Instant) -> Verdict {
        if self.inputs.renew_at.is_some_and(|at| now >= at) {
            return Verdict::Stale;
        }
        let Some(refs) = &self.inputs.refs else {
            return Verdict::Fresh;
        };
        // Every call comes here: nothing is copied unless a look with GETs is due.
        let due = now.duration_since(self.checked) >= RECHECK;
        let mut unsure = Vec::new();
        for input in &self.inputs.objects {
            match refs.watched_version(input) {
                Some(version) if version == input.version => {}
                Some(_) => return Verdict::Stale,
                None if due => unsure.push(input.clone()),
                None => {}
            }
        }
        if unsure.is_empty() {
            return Verdict::Fresh;
        }
        // Callers meanwhile go on with the client; one looks.
        self.checked = now;
        Verdict::Recheck(unsure, refs.clone())
    }
}

/// The cached clients, and when idle ones were last looked for.
struct Entries<C> {
    by_key: HashMap<CacheKey, Cached<C>>,
    swept: Instant,
}

impl<C> Entries<C> {
    /// Drops the clients no call used for `idle`. Looks at most every tenth of it, so a busy
    /// cache is not walked on every call; an idle client goes at most that much later.
    fn drop_idle(&mut self, now: Instant, idle: Duration) {
        if now.saturating_duration_since(self.swept) < idle / 10 {
            return;
        }
        self.swept = now;
        self.by_key.retain(|_, e| now.saturating_duration_since(e.used) < idle);
    }

    /// Drops the least recently used clients until there is room for one more within `max`.
    fn make_room(&mut self, max: usize) {
        while self.by_key.len() >= max.max(1) {
            let Some(lru) = self.by_key.iter().min_by_key(|(_, e)| e.used).map(|(k, _)| k.clone()) else {
                return;
            };
            self.by_key.remove(&lru);
        }
    }
}

/// Store clients built from configuration objects, reused until what they were built from
/// changes (the module documentation says how that is seen) or they are idle.
pub struct ClientCache<C> {
    entries: Mutex<Entries<C>>,
    next_id: AtomicU64,
    idle: Duration,
    max_entries: usize,
}

impl<C> Default for ClientCache<C> {
    fn default() -> Self {
        ClientCache::with_limits(IDLE, MAX_CLIENTS)
    }
}

impl<C> ClientCache<C> {
    fn with_limits(idle: Duration, max_entries: usize) -> Self {
        let entries = Entries { by_key: HashMap::new(), swept: Instant::now() };
        ClientCache { entries: Mutex::new(entries), next_id: AtomicU64::new(0), idle, max_entries }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries<C>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<C: Clone> ClientCache<C> {
    /// The cached client for `key`, unless what it was built from changed.
    pub async fn get(&self, key: &CacheKey) -> Option<C> {
        self.get_at(key, Instant::now()).await
    }

    async fn get_at(&self, key: &CacheKey, now: Instant) -> Option<C> {
        let (client, id, unsure, refs) = {
            let mut entries = self.lock();
            entries.drop_idle(now, self.idle);
            let entry = entries.by_key.get_mut(key)?;
            entry.used = now;
            match entry.verdict(now) {
                Verdict::Fresh => return Some(entry.client.clone()),
                Verdict::Stale => {
                    entries.by_key.remove(key);
                    return None;
                }
                Verdict::Recheck(unsure, refs) => (entry.client.clone(), entry.id, unsure, refs),
            }
        };
        for input in unsure {
            match refs.current_version(&input).await {
                Ok(version) if version == input.version => {}
                Ok(_) => {
                    tracing::info!(kind = ?input.kind, namespace = %input.namespace, name = %input.name,
                        "an object a store client was built from changed; building it again");
                    let mut entries = self.lock();
                    if entries.by_key.get(key).is_some_and(|e| e.id == id) {
                        entries.by_key.remove(key);
                    }
                    return None;
                }
                // The API server is unreachable: the client it was built from still serves.
                Err(e) => tracing::debug!(error = %e, "cannot recheck what a store client was built from"),
            }
        }
        Some(client)
    }

    /// Stores a client built from nothing the cache follows; older generations of the same
    /// config object are dropped.
    pub fn put(&self, key: CacheKey, client: C) {
        self.insert(key, client, Inputs::default(), Instant::now());
    }

    fn insert(&self, key: CacheKey, client: C, inputs: Inputs, now: Instant) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        // Starts the watches that will see these objects change, so they have listed by the
        // next call.
        if let Some(refs) = &inputs.refs {
            for input in &inputs.objects {
                refs.watched_version(input);
            }
        }
        let mut entries = self.lock();
        // Older generations of the object, and an earlier object of the same name, go.
        entries.by_key.retain(|k, _| {
            !(k.kind == key.kind
                && k.namespace == key.namespace
                && k.name == key.name
                && (k.generation, &k.uid) != (key.generation, &key.uid))
        });
        entries.drop_idle(now, self.idle);
        entries.by_key.remove(&key);
        entries.make_room(self.max_entries);
        entries.by_key.insert(key, Cached { client, inputs, checked: now, used: now, id });
    }

    /// The cached client for `key`, else the one `build` makes, then cached with what it read.
    pub async fn get_or_build<F>(&self, key: &CacheKey, build: F) -> Result<C, ProviderError>
    where
        F: std::future::Future<Output = Result<C, ProviderError>>,
    {
        if let Some(c) = self.get(key).await {
            return Ok(c);
        }
        let noted = Arc::new(Mutex::new(Inputs::default()));
        let client = BUILDING.scope(noted.clone(), build).await?;
        let inputs = std::mem::take(&mut *noted.lock().unwrap_or_else(PoisonError::into_inner));
        self.insert(key.clone(), client.clone(), inputs, Instant::now());
        Ok(client)
    }

    /// Forgets a client (its credentials were refused).
    pub fn evict(&self, key: &CacheKey) {
        self.lock().by_key.remove(key);
    }

    /// Forgets every client whose key `matches`.
    pub fn evict_matching(&self, matches: impl Fn(&CacheKey) -> bool) {
        self.lock().by_key.retain(|k, _| !matches(k));
    }

    /// Passes `e` on; when the store refused the client's credentials (`UNAUTHENTICATED`) the
    /// client is forgotten, so the next call reads them again.
    pub fn evict_if_refused(&self, key: &CacheKey, e: ProviderError) -> ProviderError {
        if matches!(e, ProviderError::Unauthenticated(_)) {
            self.evict(key);
        }
        e
    }

    /// Number of cached clients.
    pub fn len(&self) -> usize {
        self.lock().by_key.len()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl ClusterRefs {
    /// The version of `input` as a watch has it (`Some(None)`: gone), or `None` when no watch
    /// can tell.
    fn watched_version(&self, input: &Input) -> Option<Option<String>> {
        if !WATCH_REFERENCED.load(Ordering::Relaxed) {
            return None;
        }
        let (client, watches) = (self.client(), self.watches());
        match input.kind {
            InputKind::Secret => watches.version_of::<Secret>(client, &input.namespace, &input.name),
            InputKind::ConfigMap => watches.version_of::<ConfigMap>(client, &input.namespace, &input.name),
            InputKind::ServiceAccount => None,
        }
    }

    /// The version of `input` the API server has now (`None`: gone).
    async fn current_version(&self, input: &Input) -> Result<Option<String>, kube::Error> {
        let (client, ns, name) = (self.client().clone(), input.namespace.as_str(), input.name.as_str());
        let meta = match input.kind {
            InputKind::Secret => {
                Api::<Secret>::namespaced(client, ns).get_metadata_opt(name).await?.map(|o| o.metadata)
            }
            InputKind::ConfigMap => {
                Api::<ConfigMap>::namespaced(client, ns).get_metadata_opt(name).await?.map(|o| o.metadata)
            }
            InputKind::ServiceAccount => {
                Api::<ServiceAccount>::namespaced(client, ns).get_metadata_opt(name).await?.map(|o| o.metadata)
            }
        };
        Ok(meta.and_then(|m| m.resource_version))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scoped(ns: &str, kind: &str, scope: &str) -> RequestContext {
        crate::context::vault_request("GetSecret", ns, kind, scope)
    }

    fn ctx(ns: &str, kind: &str) -> RequestContext {
        scoped(ns, kind, "")
    }

    #[tokio::test]
    async fn cache_is_keyed_by_config_generation_and_owner() {
        let key = |name: &str, generation, operator| CacheKey {
            kind: "Vault".into(),
            namespace: "team-a".into(),
            name: name.into(),
            uid: "u1".into(),
            generation,
            operator,
        };
        let cache = ClientCache::<&str>::default();
        cache.put(key("v", 1, false), "gen1");
        assert_eq!(cache.get(&key("v", 1, false)).await, Some("gen1"));
        assert_eq!(cache.get(&key("v", 1, true)).await, None, "the owner matters");
        cache.put(key("v", 2, false), "gen2");
        assert_eq!(cache.get(&key("v", 1, false)).await, None, "a new generation replaces the old");
        assert_eq!(cache.len(), 1);
        let refused = cache.evict_if_refused(&key("v", 2, false), ProviderError::Unavailable("down".into()));
        assert_eq!(refused.code(), tonic::Code::Unavailable);
        assert_eq!(cache.len(), 1, "an outage keeps the client");
        let refused = cache.evict_if_refused(&key("v", 2, false), ProviderError::Unauthenticated("no".into()));
        assert_eq!(refused.code(), tonic::Code::Unauthenticated);
        assert!(cache.is_empty(), "refused credentials evict it");
        // A deleted and re-created object of the same name starts at generation 1 again: its UID
        // tells it from the one before, whose client it never gets.
        cache.put(key("v", 1, false), "first object");
        let recreated = CacheKey { uid: "u2".into(), ..key("v", 1, false) };
        assert_eq!(cache.get(&recreated).await, None, "another object of the same name and generation");
        cache.put(recreated.clone(), "second object");
        assert_eq!((cache.get(&key("v", 1, false)).await, cache.len()), (None, 1), "it replaces the first");
        let meta = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            uid: Some("u2".into()),
            generation: Some(1),
            ..Default::default()
        };
        assert_eq!(CacheKey::of(&ctx("", "Provider"), Generation::of(&meta)), recreated);
        cache.evict_matching(|k| k.same_object(&recreated));
        assert!(cache.is_empty());
        assert_eq!(CacheKey::of(&ctx("", "Provider"), Some(3)), CacheKey { uid: String::new(), ..key("v", 3, false) });
        // The same config reached as the operator's and as a tenant's: two clients.
        let operator = CacheKey::of(&scoped("team-a", "ClusterProvider", "ProviderNamespace"), Some(3));
        assert_eq!(operator, CacheKey { uid: String::new(), ..key("v", 3, true) });
        assert_ne!(CacheKey::of(&scoped("team-a", "ClusterProvider", "ManifestNamespace"), Some(3)), operator);
    }

    #[tokio::test]
    async fn get_or_build_builds_once() {
        let cache = ClientCache::<u32>::default();
        let key = CacheKey::of(&ctx("", "Provider"), Some(1));
        assert_eq!(cache.get_or_build(&key, async { Ok(7) }).await.expect("built"), 7);
        assert_eq!(cache.get_or_build(&key, async { Ok(8) }).await.expect("cached"), 7, "not built again");
        let other = CacheKey::of(&ctx("", "Provider"), Some(2));
        let e = cache.get_or_build(&other, async { Err(ProviderError::BadConfig("x".into())) }).await;
        assert!(e.is_err());
        assert_eq!(cache.get(&other).await, None, "a failed build caches nothing");
    }

    /// A client holding a credential is built again two thirds into the credential's life, not
    /// before; without one it is kept (no timer).
    #[tokio::test]
    async fn credentials_are_renewed_before_they_expire() {
        let cache = ClientCache::<u32>::default();
        let key = CacheKey::of(&ctx("", "Provider"), Some(1));
        let expiring = async {
            note_expiry(SystemTime::now() + Duration::from_millis(600));
            note_expiry(SystemTime::now() + Duration::from_secs(3600));
            Ok(1)
        };
        assert_eq!(cache.get_or_build(&key, expiring).await.expect("built"), 1);
        assert_eq!(cache.get(&key).await, Some(1), "fresh credentials keep the client");
        tokio::time::sleep(Duration::from_millis(450)).await;
        assert_eq!(cache.get(&key).await, None, "two thirds of the shortest life passed");
        assert_eq!(cache.get_or_build(&key, async { Ok(2) }).await.expect("rebuilt"), 2);
        tokio::time::sleep(Duration::from_millis(450)).await;
        assert_eq!(cache.get(&key).await, Some(2), "a client with no expiring credential is kept");
        // Outside a build, noting does nothing.
        note_expiry(SystemTime::now());
        assert_eq!(cache.get(&key).await, Some(2));
    }

    fn named(name: &str) -> CacheKey {
        CacheKey {
            kind: "Vault".into(),
            namespace: "team-a".into(),
            name: name.into(),
            uid: String::new(),
            generation: 1,
            operator: false,
        }
    }

    /// A configuration no call reads any more (deleted, or left behind) loses its client once
    /// it is idle, when the cache is next used; one in use keeps its client.
    #[tokio::test]
    async fn idle_clients_are_dropped() {
        let cache = ClientCache::<u32>::default();
        let start = Instant::now();
        cache.insert(named("gone"), 1, Inputs::default(), start);
        cache.insert(named("used"), 2, Inputs::default(), start);
        let almost_idle = start + IDLE - Duration::from_secs(1);
        assert_eq!(cache.get_at(&named("used"), almost_idle).await, Some(2));
        assert_eq!(cache.len(), 2, "not idle yet");
        // However often the cache looks (every tenth of the period), the idle client is gone
        // by then, and the one used meanwhile is not.
        let later = almost_idle + IDLE / 10 + Duration::from_secs(1);
        assert_eq!(cache.get_at(&named("used"), later).await, Some(2));
        assert_eq!(cache.len(), 1, "the idle client went");
        assert_eq!(cache.get_at(&named("gone"), later).await, None);
    }

    /// Past the cap, a new client takes the place of the least recently used one.
    #[tokio::test]
    async fn the_least_recently_used_client_makes_room() {
        let cache = ClientCache::<u32>::with_limits(IDLE, 3);
        let base = Instant::now();
        let at = |s| base + Duration::from_secs(s);
        cache.insert(named("a"), 1, Inputs::default(), at(1));
        cache.insert(named("b"), 2, Inputs::default(), at(2));
        cache.insert(named("c"), 3, Inputs::default(), at(3));
        assert_eq!(cache.get_at(&named("a"), at(4)).await, Some(1));
        cache.insert(named("d"), 4, Inputs::default(), at(5));
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.get_at(&named("b"), at(6)).await, None, "b was used least recently");
        for (name, client) in [("a", 1), ("c", 3), ("d", 4)] {
            assert_eq!(cache.get_at(&named(name), at(6)).await, Some(client));
        }
        // Replacing a cached client evicts nothing else.
        cache.insert(named("d"), 5, Inputs::default(), at(7));
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.get_at(&named("a"), at(8)).await, Some(1));
        // The default cap.
        let full = ClientCache::<u32>::default();
        for n in 0..MAX_CLIENTS + 10 {
            full.put(named(&n.to_string()), 0);
        }
        assert_eq!(full.len(), MAX_CLIENTS);
    }
}
