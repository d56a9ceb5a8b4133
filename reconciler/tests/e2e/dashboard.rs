//! Both Grafana dashboards against a real Prometheus scraping the real processes: Keyward's own
//! (`charts/keyward/dashboards/keyward.json`) and upstream's, as its 2.9.0 chart ships it
//! (`e2e/fixtures/upstream-grafana-dashboard-2.9.0.json.gz`; Apache License 2.0, © The External
//! Secrets Authors). Every target of every panel, its variables filled in as Grafana would,
//! must return at least one series while the test runs: a panel that queries a metric Keyward
//! does not export, or a label it does not set, fails here by name.
//!
//! Prometheus finds the processes as the prometheus-operator would: the chart's metrics
//! Services (rendered by `helm template`, created in another namespace than the objects, each
//! with an EndpointSlice naming its process) selected by the chart's ServiceMonitor, labelled by
//! the operator's relabelling (`service`, `namespace`, `job`, … — upstream's panels filter on
//! `service`, and `honorLabels` keeps an object's `namespace` apart from the Service's). Debian's
//! Prometheus has no Kubernetes discovery: the test reads the Services and EndpointSlices back
//! from the API server and gives Prometheus the labels that discovery would
//! ([`keyward_e2e::prometheus::endpointslice_targets`]).
//!
//! Things go wrong on purpose in every controller, so the panels that show only errors (upstream's
//! error rates keep values `> 0`) move: a Provider with credentials that may not read, a
//! SecretStore and a ClusterSecretStore whose provider does not run here, a PushSecret to a
//! store that may not be written, and a ClusterExternalSecret whose ExternalSecret's name is
//! taken in the namespace it selects. The webhook admits and denies through the API server; the
//! Kubernetes provider calls its store (this control plane).

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::time::{Duration, Instant};

use base64::Engine;
use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use keyward_crds::{ClusterExternalSecret, ClusterSecretStore, ExternalSecret, Provider, PushSecret, SecretStore};
use keyward_e2e::prometheus::{Prometheus, endpointslice_targets, service_monitor_scrape_config};
use keyward_e2e::{repo_root, with_temp_namespace};
use kube::{Api, Client};
use serde_json::{Value, json};

use crate::support::*;

const WAIT: Duration = Duration::from_secs(90);
const RUN_LABEL: &str = "keyward.dev/dashboard-e2e";

/// In place of `$__rate_interval` Grafana puts at least four scrape intervals (4 s here); a
/// wider window is as valid a rate and spans more of the samples taken since the traffic.
const RATE_INTERVAL: &str = "30s";

/// The address the EndpointSlices give every process (TEST-NET-1: the API server refuses
/// loopback ones); Prometheus' last relabelling turns it into loopback, where they listen.
const SLICE_ADDRESS: &str = "192.0.2.1";

