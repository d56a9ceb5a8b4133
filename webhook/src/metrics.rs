//! Prometheus metrics of the webhook.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// Labels of one review. The uid and namespace go to the logs only: as labels they would make
/// one series per object.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReviewLabels {
    /// `validate` or `mutate`.
    pub webhook: &'static str,
    /// Kind of the object, or `unknown`.
    pub kind: String,
    /// `CREATE`, `UPDATE`, `DELETE`, `CONNECT`.
    pub operation: String,
    /// `allowed`, `warned`, `patched`, `denied` or `error`.
    pub decision: &'static str,
}

/// Labels of controller-runtime's webhook metrics: the path the API server calls.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WebhookLabels {
    /// `/validate` or `/mutate`.
    pub webhook: &'static str,
}

/// Labels of `controller_runtime_webhook_requests_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// `/validate` or `/mutate`.
    pub webhook: &'static str,
    /// The HTTP status code of the answer.
    pub code: String,
}

/// The admission paths, as controller-runtime's `webhook` label names them.
pub const WEBHOOK_PATHS: [&str; 2] = ["/validate", "/mutate"];

/// Labels of a cache-size gauge.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CacheLabels {
    /// The cache.
    pub cache: &'static str,
}

/// Every metric of the webhook.
pub struct Metrics {
    registry: Registry,
    /// `controller_runtime_webhook_requests_total{webhook,code}`: answers by HTTP status.
    pub requests: Family<RequestLabels, Counter>,
    /// `controller_runtime_webhook_latency_seconds{webhook}`.
    pub latency: Family<WebhookLabels, Histogram>,
    /// `controller_runtime_webhook_requests_in_flight{webhook}`.
    pub in_flight: Family<WebhookLabels, Gauge>,
    /// Review latency in seconds.
    pub review_seconds: Family<ReviewLabels, Histogram>,
    /// Requests answered with an error instead of a review (malformed, too large, too slow).
    pub bad_requests: Counter,
    /// Serving-certificate reloads.
    pub cert_reloads: Counter,
    /// Failed serving-certificate reloads (the previous certificate stays in use).
    pub cert_reload_errors: Counter,
    /// Objects in each cache.
    pub cache_objects: Family<CacheLabels, Gauge>,
    /// Requests answered 429 because the in-flight budget was spent.
    pub shed: Counter,
    /// Seconds each cache has been unconfirmed (its watch failing); 0 when current.
    pub cache_stale_seconds: Family<CacheLabels, Gauge<f64, AtomicU64>>,
    /// When the serving certificate in use expires (Unix seconds): a rotation that never comes
    /// shows here before the API server's calls start failing.
    pub cert_expiry: Gauge,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

fn latency_histogram() -> Histogram {
    Histogram::new([0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0])
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

/// controller-runtime's buckets of `controller_runtime_webhook_latency_seconds`: 10 ns to
/// 1000 s.
fn request_histogram() -> Histogram {
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(10e-9, 10.0, 12))
}

impl Metrics {
    /// Registers controller-runtime's webhook metrics under its names, the process' own, and
    /// Keyward's under the `keyward_webhook` prefix.
    pub fn new() -> Self {
        let mut root = Registry::default();
        keyward_process::metrics::register_process(&mut root, "webhook", env!("CARGO_PKG_VERSION"));
        let requests = Family::<RequestLabels, Counter>::default();
        let latency = Family::<WebhookLabels, Histogram>::new_with_constructor(request_histogram as fn() -> _);
        let in_flight = Family::<WebhookLabels, Gauge>::default();
        // Every path starts with its likeliest answers at 0, as controller-runtime does, so an
        // error ratio is 0 (not empty) before the first error.
        for webhook in WEBHOOK_PATHS {
            for code in ["200", "500"] {
                requests.get_or_create(&RequestLabels { webhook, code: code.into() }).inc_by(0);
            }
            in_flight.get_or_create(&WebhookLabels { webhook }).set(0);
            let _created = latency.get_or_create(&WebhookLabels { webhook });
        }
        root.register(
            "controller_runtime_webhook_requests",
            "Total number of admission requests by HTTP status code",
            requests.clone(),
        );
        root.register(
            "controller_runtime_webhook_latency_seconds",
            "Histogram of the latency of processing admission requests",
            latency.clone(),
        );
        root.register(
            "controller_runtime_webhook_requests_in_flight",
            "Current number of admission requests being served",
            in_flight.clone(),
        );
        let registry = root.sub_registry_with_prefix("keyward_webhook");
        let review_seconds = Family::<ReviewLabels, Histogram>::new_with_constructor(latency_histogram as fn() -> _);
        registry.register("review_duration_seconds", "Time to answer an admission review", review_seconds.clone());
        let bad_requests = Counter::default();
        registry.register(
            "bad_requests",
            "Requests answered with an error instead of a review (malformed, too large, too slow)",
            bad_requests.clone(),
        );
        let cert_reloads = Counter::default();
        registry.register("certificate_reloads", "Serving certificate reloads", cert_reloads.clone());
        let cert_reload_errors = Counter::default();
        registry.register(
            "certificate_reload_errors",
            "Serving certificate reloads that failed (the previous certificate stays in use)",
            cert_reload_errors.clone(),
        );
        let cache_objects = Family::<CacheLabels, Gauge>::default();
        registry.register("cache_objects", "Objects held in each cache", cache_objects.clone());
        let shed = Counter::default();
        registry.register(
            "requests_shed",
            "Admission requests answered 429 (retried by the API server) because the in-flight budget was spent",
            shed.clone(),
        );
        let cache_stale_seconds = Family::<CacheLabels, Gauge<f64, AtomicU64>>::default();
        registry.register(
            "cache_stale_seconds",
            "Seconds a cache has been unconfirmed because its watch fails (0: current)",
            cache_stale_seconds.clone(),
        );
        let cert_expiry = Gauge::default();
        registry.register(
            "certificate_expiry_timestamp_seconds",
            "Unix time the serving certificate in use expires",
            cert_expiry.clone(),
        );
        Metrics {
            registry: root,
            requests,
            latency,
            in_flight,
            review_seconds,
            bad_requests,
            cert_reloads,
            cert_reload_errors,
            cache_objects,
            shed,
            cache_stale_seconds,
            cert_expiry,
        }
    }

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> String {
        keyward_process::health::encode(&self.registry).unwrap_or_default()
    }
}
