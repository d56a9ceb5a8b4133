//! The one way a Keyward server process starts and stops: [`Runtime::builder`] installs the
//! rustls crypto provider, sets up logging in the one layout, binds the admin listener
//! (`/healthz`, `/readyz`, `/metrics`) and listens for SIGTERM and SIGINT; [`Runtime::run`] (or,
//! with a Lease, `Runtime::run_leading`) runs the binary's work until a signal and then gives it
//! a bounded drain.
//!
//! ```no_run
//! # async fn main_body(log: keyward_process::LogArgs) -> Result<(), Box<dyn std::error::Error>> {
//! let rt = keyward_process::Runtime::builder("example")
//!     .log(&log, "info")
//!     .admin("0.0.0.0:8080".parse()?)
//!     .drain(std::time::Duration::from_secs(10))
//!     .build()
//!     .await?;
//! rt.admin().serve(keyward_process::Health::new(
//!     || std::future::ready(keyward_process::Readiness::ok()),
//!     || Ok(String::new()),
//! ));
//! rt.run(|stop| async move { stop.cancelled().await }).await;
//! # Ok(()) }
//! ```

use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Duration;

use axum::Router;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::health::{Health, Readiness};
use crate::log::{LogArgs, LogStyle};

/// Why a process could not start.
#[derive(Debug)]
pub enum StartError {
    /// Another rustls crypto provider was installed before the runtime's (ring).
    CryptoProvider,
    /// The admin listener could not be bound.
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The I/O error.
        source: std::io::Error,
    },
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::CryptoProvider => f.write_str("a rustls crypto provider was installed before Keyward's (ring)"),
            StartError::Bind { addr, source } => write!(f, "cannot listen on {addr}: {source}"),
        }
    }
}

impl std::error::Error for StartError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StartError::Bind { source, .. } => Some(source),
            StartError::CryptoProvider => None,
        }
    }
}

/// Installs rustls' ring provider for the whole process, once: later calls answer as the first
/// did. A provider installed by someone else first is an error (the process would otherwise
/// run on a provider nobody chose).
pub fn install_crypto_provider() -> Result<(), StartError> {
    static OURS: OnceLock<bool> = OnceLock::new();
    let ours = *OURS.get_or_init(|| rustls::crypto::ring::default_provider().install_default().is_ok());
    if ours { Ok(()) } else { Err(StartError::CryptoProvider) }
}

/// How long the admin server gets to answer its last requests once the work has stopped.
const ADMIN_STOP: Duration = Duration::from_secs(2);

/// What a process is made of before it starts; see [`Runtime::builder`].
#[derive(Debug)]
pub struct Builder {
    component: &'static str,
    log: Option<(LogArgs, &'static str)>,
    admin: Option<SocketAddr>,
    drain: Duration,
}

impl Builder {
    /// Logs with `args` (`--log-format`, `--log-level`) in the one layout; `default_filter`
    /// applies when neither `--log-level` nor `RUST_LOG` is set.
    pub fn log(mut self, args: &LogArgs, default_filter: &'static str) -> Self {
        self.log = Some((args.clone(), default_filter));
        self
    }

    /// Serves `/healthz`, `/readyz` and `/metrics` on `addr` (plain HTTP) from start to exit.
    pub fn admin(mut self, addr: SocketAddr) -> Self {
        self.admin = Some(addr);
        self
    }

    /// How long the work may take to stop after a shutdown signal before it is dropped (the
    /// process exits anyway). 10 seconds when not set.
    pub fn drain(mut self, drain: Duration) -> Self {
        self.drain = drain;
        self
    }

