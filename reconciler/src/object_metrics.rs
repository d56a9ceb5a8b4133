//! The per-object series (`<kind>_sync_calls_total`, `<kind>_sync_calls_error`,
//! `<kind>_status_condition`, `<kind>_reconcile_duration`), one set per ExternalSecret or
//! PushSecret, under upstream's names and labels.
//!
//! They live in one small table per kind and are written out at scrape time, instead of one
//! prometheus-client `Family` per metric: four families hold five label sets of two to four
//! owned strings each, a shared counter handle per series and four hash tables sized for every
//! object, about 1 KiB per ExternalSecret; this table holds one entry of about 60 bytes.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// What one object's series hold. A series is written only once it has a value, as a
/// `Family` does when a series is first touched.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
struct Series {
    calls: u64,
    errors: u64,
    ready: Option<bool>,
    duration_ns: Option<f64>,
}

/// Metric names and help texts of one kind.
#[derive(Debug)]
pub struct Names {
    /// `externalsecret` or `pushsecret`.
    pub prefix: &'static str,
    /// Help of `<prefix>_sync_calls_total`; `None` for a kind that has no syncs to count.
    pub calls: Option<&'static str>,
    /// Help of `<prefix>_sync_calls_error`; `None` as for `calls`.
    pub errors: Option<&'static str>,
    /// Help of `<prefix>_status_condition`.
    pub condition: &'static str,
    /// Help of `<prefix>_reconcile_duration`.
    pub duration: &'static str,
}

/// The per-object series of one kind, keyed by `namespace/name` (neither may hold a `/`).
#[derive(Debug)]
pub struct ObjectSeries {
    names: Names,
    table: Mutex<HashMap<Box<str>, Series>>,
}

fn key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

impl ObjectSeries {
    /// An empty table for the kind `names` describes.
    pub fn new(names: Names) -> Self {
        ObjectSeries { names, table: Mutex::default() }
    }

    fn update(&self, namespace: &str, name: &str, change: impl FnOnce(&mut Series)) {
        // A poisoned lock only means a scrape panicked mid-way; the table is still consistent.
        let mut table = self.table.lock().unwrap_or_else(|p| p.into_inner());
        let key = key(namespace, name);
        match table.get_mut(key.as_str()) {
            Some(series) => change(series),
            None => change(table.entry(key.into_boxed_str()).or_default()),
        }
    }

    /// Counts one sync (`_sync_calls_total`).
    pub fn sync_started(&self, namespace: &str, name: &str) {
        self.update(namespace, name, |s| s.calls += 1);
    }

    /// Counts one failed sync (`_sync_calls_error`).
    pub fn sync_failed(&self, namespace: &str, name: &str) {
        self.update(namespace, name, |s| s.errors += 1);
    }

    /// Sets the Ready condition pair (`status="True"` and `status="False"`, one of them 1).
    pub fn set_ready(&self, namespace: &str, name: &str, ready: bool) {
        self.update(namespace, name, |s| s.ready = Some(ready));
    }

    /// Records how long the last sync took, in nanoseconds as upstream does (a Go `time.Duration`).
    pub fn set_duration(&self, namespace: &str, name: &str, took: Duration) {
        self.update(namespace, name, |s| s.duration_ns = Some(took.as_nanos() as f64));
    }

    /// Drops every series of a deleted object.
    pub fn forget(&self, namespace: &str, name: &str) {
        self.table.lock().unwrap_or_else(|p| p.into_inner()).remove(key(namespace, name).as_str());
    }

