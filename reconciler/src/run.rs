//! Process wiring: the operations server's readiness and metrics, leadership terms, the one set
//! of caches every controller shares, the client manager and the controllers. The process
//! runtime (crypto provider, logging, admin listener, shutdown drain, the Lease loop) is
//! `keyward_process::Runtime`, built in `main.rs` with [`runtime`].

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use keyward_crds::{ClusterExternalSecret, ClusterPushSecret};
use kube::runtime::watcher;
use kube::{Api, Client};
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

use crate::caches::{self, Caches};
use crate::class::CONTROLLER_CLASS_LABEL;
use crate::cli::Cli;
use crate::context::{self, Context, GENERIC_TARGETS_OFF, Reporter, Settings};
use crate::externalsecret::target::HashKey;
use crate::fanout;
use crate::metrics::Metrics;
use keyward_process::Runtime;
use keyward_process::health::{self, Health, Readiness};
use keyward_process::lease::{LeaseLock, default_identity};
use keyward_provider_client::{
    BreakerConfig, CallSettings, ClientManager, KubeLookup, ManagerConfig, PoolConfig, RetryPolicy, TonicConnector,
};

use crate::shard::{self, members::Timing};

/// The reconciler's log filter when neither `--log-level` nor `RUST_LOG` is set.
const DEFAULT_LOG_FILTER: &str = "info,kube_runtime=warn";

/// The process runtime of these flags: logging, the operations server on `--health-listen`, and
/// `--shutdown-grace` for in-flight reconciles after a signal or the loss of the Lease.
pub async fn runtime(cli: &Cli) -> anyhow::Result<Runtime> {
    Ok(Runtime::builder("keyward-reconciler")
        .log(&cli.log, DEFAULT_LOG_FILTER)
        .admin(cli.health_listen)
        .drain(cli.shutdown_grace)
        .build()
        .await?)
}

/// Runs the reconciler in `rt` until a signal arrives; a term that lost the Lease stops its
/// controllers and watches and waits to lead again.
pub async fn run(cli: Cli, rt: Runtime) -> anyhow::Result<()> {
    cli.hash_key().map_err(anyhow::Error::msg)?;
    cli.generic_targets().map_err(anyhow::Error::msg)?;
    if cli.shard && cli.watch_namespace.is_some() {
        anyhow::bail!(
            "--shard splits namespaces among replicas: it needs every namespace watched (no --watch-namespace)"
        );
    }
    if cli.shard && !cli.leader_elect {
        tracing::warn!("--shard with --leader-elect=false: every replica runs the cluster-scoped controllers");
    }
    let off = cli.controllers.off();
    if !off.is_empty() {
        tracing::info!(switched_off = ?off, "controllers switched off (--process-*=false): their objects are left alone");
    }

    let client = Client::try_default().await.context("connecting to the Kubernetes API")?;

    let metrics = Arc::new(Metrics::default());
    let mut registry = Registry::default();
    metrics.register(&mut registry);
    keyward_process::metrics::register_process(&mut registry, "reconciler", env!("CARGO_PKG_VERSION"));
    let identity = cli.identity.clone().unwrap_or_else(default_identity);
    let lease_namespace = cli.lease_namespace().unwrap_or_else(|| client.default_namespace().to_string());
    let elector = cli.leader_elect.then(|| {
        tracing::info!(lease = %cli.lease_name, namespace = %lease_namespace, "leader election");
        LeaseLock::new(client.clone(), &lease_namespace, &cli.lease_name, &identity, cli.lease_duration)
            .with_status(keyward_process::metrics::register_leader_status(&mut registry, &cli.lease_name))
    });
    // Standbys are ready: they are healthy and waiting for the lease.
    rt.admin().serve(Health::new(|| std::future::ready(Readiness::ok()), move || health::encode(&registry)));
    if !cli.shard {
        // Leadership terms, with fresh caches each: the runtime releases the Lease only after a
        // term's controllers stopped (or `--shutdown-grace` passed), so two leaders never overlap.
        rt.run_leading(elector, |stop| lead(&cli, &client, &metrics, &identity, Work::All, stop)).await;
        return Ok(());
    }
    // Sharded: membership terms (this replica's shard Lease) work its namespaces, leadership
    // terms the cluster-scoped rest; each Lease is released only after its term stopped.
    let group = cli.lease_name.clone();
    let member = LeaseLock::new(
        client.clone(),
        &lease_namespace,
        &shard::lease_name(&group, &identity),
        &identity,
        cli.shard_lease_duration,
    )
    .with_label(shard::SHARD_LABEL, &group);
    let timing = Timing { duration: cli.shard_lease_duration, renew: member.retry() };
    metrics.shard.enable();
    tracing::info!(lease = member.name(), namespace = %lease_namespace, "sharded: namespaces split among the replicas");
    let (tx, rx) = tokio::sync::watch::channel(shard::Assignment::default());
    let leases = Api::namespaced(client.clone(), &lease_namespace);
    let lock = member.clone();
    let members = |stop: CancellationToken| {
        let work = Work::Namespaced(shard::Shard::new(rx.clone()));
        let (leases, tx) = (leases.clone(), tx.clone());
        let (cli, client, metrics, identity, group, lock) = (&cli, &client, &metrics, &identity, &group, &lock);
        async move {
            futures::join!(
                shard::members::run(lock, leases, group, identity, timing, tx, stop.clone()),
                lead(cli, client, metrics, identity, work, stop),
            );
        }
    };
    futures::join!(
        rt.leading(Some(member), members),
        rt.leading(elector, |stop| lead(&cli, &client, &metrics, &identity, Work::Cluster, stop)),
    );
    rt.stop().await;
    Ok(())
}

