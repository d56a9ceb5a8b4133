//! End-to-end support: real provider and reconciler processes, real mTLS material, the local
//! control plane from `keyward-e2e`.

#![allow(dead_code)]

use std::future::Future;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use keyward_certs::{CertificateAuthority, TlsFiles, Usage, write_tls_dir};
use keyward_e2e::{ChildProcess, control_plane, free_port, spawn_logged, workspace_binary};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde::de::DeserializeOwned;
use serde_json::json;

pub const CLASS_LABEL: &str = "external-secrets.io/controller-class";

/// Turns ([`keyward_e2e::turns`]) on the one control plane of this test binary: most tests keep
/// to their own namespaces and controller class and run side by side ([`shared`]); a test that
/// measures or disturbs what every test sees (the API server's request and watch counters, the
/// API server itself, the CRDs, cluster-scoped objects that reconcilers watch, a reconciler
/// watching every namespace, a timing or CPU budget) runs alone ([`exclusive`]).
#[allow(unused_imports, reason = "the benchmarks include this module and take no turns")]
pub use keyward_e2e::turns::shared;

/// [`keyward_e2e::turns::exclusive`], once the namespaces of the tests before it are gone: the
/// namespace controller deletes their contents after those tests ended, requests a test that
/// counts the API server's requests would count as its own.
pub async fn exclusive() -> tokio::sync::RwLockWriteGuard<'static, ()> {
    let turn = keyward_e2e::turns::exclusive().await;
    wait_for_deleted_namespaces().await;
    turn
}

/// Waits (a minute at most) until no test namespace is being deleted. A namespace whose deletion
/// waits only on finalizers (of objects whose controller has gone with its test) is not waited
/// for: nothing would remove them.
async fn wait_for_deleted_namespaces() {
    use k8s_openapi::api::core::v1::Namespace;
    let namespaces: Api<Namespace> = Api::all(control_plane().await.client().await);
    let test_namespaces = kube::api::ListParams::default().labels(&format!("{}=true", keyward_e2e::E2E_LABEL));
    let waits_on_finalizers = |ns: &Namespace| {
        let conditions = ns.status.as_ref().and_then(|s| s.conditions.as_ref());
        conditions.is_some_and(|c| c.iter().any(|c| c.type_ == "NamespaceFinalizersRemaining" && c.status == "True"))
    };
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(60) {
        let Ok(list) = namespaces.list(&test_namespaces).await else { return };
        let deleting =
            list.items.iter().filter(|ns| ns.metadata.deletion_timestamp.is_some() && !waits_on_finalizers(ns));
        if deleting.count() == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    eprintln!("test namespaces are still being deleted after a minute; the exclusive test starts anyway");
}

/// Certificates for one test: a CA, a provider server certificate, a reconciler client one.
pub struct Pki {
    pub authority: CertificateAuthority,
    pub ca: String,
    pub server_cert: String,
    pub server_key: String,
    pub client_cert: String,
    pub client_key: String,
    pub dir: tempfile::TempDir,
}

impl Pki {
    pub fn new() -> Pki {
        let ca = CertificateAuthority::generate("keyward-test-ca", Duration::from_secs(3600)).unwrap();
        let server = ca.issue(&["127.0.0.1", "localhost"], Usage::Server, Duration::from_secs(3600)).unwrap();
        let client = ca.issue(&["keyward-reconciler"], Usage::Client, Duration::from_secs(3600)).unwrap();
        let dir = tempfile::tempdir().unwrap();
        write_tls_dir(
            &dir.path().join("provider"),
            &TlsFiles { ca_pem: ca.cert_pem(), cert_pem: &server.cert_pem, key_pem: &server.key_pem },
        )
        .unwrap();
        Pki {
            ca: ca.cert_pem().to_string(),
            authority: ca,
            server_cert: server.cert_pem,
            server_key: server.key_pem,
            client_cert: client.cert_pem,
            client_key: client.key_pem,
            dir,
        }
    }

    pub fn provider_dir(&self) -> PathBuf {
        self.dir.path().join("provider")
    }

    /// Issues a new serving certificate for 127.0.0.1 into `<dir>/<name>` (Kubernetes-style
    /// `..data` swap): the first call creates the directory, later calls rotate it.
    pub fn issue_server_dir(&self, name: &str) -> PathBuf {
        let leaf = self.authority.issue(&["127.0.0.1", "localhost"], Usage::Server, Duration::from_secs(3600)).unwrap();
        let dir = self.dir.path().join(name);
        write_tls_dir(&dir, &TlsFiles { ca_pem: &self.ca, cert_pem: &leaf.cert_pem, key_pem: &leaf.key_pem }).unwrap();
        dir
    }

    /// Creates `keyward-provider-tls` in `ns` with the reconciler's client material.
    pub async fn install(&self, client: &Client, ns: &str) {
        let data = [
            ("ca.crt", self.ca.as_bytes()),
            ("tls.crt", self.client_cert.as_bytes()),
            ("tls.key", self.client_key.as_bytes()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), ByteString(v.to_vec())))
        .collect();
        let secret = Secret {
            metadata: kube::api::ObjectMeta { name: Some("keyward-provider-tls".into()), ..Default::default() },
            data: Some(data),
            ..Default::default()
        };
        Api::<Secret>::namespaced(client.clone(), ns).create(&PostParams::default(), &secret).await.unwrap();
    }
}

