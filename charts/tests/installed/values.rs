//! The chart with every operator value set (`charts/tests/values/all.yaml`: ServiceAccount
//! names and annotations, a ServiceAccount the operator brings, Pod labels and annotations, extra
//! flags, variables and volumes, scheduling with a PriorityClass and topology spread, per
//! component security contexts, disruption budgets, a namespace-scoped reconciler with scoped
//! RBAC, RBAC aggregation, a ServiceMonitor in another namespace, log settings), installed on the
//! one-node cluster: every Pod runs and is Ready, the reconciler's watches all list with its
//! scoped rights, and the aggregated roles give namespace editors the External Secrets kinds.

use std::path::Path;
use std::time::Duration;

use keyward_chart_tests::installed::{apply, eventually, image, kubectl, kubectl_input};
use keyward_chart_tests::{chart_dir, helm, run};
use keyward_e2e::{node_cluster, repo_root};

use super::{NS, RELEASE, describe, output, turn};

/// What `all.yaml` names and the operator creates first: the PriorityClass, the scoped and the
/// monitoring namespaces, the certs ServiceAccount (`create: false`), and a stand-in for the
/// prometheus-operator's ServiceMonitor CRD (no Prometheus runs here).
const PREREQUISITES: &str = r#"apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: keyward-critical}
value: 1000000
globalDefault: false
description: Keyward's Pods.
---
apiVersion: v1
kind: Namespace
metadata: {name: keyward}
---
apiVersion: v1
kind: Namespace
metadata: {name: kw-scoped}
---
apiVersion: v1
kind: Namespace
metadata: {name: kw-monitoring}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: keyward-certs-own, namespace: keyward}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: servicemonitors.monitoring.coreos.com}
spec:
  group: monitoring.coreos.com
  scope: Namespaced
  names: {kind: ServiceMonitor, plural: servicemonitors, singular: servicemonitor, listKind: ServiceMonitorList}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
"#;

/// `kubectl auth can-i` in `kw-scoped` (or `ns`) as `user`.
fn can_i_in(kc: &Path, ns: &str, user: &str, verb: &str, resource: &str) -> bool {
    output(kc, &["auth", "can-i", verb, resource, "-n", ns, "--as", user]) == "yes"
}

