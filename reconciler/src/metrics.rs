//! Prometheus metrics. Names follow the External Secrets Operator where the meaning is the same,
//! so existing dashboards keep working.

use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use keyward_provider_client::ClientMetrics;

use crate::controller_metrics::ControllerFamilies;
use crate::object_metrics::{Names, ObjectSeries};
use crate::shard::metrics::ShardMetrics;

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

/// Every metric of the reconciler.
pub struct Metrics {
    /// `externalsecret_sync_calls_total`, `_sync_calls_error`, `_status_condition` and
    /// `_reconcile_duration`, per ExternalSecret.
    pub external_secrets: Arc<ObjectSeries>,
    /// The same four, `pushsecret_*`, per PushSecret.
    pub push_secrets: Arc<ObjectSeries>,
    /// `clusterexternalsecret_status_condition` and `_reconcile_duration`, per
    /// ClusterExternalSecret (`namespace=""`, as upstream labels cluster-scoped objects).
    pub cluster_external_secrets: Arc<ObjectSeries>,
    /// The same two, `clusterpushsecret_*`, per ClusterPushSecret (`namespace=""`).
    pub cluster_push_secrets: Arc<ObjectSeries>,
    /// `secretstore_status_condition` and `_reconcile_duration` (the status check), per SecretStore.
    pub secret_stores: Arc<ObjectSeries>,
    /// The same two, `clustersecretstore_*`, per ClusterSecretStore (`namespace=""`).
    pub cluster_secret_stores: Arc<ObjectSeries>,
    /// controller-runtime's per-controller and work-queue metrics (`controller_runtime_*`,
    /// `workqueue_*`).
    pub controllers: ControllerFamilies,
    /// `provider_status_condition`.
    pub provider_condition: Family<ProviderConditionLabels, Gauge>,
    /// The client manager's: `clientmanager_*` and `grpc_client_*`.
    pub client: Arc<ClientMetrics>,
    /// `shard_members` and `shard_owned_namespaces`, with `--shard`.
    pub shard: Arc<ShardMetrics>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            external_secrets: Arc::new(ObjectSeries::new(Names {
                prefix: "externalsecret",
                calls: Some("Syncs of ExternalSecrets"),
                errors: Some("Failed syncs of ExternalSecrets"),
                condition: "Status conditions of ExternalSecrets",
                duration: "The duration time to reconcile the External Secret (nanoseconds, as upstream)",
            })),
            push_secrets: Arc::new(ObjectSeries::new(Names {
                prefix: "pushsecret",
                calls: Some("Syncs of PushSecrets"),
                errors: Some("Failed syncs of PushSecrets"),
                condition: "The status condition of a specific Push Secret",
                duration: "The duration time to reconcile the Push Secret (nanoseconds, as upstream)",
            })),
            // Upstream has only the condition and the duration for these kinds.
            cluster_external_secrets: Arc::new(ObjectSeries::new(Names {
                prefix: "clusterexternalsecret",
                calls: None,
                errors: None,
                condition: "The status condition of a specific Cluster External Secret",
                duration: "The duration time to reconcile the Cluster External Secret (nanoseconds, as upstream)",
            })),
            cluster_push_secrets: Arc::new(ObjectSeries::new(Names {
                prefix: "clusterpushsecret",
                calls: None,
                errors: None,
                condition: "The status condition of a specific Cluster Push Secret",
                duration: "The duration time to reconcile the Cluster Push Secret (nanoseconds, as upstream)",
            })),
            secret_stores: Arc::new(ObjectSeries::new(Names {
                prefix: "secretstore",
                calls: None,
                errors: None,
                condition: "The status condition of a specific Secret Store",
                duration: "The duration time to reconcile the Secret Store (nanoseconds, as upstream)",
            })),
            cluster_secret_stores: Arc::new(ObjectSeries::new(Names {
                prefix: "clustersecretstore",
                calls: None,
                errors: None,
                condition: "The status condition of a specific Cluster Secret Store",
                duration: "The duration time to reconcile the Cluster Secret Store (nanoseconds, as upstream)",
            })),
            controllers: ControllerFamilies::default(),
            provider_condition: Family::default(),
            client: Arc::default(),
            shard: Arc::default(),
        }
    }
}

