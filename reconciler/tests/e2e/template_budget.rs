//! End to end: one tenant's expensive templates never delay another tenant's sync, the Lease or
//! a health probe, and the reconciler still exits promptly on SIGTERM while they render.
//!
//! The tenant has its own namespaced store and several ExternalSecrets whose template loops
//! over `bcrypt`. Those end `Ready=False` with reason `TemplateBudgetExceeded` (a Secret that
//! was synced before keeps its data) while a new ExternalSecret of another namespace syncs in
//! seconds.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Secret;
use keyward_crds::{ExternalSecret, Provider, PushSecret};
use keyward_e2e::with_temp_namespace;
use keyward_provider_fake::api::Fake;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;

use crate::support::*;

const WAIT: Duration = Duration::from_secs(120);
/// How long the other tenant's new ExternalSecret may take to sync during the attack (it takes
/// well under a second otherwise; the debug build on a busy machine needs some slack).
const OTHER_TENANT_SYNC: Duration = Duration::from_secs(10);
const EXPENSIVE: &str = "{{ range until 100000 }}{{ if bcrypt \"x\" }}{{ end }}{{ end }}";
const EXPENSIVE_HTPASSWD: &str = "{{ range until 100000 }}{{ if htpasswd \"u\" \"x\" }}{{ end }}{{ end }}";
const EXPENSIVE_ES: usize = 6;

fn external_secret(name: &str, class: &str, template: Option<&str>) -> serde_json::Value {
    let mut target = json!({"name": name});
    if let Some(t) = template {
        target["template"] = json!({"data": {"value": t}});
    }
    json!({
        "apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
        "metadata": {"name": name, "labels": {CLASS_LABEL: class}},
        "spec": {"refreshInterval": "1s", "secretStoreRef": {"name": "fake", "kind": "Provider"}, "target": target,
                 "data": [{"secretKey": "value", "remoteRef": {"key": "db"}}]},
    })
}

/// A tenant's own store: a Fake config and a namespaced Provider in its namespace.
async fn tenant_store(client: &Client, ns: &str, class: &str, pki: &Pki, address: &str, value: &str) {
    pki.install(client, ns).await;
    apply(&Api::<Fake>::namespaced(client.clone(), ns), fake_config("data", &[("db", value)])).await;
    let mut store = provider("fake", ns, address, "data");
    store["metadata"]["labels"][CLASS_LABEL] = json!(class);
    apply(&Api::<Provider>::namespaced(client.clone(), ns), store).await;
}

async fn ready(ess: &Api<ExternalSecret>, name: &str) -> Option<(String, String, String)> {
    ess.get_opt(name).await.ok()??.status.and_then(|s| ready_of(&s.conditions))
}

fn health(port: u16) -> (bool, Duration) {
    let started = Instant::now();
    let ok = std::process::Command::new("curl")
        .args(["-sf", "-m", "2", &format!("http://127.0.0.1:{port}/healthz")])
        .status()
        .is_ok_and(|s| s.success());
    (ok, started.elapsed())
}