/// A provider process.
pub struct ProviderProcess {
    pub name: String,
    pub port: u16,
    pub health_port: u16,
    pub process: ChildProcess,
    tls_dir: PathBuf,
    env: Vec<(String, String)>,
}

impl ProviderProcess {
    pub async fn start(binary: &str, tls_dir: PathBuf, port: Option<u16>) -> ProviderProcess {
        ProviderProcess::spawn(binary, tls_dir, port, Vec::new()).await
    }

    /// Starts a provider with extra environment variables (a store endpoint, for example).
    pub async fn start_with_env(binary: &str, tls_dir: PathBuf, env: &[(&str, &str)]) -> ProviderProcess {
        let env: Vec<(String, String)> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        ProviderProcess::spawn(binary, tls_dir, None, env).await
    }

    async fn spawn(binary: &str, tls_dir: PathBuf, port: Option<u16>, env: Vec<(String, String)>) -> ProviderProcess {
        let port = port.unwrap_or_else(free_port);
        let health_port = free_port();
        let mut cmd = Command::new(self::binary(binary));
        cmd.env("KUBECONFIG", control_plane().await.kubeconfig())
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .arg("--health-listen")
            .arg(format!("127.0.0.1:{health_port}"))
            .arg("--tls-dir")
            .arg(&tls_dir)
            .env(keyward_e2e::TENANT_DENIED_NETWORKS_ENV, keyward_e2e::LOCAL_DENIED_NETWORKS)
            .envs(env.iter().map(|(k, v)| (k, v)));
        let mut process = spawn_logged(binary, cmd);
        process.wait_for_log("provider serving", Duration::from_secs(60)).await;
        ProviderProcess { name: binary.to_string(), port, health_port, process, tls_dir, env }
    }

    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Stops the process (SIGTERM).
    pub fn stop(&mut self) {
        self.process.terminate(Duration::from_secs(10));
    }

    /// Starts it again on the same port.
    pub async fn restart(&mut self) {
        self.stop();
        let again =
            ProviderProcess::spawn(&self.name.clone(), self.tls_dir.clone(), Some(self.port), self.env.clone()).await;
        *self = again;
    }

    /// Established TCP connections to the provider's gRPC port (from /proc/net/tcp{,6}).
    pub fn established_connections(&self) -> usize {
        let mut n = 0;
        for file in ["/proc/net/tcp", "/proc/net/tcp6"] {
            let text = std::fs::read_to_string(file).unwrap_or_default();
            for line in text.lines().skip(1) {
                let cols: Vec<&str> = line.split_whitespace().collect();
                if cols.len() < 4 {
                    continue;
                }
                let local_port = cols[1].rsplit(':').next().and_then(|p| u16::from_str_radix(p, 16).ok());
                // State 01 is ESTABLISHED; count the server side of each connection.
                if local_port == Some(self.port) && cols[3] == "01" {
                    n += 1;
                }
            }
        }
        n
    }
}

