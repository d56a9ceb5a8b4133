//! The HTTPS admission server and the plain health/metrics server.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use rustls::ServerConfig;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use keyward_process::{Health, Readiness};

use crate::cache::Caches;
use crate::layers::{ReviewBody, Reviewed, rejected};
use crate::metrics::Metrics;
use crate::review::{BadRequest, Decision, Decoded, RequestExt, decode, encode};
use crate::validate::{Kind, is_write};

/// Default in-flight budget: a handful of near-limit reviews at once, far below the chart's
/// memory limit, while small reviews (most of them) hardly use it.
pub const DEFAULT_IN_FLIGHT_BYTES: usize = 12 * 1024 * 1024;

/// HTTP/2 stream flow-control window of the admission server.
const H2_STREAM_WINDOW: u32 = 256 * 1024;

/// Limits of the admission endpoints.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Largest accepted request body.
    pub max_body_bytes: usize,
    /// Time budget of one request, from its headers to the answer (reading the body and
    /// waiting for a new namespace to reach the cache included).
    pub request_timeout: Duration,
    /// How long a review waits for a namespace that is not in the cache yet.
    pub namespace_wait: Duration,
    /// TLS handshake budget of a new connection.
    pub handshake_timeout: Duration,
    /// Request bytes under review at once; requests past it are shed with 429 (see
    /// [`crate::shed`]).
    pub in_flight_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: 7 * 1024 * 1024,
            request_timeout: Duration::from_secs(8),
            namespace_wait: Duration::from_secs(2),
            handshake_timeout: Duration::from_secs(10),
            in_flight_bytes: DEFAULT_IN_FLIGHT_BYTES,
        }
    }
}

/// What the handlers share.
#[derive(Clone, Debug)]
pub struct AppState {
    /// The caches reviews are answered from.
    pub caches: Arc<Caches>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Limits.
    pub limits: Limits,
    /// Set when shutdown starts: readiness turns false so no new reviews are routed here.
    pub shutting_down: Arc<AtomicBool>,
}

impl AppState {
    /// State with default limits.
    pub fn new(caches: Arc<Caches>, metrics: Arc<Metrics>) -> Self {
        AppState { caches, metrics, limits: Limits::default(), shutting_down: Arc::new(AtomicBool::new(false)) }
    }
}

/// Which webhook a request is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Validating admission.
    Validate,
    /// Mutating admission.
    Mutate,
}

impl Mode {
    fn as_str(self) -> &'static str {
        match self {
            Mode::Validate => "validate",
            Mode::Mutate => "mutate",
        }
    }
}

/// The admission routes: `POST /validate` and `POST /mutate`, thin handlers inside the layers
/// of [`crate::layers::admission`] (body limit, time budget, metrics and logs).
pub fn admission_router(state: AppState) -> Router {
    let (metrics, limits) = (state.metrics.clone(), state.limits);
    let draining = state.shutting_down.clone();
    let routes = Router::new()
        .route("/validate", post(validate_handler))
        .route("/mutate", post(mutate_handler))
        .fallback(not_found)
        .layer(axum::middleware::from_fn_with_state(draining, close_when_draining))
        .with_state(state);
    crate::layers::admission(routes, metrics, limits)
}

/// While shutting down, HTTP/1.1 answers carry `Connection: close`, so the API server drops its
/// pooled connection to this Pod after the answer instead of keeping it. Otherwise it may write
/// its next review onto that connection at the moment the Pod closes it at the end of the
/// shutdown delay, and that admission fails ("broken pipe"; a POST is not retried). HTTP/2
/// connections get a GOAWAY from the graceful shutdown instead (`Connection` is not HTTP/2's).
async fn close_when_draining(
    State(draining): State<Arc<AtomicBool>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let http1 = request.version() < axum::http::Version::HTTP_2;
    let mut response = next.run(request).await;
    if http1 && draining.load(Ordering::SeqCst) {
        response.headers_mut().insert(header::CONNECTION, axum::http::HeaderValue::from_static("close"));
    }
    response
}

/// The plain-HTTP routes: `/healthz`, `/readyz`, `/metrics`.
pub fn health_router(state: AppState) -> Router {
    health(state).router()
}

/// What `/readyz` and `/metrics` answer: the caches' state and the webhook's metrics.
pub fn health(state: AppState) -> Health {
    let scraped = state.clone();
    Health::new(move || std::future::ready(readiness(&state)), move || Ok(scrape(&scraped)))
}

fn readiness(state: &AppState) -> Readiness {
    if state.shutting_down.load(Ordering::SeqCst) {
        return Readiness::NotReady("shutting down".into());
    }
    if state.caches.is_synced() {
        // Ready while watches fail: the caches still answer (the API server may be down, and a
        // webhook taken out of service would fail every admission); the body says how stale.
        let stale = state.caches.freshness.stale(std::time::Instant::now());
        if stale.is_empty() {
            return Readiness::ok();
        }
        let list: Vec<String> = stale.iter().map(|(s, d)| format!("{} ({}s)", s.as_str(), d.as_secs())).collect();
        let oldest = stale.iter().map(|(_, d)| d.as_secs()).max().unwrap_or(0);
        let body =
            format!("ok; watches failing, answering from caches unconfirmed for up to {oldest}s: {}", list.join(", "));
        Readiness::Ready(body.into())
    } else {
        let waiting = state.caches.unsynced().join(", ");
        Readiness::NotReady(format!("caches not synced: {waiting}").into())
    }
}

