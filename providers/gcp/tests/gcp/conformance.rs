//! The GCP provider against the conformance suite, with the Secret Manager protocol test server.
//! Secret IDs hold no `/`, so a suite name `find/a` is the secret `find_a`, and `find.path`
//! (a prefix of secret IDs, as upstream) is `find_`.

use crate::common::{self, Google, PROJECT, apply_config, apply_secret, install_crd, key_spec, start_provider};
use keyward_e2e::with_temp_namespace;
use keyward_proto::v1::{ProviderReference, SecretStoreCapabilities};
use keyward_provider_runtime::testkit::conformance::{self, Case, ConformanceTarget, Properties};
use keyward_provider_runtime::testkit::{RunningProvider, TestkitError, provider_ref};
use serde_json::json;

struct GcpTarget {
    google: Google,
    client: kube::Client,
    ns: String,
}

#[tonic::async_trait]
impl ConformanceTarget for GcpTarget {
    fn name(&self) -> String {
        "GCP Secret Manager (protocol test server)".into()
    }

    async fn start(&self) -> Result<RunningProvider, TestkitError> {
        Ok(start_provider(&self.google).await)
    }

    fn provider_ref(&self) -> ProviderReference {
        provider_ref("GCPSecretManager", "conformance", "", "Provider")
    }

    fn source_namespace(&self) -> String {
        self.ns.clone()
    }

    fn key(&self, name: &str) -> String {
        name.replace('/', "_")
    }

    fn find_path(&self) -> Option<String> {
        Some("find_".into())
    }

    async fn seed(&self, key: &str, properties: &Properties) -> Result<(), String> {
        let value = serde_json::to_vec(properties).map_err(|e| e.to_string())?;
        // Seeded as upstream's pushes leave them, so pushes and deletes may touch them.
        self.google.server.seed(PROJECT, "", key, &value, &[("managed-by", "external-secrets")]);
        Ok(())
    }

    async fn read(&self, key: &str) -> Result<Option<Properties>, String> {
        match self.google.server.latest(PROJECT, "", key) {
            None => Ok(None),
            Some(v) => serde_json::from_slice(&v).map(Some).map_err(|e| format!("{key}: {e}")),
        }
    }

    fn capabilities(&self) -> SecretStoreCapabilities {
        SecretStoreCapabilities::ReadWrite
    }

    async fn invalid_config(&self) -> Result<(ProviderReference, String), String> {
        apply_config(&self.client, &self.ns, "invalid", json!({"projectID": "Not A Project", "location": "x"})).await;
        Ok((provider_ref("GCPSecretManager", "invalid", "", "Provider"), "spec.projectID".into()))
    }

    fn not_applicable(&self) -> Vec<(Case, &'static str)> {
        vec![
            (
                Case::OversizedResponse,
                "Secret Manager's endpoint is the provider process's setting (the operator's, Google's), never a \
                 configuration's, and Google's client reads its answers whole with no hook for a size cap",
            ),
            (Case::DeniedAddress, "a gcpsm configuration names no server: the endpoints are the operator's setting"),
            (
                Case::FindByPath,
                "as upstream, find.path alone is refused: it narrows a find by find.name or find.tags (checked in \
                 gcp_provider.rs); find-path-traversal still runs",
            ),
        ]
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_gcp_provider_conforms() {
    let _guard = common::exclusive().await;
    let google = common::google().await;
    let key = google.server.service_account("conformance@keyward-test.iam.gserviceaccount.com", true);
    with_temp_namespace(&[], |client, ns| async move {
        install_crd(&client).await;
        apply_secret(&client, &ns, "gcp-key", &[("key.json", &key.json)]).await;
        apply_config(&client, &ns, "conformance", key_spec("gcp-key")).await;
        let target = GcpTarget { google, client, ns };
        match conformance::run_all(&target).await {
            Ok(report) => println!("{report}"),
            Err(report) => panic!("{report}"),
        }
    })
    .await;
}
