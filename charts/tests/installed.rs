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

#[path = "installed/quickstart.rs"]
mod quickstart;

#[path = "installed/sharding.rs"]
mod sharding;

#[path = "installed/switch.rs"]
mod switch;

#[path = "installed/switch_kinds.rs"]
mod switch_kinds;

#[path = "installed/values.rs"]
mod values;

/// Release name and namespace: the same in every mode, so a later install adopts the CRDs an
/// earlier uninstall kept.
const RELEASE: &str = "keyward";
const NS: &str = "keyward";

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// One test's turn on the one-node cluster. A test that failed before its own `helm uninstall`
/// left its release behind; it is uninstalled here, so one failure is reported as itself and
/// does not make every later install fail with "cannot reuse a name that is still in use".
async fn turn() -> tokio::sync::MutexGuard<'static, ()> {
    let serial = SERIAL.lock().await;
    let mut uninstall = helm(node_cluster().await.kubeconfig());
    uninstall.args(["uninstall", RELEASE, "-n", NS, "--wait", "--timeout", "3m", "--ignore-not-found"]);
    run(uninstall);
    serial
}

/// The chart's defaults (the Kubernetes provider with the ClusterRole the chart ships), plus a
/// second reconciler and the GCP and Azure providers (their Pods must start and be Ready with
/// the chart's defaults: no cloud is reachable here, and none is needed until a store names one).
fn values(cert_manager: bool) -> String {
    format!(
        r#"certManager:
  enabled: {cert_manager}
reconciler:
  replicas: 2
providers:
  gcp:
    enabled: true
  azure:
    enabled: true
"#
    )
}

/// `helm install --wait` of the release with `values_file`: every Deployment rolled out with
/// Ready Pods before it returns.
fn helm_install(kc: &Path, values_file: &Path) {
    let mut install = helm(kc);
    install
        .args(["install", RELEASE])
        .arg(chart_dir())
        .args(["-n", NS, "--create-namespace", "--wait", "--timeout", "5m", "-f"])
        .arg(values_file);
    run(install);
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
  labels: {keyward.dev/reload: "true"}
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
    let started = std::time::Instant::now();
    helm_install(kc, &values_file);
    // A figure for the docs, not an assertion.
    eprintln!(
        "helm install --wait ({}): {:?}",
        if cert_manager { "cert-manager" } else { "self-managed" },
        started.elapsed()
    );
    let all = pods(kc, NS, "app.kubernetes.io/instance=keyward");
    assert!(all.len() >= 7, "webhook ×2, reconciler ×2, providers ×3 (and certs): {all:?}");
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
    for provider in ["provider-gcp", "provider-azure"] {
        let found = pods(kc, NS, &format!("app.kubernetes.io/component={provider}"));
        assert_eq!(found.len(), 1, "the {provider} Pod runs: {all:?}");
    }
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
    // The upgrade's old Pods may still be terminating: pick one of the two current ones.
    let webhook = eventually(
        "the upgrade's old webhook Pods are gone",
        Duration::from_secs(90),
        || {
            let current = pods(kc, NS, "app.kubernetes.io/component=webhook");
            (current.len() == 2).then_some(current)
        },
        || describe(kc, NS),
    )
    .await;
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
    let _serial = turn().await;
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
    let _serial = turn().await;
    install_and_use(false).await;
}

/// The same with real cert-manager (controller and CA injector, as local processes against the
/// node's API server) issuing the chart's certificates and injecting the caBundle.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_install_cert_manager_mode_runs_and_serves_end_to_end() {
    let _serial = turn().await;
    let cluster = node_cluster().await;
    let options = CertManagerOptions { leader_election_namespace: Some("kube-system".into()), ..Default::default() };
    let mut cert_manager = cert_manager(cluster.kubeconfig(), &options).await;
    install_and_use(true).await;
    cert_manager.assert_running();
}

/// A CA ClusterIssuer shared with every tenant, the way many clusters run cert-manager: a
/// self-signed ClusterIssuer signs a CA Certificate in cert-manager's cluster resource namespace,
/// and the CA ClusterIssuer `kw-shared` signs whatever Certificate any namespace asks for.
const SHARED_ISSUER: &str = r#"apiVersion: cert-manager.io/v1
kind: ClusterIssuer
metadata: {name: kw-shared-selfsigned}
spec: {selfSigned: {}}
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: kw-shared-ca, namespace: kube-system}
spec:
  isCA: true
  commonName: kw-shared-ca
  secretName: kw-shared-ca
  privateKey: {algorithm: ECDSA, size: 256}
  issuerRef: {name: kw-shared-selfsigned, kind: ClusterIssuer, group: cert-manager.io}
