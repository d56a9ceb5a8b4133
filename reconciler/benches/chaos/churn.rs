//! Churn soak: for `KEYWARD_CHAOS_CHURN` seconds, one step a second against a cluster-wide
//! reconciler, the webhook (registered with the API server) and the Fake provider:
//!
//! - every 20 steps a tenant namespace appears (its provider TLS Secret, a Fake config, a
//!   Provider, 20 ExternalSecrets) and, once more than four are alive, the oldest is deleted;
//! - every step one tenant's config gets a new value, its ExternalSecrets are touched so they
//!   sync it, one of its ExternalSecrets is deleted and a new one created.
//!
//! Sampled every 10 steps: RSS of the reconciler and the webhook, open file descriptors of all
//! three processes, the provider's established connections, emptied Secrets. At the end: the
//! time until every live ExternalSecret's Secret holds its tenant's last value, the metric
//! series still naming a deleted namespace (leaked series), and the RSS trend after warm-up
//! (a least-squares slope over the samples after the first quarter).

use std::collections::{BTreeMap, VecDeque};
use std::process::Command;
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use keyward_crds::{ExternalSecret, Provider};
use keyward_e2e::{ChildProcess, E2E_LABEL, control_plane, free_port, spawn_logged};
use keyward_provider_fake::api::Fake;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

use crate::Row;
use crate::support::*;

const ES_PER_TENANT: usize = 20;
const LIVE_TENANTS: usize = 4;
const NEW_TENANT_EVERY: u64 = 20;
const SAMPLE_EVERY: u64 = 10;
/// Selects the churn's tenant namespaces (webhook registration, cleanup).
const CHURN_LABEL: &str = "keyward.dev/chaos-churn";

/// A tenant namespace and what its Secrets should hold.
struct Tenant {
    ns: String,
    value: String,
    /// Indexes of its live ExternalSecrets `es-<i>`, oldest first.
    live: VecDeque<usize>,
    next: usize,
}

/// One sample of the processes.
struct Sample {
    at: Duration,
    reconciler_mib: f64,
    webhook_mib: f64,
    fds: [usize; 3],
    connections: usize,
}

pub async fn churn(client: Client, home: String, duration: Duration) -> Row {
    let class = format!("churn-{home}");
    let pki = Pki::new();
    let mut fake = ProviderProcess::start("keyward-provider-fake", pki.provider_dir(), None).await;
    let mut webhook = Webhook::start(&pki.issue_server_dir("webhook")).await;
    webhook
        .register(
            &client,
            json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
                   "metadata": {"name": format!("keyward-{class}")},
                   "webhooks": [{"name": "validate.keyward.dev",
                       "clientConfig": {"url": format!("{}/validate", webhook.url()), "caBundle": BASE64.encode(&pki.ca)},
                       "rules": [{"apiGroups": ["external-secrets.io"], "apiVersions": ["v1"],
                                  "operations": ["CREATE", "UPDATE"], "resources": ["externalsecrets", "providers"]}],
                       "namespaceSelector": {"matchLabels": {CHURN_LABEL: &class}},
                       "failurePolicy": "Fail", "sideEffects": "None", "admissionReviewVersions": ["v1"],
                       "timeoutSeconds": 10}]}),
        )
        .await;
    let metrics_port = free_port();
    let mut reconciler = cluster_reconciler(&class, &home, metrics_port).await;

    let namespaces: Api<Namespace> = Api::all(client.clone());
    let mut tenants: VecDeque<Tenant> = VecDeque::new();
    let mut deleted: Vec<String> = Vec::new();
    let mut samples: Vec<Sample> = Vec::new();
    let mut emptied = 0;
    let started = Instant::now();
    let mut step = 0u64;
    while started.elapsed() < duration {
        let step_started = Instant::now();
        if step.is_multiple_of(NEW_TENANT_EVERY) {
            tenants.push_back(new_tenant(&client, &pki, &fake.address(), &class, step).await);
            if tenants.len() > LIVE_TENANTS
                && let Some(old) = tenants.pop_front()
            {
                namespaces.delete(&old.ns, &DeleteParams::default()).await.unwrap();
                deleted.push(old.ns);
            }
        }
        let index = usize::try_from(step).unwrap() % tenants.len();
        change_tenant(&client, &mut tenants[index], &class, step).await;
        step += 1;
        if step.is_multiple_of(SAMPLE_EVERY) {
            for p in [&mut reconciler, &mut webhook.process, &mut fake.process] {
                assert!(p.is_running(), "a process exited during the churn:\n{}", p.log());
            }
            for t in &tenants {
                emptied = emptied.max(empty_secrets(&client, t).await);
            }
            samples.push(Sample {
                at: started.elapsed(),
                reconciler_mib: status_mib(reconciler.pid(), "VmRSS:"),
                webhook_mib: status_mib(webhook.process.pid(), "VmRSS:"),
                fds: [open_fds(reconciler.pid()), open_fds(webhook.process.pid()), open_fds(fake.process.pid())],
                connections: fake.established_connections(),
            });
        }
        tokio::time::sleep(Duration::from_secs(1).saturating_sub(step_started.elapsed())).await;
    }

    let stopped = Instant::now();
    // A config change and the touch right after it can meet a provider whose watch of the Fake
    // configs has not delivered the change yet (the Fake provider's data lives in the API
    // server); such an ExternalSecret synced the previous value. One more touch of every live
    // ExternalSecret, after the provider has seen the last change, settles them.
    tokio::time::sleep(Duration::from_secs(2)).await;
    for t in &tenants {
        touch_all(&client, t, "settle").await;
    }
    for t in &tenants {
        eventually(&format!("every Secret of {} holds {}", t.ns, t.value), Duration::from_secs(600), || {
            converged(&client, t)
        })
        .await;
    }
    let took = stopped.elapsed();
    // A namespace deleted in the last steps may still be terminating (its objects not yet
    // removed); only series that outlive the namespace itself are leaks.
    for ns in &deleted {
        eventually(&format!("namespace {ns} is gone"), Duration::from_secs(600), || async {
            namespaces.get_opt(ns).await.ok().and_then(|n| n.is_none().then_some(()))
        })
        .await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let metrics = scrape(metrics_port);
    let leaked: Vec<&str> = metrics
        .lines()
        .filter(|l| !l.starts_with('#') && deleted.iter().any(|ns| l.contains(&format!("\"{ns}\""))))
        .collect();
    for line in leaked.iter().take(40) {
        println!("leaked series: {line}");
    }
    report(&samples, step, deleted.len(), leaked.len());
    let exited = [reconciler.is_running(), webhook.process.is_running(), fake.process.is_running()]
        .iter()
        .filter(|running| !**running)
        .count();
    let row = Row {
        scenario: format!("churn ({}s, {step} steps, {} namespaces deleted)", duration.as_secs(), deleted.len()),
        emptied,
        exited,
        converge: took,
        peak: format!(
            "reconciler {:.0} MiB, webhook {:.0} MiB",
            status_mib(reconciler.pid(), "VmHWM:"),
            status_mib(webhook.process.pid(), "VmHWM:")
        ),
    };
    for t in tenants {
        let _ = namespaces.delete(&t.ns, &DeleteParams::default()).await;
    }
    row
}

