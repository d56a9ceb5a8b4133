//! The Fake provider against the conformance suite: its store is the Fake config object on the
//! local control plane (seeded entries), plus the values pushed into the process's memory.

use std::sync::Mutex;

use keyward_e2e::with_temp_namespace;
use keyward_proto::v1::{ProviderReference, SecretStoreCapabilities};
use keyward_provider_fake::api::Fake;
use keyward_provider_runtime::testkit::conformance::{self, Case, ConformanceTarget, Properties};
use keyward_provider_runtime::testkit::{RunningProvider, TestkitError, launch, provider_ref};
use kube::Api;
use kube::api::{Patch, PatchParams};

const CONFIG: &str = "conformance";

struct FakeTarget {
    client: kube::Client,
    ns: String,
    /// The entries seeded so far (key, value): the Fake object is applied whole each time.
    entries: Mutex<Vec<(String, String)>>,
}

impl FakeTarget {
    async fn apply(&self, name: &str, entries: &[(String, String)]) -> Result<(), String> {
        let data: Vec<_> = entries.iter().map(|(key, value)| serde_json::json!({"key": key, "value": value})).collect();
        let fake = serde_json::json!({
            "apiVersion": "provider.external-secrets.io/v2alpha1",
            "kind": "Fake",
            "metadata": {"name": name, "namespace": self.ns},
            "spec": {"data": data},
        });
        Api::<Fake>::namespaced(self.client.clone(), &self.ns)
            .patch(name, &PatchParams::apply("keyward-conformance").force(), &Patch::Apply(&fake))
            .await
            .map(drop)
            .map_err(|e| format!("apply Fake {}/{name}: {e}", self.ns))
    }
}

#[tonic::async_trait]
impl ConformanceTarget for FakeTarget {
    fn name(&self) -> String {
        "Fake".into()
    }

    async fn start(&self) -> Result<RunningProvider, TestkitError> {
        launch("keyward-provider-fake", &[]).await
    }

    fn provider_ref(&self) -> ProviderReference {
        provider_ref("Fake", CONFIG, "", "Provider")
    }

    fn source_namespace(&self) -> String {
        self.ns.clone()
    }

    fn find_path(&self) -> Option<String> {
        Some("find/".into())
    }

    async fn seed(&self, key: &str, properties: &Properties) -> Result<(), String> {
        let value = serde_json::to_string(properties).map_err(|e| e.to_string())?;
        let entries = {
            let mut entries = self.entries.lock().map_err(|e| e.to_string())?;
            entries.push((key.to_string(), value));
            entries.clone()
        };
        self.apply(CONFIG, &entries).await
    }

    async fn read(&self, key: &str) -> Result<Option<Properties>, String> {
        let fake =
            Api::<Fake>::namespaced(self.client.clone(), &self.ns).get(CONFIG).await.map_err(|e| e.to_string())?;
        let Some(entry) = fake.spec.data.iter().find(|e| e.key == key && e.version.is_none()) else {
            return Ok(None);
        };
        serde_json::from_str(&entry.value).map(Some).map_err(|e| format!("entry {key:?}: {e}"))
    }

    fn pushes_reach_store(&self) -> bool {
        // Pushed values live in the provider process's memory, not in the Fake object.
        false
    }

    fn capabilities(&self) -> SecretStoreCapabilities {
        SecretStoreCapabilities::ReadWrite
    }

    async fn invalid_config(&self) -> Result<(ProviderReference, String), String> {
        let dup = ("dup".to_string(), "1".to_string());
        self.apply("duplicates", &[dup.clone(), dup]).await?;
        Ok((provider_ref("Fake", "duplicates", "", "Provider"), "duplicate entry for key \"dup\"".into()))
    }

    fn not_applicable(&self) -> Vec<(Case, &'static str)> {
        vec![
            (Case::OversizedResponse, "a Fake configuration names no server"),
            (Case::DeniedAddress, "a Fake configuration names no server"),
            (Case::StoreCalls, "the Fake provider calls no store"),
            // Keys are names in one in-memory map, never paths: there is no store path to leave.
            (Case::Traversal, "Fake keys are map keys, not paths (the provider does not apply keys::check_key)"),
            (Case::FindPathTraversal, "find.path is a prefix of Fake keys, not a path"),
        ]
    }
}

#[tokio::test]
async fn the_fake_provider_conforms() {
    with_temp_namespace(&[], |client, ns| async move {
        let target = FakeTarget { client, ns, entries: Mutex::new(Vec::new()) };
        match conformance::run_all(&target).await {
            Ok(report) => println!("{report}"),
            Err(report) => panic!("{report}"),
        }
    })
    .await;
}
