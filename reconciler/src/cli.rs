//! Command line and environment of `keyward-reconciler`.

use std::net::SocketAddr;
use std::time::Duration;

use clap::Parser;

/// Every duration flag's grammar, shared by every Keyward binary (Go's, `15s`, `1h30m`, and a few
/// older forms).
fn duration(s: &str) -> Result<Duration, String> {
    keyward_process::parse_duration(s)
}

fn store_provider(s: &str) -> Result<(String, String), String> {
    let (name, address) = s.split_once('=').ok_or_else(|| format!("{s:?} is not name=host:port"))?;
    keyward_crds::rules::parse_address(address).map_err(|e| format!("{s:?}: {e}"))?;
    Ok((name.trim().to_string(), address.trim().to_string()))
}

/// Keeps Kubernetes Secrets in sync with external stores through Keyward provider processes.
#[derive(Parser, Debug, Clone)]
#[command(name = "keyward-reconciler", version)]
pub struct Cli {
    /// Address of the operations server (/healthz, /readyz, /metrics).
    #[arg(long, env = "KEYWARD_HEALTH_LISTEN", default_value = "0.0.0.0:8080")]
    pub health_listen: SocketAddr,
    /// Only reconcile objects in this namespace (all namespaces when unset).
    #[arg(long, env = "KEYWARD_WATCH_NAMESPACE")]
    pub watch_namespace: Option<String>,
    /// The namespace this process runs in (the chart sets it from the downward API); the
    /// default namespace of the Lease.
    #[arg(long, env = "KEYWARD_POD_NAMESPACE")]
    pub pod_namespace: Option<String>,
    /// Only reconcile objects labelled `external-secrets.io/controller-class=<class>`, so several
    /// instances can share a cluster.
    #[arg(long, env = "KEYWARD_CONTROLLER_CLASS")]
    pub controller_class: Option<String>,
    /// Elect a leader through a Lease; only the leader reconciles.
    #[arg(long, env = "KEYWARD_LEADER_ELECT", default_value_t = true, action = clap::ArgAction::Set)]
    pub leader_elect: bool,
    /// Name of the Lease.
    #[arg(long, env = "KEYWARD_LEASE_NAME", default_value = "keyward-reconciler")]
    pub lease_name: String,
    /// Namespace of the Lease (default: `--pod-namespace`, else the client's default namespace:
    /// the ServiceAccount's namespace in a Pod, the kubeconfig context's outside).
    #[arg(long, env = "KEYWARD_LEASE_NAMESPACE")]
    pub lease_namespace: Option<String>,
    /// Lease duration (Go duration).
    #[arg(long, env = "KEYWARD_LEASE_DURATION", default_value = "15s", value_parser = duration)]
    pub lease_duration: Duration,
    /// Split the namespaces among the replicas: each holds a shard Lease
    /// (`<lease-name>-shard-<identity>`) and works the ExternalSecrets and PushSecrets of the
    /// namespaces a rendezvous hash over the live shard Leases gives it; cluster-scoped work
    /// (ClusterExternalSecrets, ClusterPushSecrets, store status, generator states, rollouts)
    /// stays with the holder of the leader Lease. false: the leader does everything.
    #[arg(long, env = "KEYWARD_SHARD", default_value_t = false, action = clap::ArgAction::Set)]
    pub shard: bool,
    /// How long a shard Lease lives unrenewed: a replica that dies without releasing it hands
    /// its namespaces over after this, plus three fifths of it to settle.
    #[arg(long, env = "KEYWARD_SHARD_LEASE_DURATION", default_value = "5s", value_parser = duration)]
    pub shard_lease_duration: Duration,
    /// Identity in the Lease (the chart sets the Pod name; default: host name and process id).
    #[arg(long, env = "KEYWARD_IDENTITY")]
    pub identity: Option<String>,
    /// ExternalSecrets reconciled at once.
    #[arg(long, env = "KEYWARD_CONCURRENCY", default_value_t = 32)]
    pub concurrency: u16,
    /// How often Providers and ClusterProviders are checked.
    #[arg(long, env = "KEYWARD_PROVIDER_CHECK_INTERVAL", default_value = "1m", value_parser = duration)]
    pub provider_check_interval: Duration,
    /// Deadline of one provider call.
    #[arg(long, env = "KEYWARD_CALL_TIMEOUT", default_value = "10s", value_parser = duration)]
    pub call_timeout: Duration,
    /// Attempts per provider call when the failure is transient.
    #[arg(long, env = "KEYWARD_CALL_ATTEMPTS", default_value_t = 3)]
    pub call_attempts: u32,
    /// Consecutive transient failures that open a provider's circuit breaker.
    #[arg(long, env = "KEYWARD_BREAKER_THRESHOLD", default_value_t = 5)]
    pub breaker_threshold: u32,
    /// How long an open circuit breaker refuses calls.
    #[arg(long, env = "KEYWARD_BREAKER_COOLDOWN", default_value = "5s", value_parser = duration)]
    pub breaker_cooldown: Duration,
    /// ExternalSecrets requeued per second, at most, when the provider they failed on answers
    /// again (the rest follow in order).
    #[arg(long, env = "KEYWARD_RECOVERY_RATE", default_value_t = 500)]
    pub recovery_rate: u32,
    /// Pooled provider connections unused this long are closed.
    #[arg(long, env = "KEYWARD_POOL_IDLE_TIMEOUT", default_value = "5m", value_parser = duration)]
    pub pool_idle_timeout: Duration,
    /// Pooled provider connections are replaced after this long.
    #[arg(long, env = "KEYWARD_POOL_MAX_LIFETIME", default_value = "1h", value_parser = duration)]
    pub pool_max_lifetime: Duration,
    /// First retry delay after a failed sync (doubles up to 5m).
    #[arg(long, env = "KEYWARD_ERROR_BACKOFF", default_value = "2s", value_parser = duration)]
    pub error_backoff: Duration,
    /// Quiet time before a workload is rolled after its Secrets changed, so a burst of
    /// rotations causes one rollout.
    #[arg(long, env = "KEYWARD_RELOAD_DEBOUNCE", default_value = "2s", value_parser = duration)]
    pub reload_debounce: Duration,
    /// File holding the key of the data hashes Keyward writes where `view` can read them
    /// (status.syncedDataHash, the Secret's data-hash annotation, a workload's secrets hash):
    /// at least 16 random bytes; the chart mounts the release's key Secret. Unset: a random key
    /// of this process, so every hash changes on a restart (Secrets are written again and
    /// opted-in workloads roll once).
    #[arg(long, env = "KEYWARD_HASH_KEY_FILE")]
    pub hash_key_file: Option<std::path::PathBuf>,
    /// Roll workloads labelled keyward.dev/reload=true when their Secrets rotate: watches
    /// Deployments, StatefulSets and DaemonSets with that label (needs list, watch and patch on
    /// them). false: no workload is watched or patched (the chart's webhook.workloads.enabled).
    #[arg(long, env = "KEYWARD_RELOAD_WORKLOADS", default_value_t = true, action = clap::ArgAction::Set)]
    pub reload_workloads: bool,
    /// Wall-clock limit of one template render (`target.template`, PushSecret `template`,
    /// `rewrite.transform`); on top of each template's CPU budget. A render that runs out of
    /// either sets `Ready=False` (reason `TemplateBudgetExceeded`) and keeps the Secret's data.
    #[arg(long, env = "KEYWARD_TEMPLATE_TIME_LIMIT", default_value = "5s", value_parser = duration)]
    pub template_time_limit: Duration,
    /// Template renders that may run at once, on threads of their own (one per namespace at
    /// most, so one namespace's templates never hold every slot).
    #[arg(long, env = "KEYWARD_TEMPLATE_RENDER_SLOTS", default_value_t = 2)]
    pub template_render_slots: usize,
    /// How long in-flight reconciles may run on after a shutdown signal.
    #[arg(long, env = "KEYWARD_SHUTDOWN_GRACE", default_value = "10s", value_parser = duration)]
    pub shutdown_grace: Duration,
    /// Provider processes that serve SecretStores and ClusterSecretStores, as
    /// `name=host:port` by the provider's name under `spec.provider` (`kubernetes=…`, `vault=…`, `aws=…`);
    /// a store naming another provider reports `ProviderNotSupported`.
    #[arg(long = "store-provider", env = "KEYWARD_STORE_PROVIDERS", value_delimiter = ',', value_parser = store_provider)]
    pub store_providers: Vec<(String, String)>,
    /// Namespace of the `keyward-provider-tls` Secret used to reach those provider processes when
    /// their address is not a Service name (default: `--pod-namespace`).
    #[arg(long, env = "KEYWARD_STORE_PROVIDER_TLS_NAMESPACE")]
    pub store_provider_tls_namespace: Option<String>,
    #[command(flatten)]
    pub generic_targets: keyward_process::GenericTargetArgs,
    #[command(flatten)]
    pub controllers: Controllers,
    #[command(flatten)]
    pub log: keyward_process::LogArgs,
}