/// A reconciler over every namespace, for the ExternalSecrets and Providers of `class`.
async fn cluster_reconciler(class: &str, lease_ns: &str, metrics_port: u16) -> ChildProcess {
    let mut cmd = Command::new(binary("keyward-reconciler"));
    cmd.env("KUBECONFIG", control_plane().await.kubeconfig())
        .env("RUST_LOG", "warn,keyward_reconciler=info")
        .args(["--log-format", "text", "--controller-class", class, "--lease-namespace", lease_ns])
        .args(["--health-listen", &format!("127.0.0.1:{metrics_port}")]);
    let mut process = spawn_logged("keyward-reconciler", cmd);
    process.wait_for_log("caches listed", Duration::from_secs(120)).await;
    process
}

/// A new tenant namespace with its provider, config and ExternalSecrets.
async fn new_tenant(client: &Client, pki: &Pki, address: &str, class: &str, step: u64) -> Tenant {
    let ns = format!("{class}-{step}");
    let labels: BTreeMap<String, String> =
        [(E2E_LABEL.to_string(), "true".to_string()), (CHURN_LABEL.to_string(), class.to_string())].into();
    let namespace = Namespace {
        metadata: kube::api::ObjectMeta { name: Some(ns.clone()), labels: Some(labels), ..Default::default() },
        ..Default::default()
    };
    Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &namespace).await.unwrap();
    pki.install(client, &ns).await;
    let value = format!("v{step}");
    apply(&Api::<Fake>::namespaced(client.clone(), &ns), fake_config("cfg", &[("db", &value)])).await;
    let mut provider = provider("fake", &ns, address, "cfg");
    provider["metadata"]["labels"][CLASS_LABEL] = json!(class);
    apply(&Api::<Provider>::namespaced(client.clone(), &ns), provider).await;
    let mut tenant = Tenant { ns, value, live: VecDeque::new(), next: 0 };
    for _ in 0..ES_PER_TENANT {
        add_external_secret(client, &mut tenant, class).await;
    }
    tenant
}