---
apiVersion: cert-manager.io/v1
kind: ClusterIssuer
metadata: {name: kw-shared}
spec:
  ca: {secretName: kw-shared-ca}
"#;

/// What a tenant of `kw-other` can ask the shared issuer for: a client certificate issued to the
/// reconciler's name.
const FORGED: &str = r#"apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: forged, namespace: kw-other}
spec:
  secretName: forged
  commonName: keyward-reconciler
  usages: ["digital signature", "key encipherment", "client auth"]
  privateKey: {algorithm: ECDSA, size: 256}
  issuerRef: {name: kw-shared, kind: ClusterIssuer, group: cert-manager.io}
"#;

/// One key of a Secret, decoded.
/// Waits until the API server reaches the webhook through its Service: `helm install --wait`
/// returns once the Pods are Ready, and the Service may route to them a moment later.
async fn webhook_reachable(kc: &Path) {
    // Cluster-scoped, so the webhook is called whatever namespace selector the chart sets.
    const PROBE: &str = "apiVersion: external-secrets.io/v1\nkind: ClusterSecretStore\n\
                         metadata: {name: kw-webhook-probe}\nspec: {provider: {fake: {data: []}}}\n";
    eventually(
        "the API server reaches the webhook through its Service",
        Duration::from_secs(60),
        || {
            let (ok, out) = kubectl_input(kc, &["apply", "--dry-run=server", "-f", "-"], PROBE);
            (ok || !out.contains("failed calling webhook")).then_some(())
        },
        || output(kc, &["get", "pods,endpointslices", "-n", NS, "-o", "wide"]),
    )
    .await;
}

fn secret_key(kc: &Path, ns: &str, name: &str, key: &str) -> Option<String> {
    let jsonpath = format!("jsonpath={{.data.{}}}", key.replace('.', "\\."));
    let b64 = output(kc, &["get", "secret", name, "-n", ns, "-o", &jsonpath]);
    String::from_utf8(BASE64.decode(b64).ok()?).ok().filter(|s| !s.is_empty())
}

fn ready(kc: &Path, kind: &str, ns: Option<&str>, name: &str) -> bool {
    let mut args = vec!["get", kind, name, "-o", r#"jsonpath={.status.conditions[?(@.type=="Ready")].status}"#];
    if let Some(ns) = ns {
        args.extend(["-n", ns]);
    }
    output(kc, &args) == "True"
}

/// `GetSecret` straight to a provider Pod, as whoever holds `cert`/`key`, asking for the
/// operator's configuration `NS/source` the way a ClusterProvider with `ProviderNamespace` scope
/// would, on behalf of `kw-other` — a namespace that ClusterProvider does not admit.
async fn call_provider(pod_ip: &str, server_ca: &str, cert: &str, key: &str) -> Result<String, String> {
    use keyward_proto::v1::secret_store_provider_client::SecretStoreProviderClient;
    use keyward_proto::v1::{ExternalSecretDataRemoteRef, GetSecretRequest, ProviderReference};
    use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(server_ca))
        .domain_name(format!("{RELEASE}-provider-kubernetes.{NS}.svc"))
        .identity(Identity::from_pem(cert, key));
    let endpoint = Endpoint::from_shared(format!("https://{pod_ip}:8443"))
        .map_err(|e| format!("endpoint: {e}"))?
        .tls_config(tls)
        .map_err(|e| format!("tls: {e}"))?
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(20));
    let channel = endpoint.connect().await.map_err(|e| format!("connect: {e:?}"))?;
    let request = GetSecretRequest {
        remote_ref: Some(ExternalSecretDataRemoteRef {
            key: "database".into(),
            property: "password".into(),
            ..Default::default()
        }),
        provider_ref: Some(ProviderReference {
            api_version: "provider.external-secrets.io/v2alpha1".into(),
            kind: "Kubernetes".into(),
            name: "source".into(),
            namespace: NS.into(),
            store_ref_kind: "ClusterProvider".into(),
            authentication_scope: "ProviderNamespace".into(),
        }),
        source_namespace: "kw-other".into(),
        max_age_millis: 0,
    };
    let reply = SecretStoreProviderClient::new(channel).get_secret(request).await.map_err(|s| format!("{s:?}"))?;
    Ok(String::from_utf8_lossy(&reply.into_inner().value).into_owned())
}

/// `a=b,c=d` from a NetworkPolicy selector's `matchLabels`.
fn label_selector(selector: &serde_json::Value) -> String {
    let labels = selector["matchLabels"].as_object().cloned().unwrap_or_default();
    assert!(!labels.is_empty() && selector.get("matchExpressions").is_none(), "matchLabels only: {selector}");
    labels.iter().map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default())).collect::<Vec<_>>().join(",")
}