    /// Installs the crypto provider, sets up logging, listens for SIGTERM and SIGINT and binds
    /// the admin listener. Call it inside the Tokio runtime, first thing in `main`.
    pub async fn build(self) -> Result<Runtime, StartError> {
        install_crypto_provider()?;
        if let Some((args, default_filter)) = &self.log {
            crate::log::init_logging(args, LogStyle::standard(default_filter));
        }
        let shutdown = crate::signal::shutdown_token();
        let admin = Admin::new(shutdown.clone());
        let admin_task = match self.admin {
            Some(addr) => {
                let listener = TcpListener::bind(addr).await.map_err(|source| StartError::Bind { addr, source })?;
                let local = listener.local_addr().unwrap_or(addr);
                tracing::info!(component = self.component, addr = %local, "admin server listening");
                *admin.addr.write().unwrap_or_else(|e| e.into_inner()) = Some(local);
                Some(admin.spawn(listener))
            }
            None => None,
        };
        Ok(Runtime { component: self.component, shutdown, admin, admin_task, drain: self.drain })
    }
}

/// A started process: its shutdown signal, its admin server and its drain bound.
#[derive(Debug)]
pub struct Runtime {
    component: &'static str,
    shutdown: CancellationToken,
    admin: Admin,
    admin_task: Option<AdminTask>,
    drain: Duration,
}

#[derive(Debug)]
struct AdminTask {
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Runtime {
    /// A process named `component` (in its logs) with nothing configured yet.
    pub fn builder(component: &'static str) -> Builder {
        Builder { component, log: None, admin: None, drain: Duration::from_secs(10) }
    }

    /// Cancelled on SIGTERM or SIGINT (or [`Runtime::shut_down`]).
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Starts shutting down as a signal would.
    pub fn shut_down(&self) {
        self.shutdown.cancel();
    }

    /// The admin server, to give it the binary's readiness and metrics.
    pub fn admin(&self) -> &Admin {
        &self.admin
    }

    /// Runs `work` with a token cancelled at shutdown. After shutdown starts, `work` has the
    /// drain bound to return; past it, it is dropped. Then the admin server stops.
    pub async fn run<F, Fut, T>(self, work: F) -> Option<T>
    where
        F: FnOnce(CancellationToken) -> Fut,
        Fut: Future<Output = T>,
    {
        let out = drained(work(self.shutdown.clone()), &self.shutdown, self.drain).await;
        self.stop_admin().await;
        out
    }

    async fn stop_admin(self) {
        // Work that ended on its own ends the process too: the probes say so from here on.
        self.shutdown.cancel();
        if let Some(AdminTask { stop, task }) = self.admin_task {
            stop.cancel();
            let _ = tokio::time::timeout(ADMIN_STOP, task).await;
        }
        tracing::info!(component = self.component, "stopped");
    }
}

/// Runs `work` until it ends, or, once `stop` is cancelled, for at most `drain` more.
async fn drained<T>(work: impl Future<Output = T>, stop: &CancellationToken, drain: Duration) -> Option<T> {
    tokio::pin!(work);
    tokio::select! {
        out = &mut work => return Some(out),
        _ = stop.cancelled() => {}
    }
    tracing::info!(?drain, "shutting down: letting in-flight work finish");
    match tokio::time::timeout(drain, work).await {
        Ok(out) => Some(out),
        Err(_) => {
            tracing::warn!(?drain, "in-flight work did not finish in time; exiting anyway");
            None
        }
    }
}

/// The admin routes: `/healthz` always, `/readyz` and `/metrics` from the [`Health`] the binary
/// hands over once it can answer (until then `/readyz` is 503 `starting`), and `/readyz` 503
/// `shutting down` from the shutdown signal on, whatever the binary says.
#[derive(Clone, Debug)]
pub struct Admin {
    health: Arc<RwLock<Option<Health>>>,
    addr: Arc<RwLock<Option<SocketAddr>>>,
    shutdown: CancellationToken,
}

impl Admin {
    fn new(shutdown: CancellationToken) -> Self {
        Admin { health: Arc::default(), addr: Arc::default(), shutdown }
    }

    /// Answers `/readyz` and `/metrics` from `health` from now on.
    pub fn serve(&self, health: Health) {
        *self.health.write().unwrap_or_else(|e| e.into_inner()) = Some(health);
    }

    /// The address the admin server listens on, when it was configured.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        *self.addr.read().unwrap_or_else(|e| e.into_inner())
    }

    fn current(&self) -> Option<Health> {
        self.health.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The routes, answered from whatever [`Health`] is set at each request.
    pub fn router(&self) -> Router {
        let (ready, scrape) = (self.clone(), self.clone());
        Router::new().route("/healthz", get(|| async { "ok" })).route("/readyz", get(move || ready.readyz())).route(
            "/metrics",
            get(move || {
                let health = scrape.current();
                async move {
                    match health {
                        Some(h) => h.metrics(),
                        None => (StatusCode::SERVICE_UNAVAILABLE, "starting").into_response(),
                    }
                }
            }),
        )
    }

    async fn readyz(self) -> Response {
        if self.shutdown.is_cancelled() {
            return Readiness::NotReady("shutting down".into()).into_response();
        }
        match self.current() {
            Some(h) => h.readiness().await.into_response(),
            None => Readiness::NotReady("starting".into()).into_response(),
        }
    }

    fn spawn(&self, listener: TcpListener) -> AdminTask {
        let stop = CancellationToken::new();
        let stopped = stop.clone();
        let router = self.router();
        let task = tokio::spawn(async move {
            if let Err(e) = crate::health::serve(listener, router, async move { stopped.cancelled().await }).await {
                tracing::error!(error = %e, "admin server failed");
            }
        });
        AdminTask { stop, task }
    }
}

#[cfg(feature = "lease")]
mod leading;

#[cfg(test)]
#[path = "runtime_tests.rs"]
mod tests;