/// One step of churn for `tenant`: a new config value synced by every ExternalSecret, one
/// ExternalSecret replaced by a new one.
async fn change_tenant(client: &Client, tenant: &mut Tenant, class: &str, step: u64) {
    tenant.value = format!("v{step}");
    apply(&Api::<Fake>::namespaced(client.clone(), &tenant.ns), fake_config("cfg", &[("db", &tenant.value)])).await;
    touch_all(client, tenant, &tenant.value).await;
    let ess: Api<ExternalSecret> = Api::namespaced(client.clone(), &tenant.ns);
    if let Some(oldest) = tenant.live.pop_front() {
        ess.delete(&format!("es-{oldest}"), &DeleteParams::default()).await.unwrap();
    }
    add_external_secret(client, tenant, class).await;
}

/// Touches every live ExternalSecret of `tenant` so each syncs again.
async fn touch_all(client: &Client, tenant: &Tenant, stamp: &str) {
    let ess: Api<ExternalSecret> = Api::namespaced(client.clone(), &tenant.ns);
    for i in &tenant.live {
        let patch = json!({"metadata": {"annotations": {"force-sync": stamp}}});
        ess.patch(&format!("es-{i}"), &PatchParams::default(), &Patch::Merge(patch)).await.unwrap();
    }
}

async fn add_external_secret(client: &Client, tenant: &mut Tenant, class: &str) {
    let i = tenant.next;
    tenant.next += 1;
    apply(
        &Api::<ExternalSecret>::namespaced(client.clone(), &tenant.ns),
        json!({"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
               "metadata": {"name": format!("es-{i}"), "labels": {CLASS_LABEL: class}},
               "spec": {"refreshInterval": "1h", "secretStoreRef": {"name": "fake", "kind": "Provider"},
                        "data": [{"secretKey": "value", "remoteRef": {"key": "db"}}]}}),
    )
    .await;
    tenant.live.push_back(i);
}

/// The Secrets of `tenant`'s live ExternalSecrets, by name → the value they hold.
async fn secret_values(client: &Client, tenant: &Tenant) -> BTreeMap<String, Option<String>> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &tenant.ns);
    let lp = kube::api::ListParams::default().labels("reconcile.external-secrets.io/managed=true");
    let Ok(list) = secrets.list(&lp).await else { return BTreeMap::new() };
    list.items.iter().map(|s| (s.metadata.name.clone().unwrap_or_default(), value(s, "value"))).collect()
}

/// Live ExternalSecrets whose Secret exists and holds nothing.
async fn empty_secrets(client: &Client, tenant: &Tenant) -> usize {
    let values = secret_values(client, tenant).await;
    tenant
        .live
        .iter()
        .filter(|i| values.get(&format!("es-{i}")).is_some_and(|v| v.as_deref().is_none_or(str::is_empty)))
        .count()
}

async fn converged(client: &Client, tenant: &Tenant) -> Option<()> {
    let values = secret_values(client, tenant).await;
    tenant
        .live
        .iter()
        .all(|i| values.get(&format!("es-{i}")).is_some_and(|v| v.as_deref() == Some(tenant.value.as_str())))
        .then_some(())
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map(|d| d.count()).unwrap_or(0)
}

fn scrape(port: u16) -> String {
    let out = Command::new("curl").args(["-sf", &format!("http://127.0.0.1:{port}/metrics")]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Least-squares slope of `y` over time, per hour.
fn slope_per_hour(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    if n < 2.0 {
        return 0.0;
    }
    let mean_x = points.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_y = points.iter().map(|p| p.1).sum::<f64>() / n;
    let cov: f64 = points.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum();
    let var: f64 = points.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
    if var == 0.0 { 0.0 } else { cov / var * 3600.0 }
}

/// Prints the churn's trend line: RSS and descriptors after warm-up versus the end.
fn report(samples: &[Sample], steps: u64, deleted: usize, leaked: usize) {
    let Some(last) = samples.last() else { return };
    let warm = samples.len() / 4;
    let after: &[Sample] = &samples[warm..];
    let first = &after[0];
    let trend =
        |f: fn(&Sample) -> f64| slope_per_hour(&after.iter().map(|s| (s.at.as_secs_f64(), f(s))).collect::<Vec<_>>());
    println!(
        "churn: {steps} steps, {deleted} namespaces deleted, {} samples (warm-up: first {warm}); \
         reconciler RSS {:.1} → {:.1} MiB ({:+.1} MiB/h), webhook RSS {:.1} → {:.1} MiB ({:+.1} MiB/h); \
         open fds reconciler/webhook/provider {:?} → {:?}; provider connections {} → {}; \
         metric series naming a deleted namespace: {leaked}",
        samples.len(),
        first.reconciler_mib,
        last.reconciler_mib,
        trend(|s| s.reconciler_mib),
        first.webhook_mib,
        last.webhook_mib,
        trend(|s| s.webhook_mib),
        first.fds,
        last.fds,
        first.connections,
        last.connections,
    );
}