/// The validating and mutating webhooks for the Keyward kinds of namespaces labelled `run`.
async fn register_webhook(webhook: &mut Webhook, client: &Client, pki: &Pki, run: &str) {
    let rule = |group: &str, version: &str, resources: &[&str]| json!({"apiGroups": [group], "apiVersions": [version], "operations": ["CREATE", "UPDATE"], "resources": resources});
    let rules = json!([
        rule("external-secrets.io", "v1", &["externalsecrets", "providers", "secretstores"]),
        rule("external-secrets.io", "v1alpha1", &["pushsecrets"]),
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

/// A dashboard from the repository, plain or gzipped.
fn dashboard(path: &str) -> Value {
    let path = repo_root().join(path);
    let text = if path.extension().is_some_and(|e| e == "gz") {
        let out = Command::new("gzip").arg("-dc").arg(&path).output().expect("run gzip");
        assert!(out.status.success(), "gzip -dc {}", path.display());
        String::from_utf8(out.stdout).expect("UTF-8")
    } else {
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    };
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every `(panel title, expression)` of a dashboard, with its variables filled in as Grafana
/// would: `vars` (`name`, value), then the rate window.
fn panel_queries(dashboard: &Value, vars: &[(&str, &str)]) -> Vec<(String, String)> {
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
            let mut expr = expr.replace("$__rate_interval", RATE_INTERVAL).replace("$__interval", RATE_INTERVAL);
            for (name, value) in vars {
                expr = expr.replace(&format!("${{{name}}}"), value).replace(&format!("${name}"), value);
            }
            assert!(!expr.contains('$'), "panel {title:?}: a variable the test does not fill in: {expr}");
            out.push((title.clone(), expr));
        }
    }
    out
}

/// The chart's metrics Services and ServiceMonitor, rendered for namespace `ns`.
fn chart_monitoring(ns: &str) -> (Vec<Value>, Value) {
    let tools = keyward_e2e::stores::cached_tool("build-tools.sh");
    let home = tempfile::tempdir().expect("helm home");
    let out = Command::new(tools.join("helm"))
        .env("HELM_CONFIG_HOME", home.path().join("config"))
        .env("HELM_CACHE_HOME", home.path().join("cache"))
        .env("HELM_DATA_HOME", home.path().join("data"))
        .args(["template", "kw"])
        .arg(repo_root().join("charts/keyward"))
        .args(["-n", ns, "--set", "metrics.serviceMonitor.enabled=true"])
        .args(["--set", "metrics.serviceMonitor.renderMode=alwaysRender"])
        .output()
        .expect("run helm");
    assert!(out.status.success(), "helm template: {}", String::from_utf8_lossy(&out.stderr));
    let objects: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .split("\n---")
        .filter_map(|d| serde_yaml::from_str::<Value>(d).ok())
        .filter(Value::is_object)
        .collect();
    let services = objects
        .iter()
        .filter(|o| o["kind"] == "Service" && o["metadata"]["labels"]["keyward.dev/metrics"] == "true")
        .cloned()
        .collect();
    let monitor = objects.into_iter().find(|o| o["kind"] == "ServiceMonitor").expect("a ServiceMonitor");
    (services, monitor)
}

/// Creates each metrics Service of a component that runs here (without its Pod selector) and an
/// EndpointSlice naming its process' port; returns the Services' names, and the Services and
/// EndpointSlices as the API server holds them.
async fn publish(
    client: &Client,
    ns: &str,
    services: &[Value],
    ports: &[(&str, u16)],
) -> (Vec<String>, Vec<Value>, Vec<Value>) {
    let (svc_api, slices): (Api<Service>, Api<EndpointSlice>) =
        (Api::namespaced(client.clone(), ns), Api::namespaced(client.clone(), ns));
    let mut names = Vec::new();
    for (component, port) in ports {
        let svc = services
            .iter()
            .find(|s| s["metadata"]["labels"]["app.kubernetes.io/component"] == *component)
            .unwrap_or_else(|| panic!("no metrics Service for {component}"));
        let name = svc["metadata"]["name"].as_str().expect("name").to_string();
        let mut svc = svc.clone();
        svc["spec"].as_object_mut().expect("spec").remove("selector");
        apply(&svc_api, svc).await;
        apply(
            &slices,
            json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                   "metadata": {"name": name, "labels": {"kubernetes.io/service-name": name,
                                                         "endpointslice.kubernetes.io/managed-by": "keyward-e2e"}},
                   "addressType": "IPv4",
                   "endpoints": [{"addresses": [SLICE_ADDRESS], "conditions": {"ready": true}}],
                   "ports": [{"name": "metrics", "port": port, "protocol": "TCP"}]}),
        )
        .await;
        names.push(name);
    }
    let held =
        |items: Vec<Value>| items.into_iter().filter(|o| names.iter().any(|n| *n == o["metadata"]["name"])).collect();
    let listed = svc_api.list(&Default::default()).await.expect("list Services").items;
    let svcs = held(listed.iter().map(|o| serde_json::to_value(o).expect("JSON")).collect());
    let listed = slices.list(&Default::default()).await.expect("list EndpointSlices").items;
    let slices = held(listed.iter().map(|o| serde_json::to_value(o).expect("JSON")).collect());
    (names, svcs, slices)
}