fn can_i(kc: &Path, user: &str, verb: &str, resource: &str) -> bool {
    can_i_in(kc, "kw-scoped", user, verb, resource)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_install_with_every_operator_value_runs_every_pod_ready() {
    let _serial = turn().await;
    let cluster = node_cluster().await;
    let kc = cluster.kubeconfig();
    image(cluster);
    apply(kc, PREREQUISITES);
    eventually(
        "the ServiceMonitor CRD is established",
        Duration::from_secs(30),
        || {
            let s = output(
                kc,
                &[
                    "get",
                    "crd",
                    "servicemonitors.monitoring.coreos.com",
                    "-o",
                    r#"jsonpath={.status.conditions[?(@.type=="Established")].status}"#,
                ],
            );
            (s == "True").then_some(())
        },
        String::new,
    )
    .await;

    let all = repo_root().join("charts/tests/values/all.yaml");
    let mut install = helm(kc);
    install.args(["install", RELEASE]).arg(chart_dir()).args(["-n", NS, "--wait", "--timeout", "5m", "-f"]).arg(&all);
    run(install);

    // Every Keyward Pod Running and Ready: webhook ×2, reconciler, certs, Kubernetes provider.
    let list: serde_json::Value = serde_json::from_str(&output(
        kc,
        &["get", "pods", "-n", NS, "-l", &format!("app.kubernetes.io/instance={RELEASE}"), "-o", "json"],
    ))
    .expect("pods JSON");
    let pods = list["items"].as_array().expect("items");
    let mut components: Vec<&str> =
        pods.iter().filter_map(|p| p["metadata"]["labels"]["app.kubernetes.io/component"].as_str()).collect();
    components.sort();
    assert_eq!(
        components,
        ["certs", "provider-kubernetes", "reconciler", "webhook", "webhook"],
        "{}",
        describe(kc, NS)
    );
    for pod in pods {
        let name = pod["metadata"]["name"].as_str().unwrap_or_default();
        assert_eq!(pod["status"]["phase"], "Running", "{name}: {}", describe(kc, NS));
        let ready = pod["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Ready" && c["status"] == "True");
        assert!(ready, "{name} is Ready: {}", describe(kc, NS));
        // The values as the running Pods carry them.
        let spec = &pod["spec"];
        assert_eq!(spec["priorityClassName"], "keyward-critical", "{name}");
        assert_eq!(spec["priority"], 1_000_000, "{name}: the PriorityClass applied");
        assert_eq!(pod["metadata"]["labels"]["example.com/team"], "platform", "{name}");
        assert!(spec["topologySpreadConstraints"].is_array(), "{name}");
        assert!(spec["volumes"].as_array().into_iter().flatten().any(|v| v["name"] == "scratch"), "{name}");
        let component = pod["metadata"]["labels"]["app.kubernetes.io/component"].as_str().unwrap_or_default();
        let sa = match component {
            "webhook" => "keyward-admission",
            "reconciler" => "keyward-controller",
            "certs" => "keyward-certs-own",
            _ => "keyward-provider-kubernetes",
        };
        assert_eq!(spec["serviceAccountName"], sa, "{name}");
    }
    let annotation = output(
        kc,
        &[
            "get",
            "serviceaccount",
            "keyward-controller",
            "-n",
            NS,
            "-o",
            r"jsonpath={.metadata.annotations.eks\.amazonaws\.com/role-arn}",
        ],
    );
    assert_eq!(annotation, "arn:aws:iam::111122223333:role/keyward-reconciler");
    let pdbs = output(kc, &["get", "poddisruptionbudgets", "-n", NS, "-o", "jsonpath={.items[*].metadata.name}"]);
    for name in ["keyward-webhook", "keyward-reconciler", "keyward-provider-kubernetes"] {
        assert!(pdbs.split_whitespace().any(|p| p == name), "PodDisruptionBudget {name}: {pdbs}");
    }
    let monitors = output(kc, &["get", "servicemonitors", "-n", "kw-monitoring", "-o", "name"]);
    assert!(monitors.contains("keyward"), "the ServiceMonitor in its namespace: {monitors}");

    // The scoped reconciler's watches all list with its Role and its narrowed ClusterRole (a
    // watch refused by RBAC would never list). It leads alone, so it starts its watches.
    let reconciler = output(
        kc,
        &[
            "get",
            "pods",
            "-n",
            NS,
            "-l",
            "app.kubernetes.io/component=reconciler",
            "-o",
            "jsonpath={.items[0].metadata.name}",
        ],
    );
    let logs = eventually(
        "the scoped reconciler lists every watched kind",
        Duration::from_secs(90),
        || {
            let logs = output(kc, &["logs", "-n", NS, &reconciler]);
            logs.contains("caches listed").then_some(logs)
        },
        || output(kc, &["logs", "-n", NS, &reconciler, "--tail", "50"]),
    )
    .await;
    assert!(logs.contains("kw-scoped"), "the reconciler names its namespace:\n{logs}");
    assert!(!logs.contains("forbidden"), "no watch is refused:\n{logs}");
    let sa = format!("system:serviceaccount:{NS}:keyward-controller");
    assert!(can_i(kc, &sa, "create", "secrets"), "the reconciler writes Secrets in kw-scoped");
    assert!(!can_i_in(kc, "default", &sa, "create", "secrets"), "and nowhere else");

    // Aggregation: a namespace editor may create ExternalSecrets, a viewer only read them.
    apply(
        kc,
        r#"apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: kw-editor, namespace: kw-scoped}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: kw-editor}]
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: edit}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: kw-viewer, namespace: kw-scoped}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: kw-viewer}]
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}
"#,
    );
    eventually(
        "the edit and view roles carry the External Secrets kinds",
        Duration::from_secs(30),
        || {
            (can_i(kc, "kw-editor", "create", "externalsecrets.external-secrets.io")
                && can_i(kc, "kw-editor", "create", "kubernetes.provider.external-secrets.io")
                && can_i(kc, "kw-viewer", "list", "externalsecrets.external-secrets.io"))
            .then_some(())
        },
        || output(kc, &["get", "clusterrole", "edit", "view", "-o", "yaml"]),
    )
    .await;
    assert!(!can_i(kc, "kw-viewer", "create", "externalsecrets.external-secrets.io"), "viewers write nothing");

    let mut uninstall = helm(kc);
    uninstall.args(["uninstall", RELEASE, "-n", NS, "--wait", "--timeout", "3m"]);
    run(uninstall);
    for ns in ["kw-scoped", "kw-monitoring", NS] {
        let _ = kubectl(kc).args(["delete", "namespace", ns, "--wait=true", "--timeout=120s"]).output();
    }
    let _ = kubectl_input(kc, &["delete", "--ignore-not-found", "-f", "-"], PREREQUISITES);
}
