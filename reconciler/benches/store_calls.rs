//! What Keyward costs a store: N ExternalSecrets × 3 `data` entries (three properties of one
//! secret) against the Vault dev server through a SecretStore, once with ten distinct secrets
//! (ExternalSecret i reads secret i mod 10) and once with every secret distinct. Printed for each:
//! the first sync's time and store reads, the store reads of one periodic refresh cycle (Vault's
//! own audit log counts them; goal: ten for ten secrets, and one per secret when all are
//! distinct, where one call per `data` entry would make three), and the peak RSS of the
//! reconciler and the provider.
//!
//! `KEYWARD_BENCH_N` (default 1000) sets N; the refresh interval is two minutes, so each run
//! takes about three. `KEYWARD_RECONCILER_BIN` and `KEYWARD_PROVIDER_VAULT_BIN` point at release
//! binaries (else debug builds are used).

#![allow(clippy::unwrap_used)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::Secret;
use keyward_crds::{ExternalSecret, SecretStore};
use keyward_e2e::stores::{VaultAudit, VaultDev};
use keyward_e2e::with_temp_namespace;
use kube::Api;
use kube::api::{ListParams, PostParams};
use serde_json::json;
use support::*;

const INTERVAL: Duration = Duration::from_secs(120);

/// Store reads of secrets under `prefix` Vault logged.
fn reads(audit: &VaultAudit, prefix: &str) -> usize {
    audit
        .requests()
        .iter()
        .filter(|r| r["operation"] == "read" && r["path"].as_str().is_some_and(|p| p.starts_with(prefix)))
        .count()
}

/// How many of the ExternalSecrets' Secrets hold their value (no other Secret has the key).
async fn synced(secrets: &Api<Secret>) -> usize {
    let list = secrets.list(&ListParams::default()).await.unwrap();
    list.items.iter().filter(|s| value(s, "c").as_deref() == Some("v")).count()
}

/// One run in a namespace of its own (its secrets, and so its reads, under the namespace's name).
async fn run(vault: &VaultDev, audit: &VaultAudit, n: usize, distinct: usize) {
    with_temp_namespace(&[], |client, ns| {
        async move {
            let pki = Pki::new();
            pki.install(&client, &ns).await;
            let provider = ProviderProcess::start("keyward-provider-vault", pki.provider_dir(), None).await;
            for k in 0..distinct {
                vault.cli(&["kv", "put", &format!("secret/{ns}/k{k}"), "a=v", "b=v", "c=v"]);
            }
            let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
            let token = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "token"},
                               "stringData": {"token": vault.root_token()}});
            apply(&secrets, token).await;
            let store = json!({"apiVersion": "external-secrets.io/v1", "kind": "SecretStore",
                "metadata": {"name": "vault", "labels": {CLASS_LABEL: ns}},
                "spec": {"provider": {"vault": {"server": vault.address(), "path": "secret", "version": "v2",
                    "auth": {"tokenSecretRef": {"name": "token", "key": "token"}}}}}});
            apply(&Api::<SecretStore>::namespaced(client.clone(), &ns), store).await;
            let reconciler = Reconciler::start_with_stores(&ns, &[("vault", &provider)], &[]).await;
            let prefix = format!("secret/data/{ns}/");

            let ess: Api<ExternalSecret> = Api::namespaced(client.clone(), &ns);
            let start = Instant::now();
            stream::iter(0..n)
                .map(|i| {
                    let (ess, ns) = (ess.clone(), ns.clone());
                    async move {
                        let key = format!("{ns}/k{}", i % distinct);
                        let entry = |p: &str| json!({"secretKey": p, "remoteRef": {"key": key, "property": p}});
                        let es: ExternalSecret = serde_json::from_value(json!({
                            "apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
                            "metadata": {"name": format!("es-{i}"), "labels": {CLASS_LABEL: ns}},
                            "spec": {"refreshInterval": format!("{}s", INTERVAL.as_secs()),
                                     "secretStoreRef": {"name": "vault", "kind": "SecretStore"},
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
            let first_reads = reads(audit, &prefix);

            // One periodic cycle: every ExternalSecret refreshes within its interval plus a tenth
            // of it (its jitter) after its first sync.
            tokio::time::sleep(INTERVAL + INTERVAL / 10 + first_sync + Duration::from_secs(5)).await;
            let cycle_reads = reads(audit, &prefix) - first_reads;
            println!(
                "store calls, Vault, {n} ExternalSecrets × 3 entries, {distinct} distinct secrets: first sync {:.1} s \
                 with {first_reads} reads; one refresh cycle {cycle_reads} reads (one call per entry: {}); peak RSS \
                 reconciler {:.0} MiB, provider {:.0} MiB",
                first_sync.as_secs_f64(),
                3 * n,
                status_mib(reconciler.process.pid(), "VmHWM"),
                status_mib(provider.process.pid(), "VmHWM"),
            );
            drop(reconciler);
        }
    })
    .await;
}

#[tokio::main]
async fn main() {
    let n: usize = std::env::var("KEYWARD_BENCH_N").ok().and_then(|v| v.parse().ok()).unwrap_or(1000);
    let vault = VaultDev::start();
    let audit = vault.audit(&[]);
    run(&vault, &audit, n, 10).await;
    run(&vault, &audit, n, n).await;
}
