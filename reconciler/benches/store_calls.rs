//! What Keyward costs a store: N ExternalSecrets × 3 `data` entries (three properties of one
//! secret) through a SecretStore, once with ten distinct secrets (ExternalSecret i reads secret
//! i mod 10) and once with every secret distinct, on three stores: the Vault dev server, and
//! AWS Secrets Manager and Parameter Store on moto's server. Printed for each: the first sync's
//! time and store reads, the store reads of one periodic refresh cycle (the store's own log
//! counts them: Vault's audit log, moto's request recorder; a batch read is one call), and the
//! peak RSS of the reconciler and the provider. Goal: ten reads a cycle for ten secrets, and
//! at most one per secret when all are distinct, where one call per `data` entry would make three.
//!
//! `KEYWARD_BENCH_N` (default 1000) sets N; the refresh interval is two minutes, so each run
//! takes about three. `KEYWARD_BENCH_STORES` (default `vault,secretsmanager,parameterstore`)
//! picks the stores. `KEYWARD_RECONCILER_BIN`, `KEYWARD_PROVIDER_VAULT_BIN` and
//! `KEYWARD_PROVIDER_AWS_BIN` point at release binaries (else debug builds are used).

#![allow(clippy::unwrap_used)]

#[path = "../tests/e2e/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::Secret;
use keyward_crds::{ExternalSecret, SecretStore};
use keyward_e2e::bench::{Better, figure};
use keyward_e2e::stores::{Moto, VaultAudit, VaultDev};
use keyward_e2e::with_temp_namespace;
use kube::Api;
use kube::api::{ListParams, PostParams};
use serde_json::json;
use support::*;

const INTERVAL: Duration = Duration::from_secs(120);
const REGION: &str = "us-east-1";

/// One store under measurement, with its own log of the requests it served.
enum Backend {
    Vault(VaultDev, VaultAudit),
    SecretsManager(Moto),
    ParameterStore(Moto),
}

impl Backend {
    fn name(&self) -> &'static str {
        match self {
            Backend::Vault(..) => "Vault",
            Backend::SecretsManager(_) => "Secrets Manager (moto)",
            Backend::ParameterStore(_) => "Parameter Store (moto)",
        }
    }

    /// Its name in `KEYWARD_BENCH_STORES` and in the figures' names.
    fn id(&self) -> &'static str {
        match self {
            Backend::Vault(..) => "vault",
            Backend::SecretsManager(_) => "secretsmanager",
            Backend::ParameterStore(_) => "parameterstore",
        }
    }

    /// The provider registry row and binary that serve the store.
    fn provider(&self) -> (&'static str, &'static str) {
        match self {
            Backend::Vault(..) => ("vault", "keyward-provider-vault"),
            _ => ("aws", "keyward-provider-aws"),
        }
    }

    fn provider_env(&self) -> Vec<(&'static str, String)> {
        match self {
            Backend::Vault(..) => Vec::new(),
            Backend::SecretsManager(moto) | Backend::ParameterStore(moto) => moto.provider_env(),
        }
    }

    /// The remote key of secret `k` of namespace `ns`.
    fn key(&self, ns: &str, k: usize) -> String {
        match self {
            Backend::Vault(..) => format!("{ns}/k{k}"),
            Backend::SecretsManager(_) => format!("{ns}-k{k}"),
            Backend::ParameterStore(_) => format!("/{ns}/k{k}"),
        }
    }

    /// Writes secrets `0..count` of `ns`, each with properties a, b and c.
    fn put(&self, ns: &str, count: usize) {
        let value = json!({"a": "v", "b": "v", "c": "v"}).to_string();
        let boto3 = |moto: &Moto, call: &str| {
            let keys: Vec<String> = (0..count).map(|k| self.key(ns, k)).collect();
            let code = format!("for k in {}:\n    {call}", serde_json::to_string(&keys).unwrap());
            moto.boto3(REGION, &code).unwrap();
        };
        match self {
            Backend::Vault(vault, _) => {
                for k in 0..count {
                    vault.cli(&["kv", "put", &format!("secret/{}", self.key(ns, k)), "a=v", "b=v", "c=v"]);
                }
            }
            Backend::SecretsManager(moto) => boto3(moto, &format!("sm.create_secret(Name=k, SecretString='{value}')")),
            Backend::ParameterStore(moto) => {
                boto3(moto, &format!("ssm.put_parameter(Name=k, Value='{value}', Type='SecureString')"))
            }
        }
    }

    /// The credentials Secret's data and the SecretStore's `spec.provider`.
    fn store(&self) -> (serde_json::Value, serde_json::Value) {
        let aws = |service: &str| {
            let auth = json!({"secretRef": {"accessKeyIDSecretRef": {"name": "creds", "key": "id"},
                                             "secretAccessKeySecretRef": {"name": "creds", "key": "secret"}}});
            json!({"aws": {"service": service, "region": REGION, "auth": auth}})
        };
        match self {
            Backend::Vault(vault, _) => (
                json!({"token": vault.root_token()}),
                json!({"vault": {"server": vault.address(), "path": "secret", "version": "v2",
                                 "auth": {"tokenSecretRef": {"name": "creds", "key": "token"}}}}),
            ),
            Backend::SecretsManager(_) => (json!({"id": "AKIDBENCH", "secret": "s"}), aws("SecretsManager")),
            Backend::ParameterStore(_) => (json!({"id": "AKIDBENCH", "secret": "s"}), aws("ParameterStore")),
        }
    }

    /// Reads of `ns`'s secrets the store has served so far.
    fn reads(&self, ns: &str) -> usize {
        match self {
            Backend::Vault(_, audit) => {
                let prefix = format!("secret/data/{ns}/");
                audit
                    .requests()
                    .iter()
                    .filter(|r| r["operation"] == "read" && r["path"].as_str().is_some_and(|p| p.starts_with(&prefix)))
                    .count()
            }
            // One moto per store and runs one after the other: every read counts.
            Backend::SecretsManager(moto) | Backend::ParameterStore(moto) => {
                const READS: &[&str] = &[
                    "secretsmanager.GetSecretValue",
                    "secretsmanager.BatchGetSecretValue",
                    "AmazonSSM.GetParameter",
                    "AmazonSSM.GetParameters",
                ];
                moto.requests().iter().filter(|r| READS.contains(&r.target.as_str())).count()
            }
        }
    }
}

