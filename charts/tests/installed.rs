//! The installed tier: Keyward as a user runs it. The image from `make images` is imported into
//! a one-node cluster that runs Pods (`make cluster-up NODE=1`: kubelet, containerd, kube-proxy,
//! CoreDNS), the chart is installed with `helm install --wait`, and everything below is checked
//! through the API server against Keyward's Pods: admission served behind the webhook Service, a
//! sync through the provider Deployment, injection into a running workload, a rollout on
//! rotation, leader failover, upgrades and Pod deletions without a failed admission, and an
//! uninstall that leaves nothing behind that could block the cluster.
//!
//! Needs root (the kubelet and containerd do). One node runs per machine, so the modes run one
//! after the other in this one test binary.

use std::path::Path;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use keyward_chart_tests::installed::{AdmissionStream, apply, eventually, image, kubectl, kubectl_input, sha256_hex};
use keyward_chart_tests::{CertManagerOptions, cert_manager, chart_dir, helm, run};
use keyward_e2e::node_cluster;

/// Release name and namespace: the same in every mode, so a later install adopts the CRDs an
/// earlier uninstall kept.
const RELEASE: &str = "keyward";
const NS: &str = "keyward";

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn values(cert_manager: bool) -> String {
    format!(
        r#"certManager:
  enabled: {cert_manager}
reconciler:
  replicas: 2
providers:
  - name: kubernetes
    enabled: true
    command: keyward-provider-kubernetes
    port: 8443
    healthPort: 8080
    rules:
      - apiGroups: ["provider.external-secrets.io"]
        resources: ["kubernetes"]
        verbs: ["get", "list", "watch"]
      - apiGroups: [""]
        resources: ["secrets", "configmaps"]
        verbs: ["get"]
      - apiGroups: [""]
        resources: ["serviceaccounts/token"]
        verbs: ["create"]
"#
    )
}

fn output(kc: &Path, args: &[&str]) -> String {
    let out = kubectl(kc).args(args).output().expect("run kubectl");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn pods(kc: &Path, ns: &str, selector: &str) -> Vec<String> {
    output(kc, &["get", "pods", "-n", ns, "-l", selector, "-o", "jsonpath={.items[*].metadata.name}"])
        .split_whitespace()
        .map(String::from)
        .collect()
}

fn describe(kc: &Path, ns: &str) -> String {
    output(kc, &["get", "pods,events", "-n", ns, "-o", "wide"])
}

/// The tenant side: a source namespace holding the data, a namespace the ClusterProvider
/// admits (with injection on), one it does not, and the operator's provider config.
fn tenants(kc: &Path, ca_b64: &str) {
    apply(
        kc,
        &format!(
            r#"apiVersion: v1
kind: Namespace
metadata: {{name: kw-source}}
---
apiVersion: v1
kind: Namespace
metadata:
  name: kw-team
  labels: {{keyward.dev/secrets-access: allowed, keyward.dev/injection: enabled}}
---
apiVersion: v1
kind: Namespace
metadata: {{name: kw-other}}
---
apiVersion: v1
kind: Secret
metadata: {{name: database, namespace: kw-source}}
stringData: {{password: first-value}}
---
apiVersion: v1
kind: ServiceAccount
metadata: {{name: secret-reader, namespace: {NS}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: secret-reader, namespace: kw-source}}
rules:
  - apiGroups: [""]
    resources: [secrets]
    verbs: [get, list, watch]
  - apiGroups: [authorization.k8s.io]
    resources: [selfsubjectrulesreviews, selfsubjectaccessreviews]
    verbs: [create]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: secret-reader, namespace: kw-source}}
subjects: [{{kind: ServiceAccount, name: secret-reader, namespace: {NS}}}]
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: secret-reader}}
---
apiVersion: provider.external-secrets.io/v2alpha1
kind: Kubernetes
metadata: {{name: source, namespace: {NS}}}
spec:
  server:
    url: https://kubernetes.default.svc
    caBundle: {ca_b64}
  auth:
    serviceAccount: {{name: secret-reader}}
  remoteNamespace: kw-source
---
apiVersion: external-secrets.io/v1
kind: ClusterProvider
metadata: {{name: kw-source}}
spec:
  authenticationScope: ProviderNamespace
  config:
    address: {RELEASE}-provider-kubernetes.{NS}.svc:8443
    providerRef:
      apiVersion: provider.external-secrets.io/v2alpha1
      kind: Kubernetes
      name: source
      namespace: {NS}
  conditions:
    - namespaceSelector:
        matchLabels: {{keyward.dev/secrets-access: allowed}}
"#
        ),
    );
}

fn external_secret(ns: &str, name: &str) -> String {
    format!(
        r#"apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {{name: {name}, namespace: {ns}}}
spec:
  refreshInterval: 3s
  secretStoreRef: {{name: kw-source, kind: ClusterProvider}}
  target: {{name: {name}}}
  data:
    - secretKey: password
      remoteRef: {{key: database, property: password}}
"#
    )
}

