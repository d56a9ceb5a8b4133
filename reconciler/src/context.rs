//! What every reconcile shares: the API client, the caches, the client manager, metrics,
//! events, settings, and per-object state (failure counts for error backoff, the last refresh
//! that wrote nothing). Per-object state is dropped when the caches say the object is gone.

use crate::externalsecret::target::HashKey;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use keyward_crds::{ExternalSecret, PushSecret};
use kube::Client;
use kube::runtime::reflector::Store;
use rand::Rng;

use crate::caches::{ManagedSecret, Packed};
use crate::metrics::Metrics;
use crate::renders::RenderPool;
use keyward_provider_client::ClientManager;

/// Controller settings.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// How often Providers and ClusterProviders are checked again.
    pub provider_check_interval: Duration,
    /// First retry delay after a failed sync.
    pub error_backoff_base: Duration,
    /// Longest retry delay after repeated failures.
    pub error_backoff_max: Duration,
    /// Provider calls one ExternalSecret makes at once.
    pub fetch_concurrency: usize,
    /// Wall-clock limit of one template render (on top of its CPU budget).
    pub render_time_limit: Duration,
    /// Template renders that may run at once (one per namespace at most).
    pub render_slots: usize,
    /// The key of the data hashes written to Secrets and statuses (`--hash-key-file`).
    pub hash_key: &'static HashKey,
    /// The generic targets the operator turned on (off by default).
    pub generic_targets: &'static keyward_crds::rules::GenericTargets,
}

/// Generic targets off (the default).
pub static GENERIC_TARGETS_OFF: keyward_crds::rules::GenericTargets = keyward_crds::rules::GenericTargets::OFF;

impl Default for Settings {
    fn default() -> Self {
        Settings {
            provider_check_interval: Duration::from_secs(60),
            error_backoff_base: Duration::from_secs(2),
            error_backoff_max: Duration::from_secs(300),
            fetch_concurrency: 8,
            render_time_limit: Duration::from_secs(5),
            render_slots: 2,
            hash_key: HashKey::of_process(),
            generic_targets: &GENERIC_TARGETS_OFF,
        }
    }
}

/// Who publishes events (`reportingController`, `reportingInstance`).
pub use crate::events::Reporter;
use crate::events::{Note, Recorder};

/// Which object per-object state belongs to (defined beside the client manager's recovery,
/// which keys waiting objects by it).
pub use keyward_provider_client::ObjectKey;

/// What is remembered about one object between reconciles: one entry (and one key) per object
/// for all of it.
#[derive(Debug, Default, Clone, Copy)]
struct PerObject {
    failures: u32,
    /// What the object asked for when last seen ([`Context::spec_changed`]).
    spec: Option<u64>,
    last_refresh: Option<LastRefresh>,
}

/// The last successful refresh of an object this process made: when, and which version of the
/// object (a fingerprint of its `object_hash`) it synced.
#[derive(Debug, Clone, Copy)]
pub struct LastRefresh {
    pub at: Instant,
    synced: u64,
}

impl LastRefresh {
    fn new(at: Instant, synced_hash: &str) -> Self {
        Self { at, synced: fingerprint(synced_hash) }
    }

    /// Whether this refresh synced the object version `hash`.
    pub fn synced(&self, hash: &str) -> bool {
        self.synced == fingerprint(hash)
    }
}

/// A compact in-process fingerprint: kept for every object, so 8 bytes rather than the string.
fn fingerprint(hash: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    hash.hash(&mut h);
    h.finish()
}

/// The caches reconciles read.
#[derive(Clone)]
pub struct Caches {
    /// ExternalSecrets (the controller's own store), packed.
    pub external_secrets: Store<Packed<ExternalSecret>>,
    /// PushSecrets.
    pub push_secrets: Store<PushSecret>,
    /// Managed Secrets, what is kept of their metadata.
    pub managed_secrets: Store<ManagedSecret>,
}

/// Shared by every reconcile.
pub struct Context {
    /// API client.
    pub client: Client,
    /// Caches.
    pub caches: Caches,
    /// Provider clients.
    pub manager: Arc<ClientManager>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Settings.
    pub settings: Settings,
    /// Where templates are rendered (off the async workers, with a time limit).
    pub renders: RenderPool,
    /// Events: a repeated event (same object version, reason, action and note) within its
    /// window becomes one Event with a series count, not a new object per reconcile.
    recorder: Recorder,
    objects: Mutex<HashMap<ObjectKey, PerObject>>,
    /// This replica's share of the namespaces when the reconcilers are sharded.
    shard: Option<crate::shard::Shard>,
}

