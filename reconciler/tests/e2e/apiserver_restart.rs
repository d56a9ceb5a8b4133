//! The control plane goes away under a running system: this test binary's own kube-apiserver
//! and etcd are stopped for longer than the reconciler's Lease, then started again with the
//! same data. Nothing is lost or emptied, no Keyward process exits, the webhook answers reviews
//! from its caches during the outage and says in `/readyz` that they are unconfirmed, the
//! reconciler retakes its Lease and reconciles again, and the API server calls the webhook again.
//! It runs alone (`exclusive`): it stops the control plane every other test of the binary uses.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Secret, ServiceAccount};
use k8s_openapi::jiff::Timestamp;
use keyward_crds::{ClusterProvider, ExternalSecret, Provider};
use keyward_e2e::{control_plane, with_temp_namespace};
use keyward_provider_fake::api::Fake;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::json;

use crate::support::*;

const N: usize = 50;
/// Longer than the Lease below, so the leader has to step down and lead again.
const OUTAGE: Duration = Duration::from_secs(15);

/// An ExternalSecret in `ns` using the ClusterProvider `store`.
fn external_secret_on(name: &str, ns: &str, store: &str) -> serde_json::Value {
    json!({"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
           "metadata": {"name": name, "namespace": ns, "labels": {CLASS_LABEL: ns}},
           "spec": {"secretStoreRef": {"name": store, "kind": "ClusterProvider"},
                    "data": [{"secretKey": "k", "remoteRef": {"key": "db"}}]}})
}

/// The stopped control plane processes, in the order they start again (etcd first). They are
/// started by [`Outage::end`], or when the test fails before it: the tests after this one in the
/// binary use the same control plane.
struct Outage(Vec<keyward_e2e::Stopped>);

impl Outage {
    fn end(&mut self) {
        for stopped in self.0.drain(..) {
            stopped.start();
        }
    }
}