/// A keyward-webhook process and the webhook configurations registered for it (deleted on
/// drop, so a failing test leaves no webhook behind that would block other tests).
pub struct Webhook {
    pub process: ChildProcess,
    pub port: u16,
    pub health: u16,
    registered: Vec<(String, String)>,
}

impl Webhook {
    /// Starts the webhook with the certificate in `tls_dir` and waits until its caches synced.
    pub async fn start(tls_dir: &std::path::Path) -> Webhook {
        Webhook::start_with(tls_dir, &[]).await
    }

    /// [`Webhook::start`] with extra flags.
    pub async fn start_with(tls_dir: &std::path::Path, extra: &[&str]) -> Webhook {
        let (port, health) = (free_port(), free_port());
        let mut cmd = Command::new(binary("keyward-webhook"));
        cmd.env("KUBECONFIG", control_plane().await.kubeconfig())
            .args(["--listen", &format!("127.0.0.1:{port}"), "--health-listen", &format!("127.0.0.1:{health}")])
            .arg("--tls-dir")
            .arg(tls_dir)
            .args(["--log-format", "text", "--tls-reload-interval", "1s"])
            .args(extra);
        let process = spawn_logged("keyward-webhook", cmd);
        eventually("webhook ready", Duration::from_secs(60), || async {
            let out = Command::new("curl").args(["-sf", &format!("http://127.0.0.1:{health}/readyz")]).output().ok()?;
            out.status.success().then_some(())
        })
        .await;
        Webhook { process, port, health, registered: Vec::new() }
    }

    /// `/readyz`: (HTTP status, body).
    pub fn readyz(&self) -> (u16, String) {
        let out = Command::new("curl")
            .args(["-s", "-w", "\n%{http_code}", &format!("http://127.0.0.1:{}/readyz", self.health)])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
        (code.trim().parse().unwrap_or(0), body.to_string())
    }