impl Context {
    /// A context.
    pub fn new(
        client: Client,
        caches: Caches,
        manager: Arc<ClientManager>,
        metrics: Arc<Metrics>,
        reporter: Reporter,
        settings: Settings,
    ) -> Self {
        let renders = RenderPool::new(settings.render_slots, settings.render_time_limit);
        let recorder = Recorder::new(client.clone(), reporter);
        Context {
            client,
            caches,
            manager,
            metrics,
            settings,
            renders,
            recorder,
            objects: Mutex::new(HashMap::new()),
            shard: None,
        }
    }

    /// Works only the namespaces of `shard` (`--shard`).
    pub fn with_shard(mut self, shard: Option<crate::shard::Shard>) -> Self {
        self.shard = shard;
        self
    }

    /// This replica's share, when sharded.
    pub fn shard(&self) -> Option<&crate::shard::Shard> {
        self.shard.as_ref()
    }

    /// Whether this replica works the objects of `namespace`: always, unless sharded.
    pub fn owns(&self, namespace: &str) -> bool {
        self.shard.as_ref().is_none_or(|s| s.owns(namespace))
    }

    /// A context for unit tests: `client` (a [`crate::fake_api`] client) for the API, empty
    /// caches (a test may replace them), a client manager reading stores and TLS Secrets through
    /// `client` that connects to no provider until a call is made, and default settings.
    #[cfg(test)]
    pub fn for_tests(client: Client) -> Self {
        use keyward_provider_client::{KubeLookup, ManagerConfig, TonicConnector};
        let metrics = Arc::new(Metrics::default());
        let lookup = Arc::new(KubeLookup::new(client.clone()));
        let manager = ClientManager::new(
            lookup,
            Box::new(TonicConnector::default()),
            ManagerConfig::default(),
            metrics.client.clone(),
        );
        let caches = Caches {
            external_secrets: crate::fake_api::store([]),
            push_secrets: crate::fake_api::store([]),
            managed_secrets: crate::fake_api::store([]),
        };
        let reporter = Reporter { controller: "keyward-test".into(), instance: None };
        Context::new(client, caches, Arc::new(manager), metrics, reporter, Settings::default())
    }

    /// Whether `action` is the retry [`Context::failure_delay`] gives after a first failure:
    /// between half the backoff base and the base, in whole milliseconds.
    #[cfg(test)]
    pub fn is_first_retry(&self, action: &kube::runtime::controller::Action) -> bool {
        let base = self.settings.error_backoff_base.as_millis() as u64;
        (base / 2..=base).any(|ms| *action == kube::runtime::controller::Action::requeue(Duration::from_millis(ms)))
    }

    fn objects(&self) -> MutexGuard<'_, HashMap<ObjectKey, PerObject>> {
        // Updates are single statements; a poisoned lock still holds a consistent map.
        self.objects.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records a failure of `key` and returns how long to wait before retrying: doubling from
    /// the base up to the maximum, with jitter so failing objects spread out.
    pub fn failure_delay(&self, key: &ObjectKey) -> Duration {
        let n = {
            let mut objects = self.objects();
            let state = objects.entry(key.clone()).or_default();
            state.failures = state.failures.saturating_add(1);
            state.failures
        };
        let ceiling = self
            .settings
            .error_backoff_base
            .saturating_mul(2u32.saturating_pow((n - 1).min(16)))
            .min(self.settings.error_backoff_max);
        let half = ceiling / 2;
        half + Duration::from_millis(rand::rng().random_range(0..=half.as_millis().max(1) as u64))
    }

    /// Forgets the failures of `key` after a success.
    pub fn clear_failures(&self, key: &ObjectKey) {
        self.manager.recovery().forget(key);
        let mut objects = self.objects();
        if let Some(state) = objects.get_mut(key) {
            state.failures = 0;
            if state.last_refresh.is_none() && state.spec.is_none() {
                objects.remove(key);
            }
        }
    }

