//! Recovery that follows the provider, not the clock.
//!
//! An ExternalSecret or PushSecret whose sync failed because its provider was unreachable waits
//! out its own exponential backoff; after a long outage those backoffs reach minutes. Instead, such objects
//! are registered here as waiting on that provider (its breaker identity), and when the
//! provider answers again — a call through its breaker closes it, the manager's own probe
//! included — every object waiting on it is requeued at once, at a bounded rate so the API
//! server sees a paced stream, not a herd. While objects wait and the breaker's cooldown is
//! over, [`Recovery::run`] makes the probe call itself, so a return is noticed within one
//! cooldown whatever the objects' backoff is. Each controller subscribes to the objects of its
//! own kind; one index and one pace serve them all.
//!
//! State is bounded by the objects that exist: an object waits on one provider at a time, is
//! dropped on its next success or non-provider failure, and when the caches say it is gone.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use futures::channel::mpsc;
use kube::Resource;
use kube::runtime::reflector::ObjectRef;

use super::client::ProviderClient;
use crate::ObjectKey;
use crate::metrics::ClientMetrics;

/// The breaker identity of a provider (kind/name/auth namespace): who "comes back".
pub type ProviderId = Arc<str>;

/// A failed call's provider, as seen when the call failed.
#[derive(Clone)]
pub struct Waitable {
    pub(crate) client: ProviderClient,
    /// The breaker's recovery count when the call failed.
    pub(crate) recoveries: u64,
}

impl std::fmt::Debug for Waitable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Waitable").field("provider", &self.client.core.provider).finish()
    }
}

struct Waiting {
    /// A client of the provider, for the probe call.
    client: ProviderClient,
    objects: HashSet<ObjectKey>,
}

#[derive(Default)]
struct Inner {
    by_provider: HashMap<ProviderId, Waiting>,
    by_object: HashMap<ObjectKey, ProviderId>,
    /// Released objects not yet sent, in release order.
    released: VecDeque<ObjectKey>,
    /// One subscriber per kind (`ObjectKey::kind`).
    sinks: HashMap<String, mpsc::UnboundedSender<ObjectKey>>,
}

/// The index of objects waiting on a provider, and the paced requeue.
pub struct Recovery {
    inner: Mutex<Inner>,
    /// Requeues per second, at most.
    rate: u32,
    metrics: Arc<ClientMetrics>,
}

impl Recovery {
    /// An empty index releasing at most `rate` objects per second.
    pub fn new(rate: u32, metrics: Arc<ClientMetrics>) -> Self {
        Recovery { inner: Mutex::default(), rate: rate.max(1), metrics }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Every update is a few map operations; a poisoned lock still holds usable maps.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The stream of released objects of kind `kind`. One subscriber per kind: a second call
    /// for the same kind replaces the first.
    pub fn subscribe(&self, kind: &str) -> mpsc::UnboundedReceiver<ObjectKey> {
        let (tx, rx) = mpsc::unbounded();
        self.lock().sinks.insert(kind.to_string(), tx);
        rx
    }

    /// The released objects of the namespaced kind `K`, for its controller's `reconcile_on`.
    pub fn requeues<K>(&self) -> impl futures::Stream<Item = ObjectRef<K>> + Send + 'static
    where
        K: Resource<DynamicType = ()> + 'static,
    {
        let released = self.subscribe(&K::kind(&()));
        futures::StreamExt::map(released, |key| ObjectRef::new(key.name()).within(key.namespace()))
    }

    /// `object` failed because the provider of `on` did not answer: it waits for the provider.
    /// If the provider came back while the call was failing, it is released right away.
    pub fn wait(&self, object: ObjectKey, on: Waitable) {
        let provider = on.client.core.provider.clone();
        let came_back = on.client.core.breaker.recoveries() != on.recoveries;
        let mut inner = self.lock();
        remove(&mut inner, &object);
        if came_back {
            inner.released.push_back(object);
        } else {
            inner.by_object.insert(object.clone(), provider.clone());
            let waiting = inner
                .by_provider
                .entry(provider)
                .or_insert_with(|| Waiting { client: on.client.clone(), objects: HashSet::new() });
            waiting.client = on.client;
            waiting.objects.insert(object);
        }
        self.metrics.recovery_waiting.set(inner.by_object.len() as i64);
    }

    /// `object` no longer waits: it synced, failed for another reason, or is gone.
    pub fn forget(&self, object: &ObjectKey) {
        let mut inner = self.lock();
        if remove(&mut inner, object) {
            self.metrics.recovery_waiting.set(inner.by_object.len() as i64);
        }
    }

    /// The provider `provider` answered after its breaker was open: release its waiters.
    pub fn provider_answered(&self, provider: &ProviderId) {
        self.metrics.provider_recoveries.inc();
        let mut inner = self.lock();
        let Some(waiting) = inner.by_provider.remove(provider) else { return };
        tracing::info!(provider = %provider, waiting = waiting.objects.len(), "provider answers again; requeueing what waited on it");
        for object in waiting.objects {
            inner.by_object.remove(&object);
            inner.released.push_back(object);
        }
        self.metrics.recovery_waiting.set(inner.by_object.len() as i64);
    }

    /// Objects waiting on some provider.
    pub fn waiting(&self) -> usize {
        self.lock().by_object.len()
    }

    /// Providers with waiters whose breaker wants a probe now.
    fn probes_due(&self, now: Instant) -> Vec<ProviderClient> {
        self.lock()
            .by_provider
            .values()
            .filter(|w| w.client.core.breaker.probe_due(now))
            .map(|w| w.client.clone())
            .collect()
    }

    /// Sends up to `n` released objects, each to the subscriber of its kind.
    pub(super) fn send_released(&self, n: usize) {
        let mut inner = self.lock();
        let n = n.min(inner.released.len());
        let batch: Vec<ObjectKey> = inner.released.drain(..n).collect();
        for object in batch {
            // A kind nobody subscribed to (or a stopped controller) has no one to requeue.
            if let Some(sink) = inner.sinks.get(object.kind)
                && sink.unbounded_send(object).is_ok()
            {
                self.metrics.recovery_requeues.inc();
            }
        }
    }

    /// Probes providers that have waiters and a due breaker, and paces released objects out,
    /// until `stop` resolves.
    pub async fn run(self: Arc<Self>, stop: impl std::future::Future<Output = ()>) {
        const TICK: Duration = Duration::from_millis(100);
        let per_tick = (self.rate as usize).div_ceil(10);
        let mut stop = std::pin::pin!(stop);
        let mut ticks = tokio::time::interval(TICK);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = &mut stop => return,
                _ = ticks.tick() => {}
            }
            for client in self.probes_due(Instant::now()) {
                // The probe goes through the breaker like any call (it turns half-open, so one
                // probe at a time); an answer closes it and releases the waiters.
                tokio::spawn(async move {
                    if let Err(e) = client.capabilities().await {
                        tracing::debug!(provider = %client.core.provider, error = %e, "provider probe failed");
                    }
                });
            }
            self.send_released(per_tick);
        }
    }
}

/// Removes `object` from the index; returns whether it was there.
fn remove(inner: &mut Inner, object: &ObjectKey) -> bool {
    let Some(provider) = inner.by_object.remove(object) else { return false };
    if let Some(waiting) = inner.by_provider.get_mut(&provider) {
        waiting.objects.remove(object);
        if waiting.objects.is_empty() {
            inner.by_provider.remove(&provider);
        }
    }
    true
}
