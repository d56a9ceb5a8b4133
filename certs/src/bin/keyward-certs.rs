//! `keyward-certs run`: the self-managed certificate loop. One replica at a time (a Lease picks
//! it) keeps Keyward's CA and leaf Secrets current and the webhook configurations' `caBundle` in
//! step; every flag is also read from a `KEYWARD_*` environment variable. Every replica serves
//! `/healthz`, `/readyz` and `/metrics` on its health address. The process starts through
//! `keyward_process::Runtime` (crypto provider, logging, admin server, shutdown drain, the
//! Lease loop) as every Keyward server does.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use keyward_certs::manager::{Config, LeafSpec, reconcile};
use keyward_certs::metrics::LoopMetrics;
use keyward_certs::plan::Policy;
use keyward_process::health::{self, Health, Readiness};
use keyward_process::lease::{LeaseLock, default_identity};
use keyward_process::{CancellationToken, LogArgs, Runtime, parse_duration};
use tracing::{error, info};

#[derive(Parser, Debug)]
#[command(name = "keyward-certs", version, about = "Keyward's self-managed certificates")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Keep the CA, the leaf Secrets and the webhook caBundle current until stopped.
    Run(Box<RunArgs>),
}

#[derive(clap::Args, Debug)]
struct RunArgs {
    /// Namespace of the Secrets, the Lease and the Services: the namespace this process runs in
    /// (the chart sets it from the downward API).
    #[arg(long, env = "KEYWARD_POD_NAMESPACE")]
    namespace: String,
    /// The CA Secret (`ca.crt` trust bundle, `tls.crt`/`tls.key` signing CA).
    #[arg(long, env = "KEYWARD_CA_SECRET", default_value = "keyward-ca")]
    ca_secret: String,
    /// The webhook Service; its serving certificate covers the Service's DNS names.
    #[arg(long, env = "KEYWARD_WEBHOOK_SERVICE")]
    webhook_service: Option<String>,
    /// The webhook's TLS Secret (default: `<webhook-service>-tls`).
    #[arg(long, env = "KEYWARD_WEBHOOK_SECRET")]
    webhook_secret: Option<String>,
    /// A provider Service, `name` or `name=secret` (default Secret `<name>-tls`). Repeatable.
    #[arg(long = "provider-service", env = "KEYWARD_PROVIDER_SERVICES", value_delimiter = ',')]
    provider_services: Vec<String>,
    /// The reconciler's client certificate Secret (issued when there is a provider Service).
    #[arg(long, env = "KEYWARD_CLIENT_SECRET", default_value = "keyward-provider-tls")]
    client_secret: String,
    /// Common name of the reconciler's client certificate.
    #[arg(long, env = "KEYWARD_CLIENT_NAME", default_value = "keyward-reconciler")]
    client_name: String,
    /// A Validating/MutatingWebhookConfiguration whose caBundle is kept. Repeatable.
    #[arg(long = "webhook-configuration", env = "KEYWARD_WEBHOOK_CONFIGURATIONS", value_delimiter = ',')]
    webhook_configurations: Vec<String>,
    /// Also keep the caBundle of webhook configurations matching this label selector.
    #[arg(long, env = "KEYWARD_WEBHOOK_SELECTOR")]
    webhook_selector: Option<String>,
    /// Cluster DNS domain for the Services' fully qualified names.
    #[arg(long, env = "KEYWARD_CLUSTER_DOMAIN", default_value = "cluster.local")]
    cluster_domain: String,
    /// Lifetime of a new CA.
    #[arg(long, env = "KEYWARD_CA_VALIDITY", value_parser = parse_duration, default_value = "5y")]
    ca_validity: Duration,
    /// Stage the next CA when the active one has less than this left.
    #[arg(long, env = "KEYWARD_CA_RENEW_BEFORE", value_parser = parse_duration, default_value = "180d")]
    ca_renew_before: Duration,
    /// How long old and new CA are both trusted around a CA switch.
    #[arg(long, env = "KEYWARD_CA_OVERLAP", value_parser = parse_duration, default_value = "10m")]
    ca_overlap: Duration,
    /// Lifetime of a new leaf certificate.
    #[arg(long, env = "KEYWARD_LEAF_VALIDITY", value_parser = parse_duration, default_value = "90d")]
    leaf_validity: Duration,
    /// Re-issue a leaf when it has less than this left.
    #[arg(long, env = "KEYWARD_LEAF_RENEW_BEFORE", value_parser = parse_duration, default_value = "30d")]
    leaf_renew_before: Duration,
    /// How often the leader checks everything.
    #[arg(long, env = "KEYWARD_INTERVAL", value_parser = parse_duration, default_value = "1m")]
    interval: Duration,
    /// The Lease that elects the acting replica.
    #[arg(long, env = "KEYWARD_LEASE_NAME", default_value = "keyward-certs")]
    lease_name: String,
    /// How long a Lease holds without renewal.
    #[arg(long, env = "KEYWARD_LEASE_DURATION", value_parser = parse_duration, default_value = "15s")]
    lease_duration: Duration,
    /// This replica's identity in the Lease (the chart sets the Pod name; default: host name and
    /// process id).
    #[arg(long, env = "KEYWARD_IDENTITY")]
    identity: Option<String>,
    /// Make one pass (without the Lease) and exit.
    #[arg(long, env = "KEYWARD_ONCE")]
    once: bool,
    /// Plain HTTP address of /healthz, /readyz and /metrics (not served with --once).
    #[arg(long, env = "KEYWARD_HEALTH_LISTEN", default_value = "0.0.0.0:8080")]
    health_listen: std::net::SocketAddr,
    #[command(flatten)]
    log: LogArgs,
}

