//! Sharded reconciler Pods as a user installs them: `reconciler.replicas: 3` with
//! `reconciler.sharding.enabled`, ExternalSecrets in several namespaces synced through the Fake
//! provider's Pod, one reconciler Pod deleted, and a rotation made right after the deletion
//! reaching every Secret while its share moves. Then every replica's `shard_members` and
//! `shard_owned_namespaces`, read through the API server's Pod proxy, say the three current
//! Pods split every namespace of the cluster between them by the rendezvous hash, once each.

use std::path::Path;
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use keyward_chart_tests::installed::{apply, eventually, image, kubectl};
use keyward_chart_tests::{helm, run};
use keyward_e2e::node_cluster;
use keyward_reconciler::shard::owner;

use super::{NS, RELEASE, describe, helm_install, output, pods, turn};

const NAMESPACES: usize = 6;
const PER_NAMESPACE: usize = 3;
const RECONCILERS: &str = "app.kubernetes.io/component=reconciler";

const VALUES: &str = "reconciler:
  replicas: 3
  sharding:
    enabled: true
providers:
  fake:
    enabled: true
";

fn tenant(i: usize) -> String {
    format!("kw-shard-{i}")
}

/// Tenant namespace `ns`'s Fake SecretStore serving `value`, and its ExternalSecrets.
fn tenant_objects(ns: &str, value: &str) -> String {
    let mut manifest = format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}}}\n---\n\
         apiVersion: external-secrets.io/v1\nkind: SecretStore\nmetadata: {{name: fake, namespace: {ns}}}\n\
         spec: {{provider: {{fake: {{data: [{{key: k, value: {value}}}]}}}}}}\n"
    );
    for i in 0..PER_NAMESPACE {
        manifest.push_str(&format!(
            "---\napiVersion: external-secrets.io/v1\nkind: ExternalSecret\nmetadata: {{name: es-{i}, namespace: {ns}}}\n\
             spec:\n  refreshInterval: 1h\n  secretStoreRef: {{name: fake, kind: SecretStore}}\n  target: {{name: es-{i}}}\n\
             \x20 data: [{{secretKey: value, remoteRef: {{key: k}}}}]\n"
        ));
    }
    manifest
}

/// Whether every target Secret holds `value`.
fn all_hold(kc: &Path, value: &str) -> bool {
    (0..NAMESPACES).all(|n| {
        let got = output(kc, &["get", "secrets", "-n", &tenant(n), "-o", "jsonpath={.items[*].data.value}"]);
        let decoded: Vec<Vec<u8>> = got.split_whitespace().filter_map(|b| BASE64.decode(b).ok()).collect();
        decoded.len() >= PER_NAMESPACE
            && decoded.iter().filter(|v| v.as_slice() == value.as_bytes()).count() == PER_NAMESPACE
    })
}

/// The SecretStores serve `value` and every ExternalSecret is asked to sync again now.
fn rotate(kc: &Path, value: &str) {
    for n in 0..NAMESPACES {
        apply(kc, &tenant_objects(&tenant(n), value));
        run({
            let mut c = kubectl(kc);
            c.args(["annotate", "externalsecrets", "--all", "-n", &tenant(n), "--overwrite"])
                .arg(format!("force-sync={value}"));
            c
        });
    }
}

/// A gauge of one reconciler Pod's `/metrics`, through the API server's Pod proxy.
fn gauge(kc: &Path, pod: &str, name: &str) -> Option<usize> {
    let text = output(kc, &["get", "--raw", &format!("/api/v1/namespaces/{NS}/pods/{pod}:8080/proxy/metrics")]);
    text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

/// The reconciler Pods once there are three and each sees the three as members and
/// owns what the rendezvous hash gives it of every namespace, the shares covering them once.
fn settled_shares(kc: &Path) -> Option<Vec<String>> {
    let mut members = pods(kc, NS, RECONCILERS);
    members.sort();
    // A deleted Pod is listed until it stopped: the shares are looked at once it is gone.
    if members.len() != 3 {
        return None;
    }
    let namespaces = output(kc, &["get", "namespaces", "-o", "jsonpath={.items[*].metadata.name}"]);
    let namespaces: Vec<&str> = namespaces.split_whitespace().collect();
    let mut covered = 0;
    for pod in &members {
        let want = namespaces.iter().filter(|ns| owner(ns, &members) == Some(pod.as_str())).count();
        if gauge(kc, pod, "shard_members")? != 3 || gauge(kc, pod, "shard_owned_namespaces")? != want {
            return None;
        }
        covered += want;
    }
    (covered == namespaces.len()).then_some(members)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_replicas_sync_every_namespace_and_survive_a_pod_deletion() {
    let _serial = turn().await;
    let cluster = node_cluster().await;
    let kc = cluster.kubeconfig();
    image(cluster);
    let dir = tempfile::tempdir().expect("tempdir");
    let values_file = dir.path().join("values.yaml");
    std::fs::write(&values_file, VALUES).expect("values");
    let started = Instant::now();
    helm_install(kc, &values_file);
    assert_eq!(pods(kc, NS, RECONCILERS).len(), 3, "three reconciler Pods: {}", describe(kc, NS));

    // First sync over the namespaces, through the Fake provider's Pod.
    for n in 0..NAMESPACES {
        apply(kc, &tenant_objects(&tenant(n), "v1"));
    }
    let wait = Duration::from_secs(120);
    let state = || output(kc, &["get", "externalsecrets", "-A", "-o", "wide"]) + &describe(kc, NS);
    eventually("every Secret synced", wait, || all_hold(kc, "v1").then_some(()), state).await;
    let before = eventually("the shares settle on the three Pods", wait, || settled_shares(kc), state).await;

    // One Pod is deleted; a rotation made at once reaches every Secret while its share moves.
    let gone = before[0].clone();
    run({
        let mut c = kubectl(kc);
        c.args(["delete", "pod", &gone, "-n", NS, "--wait=false"]);
        c
    });
    let deleted = Instant::now();
    rotate(kc, "v2");
    eventually("every Secret rotated after the deletion", wait, || all_hold(kc, "v2").then_some(()), state).await;
    eprintln!("rotation after the Pod deletion reached every Secret in {:?}", deleted.elapsed());
    let after = eventually("the shares settle on the three current Pods", wait, || settled_shares(kc), state).await;
    assert!(!after.contains(&gone), "the deleted Pod {gone} is no member: {after:?}");
    // And the new split works: another rotation reaches every Secret.
    rotate(kc, "v3");
    eventually("every Secret rotated by the new split", wait, || all_hold(kc, "v3").then_some(()), state).await;
    eprintln!("sharded install, first sync to second rotation: {:?}", started.elapsed());

    for n in 0..NAMESPACES {
        output(kc, &["delete", "namespace", &tenant(n), "--wait=false"]);
    }
    let mut uninstall = helm(kc);
    uninstall.args(["uninstall", RELEASE, "-n", NS, "--wait", "--timeout", "3m"]);
    run(uninstall);
}
