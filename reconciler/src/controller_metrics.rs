//! controller-runtime's metrics, one set per controller, under its names and labels, so the
//! dashboards and alerts written for External Secrets read Keyward's controllers:
//!
//! - `controller_runtime_reconcile_total{controller,result}` (`success`, `requeue_after`,
//!   `error`), `controller_runtime_reconcile_errors_total`, `_reconcile_time_seconds`,
//!   `_active_workers` and `_max_concurrent_reconciles` (`{controller}`);
//! - the work queue, `workqueue_*{name,controller}` (both the controller's name, as
//!   controller-runtime sets them): `_depth` (objects due and waiting for a worker), `_adds_total`,
//!   `_queue_duration_seconds` (due until started), `_work_duration_seconds`, `_retries_total`
//!   (requeues with a delay), `_unfinished_work_seconds` and
//!   `_longest_running_processor_seconds`.
//!
//! kube-runtime's controller keeps its queue to itself, so the queue is followed from outside:
//! every trigger a controller is given passes [`ControllerMetrics::queued`], every reconcile runs
//! inside [`ControllerMetrics::observe`], which reads when the object is due next from the
//! [`Action`] it returns. An object waiting for its next refresh costs one small table entry.
//!
//! A reconcile counts as `error` when it returns an error or when it reported a failure with
//! [`failed`]: a sync that failed writes its condition and schedules its own retry (with the
//! object's backoff) instead of returning an error, and is still a failed reconcile.

use std::cell::Cell;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use futures::{Stream, StreamExt};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

tokio::task_local! {
    /// Set by [`failed`] during one observed reconcile.
    static FAILED: Cell<bool>;
}

/// Marks the reconcile running on this task as failed (`result="error"`), though it returns
/// `Ok` (it reported the failure on the object and scheduled its retry). Outside an observed
/// reconcile it does nothing.
pub fn failed() {
    let _ = FAILED.try_with(|f| f.set(true));
}

/// Labels of the per-controller series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerLabels {
    /// The controller: the lowercase kind it reconciles, as controller-runtime names it.
    pub controller: String,
}

/// Labels of `controller_runtime_reconcile_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReconcileResultLabels {
    /// The controller.
    pub controller: String,
    /// `success` (nothing scheduled), `requeue_after` (scheduled again) or `error`.
    pub result: String,
}

/// Labels of the work-queue series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueueLabels {
    /// The queue: the controller's name.
    pub name: String,
    /// The controller (the same).
    pub controller: String,
}

/// How a reconcile ended, as controller-runtime counts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReconcileResult {
    /// Done until something changes.
    Success,
    /// Scheduled again after a delay.
    RequeueAfter,
    /// It failed: returned an error, or reported a failure ([`failed`]).
    Error,
}

impl ReconcileResult {
    const ALL: [ReconcileResult; 3] = [ReconcileResult::Success, ReconcileResult::RequeueAfter, ReconcileResult::Error];

    fn as_str(self) -> &'static str {
        match self {
            ReconcileResult::Success => "success",
            ReconcileResult::RequeueAfter => "requeue_after",
            ReconcileResult::Error => "error",
        }
    }
}

/// controller-runtime's buckets of `controller_runtime_reconcile_time_seconds`.
fn reconcile_time_histogram() -> Histogram {
    Histogram::new([
        0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.25, 1.5,
        1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0,
    ])
}