/// The certificate loop's log filter when neither `--log-level` nor `RUST_LOG` is set.
const DEFAULT_LOG_FILTER: &str = "info";

impl RunArgs {
    fn config(&self) -> anyhow::Result<Config> {
        let policy = Policy {
            ca_validity: self.ca_validity,
            ca_renew_before: self.ca_renew_before,
            ca_overlap: self.ca_overlap,
            leaf_validity: self.leaf_validity,
            leaf_renew_before: self.leaf_renew_before,
        };
        policy.validate()?;
        let ns = &self.namespace;
        let mut leaves = Vec::new();
        if let Some(svc) = &self.webhook_service {
            let secret = self.webhook_secret.clone().unwrap_or_else(|| format!("{svc}-tls"));
            leaves.push(LeafSpec::for_service(&secret, svc, ns, &self.cluster_domain));
        }
        for p in self.provider_services.iter().filter(|p| !p.is_empty()) {
            let (svc, secret) = match p.split_once('=') {
                Some((svc, secret)) => (svc.to_string(), secret.to_string()),
                None => (p.clone(), format!("{p}-tls")),
            };
            leaves.push(LeafSpec::for_service(&secret, &svc, ns, &self.cluster_domain));
        }
        if !self.provider_services.is_empty() {
            leaves.push(LeafSpec::client(&self.client_secret, &self.client_name));
        }
        Ok(Config {
            namespace: ns.clone(),
            ca_secret: self.ca_secret.clone(),
            leaves,
            webhook_configurations: self.webhook_configurations.iter().filter(|n| !n.is_empty()).cloned().collect(),
            webhook_selector: self.webhook_selector.clone().filter(|s| !s.is_empty()),
            policy,
        })
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let Command::Run(args) = cli.command;
    let mut rt = Runtime::builder("keyward-certs").log(&args.log, DEFAULT_LOG_FILTER);
    if !args.once {
        rt = rt.admin(args.health_listen);
    }
    let rt = rt.build().await?;
    let cfg = args.config()?;
    let client = kube::Client::try_default().await.context("connecting to the Kubernetes API")?;
    if args.once {
        let report = reconcile(&client, &cfg).await?;
        log_report(&report);
        return Ok(());
    }
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = Arc::new(LoopMetrics::new(&mut registry, &args.lease_name));
    // Ready once connected: a standby is as ready as the acting replica.
    rt.admin().serve(Health::new(|| std::future::ready(Readiness::ok()), move || health::encode(&registry)));
    let identity = args.identity.clone().unwrap_or_else(default_identity);
    let lock = LeaseLock::new(client.clone(), &cfg.namespace, &args.lease_name, &identity, args.lease_duration);
    info!(identity, lease = %args.lease_name, namespace = %cfg.namespace, "certificate loop starting");
    let (cfg, interval) = (Arc::new(cfg), args.interval);
    rt.run_leading(Some(lock), |stop| passes(client.clone(), cfg.clone(), metrics.clone(), interval, stop)).await;
    Ok(())
}

/// One leadership term: a pass at once and every `interval` after, until `stop`.
async fn passes(
    client: kube::Client,
    cfg: Arc<Config>,
    metrics: Arc<LoopMetrics>,
    interval: Duration,
    stop: CancellationToken,
) {
    info!("acquired the lease; this replica manages the certificates");
    metrics.leading(true);
    loop {
        match reconcile(&client, &cfg).await {
            Ok(report) => {
                log_report(&report);
                metrics.passed(&report);
            }
            Err(e) => {
                error!(error = %e, "certificate pass failed; retrying next tick");
                metrics.failed();
            }
        }
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tokio::time::sleep(interval) => {}
        }
    }
    metrics.leading(false);
}

fn log_report(report: &keyward_certs::manager::Report) {
    if report.is_quiet() {
        tracing::debug!("certificates current");
        return;
    }
    if let Some(ca) = report.ca {
        info!(action = ?ca, "CA updated");
    }
    for (secret, action) in &report.leaves {
        info!(secret, action = ?action, "leaf Secret written");
    }
    for name in &report.webhook_configurations {
        info!(configuration = %name, "caBundle updated");
    }
}
