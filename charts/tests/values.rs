//! The chart's operator values (ServiceAccounts, Pod metadata, extra flags, variables and
//! volumes, scheduling, security contexts, disruption budgets, the namespace-scoped install, RBAC
//! aggregation, the ServiceMonitor, the Grafana dashboard, logging): each group rendered with
//! `helm template` and found, parsed, where it belongs in every component (webhook, reconciler,
//! certs, a provider), so a template that ignores a value fails here; the schema refusing
//! misspelt keys; and `charts/tests/values/all.yaml`, which sets every one of them, accepted by
//! the API server.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use keyward_chart_tests::installed::kubectl_input;
use keyward_chart_tests::{chart_dir, helm, run, run_fails, test_values, write_values};
use keyward_e2e::{control_plane, repo_root, with_temp_namespace};
use serde_json::{Value, json};

/// (component label, Deployment name) of every component of a default self-managed release
/// named `kw` (prefix `keyward`).
const COMPONENTS: [(&str, &str); 4] = [
    ("webhook", "keyward-webhook"),
    ("reconciler", "keyward-reconciler"),
    ("certs", "keyward-certs"),
    ("provider-kubernetes", "keyward-provider-kubernetes"),
];

/// The values file setting every operator value, shared with the installed tier.
fn all_values() -> PathBuf {
    repo_root().join("charts/tests/values/all.yaml")
}

/// `body` (YAML, `{c}` standing for the component label) under every component's key.
fn each(body: &str) -> String {
    let block = |c: &str, indent: usize| -> String {
        body.replace("{c}", c).lines().map(|l| format!("{}{l}\n", " ".repeat(indent))).collect()
    };
    format!(
        "webhook:\n{}reconciler:\n{}certs:\n{}providers:\n  kubernetes:\n{}",
        block("webhook", 2),
        block("reconciler", 2),
        block("certs", 2),
        block("provider-kubernetes", 4)
    )
}

struct Rendered(Vec<Value>);

impl Rendered {
    fn opt(&self, kind: &str, name: &str) -> Option<&Value> {
        self.0.iter().find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
    }

    fn get(&self, kind: &str, name: &str) -> &Value {
        self.opt(kind, name).unwrap_or_else(|| panic!("{kind} {name} not rendered"))
    }

    fn of_kind(&self, kind: &str) -> Vec<&Value> {
        self.0.iter().filter(|d| d["kind"] == kind).collect()
    }

    fn pod(&self, deployment: &str) -> &Value {
        &self.get("Deployment", deployment)["spec"]["template"]
    }

    fn container(&self, deployment: &str) -> &Value {
        &self.pod(deployment)["spec"]["containers"][0]
    }

    /// The container's variables by name (value, or the whole entry when it has none).
    fn env(&self, deployment: &str) -> BTreeMap<String, Value> {
        self.container(deployment)["env"]
            .as_array()
            .expect("env")
            .iter()
            .map(|e| {
                let value = e.get("value").cloned().unwrap_or_else(|| e.clone());
                (e["name"].as_str().expect("name").to_string(), value)
            })
            .collect()
    }
}

fn objects(rendered: &str) -> Vec<Value> {
    rendered.split("\n---").filter_map(|d| serde_yaml::from_str::<Value>(d).ok()).filter(|d| d.is_object()).collect()
}

