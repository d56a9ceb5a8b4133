//! Faults, measured (`make chaos`), against this process's own local control plane:
//!
//! 1. provider outage: N ExternalSecrets synced (cold sync timed), the Fake provider stopped,
//!    every ExternalSecret asked to sync again while it is down (so each fails and backs off),
//!    the provider started again after `KEYWARD_CHAOS_OUTAGE` (20s); time from its return until
//!    every Secret holds the new value, next to the cold sync of the same run;
//! 2. API server restart: kube-apiserver and etcd stopped for `KEYWARD_CHAOS_API_OUTAGE` (30s)
//!    under the reconciler, the webhook and the provider; time from the API server's return
//!    until the reconciler leads again and every Secret holds a value changed after the return;
//! 3. churn soak (`KEYWARD_CHAOS_CHURN` seconds, 120 by default, 3600 for the full run): see
//!    `churn.rs`.
//!
//! Prints one table: scenario, Secrets emptied (most seen at once), processes exited, time to
//! converge, peak RSS. Production settings (error backoff, breaker cooldown, Lease); release
//! binaries through `KEYWARD_RECONCILER_BIN`, `KEYWARD_PROVIDER_FAKE_BIN`, `KEYWARD_WEBHOOK_BIN`.

#![allow(clippy::unwrap_used)]

mod churn;
#[path = "../../tests/e2e/support/mod.rs"]
mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use keyward_crds::Provider;
use keyward_e2e::{ChildProcess, control_plane, free_port, spawn_logged, with_temp_namespace};
use keyward_provider_fake::api::Fake;
use kube::{Api, Client};
use support::*;

pub struct Row {
    scenario: String,
    emptied: usize,
    exited: usize,
    converge: Duration,
    peak: String,
}

fn seconds(env: &str, default: u64) -> Duration {
    Duration::from_secs(std::env::var(env).ok().and_then(|v| v.parse().ok()).unwrap_or(default))
}

/// The reconciler with production settings, scoped to `ns`.
async fn reconciler(ns: &str, metrics_port: u16) -> ChildProcess {
    let mut cmd = Command::new(binary("keyward-reconciler"));
    cmd.env("KUBECONFIG", control_plane().await.kubeconfig())
        .env("RUST_LOG", "warn,keyward_reconciler=info")
        .args(["--log-format", "text", "--watch-namespace", ns, "--controller-class", ns, "--lease-namespace", ns])
        .args(["--health-listen", &format!("127.0.0.1:{metrics_port}")]);
    let mut process = spawn_logged("keyward-reconciler", cmd);
    process.wait_for_log("caches listed", Duration::from_secs(120)).await;
    process
}