    /// Records `spec`, the hash of what `key`'s object asks for ([`crate::predicate::spec_change`]),
    /// and says whether it differs from the one recorded before (or none was): the change filter
    /// of a controller whose own status writes come back through the watch.
    pub fn spec_changed(&self, key: ObjectKey, spec: u64) -> bool {
        self.objects().entry(key).or_default().spec.replace(spec) != Some(spec)
    }

    /// Remembers a successful refresh of the object version `synced_hash`. Status records it
    /// too when something changed, but the watch cache can lag that write (a reconcile the
    /// target Secret's own event starts may still see the old status), and a refresh that found
    /// nothing to write writes no status at all.
    pub fn refreshed(&self, key: &ObjectKey, at: Instant, synced_hash: &str) {
        self.objects().entry(key.clone()).or_default().last_refresh = Some(LastRefresh::new(at, synced_hash));
    }

    /// The last successful refresh of `key` this process made, if it made one.
    pub fn last_refresh(&self, key: &ObjectKey) -> Option<LastRefresh> {
        self.objects().get(key).and_then(|s| s.last_refresh)
    }

    /// Drops everything kept about an object that is gone, its metric series included.
    pub fn forget(&self, key: &ObjectKey) {
        self.objects().remove(key);
        self.manager.recovery().forget(key);
        self.metrics.controllers.forget(&key.kind.to_ascii_lowercase(), key.namespace(), key.name());
        match key.kind {
            "ExternalSecret" => self.metrics.external_secrets.forget(key.namespace(), key.name()),
            "PushSecret" => self.metrics.push_secrets.forget(key.namespace(), key.name()),
            "ClusterExternalSecret" => self.metrics.cluster_external_secrets.forget("", key.name()),
            "ClusterPushSecret" => self.metrics.cluster_push_secrets.forget("", key.name()),
            _ => {}
        }
    }

    /// Forgets `key` again when its object has left `store`. A deletion seen while a reconcile
    /// or its error policy ran has already dropped the object's state and metric series; what
    /// they recorded after that would otherwise live for the life of the process.
    pub fn forget_if_gone<K>(&self, key: &ObjectKey, store: &Store<K>)
    where
        K: kube::Resource<DynamicType = ()> + Clone + 'static,
    {
        let object = kube::runtime::reflector::ObjectRef::<K>::new(key.name()).within(key.namespace());
        if store.get(&object).is_none() {
            self.forget(key);
        }
    }

    /// Number of objects with remembered state.
    pub fn tracked(&self) -> usize {
        self.objects().len()
    }

    /// Publishes an event (`events.k8s.io/v1`) through the recorder; failures are logged, never
    /// fatal. Callers publish on a change, not on every reconcile; repeats within the recorder's
    /// window are counted on one Event.
    pub async fn event(&self, regarding: &ObjectReference, warning: bool, reason: &str, action: &str, note: String) {
        // Event notes are limited to 1 kB.
        let note = crate::conditions::truncate(note, 1000);
        let event = Note { warning, reason, action, note: &note };
        if let Err(e) = self.recorder.publish(event, regarding).await {
            tracing::warn!(error = %e, reason, "publishing event failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_change_filter_is_kept_with_the_object_and_forgotten_with_it() {
        let (client, _) = crate::fake_api::client(|_, _| (404, serde_json::json!({})));
        let ctx = Context::for_tests(client);
        let key = || ObjectKey::external_secret("ns", "a");
        assert!(ctx.spec_changed(key(), 1), "first seen");
        assert!(!ctx.spec_changed(key(), 1), "its own status write comes back");
        ctx.failure_delay(&key());
        ctx.clear_failures(&key());
        assert!(!ctx.spec_changed(key(), 1), "a cleared failure keeps the filter");
        assert!(ctx.spec_changed(key(), 2));
        assert_eq!(ctx.tracked(), 1);
        ctx.forget(&key());
        assert_eq!(ctx.tracked(), 0);
        assert!(ctx.spec_changed(key(), 2), "seen anew after it was gone");
    }

    #[test]
    fn a_remembered_refresh_knows_which_version_it_synced() {
        let r = LastRefresh::new(Instant::now(), "3-0123456789abcdef");
        assert!(r.synced("3-0123456789abcdef"));
        assert!(!r.synced("3-0123456789abcdee"), "a changed annotation is another version");
        assert!(!r.synced("4-0123456789abcdef"));
    }
}