const APP: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: app
  namespace: kw-team
  annotations: {keyward.dev/reload: "true"}
spec:
  replicas: 1
  selector: {matchLabels: {app: probe}}
  template:
    metadata:
      labels: {app: probe}
      annotations: {keyward.dev/inject: database}
    spec:
      terminationGracePeriodSeconds: 2
      containers:
        - name: probe
          image: keyward.local/probe:1
          imagePullPolicy: Never
          env: [{name: PROBE_ENV, value: password}]
"#;

/// The hash the running `app` Pod reports for its `password` variable, once exactly one Pod
/// runs (none terminating) and has logged it.
fn app_sees(kc: &Path) -> Option<String> {
    let list: serde_json::Value =
        serde_json::from_str(&output(kc, &["get", "pods", "-n", "kw-team", "-l", "app=probe", "-o", "json"])).ok()?;
    let items = list["items"].as_array()?;
    let [pod] = items.as_slice() else { return None };
    if !pod["metadata"]["deletionTimestamp"].is_null() || pod["status"]["phase"] != "Running" {
        return None;
    }
    let name = pod["metadata"]["name"].as_str()?;
    let logs = output(kc, &["logs", "-n", "kw-team", name, "--tail", "5"]);
    logs.lines().rev().find_map(|l| l.strip_prefix("probe env password sha256=")).map(String::from)
}

fn target_password(kc: &Path) -> Option<String> {
    let b64 = output(kc, &["get", "secret", "database", "-n", "kw-team", "-o", "jsonpath={.data.password}"]);
    String::from_utf8(BASE64.decode(b64).ok()?).ok()
}

