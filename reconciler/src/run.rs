//! Process wiring: logging, the operations server, leader election, the one set of caches every
//! controller shares, the client manager, the controllers, and an orderly shutdown.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use keyward_crds::{ClusterExternalSecret, ClusterPushSecret};
use kube::Client;
use kube::runtime::watcher;
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

use crate::caches::{self, Caches};
use crate::cli::Cli;
use crate::clientmanager::{
    BreakerConfig, CallSettings, ClientManager, KubeLookup, ManagerConfig, PoolConfig, RetryPolicy, TonicConnector,
};
use crate::context::{self, Context, GENERIC_TARGETS_OFF, Reporter, Settings};
use crate::externalsecret::target::HashKey;
use crate::fanout;
use crate::metrics::Metrics;
use keyward_process::health::{self, Health, Readiness};
use keyward_process::lease::{LeaseLock, default_identity};
use keyward_process::{JsonLayout, LogStream, LogStyle, init_logging, shutdown_token};

/// Label that assigns an object to one reconciler instance.
pub const CONTROLLER_CLASS_LABEL: &str = "external-secrets.io/controller-class";

/// The reconciler's log lines: on stdout, JSON fields under `fields` with the spans of the
/// reconcile they belong to.
const LOG_STYLE: LogStyle = LogStyle {
    default_filter: "info,kube_runtime=warn",
    stream: LogStream::Stdout,
    json: JsonLayout::Nested { span_list: true },
};

/// Runs the reconciler until a signal arrives or leadership is lost.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    // One crypto provider for the whole process (kube client and provider channels).
    let _ = rustls::crypto::ring::default_provider().install_default();
    init_logging(&cli.log, LOG_STYLE);
    cli.hash_key().map_err(anyhow::Error::msg)?;
    cli.generic_targets().map_err(anyhow::Error::msg)?;

    let cancel = shutdown_token();
    let client = Client::try_default().await.context("connecting to the Kubernetes API")?;

    let metrics = Arc::new(Metrics::default());
    let mut registry = Registry::default();
    metrics.register(&mut registry);
    keyward_process::metrics::register_process(&mut registry, "reconciler", env!("CARGO_PKG_VERSION"));
    let identity = cli.identity.clone().unwrap_or_else(default_identity);
    let lease_namespace = cli.lease_namespace().unwrap_or_else(|| client.default_namespace().to_string());
    let mut elector = LeaseLock::new(client.clone(), &lease_namespace, &cli.lease_name, &identity, cli.lease_duration);
    if cli.leader_elect {
        elector = elector.with_status(keyward_process::metrics::register_leader_status(&mut registry, &cli.lease_name));
    }
    let ready = Arc::new(AtomicBool::new(false));
    let http = serve_operations(cli.health_listen, registry, ready.clone(), cancel.clone()).await?;

    // Standbys are ready: they are healthy and waiting for the lease.
    ready.store(true, Ordering::Relaxed);
    // Leadership terms: a leader that could not renew its Lease (an API server outage longer
    // than two thirds of the lease) stops its controllers and watches and waits to lead again,
    // in the same process, with fresh caches; only a signal ends the loop.
    loop {
        if cli.leader_elect {
            tracing::info!(%identity, lease = %cli.lease_name, namespace = %lease_namespace, "waiting for leadership");
            if !elector.acquire(cancel.cancelled()).await {
                break;
            }
            tracing::info!(%identity, "leading");
        }
        match lead(&cli, &client, &metrics, &identity, &elector, &cancel).await {
            Term::Signalled => break,
            Term::Lost => tracing::warn!(%identity, "leadership lost; controllers stopped, waiting to lead again"),
        }
    }
    cancel.cancel();
    let _ = http.await;
    tracing::info!("stopped");
    Ok(())
}

