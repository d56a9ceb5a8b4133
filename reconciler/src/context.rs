//! What every reconcile shares: the API client, the client manager, metrics, the event
//! recorder, settings, and per-object failure counts for error backoff.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder};
use rand::Rng;

use crate::clientmanager::ClientManager;
use crate::metrics::Metrics;

/// Controller settings.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// How often Providers and ClusterProviders are checked again.
    pub provider_check_interval: Duration,
    /// First retry delay after a failed sync.
    pub error_backoff_base: Duration,
    /// Longest retry delay after repeated failures.
    pub error_backoff_max: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            provider_check_interval: Duration::from_secs(60),
            error_backoff_base: Duration::from_secs(2),
            error_backoff_max: Duration::from_secs(300),
        }
    }
}

/// Shared by every reconcile.
pub struct Context {
    /// API client.
    pub client: Client,
    /// Provider clients.
    pub manager: Arc<ClientManager>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Kubernetes events.
    pub recorder: Recorder,
    /// Settings.
    pub settings: Settings,
    failures: Mutex<HashMap<String, u32>>,
}

impl Context {
    /// A context.
    pub fn new(
        client: Client,
        manager: Arc<ClientManager>,
        metrics: Arc<Metrics>,
        recorder: Recorder,
        settings: Settings,
    ) -> Self {
        Context { client, manager, metrics, recorder, settings, failures: Mutex::new(HashMap::new()) }
    }

    /// Records a failure of `key` and returns how long to wait before retrying: doubling from
    /// the base up to the maximum, with jitter so failing objects spread out.
    pub fn failure_delay(&self, key: &str) -> Duration {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        let n = failures.entry(key.to_string()).or_insert(0);
        *n = n.saturating_add(1);
        let ceiling = self
            .settings
            .error_backoff_base
            .saturating_mul(2u32.saturating_pow((*n - 1).min(16)))
            .min(self.settings.error_backoff_max);
        let half = ceiling / 2;
        half + Duration::from_millis(rand::rng().random_range(0..=half.as_millis().max(1) as u64))
    }

    /// Forgets the failures of `key` after a success.
    pub fn clear_failures(&self, key: &str) {
        self.failures.lock().unwrap_or_else(|e| e.into_inner()).remove(key);
    }

    /// Publishes an event; failures are logged, never fatal.
    pub async fn event(&self, regarding: &ObjectReference, warning: bool, reason: &str, action: &str, note: String) {
        let ev = Event {
            type_: if warning { EventType::Warning } else { EventType::Normal },
            reason: reason.to_string(),
            // Event notes are limited to 1 kB.
            note: Some(truncate(note, 1000)),
            action: action.to_string(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&ev, regarding).await {
            tracing::warn!(error = %e, reason, "publishing event failed");
        }
    }
}

fn truncate(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut cut = max;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
    }
    s
}