#[tokio::test(flavor = "multi_thread")]
async fn expensive_templates_of_one_tenant_never_stall_another() {
    // Alone: a reconciler of every namespace, and CPU and timing budgets.
    let _turn = exclusive().await;
    with_temp_namespace(&[], |client, other| async move {
        with_temp_namespace(&[], |client2, tenant| async move {
            let class = format!("budget-{other}");
            let pki = Pki::new();
            let fake = ProviderProcess::start("keyward-provider-fake", pki.provider_dir(), None).await;
            tenant_store(&client2, &tenant, &class, &pki, &fake.address(), "tenant-value").await;
            tenant_store(&client, &other, &class, &pki, &fake.address(), "other-value").await;
            let mut reconciler = Reconciler::start_cluster_wide(&class, &other, &["--shutdown-grace", "3s"]).await;
            let leases: Api<Lease> = Api::namespaced(client.clone(), &other);
            let lease = |l: Lease| l.spec.unwrap_or_default();
            let before = lease(leases.get("keyward-reconciler").await.unwrap());

            // A Secret the tenant synced before its template turned expensive.
            let tenant_ess: Api<ExternalSecret> = Api::namespaced(client.clone(), &tenant);
            let tenant_secrets: Api<Secret> = Api::namespaced(client.clone(), &tenant);
            apply(&tenant_ess, external_secret("was-good", &class, Some("{{ .value }}"))).await;
            wait_for_value(&tenant_secrets, "was-good", "value", "tenant-value", WAIT).await;

            // The attack: the template of was-good, and several more ExternalSecrets like it.
            apply(&tenant_ess, external_secret("was-good", &class, Some(EXPENSIVE))).await;
            for i in 0..EXPENSIVE_ES {
                apply(&tenant_ess, external_secret(&format!("expensive-{i}"), &class, Some(EXPENSIVE))).await;
            }
            // And through a PushSecret's template, with htpasswd.
            apply(
                &tenant_secrets,
                json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "to-push"},
                       "stringData": {"password": "pw"}}),
            )
            .await;
            let tenant_pss: Api<PushSecret> = Api::namespaced(client.clone(), &tenant);
            apply(
                &tenant_pss,
                json!({"apiVersion": "external-secrets.io/v1alpha1", "kind": "PushSecret",
                       "metadata": {"name": "expensive-push", "labels": {CLASS_LABEL: class}},
                       "spec": {"refreshInterval": "1s",
                                "secretStoreRefs": [{"name": "fake", "kind": "Provider"}],
                                "selector": {"secret": {"name": "to-push"}},
                                "template": {"data": {"line": EXPENSIVE_HTPASSWD}},
                                "data": [{"match": {"secretKey": "line", "remoteRef": {"remoteKey": "pushed"}}}]}}),
            )
            .await;
            tokio::time::sleep(Duration::from_secs(2)).await;

            // Another tenant's new ExternalSecret syncs within seconds meanwhile.
            let other_ess: Api<ExternalSecret> = Api::namespaced(client.clone(), &other);
            let other_secrets: Api<Secret> = Api::namespaced(client.clone(), &other);
            let started = Instant::now();
            apply(&other_ess, external_secret("unrelated", &class, Some("{{ .value | upper }}"))).await;
            wait_for_value(&other_secrets, "unrelated", "value", "OTHER-VALUE", OTHER_TENANT_SYNC).await;
            eprintln!("the other tenant's ExternalSecret synced in {:?} during the attack", started.elapsed());
            let (ok, took) = health(reconciler.metrics_port);
            assert!(ok && took < Duration::from_secs(1), "health probe during the attack: ok={ok} in {took:?}");

            // Every expensive one says why, and the Secret synced before keeps its data.
            for name in
                std::iter::once("was-good".to_string()).chain((0..EXPENSIVE_ES).map(|i| format!("expensive-{i}")))
            {
                let (status, _, message) = eventually(&format!("{name} reports the budget"), WAIT, || async {
                    ready(&tenant_ess, &name).await.filter(|(_, r, _)| r == "TemplateBudgetExceeded")
                })
                .await;
                assert_eq!(status, "False", "{name}: {message}");
                assert!(message.contains("template exceeded its CPU budget"), "{name}: {message}");
                assert!(message.contains("keeps its last data"), "{name}: {message}");
            }
            let (status, _, message) = eventually("the PushSecret reports the budget", WAIT, || async {
                let st = tenant_pss.get_opt("expensive-push").await.ok()??.status?;
                ready_of(&st.conditions).filter(|(_, r, _)| r == "TemplateBudgetExceeded")
            })
            .await;
            assert_eq!(status, "False", "PushSecret: {message}");
            assert!(message.contains("template exceeded its CPU budget"), "PushSecret: {message}");
            let kept = tenant_secrets.get("was-good").await.unwrap();
            assert_eq!(value(&kept, "value").as_deref(), Some("tenant-value"), "the last good data stays");

            // The Lease is still held by the same reconciler and kept renewed.
            let after = lease(leases.get("keyward-reconciler").await.unwrap());
            assert_eq!(after.holder_identity, before.holder_identity, "the Lease changed hands during the attack");
            assert_ne!(after.renew_time, before.renew_time, "the Lease was renewed during the attack");
            let renewed = after.renew_time.unwrap().0;
            let age = k8s_openapi::jiff::Timestamp::now().duration_since(renewed);
            assert!(age.as_secs() < 15, "last renewal {age:?} ago");

            // Renders are still running (the ExternalSecrets refresh every second): SIGTERM
            // still ends the process promptly.
            let patch = json!({"metadata": {"annotations": {"force-sync": "again"}}});
            for i in 0..EXPENSIVE_ES {
                tenant_ess
                    .patch(&format!("expensive-{i}"), &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .unwrap();
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
            let started = Instant::now();
            let exited = reconciler.process.terminate(Duration::from_secs(20));
            assert!(exited.is_some(), "the reconciler ignored SIGTERM while rendering");
            eprintln!("the reconciler exited {:?} after SIGTERM", started.elapsed());
            assert!(started.elapsed() < Duration::from_secs(10), "exit took {:?}", started.elapsed());
            drop(fake);
        })
        .await
    })
    .await;
}