impl Drop for Outage {
    fn drop(&mut self) {
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.end())).is_err() {
            eprintln!("the control plane could not be started again: the tests after this one will fail");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_api_server_and_etcd_restart_loses_nothing_and_every_process_carries_on() {
    // Alone: it stops the API server and etcd every test uses.
    let _turn = exclusive().await;
    with_temp_namespace(&[], |client, ns| async move {
        let pki = Pki::new();
        pki.install(&client, &ns).await;
        let ca_file = pki.dir.path().join("ca.pem");
        std::fs::write(&ca_file, &pki.ca).unwrap();
        let mut fake = ProviderProcess::start("keyward-provider-fake", pki.provider_dir(), None).await;
        let fakes: Api<Fake> = Api::namespaced(client.clone(), &ns);
        apply(&fakes, fake_config("cfg", &[("db", "v1")])).await;
        apply(&Api::<Provider>::namespaced(client.clone(), &ns), provider("fake", &ns, &fake.address(), "cfg")).await;
        // A ClusterProvider this namespace may not use: the webhook denies it from its caches.
        let denied = format!("{ns}-elsewhere");
        let cps: Api<ClusterProvider> = Api::all(client.clone());
        apply(
            &cps,
            json!({"apiVersion": "external-secrets.io/v1", "kind": "ClusterProvider",
                   "metadata": {"name": denied, "labels": {CLASS_LABEL: ns}},
                   "spec": {"config": {"address": fake.address(), "providerRef": {
                        "apiVersion": "provider.external-secrets.io/v2alpha1", "kind": "Fake", "name": "cfg"}},
                            "conditions": [{"namespaces": ["nowhere"]}]}}),
        )
        .await;

        let mut webhook = Webhook::start(&pki.issue_server_dir("webhook")).await;
        webhook
            .register(
                &client,
                json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
                       "metadata": {"name": format!("keyward-restart-{ns}")},
                       "webhooks": [{"name": "validate.keyward.dev",
                           "clientConfig": {"url": format!("{}/validate", webhook.url()), "caBundle": BASE64.encode(&pki.ca)},
                           "rules": [{"apiGroups": ["external-secrets.io"], "apiVersions": ["v1"],
                                      "operations": ["CREATE", "UPDATE"], "resources": ["externalsecrets"]}],
                           "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
                           "failurePolicy": "Fail", "sideEffects": "None", "admissionReviewVersions": ["v1"],
                           "timeoutSeconds": 10}]}),
            )
            .await;
        let identity = format!("reconciler-{ns}");
        let mut reconciler = Reconciler::start(&ns, &["--lease-duration", "6s", "--identity", &identity]).await;
        create_external_secrets(&client, &ns, N, "fake", "db").await;
        eventually("every Secret holds v1", Duration::from_secs(120), || async {
            (managed_values(&client, &ns, "v1").await.0 == N).then_some(())
        })
        .await;
        eventually("the webhook's caches are current", Duration::from_secs(30), || async {
            (webhook.readyz() == (200, "ok".to_string())).then_some(())
        })
        .await;

        // The outage: the API server, then etcd.
        let cp = control_plane().await;
        let mut outage = Outage(vec![cp.stop_process("kube-apiserver")]);
        outage.0.insert(0, cp.stop_process("etcd"));
        let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": "00000000-0000-4000-8000-000000000017",
            "kind": {"group": "external-secrets.io", "version": "v1", "kind": "ExternalSecret"},
            "resource": {"group": "external-secrets.io", "version": "v1", "resource": "externalsecrets"},
            "operation": "CREATE", "namespace": ns, "name": "during-outage",
            "userInfo": {"username": "e2e-test"},
            "object": external_secret_on("during-outage", &ns, &denied)}});
        let started = std::time::Instant::now();
        // The webhook answers from its caches and says they are unconfirmed.
        eventually("the webhook reports unconfirmed caches", OUTAGE, || async {
            let (code, body) = webhook.readyz();
            assert_eq!(code, 200, "the webhook stays ready while the API server is away: {body}");
            body.contains("unconfirmed").then_some(())
        })
        .await;
        let answer = webhook.review(&ca_file, "/validate", &review);
        assert_eq!(answer["response"]["allowed"], false, "{answer}");
        let message = answer["response"]["status"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(&denied) && message.contains(&ns), "answered from the caches: {message}");
        while started.elapsed() < OUTAGE {
            assert!(reconciler.process.is_running(), "the reconciler stays up");
            assert!(webhook.process.is_running(), "the webhook stays up");
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let restarted = Timestamp::now();
        outage.end();

        // Nothing was lost or emptied, and everything still runs.
        assert_eq!(managed_values(&client, &ns, "v1").await, (N, 0), "every Secret kept its data");
        for (what, running) in [
            ("reconciler", reconciler.process.is_running()),
            ("webhook", webhook.process.is_running()),
            ("provider", fake.process.is_running()),
        ] {
            assert!(running, "the {what} exited");
        }
        // The reconciler stepped down during the outage and holds its Lease again.
        let leases: Api<Lease> = Api::namespaced(client.clone(), &ns);
        eventually("the Lease is held again", Duration::from_secs(60), || async {
            let spec = leases.get("keyward-reconciler").await.ok()?.spec?;
            let renewed = spec.renew_time?.0;
            (spec.holder_identity.as_deref() == Some(identity.as_str()) && renewed > restarted).then_some(())
        })
        .await;
        assert!(reconciler.process.log().contains("leadership lost"), "the outage outlasted the Lease");
        // It reconciles again in its new term: deleted target Secrets are written again.
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
        for i in 0..5 {
            secrets.delete(&format!("es-{i}"), &DeleteParams::default()).await.unwrap();
        }
        eventually("the deleted Secrets are back", Duration::from_secs(120), || async {
            let (v1, empty) = managed_values(&client, &ns, "v1").await;
            assert_eq!(empty, 0, "no Secret is emptied");
            (v1 == N).then_some(())
        })
        .await;
        eventually("every ExternalSecret Ready=True", Duration::from_secs(60), || async {
            (count_ready(&client, &ns, "True").await == N).then_some(())
        })
        .await;
        // The webhook's watches resumed and the API server calls it again.
        eventually("the webhook's caches are current again", Duration::from_secs(60), || async {
            (webhook.readyz() == (200, "ok".to_string())).then_some(())
        })
        .await;
        let ess: Api<ExternalSecret> = Api::namespaced(client.clone(), &ns);
        let err = ess
            .create(&PostParams::default(), &serde_json::from_value(external_secret_on("denied", &ns, &denied)).unwrap())
            .await
            .unwrap_err();
        assert!(err.to_string().contains(&denied), "denied by the webhook through the API server: {err}");
        assert!(reconciler.process.is_running() && webhook.process.is_running());
        // kube-controller-manager's watches come back too: a namespace made now gets its default
        // ServiceAccount (the tests after this one in the binary wait for theirs).
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let probe = format!("{ns}-after");
        let labels = json!({"metadata": {"name": probe, "labels": {keyward_e2e::E2E_LABEL: "true"}}});
        namespaces.create(&PostParams::default(), &serde_json::from_value(labels).unwrap()).await.unwrap();
        let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &probe);
        eventually("kube-controller-manager makes ServiceAccounts again", Duration::from_secs(120), || async {
            accounts.get_opt("default").await.ok()?.map(|_| ())
        })
        .await;
        namespaces.delete(&probe, &DeleteParams::default()).await.unwrap();
        cps.delete(&denied, &DeleteParams::default()).await.unwrap();
    })
    .await;
}
