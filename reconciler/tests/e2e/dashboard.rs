//! The chart's Grafana dashboard (`charts/keyward/dashboards/keyward.json`) against a real
//! Prometheus scraping the real processes: the webhook, admitting and denying through the API
//! server; the reconciler, syncing one ExternalSecret per store (a Provider with working
//! credentials, one with broken ones, a SecretStore); the Kubernetes provider, calling its
//! store (this control plane). Every target of every panel, its variables filled in as Grafana
//! would, must return at least one series: a panel that queries a metric Keyward does not
//! export, or a label it does not set, fails here by name.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use base64::Engine;
use k8s_openapi::api::core::v1::Secret;
use keyward_crds::{ExternalSecret, Provider, SecretStore};
use keyward_e2e::prometheus::Prometheus;
use keyward_e2e::{repo_root, with_temp_namespace};
use kube::{Api, Client};
use serde_json::{Value, json};

use crate::support::*;

const WAIT: Duration = Duration::from_secs(90);
const RUN_LABEL: &str = "keyward.dev/dashboard-e2e";

/// In place of `$__rate_interval` Grafana puts at least four scrape intervals (4 s here); a
/// wider window is as valid a rate and spans more of the samples taken since the traffic.
const RATE_INTERVAL: &str = "30s";

/// The validating and mutating webhooks for the Keyward kinds of namespaces labelled `run`.
async fn register_webhook(webhook: &mut Webhook, client: &Client, pki: &Pki, run: &str) {
    let rule = |group: &str, version: &str, resources: &[&str]| json!({"apiGroups": [group], "apiVersions": [version], "operations": ["CREATE", "UPDATE"], "resources": resources});
    let rules = json!([
        rule("external-secrets.io", "v1", &["externalsecrets", "providers", "secretstores"]),
        rule("provider.external-secrets.io", "v2alpha1", &["kubernetes"]),
    ]);
    for (kind, path) in [("ValidatingWebhookConfiguration", "/validate"), ("MutatingWebhookConfiguration", "/mutate")] {
        let config = json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
            "metadata": {"name": format!("keyward-dashboard-e2e-{run}")},
            "webhooks": [{
                "name": "namespaced.dashboard.keyward.dev",
                "clientConfig": {"url": format!("{}{path}", webhook.url()),
                                 "caBundle": base64::engine::general_purpose::STANDARD.encode(&pki.ca)},
                "rules": rules, "failurePolicy": "Fail", "sideEffects": "None",
                "admissionReviewVersions": ["v1"], "timeoutSeconds": 10,
                "namespaceSelector": {"matchLabels": {RUN_LABEL: run}},
            }],
        });
        webhook.register(client, config).await;
    }
}

