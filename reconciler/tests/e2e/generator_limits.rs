//! End to end: generator specs are bounded once and checked twice.
//!
//! A Password with `digits: 9223372036854775807` and `allowRepeat: true` wrapped an unchecked
//! sum in release builds and made the shared reconciler generate until it was OOM-killed, on
//! every restart. Now the API server refuses it (the CRD's bounds), the webhook refuses it and
//! every other spec its rules refuse, naming the field; a spec written while the webhook was
//! not registered reaches the reconciler, whose generation refuses it with the same rule:
//! `Ready=False` with the message, the reconciler running on, another ExternalSecret syncing.

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use keyward_crds::ExternalSecret;
use keyward_e2e::{rejects_in, with_temp_namespace};
use kube::Api;
use serde_json::{Value, json};

use crate::support::*;

const WAIT: Duration = Duration::from_secs(60);

fn password(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "generators.external-secrets.io/v1alpha1", "kind": "Password",
           "metadata": {"name": name}, "spec": spec})
}

/// Refused by the rules, admitted by the CRD: it stands for the wrapping spec where the CRD's
/// bounds cannot be passed (CRDs installed apart from the chart have none).
fn refused_by_the_rules() -> Value {
    json!({"length": 24, "digits": 20, "symbols": 20, "allowRepeat": true})
}

#[tokio::test(flavor = "multi_thread")]
async fn generator_specs_out_of_bounds_are_denied_at_admission_and_refused_at_generation() {
    let _turn = shared().await;
    with_temp_namespace(&[], |client, ns| async move {
        let wrapping = password("wrapping", json!({"digits": i64::MAX, "allowRepeat": true}));
        // Admission bypassed: written before the webhook is registered.
        kubectl_apply(&ns, &password("slipped-in", refused_by_the_rules()));
        kubectl_apply(&ns, &password("good", json!({"length": 16})));
        // The CRD's bounds refuse the wrapping spec whatever admission does.
        rejects_in(&ns, &wrapping.to_string(), "spec.digits");

        let pki = Pki::new();
        let mut webhook = Webhook::start(&pki.issue_server_dir("webhook")).await;
        let ca_file = pki.dir.path().join("ca.pem");
        std::fs::write(&ca_file, &pki.ca).unwrap();
        // The webhook's own rule, whatever the CRD says: the review the API server would send.
        let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": "00000000-0000-4000-8000-000000000041",
            "kind": {"group": "generators.external-secrets.io", "version": "v1alpha1", "kind": "Password"},
            "resource": {"group": "generators.external-secrets.io", "version": "v1alpha1", "resource": "passwords"},
            "operation": "CREATE", "namespace": ns, "name": "wrapping", "userInfo": {"username": "e2e-test"},
            "object": wrapping}});
        let answer = webhook.review(&ca_file, "/validate", &review);
        assert_eq!(answer["response"]["allowed"], false, "{answer}");
        let message = answer["response"]["status"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("spec.digits: digits (9223372036854775807) exceed the length (24)"), "{message}");

        // Through the API server: what the CRD admits and the rules refuse is denied by the
        // webhook, naming the field.
        register_generator_webhook(&mut webhook, &client, &pki, &ns, &["passwords", "sshkeys"]).await;
        let refused = password("refused", refused_by_the_rules());
        eventually("the validating webhook in force", WAIT, || async {
            (!server_dry_run_accepts(&ns, &refused)).then_some(())
        })
        .await;
        let text =
            rejects_in(&ns, &refused.to_string(), "spec.digits: digits (20) plus symbols (20) exceed the length");
        assert!(text.contains("denied the request"), "{text}");
        let ssh = json!({"apiVersion": "generators.external-secrets.io/v1alpha1", "kind": "SSHKey",
                         "metadata": {"name": "huge"}, "spec": {"keySize": 8192}});
        rejects_in(&ns, &ssh.to_string(), "spec.keySize: 8192 is not generated for rsa");

        // At generation: the spec that slipped in is refused with the same rule.
        let mut reconciler = Reconciler::start(&ns, &[]).await;
        let pid = reconciler.process.pid();
        let ess: Api<ExternalSecret> = Api::namespaced(client.clone(), &ns);
        apply(&ess, generator_external_secret("slipped-in", &ns, "Password", "slipped-in")).await;
        let message = wait_refused(&ess, "slipped-in", "spec.digits", WAIT).await;
        assert!(
            message.contains("Password: spec.digits: digits (20) plus symbols (20) exceed the length (24)"),
            "{message}"
        );
        apply(&ess, generator_external_secret("good", &ns, "Password", "good")).await;
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
        let generated = eventually("the good Password generated", WAIT, || async {
            value(&secrets.get_opt("good").await.ok()??, "password")
        })
        .await;
        assert_eq!(generated.chars().count(), 16);
        assert!(secrets.get_opt("slipped-in").await.unwrap().is_none(), "nothing written for the refused spec");
        assert!(reconciler.process.is_running(), "the reconciler runs on:\n{}", reconciler.process.log());
        assert_eq!(reconciler.process.pid(), pid);
        assert!(!reconciler.process.log().contains("panicked"), "{}", reconciler.process.log());
        reconciler.process.terminate(Duration::from_secs(10));
    })
    .await;
}