/// Which of the upstream kinds this instance processes: one switch per kind, named after the
/// chart value of External Secrets' chart that sets it (`processPushSecret` is
/// `--process-push-secret`). A kind switched off is left alone: its controller does not run, and
/// its watch is not opened where nothing else reads it. Provider and ClusterProvider (Keyward's
/// own kinds) and ExternalSecrets always run.
#[derive(clap::Args, Debug, Clone, Copy, PartialEq, Eq)]
pub struct Controllers {
    /// Run the PushSecret controller. false: PushSecrets are not watched (unless the
    /// ClusterPushSecret controller needs its children) and never pushed, deleted or updated.
    #[arg(long, env = "KEYWARD_PROCESS_PUSH_SECRET", default_value_t = true, action = clap::ArgAction::Set)]
    pub process_push_secret: bool,
    /// Run the ClusterPushSecret controller (only ever with every namespace watched). false:
    /// ClusterPushSecrets are not watched and create no PushSecrets.
    #[arg(long, env = "KEYWARD_PROCESS_CLUSTER_PUSH_SECRET", default_value_t = true, action = clap::ArgAction::Set)]
    pub process_cluster_push_secret: bool,
    /// Run the ClusterExternalSecret controller (only ever with every namespace watched). false:
    /// ClusterExternalSecrets are not watched and create no ExternalSecrets.
    #[arg(long, env = "KEYWARD_PROCESS_CLUSTER_EXTERNAL_SECRET", default_value_t = true, action = clap::ArgAction::Set)]
    pub process_cluster_external_secret: bool,
    /// Run the SecretStore controller (the check that writes a SecretStore's status).
    /// ExternalSecrets and PushSecrets still use SecretStores either way, as upstream's.
    #[arg(long, env = "KEYWARD_PROCESS_SECRET_STORE", default_value_t = true, action = clap::ArgAction::Set)]
    pub process_secret_store: bool,
    /// Run the ClusterSecretStore controller. false: no ClusterSecretStore is checked, and an
    /// ExternalSecret naming one is left alone (no sync, no status), as upstream's.
    #[arg(long, env = "KEYWARD_PROCESS_CLUSTER_STORE", default_value_t = true, action = clap::ArgAction::Set)]
    pub process_cluster_store: bool,
    /// Read ClusterGenerators. false: an ExternalSecret or PushSecret naming one reports
    /// `Ready=False` saying so, and no ClusterGenerator is read (the chart drops the right to).
    #[arg(long, env = "KEYWARD_PROCESS_CLUSTER_GENERATOR", default_value_t = true, action = clap::ArgAction::Set)]
    pub process_cluster_generator: bool,
}