    /// Posts an AdmissionReview to `path` directly (not through the API server), trusting the
    /// CA in `ca_file`; returns the decoded answer.
    pub fn review(&self, ca_file: &std::path::Path, path: &str, review: &serde_json::Value) -> serde_json::Value {
        use std::io::Write;
        let mut child = Command::new("curl")
            .args(["-sS", "--cacert"])
            .arg(ca_file)
            .args(["-H", "Content-Type: application/json", "--data-binary", "@-", &format!("{}{path}", self.url())])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(review.to_string().as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("webhook answer is not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
    }

    /// `https://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// Creates a webhook configuration (given as JSON) and remembers it for cleanup.
    pub async fn register(&mut self, client: &Client, config: serde_json::Value) {
        let kind = config["kind"].as_str().unwrap().to_string();
        let name = config["metadata"]["name"].as_str().unwrap().to_string();
        let resource = if kind == "MutatingWebhookConfiguration" {
            kube::api::ApiResource::erase::<k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration>(
                &(),
            )
        } else {
            kube::api::ApiResource::erase::<k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration>(
                &(),
            )
        };
        let api: Api<kube::api::DynamicObject> = Api::all_with(client.clone(), &resource);
        api.patch(&name, &PatchParams::apply("e2e-test").force(), &Patch::Apply(config)).await.unwrap();
        self.registered.push((kind.to_lowercase(), name));
    }
}

impl Drop for Webhook {
    fn drop(&mut self) {
        for (kind, name) in &self.registered {
            let _ = keyward_e2e::kubectl().args(["delete", kind, name, "--ignore-not-found"]).output();
        }
    }
}

/// The hash key file the reconcilers of the tests share (one fixed key, as a release has one).
pub fn hash_key_file() -> &'static std::path::Path {
    static FILE: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    FILE.get_or_init(|| {
        let path = std::env::temp_dir().join("keyward-e2e-hash-key");
        std::fs::write(&path, b"e2e-hash-key-of-the-reconciler-tests").unwrap();
        path
    })
}

/// The label that sends a run's ClusterGenerators through its webhook (they are cluster-scoped:
/// no namespace selector applies to them).
pub const RUN_LABEL: &str = "keyward.dev/webhook-generators-e2e";

/// The validating webhook, as the chart routes generators, for the generator `resources` of
/// namespace `ns` and for ClusterGenerators labelled with [`RUN_LABEL`] `ns`.
pub async fn register_generator_webhook(
    webhook: &mut Webhook,
    client: &Client,
    pki: &Pki,
    ns: &str,
    resources: &[&str],
) {
    use base64::Engine as _;
    let hook = |name: &str, resources: &[&str], scope: &str| {
        let mut hook = json!({
            "name": name,
            "clientConfig": {"url": format!("{}/validate", webhook.url()),
                             "caBundle": base64::engine::general_purpose::STANDARD.encode(&pki.ca)},
            "rules": [{"apiGroups": ["generators.external-secrets.io"], "apiVersions": ["v1alpha1"],
                       "operations": ["CREATE", "UPDATE"], "resources": resources, "scope": scope}],
            "failurePolicy": "Fail", "sideEffects": "None", "admissionReviewVersions": ["v1"], "timeoutSeconds": 10,
        });
        if scope == "Namespaced" {
            hook["namespaceSelector"] = json!({"matchLabels": {"kubernetes.io/metadata.name": ns}});
        } else {
            hook["objectSelector"] = json!({"matchLabels": {RUN_LABEL: ns}});
        }
        hook
    };
    let config = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": format!("keyward-webhook-generators-e2e-{ns}")},
        "webhooks": [hook("namespaced.validate.keyward.dev", resources, "Namespaced"),
                     hook("cluster.validate.keyward.dev", &["clustergenerators"], "Cluster")],
    });
    webhook.register(client, config).await;
}

/// `kubectl apply --dry-run=server` of `doc` in `ns`: whether the API server (admission
/// included) accepted it.
pub fn server_dry_run_accepts(ns: &str, doc: &serde_json::Value) -> bool {
    use std::io::Write;
    let mut child = keyward_e2e::kubectl()
        .args(["apply", "--dry-run=server", "-f", "-", "-n", ns])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(doc.to_string().as_bytes()).unwrap();
    child.wait().unwrap().success()
}

/// A reconciler process scoped to one namespace and controller class.
pub struct Reconciler {
    pub process: ChildProcess,
    pub metrics_port: u16,
}

impl Reconciler {
    pub async fn start(ns: &str, extra: &[&str]) -> Reconciler {
        let mut r = Reconciler::spawn(ns, extra).await;
        r.process.wait_for_log("controllers running", Duration::from_secs(120)).await;
        r
    }

    /// Starts a reconciler that serves SecretStores and ClusterSecretStores through
    /// `providers` (the `spec.provider` key and its process), reached with the provider TLS
    /// Secret of `ns`.
    pub async fn start_with_stores(ns: &str, providers: &[(&str, &ProviderProcess)], extra: &[&str]) -> Reconciler {
        let mut flags: Vec<String> = Vec::new();
        for (name, process) in providers {
            flags.extend(["--store-provider".to_string(), format!("{name}={}", process.address())]);
        }
        flags.extend(["--store-provider-tls-namespace".to_string(), ns.to_string()]);
        let mut args: Vec<&str> = flags.iter().map(String::as_str).collect();
        args.extend_from_slice(extra);
        Reconciler::start(ns, &args).await
    }

    /// Starts a reconciler without waiting for it to lead.
    pub async fn spawn(ns: &str, extra: &[&str]) -> Reconciler {
        Reconciler::spawn_scoped(Some(ns), ns, ns, extra).await
    }

    /// Starts a reconciler that watches every namespace (as the chart installs it), limited to
    /// the objects of controller class `class`, with its Lease in `lease_ns`.
    pub async fn start_cluster_wide(class: &str, lease_ns: &str, extra: &[&str]) -> Reconciler {
        let mut r = Reconciler::spawn_scoped(None, class, lease_ns, extra).await;
        r.process.wait_for_log("controllers running", Duration::from_secs(120)).await;
        r
    }

