//! What the chart gives a monitoring stack and the network around the webhook: metrics
//! Services named for External Secrets' dashboards, the ServiceMonitor and PrometheusRule only
//! where their kinds exist (or when asked), the alert rules under `promtool test rules`, the
//! webhook's port and host network, and keyward-certs' probes, metrics and disruption budget.

use std::path::Path;
use std::process::Command;

use keyward_chart_tests::{chart_dir, helm, run, run_fails};
use keyward_e2e::repo_root;
use serde_json::Value;

use super::{find, objects, render};

const SERVICE_MONITOR: &str = "monitoring.coreos.com/v1/ServiceMonitor";
const PROMETHEUS_RULE: &str = "monitoring.coreos.com/v1/PrometheusRule";

/// `helm template kw` in namespace `keyward` with extra arguments (no cluster).
fn render_with(args: &[&str]) -> Vec<Value> {
    let mut cmd = helm(Path::new("/nonexistent"));
    cmd.args(["template", "kw"]).arg(chart_dir()).args(["-n", "keyward"]).args(args);
    objects(&run(cmd))
}

fn kinds(objects: &[Value], kind: &str) -> usize {
    objects.iter().filter(|o| o["kind"] == kind).count()
}

fn container<'a>(objects: &'a [Value], deployment: &str) -> &'a Value {
    &find(objects, "Deployment", deployment)["spec"]["template"]["spec"]["containers"][0]
}

fn env<'a>(container: &'a Value, name: &str) -> Option<&'a str> {
    container["env"].as_array()?.iter().find(|e| e["name"] == name)?["value"].as_str()
}

#[test]
fn metrics_services_are_named_for_external_secrets_dashboards() {
    let objects = render(&["providers.fake.enabled=true"]);
    let metrics: Vec<&str> = objects
        .iter()
        .filter(|o| o["kind"] == "Service" && o["metadata"]["labels"]["keyward.dev/metrics"] == "true")
        .filter_map(|o| o["metadata"]["name"].as_str())
        .collect();
    for name in [
        "external-secrets-keyward-reconciler-metrics",
        "external-secrets-keyward-webhook-metrics",
        "external-secrets-keyward-certs-metrics",
        "external-secrets-keyward-provider-kubernetes-metrics",
        "external-secrets-keyward-provider-fake-metrics",
    ] {
        assert!(metrics.contains(&name), "{name} not among {metrics:?}");
        // Upstream's panels select service=~"external-secrets.*" (anchored).
        assert!(name.starts_with("external-secrets"));
    }
    // Without the prefix, and a name already carrying it, keep the plain names.
    let plain = render(&["metrics.service.namePrefix="]);
    find(&plain, "Service", "keyward-reconciler-metrics");
    let named = render(&["fullnameOverride=external-secrets"]);
    find(&named, "Service", "external-secrets-reconciler-metrics");
    // A name past 63 characters is refused, naming the way out.
    let mut cmd = helm(Path::new("/nonexistent"));
    cmd.args(["template", "kw"])
        .arg(chart_dir())
        .args(["--set", "fullnameOverride=a-rather-long-release-name-for-this-test"]);
    cmd.args(["--set", "providers.barbican.enabled=true"]);
    let out = run_fails(cmd);
    assert!(out.contains("longer than 63 characters") && out.contains("namePrefix"), "{out}");
}

#[test]
fn monitoring_objects_render_where_their_kinds_exist_or_when_asked() {
    let on = ["--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.prometheusRule.enabled=true"];
    // Off by default, even where the kinds exist.
    let objects = render_with(&["--api-versions", SERVICE_MONITOR, "--api-versions", PROMETHEUS_RULE]);
    assert_eq!((kinds(&objects, "ServiceMonitor"), kinds(&objects, "PrometheusRule")), (0, 0));
    // Enabled on a cluster without them: nothing, so the install does not fail.
    let objects = render_with(&on);
    assert_eq!((kinds(&objects, "ServiceMonitor"), kinds(&objects, "PrometheusRule")), (0, 0));
    // Enabled where they exist.
    let mut args = on.to_vec();
    args.extend(["--api-versions", SERVICE_MONITOR, "--api-versions", PROMETHEUS_RULE]);
    let objects = render_with(&args);
    assert_eq!((kinds(&objects, "ServiceMonitor"), kinds(&objects, "PrometheusRule")), (1, 1));
    let endpoint = &find(&objects, "ServiceMonitor", "keyward")["spec"]["endpoints"][0];
    assert_eq!(endpoint["honorLabels"], true, "an ExternalSecret's namespace label survives the scrape");
    assert_eq!(endpoint["port"], "metrics");
    // Asked for explicitly, without the kinds.
    let mut args = on.to_vec();
    args.extend([
        "--set",
        "metrics.serviceMonitor.renderMode=alwaysRender",
        "--set",
        "metrics.prometheusRule.renderMode=alwaysRender",
        "--set",
        "metrics.serviceMonitor.honorLabels=false",
    ]);
    let objects = render_with(&args);
    assert_eq!((kinds(&objects, "ServiceMonitor"), kinds(&objects, "PrometheusRule")), (1, 1));
    assert_eq!(find(&objects, "ServiceMonitor", "keyward")["spec"]["endpoints"][0]["honorLabels"], false);
    // Or refused with the reason.
    let mut cmd = helm(Path::new("/nonexistent"));
    cmd.args(["template", "kw"]).arg(chart_dir()).args(on);
    cmd.args(["--set", "metrics.prometheusRule.renderMode=failIfMissing"]);
    let out = run_fails(cmd);
    assert!(out.contains("no monitoring.coreos.com/v1 PrometheusRule"), "{out}");
}

