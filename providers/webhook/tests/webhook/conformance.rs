//! The webhook provider against the conformance suite: its store is a real HTTP server of the
//! test (values in memory; `GET`/`POST`/`DELETE /secrets/<key>?property=<p>`), named by a
//! `Webhook` configuration whose URL template carries the key and the property.

use crate::common;

use crate::common::{StoreServer, apply_config, install_crd, start_provider, store_url};
use keyward_e2e::with_temp_namespace;
use keyward_proto::v1::{ProviderReference, SecretStoreCapabilities};
use keyward_provider_runtime::testkit::conformance::{self, Case, ConformanceTarget, Hostile, Pointed, Properties};
use keyward_provider_runtime::testkit::{RunningProvider, TestkitError, provider_ref};
use serde_json::json;

const CONFIG: &str = "conformance";

struct WebhookTarget {
    store: StoreServer,
    client: kube::Client,
    ns: String,
}

#[tonic::async_trait]
impl ConformanceTarget for WebhookTarget {
    fn name(&self) -> String {
        "Webhook (HTTP store)".into()
    }

    async fn start(&self) -> Result<RunningProvider, TestkitError> {
        // The store listens on loopback: the harness's list, which leaves loopback allowed.
        start_provider(Some(keyward_e2e::LOCAL_DENIED_NETWORKS)).await
    }

    fn provider_ref(&self) -> ProviderReference {
        provider_ref("Webhook", CONFIG, "", "Provider")
    }

    fn source_namespace(&self) -> String {
        self.ns.clone()
    }

    async fn seed(&self, key: &str, properties: &Properties) -> Result<(), String> {
        let props: Vec<(&str, &str)> = properties.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        self.store.seed(key, &props);
        Ok(())
    }

    async fn read(&self, key: &str) -> Result<Option<Properties>, String> {
        Ok(self.store.value(key))
    }

    fn capabilities(&self) -> SecretStoreCapabilities {
        SecretStoreCapabilities::ReadWrite
    }

    async fn invalid_config(&self) -> Result<(ProviderReference, String), String> {
        apply_config(&self.client, &self.ns, "invalid", json!({"url": "ftp://files.example.com/{{ .remoteRef.key }}"}))
            .await;
        Ok((provider_ref("Webhook", "invalid", "", "Provider"), "must start with http:// or https://".into()))
    }

    async fn point_at(&self, server: &Hostile) -> Result<Pointed, String> {
        let name = format!("flood-{}", server.http_url.rsplit(':').next().unwrap_or_default());
        apply_config(
            &self.client,
            &self.ns,
            &name,
            json!({"url": format!("{}/{{{{ .remoteRef.key }}}}", server.http_url)}),
        )
        .await;
        Ok(Pointed::Config(provider_ref("Webhook", &name, "", "Provider")))
    }

    fn not_applicable(&self) -> Vec<(Case, &'static str)> {
        let unsupported = "the webhook provider does not list secrets (GetAllSecrets), as upstream's";
        vec![(Case::FindByName, unsupported), (Case::FindByPath, unsupported), (Case::FindPathTraversal, unsupported)]
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_webhook_provider_conforms() {
    let _guard = common::exclusive().await;
    let store = StoreServer::start().await;
    with_temp_namespace(&[], |client, ns| async move {
        install_crd(&client).await;
        apply_config(&client, &ns, CONFIG, json!({"url": store_url(&store.http_url)})).await;
        let target = WebhookTarget { store, client, ns };
        match conformance::run_all(&target).await {
            Ok(report) => println!("{report}"),
            Err(report) => panic!("{report}"),
        }
    })
    .await;
}