    async fn spawn_scoped(watch: Option<&str>, class: &str, lease_ns: &str, extra: &[&str]) -> Reconciler {
        let metrics_port = free_port();
        let mut cmd = Command::new(binary("keyward-reconciler"));
        cmd.env("KUBECONFIG", control_plane().await.kubeconfig())
            .env("RUST_LOG", "info,keyward_reconciler=debug,kube_runtime=warn")
            // One hash key for every reconciler of the binary, as a release has: a restarted
            // reconciler finds its Secrets up to date.
            .env("KEYWARD_HASH_KEY_FILE", hash_key_file())
            .args(["--controller-class", class])
            .args(["--lease-namespace", lease_ns, "--lease-name", "keyward-reconciler"])
            .args(["--log-format", "text"]);
        if let Some(ns) = watch {
            cmd.args(["--watch-namespace", ns]);
        }
        // Test defaults, unless `extra` sets the flag itself.
        for (flag, value) in
            [("--provider-check-interval", "3s"), ("--error-backoff", "500ms"), ("--breaker-cooldown", "1s")]
        {
            if !extra.contains(&flag) {
                cmd.args([flag, value]);
            }
        }
        cmd.arg("--health-listen").arg(format!("127.0.0.1:{metrics_port}")).args(extra);
        let process = spawn_logged("keyward-reconciler", cmd);
        Reconciler { process, metrics_port }
    }

    pub async fn metrics(&self) -> String {
        let out = Command::new("curl")
            .args(["-sf", &format!("http://127.0.0.1:{}/metrics", self.metrics_port)])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

/// Polls `f` until it returns `Some` or `timeout` passes (then panics with `what`).
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(start.elapsed() < timeout, "timed out after {timeout:?} waiting for {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Applies a manifest given as JSON (server-side apply as the test).
pub async fn apply<K>(api: &Api<K>, body: serde_json::Value) -> K
where
    K: kube::Resource + Clone + DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let name = body["metadata"]["name"].as_str().unwrap().to_string();
    api.patch(&name, &PatchParams::apply("e2e-test").force(), &Patch::Apply(body))
        .await
        .unwrap_or_else(|e| panic!("apply {name}: {e}"))
}

/// A namespaced Provider for the Fake config `config`, served by this run's reconciler.
pub fn provider(name: &str, ns: &str, address: &str, config: &str) -> serde_json::Value {
    json!({
        "apiVersion": "external-secrets.io/v1",
        "kind": "Provider",
        "metadata": {"name": name, "labels": {CLASS_LABEL: ns}},
        "spec": {"config": {"address": address, "providerRef": {
            "apiVersion": "provider.external-secrets.io/v2alpha1", "kind": "Fake", "name": config}}},
    })
}

/// Lets ServiceAccount `sa_ns/sa` use `verbs` on Secrets in namespace `target`.
pub async fn grant_secrets(client: &Client, target: &str, sa_ns: &str, sa: &str, verbs: &[&str]) {
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    let name = format!("secrets-{sa_ns}-{sa}");
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": name},
        "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": verbs}]});
    apply(&Api::<Role>::namespaced(client.clone(), target), role).await;
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": sa_ns}]});
    apply(&Api::<RoleBinding>::namespaced(client.clone(), target), binding).await;
}

/// A Fake config object.
pub fn fake_config(name: &str, entries: &[(&str, &str)]) -> serde_json::Value {
    let data: Vec<serde_json::Value> = entries.iter().map(|(k, v)| json!({"key": k, "value": v})).collect();
    json!({
        "apiVersion": "provider.external-secrets.io/v2alpha1",
        "kind": "Fake",
        "metadata": {"name": name},
        "spec": {"data": data},
    })
}

/// The value of a Secret key as text.
pub fn value(secret: &Secret, key: &str) -> Option<String> {
    secret.data.as_ref()?.get(key).map(|v| String::from_utf8_lossy(&v.0).into_owned())
}

