//! End to end: the real kube-apiserver calls keyward-webhook (a local process) through
//! ValidatingWebhookConfiguration and MutatingWebhookConfiguration with `clientConfig.url`, and
//! `kubectl apply` sees the decisions.
//!
//! Webhook configurations are cluster-wide, so they are scoped to this run: namespaced kinds by
//! a namespace label, ClusterProviders by an object label. Everything runs in one test because
//! the last step stops the webhook.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations, ValidatingWebhook,
    ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use keyward_certs::{CertificateAuthority, TlsFiles, Usage, write_tls_dir};
use keyward_e2e::{accepts_in, control_plane, free_port, kubectl, rejects_in, spawn_logged, with_temp_namespace};
use kube::Api;
use kube::api::{DeleteParams, ObjectMeta, PostParams};

use crate::common;

const RUN_LABEL: &str = "keyward.dev/webhook-e2e";

/// Runs kubectl with `manifest` on stdin; returns whether it succeeded and what it printed.
fn kubectl_with_stdin(args: &[&str], manifest: &str) -> (bool, String) {
    use std::io::Write;
    let mut child = kubectl()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl");
    child.stdin.take().expect("stdin").write_all(manifest.as_bytes()).expect("write");
    let out = child.wait_with_output().expect("kubectl");
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

fn apply(ns: &str, manifest: &str) -> (bool, String) {
    kubectl_with_stdin(&["apply", "-n", ns, "-f", "-"], manifest)
}

fn delete(ns: &str, manifest: &str) {
    let (ok, out) = kubectl_with_stdin(&["delete", "-n", ns, "--ignore-not-found", "--wait", "-f", "-"], manifest);
    assert!(ok, "kubectl delete failed: {out}");
}

/// Applies until the outcome holds (watches reach the webhook's caches a moment after a change).
/// An apply that was admitted with the wrong outcome is deleted again, so that the next try is
/// a fresh CREATE through the webhooks rather than a no-op "unchanged".
async fn eventually(ns: &str, manifest: &str, what: &str, check: impl Fn(bool, &str) -> bool) -> String {
    let start = Instant::now();
    loop {
        let (ok, out) = apply(ns, manifest);
        if check(ok, &out) {
            return out;
        }
        if ok {
            delete(ns, manifest);
        }
        assert!(start.elapsed() < Duration::from_secs(20), "{what} did not happen; last kubectl output:\n{out}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().expect("run");
    assert!(out.status.success(), "{cmd:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

async fn http_get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut tcp = tokio::net::TcpStream::connect(addr).await.ok()?;
    tcp.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes()).await.ok()?;
    let mut out = String::new();
    tcp.read_to_string(&mut out).await.ok()?;
    let status = out.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, out))
}

/// Deletes the webhook configurations and the run's ClusterProviders, also when a test panics.
struct Cleanup {
    run_id: String,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let name = format!("keyward-webhook-e2e-{}", self.run_id);
        for kind in ["validatingwebhookconfiguration", "mutatingwebhookconfiguration"] {
            let _ = kubectl().args(["delete", kind, &name, "--ignore-not-found", "--wait=false"]).output();
        }
        let selector = format!("{RUN_LABEL}={}", self.run_id);
        for kind in ["clusterproviders", "clustersecretstores"] {
            let _ = kubectl().args(["delete", kind, "-l", &selector, "--ignore-not-found"]).output();
        }
    }
}

fn rule(group: &str, version: &str, resources: &[&str]) -> RuleWithOperations {
    RuleWithOperations {
        api_groups: Some(vec![group.into()]),
        api_versions: Some(vec![version.into()]),
        operations: Some(vec!["CREATE".into(), "UPDATE".into(), "DELETE".into()]),
        resources: Some(resources.iter().map(|r| r.to_string()).collect()),
        scope: None,
    }
}

fn selector(run_id: &str) -> LabelSelector {
    LabelSelector { match_labels: Some([(RUN_LABEL.to_string(), run_id.to_string())].into()), match_expressions: None }
}

