//! The operations port: `/healthz` (the process is alive), `/readyz` (initialised: leading, or
//! standing by as a healthy follower) and `/metrics`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

/// Shared state of the operations server.
pub struct Ops {
    /// Prometheus registry.
    pub registry: Registry,
    /// Set once the process is initialised.
    pub ready: AtomicBool,
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(ops): State<Arc<Ops>>) -> impl IntoResponse {
    if ops.ready.load(Ordering::Relaxed) {
        (StatusCode::OK, "ok")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "starting")
    }
}

async fn metrics(State(ops): State<Arc<Ops>>) -> impl IntoResponse {
    match crate::metrics::encode(&ops.registry) {
        Ok(body) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")],
            body,
        )
            .into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

/// Serves until `cancel` fires.
pub async fn serve(addr: SocketAddr, ops: Arc<Ops>, cancel: CancellationToken) -> std::io::Result<()> {
    let app = Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(ops);
    let listener = tokio::net::TcpListener::bind(addr).await?;
    tracing::info!(%addr, "operations server listening");
    axum::serve(listener, app).with_graceful_shutdown(async move { cancel.cancelled().await }).await
}
