//! The tower layers around the admission handlers: a body limit, a time budget, and the
//! observation (metrics and one log line) of every answer. The handlers stay thin: they decode,
//! decide and attach what they decided as a response extension, which the observing layer reads.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::error_handling::HandleErrorLayer;
use axum::extract::{DefaultBodyLimit, FromRequest, Request, State};
use axum::http::StatusCode;
use axum::middleware::{Next, from_fn_with_state};
use axum::response::{IntoResponse, Response};
use tower::ServiceBuilder;

use crate::metrics::{Metrics, RequestLabels, ReviewLabels, WEBHOOK_PATHS, WebhookLabels};
use crate::server::{AppState, Limits};

/// What a handler decided, for the observing layer.
#[derive(Clone, Debug)]
pub struct Reviewed {
    /// `validate` or `mutate`.
    pub webhook: &'static str,
    /// Request uid.
    pub uid: String,
    /// Kind of the object (empty when unknown).
    pub kind: String,
    /// Namespace of the object.
    pub namespace: String,
    /// Admission operation (empty when unknown).
    pub operation: String,
    /// `allowed`, `warned`, `patched`, `denied` or `error`.
    pub decision: &'static str,
    /// The denial message, if any.
    pub message: String,
    /// Number of warnings.
    pub warnings: usize,
}

/// A request answered with an error instead of a review (malformed, too large, too slow).
#[derive(Clone, Debug)]
pub struct Rejected(pub String);

/// A JSON error that the observing layer counts as a bad request.
pub fn rejected(status: StatusCode, message: String) -> Response {
    let mut response = (status, axum::Json(serde_json::json!({ "error": message }))).into_response();
    response.extensions_mut().insert(Rejected(message));
    response
}

/// The request body, read within the size limit; a body over the limit or one that fails to
/// arrive is refused with a JSON error.
pub struct ReviewBody(pub Bytes);

impl FromRequest<AppState> for ReviewBody {
    type Rejection = Response;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        Bytes::from_request(req, state).await.map(ReviewBody).map_err(|e| {
            let status = e.status();
            let message = if status == StatusCode::PAYLOAD_TOO_LARGE {
                format!("the request body is larger than {} bytes", state.limits.max_body_bytes)
            } else {
                format!("reading the request body failed: {}", e.body_text())
            };
            rejected(status, message)
        })
    }
}

/// Wraps the admission routes: observation outermost (it sees every answer, timeouts
/// included), then the in-flight budget (a request that does not fit is answered before its body
/// is read, see [`crate::shed`]), then the time budget, then the body limit, then the in-flight
/// budget again for what the read body decodes to ([`crate::shed::weigh`]).
pub fn admission(router: Router, metrics: Arc<Metrics>, limits: Limits) -> Router {
    let budget = limits.request_timeout;
    let in_flight = crate::shed::Budget::new(
        limits.in_flight_bytes,
        limits.max_body_bytes,
        limits.request_timeout,
        metrics.clone(),
    );
    let in_flight_weighed = in_flight.clone();
    router.layer(
        ServiceBuilder::new()
            .layer(from_fn_with_state(metrics, observe))
            .layer(from_fn_with_state(in_flight, crate::shed::shed))
            .layer(HandleErrorLayer::new(move |_: tower::BoxError| async move { timed_out(budget) }))
            .timeout(budget)
            .layer(DefaultBodyLimit::max(limits.max_body_bytes))
            .layer(from_fn_with_state(in_flight_weighed, crate::shed::weigh)),
    )
}

fn timed_out(budget: Duration) -> Response {
    rejected(
        StatusCode::REQUEST_TIMEOUT,
        format!(
            "keyward-webhook did not answer within {budget:?} (the request body did not arrive in time or the review took too long); retry"
        ),
    )
}

/// Counts one request in flight on an admission path while it lives (a request whose client
/// went away is dropped mid-way, and still leaves the count).
struct InFlight(prometheus_client::metrics::gauge::Gauge);

impl InFlight {
    fn start(gauge: &prometheus_client::metrics::gauge::Gauge) -> InFlight {
        gauge.inc();
        InFlight(gauge.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.dec();
    }
}

async fn observe(State(metrics): State<Arc<Metrics>>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    // controller-runtime's per-path metrics, for the admission paths only (any other path is
    // answered 404 and would make a series per path a caller invents).
    let path = WEBHOOK_PATHS.into_iter().find(|p| *p == request.uri().path());
    let in_flight = path.map(|webhook| InFlight::start(&metrics.in_flight.get_or_create(&WebhookLabels { webhook })));
    let response = next.run(request).await;
    let elapsed = started.elapsed();
    drop(in_flight);
    if let Some(webhook) = path {
        let code = response.status().as_u16().to_string();
        metrics.requests.get_or_create(&RequestLabels { webhook, code }).inc();
        metrics.latency.get_or_create(&WebhookLabels { webhook }).observe(elapsed.as_secs_f64());
    }
    if let Some(r) = response.extensions().get::<Reviewed>() {
        let or_unknown = |s: &str| if s.is_empty() { "unknown".to_string() } else { s.to_string() };
        metrics
            .review_seconds
            .get_or_create(&ReviewLabels {
                webhook: r.webhook,
                kind: or_unknown(&r.kind),
                operation: or_unknown(&r.operation),
                decision: r.decision,
            })
            .observe(elapsed.as_secs_f64());
        tracing::info!(
            webhook = r.webhook,
            uid = %r.uid,
            kind = %r.kind,
            namespace = %r.namespace,
            operation = %r.operation,
            decision = r.decision,
            message = %r.message,
            warnings = r.warnings,
            latency_us = elapsed.as_micros() as u64,
            "admission review"
        );
    } else if let Some(Rejected(message)) = response.extensions().get::<Rejected>() {
        metrics.bad_requests.inc();
        tracing::warn!(status = %response.status(), "request rejected: {message}");
    }
    response
}
