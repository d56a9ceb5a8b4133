//! The one Lease loop (feature `lease`): leadership terms, each ended by a signal or by the loss
//! of the Lease, the Lease released only once the term's work has stopped, so two leaders never
//! act at once.

use std::future::Future;

use tokio_util::sync::CancellationToken;

use super::{Runtime, drained};
use crate::lease::LeaseLock;

impl Runtime {
    /// Runs `term` once per leadership term until shutdown. With a `lease`, each term starts when
    /// this process holds it and its token is cancelled at shutdown or when the Lease is lost
    /// (then the process waits to lead again); without one, `term` runs once, as a sole leader,
    /// until shutdown. A term has the drain bound to return once its token is cancelled.
    pub async fn run_leading<F, Fut>(self, lease: Option<LeaseLock>, term: F)
    where
        F: FnMut(CancellationToken) -> Fut,
        Fut: Future<Output = ()>,
    {
        self.leading(lease, term).await;
        self.stop_admin().await;
    }

    /// The Lease loop of [`Runtime::run_leading`] without stopping the admin server when it
    /// ends, so a process can run several at once (the reconciler's shard membership beside its
    /// leadership) and then call [`Runtime::stop`].
    pub async fn leading<F, Fut>(&self, lease: Option<LeaseLock>, mut term: F)
    where
        F: FnMut(CancellationToken) -> Fut,
        Fut: Future<Output = ()>,
    {
        loop {
            if let Some(lock) = &lease {
                tracing::info!(identity = lock.identity(), lease = lock.name(), "waiting for leadership");
                if !lock.acquire(self.shutdown.cancelled()).await {
                    break;
                }
                tracing::info!(identity = lock.identity(), "leading");
            }
            let stop = self.shutdown.child_token();
            let release = CancellationToken::new();
            let holder = lease.clone().map(|lock| {
                let (stop, release) = (stop.clone(), release.clone());
                tokio::spawn(async move {
                    lock.hold(release.cancelled()).await;
                    // Lost (or released): the term stops, if it has not already.
                    stop.cancel();
                })
            });
            drained(term(stop.clone()), &stop, self.drain).await;
            stop.cancel();
            release.cancel();
            if let Some(holder) = holder {
                let _ = holder.await;
            }
            if lease.is_none() || self.shutdown.is_cancelled() {
                break;
            }
            tracing::warn!(
                lease = lease.as_ref().map(LeaseLock::name),
                "leadership lost; work stopped, waiting to lead again"
            );
        }
    }

    /// Stops the admin server once the work of [`Runtime::leading`] has ended.
    pub async fn stop(self) {
        self.stop_admin().await;
    }
}