/// controller-runtime's buckets of the work-queue durations: 10 ns to 1000 s.
fn queue_histogram() -> Histogram {
    Histogram::new(exponential_buckets(10e-9, 10.0, 12))
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

/// The families every controller writes into, and the queues read at scrape time.
#[derive(Debug)]
pub struct ControllerFamilies {
    reconcile_total: Family<ReconcileResultLabels, Counter>,
    reconcile_errors: Family<ControllerLabels, Counter>,
    reconcile_time: Histograms<ControllerLabels>,
    active_workers: Family<ControllerLabels, Gauge>,
    max_concurrent: Family<ControllerLabels, Gauge>,
    adds: Family<QueueLabels, Counter>,
    retries: Family<QueueLabels, Counter>,
    queue_duration: Histograms<QueueLabels>,
    work_duration: Histograms<QueueLabels>,
    controllers: Arc<Mutex<HashMap<&'static str, Arc<ControllerMetrics>>>>,
}

impl Default for ControllerFamilies {
    fn default() -> Self {
        ControllerFamilies {
            reconcile_total: Family::default(),
            reconcile_errors: Family::default(),
            reconcile_time: Family::new_with_constructor(reconcile_time_histogram),
            active_workers: Family::default(),
            max_concurrent: Family::default(),
            adds: Family::default(),
            retries: Family::default(),
            queue_duration: Family::new_with_constructor(queue_histogram),
            work_duration: Family::new_with_constructor(queue_histogram),
            controllers: Arc::default(),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every update is a few statements that leave the tables consistent.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl ControllerFamilies {
    /// The metrics of controller `name`, which runs `concurrency` reconciles at once. A
    /// controller built again (a new leadership term) starts with an empty queue.
    pub fn controller(&self, name: &'static str, concurrency: u16) -> Arc<ControllerMetrics> {
        self.build(name, concurrency, true)
    }

    /// The metrics of a controller on its own watch, whose triggers and deletions are not seen
    /// here: its reconciles and their durations are counted, its queue is not followed (depth
    /// and queue duration stay 0).
    pub fn watching_controller(&self, name: &'static str, concurrency: u16) -> Arc<ControllerMetrics> {
        self.build(name, concurrency, false)
    }

    fn build(&self, name: &'static str, concurrency: u16, follow_queue: bool) -> Arc<ControllerMetrics> {
        let c = ControllerLabels { controller: name.into() };
        let q = QueueLabels { name: name.into(), controller: name.into() };
        self.max_concurrent.get_or_create(&c).set(i64::from(concurrency));
        self.reconcile_errors.get_or_create(&c).inc_by(0);
        let metrics = Arc::new(ControllerMetrics {
            name,
            results: ReconcileResult::ALL.map(|r| {
                let labels = ReconcileResultLabels { controller: name.into(), result: r.as_str().into() };
                self.reconcile_total.get_or_create(&labels).clone()
            }),
            errors: self.reconcile_errors.get_or_create(&c).clone(),
            time: self.reconcile_time.get_or_create(&c).clone(),
            active: self.active_workers.get_or_create(&c).clone(),
            adds: self.adds.get_or_create(&q).clone(),
            retries: self.retries.get_or_create(&q).clone(),
            queue_duration: self.queue_duration.get_or_create(&q).clone(),
            work_duration: self.work_duration.get_or_create(&q).clone(),
            follow_queue,
            queue: Mutex::default(),
        });
        lock(&self.controllers).insert(name, metrics.clone());
        metrics
    }

    fn find(&self, controller: &str) -> Option<Arc<ControllerMetrics>> {
        lock(&self.controllers).get(controller).cloned()
    }

    /// Forgets a deleted object in the queue of `controller` (the object's lowercase kind).
    pub fn forget(&self, controller: &str, namespace: &str, name: &str) {
        if let Some(c) = self.find(controller) {
            c.forget(Some(namespace), name);
        }
    }

    /// Records the retry `action` an error policy of `controller` scheduled for an object.
    pub fn requeued(&self, controller: &str, namespace: &str, name: &str, action: &Action) {
        if let Some(c) = self.find(controller) {
            c.requeued(Some(namespace), name, action);
        }
    }

    /// Registers every family in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller",
            self.reconcile_total.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller",
            self.reconcile_errors.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            self.reconcile_time.clone(),
        );
        registry.register(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            self.active_workers.clone(),
        );
        registry.register(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            self.max_concurrent.clone(),
        );
        registry.register("workqueue_adds", "Total number of adds handled by workqueue", self.adds.clone());
        registry.register(
            "workqueue_retries",
            "Total number of items added to the workqueue with a non-zero delay (rate-limited requeues, explicit \
             RequeueAfter)",
            self.retries.clone(),
        );
        registry.register(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            self.queue_duration.clone(),
        );
        registry.register(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes",
            self.work_duration.clone(),
        );
        registry.register_collector(Box::new(Queues(self.controllers.clone())));
    }
}

/// Where one object stands in a queue.
#[derive(Debug, Clone, Copy)]
struct Pending {
    /// When it is (or was) due.
    due: Instant,
    /// Whether `workqueue_adds_total` counted it (a delayed requeue counts once it is due).
    counted: bool,
}

/// A controller's queue as seen from outside: objects scheduled (keyed by a hash of namespace
/// and name) and objects being reconciled.
#[derive(Debug, Default)]
struct Queue {
    pending: HashMap<u64, Pending>,
    running: HashMap<u64, Instant>,
}

fn object_key(namespace: Option<&str>, name: &str) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    namespace.unwrap_or("").hash(&mut h);
    name.hash(&mut h);
    h.finish()
}

/// The delay an [`Action`] schedules. kube keeps it private; its `Debug` text
/// (`Action { requeue_after: Some(1.5s) }`) is the only reading, and a test pins it.
fn requeue_after(action: &Action) -> Option<Duration> {
    let text = format!("{action:?}");
    let inner = text.split_once("Some(")?.1.split_once(')')?.0;
    let split = inner.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (number, unit) = inner.split_at(split);
    let number: f64 = number.parse().ok()?;
    let scale = match unit {
        "s" => 1.0,
        "ms" => 1e-3,
        "µs" => 1e-6,
        "ns" => 1e-9,
        _ => return None,
    };
    Some(Duration::from_secs_f64(number * scale))
}

/// The metrics of one controller.
#[derive(Debug)]
pub struct ControllerMetrics {
    name: &'static str,
    results: [Counter; 3],
    errors: Counter,
    time: Histogram,
    active: Gauge,
    adds: Counter,
    retries: Counter,
    queue_duration: Histogram,
    work_duration: Histogram,
    /// Whether scheduled requeues are followed (false for a controller on its own watch).
    follow_queue: bool,
    queue: Mutex<Queue>,
}

impl ControllerMetrics {
    /// The controller's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// `triggers`, each one counted as an add to the queue.
    pub fn queued<K, S>(self: &Arc<Self>, triggers: S) -> impl Stream<Item = ObjectRef<K>> + Send + use<K, S>
    where
        K: kube::Resource + 'static,
        K::DynamicType: Send + Sync,
        S: Stream<Item = ObjectRef<K>> + Send,
    {
        let me = self.clone();
        triggers.inspect(move |r| me.added(r.namespace.as_deref(), &r.name))
    }

    fn added(&self, namespace: Option<&str>, name: &str) {
        let now = Instant::now();
        let mut queue = lock(&self.queue);
        let entry = queue.pending.entry(object_key(namespace, name)).or_insert(Pending { due: now, counted: false });
        entry.due = entry.due.min(now);
        if !entry.counted {
            entry.counted = true;
            self.adds.inc();
        }
    }

    fn started(&self, key: u64, now: Instant) {
        let mut queue = lock(&self.queue);
        let waited = match queue.pending.remove(&key) {
            Some(p) => {
                if !p.counted {
                    self.adds.inc();
                }
                now.saturating_duration_since(p.due)
            }
            // Triggered where the queue is not followed (its own watch): due when it started.
            None => {
                self.adds.inc();
                Duration::ZERO
            }
        };
        queue.running.insert(key, now);
        self.active.inc();
        self.queue_duration.observe(waited.as_secs_f64());
    }

    fn finished(&self, key: u64, started: Instant, next: Option<Duration>, result: ReconcileResult) {
        let now = Instant::now();
        let took = now.saturating_duration_since(started).as_secs_f64();
        let mut queue = lock(&self.queue);
        if let Some(after) = next {
            if self.follow_queue {
                let due = now + after;
                let entry = queue.pending.entry(key).or_insert(Pending { due, counted: false });
                entry.due = entry.due.min(due);
            }
            if !after.is_zero() {
                self.retries.inc();
            }
        }
        drop(queue);
        self.work_duration.observe(took);
        self.time.observe(took);
        self.results[result as usize].inc();
        if result == ReconcileResult::Error {
            self.errors.inc();
        }
    }

    /// Forgets an object that is gone, so it no longer counts as scheduled.
    pub fn forget(&self, namespace: Option<&str>, name: &str) {
        lock(&self.queue).pending.remove(&object_key(namespace, name));
    }

    /// Records a retry scheduled by the controller's error policy (`action`) for an object
    /// whose reconcile returned an error.
    pub fn requeued(&self, namespace: Option<&str>, name: &str, action: &Action) {
        let Some(after) = requeue_after(action).filter(|_| self.follow_queue) else { return };
        let due = Instant::now() + after;
        let mut queue = lock(&self.queue);
        let entry = queue.pending.entry(object_key(namespace, name)).or_insert(Pending { due, counted: false });
        entry.due = entry.due.min(due);
    }

    /// Runs one reconcile of `namespace/name` and records it: the busy worker, the wait since
    /// it was due, the time, how it ended, and when it is due next.
    pub async fn observe<E>(
        &self,
        namespace: Option<&str>,
        name: &str,
        reconcile: impl std::future::Future<Output = Result<Action, E>>,
    ) -> Result<Action, E> {
        let key = object_key(namespace, name);
        let started = Instant::now();
        self.started(key, started);
        let busy = Busy { metrics: self, key };
        let (out, reported_failure) = FAILED
            .scope(Cell::new(false), async {
                let out = reconcile.await;
                (out, FAILED.with(Cell::get))
            })
            .await;
        drop(busy);
        let (result, next) = match &out {
            // The error policy schedules the retry; it reports it with `requeued`.
            Err(_) => (ReconcileResult::Error, None),
            Ok(a) => {
                let next = requeue_after(a);
                let result = match next {
                    _ if reported_failure => ReconcileResult::Error,
                    None => ReconcileResult::Success,
                    Some(_) => ReconcileResult::RequeueAfter,
                };
                (result, next)
            }
        };
        // A returned error is retried after the error policy's backoff (a rate-limited requeue);
        // a scheduled requeue counts in `finished`.
        if out.is_err() {
            self.retries.inc();
        }
        self.finished(key, started, next, result);
        out
    }
}

/// A reconcile in progress: a busy worker and a running item until dropped, also when the
/// reconcile is cancelled (a shutdown past its grace period drops it).
struct Busy<'a> {
    metrics: &'a ControllerMetrics,
    key: u64,
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.metrics.active.dec();
        lock(&self.metrics.queue).running.remove(&self.key);
    }
}