/// cert-manager mode with `certManager.issuerRef` pointing at a ClusterIssuer every tenant may
/// use. A tenant gets a Certificate from it with `commonName: keyward-reconciler` (cert-manager's
/// approver signs it) and calls the Kubernetes provider's gRPC port directly with it: the
/// handshake is refused, because provider mTLS is signed by the release's own CA, and the same
/// call with the reconciler's certificate shows what it would have returned. The provider's
/// NetworkPolicy selects the provider Pod and lets in only the reconciler Pods (the node's bridge
/// CNI does not enforce NetworkPolicy, so the test checks what the policy selects, not packets).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_cluster_issuer_cannot_mint_a_client_certificate_providers_accept() {
    let _serial = turn().await;
    let cluster = node_cluster().await;
    let kc = cluster.kubeconfig();
    let options = CertManagerOptions { leader_election_namespace: Some("kube-system".into()), ..Default::default() };
    let mut cert_manager = cert_manager(kc, &options).await;
    let image = image(cluster);

    apply(kc, SHARED_ISSUER);
    eventually(
        "the shared CA ClusterIssuer is Ready",
        Duration::from_secs(90),
        || ready(kc, "clusterissuer", None, "kw-shared").then_some(()),
        || output(kc, &["get", "clusterissuers,certificates", "-A", "-o", "wide"]),
    )
    .await;
    let shared_ca = secret_key(kc, "kube-system", "kw-shared-ca", "tls.crt").expect("shared CA certificate");

    let dir = tempfile::tempdir().expect("tempdir");
    let values_file = dir.path().join("values.yaml");
    let shared = "  issuerRef: {name: kw-shared, kind: ClusterIssuer, group: cert-manager.io}\n";
    let with_issuer =
        values(true).replace("certManager:\n  enabled: true\n", &format!("certManager:\n  enabled: true\n{shared}"));
    assert!(with_issuer.contains("kw-shared"), "{with_issuer}");
    std::fs::write(&values_file, with_issuer).expect("values");
    helm_install(kc, &values_file);
    let images = output(kc, &["get", "pods", "-n", NS, "-o", "jsonpath={.items[*].spec.containers[*].image}"]);
    assert!(images.split_whitespace().all(|i| i == image), "chart default image {image}, Pods run: {images}");

    // The user's issuer signs what the API server checks; provider mTLS is the release's own.
    let own_ca = secret_key(kc, NS, &format!("{RELEASE}-ca"), "tls.crt").expect("the release's CA");
    assert_ne!(own_ca, shared_ca);
    let webhook_ca = secret_key(kc, NS, &format!("{RELEASE}-webhook-tls"), "ca.crt").expect("webhook ca.crt");
    assert_eq!(webhook_ca.trim(), shared_ca.trim(), "the webhook's serving certificate comes from the user's issuer");
    let provider_ca =
        secret_key(kc, NS, &format!("{RELEASE}-provider-kubernetes-tls"), "ca.crt").expect("provider ca.crt");
    let client_ca = secret_key(kc, NS, "keyward-provider-tls", "ca.crt").expect("reconciler ca.crt");
    assert_eq!(provider_ca.trim(), own_ca.trim(), "providers verify callers against the release's CA");
    assert_eq!(client_ca.trim(), own_ca.trim(), "the reconciler verifies providers against the release's CA");

    // An operator configuration, a ClusterProvider admitting only labelled namespaces, and a
    // tenant namespace (kw-other) it does not admit.
    webhook_reachable(kc).await;
    let cluster_ca = std::fs::read(cluster.dir().join("pki/ca.crt")).expect("cluster CA");
    tenants(kc, &BASE64.encode(cluster_ca));
    eventually(
        "the ClusterProvider is Ready (the provider Deployment answered)",
        Duration::from_secs(90),
        || ready(kc, "clusterprovider", None, "kw-source").then_some(()),
        || output(kc, &["get", "clusterprovider", "kw-source", "-o", "yaml"]),
    )
    .await;
    let (ok, out) = kubectl_input(kc, &["apply", "-f", "-"], &external_secret("kw-other", "database"));
    assert!(!ok && out.contains("kw-other"), "the webhook (user-issued certificate) refuses kw-other:\n{out}");

    // The tenant asks the shared issuer for the reconciler's name, and gets it.
    apply(kc, FORGED);
    eventually(
        "the tenant's Certificate is issued",
        Duration::from_secs(90),
        || ready(kc, "certificate", Some("kw-other"), "forged").then_some(()),
        || output(kc, &["get", "certificate,certificaterequest", "-n", "kw-other", "-o", "yaml"]),
    )
    .await;
    let forged_cert = secret_key(kc, "kw-other", "forged", "tls.crt").expect("forged tls.crt");
    let forged_key = secret_key(kc, "kw-other", "forged", "tls.key").expect("forged tls.key");
    // Taken now: the forged certificate is valid only from its issuance on.
    let now = time::OffsetDateTime::now_utc();
    assert!(keyward_certs::bundle::verifies_against_bundle(&forged_cert, &shared_ca, now), "signed by the shared CA");
    assert!(
        !keyward_certs::bundle::verifies_against_bundle(&forged_cert, &provider_ca, now),
        "the provider's client CA must not trust a certificate of the shared issuer"
    );

    let provider_pods = pods(kc, NS, "app.kubernetes.io/component=provider-kubernetes");
    let pod_ip = output(kc, &["get", "pod", &provider_pods[0], "-n", NS, "-o", "jsonpath={.status.podIP}"]).to_string();
    assert!(!pod_ip.is_empty(), "provider Pod IP");
    // Control: the reconciler's own certificate, with the very same forged reference, gets the
    // operator's secret — a provider believes its caller about namespaces and scopes.
    let reconciler_cert = secret_key(kc, NS, "keyward-provider-tls", "tls.crt").expect("reconciler tls.crt");
    let reconciler_key = secret_key(kc, NS, "keyward-provider-tls", "tls.key").expect("reconciler tls.key");
    let value = call_provider(&pod_ip, &provider_ca, &reconciler_cert, &reconciler_key).await;
    assert_eq!(value.as_deref(), Ok("first-value"), "control call with the reconciler's certificate");
    // The tenant's certificate is refused at the handshake.
    let refused = call_provider(&pod_ip, &provider_ca, &forged_cert, &forged_key).await;
    let err = refused.expect_err("a tenant's certificate from the shared issuer must not reach the provider");
    assert!(!err.contains("first-value"), "{err}");
    let logs = output(kc, &["logs", "-n", NS, &provider_pods[0], "--tail", "200"]);
    assert!(logs.contains("TLS handshake refused"), "the provider logs the refused handshake:\n{logs}");

    // The provider's NetworkPolicy selects the provider Pods and admits only reconciler Pods of
    // the release namespace to the gRPC port.
    let policy: serde_json::Value = serde_json::from_str(&output(
        kc,
        &["get", "networkpolicy", &format!("{RELEASE}-provider-kubernetes"), "-n", NS, "-o", "json"],
    ))
    .expect("provider NetworkPolicy");
    let mut selected = pods(kc, NS, &label_selector(&policy["spec"]["podSelector"]));
    let mut want = provider_pods.clone();
    selected.sort();
    want.sort();
    assert_eq!(selected, want, "the policy selects the provider Pods");
    let grpc = policy["spec"]["ingress"]
        .as_array()
        .expect("ingress")
        .iter()
        .find(|r| r["ports"][0]["port"] == 8443)
        .expect("a rule for the gRPC port");
    let peers = grpc["from"].as_array().expect("gRPC port only from listed peers");
    assert_eq!(peers.len(), 1, "{peers:?}");
    assert!(peers[0].get("namespaceSelector").is_none() && peers[0].get("ipBlock").is_none(), "{peers:?}");
    let mut admitted = pods(kc, NS, &label_selector(&peers[0]["podSelector"]));
    let mut reconcilers = pods(kc, NS, "app.kubernetes.io/component=reconciler");
    admitted.sort();
    reconcilers.sort();
    assert_eq!(admitted, reconcilers, "only the reconciler Pods reach the gRPC port");
    assert_eq!(policy["spec"]["policyTypes"], serde_json::json!(["Ingress"]), "egress stays open");

    let mut uninstall = helm(kc);
    uninstall.args(["uninstall", RELEASE, "-n", NS, "--wait", "--timeout", "3m"]);
    run(uninstall);
    for ns in ["kw-source", "kw-team", "kw-other", NS] {
        let _ = kubectl(kc).args(["delete", "namespace", ns, "--wait=true", "--timeout=120s"]).output();
    }
    let _ = kubectl(kc).args(["delete", "clusterprovider", "kw-source"]).output();
    let _ = kubectl_input(kc, &["delete", "--ignore-not-found", "-f", "-"], SHARED_ISSUER);
    let _ = kubectl(kc).args(["delete", "secret", "kw-shared-ca", "-n", "kube-system", "--ignore-not-found"]).output();
    cert_manager.assert_running();
}
