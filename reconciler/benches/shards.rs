//! First sync with three sharded reconcilers against one, on the same machine in one run: N
//! ExternalSecrets on the Fake provider spread over 30 namespaces, the reconcilers started
//! after they exist, timed until every target Secret exists. The one is a reconciler without
//! `--shard` (every namespace its own); the three run with `--shard` and split the namespaces
//! by their shard Leases (their start includes the settle time before a replica works what it
//! gained: three renewals of the default 5 s shard Lease).
//!
//! Each mode gets namespaces, Providers, ExternalSecrets and a controller class of its own, and
//! its ExternalSecrets and Secrets are deleted before the next mode starts, so neither caches
//! the other's objects. One Fake provider process serves both. `KEYWARD_BENCH_N` picks the
//! sizes (default 3000); `KEYWARD_RECONCILER_BIN` and `KEYWARD_PROVIDER_FAKE_BIN` point at
//! release binaries (else debug builds are used).

#![allow(clippy::unwrap_used)]

#[path = "../tests/e2e/support/mod.rs"]
mod support;

use std::collections::HashSet;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use keyward_crds::{ExternalSecret, Provider};
use keyward_e2e::bench::{Better, figure, sizes};
use keyward_e2e::{ChildProcess, E2E_LABEL, control_plane, free_port, spawn_logged};
use keyward_provider_fake::api::Fake;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::core::PartialObjectMeta;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use serde_json::json;
use support::*;

const NAMESPACES: usize = 30;
const PARALLEL: usize = 32;
const MANAGED: &str = "reconcile.external-secrets.io/managed=true";

/// One mode's namespaces, each with the Fake config and a Provider of class `class`, and its
/// share of `n` ExternalSecrets.
async fn tenants(client: &Client, pki: &Pki, fake: &ProviderProcess, class: &str, n: usize) -> Vec<String> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let mut out = Vec::new();
    for i in 0..NAMESPACES {
        let name = format!("{class}-{i}");
        let ns = json!({"metadata": {"name": name, "labels": {E2E_LABEL: "true"}}});
        namespaces.create(&PostParams::default(), &serde_json::from_value(ns).unwrap()).await.unwrap();
        pki.install(client, &name).await;
        apply(&Api::<Fake>::namespaced(client.clone(), &name), fake_config("cfg", &[("k", "value")])).await;
        apply(&Api::<Provider>::namespaced(client.clone(), &name), provider("fake", class, &fake.address(), "cfg"))
            .await;
        out.push(name);
    }
    let ess: Vec<(Api<ExternalSecret>, usize)> =
        (0..n).map(|i| (Api::namespaced(client.clone(), &out[i % NAMESPACES]), i)).collect();
    stream::iter(ess)
        .map(|(api, i)| {
            let es = json!({
                "metadata": {"name": format!("es-{i}"), "labels": {CLASS_LABEL: class}},
                "spec": {"refreshInterval": "0", "secretStoreRef": {"name": "fake", "kind": "Provider"},
                         "data": [{"secretKey": "k", "remoteRef": {"key": "k"}}]},
            });
            async move { api.create(&PostParams::default(), &serde_json::from_value(es).unwrap()).await.unwrap() }
        })
        .buffer_unordered(PARALLEL)
        .collect::<Vec<_>>()
        .await;
    out
}

/// A release-style reconciler of class `class` over every namespace, its Leases in `home`.
fn reconciler(kubeconfig: &Path, class: &str, home: &str, extra: &[&str]) -> ChildProcess {
    let mut cmd = Command::new(binary("keyward-reconciler"));
    cmd.env("KUBECONFIG", kubeconfig)
        .env("RUST_LOG", "warn")
        .args(["--controller-class", class, "--lease-namespace", home, "--lease-name", class])
        .args(["--health-listen", &format!("127.0.0.1:{}", free_port())])
        .args(extra);
    spawn_logged("keyward-reconciler", cmd)
}