/// The work-queue gauges, computed from every controller's queue at scrape time.
#[derive(Debug)]
struct Queues(Arc<Mutex<HashMap<&'static str, Arc<ControllerMetrics>>>>);

/// A work-queue gauge: name, help, and its value in a row.
type QueueGauge = (&'static str, &'static str, fn(&QueueRow) -> f64);

/// One controller's work-queue gauges at a scrape.
struct QueueRow {
    name: &'static str,
    depth: f64,
    unfinished: f64,
    longest: f64,
}

impl Collector for Queues {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let now = Instant::now();
        let controllers: Vec<Arc<ControllerMetrics>> = lock(&self.0).values().cloned().collect();
        let mut rows = Vec::new();
        for c in &controllers {
            let mut queue = lock(&c.queue);
            let mut depth = 0u32;
            for p in queue.pending.values_mut().filter(|p| p.due <= now) {
                depth += 1;
                // A delayed requeue is added to the queue when it falls due.
                if !p.counted {
                    p.counted = true;
                    c.adds.inc();
                }
            }
            let running: Vec<f64> =
                queue.running.values().map(|s| now.saturating_duration_since(*s).as_secs_f64()).collect();
            rows.push(QueueRow {
                name: c.name,
                depth: f64::from(depth),
                unfinished: running.iter().sum(),
                longest: running.iter().copied().fold(0.0, f64::max),
            });
        }
        let gauges: [QueueGauge; 3] = [
            ("workqueue_depth", "Current depth of workqueue", |r| r.depth),
            (
                "workqueue_unfinished_work_seconds",
                "How many seconds of work has been done that is in progress and hasn't been observed by \
                 work_duration. Large values indicate stuck threads. One can deduce the number of stuck threads by \
                 observing the rate at which this increases.",
                |r| r.unfinished,
            ),
            (
                "workqueue_longest_running_processor_seconds",
                "How many seconds has the longest running processor for workqueue been running.",
                |r| r.longest,
            ),
        ];
        for (name, help, value) in gauges {
            let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for row in &rows {
                let labels = QueueLabels { name: row.name.into(), controller: row.name.into() };
                ConstGauge::new(value(row)).encode(metric.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "controller_metrics_tests.rs"]
mod tests;