fn template(values: &str, files: &[&Path]) -> std::process::Command {
    let dir = std::env::temp_dir().join(format!("keyward-values-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("values dir");
    let name = format!("{:x}.yaml", values_hash(values));
    let file = write_values(&dir, &name, values);
    let mut cmd = helm(Path::new("/nonexistent"));
    cmd.args(["template", "kw"]).arg(chart_dir()).args(["-n", "keyward"]);
    // As on a cluster with the prometheus-operator's CRDs, where a ServiceMonitor is rendered.
    cmd.args(["--api-versions", "monitoring.coreos.com/v1/ServiceMonitor"]);
    for f in files {
        cmd.arg("-f").arg(f);
    }
    cmd.arg("-f").arg(file);
    cmd
}

fn values_hash(text: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut h);
    h.finish()
}

/// `helm template kw -n keyward` with a values file holding `values`.
fn render(values: &str) -> Rendered {
    Rendered(objects(&run(template(values, &[]))))
}

/// The error `helm template` fails with for `values`.
fn refused(values: &str) -> String {
    run_fails(template(values, &[]))
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array().into_iter().flatten().filter_map(|s| s.as_str().map(String::from)).collect()
}

#[test]
fn service_accounts_take_annotations_labels_and_names_and_the_bindings_follow() {
    let r = render(&each(
        "serviceAccount:\n  annotations: {eks.amazonaws.com/role-arn: 'arn:aws:iam::1:role/{c}'}\n  extraLabels: {example.com/sa: '{c}'}\n",
    ));
    for (c, name) in COMPONENTS {
        let sa = r.get("ServiceAccount", name);
        assert_eq!(sa["metadata"]["annotations"]["eks.amazonaws.com/role-arn"], format!("arn:aws:iam::1:role/{c}"));
        assert_eq!(sa["metadata"]["labels"]["example.com/sa"], c, "{c}: extraLabels");
        assert_eq!(sa["metadata"]["labels"]["app.kubernetes.io/component"], c, "{c}: Keyward's labels stay");
        assert_eq!(r.pod(name)["spec"]["serviceAccountName"], name);
    }

    // Other names, and a ServiceAccount the operator brings (create: false).
    let r = render(
        "reconciler:\n  serviceAccount: {name: kw-controller}\ncerts:\n  serviceAccount: {create: false, name: own-certs}\n\
         webhook:\n  serviceAccount: {name: kw-admission}\nproviders:\n  kubernetes:\n    serviceAccount: {name: kw-kube}\n",
    );
    let want = [
        ("webhook", "keyward-webhook", "kw-admission"),
        ("reconciler", "keyward-reconciler", "kw-controller"),
        ("certs", "keyward-certs", "own-certs"),
        ("provider-kubernetes", "keyward-provider-kubernetes", "kw-kube"),
    ];
    for (c, deployment, sa) in want {
        assert_eq!(r.pod(deployment)["spec"]["serviceAccountName"], sa, "{c}");
        assert!(r.opt("ServiceAccount", deployment).is_none(), "{c}: no ServiceAccount of the default name");
        assert_eq!(r.opt("ServiceAccount", sa).is_some(), c != "certs", "{c}: created unless create: false");
        // Every binding of the component names its ServiceAccount.
        let bindings: Vec<&Value> =
            r.0.iter()
                .filter(|o| o["kind"] == "RoleBinding" || o["kind"] == "ClusterRoleBinding")
                .filter(|o| o["metadata"]["labels"]["app.kubernetes.io/component"] == c)
                .collect();
        assert!(!bindings.is_empty(), "{c}: bindings");
        for b in bindings {
            assert_eq!(b["subjects"], json!([{"kind": "ServiceAccount", "name": sa, "namespace": "keyward"}]), "{c}");
        }
    }
}

#[test]
fn pod_labels_and_annotations_merge_the_global_ones_and_never_replace_keywards() {
    let values = format!(
        "global:\n  podLabels: {{example.com/team: platform, example.com/tier: global}}\n  podAnnotations: {{a: global, b: global}}\n{}",
        each(
            "podLabels: {example.com/tier: '{c}', app.kubernetes.io/component: hijacked}\npodAnnotations: {b: '{c}'}\n"
        )
    );
    let r = render(&values);
    for (c, name) in COMPONENTS {
        let pod = r.pod(name);
        let labels = &pod["metadata"]["labels"];
        assert_eq!(labels["example.com/team"], "platform", "{c}: global podLabels");
        assert_eq!(labels["example.com/tier"], c, "{c}: the component's podLabels win");
        assert_eq!(labels["app.kubernetes.io/component"], c, "{c}: selector labels are Keyward's");
        let selector = r.get("Deployment", name)["spec"]["selector"]["matchLabels"].as_object().expect("selector");
        assert!(selector.iter().all(|(k, v)| &labels[k] == v), "{c}: the Deployment still selects its Pods");
        assert_eq!(pod["metadata"]["annotations"], json!({"a": "global", "b": c}), "{c}");
    }
    // None given: no annotations at all.
    let r = render("{}");
    for (c, name) in COMPONENTS {
        assert!(r.pod(name)["metadata"].get("annotations").is_none(), "{c}");
    }
}

#[test]
fn extra_args_env_and_volumes_reach_every_container() {
    let r = render(&each(
        "extraArgs: {concurrency: 8, verbose: '', name: '{c}'}\nenv: [{name: FROM_ENV, value: '1'}]\n\
         extraEnv: [{name: FROM_EXTRA_ENV, value: '{c}'}]\nextraVolumes: [{name: scratch, emptyDir: {}}]\n\
         extraVolumeMounts: [{name: scratch, mountPath: /scratch}]\n",
    ));
    for (c, name) in COMPONENTS {
        let container = r.container(name);
        assert_eq!(container["args"], json!(["--concurrency=8", format!("--name={c}"), "--verbose"]), "{c}");
        let env = container["env"].as_array().expect("env");
        let names: Vec<&str> = env.iter().filter_map(|e| e["name"].as_str()).collect();
        assert_eq!(names[names.len() - 2..], ["FROM_ENV", "FROM_EXTRA_ENV"], "{c}: env, then extraEnv, last");
        assert_eq!(env.last().expect("env")["value"], c);
        assert!(names.contains(&"KEYWARD_LOG_FORMAT"), "{c}: Keyward's own variables stay");
        let mounts = container["volumeMounts"].as_array().expect("volumeMounts");
        assert!(mounts.contains(&json!({"name": "scratch", "mountPath": "/scratch"})), "{c}");
        let volumes = r.pod(name)["spec"]["volumes"].as_array().expect("volumes");
        assert!(volumes.contains(&json!({"name": "scratch", "emptyDir": {}})), "{c}");
        if c == "webhook" || c.starts_with("provider-") {
            assert!(mounts.iter().any(|m| m["name"] == "tls"), "{c}: the TLS volume stays");
        }
    }
    assert_eq!(r.container("keyward-certs")["command"], json!(["keyward-certs", "run"]), "flags after the subcommand");
    // None given: no args.
    let r = render("{}");
    for (c, name) in COMPONENTS {
        assert!(r.container(name).get("args").is_none(), "{c}");
    }
}

#[test]
fn scheduling_values_reach_every_pod_with_global_defaults() {
    let values = format!(
        "global:\n  nodeSelector: {{kubernetes.io/os: linux}}\n  tolerations: [{{key: global, operator: Exists}}]\n\
         \x20 affinity: {{nodeAffinity: {{preferredDuringSchedulingIgnoredDuringExecution: [{{weight: 1, preference: {{matchExpressions: [{{key: global, operator: Exists}}]}}}}]}}}}\n\
         \x20 topologySpreadConstraints: [{{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway}}]\n{}",
        each("priorityClassName: prio-{c}\n")
    );
    let mut values = values.replace(
        "reconciler:\n",
        "reconciler:\n  nodeSelector: {disk: ssd}\n  tolerations: [{key: own, operator: Exists}]\n  \
         affinity: {podAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 1, podAffinityTerm: {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app: db}}}}]}}\n  \
         topologySpreadConstraints: [{maxSkew: 2, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: mine}}}]\n",
    );
    values.push('\n');
    let r = render(&values);
    for (c, name) in COMPONENTS {
        let spec = &r.pod(name)["spec"];
        let selector = &r.get("Deployment", name)["spec"]["selector"]["matchLabels"];
        assert_eq!(spec["priorityClassName"], format!("prio-{c}"), "{c}");
        if c == "reconciler" {
            assert_eq!(spec["nodeSelector"], json!({"kubernetes.io/os": "linux", "disk": "ssd"}), "merged");
            assert_eq!(spec["tolerations"], json!([{"key": "own", "operator": "Exists"}]), "its own replace global");
            assert!(spec["affinity"]["podAffinity"].is_object() && spec["affinity"].get("nodeAffinity").is_none());
            assert_eq!(spec["topologySpreadConstraints"][0]["maxSkew"], 2);
            assert_eq!(spec["topologySpreadConstraints"][0]["labelSelector"], json!({"matchLabels": {"app": "mine"}}));
        } else {
            assert_eq!(spec["nodeSelector"], json!({"kubernetes.io/os": "linux"}), "{c}");
            assert_eq!(spec["tolerations"], json!([{"key": "global", "operator": "Exists"}]), "{c}");
            assert!(spec["affinity"]["nodeAffinity"].is_object(), "{c}: global affinity");
            let tsc = &spec["topologySpreadConstraints"];
            assert_eq!(tsc[0]["topologyKey"], "topology.kubernetes.io/zone", "{c}");
            assert_eq!(tsc[0]["labelSelector"]["matchLabels"], *selector, "{c}: selects this component's Pods");
        }
    }
    // Without a global affinity the webhook keeps its default: replicas spread across nodes.
    let r = render("{}");
    let affinity = &r.pod("keyward-webhook")["spec"]["affinity"];
    let term = &affinity["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0];
    assert_eq!(term["podAffinityTerm"]["topologyKey"], "kubernetes.io/hostname");
    assert_eq!(
        term["podAffinityTerm"]["labelSelector"]["matchLabels"],
        r.get("Deployment", "keyward-webhook")["spec"]["selector"]["matchLabels"]
    );
    for (c, name) in COMPONENTS {
        let spec = &r.pod(name)["spec"];
        for key in ["priorityClassName", "topologySpreadConstraints", "nodeSelector", "tolerations"] {
            assert!(spec.get(key).is_none(), "{c}: no {key} by default");
        }
    }
}

#[test]
fn security_contexts_and_resources_are_per_component_over_the_secure_defaults() {
    let defaults: Value =
        serde_yaml::from_str(&std::fs::read_to_string(chart_dir().join("values.yaml")).expect("values")).expect("yaml");
    // Defaults: every Pod gets exactly the chart-wide contexts.
    let r = render("{}");
    for (c, name) in COMPONENTS {
        assert_eq!(r.pod(name)["spec"]["securityContext"], defaults["podSecurityContext"], "{c}");
        assert_eq!(r.container(name)["securityContext"], defaults["securityContext"], "{c}");
    }
    let r = render(&each(
        "podSecurityContext: {fsGroupChangePolicy: OnRootMismatch}\n\
         securityContext: {seccompProfile: {type: Localhost, localhostProfile: '{c}.json'}}\n\
         resources: {requests: {cpu: 7m}, limits: {memory: 77Mi}}\n",
    ));
    for (c, name) in COMPONENTS {
        let psc = &r.pod(name)["spec"]["securityContext"];
        assert_eq!(psc["fsGroupChangePolicy"], "OnRootMismatch", "{c}");
        assert_eq!((psc["runAsNonRoot"].clone(), psc["runAsUser"].clone()), (json!(true), json!(65532)), "{c}");
        let sc = &r.container(name)["securityContext"];
        assert_eq!(sc["seccompProfile"], json!({"type": "Localhost", "localhostProfile": format!("{c}.json")}));
        assert_eq!(sc["readOnlyRootFilesystem"], true, "{c}: the secure defaults stay");
        assert_eq!(sc["allowPrivilegeEscalation"], false, "{c}");
        assert_eq!(sc["capabilities"]["drop"], json!(["ALL"]), "{c}");
        let resources = &r.container(name)["resources"];
        assert_eq!(
            (resources["requests"]["cpu"].clone(), resources["limits"]["memory"].clone()),
            (json!("7m"), json!("77Mi"))
        );
    }
    // `enabled: false` leaves a context out, for that component only.
    let r = render("reconciler:\n  securityContext: {enabled: false}\n  podSecurityContext: {enabled: false}\n");
    assert!(r.container("keyward-reconciler").get("securityContext").is_none());
    assert!(r.pod("keyward-reconciler")["spec"].get("securityContext").is_none());
    assert_eq!(r.container("keyward-webhook")["securityContext"], defaults["securityContext"]);
}

#[test]
fn pod_disruption_budgets_for_the_reconciler_and_providers_are_off_by_default() {
    let r = render("{}");
    let names: Vec<&str> =
        r.of_kind("PodDisruptionBudget").iter().filter_map(|p| p["metadata"]["name"].as_str()).collect();
    assert_eq!(names, ["keyward-webhook"], "only the webhook (two replicas) has one by default");
    assert_eq!(r.get("PodDisruptionBudget", "keyward-webhook")["spec"]["minAvailable"], 1);

    let r = render(
        "webhook:\n  podDisruptionBudget: {maxUnavailable: 1}\nreconciler:\n  podDisruptionBudget: {enabled: true}\n\
         providers:\n  fake: {enabled: true}\n  kubernetes:\n    podDisruptionBudget: {enabled: true, maxUnavailable: 50%}\n",
    );
    let spec = |name: &str| r.get("PodDisruptionBudget", name)["spec"].clone();
    assert_eq!(spec("keyward-webhook")["maxUnavailable"], 1, "maxUnavailable wins over minAvailable");
    assert!(spec("keyward-webhook").get("minAvailable").is_none(), "never both");
    assert_eq!(spec("keyward-reconciler")["minAvailable"], 1);
    assert_eq!(spec("keyward-provider-kubernetes")["maxUnavailable"], "50%");
    assert!(r.opt("PodDisruptionBudget", "keyward-provider-fake").is_none(), "per provider");
    assert!(r.opt("PodDisruptionBudget", "keyward-certs").is_none());
    for (c, name) in COMPONENTS.iter().filter(|(c, _)| *c != "certs") {
        let selector = spec(name)["selector"]["matchLabels"].clone();
        assert_eq!(selector, r.get("Deployment", name)["spec"]["selector"]["matchLabels"], "{c}: its own Pods");
        assert_eq!(r.get("PodDisruptionBudget", name)["metadata"]["namespace"], "keyward");
    }
}

#[test]
fn scoped_namespace_limits_the_reconciler_and_scoped_rbac_makes_its_rules_a_role() {
    let default = render("{}");
    assert!(!default.env("keyward-reconciler").contains_key("KEYWARD_WATCH_NAMESPACE"));
    let cluster_rules = default.get("ClusterRole", "keyward-reconciler")["rules"].clone();

    let r = render("scopedNamespace: team-a\n");
    assert_eq!(r.env("keyward-reconciler")["KEYWARD_WATCH_NAMESPACE"], "team-a");
    assert_eq!(r.get("ClusterRole", "keyward-reconciler")["rules"], cluster_rules, "RBAC unchanged without scopedRBAC");
    for (c, name) in COMPONENTS.iter().filter(|(c, _)| *c != "reconciler") {
        assert!(!r.env(name).contains_key("KEYWARD_WATCH_NAMESPACE"), "{c}");
    }

    let r = render("scopedNamespace: team-a\nscopedRBAC: true\n");
    let role = r.get("Role", "keyward-reconciler");
    assert_eq!(role["metadata"]["namespace"], "team-a");
    assert_eq!(role["rules"], cluster_rules, "the same rules, in the watched namespace only");
    let binding = r.get("RoleBinding", "keyward-reconciler");
    assert_eq!(binding["metadata"]["namespace"], "team-a");
    assert_eq!(binding["roleRef"]["kind"], "Role");
    assert_eq!(binding["subjects"][0]["name"], "keyward-reconciler");
    assert_eq!(binding["subjects"][0]["namespace"], "keyward");
    assert!(r.opt("ClusterRole", "keyward-reconciler").is_none());
    assert!(r.opt("ClusterRoleBinding", "keyward-reconciler").is_none());
    // What it still reads cluster-wide: nothing written but cluster store status, and no Secret
    // but its client Secret, by name.
    let cluster = r.get("ClusterRole", "keyward-reconciler-cluster");
    for rule in cluster["rules"].as_array().expect("rules") {
        let resources = strings(&rule["resources"]);
        let verbs = strings(&rule["verbs"]);
        if resources.iter().any(|r| r.ends_with("/status")) {
            assert!(resources.iter().all(|r| r == "clusterproviders/status" || r == "clustersecretstores/status"));
        } else {
            assert!(verbs.iter().all(|v| ["get", "list", "watch"].contains(&v.as_str())), "read only: {rule}");
        }
        if resources.contains(&"secrets".to_string()) {
            assert_eq!(rule["resourceNames"], json!(["keyward-provider-tls"]), "{rule}");
        }
        for kind in ["externalsecrets", "pushsecrets", "deployments", "configmaps"] {
            assert!(!resources.iter().any(|r| r == kind), "{kind} only in the Role: {rule}");
        }
    }
    assert_eq!(
        r.get("ClusterRoleBinding", "keyward-reconciler-cluster")["roleRef"]["name"],
        "keyward-reconciler-cluster"
    );
    let lease = r.get("Role", "keyward-reconciler-leader-election");
    assert_eq!(lease["metadata"]["namespace"], "keyward", "the Lease stays in the release namespace");
    let out = refused("scopedRBAC: true\n");
    assert!(out.contains("scopedNamespace"), "{out}");
}

#[test]
fn rbac_aggregates_the_external_secrets_kinds_into_view_edit_and_admin() {
    let r = render("{}");
    // The kinds, from the CRDs the chart installs.
    let crds = r.of_kind("CustomResourceDefinition");
    let kinds = |group: &str, namespaced_only: bool| -> Vec<String> {
        let mut k: Vec<String> = crds
            .iter()
            .filter(|c| c["spec"]["group"] == group && (!namespaced_only || c["spec"]["scope"] == "Namespaced"))
            .filter_map(|c| c["spec"]["names"]["plural"].as_str().map(String::from))
            .collect();
        k.sort();
        k
    };
    let granted = |role: &Value, group: &str| -> (Vec<String>, Vec<String>) {
        let rules: Vec<&Value> =
            role["rules"].as_array().expect("rules").iter().filter(|r| strings(&r["apiGroups"]) == [group]).collect();
        let mut resources: Vec<String> = rules.iter().flat_map(|r| strings(&r["resources"])).collect();
        resources.sort();
        let mut verbs: Vec<String> = rules.iter().flat_map(|r| strings(&r["verbs"])).collect();
        verbs.sort();
        verbs.dedup();
        (resources, verbs)
    };
    let label = |role: &Value, to: &str| {
        role["metadata"]["labels"][format!("rbac.authorization.k8s.io/aggregate-to-{to}")].clone()
    };
    let view = r.get("ClusterRole", "keyward-view");
    let edit = r.get("ClusterRole", "keyward-edit");
    for to in ["view", "edit", "admin"] {
        assert_eq!(label(view, to), "true", "reading aggregated to {to}");
    }
    assert_eq!(label(edit, "view"), Value::Null, "viewers write nothing");
    assert_eq!((label(edit, "edit"), label(edit, "admin")), (json!("true"), json!("true")));
    for group in ["external-secrets.io", "provider.external-secrets.io", "generators.external-secrets.io"] {
        let all = kinds(group, false);
        assert!(!all.is_empty(), "{group} CRDs");
        assert_eq!(granted(view, group), (all, vec!["get".into(), "list".into(), "watch".into()]), "{group}");
        let (resources, verbs) = granted(edit, group);
        assert_eq!(resources, kinds(group, true), "{group}: editors write the namespaced kinds only");
        assert_eq!(verbs, ["create", "delete", "deletecollection", "patch", "update"], "{group}");
    }
    assert!(!kinds("external-secrets.io", true).contains(&"clustersecretstores".to_string()));

    let r = render("rbac: {aggregateToEdit: false, aggregateToAdmin: false}\n");
    let view = r.get("ClusterRole", "keyward-view");
    assert_eq!((label(view, "view"), label(view, "edit")), (json!("true"), Value::Null));
    assert!(r.opt("ClusterRole", "keyward-edit").is_none());
    let r = render("rbac: {aggregateToView: false, aggregateToEdit: false, aggregateToAdmin: false}\n");
    assert!(r.opt("ClusterRole", "keyward-view").is_none() && r.opt("ClusterRole", "keyward-edit").is_none());

    // rbac.create: false renders no RBAC at all (ServiceAccounts stay).
    let r = render("rbac: {create: false}\nscopedNamespace: team-a\nscopedRBAC: true\n");
    for kind in ["Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"] {
        assert!(r.of_kind(kind).is_empty(), "no {kind}");
    }
    assert!(r.opt("ServiceAccount", "keyward-reconciler").is_some());
}

#[test]
fn service_monitor_takes_interval_timeout_relabelings_namespace_and_labels() {
    let r = render(
        "metrics:\n  serviceMonitor:\n    enabled: true\n    namespace: monitoring\n    interval: 15s\n    scrapeTimeout: 10s\n\
         \x20   honorLabels: true\n    labels: {release: prom}\n    additionalLabels: {team: platform}\n\
         \x20   relabelings: [{sourceLabels: [__meta_kubernetes_pod_node_name], targetLabel: node}]\n\
         \x20   metricRelabelings: [{sourceLabels: [__name__], regex: go_.*, action: drop}]\n",
    );
    let sm = r.get("ServiceMonitor", "keyward");
    assert_eq!(sm["metadata"]["namespace"], "monitoring");
    assert_eq!(sm["metadata"]["labels"]["release"], "prom");
    assert_eq!(sm["metadata"]["labels"]["team"], "platform");
    assert_eq!(sm["metadata"]["labels"]["app.kubernetes.io/instance"], "kw");
    assert_eq!(sm["spec"]["namespaceSelector"]["matchNames"], json!(["keyward"]), "the metrics Services' namespace");
    let endpoint = &sm["spec"]["endpoints"][0];
    assert_eq!(endpoint["interval"], "15s");
    assert_eq!(endpoint["scrapeTimeout"], "10s");
    assert_eq!(endpoint["honorLabels"], true);
    assert_eq!(
        endpoint["relabelings"],
        json!([{"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node"}])
    );
    assert_eq!(
        endpoint["metricRelabelings"],
        json!([{"sourceLabels": ["__name__"], "regex": "go_.*", "action": "drop"}])
    );

    let r = render("metrics:\n  serviceMonitor: {enabled: true}\n");
    let sm = r.get("ServiceMonitor", "keyward");
    assert_eq!(sm["metadata"]["namespace"], "keyward");
    let endpoint = sm["spec"]["endpoints"][0].as_object().expect("endpoint");
    assert_eq!(
        endpoint.keys().collect::<Vec<_>>(),
        ["honorLabels", "interval", "path", "port"],
        "nothing else by default"
    );
    assert_eq!(endpoint["honorLabels"], true, "an ExternalSecret's namespace survives the scrape");
    assert!(render("{}").of_kind("ServiceMonitor").is_empty());
}

/// The Grafana dashboard: a ConfigMap only when enabled, with the sidecar's label (which
/// `extraLabels` cannot replace: without it Grafana never loads the dashboard), the annotations,
/// and the chart's dashboard JSON intact, every panel querying Prometheus through the
/// `datasource` variable.
#[test]
fn grafana_dashboard_config_map_only_when_enabled_with_the_sidecar_label_and_a_query_in_every_panel() {
    assert!(render("{}").opt("ConfigMap", "keyward-dashboard").is_none(), "off by default");
    assert!(render("grafanaDashboard: {enabled: false}\n").opt("ConfigMap", "keyward-dashboard").is_none());

    let r = render("grafanaDashboard: {enabled: true}\n");
    let cm = r.get("ConfigMap", "keyward-dashboard");
    assert_eq!(cm["metadata"]["namespace"], "keyward");
    assert_eq!(cm["metadata"]["labels"]["grafana_dashboard"], "1", "the sidecar's default label");
    assert_eq!(cm["metadata"]["labels"]["app.kubernetes.io/instance"], "kw");
    assert!(cm["metadata"].get("annotations").is_none(), "no annotations by default");

    let r = render(
        "grafanaDashboard:\n  enabled: true\n  sidecarLabel: dashboards\n  sidecarLabelValue: 7\n\
         \x20 annotations: {grafana_folder: Security}\n  extraLabels: {team: platform, dashboards: nope}\n",
    );
    let cm = r.get("ConfigMap", "keyward-dashboard");
    let labels = &cm["metadata"]["labels"];
    assert_eq!(labels["dashboards"], "7", "the sidecar label, as a string, over extraLabels");
    assert!(labels.get("grafana_dashboard").is_none(), "only the configured sidecar label");
    assert_eq!(labels["team"], "platform");
    assert_eq!(cm["metadata"]["annotations"]["grafana_folder"], "Security");

    let text = cm["data"]["keyward.json"].as_str().expect("keyward.json in the ConfigMap");
    let dashboard: Value = serde_json::from_str(text).expect("the dashboard is JSON");
    let file = std::fs::read_to_string(chart_dir().join("dashboards/keyward.json")).expect("dashboards/keyward.json");
    assert_eq!(dashboard, serde_json::from_str::<Value>(&file).expect("JSON"), "rendered unchanged");
    let variables = dashboard["templating"]["list"].as_array().expect("templating.list");
    assert!(
        variables.iter().any(|v| v["name"] == "datasource" && v["type"] == "datasource" && v["query"] == "prometheus"),
        "a Prometheus datasource variable: {variables:?}"
    );
    let panels: Vec<&Value> =
        dashboard["panels"].as_array().expect("panels").iter().filter(|p| p["type"] != "row").collect();
    assert!(panels.len() >= 10, "{} panels", panels.len());
    for panel in panels {
        let title = panel["title"].as_str().unwrap_or("<untitled>");
        assert_eq!(panel["datasource"]["uid"], "${datasource}", "{title}");
        let targets = panel["targets"].as_array().filter(|t| !t.is_empty());
        let targets = targets.unwrap_or_else(|| panic!("panel {title:?} has no target"));
        for t in targets {
            let expr = t["expr"].as_str().unwrap_or_default();
            assert!(!expr.trim().is_empty(), "panel {title:?}: a target without a query");
        }
    }
}

#[test]
fn log_level_and_format_are_global_with_a_per_component_override() {
    let r = render("{}");
    for (c, name) in COMPONENTS {
        let env = r.env(name);
        assert_eq!(env["KEYWARD_LOG_FORMAT"], "json", "{c}");
        assert!(!env.contains_key("KEYWARD_LOG_LEVEL"), "{c}: the binary's default");
    }
    let r = render(&format!("logLevel: warn\nlogFormat: text\n{}", each("log: {level: 'debug,{c}=trace'}\n")));
    for (c, name) in COMPONENTS {
        let env = r.env(name);
        assert_eq!(env["KEYWARD_LOG_LEVEL"], format!("debug,{c}=trace"), "{c}");
        assert_eq!(env["KEYWARD_LOG_FORMAT"], "text", "{c}");
    }
    let r = render("logLevel: warn\ncerts:\n  log: {format: text}\n");
    for (c, name) in COMPONENTS {
        let env = r.env(name);
        assert_eq!(env["KEYWARD_LOG_LEVEL"], "warn", "{c}");
        assert_eq!(env["KEYWARD_LOG_FORMAT"], if c == "certs" { "text" } else { "json" }, "{c}");
    }
}

/// The schema refuses misspelt and mistyped keys of every new group.
#[test]
fn the_schema_refuses_misspelt_operator_values() {
    for (bad, message) in [
        ("webhook:\n  serviceAccount: {anotations: {a: b}}\n", "anotations"),
        ("reconciler:\n  serviceAccount: {create: maybe}\n", "create"),
        ("certs:\n  podLabel: {a: b}\n", "podLabel"),
        ("providers:\n  kubernetes:\n    extraArg: {a: b}\n", "extraArg"),
        ("providers:\n  kubernetes:\n    podDisruptionBudget: {enable: true}\n", "enable"),
        ("reconciler:\n  podDisruptionBudget: {enabled: true, minAvailable: [1]}\n", "minAvailable"),
        ("webhook:\n  extraVolumeMount: []\n", "extraVolumeMount"),
        ("webhook:\n  extraVolumeMounts: [{name: scratch}]\n", "mountPath"),
        ("reconciler:\n  topologySpreadConstraints: [{maxSkew: 1}]\n", "topologyKey"),
        ("reconciler:\n  priorityClassName: 5\n", "priorityClassName"),
        ("certs:\n  log: {levle: debug}\n", "levle"),
        ("certs:\n  log: {format: yaml}\n", "format"),
        ("webhook:\n  extraArgs: {--concurrency: 8}\n", "--concurrency"),
        ("global:\n  nodeSelecter: {a: b}\n", "nodeSelecter"),
        ("scopedRBAC: yes please\n", "scopedRBAC"),
        ("scopedNamespaces: team-a\n", "scopedNamespaces"),
        ("rbac: {aggregateToVeiw: true}\n", "aggregateToVeiw"),
        ("metrics:\n  serviceMonitor: {scrapeTimout: 10s}\n", "scrapeTimout"),
        ("metrics:\n  serviceMonitor: {scrapeTimeout: soon}\n", "scrapeTimeout"),
        ("metrics:\n  serviceMonitor: {additionalLabels: {a: 1}}\n", "additionalLabels"),
        ("grafanaDashboard: {enable: true}\n", "enable"),
        ("grafanaDashboard: {extraLabels: {a: 1}}\n", "extraLabels"),
        ("logLevel: 3\n", "logLevel"),
    ] {
        let out = refused(bad);
        assert!(out.contains(message), "{bad}: {out}");
    }
}

/// `all.yaml` sets every operator value for every component, and each reaches its object.
#[test]
fn the_all_values_file_sets_every_value_and_each_reaches_its_object() {
    let all: Value = serde_yaml::from_str(&std::fs::read_to_string(all_values()).expect("all.yaml")).expect("yaml");
    let keys = [
        "serviceAccount",
        "podAnnotations",
        "podLabels",
        "priorityClassName",
        "topologySpreadConstraints",
        "podSecurityContext",
        "securityContext",
        "log",
        "extraArgs",
        "extraEnv",
        "extraVolumes",
        "extraVolumeMounts",
    ];
    let values_of = |c: &str| {
        if let Some(p) = c.strip_prefix("provider-") { all["providers"][p].clone() } else { all[c].clone() }
    };
    for (c, _) in COMPONENTS {
        for key in keys {
            assert!(values_of(c).get(key).is_some(), "all.yaml sets {c}.{key}");
        }
    }
    for key in ["global", "logLevel", "scopedNamespace", "scopedRBAC", "rbac", "grafanaDashboard"] {
        assert!(all.get(key).is_some(), "all.yaml sets {key}");
    }

    let r = Rendered(objects(&run({
        let mut cmd = helm(Path::new("/nonexistent"));
        cmd.args(["template", "keyward"]).arg(chart_dir()).args(["-n", "keyward", "-f"]).arg(all_values());
        cmd.args(["--api-versions", "monitoring.coreos.com/v1/ServiceMonitor"]);
        cmd
    })));
    for (c, name) in COMPONENTS {
        let v = values_of(c);
        let pod = r.pod(name);
        let spec = &pod["spec"];
        let container = r.container(name);
        let sa = v["serviceAccount"]["name"].as_str().unwrap_or(name);
        assert_eq!(spec["serviceAccountName"], sa, "{c}");
        if v["serviceAccount"]["create"] != false {
            let object = &r.get("ServiceAccount", sa)["metadata"];
            for (k, want) in v["serviceAccount"]["annotations"].as_object().into_iter().flatten() {
                assert_eq!(&object["annotations"][k], want, "{c}");
            }
            for (k, want) in v["serviceAccount"]["extraLabels"].as_object().into_iter().flatten() {
                assert_eq!(&object["labels"][k], want, "{c}");
            }
        }
        for (k, want) in v["podAnnotations"].as_object().expect("podAnnotations") {
            assert_eq!(&pod["metadata"]["annotations"][k], want, "{c}");
        }
        for (k, want) in v["podLabels"].as_object().expect("podLabels") {
            assert_eq!(&pod["metadata"]["labels"][k], want, "{c}");
        }
        assert_eq!(spec["priorityClassName"], v["priorityClassName"], "{c}");
        assert_eq!(spec["topologySpreadConstraints"][0]["whenUnsatisfiable"], "DoNotSchedule", "{c}");
        assert_eq!(spec["securityContext"]["fsGroupChangePolicy"], "OnRootMismatch", "{c}");
        assert_eq!(spec["securityContext"]["runAsNonRoot"], true, "{c}");
        assert_eq!(container["securityContext"]["seccompProfile"]["type"], "RuntimeDefault", "{c}");
        assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true, "{c}");
        let env = r.env(name);
        assert_eq!(env["KEYWARD_LOG_LEVEL"], v["log"]["level"], "{c}");
        assert_eq!(env["KEYWARD_LOG_FORMAT"], v["log"]["format"], "{c}");
        assert_eq!(env["KEYWARD_EXAMPLE"], v["extraEnv"][0]["value"], "{c}");
        let (flag, value) = v["extraArgs"].as_object().expect("extraArgs").iter().next().expect("a flag");
        let value = value.as_str().map(String::from).unwrap_or_else(|| value.to_string());
        assert_eq!(container["args"], json!([format!("--{flag}={value}")]), "{c}");
        assert!(
            container["volumeMounts"]
                .as_array()
                .expect("mounts")
                .contains(&json!({"name": "scratch", "mountPath": "/var/run/keyward-scratch"}))
        );
        assert!(spec["volumes"].as_array().expect("volumes").iter().any(|v| v["name"] == "scratch"), "{c}");
        assert_eq!(spec["nodeSelector"]["kubernetes.io/os"], "linux", "{c}: global nodeSelector");
        assert_eq!(spec["tolerations"][0]["key"], "keyward.dev/dedicated", "{c}: global tolerations");
        assert!(spec["affinity"].is_object(), "{c}");
        if c != "certs" {
            assert!(r.opt("PodDisruptionBudget", name).is_some(), "{c}: PodDisruptionBudget");
        }
    }
    assert_eq!(r.env("keyward-reconciler")["KEYWARD_WATCH_NAMESPACE"], all["scopedNamespace"]);
    assert_eq!(r.get("Role", "keyward-reconciler")["metadata"]["namespace"], all["scopedNamespace"]);
    assert_eq!(
        r.get("ServiceMonitor", "keyward")["metadata"]["namespace"],
        all["metrics"]["serviceMonitor"]["namespace"]
    );
    let dashboard = &r.get("ConfigMap", "keyward-dashboard")["metadata"];
    let gd = &all["grafanaDashboard"];
    assert_eq!(dashboard["labels"][gd["sidecarLabel"].as_str().expect("sidecarLabel")], gd["sidecarLabelValue"]);
    for (k, want) in gd["extraLabels"].as_object().expect("extraLabels") {
        assert_eq!(&dashboard["labels"][k], want);
    }
    assert_eq!(dashboard["annotations"], gd["annotations"]);
}

/// The API server accepts every object `all.yaml` renders (server-side dry run), with the test
/// release's names and selectors and the scoped namespace pointed at the test namespace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_all_values_file_passes_server_side_dry_run() {
    with_temp_namespace(&[], |_client, ns| async move {
        let cp = control_plane().await;
        let dir = tempfile::tempdir().expect("tempdir");
        let f = format!("{ns}-all");
        let test = write_values(dir.path(), "test.yaml", &test_values(&f, false));
        let mut cmd = helm(cp.kubeconfig());
        cmd.args(["template", "kw"]).arg(chart_dir()).args(["-n", &ns, "-f"]).arg(all_values()).arg("-f").arg(&test);
        // No prometheus-operator CRDs on the local control plane.
        cmd.args(["--set", &format!("scopedNamespace={ns}"), "--set", "metrics.serviceMonitor.enabled=false"]);
        let rendered = run(cmd);
        assert!(rendered.contains("priorityClassName"), "all.yaml rendered");
        let (ok, out) = kubectl_input(cp.kubeconfig(), &["apply", "--dry-run=server", "-n", &ns, "-f", "-"], &rendered);
        assert!(ok, "server-side dry run refused the chart with all.yaml:\n{out}");
    })
    .await;
}

