//! Prometheus metrics of the gRPC server.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    method: String,
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MethodLabels {
    method: String,
}

fn duration_histogram() -> Histogram {
    // 100µs .. ~3.3s
    Histogram::new(exponential_buckets(0.0001, 2.0, 16))
}

/// The server's metrics and the registry they are exposed from.
#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    requests: Family<RequestLabels, Counter>,
    durations: Family<MethodLabels, Histogram, fn() -> Histogram>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A fresh registry with `grpc_server_requests_total{method,status}`,
    /// `grpc_server_request_duration_seconds{method}`, the store calls
    /// ([`crate::store_calls`]) and the process' own metrics.
    pub fn new() -> Self {
        let mut registry = Registry::default();
        keyward_process::metrics::register_process(&mut registry, "provider", env!("CARGO_PKG_VERSION"));
        let requests = Family::<RequestLabels, Counter>::default();
        let durations = Family::<MethodLabels, Histogram, fn() -> Histogram>::new_with_constructor(
            duration_histogram as fn() -> Histogram,
        );
        registry.register("grpc_server_requests", "gRPC requests handled, by method and status code", requests.clone());
        registry.register(
            "grpc_server_request_duration_seconds",
            "Time to handle a gRPC request, by method",
            durations.clone(),
        );
        crate::store_calls::register(&mut registry);
        Metrics { registry: Arc::new(registry), requests, durations }
    }

    /// Records one handled request.
    pub fn observe(&self, method: &str, code: tonic::Code, elapsed: Duration) {
        self.requests
            .get_or_create(&RequestLabels { method: method.to_string(), status: code_name(code).to_string() })
            .inc();
        self.durations.get_or_create(&MethodLabels { method: method.to_string() }).observe(elapsed.as_secs_f64());
    }

    /// The metrics in the Prometheus text format.
    pub fn encode(&self) -> String {
        keyward_process::health::encode(&self.registry).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "encoding metrics failed");
            String::new()
        })
    }
}

/// Canonical gRPC code names, as used by other gRPC metrics.
pub(crate) fn code_name(code: tonic::Code) -> &'static str {
    use tonic::Code::*;
    match code {
        Ok => "OK",
        Cancelled => "CANCELLED",
        Unknown => "UNKNOWN",
        InvalidArgument => "INVALID_ARGUMENT",
        DeadlineExceeded => "DEADLINE_EXCEEDED",
        NotFound => "NOT_FOUND",
        AlreadyExists => "ALREADY_EXISTS",
        PermissionDenied => "PERMISSION_DENIED",
        ResourceExhausted => "RESOURCE_EXHAUSTED",
        FailedPrecondition => "FAILED_PRECONDITION",
        Aborted => "ABORTED",
        OutOfRange => "OUT_OF_RANGE",
        Unimplemented => "UNIMPLEMENTED",
        Internal => "INTERNAL",
        Unavailable => "UNAVAILABLE",
        DataLoss => "DATA_LOSS",
        Unauthenticated => "UNAUTHENTICATED",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposes_counter_and_histogram_by_method_and_status() {
        let m = Metrics::new();
        m.observe("GetSecret", tonic::Code::Ok, Duration::from_millis(2));
        m.observe("GetSecret", tonic::Code::Ok, Duration::from_millis(3));
        m.observe("GetSecret", tonic::Code::NotFound, Duration::from_millis(1));
        let text = m.encode();
        assert!(text.contains(r#"grpc_server_requests_total{method="GetSecret",status="OK"} 2"#), "{text}");
        assert!(text.contains(r#"grpc_server_requests_total{method="GetSecret",status="NOT_FOUND"} 1"#), "{text}");
        assert!(text.contains(r#"grpc_server_request_duration_seconds_count{method="GetSecret"} 3"#), "{text}");
    }
}