/// Waits until Secret `name` holds `want` under `key`.
pub async fn wait_for_value(secrets: &Api<Secret>, name: &str, key: &str, want: &str, timeout: Duration) {
    eventually(&format!("{name} holds {key}={want}"), timeout, || async {
        let s = secrets.get_opt(name).await.ok()??;
        (value(&s, key).as_deref() == Some(want)).then_some(())
    })
    .await
}

/// The Ready condition of a status as (status, reason, message).
pub fn ready_of(conditions: &[keyward_crds::Condition]) -> Option<(String, String, String)> {
    conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| (c.status.clone(), c.reason.clone().unwrap_or_default(), c.message.clone().unwrap_or_default()))
}

/// Reads the API server's own metrics: `metric{labels} value` lines of one metric, summed by
/// the values of the labels named in `by`.
pub async fn api_server_metric(
    client: &Client,
    metric: &str,
    by: &[&str],
) -> std::collections::BTreeMap<Vec<String>, f64> {
    let text = client
        .request_text(http::Request::get("/metrics").body(Vec::new()).unwrap())
        .await
        .expect("reading the API server's metrics");
    let mut out = std::collections::BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(metric).and_then(|r| r.strip_prefix('{')) else { continue };
        let Some((labels, value)) = rest.rsplit_once("} ") else { continue };
        let label = |name: &str| {
            labels
                .split(',')
                .find_map(|kv| kv.strip_prefix(&format!("{name}=\"")))
                .map(|v| v.trim_end_matches('"').to_string())
                .unwrap_or_default()
        };
        let key: Vec<String> = by.iter().map(|b| label(b)).collect();
        *out.entry(key).or_insert(0.0) += value.trim().parse::<f64>().unwrap_or(0.0);
    }
    out
}

/// API requests served so far, by (verb, resource).
pub async fn api_requests(client: &Client) -> std::collections::BTreeMap<Vec<String>, f64> {
    api_server_metric(client, "apiserver_request_total", &["verb", "resource"]).await
}

/// Open watches, by resource.
pub async fn api_watches(client: &Client) -> std::collections::BTreeMap<String, f64> {
    api_server_metric(client, "apiserver_longrunning_requests", &["verb", "resource"])
        .await
        .into_iter()
        .filter(|(k, _)| k[0] == "WATCH")
        .map(|(k, v)| (k[1].clone(), v))
        .collect()
}

/// `after - before` per key (keys only in `after` count from zero).
pub fn delta<K: Ord + Clone>(
    before: &std::collections::BTreeMap<K, f64>,
    after: &std::collections::BTreeMap<K, f64>,
) -> std::collections::BTreeMap<K, f64> {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0.0)))
        .filter(|(_, d)| *d != 0.0)
        .collect()
}

/// The resources whose requests count as the reconciler's cost (watches aside).
pub const RECONCILER_RESOURCES: [&str; 6] =
    ["secrets", "externalsecrets", "events", "namespaces", "providers", "configmaps"];

