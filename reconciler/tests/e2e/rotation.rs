//! End to end: serving certificates rotated on disk while Keyward runs (the webhook's and the
//! provider's, as the certificate loop or cert-manager would rotate them) cause no failed
//! admission and no failed provider call. The API server keeps calling the webhook and the
//! reconciler keeps syncing through the provider across the switch, with no restart.

use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use keyward_crds::{ExternalSecret, Provider};
use keyward_e2e::with_temp_namespace;
use keyward_provider_fake::api::Fake;
use kube::Api;
use serde_json::json;

use crate::support::*;

const RUN_LABEL: &str = "keyward.dev/rotation-e2e";

fn external_secret(ns: &str, generation: usize) -> serde_json::Value {
    json!({
        "apiVersion": "external-secrets.io/v1",
        "kind": "ExternalSecret",
        "metadata": {"name": "app", "labels": {CLASS_LABEL: ns}, "annotations": {"touch": generation.to_string()}},
        "spec": {
            "refreshInterval": "1s",
            "secretStoreRef": {"name": "fake", "kind": "Provider"},
            "data": [{"secretKey": "value", "remoteRef": {"key": "db"}}],
        },
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn rotating_serving_certificates_fails_no_admission_and_no_provider_call() {
    // Alone: an admission every 250 ms for 20 s, more than 40 of them required.
    let _turn = exclusive().await;
    let run_id = format!("{:x}", std::process::id());
    let run_label = run_id.clone();
    with_temp_namespace(&[(RUN_LABEL, run_label.as_str())], |client, ns| async move {
        let pki = Pki::new();
        pki.install(&client, &ns).await;
        let provider_dir = pki.issue_server_dir("provider");
        let fake = ProviderProcess::start("keyward-provider-fake", provider_dir, None).await;
        apply(&Api::<Fake>::namespaced(client.clone(), &ns), fake_config("data", &[("db", "v1")])).await;
        apply(&Api::<Provider>::namespaced(client.clone(), &ns), provider("fake", &ns, &fake.address(), "data")).await;
        let reconciler = Reconciler::start(&ns, &["--pool-max-lifetime", "2s"]).await;

        let mut webhook = Webhook::start(&pki.issue_server_dir("webhook")).await;
        let config = json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": format!("keyward-rotation-e2e-{run_id}")},
            "webhooks": [{
                "name": "validate.keyward.dev",
                "clientConfig": {"url": format!("{}/validate", webhook.url()), "caBundle": BASE64.encode(&pki.ca)},
                "rules": [{"apiGroups": ["external-secrets.io"], "apiVersions": ["*"],
                           "operations": ["CREATE", "UPDATE"], "resources": ["externalsecrets"]}],
                "namespaceSelector": {"matchLabels": {RUN_LABEL: run_id}},
                "failurePolicy": "Fail",
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
            }],
        });
        webhook.register(&client, config).await;

        let ess: Api<ExternalSecret> = Api::namespaced(client.clone(), &ns);
        apply(&ess, external_secret(&ns, 0)).await;
        eventually("app synced", Duration::from_secs(60), || async {
            let es = ess.get("app").await.ok()?;
            (ready_of(&es.status?.conditions)?.0 == "True").then_some(())
        })
        .await;
        let served = |what: &str| {
            let log = webhook.process.log();
            log.matches(what).count()
        };
        let reviews_before = served("decision");

        // 20 s of traffic: an admission every 250 ms (each a webhook call), a provider call
        // every second per refresh, and connections recycled every 2 s. Both serving
        // certificates are rotated twice on the way.
        let start = Instant::now();
        let mut applied = 0;
        let mut rotations = 0;
        while start.elapsed() < Duration::from_secs(20) {
            applied += 1;
            let body = external_secret(&ns, applied);
            let result = ess
                .patch("app", &kube::api::PatchParams::apply("e2e-test").force(), &kube::api::Patch::Apply(body))
                .await;
            assert!(result.is_ok(), "admission failed during rotation: {:?}", result.err());
            let es = ess.get("app").await.unwrap();
            let (status, reason, message) = ready_of(&es.status.unwrap().conditions).unwrap();
            assert_eq!(status, "True", "a provider call failed during rotation: {reason}: {message}");
            if start.elapsed() > Duration::from_secs(5 + 7 * rotations) && rotations < 2 {
                pki.issue_server_dir("webhook");
                pki.issue_server_dir("provider");
                rotations += 1;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        assert_eq!(rotations, 2);
        assert!(applied > 40, "only {applied} admissions in 20 s");
        assert!(served("decision") > reviews_before, "the webhook answered the applies");
        // Both processes picked the new certificates up while running (no restart).
        assert_eq!(webhook.process.log().matches("reloaded TLS certificates").count(), 2, "webhook reloads");
        assert_eq!(fake.process.log().matches("reloaded TLS certificates").count(), 2, "provider reloads");
        let log = reconciler.process.log();
        assert!(!log.contains("SecretSyncedError"), "a sync failed during rotation:\n{log}");
    })
    .await;
}
