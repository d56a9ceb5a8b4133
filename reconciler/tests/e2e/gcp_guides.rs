//! End to end: upstream's GCP Secret Manager guide (`e2e/fixtures/upstream-guides/gcpsm-*.yaml`,
//! release 2.9.0) applied to a real API server and synced by the reconciler through Keyward's GCP
//! provider process, against the Secret Manager protocol test server of the e2e harness: the
//! service-account key SecretStore, the same block as a ClusterSecretStore, and the GKE Workload
//! Identity SecretStore (a TokenRequest token exchanged at STS, then impersonation), each read by
//! the guide's ExternalSecret. Only the namespace, the placeholders, the key file and the test's
//! controller-class label change. A new version in Secret Manager reaches the Secret on a sync.

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use keyward_certs::{CertificateAuthority, Usage};
use keyward_crds::ExternalSecret;
use keyward_e2e::stores::SecretManagerServer;
use keyward_e2e::{control_plane, repo_root, with_temp_namespace};
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

use crate::support::*;

const WAIT: Duration = Duration::from_secs(90);
const PROJECT: &str = "keyward-e2e";

/// The guide's manifest with its placeholders filled in, in `ns`, with the test's class label.
fn guide(file: &str, ns: &str) -> Value {
    let path = repo_root().join("e2e/fixtures/upstream-guides").join(file);
    let text = std::fs::read_to_string(&path).unwrap().replace("[PROJECT_ID]", PROJECT);
    let mut doc: Value = serde_yaml::from_str(&text).unwrap();
    doc["metadata"]["namespace"] = json!(ns);
    doc["metadata"]["labels"][CLASS_LABEL] = json!(ns);
    doc
}

/// The guide's ExternalSecret, renamed, reading through `store` into Secret `target`.
fn external_secret(ns: &str, name: &str, store: Value, target: &str) -> Value {
    let mut es = guide("gcpsm-wif-externalsecret.yaml", ns);
    es["metadata"]["name"] = json!(name);
    es["spec"]["secretStoreRef"] = store;
    es["spec"]["target"]["name"] = json!(target);
    es
}

#[tokio::test(flavor = "multi_thread")]
async fn upstream_gcp_stores_sync_through_the_gcp_provider() {
    // Alone: a ClusterSecretStore, which every reconciler watches.
    let _turn = exclusive().await;
    let ca = CertificateAuthority::generate("keyward-gcp-e2e-ca", Duration::from_secs(86_400)).unwrap();
    let leaf = ca.issue(&["127.0.0.1"], Usage::Server, Duration::from_secs(86_400)).unwrap();
    let google = SecretManagerServer::start((&leaf.cert_pem, &leaf.key_pem)).await;
    let ca_dir = tempfile::tempdir().unwrap();
    let ca_file = ca_dir.path().join("ca.pem");
    std::fs::write(&ca_file, ca.cert_pem()).unwrap();
    google.trust_kubernetes(&control_plane().await.dir().join("pki/sa.pub"));
    with_temp_namespace(&[], |client, ns| {
        let google = &google;
        let ca_file = ca_file.to_string_lossy().to_string();
        async move {
            let pki = Pki::new();
            pki.install(&client, &ns).await;
            let url = google.url.as_str();
            let env = [
                ("KEYWARD_GCP_SECRET_MANAGER_ENDPOINT", url),
                ("KEYWARD_GCP_STS_ENDPOINT", url),
                ("KEYWARD_GCP_IAM_CREDENTIALS_ENDPOINT", url),
                ("KEYWARD_GCP_CLUSTER_NAME", "keyward-e2e"),
                ("KEYWARD_GCP_CLUSTER_LOCATION", "europe-west1"),
                ("SSL_CERT_FILE", ca_file.as_str()),
            ];
            let gcp = ProviderProcess::start_with_env("keyward-provider-gcp", pki.provider_dir(), &env).await;
            google.seed(PROJECT, "", "demo-secret", b"s3cret", &[]);

            // The service-account key: the guide's Secret with a key the server knows.
            let key = google.service_account("eso@keyward-e2e.iam.gserviceaccount.com", true);
            let mut secret = guide("gcpsm-sa-credentials-secret.yaml", &ns);
            secret["stringData"]["secret-access-credentials"] = json!(key.json);
            kubectl_apply(&ns, &secret);
            kubectl_apply(&ns, &guide("gcpsm-sa-secret-store.yaml", &ns));
            kubectl_apply(
                &ns,
                &external_secret(&ns, "by-key", json!({"name": "demo-store", "kind": "SecretStore"}), "by-key"),
            );

            // The same block as a ClusterSecretStore, its Secret reference naming the namespace.
            let css = format!("{ns}-gcp");
            let mut cluster = guide("gcpsm-sa-secret-store.yaml", &ns);
            cluster["kind"] = json!("ClusterSecretStore");
            cluster["metadata"]["name"] = json!(css);
            cluster["metadata"].as_object_mut().unwrap().remove("namespace");
            cluster["spec"]["provider"]["gcpsm"]["auth"]["secretRef"]["secretAccessKeySecretRef"]["namespace"] =
                json!(ns);
            kubectl_apply(&ns, &cluster);
            let by_cluster = json!({"name": css, "kind": "ClusterSecretStore"});
            kubectl_apply(&ns, &external_secret(&ns, "by-cluster", by_cluster, "by-cluster"));

            // GKE Workload Identity: the guide's ServiceAccount linked to a Google service account.
            let gsa = google.service_account("secrets@keyward-e2e.iam.gserviceaccount.com", true);
            let subject = format!("subject/system:serviceaccount:{ns}:demo-secrets-sa");
            google.allow_impersonation(&subject, &gsa.email);
            kubectl_apply(
                &ns,
                &json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "demo-secrets-sa",
                        "annotations": {"iam.gke.io/gcp-service-account": gsa.email}}}),
            );
            let mut wi_store = guide("gcpsm-wif-sa-secret-store.yaml", &ns);
            wi_store["metadata"]["name"] = json!("demo-store-wi");
            kubectl_apply(&ns, &wi_store);
            let by_wi = json!({"name": "demo-store-wi", "kind": "SecretStore"});
            kubectl_apply(&ns, &external_secret(&ns, "by-wi", by_wi, "by-wi"));

            let _reconciler = Reconciler::start_with_stores(&ns, &[("gcp", &gcp)], &[]).await;
            let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
            for target in ["by-key", "by-cluster", "by-wi"] {
                wait_for_value(&secrets, target, "DEMO_SECRET", "s3cret", WAIT).await;
            }
            let log = google.requests();
            assert!(log.iter().any(|r| r.ends_with(":generateAccessToken")), "{log:?}");

            // A new version reaches the Secret when a sync is asked for.
            google.seed(PROJECT, "", "demo-secret", b"rotated", &[]);
            let ess: Api<ExternalSecret> = Api::namespaced(client.clone(), &ns);
            let patch = json!({"metadata": {"annotations": {"force-sync": "rotated"}}});
            ess.patch("by-key", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
            wait_for_value(&secrets, "by-key", "DEMO_SECRET", "rotated", WAIT).await;

            let _ = keyward_e2e::kubectl().args(["delete", "clustersecretstore", &css, "--ignore-not-found"]).output();
        }
    })
    .await;
}