/// (name suffix, rules, namespaced?) of the two webhooks per configuration.
fn webhooks() -> [(&'static str, Vec<RuleWithOperations>, bool); 2] {
    [
        (
            "namespaced",
            vec![
                rule("external-secrets.io", "v1", &["externalsecrets", "providers", "secretstores"]),
                rule("external-secrets.io", "v1alpha1", &["pushsecrets"]),
                rule("provider.external-secrets.io", "v2alpha1", &["kubernetes", "fakes", "vaults", "secretsmanagers"]),
            ],
            true,
        ),
        ("cluster", vec![rule("external-secrets.io", "v1", &["clusterproviders", "clustersecretstores"])], false),
    ]
}

async fn register(client: &kube::Client, run_id: &str, port: u16, ca_pem: &str) {
    let name = format!("keyward-webhook-e2e-{run_id}");
    let client_config = |path: &str| WebhookClientConfig {
        url: Some(format!("https://127.0.0.1:{port}{path}")),
        ca_bundle: Some(ByteString(ca_pem.as_bytes().to_vec())),
        service: None,
    };
    let validating = ValidatingWebhookConfiguration {
        metadata: ObjectMeta { name: Some(name.clone()), ..Default::default() },
        webhooks: Some(
            webhooks()
                .into_iter()
                .map(|(suffix, rules, namespaced)| ValidatingWebhook {
                    name: format!("{suffix}.validate.keyward.dev"),
                    client_config: client_config("/validate"),
                    rules: Some(rules),
                    failure_policy: Some("Fail".into()),
                    side_effects: "None".into(),
                    admission_review_versions: vec!["v1".into()],
                    timeout_seconds: Some(10),
                    namespace_selector: namespaced.then(|| selector(run_id)),
                    object_selector: (!namespaced).then(|| selector(run_id)),
                    ..Default::default()
                })
                .collect(),
        ),
    };
    let mutating = MutatingWebhookConfiguration {
        metadata: ObjectMeta { name: Some(name), ..Default::default() },
        webhooks: Some(
            webhooks()
                .into_iter()
                .map(|(suffix, rules, namespaced)| MutatingWebhook {
                    name: format!("{suffix}.mutate.keyward.dev"),
                    client_config: client_config("/mutate"),
                    rules: Some(rules),
                    failure_policy: Some("Fail".into()),
                    side_effects: "None".into(),
                    admission_review_versions: vec!["v1".into()],
                    timeout_seconds: Some(10),
                    reinvocation_policy: Some("Never".into()),
                    namespace_selector: namespaced.then(|| selector(run_id)),
                    object_selector: (!namespaced).then(|| selector(run_id)),
                    ..Default::default()
                })
                .collect(),
        ),
    };
    let pp = PostParams::default();
    Api::<ValidatingWebhookConfiguration>::all(client.clone()).create(&pp, &validating).await.expect("validating");
    Api::<MutatingWebhookConfiguration>::all(client.clone()).create(&pp, &mutating).await.expect("mutating");
}

fn write_certs(dir: &Path) -> CertificateAuthority {
    let day = Duration::from_secs(86_400);
    let ca = CertificateAuthority::generate("keyward-webhook-e2e-ca", day).expect("ca");
    let leaf = ca.issue(&["127.0.0.1", "localhost"], Usage::Server, day).expect("leaf");
    write_tls_dir(dir, &TlsFiles { ca_pem: ca.cert_pem(), cert_pem: &leaf.cert_pem, key_pem: &leaf.key_pem })
        .expect("tls dir");
    ca
}

fn cluster_provider(run_id: &str, name: &str, spec: &str) -> String {
    format!(
        "apiVersion: external-secrets.io/v1\nkind: ClusterProvider\nmetadata:\n  name: {name}\n  labels:\n    {RUN_LABEL}: \"{run_id}\"\nspec:\n{spec}"
    )
}

/// A ClusterSecretStore of the fake provider that admits the namespaces `namespaces`.
fn cluster_secret_store(run_id: &str, name: &str, namespaces: &[&str]) -> String {
    format!(
        "apiVersion: external-secrets.io/v1\nkind: ClusterSecretStore\nmetadata:\n  name: {name}\n  labels:\n    {RUN_LABEL}: \"{run_id}\"\nspec:\n  provider:\n    fake:\n      data:\n        - key: db\n          value: s3cret\n  conditions:\n    - namespaces: [{}]\n",
        namespaces.join(", ")
    )
}

fn external_secret(name: &str, store: &str, store_kind: &str) -> String {
    format!(
        r#"apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata:
  name: {name}
spec:
  secretStoreRef:
    name: {store}
    kind: {store_kind}
  data:
    - secretKey: password
      remoteRef:
        key: db
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admission_through_the_api_server() {
    let _guard = common::shared().await;
    let cp = control_plane().await;
    let client = cp.client().await;
    let run_id = format!("{:08x}", rand::random::<u32>());
    let _cleanup = Cleanup { run_id: run_id.clone() };

    let tls = tempfile::tempdir().expect("tmp");
    let ca = write_certs(tls.path());
    let (port, health_port) = (free_port(), free_port());
    let health: SocketAddr = format!("127.0.0.1:{health_port}").parse().expect("addr");
    let mut cmd = Command::new(keyward_e2e::workspace_binary("keyward-webhook"));
    cmd.args([
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--health-listen",
        &health.to_string(),
        "--log-format",
        "text",
    ])
    .arg("--tls-dir")
    .arg(tls.path())
    .env("KUBECONFIG", cp.kubeconfig());
    let mut webhook = spawn_logged("keyward-webhook", cmd);

    let start = Instant::now();
    loop {
        if let Some((200, _)) = http_get(health, "/readyz").await {
            break;
        }
        assert!(webhook.is_running(), "keyward-webhook exited:\n{}", webhook.log());
        assert!(start.elapsed() < Duration::from_secs(60), "keyward-webhook not ready:\n{}", webhook.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    register(&client, &run_id, port, ca.cert_pem()).await;

    let shared = format!("kw-shared-{run_id}");
    let labels = [(RUN_LABEL, run_id.as_str()), ("env", "dev")];
    let inner_run_id = run_id.clone();
    with_temp_namespace(&labels, |_client, ns| async move {
        let run_id = inner_run_id;
        // A ClusterProvider that admits env=prod, one other name, and names starting with ops-.
        let shared_spec = "  config:\n    address: keyward-provider-fake.keyward.svc:8443\n    providerRef:\n      apiVersion: provider.external-secrets.io/v2alpha1\n      kind: Fake\n      name: data\n      namespace: keyward\n  conditions:\n    - namespaceSelector:\n        matchLabels:\n          env: prod\n    - namespaces: [somewhere-else]\n    - namespaceRegexes: [\"^ops-\"]\n".to_string();
        accepts_in(&ns, &cluster_provider(&run_id, &shared, &shared_spec));

        // 1. The namespace is refused, naming the ClusterProvider and the namespace, and nothing
        //    the requester may not read (the other namespaces and labels the conditions name).
        let es = external_secret("db", &shared, "ClusterProvider");
        let out = eventually(&ns, &es, "denial of the ExternalSecret", |ok, out| {
            !ok && out.contains("denied the request")
        })
        .await;
        for needle in [
            format!("ClusterProvider \"{shared}\" does not allow namespace \"{ns}\""),
            "spec.secretStoreRef".to_string(),
        ] {
            assert!(out.contains(&needle), "{needle:?} not in:\n{out}");
        }
        for hidden in ["somewhere-else", "env=prod", "env=dev", "^ops-", "conditions["] {
            assert!(!out.contains(hidden), "{hidden:?} revealed in:\n{out}");
        }

        // 2. The same for a per-entry store reference and for a PushSecret.
        let per_entry = format!(
            "apiVersion: external-secrets.io/v1\nkind: ExternalSecret\nmetadata:\n  name: per-entry\nspec:\n  data:\n    - secretKey: a\n      remoteRef:\n        key: a\n      sourceRef:\n        storeRef:\n          name: {shared}\n          kind: ClusterProvider\n"
        );
        rejects_in(&ns, &per_entry, "spec.data[0].sourceRef.storeRef: ClusterProvider");
        let push = format!(
            "apiVersion: external-secrets.io/v1alpha1\nkind: PushSecret\nmetadata:\n  name: push\nspec:\n  secretStoreRefs:\n    - name: {shared}\n      kind: ClusterProvider\n  selector:\n    secret:\n      name: source\n  data:\n    - match:\n        secretKey: k\n        remoteRef:\n          remoteKey: r\n"
        );
        rejects_in(&ns, &push, &format!("spec.secretStoreRefs[0]: ClusterProvider \"{shared}\" does not allow"));

        // 2b. A ClusterSecretStore's conditions are enforced the same way, from the webhook's
        //     cache of ClusterSecretStores: refused while it does not admit the namespace, with
        //     the same fix-it message; admitted once it does.
        let css = format!("kw-css-{run_id}");
        accepts_in(&ns, &cluster_secret_store(&run_id, &css, &["somewhere-else"]));
        let via_css = external_secret("via-css", &css, "ClusterSecretStore");
        let out = eventually(&ns, &via_css, "denial through the ClusterSecretStore", |ok, out| {
            !ok && out.contains("denied the request")
        })
        .await;
        for needle in [
            format!("spec.secretStoreRef: ClusterSecretStore \"{css}\" does not allow namespace \"{ns}\""),
            format!("Use a ClusterSecretStore whose spec.conditions admit namespace \"{ns}\""),
            "or use a SecretStore in this namespace".to_string(),
        ] {
            assert!(out.contains(&needle), "{needle:?} not in:\n{out}");
        }
        assert!(!out.contains("somewhere-else"), "the conditions are the operator's:\n{out}");
        let (ok, out) = kubectl_with_stdin(&["create", "-n", &ns, "-f", "-"], &via_css);
        assert!(!ok && out.contains(&format!("ClusterSecretStore \"{css}\" does not allow namespace")), "{out}");
        accepts_in(&ns, &cluster_secret_store(&run_id, &css, &["somewhere-else", &ns]));
        let out = eventually(&ns, &via_css, "acceptance once the ClusterSecretStore admits the namespace", |ok, _| ok)
            .await;
        assert!(!out.contains("Warning"), "{out}");
        run(kubectl().args(["delete", "externalsecret", "via-css", "-n", &ns]));

        // 2c. The stores themselves: a SecretStore is its namespace owner's, so naming a
        //     ServiceAccount of another namespace is a policy denial pointing to a
        //     ClusterSecretStore; a ClusterSecretStore is the operator's and may, but its fields
        //     are checked (a condition's regex must compile).
        let foreign_sa = "apiVersion: external-secrets.io/v1\nkind: SecretStore\nmetadata:\n  name: reach\nspec:\n  provider:\n    kubernetes:\n      remoteNamespace: default\n      auth:\n        serviceAccount:\n          name: admin\n          namespace: kube-system\n";
        let out = rejects_in(&ns, foreign_sa, "spec.provider.kubernetes.auth.serviceAccount.namespace: \"kube-system\" names");
        assert!(out.contains("SecretStore \"reach\" is not allowed"), "{out}");
        assert!(out.contains("through a ClusterSecretStore"), "{out}");
        accepts_in(&ns, &foreign_sa.replace("kube-system", &ns));
        let css_regex = cluster_secret_store(&run_id, &format!("kw-css-regex-{run_id}"), &["a"])
            .replace("- namespaces: [a]", "- namespaceRegexes: [\"(\"]");
        rejects_in(&ns, &css_regex, "spec.conditions[0].namespaceRegexes[0]");

        // 3. Field rules: ProviderNamespace without a namespace, a bad regex, two auth methods.
        let no_ns = "  config:\n    address: p.keyward.svc:8443\n    providerRef:\n      apiVersion: provider.external-secrets.io/v2alpha1\n      kind: Fake\n      name: data\n";
        rejects_in(
            &ns,
            &cluster_provider(&run_id, &format!("kw-nons-{run_id}"), no_ns),
            "spec.config.providerRef.namespace: required with authenticationScope ProviderNamespace",
        );
        let bad_regex = format!("{no_ns}      namespace: keyward\n  conditions:\n    - namespaceRegexes: [\"(\"]\n");
        rejects_in(
            &ns,
            &cluster_provider(&run_id, &format!("kw-regex-{run_id}"), &bad_regex),
            "spec.conditions[0].namespaceRegexes[0]",
        );
        let two_auths = "apiVersion: provider.external-secrets.io/v2alpha1\nkind: Kubernetes\nmetadata:\n  name: remote\nspec:\n  remoteNamespace: default\n  auth:\n    serviceAccount:\n      name: reader\n    token:\n      bearerToken:\n        name: t\n        key: token\n";
        rejects_in(&ns, two_auths, "spec.auth: token and serviceAccount are set");
        let bad_address = "apiVersion: external-secrets.io/v1\nkind: Provider\nmetadata:\n  name: bad\nspec:\n  config:\n    address: no-port-here\n    providerRef:\n      apiVersion: provider.external-secrets.io/v2alpha1\n      kind: Fake\n      name: data\n";
        rejects_in(&ns, bad_address, "spec.config.address");

        // 4. Missing stores: allowed, with a warning kubectl shows.
        let out = accepts_in(&ns, &external_secret("early", &format!("kw-missing-{run_id}"), "ClusterProvider"));
        assert!(out.contains("Warning: spec.secretStoreRef: ClusterProvider"), "{out}");
        assert!(out.contains("does not exist yet"), "{out}");

        // 4b. An omitted kind means a SecretStore, as upstream: nothing to warn about while no
        //     Provider of that name exists; the object keeps the kind as written (omitted).
        let no_kind = "apiVersion: external-secrets.io/v1\nkind: ExternalSecret\nmetadata:\n  name: no-kind\nspec:\n  secretStoreRef:\n    name: upstream-store\n  data:\n    - secretKey: password\n      remoteRef:\n        key: db\n";
        let out = accepts_in(&ns, no_kind);
        assert!(!out.contains("no kind given"), "{out}");
        let stored = run(kubectl().args(["get", "externalsecret", "no-kind", "-n", &ns, "-o", "jsonpath={.spec.secretStoreRef}"]));
        assert!(!stored.contains("kind"), "{stored}");
        run(kubectl().args(["delete", "externalsecret", "no-kind", "-n", &ns]));

        // 5. A valid Provider and an ExternalSecret using it; the mutating webhook fills defaults.
        let provider = "apiVersion: external-secrets.io/v1\nkind: Provider\nmetadata:\n  name: local\nspec:\n  config:\n    address: keyward-provider-fake.keyward.svc:8443\n    providerRef:\n      kind: Fake\n      name: data\n";
        accepts_in(&ns, provider);
        let stored = run(kubectl().args(["get", "provider", "local", "-n", &ns, "-o", "jsonpath={.spec.config.providerRef.apiVersion}"]));
        assert_eq!(stored, "provider.external-secrets.io/v2alpha1");
        let local_es = "apiVersion: external-secrets.io/v1\nkind: ExternalSecret\nmetadata:\n  name: local\nspec:\n  refreshInterval: \"0\"\n  secretStoreRef:\n    name: local\n    kind: Provider\n  data:\n    - secretKey: password\n      remoteRef:\n        key: db\n";
        let out = eventually(&ns, local_es, "a clean accept once the Provider is cached", |ok, out| {
            ok && !out.contains("Warning")
        })
        .await;
        assert!(out.contains("externalsecret.external-secrets.io/local"), "{out}");
        let stored = run(kubectl().args([
            "get",
            "externalsecret",
            "local",
            "-n",
            &ns,
            "-o",
            "jsonpath={.spec.target.name}/{.spec.refreshPolicy}/{.spec.secretStoreRef.kind}",
        ]));
        assert_eq!(stored, "local/OnChange/Provider");
        // Without the kind it means SecretStore "local", as upstream: with only a Provider of that
        // name, admission says so; the kind stays omitted.
        let out = accepts_in(&ns, &local_es.replace("    kind: Provider\n", ""));
        assert!(
            out.contains("Warning: spec.secretStoreRef: no kind given, which means SecretStore \"local\", as upstream")
                && out.contains("set kind: Provider"),
            "{out}"
        );
        let stored = run(kubectl().args(["get", "externalsecret", "local", "-n", &ns, "-o", "jsonpath={.spec.secretStoreRef}"]));
        assert!(!stored.contains("kind"), "{stored}");

        // A PushSecret store kind is never defaulted.
        let push_local = "apiVersion: external-secrets.io/v1alpha1\nkind: PushSecret\nmetadata:\n  name: push-local\nspec:\n  secretStoreRefs:\n    - name: local\n  selector:\n    secret:\n      name: source\n  data:\n    - match:\n        secretKey: k\n        remoteRef:\n          remoteKey: r\n";
        accepts_in(&ns, push_local);
        let stored = run(kubectl().args(["get", "pushsecret", "push-local", "-n", &ns, "-o", "jsonpath={.spec.secretStoreRefs[0]}"]));
        assert!(!stored.contains("kind"), "{stored}");

        // 6. The namespace's labels change: the next apply reflects it.
        run(kubectl().args(["label", "namespace", &ns, "env=prod", "--overwrite"]));
        eventually(&ns, &es, "acceptance after the label change", |ok, _| ok).await;

        // 7. Narrowing the ClusterProvider warns about the ExternalSecret that loses access. The
        //    ExternalSecret reaches the webhook's index through a watch, so until the warning
        //    shows, the narrowing is undone and tried again.
        let narrowed = shared_spec.replace("env: prod", "env: staging");
        let expected = format!("1 object in 1 namespace lose access with these conditions: {ns} (1 ExternalSecret)");
        let start = Instant::now();
        loop {
            let out = accepts_in(&ns, &cluster_provider(&run_id, &shared, &narrowed));
            if out.contains(&expected) {
                break;
            }
            assert!(start.elapsed() < Duration::from_secs(20), "no warning about the lost access:\n{out}");
            accepts_in(&ns, &cluster_provider(&run_id, &shared, &shared_spec));
            tokio::time::sleep(Duration::from_millis(250)).await;
        }

        // 8. DELETE is always allowed, even for an object the policy now refuses; deleting a
        //    ClusterProvider in use warns about its users.
        let out = kubectl().args(["delete", "clusterprovider", &shared]).output().expect("kubectl delete");
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "{text}");
        assert!(text.contains(&format!("ClusterProvider \"{shared}\" is still used by 1 object in 1 namespace")), "{text}");
        run(kubectl().args(["delete", "externalsecret", "db", "-n", &ns]));

        // 9. Told to stop, the webhook reports not ready at once but keeps answering reviews for
        //    the shutdown delay, so a Service can drop it before its port closes.
        webhook.signal_terminate();
        let start = Instant::now();
        while !matches!(http_get(health, "/readyz").await, Some((503, _))) {
            assert!(start.elapsed() < Duration::from_secs(2), "still ready after SIGTERM:\n{}", webhook.log());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let (ok, out) = apply(&ns, &external_secret("draining", "local", "Provider"));
        assert!(ok, "a review during the shutdown delay must be answered:\n{out}");
        // Then, with the webhook stopped, our kinds fail closed with the API server's error.
        let status = webhook.terminate(Duration::from_secs(20));
        assert!(status.is_some_and(|s| s.success()), "graceful exit expected:\n{}", webhook.log());
        let (ok, out) = apply(&ns, &external_secret("after", "local", "Provider"));
        assert!(!ok, "accepted without the webhook:\n{out}");
        assert!(out.contains("failed calling webhook"), "{out}");
        assert!(webhook.log().contains("admission review"), "reviews are logged");

        // Leave nothing that would block the namespace's deletion.
        drop(Cleanup { run_id: run_id.clone() });
    })
    .await;

    let leftover = Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .get_opt(&format!("keyward-webhook-e2e-{run_id}"))
        .await
        .expect("get");
    if leftover.is_some() {
        let _ = Api::<ValidatingWebhookConfiguration>::all(client)
            .delete(&format!("keyward-webhook-e2e-{run_id}"), &DeleteParams::default())
            .await;
    }
}
