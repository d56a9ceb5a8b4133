//! The client manager's metrics. Names follow the External Secrets Operator where the meaning is
//! the same, so existing dashboards keep working; the reconciler registers them with its own.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

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

/// A counter fed with a running total that starts again from zero when its source is built
/// again (the connection pool of a new leadership term): it adds what the total grew by.
#[derive(Debug, Clone, Default)]
pub struct TotalCounter {
    counter: Counter,
    last: Arc<AtomicU64>,
}

impl TotalCounter {
    /// Brings the counter up to `total`.
    pub fn set(&self, total: u64) {
        let last = self.last.swap(total, Ordering::Relaxed);
        self.counter.inc_by(if total >= last { total - last } else { total });
    }
}

/// Every metric of the client manager.
#[derive(Debug, Default)]
pub struct ClientMetrics {
    /// `clientmanager_cache_hits_total`.
    pub cache_hits: Family<StoreLabels, Counter>,
    /// `clientmanager_cache_misses_total`.
    pub cache_misses: Family<StoreLabels, Counter>,
    /// `grpc_client_requests_total`.
    pub grpc_requests: Family<GrpcLabels, Counter>,
    /// `grpc_client_pool_connections`.
    pub pool_open: Gauge,
    /// `grpc_client_pool_connections_created_total`.
    pub pool_created: TotalCounter,
    /// `grpc_client_pool_evictions_total`.
    pub pool_evicted: TotalCounter,
    /// `clientmanager_cached_clients`.
    pub cached_clients: Gauge,
    /// `clientmanager_provider_recoveries_total`: breakers that closed after being open.
    pub provider_recoveries: Counter,
    /// `clientmanager_recovery_waiting`: objects waiting for their provider to come back.
    pub recovery_waiting: Gauge,
    /// `clientmanager_recovery_requeues_total`: objects requeued because their provider came back.
    pub recovery_requeues: Counter,
}

impl ClientMetrics {
    /// Registers every metric in `registry`.
    pub fn register(&self, registry: &mut Registry) {
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
            "grpc_client_pool_connections_created",
            "Provider connections created",
            self.pool_created.counter.clone(),
        );
        registry.register(
            "grpc_client_pool_evictions",
            "Provider connections evicted (idle, expired or closed)",
            self.pool_evicted.counter.clone(),
        );
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
}
