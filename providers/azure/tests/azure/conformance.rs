//! The Azure provider against the conformance suite, with the Key Vault protocol test server as
//! the store and a service principal (client secret) as the identity.
//!
//! Key Vault names have no `/`, so the suite's `find/a` is the secret `find-a`; secrets have no
//! paths, so the path cases do not apply. A value of the suite is a secret holding its
//! properties as a JSON object, which is how upstream's provider reads properties.

use crate::common;

use std::collections::BTreeMap;

use keyward_e2e::stores::AzureKeyVault;
use keyward_e2e::with_temp_namespace;
use keyward_proto::v1::{ProviderReference, SecretStoreCapabilities};
use keyward_provider_runtime::testkit::conformance::{self, Case, ConformanceTarget, Hostile, Pointed, Properties};
use keyward_provider_runtime::testkit::{RunningProvider, TestkitError, provider_ref};
use serde_json::json;

const CONFIG: &str = "conformance";
const CREDENTIALS: &str = "azure-secret-sp";

struct AzureTarget {
    server: AzureKeyVault,
    client: kube::Client,
    ns: String,
    /// CA files of hostile servers, kept while their processes run.
    hostile_cas: std::sync::Mutex<Vec<tempfile::NamedTempFile>>,
}

#[tonic::async_trait]
impl ConformanceTarget for AzureTarget {
    fn name(&self) -> String {
        "Azure Key Vault (protocol test server, service principal)".into()
    }

    async fn start(&self) -> Result<RunningProvider, TestkitError> {
        Ok(common::start_provider(&self.server).await)
    }

    fn provider_ref(&self) -> ProviderReference {
        provider_ref("AzureKeyVault", CONFIG, "", "Provider")
    }

    fn source_namespace(&self) -> String {
        self.ns.clone()
    }

    fn key(&self, name: &str) -> String {
        name.replace('/', "-")
    }

    async fn seed(&self, key: &str, properties: &Properties) -> Result<(), String> {
        let value = serde_json::to_string(properties).map_err(|e| e.to_string())?;
        self.server.set_secret(key, &value, &[]);
        Ok(())
    }

    async fn read(&self, key: &str) -> Result<Option<Properties>, String> {
        match self.server.secret(key) {
            None => Ok(None),
            Some((value, _)) => serde_json::from_str::<BTreeMap<String, String>>(&value)
                .map(|m| Some(m.into_iter().collect()))
                .map_err(|e| format!("secret {key} holds {value:?}: {e}")),
        }
    }

    fn capabilities(&self) -> SecretStoreCapabilities {
        SecretStoreCapabilities::ReadWrite
    }

    async fn invalid_config(&self) -> Result<(ProviderReference, String), String> {
        let mut broken = common::sp_spec(&self.server, CREDENTIALS);
        broken["vaultUrl"] = json!("http://kv.vault.azure.net");
        common::apply_config(&self.client, &self.ns, "invalid", broken).await;
        Ok((provider_ref("AzureKeyVault", "invalid", "", "Provider"), "must be an https:// URL".into()))
    }

    async fn point_at(&self, server: &Hostile) -> Result<Pointed, String> {
        let port = server.https_url.rsplit(':').next().unwrap_or_default().to_string();
        let name = format!("flood-{port}");
        let mut flood = common::sp_spec(&self.server, CREDENTIALS);
        flood["vaultUrl"] = json!(server.https_url);
        common::apply_config(&self.client, &self.ns, &name, flood).await;
        let pref = provider_ref("AzureKeyVault", &name, "", "Provider");
        if !server.https_url.starts_with("https://127.0.0.1:") {
            // A denied address: the process under test must refuse it itself.
            return Ok(Pointed::Config(pref));
        }
        // The vault's TLS roots are the process's (SSL_CERT_FILE): a process trusting the flood's CA.
        let mut ca = tempfile::NamedTempFile::new().map_err(|e| e.to_string())?;
        std::io::Write::write_all(&mut ca, server.ca_pem.as_bytes()).map_err(|e| e.to_string())?;
        let path = ca.path().display().to_string();
        let process = common::start_provider_with(&self.server, &[("SSL_CERT_FILE", path.as_str())]).await;
        self.hostile_cas.lock().unwrap_or_else(|e| e.into_inner()).push(ca);
        Ok(Pointed::Process(Box::new(process), pref))
    }

    fn not_applicable(&self) -> Vec<(Case, &'static str)> {
        vec![
            (Case::FindByPath, "Key Vault secrets have no paths; upstream finds by name and tags"),
            (Case::FindPathTraversal, "Key Vault secrets have no paths; a find.path is refused"),
        ]
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_azure_provider_conforms() {
    let _guard = common::exclusive().await;
    let server = common::azure();
    with_temp_namespace(&[], |client, ns| async move {
        common::install_crd(&client).await;
        common::apply_sp_secret(&client, &ns, CREDENTIALS).await;
        common::apply_config(&client, &ns, CONFIG, common::sp_spec(&server, CREDENTIALS)).await;
        let target = AzureTarget { server, client, ns, hostile_cas: Default::default() };
        match conformance::run_all(&target).await {
            Ok(report) => println!("{report}"),
            Err(report) => panic!("{report}"),
        }
    })
    .await;
}