/// The value of one series (`name{labels}`, exactly as exposed) in a metrics text; 0 when absent.
pub fn metric_value(text: &str, series: &str) -> f64 {
    text.lines()
        .find(|l| l.strip_prefix(series).is_some_and(|rest| rest.starts_with(' ')))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

/// The reconciler's successful GetSecret calls, in its metrics text.
pub const GET_SECRET_OK: &str = "grpc_client_requests_total{method=\"GetSecret\",code=\"OK\"}";

/// Creates `n` ExternalSecrets `es-0` … in `ns`, each reading `key` from the Provider `store`
/// into the key `value` of its own Secret, a few requests at a time.
pub async fn create_external_secrets(client: &Client, ns: &str, n: usize, store: &str, key: &str) {
    use futures::StreamExt;
    let ess: Api<keyward_crds::ExternalSecret> = Api::namespaced(client.clone(), ns);
    futures::stream::iter(0..n)
        .for_each_concurrent(16, |i| {
            let ess = ess.clone();
            async move {
                apply(
                    &ess,
                    json!({"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
                           "metadata": {"name": format!("es-{i}"), "labels": {CLASS_LABEL: ns}},
                           "spec": {"refreshInterval": "1h", "secretStoreRef": {"name": store, "kind": "Provider"},
                                    "data": [{"secretKey": "value", "remoteRef": {"key": key}}]}}),
                )
                .await;
            }
        })
        .await;
}

/// What the managed Secrets of `ns` hold under `value`: how many hold `want`, and how many
/// hold nothing there (an emptied Secret).
pub async fn managed_values(client: &Client, ns: &str, want: &str) -> (usize, usize) {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let lp = kube::api::ListParams::default().labels("reconcile.external-secrets.io/managed=true");
    let Ok(list) = secrets.list(&lp).await else { return (0, 0) };
    let holding = list.items.iter().filter(|s| value(s, "value").as_deref() == Some(want)).count();
    let empty = list.items.iter().filter(|s| value(s, "value").is_none_or(|v| v.is_empty())).count();
    (holding, empty)
}

/// ExternalSecrets of `ns` whose Ready condition is `want` (`True` / `False`).
pub async fn count_ready(client: &Client, ns: &str, want: &str) -> usize {
    let ess: Api<keyward_crds::ExternalSecret> = Api::namespaced(client.clone(), ns);
    let Ok(list) = ess.list(&Default::default()).await else { return 0 };
    list.items
        .iter()
        .filter(|es| {
            es.status.as_ref().and_then(|s| ready_of(&s.conditions)).is_some_and(|(status, _, _)| status == want)
        })
        .count()
}

/// Touches every ExternalSecret `es-0` … so each syncs again (`force-sync` annotation).
pub async fn force_sync(client: &Client, ns: &str, n: usize, stamp: &str) {
    use futures::StreamExt;
    let ess: Api<keyward_crds::ExternalSecret> = Api::namespaced(client.clone(), ns);
    futures::stream::iter(0..n)
        .for_each_concurrent(16, |i| {
            let ess = ess.clone();
            async move {
                let patch = json!({"metadata": {"annotations": {"force-sync": stamp}}});
                ess.patch(&format!("es-{i}"), &PatchParams::default(), &Patch::Merge(patch))
                    .await
                    .unwrap_or_else(|e| panic!("touch es-{i}: {e}"));
            }
        })
        .await;
}

/// A Keyward binary: the path in `KEYWARD_<NAME>_BIN` when set (`keyward-provider-fake` reads
/// `KEYWARD_PROVIDER_FAKE_BIN`; benchmarks point these at release builds), else the
/// workspace's debug build.
pub fn binary(name: &str) -> PathBuf {
    let env = format!("{}_BIN", name.to_uppercase().replace('-', "_"));
    std::env::var(env).map(PathBuf::from).unwrap_or_else(|_| workspace_binary(name))
}

/// A `/proc/<pid>/status` figure in MiB (`VmHWM` peak, `VmRSS` now).
pub fn status_mib(pid: u32, field: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
        .unwrap_or(f64::NAN)
}

/// Kubernetes provider configurations in `ns` reading Secret `db` (`user: app`) of `remote`:
/// `good`, with ServiceAccount `reader` allowed to read `remote`, and `broken`, with `nobody`,
/// which is not; a Provider of each name at `address`. The API server is the local control plane;
/// its `server` block (URL and CA) is returned for more configurations.
pub async fn kubernetes_good_and_broken(client: &Client, ns: &str, remote: &str, address: &str) -> serde_json::Value {
    use base64::Engine as _;
    let sas: Api<k8s_openapi::api::core::v1::ServiceAccount> = Api::namespaced(client.clone(), ns);
    for sa in ["reader", "nobody"] {
        apply(&sas, json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": sa}})).await;
    }
    grant_secrets(client, remote, ns, "reader", &["get", "list", "watch"]).await;
    let remote_secrets: Api<Secret> = Api::namespaced(client.clone(), remote);
    apply(
        &remote_secrets,
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db"}, "stringData": {"user": "app"}}),
    )
    .await;
    let ca = std::fs::read(control_plane().await.ca_files().0).unwrap();
    let server = json!({"url": control_plane().await.server_url(),
                        "caBundle": base64::engine::general_purpose::STANDARD.encode(ca)});
    let configs: Api<keyward_provider_kubernetes::api::Kubernetes> = Api::namespaced(client.clone(), ns);
    let providers: Api<keyward_crds::Provider> = Api::namespaced(client.clone(), ns);
    for (name, sa) in [("good", "reader"), ("broken", "nobody")] {
        apply(
            &configs,
            json!({"apiVersion": "provider.external-secrets.io/v2alpha1", "kind": "Kubernetes",
                   "metadata": {"name": name},
                   "spec": {"server": server, "auth": {"serviceAccount": {"name": sa}}, "remoteNamespace": remote}}),
        )
        .await;
        apply(
            &providers,
            json!({"apiVersion": "external-secrets.io/v1", "kind": "Provider",
                   "metadata": {"name": name, "labels": {CLASS_LABEL: ns}},
                   "spec": {"config": {"address": address, "providerRef": {
                       "apiVersion": "provider.external-secrets.io/v2alpha1", "kind": "Kubernetes", "name": name}}}}),
        )
        .await;
    }
    server
}

/// The YAML documents of a file (an upstream example or guide), as JSON; empty documents left out.
pub fn yaml_documents(path: &std::path::Path) -> Vec<serde_json::Value> {
    use serde::Deserialize as _;
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml::Deserializer::from_str(&text)
        .map(|doc| serde_json::to_value(serde_yaml::Value::deserialize(doc).unwrap()).unwrap())
        .filter(|doc| !doc.is_null())
        .collect()
}

/// Waits (up to `timeout`) until the ExternalSecret is not Ready with a message containing `want`.
pub async fn wait_refused(
    ess: &Api<keyward_crds::ExternalSecret>,
    name: &str,
    want: &str,
    timeout: Duration,
) -> String {
    eventually(&format!("{name} refused with {want:?}"), timeout, || async {
        let es = ess.get(name).await.ok()?;
        let (status, _, message) = ready_of(&es.status?.conditions)?;
        (status == "False" && message.contains(want)).then_some(message)
    })
    .await
}

/// An ExternalSecret whose only `dataFrom` entry generates with the `kind` generator `generator`
/// (refreshed hourly, so a test sees one generation).
pub fn generator_external_secret(name: &str, ns: &str, kind: &str, generator: &str) -> serde_json::Value {
    json!({
        "apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
        "metadata": {"name": name, "labels": {CLASS_LABEL: ns}},
        "spec": {
            "refreshInterval": "1h",
            "target": {"name": name},
            "dataFrom": [{"sourceRef": {"generatorRef": {
                "apiVersion": "generators.external-secrets.io/v1alpha1", "kind": kind, "name": generator}}}],
        },
    })
}

/// Applies a manifest with `kubectl apply` into `ns`, as a user does; it must be accepted.
pub fn kubectl_apply(ns: &str, doc: &serde_json::Value) {
    keyward_e2e::accepts_in(ns, &serde_json::to_string(doc).unwrap());
}

/// Deletes the run's ClusterGenerators when the test ends, passed or not (they are
/// cluster-scoped: no temporary namespace takes them along).
pub struct ClusterGenerators(pub Vec<String>);

impl Drop for ClusterGenerators {
    fn drop(&mut self) {
        for name in &self.0 {
            let _ = keyward_e2e::kubectl()
                .args(["delete", "clustergenerators.generators.external-secrets.io", name, "--ignore-not-found"])
                .output();
        }
    }
}

/// The documents of one of upstream's generator examples (`tests/fixtures/upstream-generators`).
pub fn upstream_generator_example(file: &str) -> Vec<serde_json::Value> {
    yaml_documents(&keyward_e2e::repo_root().join("reconciler/tests/fixtures/upstream-generators").join(file))
}
