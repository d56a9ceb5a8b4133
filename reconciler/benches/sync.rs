//! N ExternalSecrets on the Fake provider, against the local control plane: time to first sync,
//! next to the time a plain client needs to create N Secrets (the API server's ceiling on this
//! machine); the reconciler's peak and steady resident memory and the provider's; the API
//! requests of the first sync and of a refresh that finds nothing new, by verb, from the API
//! server's `apiserver_request_total`; CPU time per object of each process (API server, etcd,
//! reconciler, provider) while the plain client creates and while the reconciler syncs, which is
//! what bounds the rate on a machine the API server saturates; a second ceiling, the plain client
//! making the same three writes a first sync makes (Secret apply, status patch, Event) on objects
//! of its own; and the reconciler's CPU while idle.
//!
//! The ExternalSecrets start without a periodic refresh (`refreshInterval: 0`), so the idle
//! window after the first sync holds no refresh however long that sync took. Then their interval
//! is set from the measured first sync (first sync + 30 s): that spec change is synced once (it
//! writes status), and the periodic refresh after it, which finds the same value, is measured.
//!
//! `KEYWARD_BENCH_N=1000,10000` picks the sizes; `KEYWARD_RECONCILER_BIN` and
//! `KEYWARD_PROVIDER_FAKE_BIN` point at release binaries (else debug builds are used).

#![allow(clippy::unwrap_used)]

#[path = "../tests/e2e/support/mod.rs"]
mod support;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::{ObjectReference, Secret};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use keyward_crds::{ExternalSecret, Provider};
use keyward_e2e::bench::{Better, figure, sizes};
use keyward_e2e::{control_plane, free_port, spawn_logged, with_temp_namespace};
use keyward_provider_fake::api::Fake;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::core::PartialObjectMeta;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use serde_json::json;
use support::*;

const PARALLEL: usize = 32;

/// How long a phase over `n` objects may take: half an hour, or 20 objects a second when that is
/// longer (100,000 on a loaded two-core machine synced at about 45 a second).
fn phase_limit(n: usize) -> Duration {
    Duration::from_secs(1800.max(n as u64 / 20))
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

/// CPU seconds (user + system) the process used so far.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) start at state, field 3.
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15: indexes 11 and 12 here; the clock ticks 100 per second.
    (ticks(11) + ticks(12)) / 100.0
}

/// The writes of one first sync, made by a plain client with the same parallelism on N
/// ExternalSecrets of its own, once the reconciler has stopped: the target Secret applied
/// server-side, the status merge-patched, an Event created. Returns the time the writes took
/// and the CPU per object they cost.
async fn same_writes(client: &Client, ns: &str, n: usize, cp_dir: &std::path::Path) -> (Duration, (f64, String)) {
    let ess: Api<ExternalSecret> = Api::namespaced(client.clone(), ns);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    let label = "keyward.dev/bench-writes";
    create_all(&ess, n, |i| {
        serde_json::from_value(json!({
            "metadata": {"name": format!("writes-{i}"), "labels": {label: "true"}},
            "spec": {"refreshInterval": "0", "secretStoreRef": {"name": "fake", "kind": "Provider"},
                     "data": [{"secretKey": "k", "remoteRef": {"key": "k"}}]},
        }))
        .unwrap()
    })
    .await;
    // The reconciler knows each owner's uid from its cache; so does this client, before timing.
    let listed = ess.list_metadata(&ListParams::default().labels(&format!("{label}=true"))).await.unwrap();
    let uids: HashMap<String, String> =
        listed.items.into_iter().map(|es| (es.metadata.name.unwrap(), es.metadata.uid.unwrap())).collect();
    let me = [("this client", std::process::id())];
    let before = cpu_of(cp_dir, &me);
    let started = Instant::now();
    stream::iter(0..n)
        .map(|i| {
            let (ess, secrets, events) = (ess.clone(), secrets.clone(), events.clone());
            let name = format!("writes-{i}");
            let uid = uids[&name].clone();
            async move {
                let owner = json!({"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret", "name": name,
                                   "uid": uid, "controller": true, "blockOwnerDeletion": true});
                let secret = json!({"apiVersion": "v1", "kind": "Secret",
                    "metadata": {"name": name, "labels": {label: "true", "reconcile.external-secrets.io/managed": "true"},
                                 "annotations": {"reconcile.external-secrets.io/data-hash": "0123456789abcdef"},
                                 "ownerReferences": [owner]},
                    "type": "Opaque", "data": {"k": "dmFsdWU="}});
                secrets.patch(&name, &PatchParams::apply("keyward-bench").force(), &Patch::Apply(secret)).await.unwrap();
                let now = k8s_openapi::jiff::Timestamp::now().to_string();
                let status = json!({"status": {"refreshTime": now, "syncedResourceVersion": "1-0123456789abcdef",
                    "binding": {"name": name}, "syncedDataHash": "0123456789abcdef",
                    "conditions": [{"type": "Ready", "status": "True", "reason": "SecretSynced",
                                    "message": "Secret was synced", "lastTransitionTime": now}]}});
                ess.patch_status(&name, &PatchParams::default(), &Patch::Merge(status)).await.unwrap();
                let event = Event {
                    metadata: kube::api::ObjectMeta { name: Some(format!("{name}.{i:016x}")), ..Default::default() },
                    action: Some("Sync".into()),
                    reason: Some("Created".into()),
                    note: Some("Secret was created".into()),
                    type_: Some("Normal".into()),
                    event_time: Some(MicroTime(k8s_openapi::jiff::Timestamp::now())),
                    regarding: Some(ObjectReference {
                        api_version: Some("external-secrets.io/v1".into()),
                        kind: Some("ExternalSecret".into()),
                        name: Some(name.clone()),
                        namespace: Some(ns.to_string()),
                        uid: Some(uid),
                        ..Default::default()
                    }),
                    reporting_controller: Some("keyward.dev/bench".into()),
                    reporting_instance: Some("bench".into()),
                    ..Default::default()
                };
                events.create(&PostParams::default(), &event).await.unwrap();
            }
        })
        .buffer_unordered(PARALLEL)
        .collect::<Vec<_>>()
        .await;
    let took = started.elapsed();
    let cpu = cpu_per_object(&before, &cpu_of(cp_dir, &me), n);
    (took, cpu)
}