async fn install_and_use(cert_manager: bool) {
    let cluster = node_cluster().await;
    let kc = cluster.kubeconfig();
    let image = image(cluster);
    let dir = tempfile::tempdir().expect("tempdir");
    let values_file = dir.path().join("values.yaml");
    std::fs::write(&values_file, values(cert_manager)).expect("values");

    // 1. helm install --wait: every Deployment rolled out with Ready Pods.
    let mut install = helm(kc);
    install
        .args(["install", RELEASE])
        .arg(chart_dir())
        .args(["-n", NS, "--create-namespace", "--wait", "--timeout", "5m", "-f"])
        .arg(&values_file);
    let started = std::time::Instant::now();
    run(install);
    // A figure for the docs, not an assertion.
    eprintln!(
        "helm install --wait ({}): {:?}",
        if cert_manager { "cert-manager" } else { "self-managed" },
        started.elapsed()
    );
    let all = pods(kc, NS, "app.kubernetes.io/instance=keyward");
    assert!(all.len() >= 5, "webhook ×2, reconciler ×2, provider (and certs): {all:?}");
    let not_ready = output(
        kc,
        &[
            "get",
            "pods",
            "-n",
            NS,
            "-o",
            r#"jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status} {end}"#,
        ],
    );
    assert!(!not_ready.contains("=False"), "every Keyward Pod is Ready: {not_ready}");
    // The chart's default image is exactly the one `make images` built.
    let images = output(kc, &["get", "pods", "-n", NS, "-o", "jsonpath={.items[*].spec.containers[*].image}"]);
    assert!(images.split_whitespace().all(|i| i == image), "chart default image {image}, Pods run: {images}");

    // 2. Exactly one reconciler leads, as its Pod; deleting that Pod hands the Lease over.
    let lease = format!("{RELEASE}-reconciler");
    let reconcilers = pods(kc, NS, "app.kubernetes.io/component=reconciler");
    let holder = eventually(
        "a reconciler Pod holds the Lease",
        Duration::from_secs(60),
        || {
            let h = output(kc, &["get", "lease", &lease, "-n", NS, "-o", "jsonpath={.spec.holderIdentity}"]);
            reconcilers.contains(&h).then_some(h)
        },
        || describe(kc, NS),
    )
    .await;
    run({
        let mut c = kubectl(kc);
        c.args(["delete", "pod", &holder, "-n", NS, "--wait=false"]);
        c
    });
    eventually(
        "another reconciler takes the Lease",
        Duration::from_secs(60),
        || {
            let h = output(kc, &["get", "lease", &lease, "-n", NS, "-o", "jsonpath={.spec.holderIdentity}"]);
            let live = pods(kc, NS, "app.kubernetes.io/component=reconciler");
            (!h.is_empty() && h != holder && live.contains(&h)).then_some(())
        },
        || describe(kc, NS),
    )
    .await;

    // 3. A policy violation is refused by the webhook Pods behind their Service.
    let ca = std::fs::read(cluster.dir().join("pki/ca.crt")).expect("cluster CA");
    tenants(kc, &BASE64.encode(ca));
    eventually(
        "the ClusterProvider is Ready (the provider Deployment answered)",
        Duration::from_secs(90),
        || {
            let s = output(
                kc,
                &[
                    "get",
                    "clusterprovider",
                    "kw-source",
                    "-o",
                    r#"jsonpath={.status.conditions[?(@.type=="Ready")].status}"#,
                ],
            );
            (s == "True").then_some(())
        },
        || output(kc, &["get", "clusterprovider", "kw-source", "-o", "yaml"]),
    )
    .await;
    let (ok, out) = kubectl_input(kc, &["apply", "-f", "-"], &external_secret("kw-other", "database"));
    assert!(!ok, "a namespace the ClusterProvider does not admit must be refused:\n{out}");
    assert!(out.contains("kw-source") && out.contains("kw-other"), "the denial names the store and namespace: {out}");

    // 4. An admitted ExternalSecret syncs through the provider Deployment.
    apply(kc, &external_secret("kw-team", "database"));
    let synced = |want: &'static str| move || (target_password(kc)? == want).then_some(());
    eventually("the target Secret holds the source value", Duration::from_secs(60), synced("first-value"), || {
        output(kc, &["get", "externalsecret", "database", "-n", "kw-team", "-o", "yaml"])
    })
    .await;

    // 5. A Deployment asking for injection runs and its container sees the value.
    apply(kc, APP);
    eventually(
        "the injected container reports the synced value",
        Duration::from_secs(90),
        || (app_sees(kc)? == sha256_hex("first-value")).then_some(()),
        || describe(kc, "kw-team"),
    )
    .await;
    let generation =
        output(kc, &["get", "deployment", "app", "-n", "kw-team", "-o", "jsonpath={.metadata.generation}"]);

    // 6. Rotating the source rolls the Deployment once; the new Pod sees the new value.
    run({
        let mut c = kubectl(kc);
        c.args([
            "patch",
            "secret",
            "database",
            "-n",
            "kw-source",
            "-p",
            r#"{"stringData":{"password":"second-value"}}"#,
        ]);
        c
    });
    eventually("the rotation reaches the target Secret", Duration::from_secs(60), synced("second-value"), || {
        output(kc, &["get", "externalsecret", "database", "-n", "kw-team", "-o", "yaml"])
    })
    .await;
    eventually(
        "the rolled Pod reports the new value",
        Duration::from_secs(120),
        || (app_sees(kc)? == sha256_hex("second-value")).then_some(()),
        || describe(kc, "kw-team"),
    )
    .await;
    tokio::time::sleep(Duration::from_secs(8)).await;
    let rolled = output(kc, &["get", "deployment", "app", "-n", "kw-team", "-o", "jsonpath={.metadata.generation}"]);
    let generations = (generation.parse::<i64>().unwrap_or(0), rolled.parse::<i64>().unwrap_or(0));
    assert_eq!(generations.1, generations.0 + 1, "one rotation, one rollout: {generations:?}");

    // 7. helm upgrade (a values change that rolls the webhook) loses no admission.
    let stream = AdmissionStream::start(kc, &external_secret("kw-team", "stream"));
    let mut upgrade = helm(kc);
    upgrade
        .args(["upgrade", RELEASE])
        .arg(chart_dir())
        .args(["-n", NS, "--wait", "--timeout", "5m", "-f"])
        .arg(&values_file)
        .args(["--set-json", r#"webhook.env=[{"name":"KEYWARD_UPGRADED","value":"1"}]"#]);
    run(upgrade);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (sent, failures) = stream.finish();
    assert!(sent >= 5, "the stream ran through the upgrade ({sent} requests)");
    assert!(
        failures.is_empty(),
        "{} of {sent} admissions failed during helm upgrade:\n{}",
        failures.len(),
        failures.join("\n")
    );

    // 8. Deleting a webhook Pod during a stream of applies loses no admission.
    let stream = AdmissionStream::start(kc, &external_secret("kw-team", "stream"));
    tokio::time::sleep(Duration::from_secs(2)).await;
    let webhook = pods(kc, NS, "app.kubernetes.io/component=webhook");
    run({
        let mut c = kubectl(kc);
        c.args(["delete", "pod", &webhook[0], "-n", NS, "--wait=true", "--timeout=60s"]);
        c
    });
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (sent, failures) = stream.finish();
    assert!(sent >= 5, "the stream ran through the deletion ({sent} requests)");
    assert!(
        failures.is_empty(),
        "{} of {sent} admissions failed while a webhook Pod was deleted:\n{}",
        failures.len(),
        failures.join("\n")
    );

    // 9. helm uninstall leaves no webhook configuration (a fail-closed orphan would block every
    //    later write) and no Pods; the CRDs, and the objects of their kinds, stay.
    run({
        let mut c = kubectl(kc);
        c.args(["delete", "deployment", "app", "-n", "kw-team"]);
        c
    });
    let mut uninstall = helm(kc);
    uninstall.args(["uninstall", RELEASE, "-n", NS, "--wait", "--timeout", "3m"]);
    run(uninstall);
    let configurations =
        output(kc, &["get", "validatingwebhookconfigurations,mutatingwebhookconfigurations", "-o", "name"]);
    assert!(!configurations.contains(RELEASE), "webhook configurations left behind: {configurations}");
    eventually(
        "no Keyward Pod is left",
        Duration::from_secs(90),
        || pods(kc, NS, "app.kubernetes.io/instance=keyward").is_empty().then_some(()),
        || describe(kc, NS),
    )
    .await;
    let crds = output(kc, &["get", "crd", "-o", "name"]);
    assert!(crds.contains("externalsecrets.external-secrets.io"), "CRDs are kept: {crds}");
    let kept = output(kc, &["get", "externalsecret", "database", "-n", "kw-team", "-o", "name"]);
    assert!(!kept.is_empty(), "ExternalSecrets survive an uninstall");
    // Writes are not blocked by anything the release left.
    apply(kc, &external_secret("kw-other", "after-uninstall"));

    // Clean slate for the next mode.
    for ns in ["kw-source", "kw-team", "kw-other", NS] {
        let _ = kubectl(kc).args(["delete", "namespace", ns, "--wait=true", "--timeout=120s"]).output();
    }
    let _ = kubectl(kc).args(["delete", "clusterprovider", "kw-source"]).output();
}

/// The archive `make images` writes is a docker-archive and an OCI layout at once, as read by
/// skopeo (a second implementation of both), and it names a non-root user.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn image_archive_reads_as_docker_archive_and_oci_and_runs_as_non_root() {
    let _serial = SERIAL.lock().await;
    let cluster = node_cluster().await;
    let name = image(cluster);
    let archive = keyward_e2e::repo_root().join("dist/keyward-image.tar");
    for transport in ["docker-archive", "oci-archive"] {
        let mut inspect = std::process::Command::new("skopeo");
        inspect.args(["inspect", "--config", &format!("{transport}:{}", archive.display())]);
        let config: serde_json::Value = serde_json::from_str(&run(inspect)).expect("image config JSON");
        assert_eq!(config["config"]["User"], "65532:65532", "{transport}: {config}");
        assert_eq!(config["os"], "linux", "{transport}");
    }
    // Every command the chart runs is a binary in the image.
    let manifest = run({
        let mut c = std::process::Command::new("tar");
        c.arg("-xOf").arg(&archive).arg("manifest.json");
        c
    });
    let manifest: serde_json::Value = serde_json::from_str(&manifest).expect("docker-archive manifest.json");
    let layer = manifest[0]["Layers"][0].as_str().expect("one layer").to_string();
    let files = run({
        let mut c = std::process::Command::new("bash");
        c.args(["-c", "tar -xOf \"$1\" \"$2\" | tar -tz", "list"]).arg(&archive).arg(&layer);
        c
    });
    let values = std::fs::read_to_string(keyward_e2e::repo_root().join("charts/keyward/values.yaml")).expect("values");
    let commands: Vec<&str> = values
        .lines()
        .filter_map(|l| l.trim().strip_prefix("command: "))
        .chain(["keyward-webhook", "keyward-reconciler", "keyward-certs"])
        .collect();
    assert!(commands.len() >= 7, "the chart's commands: {commands:?}");
    for command in commands {
        assert!(
            files.lines().any(|f| f.trim_start_matches("./") == format!("usr/local/bin/{command}")),
            "{command} is not in the image:\n{files}"
        );
    }
    // Imported into the node under the chart's default name.
    let sock = cluster.dir().join("node/containerd.sock");
    let mut list = std::process::Command::new("ctr");
    list.arg("--address").arg(&sock).args(["-n", "k8s.io", "images", "list", "-q"]);
    let images = run(list);
    assert!(images.lines().any(|l| l == name), "{name} not in the node's images:\n{images}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_install_self_managed_runs_and_serves_end_to_end() {
    let _serial = SERIAL.lock().await;
    install_and_use(false).await;
}

/// The same with real cert-manager (controller and CA injector, as local processes against the
/// node's API server) issuing the chart's certificates and injecting the caBundle.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_install_cert_manager_mode_runs_and_serves_end_to_end() {
    let _serial = SERIAL.lock().await;
    let cluster = node_cluster().await;
    let options = CertManagerOptions { leader_election_namespace: Some("kube-system".into()), ..Default::default() };
    let mut cert_manager = cert_manager(cluster.kubeconfig(), &options).await;
    install_and_use(true).await;
    cert_manager.assert_running();
}