    /// How many objects have series.
    pub fn len(&self) -> usize {
        self.table.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Whether no object has series.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Writes one metric family: `value` picks an object's sample (or none) and its extra labels.
fn family<M: EncodeMetric>(
    encoder: &mut DescriptorEncoder,
    table: &HashMap<Box<str>, Series>,
    name: &str,
    help: &str,
    metric_type: prometheus_client::metrics::MetricType,
    samples: impl Fn(&Series) -> Vec<(Option<&'static str>, M)>,
) -> Result<(), std::fmt::Error> {
    let mut metric = encoder.encode_descriptor(name, help, None, metric_type)?;
    for (key, series) in table {
        let (namespace, object) = key.split_once('/').unwrap_or(("", key));
        for (status, sample) in samples(series) {
            match status {
                Some(status) => {
                    let labels =
                        [("name", object), ("namespace", namespace), ("condition", "Ready"), ("status", status)];
                    sample.encode(metric.encode_family(&labels)?)?;
                }
                None => sample.encode(metric.encode_family(&[("name", object), ("namespace", namespace)])?)?,
            }
        }
    }
    Ok(())
}

impl Collector for ObjectSeries {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        use prometheus_client::metrics::MetricType::{Counter, Gauge, Unknown};
        let table = self.table.lock().unwrap_or_else(|p| p.into_inner());
        let (p, n) = (self.names.prefix, &self.names);
        if let Some(help) = n.calls {
            family(&mut encoder, &table, &format!("{p}_sync_calls"), help, Counter, |s| {
                if s.calls > 0 { vec![(None, ConstCounter::new(s.calls))] } else { vec![] }
            })?;
        }
        // A counter under upstream's exact name, without `_total`: untyped here, declared a
        // counter when written (keyward_process::metrics::Unsuffixed).
        if let Some(help) = n.errors {
            family(&mut encoder, &table, &format!("{p}_sync_calls_error"), help, Unknown, |s| {
                if s.errors > 0 { vec![(None, ConstCounter::new(s.errors))] } else { vec![] }
            })?;
        }
        family(&mut encoder, &table, &format!("{p}_status_condition"), n.condition, Gauge, |s| match s.ready {
            Some(ready) => {
                vec![
                    (Some("True"), ConstGauge::new(i64::from(ready))),
                    (Some("False"), ConstGauge::new(i64::from(!ready))),
                ]
            }
            None => vec![],
        })?;
        family(&mut encoder, &table, &format!("{p}_reconcile_duration"), n.duration, Gauge, |s| {
            s.duration_ns.map(|d| (None, ConstGauge::new(d))).into_iter().collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::registry::Registry;

    fn series() -> std::sync::Arc<ObjectSeries> {
        std::sync::Arc::new(ObjectSeries::new(Names {
            prefix: "thing",
            calls: Some("calls"),
            errors: Some("errors"),
            condition: "condition",
            duration: "duration",
        }))
    }

    fn text(s: &std::sync::Arc<ObjectSeries>) -> String {
        let mut r = Registry::default();
        r.register_collector(Box::new(s.clone()));
        keyward_process::health::encode(&r).unwrap()
    }

    #[test]
    fn writes_only_the_series_that_have_values() {
        let s = series();
        s.sync_started("n", "a");
        let out = text(&s);
        assert!(out.contains("thing_sync_calls_total{name=\"a\",namespace=\"n\"} 1"), "{out}");
        assert!(!out.contains("thing_sync_calls_error{"), "{out}");
        assert!(!out.contains("thing_status_condition{"), "{out}");
        assert!(!out.contains("thing_reconcile_duration{"), "{out}");
        s.sync_started("n", "a");
        s.sync_failed("n", "a");
        s.set_ready("n", "a", false);
        s.set_duration("n", "a", Duration::from_millis(2));
        let out = text(&s);
        for line in [
            "thing_sync_calls_total{name=\"a\",namespace=\"n\"} 2",
            "thing_sync_calls_error{name=\"a\",namespace=\"n\"} 1",
            "# TYPE thing_sync_calls_error counter",
            "thing_status_condition{name=\"a\",namespace=\"n\",condition=\"Ready\",status=\"True\"} 0",
            "thing_status_condition{name=\"a\",namespace=\"n\",condition=\"Ready\",status=\"False\"} 1",
            "thing_reconcile_duration{name=\"a\",namespace=\"n\"} 2000000.0",
        ] {
            assert!(out.contains(line), "missing {line:?} in\n{out}");
        }
    }

    #[test]
    fn a_forgotten_object_leaves_no_series_and_others_keep_theirs() {
        let s = series();
        for name in ["a", "b"] {
            s.sync_started("n", name);
            s.set_ready("n", name, true);
        }
        s.forget("n", "a");
        assert_eq!(s.len(), 1);
        let out = text(&s);
        assert!(!out.contains("name=\"a\""), "{out}");
        assert!(
            out.contains("thing_status_condition{name=\"b\",namespace=\"n\",condition=\"Ready\",status=\"True\"} 1")
        );
    }

    #[test]
    fn objects_of_the_same_name_in_other_namespaces_are_separate() {
        let s = series();
        s.sync_started("n1", "a");
        s.sync_started("n2", "a");
        s.sync_started("n2", "a");
        let out = text(&s);
        assert!(out.contains("thing_sync_calls_total{name=\"a\",namespace=\"n1\"} 1"), "{out}");
        assert!(out.contains("thing_sync_calls_total{name=\"a\",namespace=\"n2\"} 2"), "{out}");
    }
}