/// Starts the operations server: `/healthz`, `/readyz` (initialised: leading, or standing by as
/// a healthy follower) and `/metrics`, until `cancel` fires.
async fn serve_operations(
    addr: std::net::SocketAddr,
    registry: Registry,
    ready: Arc<AtomicBool>,
    cancel: CancellationToken,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| format!("binding {addr}"))?;
    tracing::info!(addr = %listener.local_addr()?, "operations server listening");
    let health = Health::new(
        move || std::future::ready(Readiness::when(ready.load(Ordering::Relaxed), "starting")),
        move || health::encode(&registry),
    );
    Ok(tokio::spawn(async move {
        if let Err(e) = health::serve(listener, health.router(), async move { cancel.cancelled().await }).await {
            tracing::error!(error = %e, "operations server failed");
        }
    }))
}

/// How a leadership term ended.
enum Term {
    /// A shutdown signal.
    Signalled,
    /// The Lease could not be renewed, or another instance took it.
    Lost,
}

/// One leadership term: caches, client manager and controllers, until a signal or the loss of
/// the Lease; everything it started is stopped when it returns.
async fn lead(
    cli: &Cli,
    client: &Client,
    metrics: &Arc<Metrics>,
    identity: &str,
    elector: &LeaseLock,
    cancel: &CancellationToken,
) -> Term {
    let lost = CancellationToken::new();
    // Released only after the controllers stopped, so two leaders never overlap.
    let release = CancellationToken::new();
    let holder = if cli.leader_elect {
        let (elector, release, lost) = (elector.clone(), release.clone(), lost.clone());
        Some(tokio::spawn(async move {
            elector.hold(release.cancelled()).await;
            lost.cancel();
        }))
    } else {
        None
    };
    // Stop on a signal or when leadership is lost.
    let stop = CancellationToken::new();
    {
        let (stop, cancel, lost) = (stop.clone(), cancel.clone(), lost.clone());
        tokio::spawn(async move {
            tokio::select! {
                _ = cancel.cancelled() => {}
                _ = lost.cancelled() => {}
            }
            stop.cancel();
        });
    }

    let class_watch = match &cli.controller_class {
        Some(class) => watcher::Config::default().labels(&format!("{CONTROLLER_CLASS_LABEL}={class}")),
        None => watcher::Config::default(),
    };

    // One set of caches for every controller: built here, one watch per kind (caches/).
    let mut caches = Caches::default();
    let lookup = KubeLookup::new(client.clone())
        .with_stores(
            caches.providers.store(),
            caches.cluster_providers.store(),
            caches.tls_secrets.store(),
            caches.namespaces.store(),
        )
        .with_secret_stores(caches.secret_stores.store(), caches.cluster_secret_stores.store());
    let manager = Arc::new(
        ClientManager::new(
            Arc::new(lookup),
            Box::new(TonicConnector::default()),
            ManagerConfig {
                pool: PoolConfig { idle_timeout: cli.pool_idle_timeout, max_lifetime: cli.pool_max_lifetime },
                breaker: BreakerConfig { failure_threshold: cli.breaker_threshold, cooldown: cli.breaker_cooldown },
                call: CallSettings {
                    retry: RetryPolicy { max_attempts: cli.call_attempts.max(1), ..RetryPolicy::default() },
                    deadline: cli.call_timeout,
                },
                recovery_rate: cli.recovery_rate,
            },
            metrics.clone(),
        )
        .with_store_providers(cli.store_providers())
        .with_controller_class(cli.controller_class.clone()),
    );
    {
        let stop = stop.clone();
        tokio::spawn(manager.recovery().clone().run(async move { stop.cancelled().await }));
    }
    {
        let (manager, stop) = (manager.clone(), stop.clone());
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_secs(30)) => { manager.evict_idle(); }
                }
            }
        });
    }
    let ctx = Arc::new(Context::new(
        client.clone(),
        context::Caches {
            external_secrets: caches.external_secrets.store(),
            push_secrets: caches.push_secrets.store(),
            managed_secrets: caches.managed_secrets.store(),
        },
        manager.clone(),
        metrics.clone(),
        Reporter { controller: "keyward-reconciler".into(), instance: Some(identity.to_string()) },
        Settings {
            provider_check_interval: cli.provider_check_interval,
            error_backoff_base: cli.error_backoff,
            render_time_limit: cli.template_time_limit,
            render_slots: cli.template_render_slots,
            // Read and checked at start.
            hash_key: cli.hash_key().unwrap_or_else(|_| HashKey::of_process()),
            generic_targets: cli.generic_targets().unwrap_or(&GENERIC_TARGETS_OFF),
            ..Settings::default()
        },
    ));

    let shutdown = {
        let stop = stop.clone();
        async move { stop.cancelled().await }
    };
    let shutdown = futures::FutureExt::shared(Box::pin(shutdown));
    let class = cli.controller_class.clone();
    let es =
        crate::externalsecret::controller(&mut caches, ctx.clone(), class.clone(), cli.concurrency, shutdown.clone());
    let ps = crate::pushsecret::controller(&mut caches, ctx.clone(), cli.concurrency.min(16), shutdown.clone());
    let prov = crate::provider::controllers(&mut caches, ctx.clone(), class, shutdown.clone());
    let reload = crate::reload::controllers(&mut caches, client.clone(), cli.reload_debounce, shutdown.clone());
    // Its own watch, not waited for: a cluster whose CRDs predate GeneratorState only logs it.
    let states = crate::generators::state::controller(ctx.clone(), cli.watch_namespace.clone(), shutdown.clone());
    // A ClusterExternalSecret or ClusterPushSecret writes into any namespace: only an instance
    // that watches them all runs their controllers.
    let (ces, cps) = match &cli.watch_namespace {
        None => (
            Some(fanout::controller::<ClusterExternalSecret>(&mut caches, ctx.clone(), shutdown.clone())),
            Some(fanout::controller::<ClusterPushSecret>(&mut caches, ctx.clone(), shutdown.clone())),
        ),
        Some(ns) => {
            tracing::info!(
                namespace = %ns,
                "ClusterExternalSecret and ClusterPushSecret controllers off: this instance watches one namespace"
            );
            (None, None)
        }
    };
    let scope = caches::Scope {
        client: client.clone(),
        namespace: cli.watch_namespace.clone(),
        class: class_watch,
        workloads: cli.reload_workloads,
    };
    let (ready, _watches) = caches.start(&scope);
    tokio::select! {
        _ = ready.wait() => tracing::info!("caches listed"),
        _ = stop.cancelled() => {}
    }
    tracing::info!("controllers running");
    let stopped = |name: &'static str| move |_| tracing::info!(controller = name, "controller stopped");
    let controllers = async {
        use futures::FutureExt as _;
        futures::join!(
            es.map(stopped("externalsecret")),
            ps.map(stopped("pushsecret")),
            prov.map(stopped("provider")),
            reload.map(stopped("reload")),
            states.map(stopped("generatorstate")),
            async move {
                if let Some(ces) = ces {
                    ces.await;
                    tracing::info!(controller = "clusterexternalsecret", "controller stopped");
                }
            },
            async move {
                if let Some(cps) = cps {
                    cps.await;
                    tracing::info!(controller = "clusterpushsecret", "controller stopped");
                }
            },
        );
    };
    // In-flight reconciles get a grace period to finish; past it they are dropped (cancelled),
    // so the Lease is released and a standby takes over without waiting for its expiry.
    let grace = async {
        stop.cancelled().await;
        tokio::time::sleep(cli.shutdown_grace).await;
    };
    tokio::select! {
        _ = controllers => {}
        _ = grace => tracing::warn!(grace = ?cli.shutdown_grace, "controllers did not stop in time; exiting anyway"),
    }

    manager.close();
    let signalled = cancel.is_cancelled();
    release.cancel();
    if let Some(h) = holder {
        let _ = h.await;
    }
    if lost.is_cancelled() && !signalled { Term::Lost } else { Term::Signalled }
}