/// The metrics text, with the cache gauges brought up to date first.
fn scrape(state: &AppState) -> String {
    {
        let s = state.caches.read();
        let gauge = |cache: &'static str, n: usize| {
            state.metrics.cache_objects.get_or_create(&crate::metrics::CacheLabels { cache }).set(n as i64);
        };
        gauge("namespaces", s.namespaces.len());
        gauge("clusterproviders", s.cluster_providers.len());
        gauge("clustersecretstores", s.cluster_secret_stores.len());
        gauge("clustergenerators", s.cluster_generators.len());
        gauge("providers", s.providers.values().map(|p| p.len()).sum());
        gauge("storerefs", s.refs.len());
    }
    let stale = state.caches.freshness.stale(std::time::Instant::now());
    for source in crate::cache::Source::ALL {
        let age = stale.iter().find(|(s, _)| *s == source).map_or(0.0, |(_, d)| d.as_secs_f64());
        state
            .metrics
            .cache_stale_seconds
            .get_or_create(&crate::metrics::CacheLabels { cache: source.as_str() })
            .set(age);
    }
    state.metrics.encode()
}

async fn not_found() -> Response {
    let message = "no such endpoint: use POST /validate or POST /mutate";
    (StatusCode::NOT_FOUND, axum::Json(serde_json::json!({ "error": message }))).into_response()
}

async fn validate_handler(State(state): State<AppState>, ReviewBody(body): ReviewBody) -> Response {
    review(state, Mode::Validate, &body).await
}

async fn mutate_handler(State(state): State<AppState>, ReviewBody(body): ReviewBody) -> Response {
    review(state, Mode::Mutate, &body).await
}

/// Answers a decoded review from the caches, synchronously. This is what the fuzz target and
/// the randomized tests drive.
pub fn answer(mode: Mode, decoded: &Decoded, caches: &Caches) -> (String, Decision) {
    match decoded {
        Decoded::Reject { uid, message } => (uid.clone(), Decision::deny(400, message.clone())),
        Decoded::Request(req) => {
            let decision = match mode {
                Mode::Validate => crate::validate::validate(req, &caches.read()),
                Mode::Mutate => crate::mutate::mutate(req, &caches.read()),
            };
            (req.uid.clone(), decision)
        }
    }
}

/// Decodes and answers a body synchronously: a review as JSON bytes, or why it is no review.
pub fn handle_body(mode: Mode, body: &[u8], caches: &Caches) -> Result<Vec<u8>, BadRequest> {
    let decoded = decode(body)?;
    let (uid, decision) = answer(mode, &decoded, caches);
    Ok(encode(&uid, &decision))
}

/// One review: decode, wait briefly for a namespace the watch has not delivered yet, answer
/// from the caches. The layers around it bound it and record it.
async fn review(state: AppState, mode: Mode, body: &[u8]) -> Response {
    let decoded = match decode(body) {
        Ok(d) => d,
        Err(BadRequest(message)) => return rejected(StatusCode::BAD_REQUEST, message),
    };
    // A namespace created a moment ago may not have reached the watch yet: wait for it
    // briefly instead of deciding on missing labels.
    if mode == Mode::Validate
        && let Decoded::Request(r) = &decoded
        && is_write(r)
        && Kind::of(r).is_some_and(Kind::uses_namespace_labels)
        && !r.namespace().is_empty()
    {
        state.caches.wait_for_namespace(r.namespace(), state.limits.namespace_wait).await;
    }
    let (uid, decision) = answer(mode, &decoded, &state.caches);
    let (kind, namespace, operation) = match &decoded {
        Decoded::Request(r) => (r.kind.kind.clone(), r.namespace().to_string(), r.operation_name().to_string()),
        Decoded::Reject { .. } => Default::default(),
    };
    let reviewed = Reviewed {
        webhook: mode.as_str(),
        uid: uid.clone(),
        kind,
        namespace,
        operation,
        decision: decision.label(),
        message: decision.message.clone().unwrap_or_default(),
        warnings: decision.warnings.len(),
    };
    let mut response = ([(header::CONTENT_TYPE, "application/json")], encode(&uid, &decision)).into_response();
    response.extensions_mut().insert(reviewed);
    response
}

/// Serves `router` over TLS on `listener` until `shutdown` resolves, then drains in-flight
/// requests for up to `grace`.
pub async fn serve_tls(
    listener: TcpListener,
    tls: Arc<ServerConfig>,
    router: Router,
    handshake_timeout: Duration,
    shutdown: impl Future<Output = ()>,
    grace: Duration,
) {
    let acceptor = TlsAcceptor::from(tls);
    let graceful = GracefulShutdown::new();
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    // A client that never finishes sending its headers is dropped instead of holding a task.
    builder.http1().timer(TokioTimer::new()).header_read_timeout(Duration::from_secs(30));
    builder.http2().timer(TokioTimer::new()).keep_alive_interval(Duration::from_secs(30));
    // What a stream may have sent and not yet had read: a review waiting for the in-flight
    // budget (see `shed`) holds at most this much of its body in memory.
    builder.http2().initial_stream_window_size(H2_STREAM_WINDOW);
    tokio::pin!(shutdown);
    loop {
        let (tcp, peer): (tokio::net::TcpStream, SocketAddr) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let service = TowerToHyperService::new(router.clone());
        let builder = builder.clone();
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let tls = match tokio::time::timeout(handshake_timeout, acceptor.accept(tcp)).await {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => {
                    tracing::debug!(%peer, error = %e, "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!(%peer, "TLS handshake timed out");
                    return;
                }
            };
            let conn = builder.serve_connection_with_upgrades(TokioIo::new(tls), service).into_owned();
            if let Err(e) = watcher.watch(conn).await {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    tracing::info!("draining in-flight reviews");
    if tokio::time::timeout(grace, graceful.shutdown()).await.is_err() {
        tracing::warn!(?grace, "in-flight reviews did not finish in time");
    }
}
