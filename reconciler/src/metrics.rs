//! Prometheus metrics. Names follow the External Secrets Operator where the meaning is the same,
//! so existing dashboards keep working.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Labels of per-object metrics.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ObjectLabels {
    /// Object name.
    pub name: String,
    /// Object namespace.
    pub namespace: String,
}

/// Labels of condition gauges.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ConditionLabels {
    /// Object name.
    pub name: String,
    /// Object namespace (empty for cluster-scoped objects).
    pub namespace: String,
    /// Condition type.
    pub condition: String,
    /// `True` or `False`.
    pub status: String,
}

/// Labels of provider condition gauges.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProviderConditionLabels {
    /// Provider or ClusterProvider.
    pub kind: String,
    /// Object name.
    pub name: String,
    /// Object namespace (empty for ClusterProviders).
    pub namespace: String,
    /// Condition type.
    pub condition: String,
    /// `True` or `False`.
    pub status: String,
}

/// Labels of gRPC client calls.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GrpcLabels {
    /// RPC name, for example `GetSecret`.
    pub method: String,
    /// gRPC status code name, `OK` on success.
    pub code: String,
}

/// Labels of cache lookups.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StoreLabels {
    /// Provider or ClusterProvider.
    pub kind: String,
    /// Store name.
    pub name: String,
}

/// Every metric of the reconciler.
#[derive(Default)]
pub struct Metrics {
    /// `externalsecret_sync_calls_total`.
    pub sync_calls: Family<ObjectLabels, Counter>,
    /// `externalsecret_sync_calls_error`. Registered as a gauge that only goes up: the
    /// Prometheus client appends `_total` to counters, and dashboards expect this exact name.
    pub sync_errors: Family<ObjectLabels, Gauge<u64, AtomicU64>>,
    /// `externalsecret_status_condition`.
    pub es_condition: Family<ConditionLabels, Gauge>,
    /// `externalsecret_reconcile_duration`, seconds of the last reconcile.
    pub reconcile_duration: Family<ObjectLabels, Gauge<f64, AtomicU64>>,
    /// `provider_status_condition`.
    pub provider_condition: Family<ProviderConditionLabels, Gauge>,
    /// `clientmanager_cache_hits_total`.
    pub cache_hits: Family<StoreLabels, Counter>,
    /// `clientmanager_cache_misses_total`.
    pub cache_misses: Family<StoreLabels, Counter>,
    /// `grpc_client_requests_total`.
    pub grpc_requests: Family<GrpcLabels, Counter>,
    /// `grpc_client_pool_connections`.
    pub pool_open: Gauge,
    /// `grpc_client_pool_connections_created_total`.
    pub pool_created: Gauge<u64, AtomicU64>,
    /// `grpc_client_pool_evictions_total`.
    pub pool_evicted: Gauge<u64, AtomicU64>,
    /// `clientmanager_cached_clients`.
    pub cached_clients: Gauge,
    /// `pushsecret_sync_calls_total`.
    pub push_calls: Family<ObjectLabels, Counter>,
    /// `pushsecret_sync_calls_error`.
    pub push_errors: Family<ObjectLabels, Gauge<u64, AtomicU64>>,
    /// `clientmanager_provider_recoveries_total`: breakers that closed after being open.
    pub provider_recoveries: Counter,
    /// `clientmanager_recovery_waiting`: objects waiting for their provider to come back.
    pub recovery_waiting: Gauge,
    /// `clientmanager_recovery_requeues_total`: objects requeued because their provider came back.
    pub recovery_requeues: Counter,
}

