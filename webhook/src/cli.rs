//! Command line and process wiring of the `keyward-webhook` binary.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use keyward_crds::rules::GenericTargets;
use keyward_process::{LogArgs, Runtime, parse_duration};
use tokio::net::TcpListener;

use crate::cache::Caches;
use crate::metrics::Metrics;
use crate::server::{AppState, Limits, admission_router, health, serve_tls};
use crate::tls::{ReloadingCert, server_config};

/// The webhook's log filter when neither `--log-level` nor `RUST_LOG` is set; the layout is
/// every Keyward process's (`keyward_process::Runtime`).
pub const DEFAULT_LOG_FILTER: &str = "info,kube=warn,hyper=warn,rustls=warn";

/// How much longer than the shutdown delay and grace the process waits for the admission
/// server before it exits anyway.
const DRAIN_MARGIN: Duration = Duration::from_secs(2);

/// Keyward's admission webhook: validates and defaults ExternalSecrets, PushSecrets,
/// Providers, ClusterProviders and provider configurations.
#[derive(Parser, Debug, Clone)]
#[command(name = "keyward-webhook", version)]
pub struct Args {
    /// HTTPS address of the admission endpoints (POST /validate, POST /mutate). 10250, as
    /// upstream's: the port a GKE private cluster's control plane may reach on nodes by default.
    #[arg(long, env = "KEYWARD_LISTEN", default_value = "0.0.0.0:10250")]
    pub listen: SocketAddr,
    /// Plain HTTP address of /healthz, /readyz and /metrics.
    #[arg(long, env = "KEYWARD_HEALTH_LISTEN", default_value = "0.0.0.0:8081")]
    pub health_listen: SocketAddr,
    /// Directory with tls.crt and tls.key (a mounted Secret); reloaded when it changes.
    #[arg(long, env = "KEYWARD_TLS_DIR")]
    pub tls_dir: PathBuf,
    #[command(flatten)]
    pub log: LogArgs,
    /// How often the TLS directory is checked for a new certificate.
    #[arg(long, env = "KEYWARD_TLS_RELOAD_INTERVAL", value_parser = parse_duration, default_value = "2s")]
    pub tls_reload_interval: Duration,
    /// Largest accepted admission request body, in bytes.
    #[arg(long, env = "KEYWARD_MAX_BODY_BYTES", default_value_t = 7 * 1024 * 1024)]
    pub max_body_bytes: usize,
    /// Request bytes under review at once; requests past it are answered 429 (retried by the
    /// API server) without being read, which bounds the memory of bursts of large reviews.
    #[arg(long, env = "KEYWARD_MAX_IN_FLIGHT_BYTES", default_value_t = crate::server::DEFAULT_IN_FLIGHT_BYTES)]
    pub max_in_flight_bytes: usize,
    /// Time budget of one review.
    #[arg(long, env = "KEYWARD_REQUEST_TIMEOUT", value_parser = parse_duration, default_value = "8s")]
    pub request_timeout: Duration,
    /// How long a review waits for a just-created namespace to reach the cache.
    #[arg(long, env = "KEYWARD_NAMESPACE_WAIT", value_parser = parse_duration, default_value = "2s")]
    pub namespace_wait: Duration,
    /// After a shutdown signal, keep accepting reviews this long while reporting not ready, so
    /// the Service stops routing to this Pod before it stops listening (a review sent to a
    /// closed port would fail, and Keyward's own kinds fail closed).
    #[arg(long, env = "KEYWARD_SHUTDOWN_DELAY", value_parser = parse_duration, default_value = "5s")]
    pub shutdown_delay: Duration,
    /// Namespaces whose own stores and configurations may use a provider's identity (IRSA, the
    /// provider's ServiceAccount), comma-separated, or `*` for every namespace, as upstream lets
    /// every SecretStore; the providers take the same list. Empty (the default): only the
    /// operator's stores may.
    #[arg(
        long,
        env = "KEYWARD_PROVIDER_IDENTITY_NAMESPACES",
        default_value = "",
        value_parser = keyward_crds::rules::ProviderIdentityNamespaces::parse
    )]
    pub provider_identity_namespaces: keyward_crds::rules::ProviderIdentityNamespaces,
    #[command(flatten)]
    pub generic_targets: keyward_process::GenericTargetArgs,
    /// How long shutdown waits for in-flight reviews.
    #[arg(long, env = "KEYWARD_SHUTDOWN_GRACE", value_parser = parse_duration, default_value = "20s")]
    pub shutdown_grace: Duration,
}

impl Args {
    /// The process runtime these flags describe: logging, the admin server on
    /// `--health-listen`, and a drain as long as the shutdown delay and grace.
    pub async fn runtime(&self) -> anyhow::Result<Runtime> {
        Ok(Runtime::builder("keyward-webhook")
            .log(&self.log, DEFAULT_LOG_FILTER)
            .admin(self.health_listen)
            .drain(self.shutdown_delay + self.shutdown_grace + DRAIN_MARGIN)
            .build()
            .await?)
    }
}

/// Runs the webhook in `rt` until SIGTERM or Ctrl-C.
pub async fn run(args: Args, rt: Runtime) -> anyhow::Result<()> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let metrics = Arc::new(Metrics::new());
    let cert = ReloadingCert::load(&args.tls_dir, provider.clone())
        .with_context(|| format!("loading the serving certificate from {}", args.tls_dir.display()))?;
    cert.spawn_reloader(args.tls_reload_interval, metrics.clone());
    let tls = Arc::new(server_config(provider, cert)?);

    let client = kube::Client::try_default().await.context("connecting to the Kubernetes API")?;
    let caches = Arc::new(Caches::new());
    caches.write().provider_identity = args.provider_identity_namespaces.clone();
    let generic = &args.generic_targets;
    caches.write().generic_targets =
        GenericTargets::from_flags(generic.generic_targets, &generic.generic_target_resources)
            .map_err(anyhow::Error::msg)?;
    crate::watch::spawn_watches(client, caches.clone());

    let mut state = AppState::new(caches, metrics);
    state.limits = Limits {
        max_body_bytes: args.max_body_bytes,
        request_timeout: args.request_timeout,
        namespace_wait: args.namespace_wait,
        in_flight_bytes: args.max_in_flight_bytes,
        ..Limits::default()
    };

    rt.admin().serve(health(state.clone()));
    let listener = TcpListener::bind(args.listen).await.with_context(|| format!("binding {}", args.listen))?;
    let health_addr = rt.admin().local_addr();
    tracing::info!(listen = %listener.local_addr()?, health = ?health_addr, "keyward-webhook serving");

    let shutting_down = state.shutting_down.clone();
    let delay = args.shutdown_delay;
    rt.run(|stop| async move {
        let shutdown = async move {
            stop.cancelled().await;
            shutting_down.store(true, Ordering::SeqCst);
            tracing::info!(?delay, "shutdown requested; not ready, still serving until the delay has passed");
            tokio::time::sleep(delay).await;
            tracing::info!("no longer accepting connections; draining in-flight reviews");
        };
        let handshake_timeout = state.limits.handshake_timeout;
        serve_tls(listener, tls, admission_router(state), handshake_timeout, shutdown, args.shutdown_grace).await;
    })
    .await;
    Ok(())
}