/// How many of the ExternalSecrets' Secrets hold their value (no other Secret has the key).
async fn synced(secrets: &Api<Secret>) -> usize {
    let list = secrets.list(&ListParams::default()).await.unwrap();
    list.items.iter().filter(|s| value(s, "c").as_deref() == Some("v")).count()
}

/// One run in a namespace of its own (its secrets named after the namespace).
async fn run(store: &Backend, n: usize, distinct: usize) {
    with_temp_namespace(&[], |client, ns| {
        async move {
            let pki = Pki::new();
            pki.install(&client, &ns).await;
            let (row, binary) = store.provider();
            let env = store.provider_env();
            let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let provider = ProviderProcess::start_with_env(binary, pki.provider_dir(), &env).await;
            store.put(&ns, distinct);
            let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
            let (creds, spec) = store.store();
            let creds = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"},
                               "stringData": creds});
            apply(&secrets, creds).await;
            let manifest = json!({"apiVersion": "external-secrets.io/v1", "kind": "SecretStore",
                "metadata": {"name": "store", "labels": {CLASS_LABEL: ns}}, "spec": {"provider": spec}});
            apply(&Api::<SecretStore>::namespaced(client.clone(), &ns), manifest).await;
            let reconciler = Reconciler::start_with_stores(&ns, &[(row, &provider)], &[]).await;
            let before = store.reads(&ns);

            let ess: Api<ExternalSecret> = Api::namespaced(client.clone(), &ns);
            let start = Instant::now();
            stream::iter(0..n)
                .map(|i| {
                    let (ess, ns) = (ess.clone(), ns.clone());
                    async move {
                        let key = store.key(&ns, i % distinct);
                        let entry = |p: &str| json!({"secretKey": p, "remoteRef": {"key": key, "property": p}});
                        let es: ExternalSecret = serde_json::from_value(json!({
                            "apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
                            "metadata": {"name": format!("es-{i}"), "labels": {CLASS_LABEL: ns}},
                            "spec": {"refreshInterval": format!("{}s", INTERVAL.as_secs()),
                                     "secretStoreRef": {"name": "store", "kind": "SecretStore"},
                                     "data": [entry("a"), entry("b"), entry("c")]}}))
                        .unwrap();
                        ess.create(&PostParams::default(), &es).await.unwrap();
                    }
                })
                .buffer_unordered(32)
                .collect::<Vec<_>>()
                .await;
            while synced(&secrets).await < n {
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            let first_sync = start.elapsed();
            let first_reads = store.reads(&ns) - before;

            // One periodic cycle: every ExternalSecret refreshes within its interval plus a tenth
            // of it (its jitter) after its first sync.
            tokio::time::sleep(INTERVAL + INTERVAL / 10 + first_sync + Duration::from_secs(5)).await;
            let cycle_reads = store.reads(&ns) - before - first_reads;
            let (reconciler_peak, provider_peak) =
                (status_mib(reconciler.process.pid(), "VmHWM"), status_mib(provider.process.pid(), "VmHWM"));
            println!(
                "store calls, {}, {n} ExternalSecrets × 3 entries, {distinct} distinct secrets: first sync {:.1} s \
                 with {first_reads} reads; one refresh cycle {cycle_reads} reads (one call per entry: {}); peak RSS \
                 reconciler {:.0} MiB, provider {:.0} MiB",
                store.name(),
                first_sync.as_secs_f64(),
                3 * n,
                reconciler_peak,
                provider_peak,
            );
            let name = |what: &str| format!("store_calls.{}.n{n}.distinct{distinct}.{what}", store.id());
            figure(&name("first_sync_reads"), first_reads as f64, "calls", Better::Lower);
            figure(&name("refresh_reads"), cycle_reads as f64, "calls", Better::Lower);
            figure(&name("first_sync"), first_sync.as_secs_f64(), "s", Better::Lower);
            figure(&name("reconciler_rss_peak"), reconciler_peak, "MiB", Better::Lower);
            figure(&name("provider_rss_peak"), provider_peak, "MiB", Better::Lower);
            drop(reconciler);
        }
    })
    .await;
}

#[tokio::main]
async fn main() {
    let n: usize = std::env::var("KEYWARD_BENCH_N").ok().and_then(|v| v.parse().ok()).unwrap_or(1000);
    let stores = std::env::var("KEYWARD_BENCH_STORES").unwrap_or_else(|_| "vault,secretsmanager,parameterstore".into());
    for name in stores.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let store = match name {
            "vault" => {
                let vault = VaultDev::start();
                let audit = vault.audit(&[]);
                Backend::Vault(vault, audit)
            }
            "secretsmanager" => Backend::SecretsManager(Moto::start_recording()),
            "parameterstore" => Backend::ParameterStore(Moto::start_recording()),
            other => panic!("KEYWARD_BENCH_STORES: unknown store {other:?} (vault, secretsmanager, parameterstore)"),
        };
        run(&store, n, 10).await;
        run(&store, n, n).await;
    }
}