/// Objects whose reconciles fail, one kind after another (see the module's documentation).
async fn failing_objects(client: &Client, ns: &str, run: &str) {
    let stores: Api<SecretStore> = Api::namespaced(client.clone(), ns);
    let unserved = json!({"fake": {"data": [{"key": "db", "value": "x"}]}});
    apply(
        &stores,
        json!({"apiVersion": "external-secrets.io/v1", "kind": "SecretStore",
               "metadata": {"name": "unserved", "labels": {CLASS_LABEL: ns}}, "spec": {"provider": unserved}}),
    )
    .await;
    let cluster_stores: Api<ClusterSecretStore> = Api::all(client.clone());
    apply(
        &cluster_stores,
        json!({"apiVersion": "external-secrets.io/v1", "kind": "ClusterSecretStore",
               "metadata": {"name": format!("dashboard-unserved-{run}"), "labels": {CLASS_LABEL: ns}},
               "spec": {"provider": unserved}}),
    )
    .await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    apply(
        &secrets,
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "push-source"}, "stringData": {"user": "app"}}),
    )
    .await;
    let pushes: Api<PushSecret> = Api::namespaced(client.clone(), ns);
    apply(
        &pushes,
        json!({"apiVersion": "external-secrets.io/v1alpha1", "kind": "PushSecret",
               "metadata": {"name": "push", "labels": {CLASS_LABEL: ns}},
               "spec": {"refreshInterval": "2s", "secretStoreRefs": [{"name": "good", "kind": "Provider"}],
                        "selector": {"secret": {"name": "push-source"}},
                        "data": [{"match": {"secretKey": "user", "remoteRef": {"remoteKey": "pushed"}}}]}}),
    )
    .await;
    let ces: Api<ClusterExternalSecret> = Api::all(client.clone());
    apply(
        &ces,
        json!({"apiVersion": "external-secrets.io/v1", "kind": "ClusterExternalSecret",
               "metadata": {"name": format!("dashboard-{run}"), "labels": {CLASS_LABEL: ns}},
               "spec": {"externalSecretName": "taken", "refreshTime": "1s",
                        "namespaceSelectors": [{"matchLabels": {RUN_LABEL: run}}],
                        "externalSecretSpec": {"refreshInterval": "1h", "secretStoreRef": {"name": "good", "kind": "Provider"},
                                               "data": [{"secretKey": "user", "remoteRef": {"key": "db", "property": "user"}}]}}}),
    )
    .await;
}

