//! The certificate loop against the real local control plane: `keyward-certs run` creates the
//! CA and leaf Secrets, injects `caBundle` into webhook configurations, rotates a leaf close to
//! expiry, and walks a CA rotation (stage, promote, trim) during which every observed leaf keeps
//! verifying against the `caBundle` the API server would use.

use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Secret;
use keyward_certs::bundle::{split_bundle, subject_alt_names, verifies_against_bundle};
use keyward_e2e::{ChildProcess, control_plane, spawn_logged, with_temp_namespace, workspace_binary};
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client};
use time::OffsetDateTime;

fn text(secret: &Secret, key: &str) -> String {
    let bytes = secret.data.as_ref().and_then(|d| d.get(key)).map(|b| b.0.clone()).unwrap_or_default();
    String::from_utf8(bytes).expect("utf-8 PEM")
}

/// A webhook configuration pair that never intercepts anything (its namespace selector matches no
/// namespace), so the loop has something real to inject into.
async fn webhook_configurations(client: &Client, name: &str) {
    let webhook = |kind: &str| {
        serde_json::json!({
            "name": format!("{kind}.certs-test.keyward.dev"),
            "clientConfig": {"url": "https://127.0.0.1:1/never"},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}],
            "namespaceSelector": {"matchLabels": {"keyward.dev/certs-test": "never-matches"}},
            "failurePolicy": "Ignore",
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
        })
    };
    let v: ValidatingWebhookConfiguration = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name}, "webhooks": [webhook("validate")]
    }))
    .expect("validating configuration");
    let m: MutatingWebhookConfiguration = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name}, "webhooks": [webhook("mutate")]
    }))
    .expect("mutating configuration");
    Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .create(&PostParams::default(), &v)
        .await
        .expect("create");
    Api::<MutatingWebhookConfiguration>::all(client.clone()).create(&PostParams::default(), &m).await.expect("create");
}

async fn delete_webhook_configurations(client: &Client, name: &str) {
    let _ = Api::<ValidatingWebhookConfiguration>::all(client.clone()).delete(name, &DeleteParams::default()).await;
    let _ = Api::<MutatingWebhookConfiguration>::all(client.clone()).delete(name, &DeleteParams::default()).await;
}

async fn ca_bundles(client: &Client, name: &str) -> (String, String) {
    let v = Api::<ValidatingWebhookConfiguration>::all(client.clone()).get(name).await.expect("validating");
    let m = Api::<MutatingWebhookConfiguration>::all(client.clone()).get(name).await.expect("mutating");
    let v = v.webhooks.unwrap_or_default().remove(0).client_config.ca_bundle.map(|b| b.0).unwrap_or_default();
    let m = m.webhooks.unwrap_or_default().remove(0).client_config.ca_bundle.map(|b| b.0).unwrap_or_default();
    (String::from_utf8(v).expect("utf-8"), String::from_utf8(m).expect("utf-8"))
}

async fn start_loop(ns: &str, configuration: &str, extra: &[&str]) -> ChildProcess {
    let kubeconfig = control_plane().await.kubeconfig().to_path_buf();
    let mut cmd = Command::new(workspace_binary("keyward-certs"));
    // Each loop its own health port: tests (and other suites) run side by side.
    let health = format!("127.0.0.1:{}", keyward_e2e::free_port());
    cmd.env("KUBECONFIG", kubeconfig)
        .args(["run", "--namespace", ns, "--webhook-service", "keyward-webhook"])
        .args(["--health-listen", &health])
        .args(["--provider-service", "keyward-provider-fake", "--webhook-configuration", configuration])
        .args(["--interval", "500ms", "--lease-duration", "3s", "--log-format", "text"])
        .args(extra);
    spawn_logged("keyward-certs", cmd)
}