/// What a term works.
#[derive(Clone)]
enum Work {
    /// Everything (unsharded: the leader).
    All,
    /// The ExternalSecrets and PushSecrets of this replica's share of the namespaces.
    Namespaced(shard::Shard),
    /// The cluster-scoped rest, while sharded: ClusterExternalSecrets, ClusterPushSecrets,
    /// Provider and store checks, generator states, workload rollouts.
    Cluster,
}

impl Work {
    fn namespaced(&self) -> bool {
        !matches!(self, Work::Cluster)
    }

    fn cluster(&self) -> bool {
        !matches!(self, Work::Namespaced(_))
    }

    fn shard(&self) -> Option<shard::Shard> {
        match self {
            Work::Namespaced(s) => Some(s.clone()),
            _ => None,
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Work::All => "all",
            Work::Namespaced(_) => "namespaced (sharded)",
            Work::Cluster => "cluster-scoped",
        }
    }
}

/// One term of `work`: caches, client manager and controllers, until `stop` (a signal or the
/// loss of the Lease); everything it started is stopped when it returns.
async fn lead(cli: &Cli, client: &Client, metrics: &Arc<Metrics>, identity: &str, work: Work, stop: CancellationToken) {
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
            metrics.client.clone(),
        )
        .with_store_providers(cli.store_providers())
        .with_controller_class(cli.controller_class.clone())
        .with_cluster_kinds(cli.controllers.cluster_kinds()),
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
    let ctx = Arc::new(
        Context::new(
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
        )
        .with_shard(work.shard()),
    );
    // Sharded: `shard_members` and `shard_owned_namespaces` follow this term's view.
    let _shard_gauges = work.shard().map(|s| metrics.shard.watch(s, caches.namespaces.store()));

    let shutdown = {
        let stop = stop.clone();
        async move { stop.cancelled().await }
    };
    let shutdown = futures::FutureExt::shared(Box::pin(shutdown));
    let class = cli.controller_class.clone();
    let es = work.namespaced().then(|| {
        crate::externalsecret::controller(&mut caches, ctx.clone(), class.clone(), cli.concurrency, shutdown.clone())
    });
    let switches = cli.controllers;
    let ps = (switches.process_push_secret && work.namespaced())
        .then(|| crate::pushsecret::controller(&mut caches, ctx.clone(), cli.concurrency.min(16), shutdown.clone()));
    let cluster = work.cluster();
    let prov =
        cluster.then(|| crate::provider::controllers(&mut caches, ctx.clone(), class, switches, shutdown.clone()));
    let workloads = cli.reload_workloads && cluster;
    let reload =
        cluster.then(|| crate::reload::controllers(&mut caches, client.clone(), cli.reload_debounce, shutdown.clone()));
    // Its own watch, not waited for: a cluster whose CRDs predate GeneratorState only logs it.
    let states = cluster
        .then(|| crate::generators::state::controller(ctx.clone(), cli.watch_namespace.clone(), shutdown.clone()));
    // A ClusterExternalSecret or ClusterPushSecret writes into any namespace: only an instance
    // that watches them all runs their controllers.
    let (ces, cps) = match &cli.watch_namespace {
        _ if !cluster => (None, None),
        None => (
            switches
                .process_cluster_external_secret
                .then(|| fanout::controller::<ClusterExternalSecret>(&mut caches, ctx.clone(), shutdown.clone())),
            switches
                .process_cluster_push_secret
                .then(|| fanout::controller::<ClusterPushSecret>(&mut caches, ctx.clone(), shutdown.clone())),
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
        workloads,
        push_secrets: ps.is_some() || cps.is_some(),
        cluster_external_secrets: ces.is_some(),
        cluster_push_secrets: cps.is_some(),
    };
    let (ready, _watches) = caches.start(&scope);
    tokio::select! {
        _ = ready.wait() => tracing::info!("caches listed"),
        _ = stop.cancelled() => {}
    }
    tracing::info!(work = work.name(), "controllers running");
    let controllers = async {
        futures::join!(
            switched("externalsecret", es),
            switched("pushsecret", ps),
            switched("provider", prov),
            switched("reload", reload),
            switched("generatorstate", states),
            switched("clusterexternalsecret", ces),
            switched("clusterpushsecret", cps),
        );
    };
    // In-flight reconciles get `--shutdown-grace` (the runtime's drain) to finish; past it
    // they are dropped (cancelled), so the Lease is released and a standby takes over without
    // waiting for its expiry.
    controllers.await;
    manager.close();
}

/// Runs a controller that may be switched off (`--process-*`, a namespaced instance's
/// cluster-wide kinds, or the other half of a sharded replica's work), and logs when it stopped.
async fn switched(name: &'static str, controller: Option<impl std::future::Future<Output = ()>>) {
    if let Some(controller) = controller {
        controller.await;
        tracing::info!(controller = name, "controller stopped");
    }
}
