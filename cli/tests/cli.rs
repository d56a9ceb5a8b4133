//! The built `keyward` binary against the local control plane (Keyward's CRDs installed, no
//! Keyward controller running): what it prints and how it exits.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use jiff::Timestamp;
use keyward_e2e::{control_plane, repo_root, with_temp_namespace};
use serde_json::{Value, json};

/// Runs `keyward` with `args` against the test control plane, `stdin` on its standard input.
async fn keyward_with_stdin(args: &[&str], stdin: &str) -> Output {
    let cp = control_plane().await;
    let mut child = Command::new(env!("CARGO_BIN_EXE_keyward"))
        .args(args)
        .env("KUBECONFIG", cp.kubeconfig())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run keyward");
    child.stdin.take().expect("stdin").write_all(stdin.as_bytes()).expect("write stdin");
    child.wait_with_output().expect("keyward output")
}

async fn keyward(args: &[&str]) -> Output {
    keyward_with_stdin(args, "").await
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn describe(out: &Output) -> String {
    format!("exit {:?}\nstdout:\n{}\nstderr:\n{}", out.status.code(), stdout(out), String::from_utf8_lossy(&out.stderr))
}

/// `kubectl apply` of `manifest` in `ns` (server-side, so status can be set the same way).
async fn apply(ns: &str, manifest: &str) {
    let mut child = control_plane()
        .await
        .kubectl()
        .args(["apply", "-n", ns, "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl");
    child.stdin.take().expect("stdin").write_all(manifest.as_bytes()).expect("write");
    let out = child.wait_with_output().expect("kubectl");
    assert!(out.status.success(), "kubectl apply failed: {}", String::from_utf8_lossy(&out.stderr));
}

/// Sets `status` on an object, as the reconciler would.
async fn set_status(ns: &str, resource: &str, name: &str, status: Value) {
    let out = control_plane()
        .await
        .kubectl()
        .args(["patch", "-n", ns, resource, name, "--subresource=status", "--type=merge", "-p"])
        .arg(json!({ "status": status }).to_string())
        .output()
        .expect("kubectl");
    assert!(out.status.success(), "kubectl patch status failed: {}", String::from_utf8_lossy(&out.stderr));
}

fn json_of(out: &Output) -> Value {
    assert!(out.status.success(), "{}", describe(out));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", describe(out)))
}

const STORE: &str = "apiVersion: external-secrets.io/v1
kind: SecretStore
metadata: {name: fake}
spec:
  provider:
    fake:
      data: [{key: db, value: hunter2}]
";

fn external_secret(name: &str, store: &str) -> String {
    format!(
        "apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {{name: {name}}}
spec:
  refreshInterval: 1h
  secretStoreRef: {{name: {store}, kind: SecretStore}}
  data: [{{secretKey: password, remoteRef: {{key: db}}}}]
"
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn explain_says_whether_the_store_exists_and_what_went_wrong() {
    with_temp_namespace(&[], |_, ns| async move {
        apply(&ns, &external_secret("orphan", "nowhere")).await;
        let out = keyward(&["explain", "es/orphan", "-n", &ns]).await;
        assert!(out.status.success(), "{}", describe(&out));
        let text = stdout(&out);
        assert!(text.contains(&format!("ExternalSecret {ns}/orphan")), "{text}");
        assert!(text.contains("spec.secretStoreRef -> SecretStore nowhere: NOT FOUND"), "{text}");
        assert!(text.contains("Admission: accepted"), "{text}");
        assert!(text.contains("Next refresh: now (its target Secret is missing)"), "{text}");

        apply(&ns, STORE).await;
        let ready = json!([{"type": "Ready", "status": "True", "reason": "Valid", "message": "store validated",
                            "lastTransitionTime": "2026-12-05T10:00:00Z"}]);
        set_status(&ns, "secretstore", "fake", json!({ "conditions": ready })).await;
        apply(&ns, &external_secret("db", "fake")).await;
        let failed = json!([{"type": "Ready", "status": "False", "reason": "SecretSyncedError",
                             "message": "provider error: key \"db\" not found",
                             "lastTransitionTime": "2026-12-05T10:00:00Z"}]);
        set_status(&ns, "externalsecret", "db", json!({ "conditions": failed })).await;
        let event = json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "db.failed", "namespace": ns},
            "involvedObject": {"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret", "name": "db", "namespace": ns},
            "type": "Warning", "reason": "SecretSyncedError", "message": "provider error: key \"db\" not found",
            "count": 3, "lastTimestamp": "2026-12-05T10:00:00Z",
        });
        apply(&ns, &event.to_string()).await;

        let report = json_of(&keyward(&["explain", "externalsecret/db", "-n", &ns, "-o", "json"]).await);
        let store = &report["stores"][0];
        assert_eq!((store["kind"].as_str(), store["name"].as_str()), (Some("SecretStore"), Some("fake")), "{report}");
        assert_eq!(store["exists"], true, "{report}");
        assert_eq!(store["ready"]["status"], "True", "{report}");
        assert_eq!(report["admission"]["allowed"], true, "{report}");
        assert_eq!(report["lastError"], "provider error: key \"db\" not found", "{report}");
        assert_eq!(report["events"][0]["reason"], "SecretSyncedError", "{report}");
        assert_eq!(report["events"][0]["count"], 3, "{report}");
        assert_eq!(report["nextRefresh"]["when"], "now", "{report}");

        let text = stdout(&keyward(&["explain", "es/db", "-n", &ns]).await);
        assert!(text.contains("spec.secretStoreRef -> SecretStore fake: exists, Ready=True Valid: store validated"), "{text}");
        assert!(text.contains("Last error: provider error"), "{text}");
        assert!(text.contains("Warning SecretSyncedError (x3)"), "{text}");

        let missing = keyward(&["explain", "es/absent", "-n", &ns]).await;
        assert_eq!(missing.status.code(), Some(2), "{}", describe(&missing));
        assert!(String::from_utf8_lossy(&missing.stderr).contains("not found"), "{}", describe(&missing));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sync_sets_the_force_sync_annotation_to_now() {
    with_temp_namespace(&[], |_, ns| async move {
        apply(&ns, &external_secret("db", "fake")).await;
        let before = Timestamp::now();
        let out = keyward(&["sync", "es/db", "-n", &ns]).await;
        assert!(out.status.success(), "{}", describe(&out));
        let got = control_plane()
            .await
            .kubectl()
            .args(["get", "-n", &ns, "externalsecret", "db", "-o", "jsonpath={.metadata.annotations.force-sync}"])
            .output()
            .expect("kubectl");
        let stamp: Timestamp = String::from_utf8_lossy(&got.stdout).trim().parse().expect("an RFC 3339 time");
        assert!(stamp >= before.checked_sub(jiff::SignedDuration::from_secs(1)).unwrap(), "{stamp} before {before}");
        assert!(stdout(&out).contains("annotation force-sync="), "{}", describe(&out));

        // Cluster-scoped: no namespace, named after the test's namespace to be unique.
        let ces = format!(
            "apiVersion: external-secrets.io/v1\nkind: ClusterExternalSecret\nmetadata: {{name: {ns}}}\n\
             spec:\n  namespaces: [{ns}]\n  externalSecretSpec:\n    secretStoreRef: {{name: fake, kind: SecretStore}}\n"
        );
        apply(&ns, &ces).await;
        let out = keyward(&["sync", &format!("ces/{ns}")]).await;
        assert!(out.status.success(), "{}", describe(&out));
        let got = control_plane()
            .await
            .kubectl()
            .args(["get", "clusterexternalsecret", &ns, "-o", "jsonpath={.metadata.annotations.force-sync}"])
            .output()
            .expect("kubectl");
        let _ = control_plane().await.kubectl().args(["delete", "clusterexternalsecret", &ns]).output();
        let stamp: Timestamp = String::from_utf8_lossy(&got.stdout).trim().parse().expect("an RFC 3339 time");
        assert!(stamp >= before.checked_sub(jiff::SignedDuration::from_secs(1)).unwrap(), "{stamp} before {before}");

        let wrong = keyward(&["sync", "secret/db", "-n", &ns]).await;
        assert_eq!(wrong.status.code(), Some(2), "{}", describe(&wrong));
    })
    .await;
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write");
    path.display().to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn render_prints_the_secret_the_reconciler_would_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let manifest = write(
        dir.path(),
        "es.yaml",
        "apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {name: db, namespace: apps}
spec:
  secretStoreRef: {name: vault, kind: ClusterSecretStore}
  target:
    name: db-conn
    template:
      type: kubernetes.io/basic-auth
      metadata:
        annotations: {owner: '{{ .team | upper }}'}
      data:
        username: '{{ .user }}'
        password: '{{ .password }}'
        url: 'postgres://{{ .user }}:{{ .password | urlquery }}@db:5432/app'
  data:
  - {secretKey: user, remoteRef: {key: db, property: user}}
  - {secretKey: password, remoteRef: {key: db, property: password}}
",
    );
    let data = write(dir.path(), "data.yaml", "user: app\npassword: 'p@ss word'\nteam: payments\n");
    let out = keyward(&["render", "-f", &manifest, "--data", &data]).await;
    assert!(out.status.success(), "{}", describe(&out));
    let mut secret: Value = serde_yaml::from_slice(&out.stdout).expect("YAML");
    let hash = secret["metadata"]["annotations"]
        .as_object_mut()
        .and_then(|a| a.remove("reconcile.external-secrets.io/data-hash"))
        .expect("data hash annotation");
    assert_eq!(hash.as_str().map(str::len), Some(32), "{hash}");
    use base64::Engine;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let expected = json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/basic-auth",
        "metadata": {
            "name": "db-conn",
            "namespace": "apps",
            "labels": {"reconcile.external-secrets.io/managed": "true"},
            "annotations": {"owner": "PAYMENTS"},
        },
        "data": {
            "username": b64("app"),
            "password": b64("p@ss word"),
            "url": b64("postgres://app:p%40ss+word@db:5432/app"),
        },
    });
    assert_eq!(secret, expected, "{}", describe(&out));

    let broken = write(dir.path(), "broken.yaml", "user: app\n");
    let out = keyward(&["render", "-f", &manifest, "--data", &broken]).await;
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("template error") && err.contains("password"), "{}", describe(&out));
}

#[tokio::test(flavor = "multi_thread")]
async fn check_refuses_bad_manifests_and_accepts_good_ones() {
    let examples = repo_root().join("examples");
    let example = |n: &str| examples.join(n).display().to_string();
    // The examples' ClusterProvider is a template (`envsubst` fills in the address).
    let cluster_provider = std::fs::read_to_string(examples.join("02-clusterprovider.yaml"))
        .expect("example")
        .replace("${PROVIDER_ADDRESS}", "keyward-provider-kubernetes.keyward.svc:8443");
    let args = |last: &str| vec!["check".to_string(), example("00-namespaces.yaml"), "-".into(), example(last)];
    let good = args("03-externalsecret-allowed.yaml");
    let good: Vec<&str> = good.iter().map(String::as_str).collect();
    let out = keyward_with_stdin(&good, &cluster_provider).await;
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(stdout(&out).contains("<stdin>: ClusterProvider shared-kubernetes: ok"), "{}", describe(&out));
    assert!(stdout(&out).contains("ExternalSecret team-a/database: ok"), "{}", describe(&out));

    let bad = args("04-externalsecret-denied.yaml");
    let bad: Vec<&str> = bad.iter().map(String::as_str).collect();
    let out = keyward_with_stdin(&bad, &cluster_provider).await;
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let text = stdout(&out);
    assert!(
        text.contains(
            "ExternalSecret team-b/database: refused: ExternalSecret \"database\" is not allowed: \
                       spec.secretStoreRef: ClusterProvider \"shared-kubernetes\" does not allow namespace \"team-b\""
        ),
        "{text}"
    );

    // Upstream-style manifests: a Vault SecretStore and an ExternalSecret with dataFrom, and the
    // same with the mistakes the webhook refuses.
    let dir = tempfile::tempdir().expect("tempdir");
    let upstream = write(
        dir.path(),
        "upstream.yaml",
        "apiVersion: external-secrets.io/v1
kind: SecretStore
metadata: {name: vault-backend}
spec:
  provider:
    vault:
      server: https://vault.example.com:8200
      path: secret
      version: v2
      auth:
        tokenSecretRef: {name: vault-token, key: token}
---
apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {name: app}
spec:
  refreshInterval: 15m
  secretStoreRef: {name: vault-backend, kind: SecretStore}
  target: {name: app, creationPolicy: Owner}
  dataFrom:
  - extract: {key: app/config}
",
    );
    let out = keyward(&["check", "-n", "apps", &upstream, "-o", "json"]).await;
    let results = json_of(&out);
    assert_eq!(results.as_array().map(Vec::len), Some(2), "{results}");
    assert!(results.as_array().into_iter().flatten().all(|r| r["allowed"] == true), "{results}");
    assert_eq!(results[1]["namespace"], "apps", "{results}");

    let broken = write(
        dir.path(),
        "broken.yaml",
        "apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {name: app}
spec:
  refreshInterval: every day
  secretStoreRef: {name: vault-backend, kind: SecretStore}
  dataFrom:
  - find: {name: {regexp: '(unclosed'}}
",
    );
    let out = keyward(&["check", &broken]).await;
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let text = stdout(&out);
    assert!(text.contains("refused: ExternalSecret \"app\" is invalid: "), "{text}");
    assert!(text.contains("spec.refreshInterval") && text.contains("spec.dataFrom[0].find.name.regexp"), "{text}");

    let unreadable = keyward(&["check", "/nonexistent/manifest.yaml"]).await;
    assert_eq!(unreadable.status.code(), Some(2), "{}", describe(&unreadable));
}

#[tokio::test(flavor = "multi_thread")]
async fn migrate_lists_stores_keyward_does_not_serve() {
    with_temp_namespace(&[], |_, ns| async move {
        apply(&ns, STORE).await;
        apply(
            &ns,
            "apiVersion: external-secrets.io/v1
kind: SecretStore
metadata: {name: alibaba}
spec:
  provider:
    alibaba: {regionID: cn-hangzhou}
",
        )
        .await;
        apply(
            &ns,
            "apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {name: generated}
spec:
  refreshInterval: 1h
  target: {name: generated}
  dataFrom:
  - sourceRef:
      generatorRef: {apiVersion: generators.external-secrets.io/v1alpha1, kind: Password, name: pw}
  - sourceRef:
      generatorRef: {apiVersion: generators.external-secrets.io/v1alpha1, kind: QuayAccessToken, name: quay}
",
        )
        .await;
        // An upstream manifest leaves the kind out: a SecretStore.
        apply(&ns, &external_secret("api-key", "alibaba").replace(", kind: SecretStore", "")).await;
        let explained = stdout(&keyward(&["explain", "es/api-key", "-n", &ns]).await);
        assert!(
            explained.contains(
                "spec.secretStoreRef -> SecretStore alibaba (no kind given: a SecretStore, as upstream): exists, NOT SERVED: \
                 spec.provider.alibaba is not served"
            ),
            "{explained}"
        );

        let out = keyward(&["migrate"]).await;
        assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
        let text = stdout(&out);
        assert!(
            text.contains(&format!("SecretStore {ns}/alibaba: alibaba: NOT SERVED: spec.provider.alibaba is not served")),
            "{text}"
        );
        assert!(text.contains(&format!("SecretStore {ns}/fake: fake: served by Keyward's fake provider")), "{text}");
        // Password is served; QuayAccessToken is not.
        assert!(
            text.contains(&format!(
                "ExternalSecret {ns}/generated: spec.dataFrom[1].sourceRef.generatorRef (QuayAccessToken): \
                 generator kind \"QuayAccessToken\" is not served"
            )),
            "{text}"
        );
        assert!(!text.contains(&format!("ExternalSecret {ns}/generated: spec.dataFrom[0]")), "{text}");
        assert!(text.contains("docs/migrating.md"), "{text}");

        let survey = json_of_any(&keyward(&["migrate", "-o", "json"]).await);
        let alibaba = survey["stores"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|s| s["name"] == "alibaba" && s["namespace"] == ns.as_str())
            .cloned()
            .unwrap_or_default();
        assert_eq!(alibaba["provider"], json!(["alibaba"]), "{survey}");
        assert!(alibaba["notServed"].is_string(), "{survey}");
    })
    .await;
}

/// JSON output of a command that may exit 1 (it found something).
fn json_of_any(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", describe(out)))
}

/// `keyward migrate --values`: offline (no cluster configured), an upstream values file in,
/// Keyward's values out, exit 1 and a comment for what does not carry over.
#[test]
fn migrate_values_translates_an_upstream_values_file() {
    let migrate = |file: &Path| {
        Command::new(env!("CARGO_BIN_EXE_keyward"))
            .args(["migrate", "--values"])
            .arg(file)
            .env("KUBECONFIG", "/nonexistent")
            .output()
            .expect("run keyward")
    };
    let custom = migrate(&repo_root().join("charts/tests/upstream/customized.yaml"));
    assert_eq!(custom.status.code(), Some(0), "{}", describe(&custom));
    let values: Value = serde_yaml::from_str(&stdout(&custom)).expect("a values file");
    assert_eq!(values["reconciler"]["replicas"], 2);
    assert_eq!(values["reconciler"]["concurrency"], 5);
    assert_eq!(values["reconciler"]["leaderElection"], true);
    assert_eq!(values["webhook"]["replicas"], 3);
    assert_eq!(values["certs"]["interval"], "10m");
    assert_eq!(values["metrics"]["serviceMonitor"]["additionalLabels"]["release"], "kube-prometheus-stack");
    assert_eq!(values["extraObjects"][0]["metadata"]["name"], "eso-extra");
    assert!(values.get("replicaCount").is_none(), "{values}");

    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("values.yaml");
    std::fs::write(
        &file,
        "replicaCount: 2\nextraArgs: {enable-flood-gate: true, concurrent: 3}\nvault: {enableTokenCache: true}\n",
    )
    .expect("write");
    let flagged = migrate(&file);
    assert_eq!(flagged.status.code(), Some(1), "{}", describe(&flagged));
    let text = stdout(&flagged);
    assert!(
        text.contains(
            "# NOT CARRIED OVER: extraArgs.enable-flood-gate: --enable-flood-gate: keyward-reconciler has no such flag"
        ),
        "{text}"
    );
    assert!(text.contains("# NOT CARRIED OVER: vault.enableTokenCache: no equivalent in Keyward"), "{text}");
    let values: Value = serde_yaml::from_str(&text).expect("a values file");
    assert_eq!(values, json!({"reconciler": {"replicas": 2, "extraArgs": {"concurrency": 3}}}));
}
