//! The operations server: plain HTTP with `/healthz` (the process is alive), `/readyz` (what
//! the binary's readiness check says) and `/metrics` (Prometheus' text format 0.0.4, what
//! controller-runtime serves too), served until a shutdown future resolves.

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;

/// The content type of `/metrics`: Prometheus' text format, version 0.0.4. Not OpenMetrics,
/// which requires every counter to end in `_total`: External Secrets' dashboards query some
/// counters by names without it (see [`crate::metrics::Unsuffixed`]).
pub const METRICS_CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// The answer of `/readyz`: 200 or 503, with a short text body saying why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Readiness {
    /// Ready (200); the body is `ok` or a note about degraded operation.
    Ready(Cow<'static, str>),
    /// Not ready (503); the body says why.
    NotReady(Cow<'static, str>),
}

impl Readiness {
    /// Ready, with the body `ok`.
    pub fn ok() -> Self {
        Readiness::Ready(Cow::Borrowed("ok"))
    }

    /// `ok` when `ready`, else not ready with `reason`.
    pub fn when(ready: bool, reason: &'static str) -> Self {
        if ready { Readiness::ok() } else { Readiness::NotReady(Cow::Borrowed(reason)) }
    }
}

impl IntoResponse for Readiness {
    fn into_response(self) -> Response {
        match self {
            Readiness::Ready(body) => (StatusCode::OK, body).into_response(),
            Readiness::NotReady(body) => (StatusCode::SERVICE_UNAVAILABLE, body).into_response(),
        }
    }
}

type CheckFuture = Pin<Box<dyn Future<Output = Readiness> + Send>>;
type Check = Arc<dyn Fn() -> CheckFuture + Send + Sync>;
type Scrape = Arc<dyn Fn() -> Result<String, std::fmt::Error> + Send + Sync>;

/// What the operations routes answer from: a readiness check, run on every `/readyz`, and the
/// metrics text, produced on every `/metrics`.
#[derive(Clone)]
pub struct Health {
    check: Check,
    scrape: Scrape,
}

impl std::fmt::Debug for Health {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Health").finish_non_exhaustive()
    }
}

impl Health {
    /// Routes answered by `check` (readiness) and `scrape` (the metrics text; an error answers
    /// 500).
    pub fn new<C, F, S>(check: C, scrape: S) -> Self
    where
        C: Fn() -> F + Send + Sync + 'static,
        F: Future<Output = Readiness> + Send + 'static,
        S: Fn() -> Result<String, std::fmt::Error> + Send + Sync + 'static,
    {
        Health { check: Arc::new(move || Box::pin(check())), scrape: Arc::new(scrape) }
    }

    /// What `/readyz` answers now.
    pub(crate) async fn readiness(&self) -> Readiness {
        (self.check)().await
    }

    /// What `/metrics` answers now.
    pub(crate) fn metrics(&self) -> Response {
        metrics(&self.scrape)
    }

    /// `/healthz`, `/readyz` and `/metrics`; a binary with more operations routes merges them
    /// into this router.
    pub fn router(self) -> Router {
        let Health { check, scrape } = self;
        Router::new()
            .route("/healthz", get(|| async { "ok" }))
            .route("/readyz", get(move || check()))
            .route("/metrics", get(move || std::future::ready(metrics(&scrape))))
    }
}

fn metrics(scrape: &Scrape) -> Response {
    match scrape() {
        Ok(body) => ([(header::CONTENT_TYPE, METRICS_CONTENT_TYPE)], body).into_response(),
        Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, "encoding the metrics failed").into_response(),
    }
}

/// Encodes a registry in Prometheus' text format (0.0.4); untyped families, which in Keyward
/// are only [`crate::metrics::Unsuffixed`] counters, are declared `counter`.
pub fn encode(registry: &Registry) -> Result<String, std::fmt::Error> {
    // With 10,000 objects the text is a few MiB; grown by doubling, it would briefly hold the
    // old and the new buffer at each step. Sized from the previous scrape (a process has one
    // registry), it is one allocation.
    static LAST_LEN: AtomicUsize = AtomicUsize::new(0);
    let mut out = String::with_capacity(LAST_LEN.load(Ordering::Relaxed) / 16 * 17);
    prometheus_client::encoding::prometheus_text::encode(&mut out, registry)?;
    LAST_LEN.store(out.len(), Ordering::Relaxed);
    // `untyped` and `counter` have the same length: patched in place, one pass over the
    // declaration lines.
    let untyped: Vec<usize> = out
        .match_indices("# TYPE ")
        .filter(|(at, _)| *at == 0 || out.as_bytes()[at - 1] == b'\n')
        .filter_map(|(at, _)| {
            let end = out[at..].find('\n').map_or(out.len(), |n| at + n);
            out[at..end].ends_with(" untyped").then(|| end - "untyped".len())
        })
        .collect();
    for at in untyped {
        out.replace_range(at..at + "untyped".len(), "counter");
    }
    Ok(out)
}

/// Serves `router` on `listener` until `shutdown` resolves, then lets in-flight requests finish.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router).with_graceful_shutdown(shutdown).await
}

#[cfg(test)]
#[path = "health_tests.rs"]
mod tests;
