//! The shard gauges, `shard_members` and `shard_owned_namespaces`: what this replica's view of
//! the group is when scraped. They are computed at scrape time from the published
//! [`Assignment`](super::Assignment) and the namespace cache, so a namespace created or deleted
//! needs no bookkeeping and a scrape costs one hash per namespace. An unsharded reconciler
//! writes neither; a sharded one outside a membership term reports 0 members and 0 namespaces.

use std::sync::Mutex;

use k8s_openapi::api::core::v1::Namespace;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::Store;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;

use super::Shard;

/// One membership term's view: its share and its namespace cache.
struct View {
    shard: Shard,
    namespaces: Store<PartialObjectMeta<Namespace>>,
}

/// The shard gauges of one process.
#[derive(Default)]
pub struct ShardMetrics {
    /// `None` while unsharded (nothing written); `Some(None)` between membership terms.
    view: Mutex<Option<Option<View>>>,
}

/// Ends a term's view when dropped: the gauges go back to 0.
pub struct Watching<'a>(&'a ShardMetrics);

impl Drop for Watching<'_> {
    fn drop(&mut self) {
        *self.0.lock() = Some(None);
    }
}

impl ShardMetrics {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Option<View>>> {
        self.view.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The reconciler is sharded: the gauges are written from now on (0 until a term starts).
    pub fn enable(&self) {
        self.lock().get_or_insert(None);
    }

    /// A membership term's share and namespace cache, reported until the guard is dropped.
    pub fn watch(&self, shard: Shard, namespaces: Store<PartialObjectMeta<Namespace>>) -> Watching<'_> {
        *self.lock() = Some(Some(View { shard, namespaces }));
        Watching(self)
    }

    /// The members this replica sees and the namespaces it works, if sharded.
    pub fn values(&self) -> Option<(usize, usize)> {
        let view = self.lock();
        let view = view.as_ref()?;
        Some(view.as_ref().map_or((0, 0), |v| {
            let assignment = v.shard.assignment();
            let namespaces = v.namespaces.state();
            let owned =
                namespaces.iter().filter(|ns| assignment.owns(ns.metadata.name.as_deref().unwrap_or(""))).count();
            (assignment.members().len(), owned)
        }))
    }
}

impl std::fmt::Debug for ShardMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardMetrics").field("values", &self.values()).finish()
    }
}

impl Collector for ShardMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some((members, owned)) = self.values() else { return Ok(()) };
        for (name, help, value) in [
            ("shard_members", "Live shard members this replica sees, itself included (--shard)", members),
            ("shard_owned_namespaces", "Namespaces whose objects this replica works (--shard)", owned),
        ] {
            let metric = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            ConstGauge::new(i64::try_from(value).unwrap_or(i64::MAX)).encode(metric)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use keyward_process::health::encode;
    use kube::core::ObjectMeta;
    use prometheus_client::registry::Registry;

    use super::super::{Settling, owner};
    use super::*;

    fn namespace(name: &str) -> PartialObjectMeta<Namespace> {
        PartialObjectMeta {
            metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
            ..Default::default()
        }
    }

    fn gauges(r: &Registry) -> (String, String) {
        let text = encode(r).unwrap();
        let value = |name: &str| {
            text.lines().find_map(|l| l.strip_prefix(&format!("{name} ")).map(String::from)).unwrap_or_default()
        };
        (value("shard_members"), value("shard_owned_namespaces"))
    }

    #[test]
    fn gauges_count_the_members_and_the_settled_share_of_the_cached_namespaces() {
        let metrics = Arc::new(ShardMetrics::default());
        let mut r = Registry::default();
        r.register_collector(Box::new(metrics.clone()));
        assert_eq!(gauges(&r), (String::new(), String::new()), "unsharded: no series");
        metrics.enable();
        assert_eq!(gauges(&r), ("0".into(), "0".into()), "sharded, before a term");

        let names: Vec<String> = (0..40).map(|i| format!("team-{i}")).collect();
        let three: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
        let mine = names.iter().filter(|ns| owner(ns, &three) == Some("b")).count();
        assert!(mine > 0 && mine < 40, "{mine}");
        let now = tokio::time::Instant::now();
        let mut settling = Settling::new("b", Duration::from_secs(3), now);
        let (tx, rx) = tokio::sync::watch::channel(settling.observe(three.clone(), now));
        let store = crate::fake_api::store(names.iter().map(|n| namespace(n)));
        let term = metrics.watch(Shard::new(rx), store);
        // Not settled yet: the members are seen, no namespace is worked.
        assert_eq!(gauges(&r), ("3".into(), "0".into()));
        tx.send_replace(settling.observe(three, now + Duration::from_secs(3)));
        assert_eq!(gauges(&r), ("3".into(), mine.to_string()));
        drop(term);
        assert_eq!(gauges(&r), ("0".into(), "0".into()), "between terms");
    }
}