impl Metrics {
    /// Registers every metric in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register("externalsecret_sync_calls", "Syncs of ExternalSecrets", self.sync_calls.clone());
        registry.register(
            "externalsecret_sync_calls_error",
            "Failed syncs of ExternalSecrets",
            self.sync_errors.clone(),
        );
        registry.register(
            "externalsecret_status_condition",
            "Status conditions of ExternalSecrets",
            self.es_condition.clone(),
        );
        registry.register(
            "externalsecret_reconcile_duration",
            "Seconds the last reconcile of an ExternalSecret took",
            self.reconcile_duration.clone(),
        );
        registry.register(
            "provider_status_condition",
            "Status conditions of Providers and ClusterProviders",
            self.provider_condition.clone(),
        );
        registry.register("clientmanager_cache_hits", "Provider client cache hits", self.cache_hits.clone());
        registry.register(
            "clientmanager_cache_misses",
            "Provider client cache misses (new or invalidated clients)",
            self.cache_misses.clone(),
        );
        registry.register("clientmanager_cached_clients", "Provider clients cached", self.cached_clients.clone());
        registry.register("grpc_client_requests", "gRPC calls to providers", self.grpc_requests.clone());
        registry.register("grpc_client_pool_connections", "Pooled provider connections", self.pool_open.clone());
        registry.register(
            "grpc_client_pool_connections_created_total",
            "Provider connections created",
            self.pool_created.clone(),
        );
        registry.register(
            "grpc_client_pool_evictions_total",
            "Provider connections evicted (idle, expired or closed)",
            self.pool_evicted.clone(),
        );
        registry.register("pushsecret_sync_calls", "Syncs of PushSecrets", self.push_calls.clone());
        registry.register("pushsecret_sync_calls_error", "Failed syncs of PushSecrets", self.push_errors.clone());
        registry.register(
            "clientmanager_provider_recoveries",
            "Provider circuit breakers that closed after being open (the provider answered again)",
            self.provider_recoveries.clone(),
        );
        registry.register(
            "clientmanager_recovery_waiting",
            "Objects whose sync failed on an unreachable provider, waiting for it to answer again",
            self.recovery_waiting.clone(),
        );
        registry.register(
            "clientmanager_recovery_requeues",
            "Objects requeued because the provider they waited on answered again",
            self.recovery_requeues.clone(),
        );
    }

    /// Sets a 0/1 gauge pair for a condition, so both `True` and `False` series exist.
    pub fn set_es_condition(&self, name: &str, namespace: &str, condition: &str, status: bool) {
        for (s, v) in [("True", status), ("False", !status)] {
            self.es_condition
                .get_or_create(&ConditionLabels {
                    name: name.into(),
                    namespace: namespace.into(),
                    condition: condition.into(),
                    status: s.into(),
                })
                .set(i64::from(v));
        }
    }

    /// Drops the series of a deleted ExternalSecret.
    pub fn forget_es(&self, name: &str, namespace: &str) {
        let obj = ObjectLabels { name: name.into(), namespace: namespace.into() };
        self.sync_calls.remove(&obj);
        self.sync_errors.remove(&obj);
        self.reconcile_duration.remove(&obj);
        for s in ["True", "False"] {
            self.es_condition.remove(&ConditionLabels {
                name: name.into(),
                namespace: namespace.into(),
                condition: "Ready".into(),
                status: s.into(),
            });
        }
    }

    /// Drops the series of a deleted PushSecret.
    pub fn forget_push(&self, name: &str, namespace: &str) {
        let obj = ObjectLabels { name: name.into(), namespace: namespace.into() };
        self.push_calls.remove(&obj);
        self.push_errors.remove(&obj);
    }

    /// Drops the series of a deleted Provider or ClusterProvider.
    pub fn forget_provider(&self, kind: &str, name: &str, namespace: &str) {
        for s in ["True", "False"] {
            self.provider_condition.remove(&ProviderConditionLabels {
                kind: kind.into(),
                name: name.into(),
                namespace: namespace.into(),
                condition: "Ready".into(),
                status: s.into(),
            });
        }
    }

    /// Sets the provider condition gauges.
    pub fn set_provider_condition(&self, kind: &str, name: &str, namespace: &str, ready: bool) {
        for (s, v) in [("True", ready), ("False", !ready)] {
            self.provider_condition
                .get_or_create(&ProviderConditionLabels {
                    kind: kind.into(),
                    name: name.into(),
                    namespace: namespace.into(),
                    condition: "Ready".into(),
                    status: s.into(),
                })
                .set(i64::from(v));
        }
    }
}

/// Encodes the registry in the Prometheus text format.
pub fn encode(registry: &Registry) -> Result<String, std::fmt::Error> {
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, registry)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exported_names_match_the_external_secrets_names() {
        let m = Metrics::default();
        let mut r = Registry::default();
        m.register(&mut r);
        m.sync_calls.get_or_create(&ObjectLabels { name: "a".into(), namespace: "n".into() }).inc();
        m.sync_errors.get_or_create(&ObjectLabels { name: "a".into(), namespace: "n".into() }).inc();
        m.set_es_condition("a", "n", "Ready", true);
        m.reconcile_duration.get_or_create(&ObjectLabels { name: "a".into(), namespace: "n".into() }).set(0.5);
        m.set_provider_condition("Provider", "p", "n", false);
        m.cache_hits.get_or_create(&StoreLabels { kind: "Provider".into(), name: "p".into() }).inc();
        m.grpc_requests.get_or_create(&GrpcLabels { method: "GetSecret".into(), code: "OK".into() }).inc();
        let text = encode(&r).unwrap();
        for line in [
            "externalsecret_sync_calls_total{name=\"a\",namespace=\"n\"} 1",
            "externalsecret_sync_calls_error{name=\"a\",namespace=\"n\"} 1",
            "externalsecret_status_condition{name=\"a\",namespace=\"n\",condition=\"Ready\",status=\"True\"} 1",
            "externalsecret_status_condition{name=\"a\",namespace=\"n\",condition=\"Ready\",status=\"False\"} 0",
            "externalsecret_reconcile_duration{name=\"a\",namespace=\"n\"} 0.5",
            "provider_status_condition{kind=\"Provider\",name=\"p\",namespace=\"n\",condition=\"Ready\",status=\"False\"} 1",
            "clientmanager_cache_hits_total{kind=\"Provider\",name=\"p\"} 1",
            "grpc_client_requests_total{method=\"GetSecret\",code=\"OK\"} 1",
            "grpc_client_pool_connections 0",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
    }
}