impl Metrics {
    /// Registers every metric in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register_collector(Box::new(self.external_secrets.clone()));
        registry.register_collector(Box::new(self.push_secrets.clone()));
        registry.register_collector(Box::new(self.cluster_external_secrets.clone()));
        registry.register_collector(Box::new(self.cluster_push_secrets.clone()));
        registry.register_collector(Box::new(self.secret_stores.clone()));
        registry.register_collector(Box::new(self.cluster_secret_stores.clone()));
        self.controllers.register(registry);
        registry.register(
            "provider_status_condition",
            "Status conditions of Providers and ClusterProviders",
            self.provider_condition.clone(),
        );
        self.client.register(registry);
        registry.register_collector(Box::new(self.shard.clone()));
    }

    /// The upstream per-object series of a store kind (SecretStore, ClusterSecretStore), if it
    /// has them.
    pub fn store_series(&self, kind: &str) -> Option<&ObjectSeries> {
        match kind {
            "SecretStore" => Some(&self.secret_stores),
            "ClusterSecretStore" => Some(&self.cluster_secret_stores),
            _ => None,
        }
    }

    /// Drops the series of a deleted store of any kind, and its place in its controller's queue.
    pub fn forget_provider(&self, kind: &str, name: &str, namespace: &str) {
        self.controllers.forget(&kind.to_ascii_lowercase(), namespace, name);
        if let Some(series) = self.store_series(kind) {
            series.forget(namespace, name);
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use keyward_process::health::encode;
    use keyward_provider_client::{GrpcLabels, StoreLabels};

    #[test]
    fn exported_names_match_the_external_secrets_names() {
        let m = Metrics::default();
        let mut r = Registry::default();
        m.register(&mut r);
        m.external_secrets.sync_started("n", "a");
        m.external_secrets.sync_failed("n", "a");
        m.external_secrets.set_ready("n", "a", true);
        m.external_secrets.set_duration("n", "a", std::time::Duration::from_nanos(500));
        m.set_provider_condition("Provider", "p", "n", false);
        m.client.cache_hits.get_or_create(&StoreLabels { kind: "Provider".into(), name: "p".into() }).inc();
        m.client.grpc_requests.get_or_create(&GrpcLabels { method: "GetSecret".into(), code: "OK".into() }).inc();
        m.push_secrets.sync_started("n", "p");
        m.push_secrets.set_ready("n", "p", false);
        m.push_secrets.set_duration("n", "p", std::time::Duration::from_millis(2));
        m.cluster_external_secrets.set_ready("", "c", true);
        m.cluster_external_secrets.set_duration("", "c", std::time::Duration::from_nanos(7));
        m.cluster_push_secrets.set_ready("", "cp", false);
        m.cluster_push_secrets.set_duration("", "cp", std::time::Duration::from_nanos(8));
        let store = m.store_series("SecretStore").expect("SecretStore series");
        store.set_ready("n", "s", false);
        store.set_duration("n", "s", std::time::Duration::from_nanos(9));
        m.store_series("ClusterSecretStore").expect("ClusterSecretStore series").set_ready("", "cs", true);
        assert!(m.store_series("Provider").is_none(), "Keyward's own kinds use provider_status_condition");
        m.controllers.controller("externalsecret", 4);
        m.client.pool_created.set(3);
        m.client.pool_created.set(5);
        m.client.pool_created.set(1);
        let text = encode(&r).unwrap();
        for line in [
            "externalsecret_sync_calls_total{name=\"a\",namespace=\"n\"} 1",
            "externalsecret_sync_calls_error{name=\"a\",namespace=\"n\"} 1",
            "externalsecret_status_condition{name=\"a\",namespace=\"n\",condition=\"Ready\",status=\"True\"} 1",
            "externalsecret_status_condition{name=\"a\",namespace=\"n\",condition=\"Ready\",status=\"False\"} 0",
            "externalsecret_reconcile_duration{name=\"a\",namespace=\"n\"} 500.0",
            "provider_status_condition{kind=\"Provider\",name=\"p\",namespace=\"n\",condition=\"Ready\",status=\"False\"} 1",
            "clientmanager_cache_hits_total{kind=\"Provider\",name=\"p\"} 1",
            "grpc_client_requests_total{method=\"GetSecret\",code=\"OK\"} 1",
            "grpc_client_pool_connections 0",
            "pushsecret_status_condition{name=\"p\",namespace=\"n\",condition=\"Ready\",status=\"False\"} 1",
            "pushsecret_status_condition{name=\"p\",namespace=\"n\",condition=\"Ready\",status=\"True\"} 0",
            "pushsecret_reconcile_duration{name=\"p\",namespace=\"n\"} 2000000.0",
            "pushsecret_sync_calls_total{name=\"p\",namespace=\"n\"} 1",
            // A controller's series exist from its start, errors at 0 (as controller-runtime's).
            "controller_runtime_reconcile_total{controller=\"externalsecret\",result=\"error\"} 0",
            "controller_runtime_reconcile_errors_total{controller=\"externalsecret\"} 0",
            "controller_runtime_max_concurrent_reconciles{controller=\"externalsecret\"} 4",
            "controller_runtime_active_workers{controller=\"externalsecret\"} 0",
            "workqueue_depth{name=\"externalsecret\",controller=\"externalsecret\"} 0",
            // A pool built again restarts its total: the counter only grows.
            "grpc_client_pool_connections_created_total 6",
            "# TYPE externalsecret_sync_calls_error counter",
            "clusterexternalsecret_status_condition{name=\"c\",namespace=\"\",condition=\"Ready\",status=\"True\"} 1",
            "clusterexternalsecret_reconcile_duration{name=\"c\",namespace=\"\"} 7.0",
            "clusterpushsecret_status_condition{name=\"cp\",namespace=\"\",condition=\"Ready\",status=\"False\"} 1",
            "clusterpushsecret_reconcile_duration{name=\"cp\",namespace=\"\"} 8.0",
            "secretstore_status_condition{name=\"s\",namespace=\"n\",condition=\"Ready\",status=\"False\"} 1",
            "secretstore_reconcile_duration{name=\"s\",namespace=\"n\"} 9.0",
            "clustersecretstore_status_condition{name=\"cs\",namespace=\"\",condition=\"Ready\",status=\"True\"} 1",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
        // Kinds without syncs write no sync counters, not even empty families' samples.
        assert!(!text.contains("clusterexternalsecret_sync_calls"), "{text}");
        m.forget_provider("SecretStore", "s", "n");
        assert!(!encode(&r).unwrap().contains("secretstore_status_condition{name=\"s\""));
    }
}