/// The alert rule names of a rendered PrometheusRule.
fn alert_names(rules: &Value) -> Vec<String> {
    let groups = rules["groups"].as_array().expect("groups");
    groups
        .iter()
        .flat_map(|g| g["rules"].as_array().into_iter().flatten())
        .filter_map(|r| r["alert"].as_str().map(str::to_string))
        .collect()
}

#[test]
fn alert_rules_pass_their_promtool_unit_tests() {
    let objects = render_with(&[
        "--set",
        "metrics.prometheusRule.enabled=true",
        "--set",
        "metrics.prometheusRule.renderMode=alwaysRender",
    ]);
    let rules = &find(&objects, "PrometheusRule", "keyward")["spec"];
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("rules.yaml"), serde_yaml::to_string(rules).expect("yaml")).expect("write rules");
    let tests_dir = repo_root().join("charts/tests/alerts");
    let mut test_files = Vec::new();
    let mut tested = String::new();
    for entry in std::fs::read_dir(&tests_dir).expect("charts/tests/alerts") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "yaml") {
            let text = std::fs::read_to_string(&path).expect("read test");
            let copy = dir.path().join(path.file_name().expect("name"));
            std::fs::write(&copy, &text).expect("copy test");
            tested.push_str(&text);
            test_files.push(copy);
        }
    }
    assert!(!test_files.is_empty(), "no rule tests in {}", tests_dir.display());
    let names = alert_names(rules);
    assert!(names.len() >= 10, "{names:?}");
    for name in &names {
        assert!(tested.contains(&format!("alertname: {name}\n")), "alert {name} has no promtool test");
    }
    let promtool = keyward_e2e::stores::cached_tool("install-prometheus.sh").join("promtool");
    let mut check = Command::new(&promtool);
    check.args(["check", "rules"]).arg(dir.path().join("rules.yaml"));
    run(check);
    let mut test = Command::new(&promtool);
    test.args(["test", "rules"]).args(&test_files);
    let out = run(test);
    assert!(out.contains("SUCCESS"), "{out}");
}

#[test]
fn the_webhook_listens_on_10250_or_a_chosen_port_and_may_use_the_host_network() {
    let objects = render(&[]);
    let c = container(&objects, "keyward-webhook");
    assert_eq!(env(c, "KEYWARD_LISTEN"), Some("0.0.0.0:10250"));
    assert_eq!(c["ports"][0]["containerPort"], 10250);
    let pod = &find(&objects, "Deployment", "keyward-webhook")["spec"]["template"]["spec"];
    assert!(pod["hostNetwork"].is_null() && pod["dnsPolicy"].is_null(), "Pod network by default");

    let objects = render(&["webhook.port=9443", "webhook.hostNetwork=true"]);
    let c = container(&objects, "keyward-webhook");
    assert_eq!(env(c, "KEYWARD_LISTEN"), Some("0.0.0.0:9443"));
    assert_eq!(c["ports"][0]["containerPort"], 9443);
    let pod = &find(&objects, "Deployment", "keyward-webhook")["spec"]["template"]["spec"];
    assert_eq!(pod["hostNetwork"], true);
    assert_eq!(pod["dnsPolicy"], "ClusterFirstWithHostNet", "cluster names still resolve");
    // The Service still reaches it by name.
    assert_eq!(find(&objects, "Service", "keyward-webhook")["spec"]["ports"][0]["targetPort"], "https");

    // On the node's network, 10250 is the kubelet's.
    let mut cmd = helm(Path::new("/nonexistent"));
    cmd.args(["template", "kw"]).arg(chart_dir()).args(["--set", "webhook.hostNetwork=true"]);
    let out = run_fails(cmd);
    assert!(out.contains("10250") && out.contains("webhook.port"), "{out}");
}

#[test]
fn keyward_certs_has_probes_metrics_and_a_disruption_budget() {
    let objects = render(&[]);
    let c = container(&objects, "keyward-certs");
    assert_eq!(env(c, "KEYWARD_HEALTH_LISTEN"), Some("0.0.0.0:8080"));
    assert_eq!(c["ports"][0], serde_json::json!({"name": "metrics", "containerPort": 8080, "protocol": "TCP"}));
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
    let svc = find(&objects, "Service", "external-secrets-keyward-certs-metrics");
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], "metrics");
    assert_eq!(kinds(&objects, "PodDisruptionBudget"), 1, "the webhook's only, by default");
    let objects = render(&["certs.podDisruptionBudget.enabled=true"]);
    let pdb = find(&objects, "PodDisruptionBudget", "keyward-certs");
    assert_eq!(pdb["spec"]["minAvailable"], 1);
    assert_eq!(pdb["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"], "certs");
    // With cert-manager there is no keyward-certs at all.
    let objects = render(&["certManager.enabled=true"]);
    assert_eq!(objects.iter().filter(|o| o["metadata"]["name"] == "keyward-certs").count(), 0);
}
