//! Process wiring: logging, the operations server, leader election, caches, the client manager
//! and the four controllers, and an orderly shutdown.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::Context as _;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use keyward_crds::{ClusterProvider, ExternalSecret, Provider, PushSecret};
use kube::core::PartialObjectMeta;
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Api, Client};
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

use crate::cli::Cli;
use crate::clientmanager::{
    BreakerConfig, CallSettings, ClientManager, KubeLookup, ManagerConfig, PoolConfig, RetryPolicy, TLS_SECRET_NAME,
    TonicConnector,
};
use crate::context::{Context, Settings};
use crate::http::Ops;
use crate::leader::Elector;
use crate::metrics::Metrics;

/// Label that assigns an object to one reconciler instance.
pub const CONTROLLER_CLASS_LABEL: &str = "external-secrets.io/controller-class";

fn init_logging(format: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,kube_runtime=warn"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    if format == "json" {
        builder.json().init();
    } else {
        builder.init();
    }
}

fn shutdown_signal(cancel: CancellationToken) {
    tokio::spawn(async move {
        let ctrl_c = tokio::signal::ctrl_c();
        #[cfg(unix)]
        let term = async {
            if let Ok(mut s) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                s.recv().await;
            }
        };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term => {}
        }
        tracing::info!("shutting down");
        cancel.cancel();
    });
}

fn api<K>(client: &Client, namespace: &Option<String>) -> Api<K>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// Runs the reconciler until a signal arrives or leadership is lost.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    // One crypto provider for the whole process (kube client and provider channels).
    let _ = rustls::crypto::ring::default_provider().install_default();
    init_logging(&cli.log_format);

    let cancel = CancellationToken::new();
    shutdown_signal(cancel.clone());
    let client = Client::try_default().await.context("connecting to the Kubernetes API")?;

    let metrics = Arc::new(Metrics::default());
    let mut registry = Registry::default();
    metrics.register(&mut registry);
    let ops = Arc::new(Ops { registry, ready: Default::default() });
    let http = tokio::spawn(crate::http::serve(cli.metrics_listen, ops.clone(), cancel.clone()));

    let identity = cli.identity.clone().unwrap_or_else(|| format!("keyward-reconciler-{}", std::process::id()));
    let elector = Elector::new(client.clone(), &cli.lease_namespace, &cli.lease_name, &identity, cli.lease_duration);
    // Standbys are ready: they are healthy and waiting for the lease.
    ops.ready.store(true, Ordering::Relaxed);
    if cli.leader_elect {
        tracing::info!(%identity, lease = %cli.lease_name, "waiting for leadership");
        if !elector.acquire(&cancel).await {
            return Ok(());
        }
        tracing::info!(%identity, "leading");
    }
    let lost = CancellationToken::new();
    // Released only after the controllers stopped, so two leaders never overlap.
    let release = CancellationToken::new();
    let holder = if cli.leader_elect {
        let (elector, release, lost) = (elector.clone(), release.clone(), lost.clone());
        Some(tokio::spawn(async move {
            elector.hold(&release).await;
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

    // Small caches the client manager answers from: stores and the provider TLS Secrets
    // (selected by name, so no other Secret is cached).
    let (providers, pw) = reflector::store::<Provider>();
    let (clusters, cw) = reflector::store::<ClusterProvider>();
    let (tls, tw) = reflector::store::<Secret>();
    let tls_api: Api<Secret> = Api::all(client.clone());
    let drive = |s: futures::stream::BoxStream<'static, ()>| tokio::spawn(s.for_each(|_| async {}));
    drive(
        watcher(api::<Provider>(&client, &cli.namespace), watcher::Config::default())
            .default_backoff()
            .reflect(pw)
            .map(|_| ())
            .boxed(),
    );
    drive(
        watcher(Api::<ClusterProvider>::all(client.clone()), watcher::Config::default())
            .default_backoff()
            .reflect(cw)
            .map(|_| ())
            .boxed(),
    );
    drive(
        watcher(tls_api, watcher::Config::default().fields(&format!("metadata.name={TLS_SECRET_NAME}")))
            .default_backoff()
            .reflect(tw)
            .map(|_| ())
            .boxed(),
    );
    let lookup = KubeLookup::new(client.clone()).with_stores(providers, clusters, tls);
    let manager = Arc::new(ClientManager::new(
        Arc::new(lookup),
        Box::new(TonicConnector::default()),
        ManagerConfig {
            pool: PoolConfig { idle_timeout: cli.pool_idle_timeout, max_lifetime: cli.pool_max_lifetime },
            breaker: BreakerConfig { failure_threshold: cli.breaker_threshold, cooldown: cli.breaker_cooldown },
            call: CallSettings {
                retry: RetryPolicy { max_attempts: cli.call_attempts.max(1), ..RetryPolicy::default() },
                deadline: cli.call_timeout,
            },
        },
        metrics.clone(),
    ));
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
    let recorder = Recorder::new(
        client.clone(),
        Reporter { controller: "keyward-reconciler".into(), instance: Some(identity.clone()) },
    );
    let ctx = Arc::new(Context::new(
        client.clone(),
        manager.clone(),
        metrics.clone(),
        recorder,
        Settings {
            provider_check_interval: cli.provider_check_interval,
            error_backoff_base: cli.error_backoff,
            ..Settings::default()
        },
    ));

    let shutdown = {
        let stop = stop.clone();
        async move { stop.cancelled().await }
    };
    let shutdown = futures::FutureExt::shared(Box::pin(shutdown));
    let es = crate::externalsecret::run(
        ctx.clone(),
        api::<ExternalSecret>(&client, &cli.namespace),
        api::<PartialObjectMeta<Secret>>(&client, &cli.namespace),
        class_watch.clone(),
        cli.concurrency,
        shutdown.clone(),
    );
    let ps = crate::pushsecret::run(
        ctx.clone(),
        api::<PushSecret>(&client, &cli.namespace),
        class_watch.clone(),
        cli.concurrency.min(16),
        shutdown.clone(),
    );
    let prov = crate::provider::run(
        ctx.clone(),
        crate::provider::Scope { client: client.clone(), namespace: cli.namespace.clone(), watch: class_watch },
        shutdown.clone(),
    );
    let reload = crate::reload::run(client.clone(), cli.namespace.clone(), cli.reload_debounce, shutdown.clone());
    tracing::info!("controllers running");
    let stopped = |name: &'static str| move |_| tracing::info!(controller = name, "controller stopped");
    let controllers = async {
        use futures::FutureExt as _;
        futures::join!(
            es.map(stopped("externalsecret")),
            ps.map(stopped("pushsecret")),
            prov.map(stopped("provider")),
            reload.map(stopped("reload")),
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
    cancel.cancel();
    let _ = http.await;
    if lost.is_cancelled() && !signalled {
        anyhow::bail!("leadership lost");
    }
    tracing::info!("stopped");
    Ok(())
}