/// CPU seconds of each process that does the work: the control plane's (from `cluster.sh`'s
/// pid files) and the given ones.
fn cpu_of(dir: &std::path::Path, others: &[(&'static str, u32)]) -> Vec<(&'static str, f64)> {
    let pid = |name: &str| std::fs::read_to_string(dir.join(format!("{name}.pid"))).ok()?.trim().parse::<u32>().ok();
    let mut all: Vec<(&'static str, f64)> =
        ["kube-apiserver", "etcd"].into_iter().filter_map(|name| Some((name, cpu_seconds(pid(name)?)))).collect();
    all.extend(others.iter().map(|&(name, pid)| (name, cpu_seconds(pid))));
    all
}

/// Milliseconds of CPU per object of each process between two readings of [`cpu_of`]: the
/// total, and the total with each process's share as text.
fn cpu_per_object(before: &[(&'static str, f64)], after: &[(&'static str, f64)], n: usize) -> (f64, String) {
    let per = |(name, was): &(&str, f64)| {
        let now = after.iter().find(|(a, _)| a == name).map_or(*was, |(_, v)| *v);
        (name.to_string(), (now - was) * 1000.0 / n as f64)
    };
    let parts: Vec<(String, f64)> = before.iter().map(per).collect();
    let total: f64 = parts.iter().map(|(_, v)| v).sum();
    let each: Vec<String> = parts.iter().map(|(name, v)| format!("{name} {v:.2}")).collect();
    (total, format!("{total:.2} ms ({})", each.join(", ")))
}

/// Requests per ExternalSecret of every verb but WATCH, for the resources the reconciler touches.
fn requests_per_object(delta: &BTreeMap<Vec<String>, f64>, n: usize) -> f64 {
    let counted = delta.iter().filter(|(k, _)| RECONCILER_RESOURCES.contains(&k[1].as_str()) && k[0] != "WATCH");
    counted.map(|(_, v)| v).sum::<f64>() / n as f64
}

/// Successful GetSecret calls the Fake provider served, from its own metrics: a handful of
/// series, where the reconciler's hold several per ExternalSecret (scraping those once a second
/// would measure the scrapes).
async fn grpc_gets(provider_metrics_port: u16) -> f64 {
    metric_value(
        &metrics_text(provider_metrics_port).await,
        "grpc_server_requests_total{method=\"GetSecret\",status=\"OK\"}",
    )
}

/// Waits until the provider served `target` successful GetSecret calls in all.
async fn wait_for_gets(metrics_port: u16, target: f64, limit: Duration, what: &str) {
    let waited = Instant::now();
    while grpc_gets(metrics_port).await < target {
        assert!(waited.elapsed() < limit, "{what}");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

async fn metrics_text(port: u16) -> String {
    let out = tokio::process::Command::new("curl")
        .args(["-sf", &format!("http://127.0.0.1:{port}/metrics")])
        .output()
        .await
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
    out.unwrap_or_default()
}

/// Requests per ExternalSecret by verb (and resource), for the resources the reconciler touches.
fn per_object(delta: &BTreeMap<Vec<String>, f64>, n: usize) -> String {
    let mut by_verb: BTreeMap<(&str, &str), f64> = BTreeMap::new();
    for (k, v) in delta {
        if RECONCILER_RESOURCES.contains(&k[1].as_str()) && k[0] != "WATCH" {
            *by_verb.entry((k[0].as_str(), k[1].as_str())).or_default() += v;
        }
    }
    if by_verb.is_empty() {
        return "none".into();
    }
    by_verb
        .iter()
        .map(|((verb, resource), v)| format!("{verb} {:.2} ({resource})", v / n as f64))
        .collect::<Vec<_>>()
        .join(", ")
}

async fn run(client: Client, ns: String, n: usize) {
    let pki = Pki::new();
    pki.install(&client, &ns).await;
    let mut cmd = Command::new(binary("keyward-provider-fake"));
    let port = free_port();
    let provider_metrics_port = free_port();
    cmd.env("KUBECONFIG", control_plane().await.kubeconfig())
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(["--health-listen", &format!("127.0.0.1:{provider_metrics_port}")])
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
    let cp_dir = control_plane().await.dir().to_path_buf();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let cpu_before_plain = cpu_of(&cp_dir, &[("this client", std::process::id())]);
    let started = Instant::now();
    create_all(&secrets, n, |i| {
        serde_json::from_value(json!({"metadata": {"name": format!("plain-{i}")}, "data": {"k": "dmFsdWU="}})).unwrap()
    })
    .await;
    let ceiling = started.elapsed();
    // Progress on stderr as each phase ends: at 100,000 a run takes hours, and what it has
    // measured so far should not be lost with a run cut short.
    eprintln!("[N={n}] a plain client created {n} Secrets in {:.1}s", ceiling.as_secs_f64());
    let cpu_plain = cpu_per_object(&cpu_before_plain, &cpu_of(&cp_dir, &[("this client", std::process::id())]), n);

    // N ExternalSecrets exist before the reconciler starts; then time to first sync of all.
    let ess: Api<ExternalSecret> = Api::namespaced(client.clone(), &ns);
    let started = Instant::now();
    create_all(&ess, n, |i| {
        serde_json::from_value(json!({
            "metadata": {"name": format!("es-{i}"), "labels": {CLASS_LABEL: ns}},
            "spec": {"refreshInterval": "0", "secretStoreRef": {"name": "fake", "kind": "Provider"},
                     "data": [{"secretKey": "k", "remoteRef": {"key": "k"}}]},
        }))
        .unwrap()
    })
    .await;
    let create_es = started.elapsed();
    eprintln!("[N={n}] {n} ExternalSecrets created in {:.1}s", create_es.as_secs_f64());

    let metrics_port = free_port();
    let mut cmd = Command::new(binary("keyward-reconciler"));
    cmd.env("KUBECONFIG", control_plane().await.kubeconfig())
        .env("RUST_LOG", "warn")
        .args(["--watch-namespace", &ns, "--controller-class", &ns, "--lease-namespace", &ns])
        .args(["--health-listen", &format!("127.0.0.1:{metrics_port}")]);
    let requests_before = api_requests(&client).await;
    let started = Instant::now();
    let reconciler = spawn_logged("keyward-reconciler", cmd);
    let workers = [("reconciler", reconciler.pid()), ("provider", fake.pid())];
    let cpu_before_sync = cpu_of(&cp_dir, &workers);
    // Counted from a metadata watch, not by listing N Secrets every few hundred milliseconds:
    // the API server's CPU is what the reconciler and the ceiling are measured against.
    let managed: Api<PartialObjectMeta<Secret>> = Api::namespaced(client.clone(), &ns);
    let selector = watcher::Config::default().labels("reconcile.external-secrets.io/managed=true");
    let mut seen = HashSet::new();
    {
        let mut events = std::pin::pin!(watcher::watcher(managed, selector).default_backoff());
        while seen.len() < n {
            let left = phase_limit(n).saturating_sub(started.elapsed());
            match tokio::time::timeout(left, events.next()).await {
                Ok(Some(Ok(watcher::Event::Apply(s) | watcher::Event::InitApply(s)))) => {
                    seen.insert(s.metadata.name.unwrap_or_default());
                }
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => panic!("only {} of {n} synced within {:?}", seen.len(), phase_limit(n)),
            }
        }
    }
    let sync = started.elapsed();
    let cpu_sync = cpu_per_object(&cpu_before_sync, &cpu_of(&cp_dir, &workers), n);
    eprintln!(
        "[N={n}] first sync {:.1}s; reconciler RSS peak so far {:.1} MiB; CPU per first sync {}",
        sync.as_secs_f64(),
        status_mib(reconciler.pid(), "VmHWM:"),
        cpu_sync.1
    );
    // Let the status writes of the last syncs land.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let first_sync = delta(&requests_before, &api_requests(&client).await);

    // Idle: nothing is due (no periodic refresh yet).
    let pid = reconciler.pid();
    let cpu_before = cpu_seconds(pid);
    tokio::time::sleep(Duration::from_secs(30)).await;
    let idle_cpu = (cpu_seconds(pid) - cpu_before) / 30.0 * 100.0;
    let steady = status_mib(pid, "VmRSS:");
    eprintln!("[N={n}] idle CPU {idle_cpu:.2}% of one core; steady RSS {steady:.1} MiB");

    // The refresh interval, from the measured first sync: the spec change below is synced
    // (and its status written) within about one first sync, before any periodic refresh.
    let interval = sync.as_secs() + 30;
    let gets_synced = grpc_gets(provider_metrics_port).await;
    stream::iter(0..n)
        .map(|i| {
            let ess = ess.clone();
            async move {
                let patch = json!({"spec": {"refreshInterval": format!("{interval}s")}});
                ess.patch(&format!("es-{i}"), &PatchParams::default(), &Patch::Merge(patch)).await.unwrap();
            }
        })
        .buffer_unordered(PARALLEL)
        .collect::<Vec<_>>()
        .await;
    wait_for_gets(provider_metrics_port, gets_synced + n as f64, phase_limit(n), "the spec change was not synced")
        .await;
    tokio::time::sleep(Duration::from_secs(3)).await;

    // Every ExternalSecret refreshes once, finding the same value: what does that cost?
    let refresh_before = api_requests(&client).await;
    let gets_before = grpc_gets(provider_metrics_port).await;
    wait_for_gets(provider_metrics_port, gets_before + n as f64, phase_limit(n), "the refreshes did not come").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let refresh = delta(&refresh_before, &api_requests(&client).await);
    // One scrape of the reconciler's metrics, as Prometheus makes: it is part of what it costs.
    let scrape = metrics_text(metrics_port).await;
    let series = scrape.lines().filter(|l| !l.starts_with('#')).count();
    let peak = status_mib(pid, "VmHWM:");
    let provider_rss = status_mib(fake.pid(), "VmRSS:");
    let rate = n as f64 / sync.as_secs_f64();
    let ceiling_rate = n as f64 / ceiling.as_secs_f64();
    drop(reconciler);
    let (writes, cpu_writes) = same_writes(&client, &ns, n, &cp_dir).await;
    let writes_rate = n as f64 / writes.as_secs_f64();
    println!(
        "reconciler N={n}: first sync {:.2}s ({rate:.0}/s); plain client {:.2}s ({ceiling_rate:.0}/s); \
         throughput {:.0}% of the ceiling; ExternalSecrets created in {:.2}s",
        sync.as_secs_f64(),
        ceiling.as_secs_f64(),
        100.0 * rate / ceiling_rate,
        create_es.as_secs_f64(),
    );
    println!(
        "  reconciler RSS peak {peak:.1} MiB, steady {steady:.1} MiB (peak includes one /metrics scrape: {series} series, {:.1} MiB); provider RSS {provider_rss:.1} MiB",
        scrape.len() as f64 / (1024.0 * 1024.0)
    );
    println!(
        "  the same three writes from a plain client: {:.2}s ({writes_rate:.0}/s); throughput {:.0}% of that",
        writes.as_secs_f64(),
        100.0 * rate / writes_rate
    );
    println!(
        "  CPU per object: plain create {}; the three writes {}; first sync {}",
        cpu_plain.1, cpu_writes.1, cpu_sync.1
    );
    println!("  API requests per ExternalSecret, first sync: {}", per_object(&first_sync, n));
    println!("  API requests per no-change refresh: {}", per_object(&refresh, n));
    println!("  reconciler CPU while idle over 30 s: {idle_cpu:.2}% of one core; refresh interval then {interval}s");
    let key = |what: &str| format!("reconciler.n{n}.{what}");
    let lower = |what: &str, value: f64, unit: &str| figure(&key(what), value, unit, Better::Lower);
    lower("rss_peak", peak, "MiB");
    lower("rss_steady", steady, "MiB");
    lower("provider_rss", provider_rss, "MiB");
    lower("first_sync", sync.as_secs_f64(), "s");
    lower("first_sync_of_same_writes", sync.as_secs_f64() / writes.as_secs_f64(), "ratio");
    lower("cpu_per_first_sync", cpu_sync.0, "ms");
    lower("requests_per_first_sync", requests_per_object(&first_sync, n), "requests");
    lower("requests_per_refresh", requests_per_object(&refresh, n), "requests");
    lower("idle_cpu", idle_cpu, "%");
    drop(fake);
}
#[tokio::main]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    for n in sizes(1000) {
        with_temp_namespace(&[], |client, ns| run(client, ns, n)).await;
    }
}