/// Starts `replicas` reconcilers (sharded when more than one) and waits until the `n` managed
/// Secrets of `namespaces` exist; returns the time from the start and each one's peak RSS.
async fn first_sync(
    client: &Client,
    class: &str,
    home: &str,
    namespaces: &[String],
    n: usize,
    replicas: usize,
) -> (Duration, Vec<f64>) {
    let managed: Api<PartialObjectMeta<Secret>> = Api::all(client.clone());
    let mine: HashSet<&str> = namespaces.iter().map(String::as_str).collect();
    let kubeconfig = control_plane().await.kubeconfig().to_path_buf();
    let started = Instant::now();
    let processes: Vec<ChildProcess> = (0..replicas)
        .map(|i| match replicas {
            1 => reconciler(&kubeconfig, class, home, &[]),
            _ => reconciler(&kubeconfig, class, home, &["--shard", "true", "--identity", &format!("r{i}")]),
        })
        .collect();
    let mut seen = HashSet::new();
    let mut events =
        std::pin::pin!(watcher::watcher(managed, watcher::Config::default().labels(MANAGED)).default_backoff());
    while seen.len() < n {
        let left = Duration::from_secs(1800).saturating_sub(started.elapsed());
        match tokio::time::timeout(left, events.next()).await {
            Ok(Some(Ok(watcher::Event::Apply(s) | watcher::Event::InitApply(s)))) => {
                let ns = s.metadata.namespace.unwrap_or_default();
                if mine.contains(ns.as_str()) {
                    seen.insert((ns, s.metadata.name.unwrap_or_default()));
                }
            }
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => panic!("{replicas} reconciler(s): only {} of {n} synced after 30 minutes", seen.len()),
        }
    }
    let took = started.elapsed();
    let peaks = processes.iter().map(|p| status_mib(p.pid(), "VmHWM:")).collect();
    drop(processes);
    (took, peaks)
}

/// Deletes a mode's ExternalSecrets and Secrets, then its namespaces, so the next mode's
/// caches hold none of them.
async fn remove(client: &Client, namespaces: &[String]) {
    for ns in namespaces {
        let ess: Api<ExternalSecret> = Api::namespaced(client.clone(), ns);
        let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
        let _ = ess.delete_collection(&DeleteParams::default(), &ListParams::default()).await;
        let _ = secrets.delete_collection(&DeleteParams::default(), &ListParams::default().labels(MANAGED)).await;
        let _ = Api::<Namespace>::all(client.clone()).delete(ns, &DeleteParams::default()).await;
    }
}

async fn run(client: Client, home: String, n: usize) {
    let pki = Pki::new();
    let fake = ProviderProcess::start("keyward-provider-fake", pki.provider_dir(), None).await;
    let run = &home[3..];
    let mut results = Vec::new();
    for replicas in [1, 3] {
        let class = format!("shards{replicas}-{run}");
        let namespaces = tenants(&client, &pki, &fake, &class, n).await;
        let (took, peaks) = first_sync(&client, &class, &home, &namespaces, n, replicas).await;
        remove(&client, &namespaces).await;
        let peaks: Vec<String> = peaks.iter().map(|p| format!("{p:.1}")).collect();
        println!(
            "shards N={n} over {NAMESPACES} namespaces: {replicas} reconciler(s) first sync {:.2}s ({:.0}/s); peak RSS {} MiB",
            took.as_secs_f64(),
            n as f64 / took.as_secs_f64(),
            peaks.join(", ")
        );
        results.push(took.as_secs_f64());
    }
    let (one, three) = (results[0], results[1]);
    println!("shards N={n}: three sharded replicas took ×{:.2} the time of one", three / one);
    figure(&format!("shards.n{n}.first_sync_one"), one, "s", Better::Lower);
    figure(&format!("shards.n{n}.first_sync_three"), three, "s", Better::Lower);
    figure(&format!("shards.n{n}.three_of_one"), three / one, "ratio", Better::Lower);
}

#[tokio::main]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    for n in sizes(3000) {
        keyward_e2e::with_temp_namespace(&[], |client, home| run(client, home, n)).await;
    }
}