/// Waits until every managed Secret holds `want`; returns the most Secrets seen empty at once.
async fn converge(client: &Client, ns: &str, n: usize, want: &str, limit: Duration) -> usize {
    let started = Instant::now();
    let mut emptied = 0;
    loop {
        let (holding, empty) = managed_values(client, ns, want).await;
        emptied = emptied.max(empty);
        if holding == n {
            return emptied;
        }
        assert!(started.elapsed() < limit, "only {holding} of {n} Secrets hold {want} after {limit:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Watches for emptied Secrets and exited processes for `how_long`.
async fn outage(client: &Client, ns: &str, how_long: Duration, processes: &mut [&mut ChildProcess]) -> usize {
    let started = Instant::now();
    let mut emptied = 0;
    while started.elapsed() < how_long {
        // The API server may be away: then there is nothing to read.
        emptied = emptied.max(managed_values(client, ns, "").await.1);
        for p in processes.iter_mut() {
            assert!(p.is_running(), "a process exited during the outage:\n{}", p.log());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    emptied
}

/// Touches `es-0` every few seconds until its Secret holds `want`: the provider serves it.
async fn provider_caught_up(client: &Client, ns: &str, want: &str) {
    let ess: Api<keyward_crds::ExternalSecret> = Api::namespaced(client.clone(), ns);
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), ns);
    for attempt in 0..600 {
        let patch = serde_json::json!({"metadata": {"annotations": {"caught-up": attempt.to_string()}}});
        let _ = ess.patch("es-0", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(patch)).await;
        for _ in 0..10 {
            if let Ok(s) = secrets.get("es-0").await
                && value(&s, "value").as_deref() == Some(want)
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
    panic!("the provider did not serve {want} to es-0 in 30 minutes");
}

async fn provider_outage(client: Client, ns: String, n: usize) -> Row {
    let pki = Pki::new();
    pki.install(&client, &ns).await;
    let mut fake = ProviderProcess::start("keyward-provider-fake", pki.provider_dir(), None).await;
    let fakes: Api<Fake> = Api::namespaced(client.clone(), &ns);
    apply(&fakes, fake_config("cfg", &[("db", "v1")])).await;
    apply(&Api::<Provider>::namespaced(client.clone(), &ns), provider("fake", &ns, &fake.address(), "cfg")).await;
    create_external_secrets(&client, &ns, n, "fake", "db").await;
    let metrics_port = free_port();
    let started = Instant::now();
    let mut reconciler = reconciler(&ns, metrics_port).await;
    converge(&client, &ns, n, "v1", Duration::from_secs(1800)).await;
    let cold = started.elapsed();

    fake.stop();
    apply(&fakes, fake_config("cfg", &[("db", "v2")])).await;
    force_sync(&client, &ns, n, "outage").await;
    let mut emptied = outage(&client, &ns, seconds("KEYWARD_CHAOS_OUTAGE", 20), &mut [&mut reconciler]).await;
    fake.restart().await;
    let back = Instant::now();
    emptied = emptied.max(converge(&client, &ns, n, "v2", Duration::from_secs(1800)).await);
    let took = back.elapsed();
    let metrics = String::from_utf8_lossy(
        &Command::new("curl")
            .args(["-sf", &format!("http://127.0.0.1:{metrics_port}/metrics")])
            .output()
            .unwrap()
            .stdout,
    )
    .into_owned();
    println!(
        "provider outage, N={n}: cold sync {:.1}s; after the provider's return {:.1}s ({:.2}x the cold sync); \
         {} provider recoveries, {} ExternalSecrets requeued by them",
        cold.as_secs_f64(),
        took.as_secs_f64(),
        took.as_secs_f64() / cold.as_secs_f64(),
        metric_value(&metrics, "clientmanager_provider_recoveries_total"),
        metric_value(&metrics, "clientmanager_recovery_requeues_total"),
    );
    let exited = usize::from(!reconciler.is_running()) + usize::from(!fake.process.is_running());
    Row {
        scenario: format!("provider outage ({n} ES)"),
        emptied,
        exited,
        converge: took,
        peak: format!("reconciler {:.0} MiB", status_mib(reconciler.pid(), "VmHWM:")),
    }
}

async fn api_server_restart(client: Client, ns: String, n: usize) -> Row {
    let pki = Pki::new();
    pki.install(&client, &ns).await;
    let mut fake = ProviderProcess::start("keyward-provider-fake", pki.provider_dir(), None).await;
    let fakes: Api<Fake> = Api::namespaced(client.clone(), &ns);
    apply(&fakes, fake_config("cfg", &[("db", "v1")])).await;
    apply(&Api::<Provider>::namespaced(client.clone(), &ns), provider("fake", &ns, &fake.address(), "cfg")).await;
    let mut webhook = Webhook::start(&pki.issue_server_dir("webhook")).await;
    create_external_secrets(&client, &ns, n, "fake", "db").await;
    let mut reconciler = reconciler(&ns, free_port()).await;
    converge(&client, &ns, n, "v1", Duration::from_secs(1800)).await;

    let cp = control_plane().await;
    let api_server = cp.stop_process("kube-apiserver");
    let etcd = cp.stop_process("etcd");
    let emptied = outage(
        &client,
        &ns,
        seconds("KEYWARD_CHAOS_API_OUTAGE", 30),
        &mut [&mut reconciler, &mut webhook.process, &mut fake.process],
    )
    .await;
    let (_, readyz) = webhook.readyz();
    etcd.start();
    api_server.start();
    let back = Instant::now();
    let emptied = emptied.max(managed_values(&client, &ns, "v1").await.1);
    apply(&fakes, fake_config("cfg", &[("db", "v2")])).await;
    // The Fake provider's data lives in the API server too: its watch resumes (after its own
    // backoff) some time after the return, and until then it serves v1. Touch one
    // ExternalSecret until it syncs v2, so the mass touch below meets a provider that has it.
    provider_caught_up(&client, &ns, "v2").await;
    force_sync(&client, &ns, n, "after-restart").await;
    let emptied = emptied.max(converge(&client, &ns, n, "v2", Duration::from_secs(1800)).await);
    let took = back.elapsed();
    println!(
        "API server + etcd restart, N={n}: every Secret holds a value changed after the return {:.1}s after it; \
         webhook /readyz during the outage: {readyz:?}",
        took.as_secs_f64()
    );
    let exited = [reconciler.is_running(), webhook.process.is_running(), fake.process.is_running()]
        .iter()
        .filter(|running| !**running)
        .count();
    Row {
        scenario: format!("API server + etcd restart ({n} ES)"),
        emptied,
        exited,
        converge: took,
        peak: format!(
            "reconciler {:.0} MiB, webhook {:.0} MiB",
            status_mib(reconciler.pid(), "VmHWM:"),
            status_mib(webhook.process.pid(), "VmHWM:")
        ),
    }
}

#[tokio::main]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let n: usize = std::env::var("KEYWARD_CHAOS_N").ok().and_then(|v| v.parse().ok()).unwrap_or(2000);
    let mut rows = Vec::new();
    let scenarios = std::env::var("KEYWARD_CHAOS_SCENARIOS").unwrap_or_else(|_| "outage,restart,churn".into());
    let wanted = |name: &str| scenarios.split(',').any(|s| s.trim() == name);
    if wanted("outage") {
        rows.push(with_temp_namespace(&[], |client, ns| provider_outage(client, ns, n)).await);
    }
    if wanted("restart") {
        rows.push(with_temp_namespace(&[], |client, ns| api_server_restart(client, ns, n)).await);
    }
    if wanted("churn") {
        let churn_for = seconds("KEYWARD_CHAOS_CHURN", 120);
        rows.push(with_temp_namespace(&[], |client, ns| churn::churn(client, ns, churn_for)).await);
    }
    println!();
    println!("| scenario | Secrets emptied | processes exited | time to converge | peak RSS |");
    println!("|---|---|---|---|---|");
    for r in rows {
        println!("| {} | {} | {} | {:.1}s | {} |", r.scenario, r.emptied, r.exited, r.converge.as_secs_f64(), r.peak);
    }
}