/// Deletes the cluster-scoped objects of this run, waiting for the ClusterExternalSecret's
/// finalizer while the reconciler still runs.
async fn delete_cluster_objects(client: &Client, run: &str) {
    let ces: Api<ClusterExternalSecret> = Api::all(client.clone());
    let name = format!("dashboard-{run}");
    let _ = ces.delete(&name, &Default::default()).await;
    eventually("the ClusterExternalSecret gone", WAIT, || async {
        ces.get_opt(&name).await.ok()?.is_none().then_some(())
    })
    .await;
    let stores: Api<ClusterSecretStore> = Api::all(client.clone());
    let _ = stores.delete(&format!("dashboard-unserved-{run}"), &Default::default()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn every_panel_of_both_dashboards_has_data_from_a_running_keyward() {
    // Alone: Prometheus rates over a minute of scrapes, and every panel must have data in time.
    let _turn = exclusive().await;
    let keyward = dashboard("charts/keyward/dashboards/keyward.json");
    let upstream = dashboard("e2e/fixtures/upstream-grafana-dashboard-2.9.0.json.gz");
    let run = format!("{:08x}", rand::random::<u32>());
    let (run, keyward, upstream) = (&run, &keyward, &upstream);
    // `monitoring` holds the metrics Services, as the release namespace would: the series'
    // `namespace` labels must still name the objects' namespace.
    with_temp_namespace(&[], |_client, monitoring| async move {
        with_temp_namespace(&[(RUN_LABEL, run.as_str())], |client, ns| async move {
            let pki = Pki::new();
            pki.install(&client, &ns).await;
            let kube_provider = ProviderProcess::start("keyward-provider-kubernetes", pki.provider_dir(), None).await;
            let mut webhook = Webhook::start(&pki.issue_server_dir("webhook")).await;
            register_webhook(&mut webhook, &client, &pki, run).await;

            // A reader ServiceAccount allowed to read the remote namespace, and one that is not,
            // each with a Kubernetes config and a Provider; their store is the `monitoring`
            // namespace, which the reader may read but not write.
            let server = kubernetes_good_and_broken(&client, &ns, &monitoring, &kube_provider.address()).await;
            let stores: Api<SecretStore> = Api::namespaced(client.clone(), &ns);
            apply(
                &stores,
                json!({"apiVersion": "external-secrets.io/v1", "kind": "SecretStore",
                       "metadata": {"name": "store", "labels": {CLASS_LABEL: ns}},
                       "spec": {"provider": {"kubernetes": {"remoteNamespace": monitoring, "server": server,
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

            // Every namespace, as the chart runs it: ClusterExternalSecrets need that.
            let flags = [
                "--store-provider".to_string(),
                format!("kubernetes={}", kube_provider.address()),
                "--store-provider-tls-namespace".to_string(),
                ns.clone(),
            ];
            let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
            let reconciler = Reconciler::start_cluster_wide(&ns, &ns, &flags).await;
            let ess: Api<ExternalSecret> = Api::namespaced(client.clone(), &ns);
            for (name, kind, store) in [
                ("good", "Provider", "good"),
                ("broken", "Provider", "broken"),
                ("via-store", "SecretStore", "store"),
                ("taken", "Provider", "good"),
            ] {
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
            wait_for_value(&secrets, "taken", "user", "app", WAIT).await;
            failing_objects(&client, &ns, run).await;
            eventually("the broken ExternalSecret not Ready", WAIT, || async {
                let es = ess.get("broken").await.ok()?;
                (ready_of(&es.status?.conditions)?.0 == "False").then_some(())
            })
            .await;

            let (services, monitor) = chart_monitoring(&monitoring);
            let (jobs, held_services, held_slices) = publish(
                &client,
                &monitoring,
                &services,
                &[
                    ("reconciler", reconciler.metrics_port),
                    ("webhook", webhook.health),
                    ("provider-kubernetes", kube_provider.health_port),
                ],
            )
            .await;
            let targets_dir = tempfile::tempdir().expect("tempdir");
            let targets_file = targets_dir.path().join("endpointslices.json");
            let targets = endpointslice_targets(&monitor, &held_services, &held_slices);
            std::fs::write(&targets_file, targets.to_string()).expect("write targets");
            let address = (r"192\.0\.2\.1:(\d+)", "127.0.0.1:$1");
            let scrape = service_monitor_scrape_config(&monitor, 0, &targets_file, address);
            let mut prometheus = Prometheus::start_with(&[scrape]);
            let jobs: Vec<&str> = jobs.iter().map(String::as_str).collect();
            prometheus.wait_for_targets(&jobs, Duration::from_secs(60));

            // Every query until each has had data: rates need two samples of each series, the
            // refreshes keep syncs and store calls coming, and the failures keep coming with
            // their backoff. An error panel that showed a value once has moved.
            let mut queries: Vec<(String, String)> = panel_queries(keyward, &[("namespace", &ns)])
                .into_iter()
                .map(|(t, e)| (format!("Keyward: {t}"), e))
                .collect();
            let upstream_queries = panel_queries(upstream, &[("controller", "externalsecret")]);
            assert!(upstream_queries.len() >= 25, "{} queries in upstream's dashboard", upstream_queries.len());
            queries.extend(upstream_queries.into_iter().map(|(t, e)| (format!("upstream: {t}"), e)));
            let started = Instant::now();
            let mut pending: BTreeSet<usize> = (0..queries.len()).collect();
            let mut why: BTreeMap<usize, String> = BTreeMap::new();
            while !pending.is_empty() && started.elapsed() < WAIT {
                for i in pending.clone() {
                    match prometheus.query(&queries[i].1) {
                        Ok(series) if !series.is_empty() => {
                            pending.remove(&i);
                        }
                        Ok(_) => {
                            why.insert(i, "no series".to_string());
                        }
                        Err(e) => {
                            why.insert(i, e);
                        }
                    }
                }
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
            let report: Vec<String> = pending
                .iter()
                .map(|i| format!("  panel {:?}: {}\n    {}", queries[*i].0, queries[*i].1, why[i]))
                .collect();
            assert!(
                pending.is_empty(),
                "{} of {} dashboard queries never returned anything from Prometheus ({}):\n{}",
                pending.len(),
                queries.len(),
                prometheus.url(),
                report.join("\n")
            );
            delete_cluster_objects(&client, run).await;
            drop((prometheus, reconciler, webhook, kube_provider));
        })
        .await
    })
    .await;
}

#[test]
fn dashboards_fill_in_their_variables() {
    let d = json!({"panels": [{"type": "row", "panels": [{"title": "p", "type": "stat", "targets": [
        {"expr": "sum(x{namespace=~\"$namespace\",controller=\"${controller}\"}[$__rate_interval])"}]}]}]});
    let q = panel_queries(&d, &[("namespace", "n"), ("controller", "c")]);
    assert_eq!(q, [("p".to_string(), "sum(x{namespace=~\"n\",controller=\"c\"}[30s])".to_string())]);
}