async fn wait_for_secret(secrets: &Api<Secret>, name: &str, loop_: &mut ChildProcess) -> Secret {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(30) {
        if let Some(s) = secrets.get_opt(name).await.expect("read Secret") {
            return s;
        }
        assert!(loop_.is_running(), "keyward-certs exited:\n{}", loop_.log());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("Secret {name} did not appear:\n{}", loop_.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_loop_creates_secrets_injects_ca_bundle_and_rotates_a_leaf_while_trust_holds() {
    with_temp_namespace(&[], |client, ns| async move {
        let configuration = format!("{ns}-certs");
        webhook_configurations(&client, &configuration).await;
        let mut certs = start_loop(&ns, &configuration, &["--leaf-validity", "14s", "--leaf-renew-before", "7s"]).await;
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);

        let ca = wait_for_secret(&secrets, "keyward-ca", &mut certs).await;
        let webhook = wait_for_secret(&secrets, "keyward-webhook-tls", &mut certs).await;
        let provider = wait_for_secret(&secrets, "keyward-provider-fake-tls", &mut certs).await;
        let client_tls = wait_for_secret(&secrets, "keyward-provider-tls", &mut certs).await;
        let bundle = text(&ca, "ca.crt");
        assert_eq!(split_bundle(&bundle).len(), 1, "a fresh CA bundle holds one CA");
        assert_eq!(webhook.type_.as_deref(), Some("kubernetes.io/tls"));
        let now = OffsetDateTime::now_utc();
        for s in [&webhook, &provider, &client_tls] {
            assert_eq!(text(s, "ca.crt"), bundle, "every leaf Secret carries the bundle");
            assert!(verifies_against_bundle(&text(s, "tls.crt"), &bundle, now), "leaf verifies against the bundle");
        }
        let names = subject_alt_names(&text(&webhook, "tls.crt"));
        for want in [
            format!("keyward-webhook.{ns}.svc"),
            "keyward-webhook".to_string(),
            format!("keyward-webhook.{ns}.svc.cluster.local"),
        ] {
            assert!(names.contains(&want), "webhook SANs {names:?} lack {want}");
        }
        assert_eq!(subject_alt_names(&text(&client_tls, "tls.crt")), ["keyward-reconciler"]);

        // caBundle injected into both kinds.
        let start = Instant::now();
        loop {
            let (v, m) = ca_bundles(&client, &configuration).await;
            if v == bundle && m == bundle {
                break;
            }
            assert!(start.elapsed() < Duration::from_secs(10), "caBundle not injected:\n{}", certs.log());
            tokio::time::sleep(Duration::from_millis(200)).await;
        }

        // Exactly one replica holds the Lease.
        let lease = Api::<Lease>::namespaced(client.clone(), &ns).get("keyward-certs").await.expect("lease");
        assert!(lease.spec.and_then(|s| s.holder_identity).is_some_and(|h| !h.is_empty()));

        // The leaf is re-issued once it has less than 7 s left; the old one is still valid then,
        // and both verify against the bundle in the Secret and in the webhook configuration.
        let old_leaf = text(&webhook, "tls.crt");
        let start = Instant::now();
        let new = loop {
            let s = secrets.get("keyward-webhook-tls").await.expect("webhook secret");
            if text(&s, "tls.crt") != old_leaf {
                break s;
            }
            assert!(start.elapsed() < Duration::from_secs(20), "leaf was not rotated:\n{}", certs.log());
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        let now = OffsetDateTime::now_utc();
        let (injected, _) = ca_bundles(&client, &configuration).await;
        assert!(verifies_against_bundle(&old_leaf, &injected, now), "the old leaf is still trusted during the overlap");
        assert!(verifies_against_bundle(&text(&new, "tls.crt"), &injected, now), "the new leaf is trusted");
        assert_ne!(text(&new, "tls.key"), text(&webhook, "tls.key"), "rotation makes a new key");
        assert!(certs.log().contains("leaf Secret written"), "the loop logs its writes");
        assert!(certs.is_running());
        certs.terminate(Duration::from_secs(5)).expect("keyward-certs stops on SIGTERM");
        delete_webhook_configurations(&client, &configuration).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ca_rotation_keeps_every_leaf_trusted_by_the_injected_ca_bundle() {
    with_temp_namespace(&[], |client, ns| async move {
        let configuration = format!("{ns}-certs");
        webhook_configurations(&client, &configuration).await;
        // CA for 40 s, staged at 25 s left, 4 s overlaps: stage ~15 s in, promote ~19 s, trim ~23 s.
        let mut certs = start_loop(
            &ns,
            &configuration,
            &[
                "--ca-validity",
                "40s",
                "--ca-renew-before",
                "25s",
                "--ca-overlap",
                "4s",
                "--leaf-validity",
                "30s",
                "--leaf-renew-before",
                "5s",
            ],
        )
        .await;
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
        let first_ca = text(&wait_for_secret(&secrets, "keyward-ca", &mut certs).await, "tls.crt");
        wait_for_secret(&secrets, "keyward-webhook-tls", &mut certs).await;

        let mut saw_two_cas = false;
        let mut promoted = false;
        let mut leaves_seen = std::collections::BTreeSet::new();
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(45) {
            // What a TLS client of the webhook sees: the serving leaf, checked against the
            // caBundle the API server holds right now.
            let leaf = text(&secrets.get("keyward-webhook-tls").await.expect("leaf"), "tls.crt");
            let (injected, mutating) = ca_bundles(&client, &configuration).await;
            let now = OffsetDateTime::now_utc();
            assert!(
                verifies_against_bundle(&leaf, &injected, now) || verifies_against_bundle(&leaf, &mutating, now),
                "trust broke: the serving leaf does not verify against the injected caBundle\n{}",
                certs.log()
            );
            leaves_seen.insert(leaf);
            let ca = secrets.get("keyward-ca").await.expect("ca");
            if split_bundle(&text(&ca, "ca.crt")).len() == 2 {
                saw_two_cas = true;
            }
            if text(&ca, "tls.crt") != first_ca {
                promoted = true;
                if split_bundle(&text(&ca, "ca.crt")).len() == 1 && split_bundle(&injected).len() == 1 {
                    break;
                }
            }
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
        assert!(saw_two_cas, "the bundle never held old and new CA:\n{}", certs.log());
        assert!(promoted, "the next CA was never promoted:\n{}", certs.log());
        let ca = secrets.get("keyward-ca").await.expect("ca");
        assert_eq!(split_bundle(&text(&ca, "ca.crt")).len(), 1, "the old CA was trimmed:\n{}", certs.log());
        assert!(leaves_seen.len() >= 2, "the leaf was re-issued by the new CA");
        let leaf = text(&secrets.get("keyward-webhook-tls").await.expect("leaf"), "tls.crt");
        assert!(keyward_certs::bundle::signed_by(&leaf, &text(&ca, "tls.crt")), "the leaf is signed by the new CA");
        certs.terminate(Duration::from_secs(5)).expect("keyward-certs stops on SIGTERM");
        delete_webhook_configurations(&client, &configuration).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_lease_holder_acts() {
    with_temp_namespace(&[], |client, ns| async move {
        let lease = |id: &str| {
            keyward_process::lease::LeaseLock::new(client.clone(), &ns, "keyward-certs", id, Duration::from_secs(30))
        };
        let (a, b) = (lease("replica-a"), lease("replica-b"));
        assert!(a.try_acquire_or_renew().await.expect("a"), "the first replica takes the lease");
        assert!(!b.try_acquire_or_renew().await.expect("b"), "a second replica waits");
        assert!(a.try_acquire_or_renew().await.expect("a renews"));
        a.release().await.expect("release");
        assert!(b.try_acquire_or_renew().await.expect("b"), "released: the other replica takes over");
        assert!(!a.try_acquire_or_renew().await.expect("a"));
    })
    .await;
}
