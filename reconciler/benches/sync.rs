//! Time to first sync of N ExternalSecrets on the Fake provider, against the local control
//! plane, next to the time a plain client needs to create N Secrets (the API server's ceiling
//! on this machine), and the reconciler's peak resident memory.
//!
//! `KEYWARD_BENCH_N=1000,10000` picks the sizes; `KEYWARD_RECONCILER_BIN` and
//! `KEYWARD_PROVIDER_FAKE_BIN` point at release binaries (else debug builds are used).

#![allow(clippy::unwrap_used)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::Secret;
use keyward_crds::{ExternalSecret, Fake, Provider};
use keyward_e2e::{control_plane, free_port, spawn_logged, with_temp_namespace, workspace_binary};
use kube::api::{ListParams, PostParams};
use kube::core::PartialObjectMeta;
use kube::{Api, Client};
use serde_json::json;
use support::*;

const PARALLEL: usize = 32;

fn binary(env: &str, name: &str) -> PathBuf {
    std::env::var(env).map(PathBuf::from).unwrap_or_else(|_| workspace_binary(name))
}

async fn create_all<K, F>(api: &Api<K>, n: usize, make: F)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
    F: Fn(usize) -> K,
{
    let make = Arc::new(make);
    stream::iter(0..n)
        .map(|i| {
            let (api, make) = (api.clone(), make.clone());
            async move {
                api.create(&PostParams::default(), &make(i)).await.unwrap();
            }
        })
        .buffer_unordered(PARALLEL)
        .collect::<Vec<_>>()
        .await;
}

fn peak_rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
        .unwrap_or(f64::NAN)
}

async fn run(client: Client, ns: String, n: usize) {
    let pki = Pki::new();
    pki.install(&client, &ns).await;
    let mut cmd = Command::new(binary("KEYWARD_PROVIDER_FAKE_BIN", "keyward-provider-fake"));
    let port = free_port();
    cmd.env("KUBECONFIG", control_plane().await.kubeconfig())
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(["--health-listen", &format!("127.0.0.1:{}", free_port())])
        .arg("--tls-dir")
        .arg(pki.provider_dir());
    let mut fake = spawn_logged("keyward-provider-fake", cmd);
    fake.wait_for_log("provider serving", Duration::from_secs(60)).await;
    apply(&Api::<Fake>::namespaced(client.clone(), &ns), fake_config("cfg", &[("k", "value")])).await;
    apply(
        &Api::<Provider>::namespaced(client.clone(), &ns),
        json!({"apiVersion": "external-secrets.io/v1", "kind": "Provider",
               "metadata": {"name": "fake", "labels": {CLASS_LABEL: ns}},
               "spec": {"config": {"address": format!("127.0.0.1:{port}"), "providerRef": {
                   "apiVersion": "provider.external-secrets.io/v2alpha1", "kind": "Fake", "name": "cfg"}}}}),
    )
    .await;

    // The ceiling: a plain client creating N Secrets with the same parallelism.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let started = Instant::now();
    create_all(&secrets, n, |i| {
        serde_json::from_value(json!({"metadata": {"name": format!("plain-{i}")}, "data": {"k": "dmFsdWU="}})).unwrap()
    })
    .await;
    let ceiling = started.elapsed();

    // N ExternalSecrets exist before the reconciler starts; then time to first sync of all.
    let ess: Api<ExternalSecret> = Api::namespaced(client.clone(), &ns);
    let started = Instant::now();
    create_all(&ess, n, |i| {
        serde_json::from_value(json!({
            "metadata": {"name": format!("es-{i}"), "labels": {CLASS_LABEL: ns}},
            "spec": {"refreshInterval": "1h", "secretStoreRef": {"name": "fake"},
                     "data": [{"secretKey": "k", "remoteRef": {"key": "k"}}]},
        }))
        .unwrap()
    })
    .await;
    let create_es = started.elapsed();

    let metrics_port = free_port();
    let mut cmd = Command::new(binary("KEYWARD_RECONCILER_BIN", "keyward-reconciler"));
    cmd.env("KUBECONFIG", control_plane().await.kubeconfig())
        .env("RUST_LOG", "warn")
        .args(["--namespace", &ns, "--controller-class", &ns, "--lease-namespace", &ns])
        .args(["--metrics-listen", &format!("127.0.0.1:{metrics_port}")]);
    let started = Instant::now();
    let reconciler = spawn_logged("keyward-reconciler", cmd);
    let managed: Api<PartialObjectMeta<Secret>> = Api::namespaced(client.clone(), &ns);
    let params = ListParams::default().labels("reconcile.external-secrets.io/managed=true");
    loop {
        let count = managed.list_metadata(&params).await.map(|l| l.items.len()).unwrap_or(0);
        if count >= n {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(1800), "only {count} of {n} synced after 30 minutes");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let sync = started.elapsed();
    // Let the status writes of the last syncs land, then read the high-water mark.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss = peak_rss_mib(reconciler.pid());
    println!(
        "reconciler first sync: N={n} sync={:.2}s ({:.0}/s) api_ceiling={:.2}s ({:.0}/s) ratio={:.2} \
         es_create={:.2}s peak_rss={:.1}MiB",
        sync.as_secs_f64(),
        n as f64 / sync.as_secs_f64(),
        ceiling.as_secs_f64(),
        n as f64 / ceiling.as_secs_f64(),
        sync.as_secs_f64() / ceiling.as_secs_f64(),
        create_es.as_secs_f64(),
        rss
    );
    drop(reconciler);
    drop(fake);
}

#[tokio::main]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let sizes: Vec<usize> = std::env::var("KEYWARD_BENCH_N")
        .unwrap_or_else(|_| "1000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    for n in sizes {
        with_temp_namespace(&[], |client, ns| run(client, ns, n)).await;
    }
}
