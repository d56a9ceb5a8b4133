//! The GCRAccessToken generator served by the GCP provider process
//! (`provider.v1.GeneratorProvider/Generate`), over real mTLS, against the protocol test
//! server's OAuth token, STS and IAM Credentials endpoints and the local control plane: a
//! service-account key's access token (the JWT-bearer grant), a GKE Workload Identity token
//! impersonating the annotated Google service account, an unknown key refused with the token
//! endpoint's answer, and the tenant boundary (another namespace's Secret, the provider's own
//! identity) and the spec rule refused before any request.

use std::time::{SystemTime, UNIX_EPOCH};

use keyward_e2e::{control_plane, with_temp_namespace};
use keyward_proto::v1::GenerateRequest;
use keyward_provider_runtime::testkit::{generate, value_text as text};
use serde_json::{Value, json};
use tonic::Code;

use crate::common::{self, PROJECT, apply_secret, apply_service_account, start_provider};

fn request(ns: &str, name: &str, spec: &Value) -> GenerateRequest {
    GenerateRequest {
        kind: "GCRAccessToken".into(),
        spec_json: spec.to_string(),
        namespace: ns.into(),
        name: name.into(),
    }
}

/// A spec reading the service-account key in Secret `secret` (key `key.json`).
fn key_spec(secret: &str) -> Value {
    json!({"projectID": PROJECT, "auth": {"secretRef": {"secretAccessKeySecretRef": {"name": secret, "key": "key.json"}}}})
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

#[tokio::test(flavor = "multi_thread")]
async fn gcr_tokens_are_generated_with_the_generators_identity() {
    let _guard = common::shared().await;
    let cp = control_plane().await;
    let g = common::google().await;
    g.server.trust_kubernetes(&cp.dir().join("pki/sa.pub"));
    let pusher = g.server.service_account("pusher@keyward-test.iam.gserviceaccount.com", false);
    let stranger =
        common::google().await.server.service_account("stranger@keyward-test.iam.gserviceaccount.com", false);
    let p = start_provider(&g).await;
    let mut c = p.generator_client().await.expect("generator client");
    with_temp_namespace(&[], |client, ns| {
        let g = &g;
        async move {
            // A service-account key: an access token of its account, under upstream's keys.
            apply_secret(&client, &ns, "gcr-key", &[("key.json", &pusher.json)]).await;
            let values = generate(&mut c, request(&ns, "key", &key_spec("gcr-key"))).await.expect("key token");
            let mut keys: Vec<&String> = values.keys().collect();
            keys.sort();
            assert_eq!(keys, ["expiry", "password", "username"]);
            assert_eq!(text(&values, "username"), "oauth2accesstoken");
            assert_eq!(g.server.token_principal(&text(&values, "password")).as_deref(), Some(pusher.email.as_str()));
            let expiry: u64 = text(&values, "expiry").parse().expect("Unix seconds");
            assert!((now() + 3500..=now() + 3600).contains(&expiry), "{expiry}");
            assert!(g.server.requests().iter().any(|r| r == "POST /token"), "the JWT-bearer grant");

            // GKE Workload Identity: the namespace's ServiceAccount, exchanged at STS, then the
            // annotated Google service account impersonated.
            let subject = format!("subject/system:serviceaccount:{ns}:puller");
            g.server.allow_impersonation(&subject, &pusher.email);
            apply_service_account(&client, &ns, "puller", &[("iam.gke.io/gcp-service-account", &pusher.email)]).await;
            let wi = json!({"projectID": PROJECT, "auth": {"workloadIdentity": {"serviceAccountRef": {"name": "puller"},
                            "clusterLocation": "europe-west1", "clusterName": "keyward-e2e"}}});
            let values = generate(&mut c, request(&ns, "wi", &wi)).await.expect("workload identity");
            assert_eq!(g.server.token_principal(&text(&values, "password")).as_deref(), Some(pusher.email.as_str()));

            // A key the token endpoint does not know: its answer, naming the generator.
            apply_secret(&client, &ns, "unknown-key", &[("key.json", &stranger.json)]).await;
            let e = generate(&mut c, request(&ns, "unknown", &key_spec("unknown-key"))).await.expect_err("refused");
            assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
            assert!(e.message().contains("account not found") && e.message().contains("GCRAccessToken"), "{e:?}");

            // The tenant boundary and the spec rule, before any request.
            let before = g.server.requests().len();
            let mut stolen = key_spec("gcr-key");
            stolen["auth"]["secretRef"]["secretAccessKeySecretRef"]["namespace"] = json!("kube-system");
            let e = generate(&mut c, request(&ns, "stolen", &stolen)).await.expect_err("another namespace");
            assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
            assert!(e.message().contains("spec.auth.secretRef.secretAccessKeySecretRef"), "{e:?}");
            let own = json!({"projectID": PROJECT, "auth": {}});
            let e = generate(&mut c, request(&ns, "own", &own)).await.expect_err("the provider's identity");
            assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
            assert!(e.message().contains("spec.auth"), "{e:?}");
            let bad = json!({"projectID": "", "auth": {"workloadIdentity": {"serviceAccountRef": {"name": "puller"}}}});
            let e = generate(&mut c, request(&ns, "bad", &bad)).await.expect_err("no project");
            assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
            assert!(e.message().contains("spec.projectID"), "{e:?}");
            assert_eq!(g.server.requests().len(), before, "nothing was asked of Google");
        }
    })
    .await;
}
