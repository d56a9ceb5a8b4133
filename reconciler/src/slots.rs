//! Slots of a shared CPU worker, handed out fairly between namespaces: a job runs only while it
//! holds its namespace's slot (one job per namespace at a time, so a namespace that queues many
//! expensive jobs queues behind itself, never in front of another namespace) and one of a few
//! global slots (the CPU the worker may take at once). Template renders ([`crate::renders`]) and
//! generations ([`crate::generators`]) take their slots here.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Which slot was not free in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Busy {
    /// Another job of the same namespace is running.
    #[error("another job of this namespace is running")]
    Namespace,
    /// Every global slot is taken.
    #[error("every slot is busy")]
    Global,
}

/// What a running job holds; dropping it frees both slots.
#[derive(Debug)]
pub struct Permit {
    _namespace: OwnedSemaphorePermit,
    _global: OwnedSemaphorePermit,
}

/// The slots of one worker.
pub struct FairSlots {
    global: Arc<Semaphore>,
    namespaces: Mutex<HashMap<String, Arc<Semaphore>>>,
}

impl FairSlots {
    /// At most `global` jobs at once (at least one), one per namespace.
    pub fn new(global: usize) -> Self {
        FairSlots { global: Arc::new(Semaphore::new(global.max(1))), namespaces: Mutex::default() }
    }

    /// The slot of `namespace`; slots of namespaces that run nothing are dropped.
    fn namespace_slot(&self, namespace: &str) -> Arc<Semaphore> {
        let mut map = self.namespaces.lock().unwrap_or_else(PoisonError::into_inner);
        // Only this map and running jobs hold a slot: one held by the map alone is idle.
        map.retain(|_, s| Arc::strong_count(s) > 1);
        map.entry(namespace.to_string()).or_insert_with(|| Arc::new(Semaphore::new(1))).clone()
    }

    /// The namespace's slot, then a global one, each waited for at most `wait`.
    pub async fn acquire(&self, namespace: &str, wait: Duration) -> Result<Permit, Busy> {
        async fn take(slot: Arc<Semaphore>, wait: Duration, busy: Busy) -> Result<OwnedSemaphorePermit, Busy> {
            match tokio::time::timeout(wait, slot.acquire_owned()).await {
                Ok(Ok(permit)) => Ok(permit),
                Ok(Err(_)) | Err(_) => Err(busy),
            }
        }
        let namespace = take(self.namespace_slot(namespace), wait, Busy::Namespace).await?;
        let global = take(self.global.clone(), wait, Busy::Global).await?;
        Ok(Permit { _namespace: namespace, _global: global })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WAIT: Duration = Duration::from_millis(100);

    #[tokio::test]
    async fn one_job_per_namespace_and_a_global_limit() {
        let slots = FairSlots::new(2);
        let a = slots.acquire("a", WAIT).await.expect("a's first job");
        assert_eq!(slots.acquire("a", WAIT).await.unwrap_err(), Busy::Namespace, "a queues behind itself");
        let b = slots.acquire("b", WAIT).await.expect("b is not held up by a");
        assert_eq!(slots.acquire("c", WAIT).await.unwrap_err(), Busy::Global, "two slots in all");
        drop(a);
        let _c = slots.acquire("c", WAIT).await.expect("a's slot freed");
        let held: Vec<String> = slots.namespaces.lock().unwrap().keys().cloned().collect();
        assert!(held.len() == 2 && !held.contains(&"a".to_string()), "a's idle slot is dropped: {held:?}");
        drop(b);
        let _d = slots.acquire("d", WAIT).await.expect("b's slot freed");
    }
}
