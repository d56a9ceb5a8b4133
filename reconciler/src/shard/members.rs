//! The members loop: watches the group's shard Leases and publishes this replica's
//! [`Assignment`] whenever it changes, looking again on every Lease event and a few times per
//! renew period (an expiry is no event).

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use keyward_process::lease::LeaseLock;

use super::{Assignment, OwnRenewal, SHARD_LABEL, Settling, Shard, live_members};

/// The timing of a group, from its Lease duration.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// How long a shard Lease lives unrenewed.
    pub duration: Duration,
    /// How often it is renewed (the Lease lock's retry).
    pub renew: Duration,
}

impl Timing {
    /// A replica whose watch has not shown its own renewal this long after the API server
    /// acknowledged it owns nothing: two renewals.
    pub fn fresh(&self) -> Duration {
        self.renew * 2
    }

    /// How long a view holds before gained namespaces are worked: longer than a stale view may
    /// last (so the previous owner has stopped) plus one renewal.
    pub fn settle(&self) -> Duration {
        self.renew * 3
    }
}

/// Publishes this replica's share on `tx` until `stop`; then it owns nothing.
pub async fn run(
    lock: &LeaseLock,
    api: Api<Lease>,
    group: &str,
    me: &str,
    timing: Timing,
    tx: watch::Sender<Assignment>,
    stop: CancellationToken,
) {
    let (store, writer) = reflector::store();
    let config = watcher::Config::default().labels(&format!("{SHARD_LABEL}={group}"));
    let events = watcher(api, config).default_backoff().reflect(writer);
    let mut events = std::pin::pin!(events);
    let mut settling = Settling::new(me, timing.settle(), tokio::time::Instant::now());
    let mut tick = tokio::time::interval((timing.renew / 4).max(Duration::from_millis(50)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => break,
            event = events.next() => match event {
                Some(Err(e)) => tracing::warn!(error = %e, "watching the shard Leases failed; retrying"),
                Some(Ok(_)) => {}
                None => break,
            },
            _ = tick.tick() => {}
        }
        // Before the first list the store is empty, without this replica's own Lease: no members.
        let own = lock
            .last_renewal()
            .map(|r| OwnRenewal { written: r.renew_time, acknowledged_ago: r.acknowledged.elapsed() });
        let members = live_members(&store.state(), me, Timestamp::now(), own, timing.fresh());
        let next = settling.observe(members, tokio::time::Instant::now());
        tx.send_if_modified(|current| {
            if *current == next {
                return false;
            }
            let members = next.members().join(",");
            if current.members() == next.members() {
                tracing::info!(%members, "shard view settled: gained namespaces are worked now");
            } else {
                tracing::info!(%members, "shard members changed");
            }
            *current = next;
            true
        });
    }
    tx.send_replace(Assignment::default());
}

/// Reconcile requests for the objects of `store` in the namespaces `shard` gains, whenever it
/// gains some (nothing without a shard: an unsharded replica works everything from the start).
pub fn gained<S>(shard: Option<&Shard>, store: Store<S>) -> futures::stream::BoxStream<'static, ObjectRef<S>>
where
    S: kube::runtime::reflector::Lookup<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    let Some(shard) = shard else { return futures::stream::pending().boxed() };
    let rx = shard.changes();
    let previous = rx.borrow().clone();
    futures::stream::unfold((rx, previous, store), |(mut rx, previous, store)| async move {
        rx.changed().await.ok()?;
        let now = rx.borrow_and_update().clone();
        let mut verdicts = std::collections::HashMap::<String, bool>::new();
        let refs: Vec<ObjectRef<S>> = store
            .state()
            .iter()
            .filter(|obj| {
                let ns = obj.namespace().unwrap_or_default().into_owned();
                *verdicts.entry(ns).or_insert_with_key(|ns| now.owns(ns) && !previous.owns(ns))
            })
            .map(|obj| crate::caches::key(obj.as_ref()))
            .collect();
        if !refs.is_empty() {
            tracing::info!(objects = refs.len(), "reconciling the objects of gained namespaces");
        }
        Some((futures::stream::iter(refs), (rx, now, store)))
    })
    .flatten()
    .boxed()
}
