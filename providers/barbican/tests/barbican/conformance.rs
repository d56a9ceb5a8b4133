//! The Barbican provider against the conformance suite, with real Keystone and Barbican servers.
//!
//! Barbican names a secret by the ID it assigns when the secret is stored, so the suite's values
//! are stored first, under the suite's names, and the target maps each name to its secret's ID;
//! names never stored (`missing`) map to IDs no secret has. Barbican payloads cannot change once
//! stored, so what a secret holds is what it was stored with.

use crate::common;

use std::collections::HashMap;
use std::sync::Mutex;

use crate::common::{apply_config, apply_secret, install_crd, openstack, spec, start_provider};
use keyward_e2e::stores::OpenStack;
use keyward_e2e::with_temp_namespace;
use keyward_proto::v1::{ProviderReference, SecretStoreCapabilities};
use keyward_provider_runtime::testkit::conformance::{self, Case, ConformanceTarget, Hostile, Pointed, Properties};
use keyward_provider_runtime::testkit::{RunningProvider, TestkitError, provider_ref};
use serde_json::json;

const CONFIG: &str = "conformance";

/// The values the suite seeds (its names and properties), stored in Barbican before it runs.
const FIXTURES: [(&str, &[(&str, &str)]); 4] = [
    ("get", &[("user", "app"), ("password", "s3cret")]),
    ("find/a", &[("item", "a")]),
    ("find/b", &[("item", "b")]),
    ("traversed", &[("id", "seeded")]),
];

struct BarbicanTarget {
    os: OpenStack,
    client: kube::Client,
    ns: String,
    /// Suite name → secret ID.
    ids: Mutex<HashMap<String, String>>,
    /// Secret ID → what it was stored with.
    stored: HashMap<String, Properties>,
}

fn props(pairs: &[(&str, &str)]) -> Properties {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

impl BarbicanTarget {
    fn new(os: OpenStack, client: kube::Client, ns: String) -> Self {
        let mut ids = HashMap::new();
        let mut stored = HashMap::new();
        for (name, pairs) in FIXTURES {
            let value = props(pairs);
            let payload = serde_json::to_string(&value).expect("JSON");
            let id = os.create_secret(name, &payload);
            ids.insert(name.to_string(), id.clone());
            stored.insert(id, value);
        }
        BarbicanTarget { os, client, ns, ids: Mutex::new(ids), stored }
    }
}

#[tonic::async_trait]
impl ConformanceTarget for BarbicanTarget {
    fn name(&self) -> String {
        "Barbican (Keystone v3 + Barbican from PyPI)".into()
    }

    async fn start(&self) -> Result<RunningProvider, TestkitError> {
        Ok(start_provider().await)
    }

    fn provider_ref(&self) -> ProviderReference {
        provider_ref("Barbican", CONFIG, "", "Provider")
    }

    fn source_namespace(&self) -> String {
        self.ns.clone()
    }

    fn key(&self, name: &str) -> String {
        let mut ids = self.ids.lock().unwrap_or_else(|e| e.into_inner());
        let n = ids.len();
        ids.entry(name.to_string()).or_insert_with(|| format!("00000000-0000-4000-8000-{n:012x}")).clone()
    }

    async fn seed(&self, key: &str, properties: &Properties) -> Result<(), String> {
        match self.stored.get(key) {
            Some(held) if held == properties => Ok(()),
            Some(held) => Err(format!("secret {key} was stored with {held:?}, the suite seeds {properties:?}")),
            None => Err(format!("{key} is not a secret stored before the suite: add its name to FIXTURES")),
        }
    }

    async fn read(&self, key: &str) -> Result<Option<Properties>, String> {
        Ok(self.stored.get(key).cloned())
    }

    fn capabilities(&self) -> SecretStoreCapabilities {
        SecretStoreCapabilities::ReadOnly
    }

    async fn invalid_config(&self) -> Result<(ProviderReference, String), String> {
        let mut broken = spec(&self.os, "os-creds");
        broken["authURL"] = json!("ftp://keystone.example.com/v3");
        apply_config(&self.client, &self.ns, "invalid", broken).await;
        Ok((provider_ref("Barbican", "invalid", "", "Provider"), "must start with http:// or https://".into()))
    }

    async fn point_at(&self, server: &Hostile) -> Result<Pointed, String> {
        // Keystone's URL is the configuration's to name: the flood answers the login.
        let name = format!("flood-{}", server.http_url.rsplit(':').next().unwrap_or_default());
        let mut flood = spec(&self.os, "os-creds");
        flood["authURL"] = json!(format!("{}/v3", server.http_url));
        apply_config(&self.client, &self.ns, &name, flood).await;
        Ok(Pointed::Config(provider_ref("Barbican", &name, "", "Provider")))
    }

    fn not_applicable(&self) -> Vec<(Case, &'static str)> {
        vec![
            (Case::Exists, "upstream's Barbican provider does not check whether secrets exist (read-only)"),
            (Case::FindByPath, "Barbican secrets have no paths; upstream finds by name only"),
            (Case::FindPathTraversal, "Barbican secrets have no paths; upstream finds by name only"),
        ]
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_barbican_provider_conforms() {
    let _guard = common::exclusive().await;
    let os = openstack().await;
    with_temp_namespace(&[], |client, ns| async move {
        install_crd(&client).await;
        apply_secret(&client, &ns, "os-creds", &[("password", os.password())]).await;
        apply_config(&client, &ns, CONFIG, spec(&os, "os-creds")).await;
        let target = tokio::task::spawn_blocking({
            let (client, ns) = (client.clone(), ns.clone());
            move || BarbicanTarget::new(os, client, ns)
        })
        .await
        .expect("storing the fixtures");
        match conformance::run_all(&target).await {
            Ok(report) => println!("{report}"),
            Err(report) => panic!("{report}"),
        }
    })
    .await;
}