impl Controllers {
    /// The cluster-scoped kinds the client manager serves.
    pub fn cluster_kinds(&self) -> keyward_provider_client::ClusterKinds {
        keyward_provider_client::ClusterKinds {
            stores: self.process_cluster_store,
            generators: self.process_cluster_generator,
        }
    }
}

impl Default for Controllers {
    fn default() -> Self {
        Controllers {
            process_push_secret: true,
            process_cluster_push_secret: true,
            process_cluster_external_secret: true,
            process_secret_store: true,
            process_cluster_store: true,
            process_cluster_generator: true,
        }
    }
}

impl Controllers {
    /// The switches that are off, by flag name (for the start-up log line).
    pub fn off(&self) -> Vec<&'static str> {
        [
            (self.process_push_secret, "process-push-secret"),
            (self.process_cluster_push_secret, "process-cluster-push-secret"),
            (self.process_cluster_external_secret, "process-cluster-external-secret"),
            (self.process_secret_store, "process-secret-store"),
            (self.process_cluster_store, "process-cluster-store"),
            (self.process_cluster_generator, "process-cluster-generator"),
        ]
        .into_iter()
        .filter_map(|(on, flag)| (!on).then_some(flag))
        .collect()
    }
}

impl Cli {
    /// The key of the data hashes (`--hash-key-file`), read once, so every leadership term of
    /// the process hashes alike; a random key of this process when no file is given.
    pub fn hash_key(&self) -> Result<&'static crate::externalsecret::target::HashKey, String> {
        use crate::externalsecret::target::HashKey;
        static KEY: std::sync::OnceLock<HashKey> = std::sync::OnceLock::new();
        if let Some(key) = KEY.get() {
            return Ok(key);
        }
        let key = match &self.hash_key_file {
            Some(path) => HashKey::from_file(path)?,
            None => {
                tracing::warn!(
                    "no --hash-key-file: data hashes use a random key of this process, so every target Secret is \
                     written again and opted-in workloads roll once after a restart"
                );
                HashKey::random()
            }
        };
        Ok(KEY.get_or_init(|| key))
    }

    /// The generic targets the operator turned on (`--generic-targets`,
    /// `--generic-target-resources`), read once at start.
    pub fn generic_targets(&self) -> Result<&'static keyward_crds::rules::GenericTargets, String> {
        use keyward_crds::rules::GenericTargets;
        static TARGETS: std::sync::OnceLock<GenericTargets> = std::sync::OnceLock::new();
        if let Some(t) = TARGETS.get() {
            return Ok(t);
        }
        let args = &self.generic_targets;
        let targets = GenericTargets::from_flags(args.generic_targets, &args.generic_target_resources)?;
        if targets.enabled && targets.resources.is_empty() {
            tracing::warn!("generic targets are on but --generic-target-resources lists none: none will be written");
        }
        Ok(TARGETS.get_or_init(|| targets))
    }

    /// Where SecretStores and ClusterSecretStores are served.
    pub fn store_providers(&self) -> keyward_provider_client::StoreProviders {
        keyward_provider_client::StoreProviders {
            addresses: self.store_providers.iter().cloned().collect(),
            tls_namespace: self
                .store_provider_tls_namespace
                .clone()
                .or_else(|| self.pod_namespace.clone())
                .unwrap_or_default(),
        }
    }

    /// The Lease's namespace when one is configured (`--lease-namespace`, else `--pod-namespace`).
    pub fn lease_namespace(&self) -> Option<String> {
        self.lease_namespace.clone().or_else(|| self.pod_namespace.clone()).filter(|ns| !ns.is_empty())
    }
}