#[test]
fn generic_targets_pass_the_flags_and_grant_exactly_the_listed_resources() {
    let rules = |r: &Rendered| r.get("ClusterRole", "keyward-reconciler")["rules"].as_array().expect("rules").clone();
    let grants = |rules: &[Value], group: &str, resource: &str| {
        rules.iter().any(|rule| {
            strings(&rule["apiGroups"]) == [group]
                && strings(&rule["resources"]) == [resource]
                && strings(&rule["verbs"]).contains(&"create".to_string())
        })
    };
    // Off (the default): no flag, and the reconciler may not write ConfigMaps.
    let off = render("{}");
    for deployment in ["keyward-reconciler", "keyward-webhook"] {
        assert!(!off.env(deployment).contains_key("KEYWARD_GENERIC_TARGETS"), "{deployment}");
    }
    assert!(!grants(&rules(&off), "", "configmaps"), "no rights while off");

    // On, with a resource as kubectl names it and one in upstream's form.
    let on = render(
        "genericTargets:\n  enabled: true\n  resources:\n  - appconfigs.config.example.com\n  \
         - {apiGroup: argoproj.io, resources: [applications], verbs: [get, list, watch]}\n",
    );
    for deployment in ["keyward-reconciler", "keyward-webhook"] {
        let env = on.env(deployment);
        assert_eq!(env["KEYWARD_GENERIC_TARGETS"], "true", "{deployment}");
        assert_eq!(
            env["KEYWARD_GENERIC_TARGET_RESOURCES"],
            "configmaps,appconfigs.config.example.com,applications.argoproj.io",
            "{deployment}"
        );
    }
    let granted = rules(&on);
    for (group, resource) in [("", "configmaps"), ("config.example.com", "appconfigs"), ("argoproj.io", "applications")]
    {
        assert!(grants(&granted, group, resource), "{resource}.{group}");
    }
    assert!(!grants(&granted, "argoproj.io", "appprojects"));

    // ConfigMaps may be left out; a misspelt resource is refused by the schema.
    let without = render("genericTargets: {enabled: true, configMaps: false, resources: [widgets.example.com]}\n");
    assert_eq!(without.env("keyward-reconciler")["KEYWARD_GENERIC_TARGET_RESOURCES"], "widgets.example.com");
    assert!(!grants(&rules(&without), "", "configmaps"));
    let e = refused("genericTargets: {enabled: true, resources: [ConfigMaps]}\n");
    assert!(e.contains("genericTargets"), "{e}");
}