/// Every `(panel title, expression)` of the dashboard, with its variables filled in: the
/// namespace chosen (`ns`, as the namespace picker would) and the rate window.
fn panel_queries(dashboard: &Value, ns: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut panels: Vec<&Value> = dashboard["panels"].as_array().expect("panels").iter().collect();
    // Panels of a collapsed row sit inside it.
    let nested: Vec<&Value> = panels.iter().flat_map(|p| p["panels"].as_array().into_iter().flatten()).collect();
    panels.extend(nested);
    for panel in panels.into_iter().filter(|p| p["type"] != "row") {
        let title = panel["title"].as_str().unwrap_or("<untitled>").to_string();
        let targets = panel["targets"].as_array().filter(|t| !t.is_empty());
        for target in targets.unwrap_or_else(|| panic!("panel {title:?} has no target")) {
            let expr = target["expr"].as_str().unwrap_or_else(|| panic!("panel {title:?}: a target without expr"));
            let expr = expr
                .replace("${namespace}", ns)
                .replace("$namespace", ns)
                .replace("$__rate_interval", RATE_INTERVAL)
                .replace("$__interval", RATE_INTERVAL);
            assert!(!expr.contains('$'), "panel {title:?}: a variable the test does not fill in: {expr}");
            out.push((title.clone(), expr));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn every_dashboard_panel_has_data_from_a_running_keyward() {
    // Alone: Prometheus rates over a minute of scrapes, and every panel must have data in time.
    let _turn = exclusive().await;
    let path = repo_root().join("charts/keyward/dashboards/keyward.json");
    let dashboard: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let run = format!("{:08x}", rand::random::<u32>());
    let (run, dashboard) = (&run, &dashboard);
    with_temp_namespace(&[], |_client, remote| async move {
        with_temp_namespace(&[(RUN_LABEL, run.as_str())], |client, ns| async move {
            let pki = Pki::new();
            pki.install(&client, &ns).await;
            let kube_provider = ProviderProcess::start("keyward-provider-kubernetes", pki.provider_dir(), None).await;
            let mut webhook = Webhook::start(&pki.issue_server_dir("webhook")).await;
            register_webhook(&mut webhook, &client, &pki, run).await;

            // A reader ServiceAccount allowed to read the remote namespace, and one that is not,
            // each with a Kubernetes config and a Provider.
            let server = kubernetes_good_and_broken(&client, &ns, &remote, &kube_provider.address()).await;
            let stores: Api<SecretStore> = Api::namespaced(client.clone(), &ns);
            apply(
                &stores,
                json!({"apiVersion": "external-secrets.io/v1", "kind": "SecretStore",
                       "metadata": {"name": "store", "labels": {CLASS_LABEL: ns}},
                       "spec": {"provider": {"kubernetes": {"remoteNamespace": remote, "server": server,
                                                            "auth": {"serviceAccount": {"name": "reader"}}}}}}),
            )
            .await;

            // A denial: a Provider whose address has no port.
            let providers: Api<Provider> = Api::namespaced(client.clone(), &ns);
            let bad = json!({"apiVersion": "external-secrets.io/v1", "kind": "Provider",
                             "metadata": {"name": "bad-address", "labels": {CLASS_LABEL: ns}},
                             "spec": {"config": {"address": "no-port-here", "providerRef": {
                                 "apiVersion": "provider.external-secrets.io/v2alpha1", "kind": "Kubernetes", "name": "good"}}}});
            let refused = providers
                .patch("bad-address", &kube::api::PatchParams::apply("e2e-test").force(), &kube::api::Patch::Apply(bad))
                .await;
            let refused = refused.expect_err("the webhook admitted a Provider address without a port").to_string();
            assert!(refused.contains("denied the request") && refused.contains("spec.config.address"), "{refused}");

            let reconciler = Reconciler::start_with_stores(&ns, &[("kubernetes", &kube_provider)], &[]).await;
            let ess: Api<ExternalSecret> = Api::namespaced(client.clone(), &ns);
            for (name, kind, store) in [("good", "Provider", "good"), ("broken", "Provider", "broken"), ("via-store", "SecretStore", "store")] {
                apply(
                    &ess,
                    json!({"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
                           "metadata": {"name": name, "labels": {CLASS_LABEL: ns}},
                           "spec": {"refreshInterval": "2s", "secretStoreRef": {"name": store, "kind": kind},
                                    "data": [{"secretKey": "user", "remoteRef": {"key": "db", "property": "user"}}]}}),
                )
                .await;
            }
            let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
            wait_for_value(&secrets, "good", "user", "app", WAIT).await;
            wait_for_value(&secrets, "via-store", "user", "app", WAIT).await;
            eventually("the broken ExternalSecret not Ready", WAIT, || async {
                let es = ess.get("broken").await.ok()?;
                (ready_of(&es.status?.conditions)?.0 == "False").then_some(())
            })
            .await;

            let mut prometheus = Prometheus::start(&[
                ("keyward-reconciler", format!("127.0.0.1:{}", reconciler.metrics_port)),
                ("keyward-webhook", format!("127.0.0.1:{}", webhook.health)),
                ("keyward-provider-kubernetes", format!("127.0.0.1:{}", kube_provider.health_port)),
            ]);
            prometheus.wait_for_targets(
                &["keyward-reconciler", "keyward-webhook", "keyward-provider-kubernetes"],
                Duration::from_secs(60),
            );

            // Every query until each has data: rates need two samples of each series, and the
            // refreshes keep syncs and store calls coming while the scrapes accumulate.
            let queries = panel_queries(dashboard, &ns);
            assert!(queries.len() >= 10, "{} queries in the dashboard", queries.len());
            let started = Instant::now();
            let empty: BTreeMap<String, String> = loop {
                let mut empty = BTreeMap::new();
                for (title, expr) in &queries {
                    match prometheus.query(expr) {
                        Ok(series) if !series.is_empty() => {}
                        Ok(_) => {
                            empty.insert(format!("{title:?}: {expr}"), "no series".to_string());
                        }
                        Err(e) => {
                            empty.insert(format!("{title:?}: {expr}"), e);
                        }
                    }
                }
                if empty.is_empty() || started.elapsed() > Duration::from_secs(60) {
                    break empty;
                }
                tokio::time::sleep(Duration::from_secs(2)).await;
            };
            let report: Vec<String> = empty.iter().map(|(panel, why)| format!("  panel {panel}\n    {why}")).collect();
            assert!(
                empty.is_empty(),
                "{} of {} dashboard queries returned nothing from Prometheus ({}):\n{}",
                empty.len(),
                queries.len(),
                prometheus.url(),
                report.join("\n")
            );
            drop((prometheus, reconciler, webhook, kube_provider));
        })
        .await
    })
    .await;
}
