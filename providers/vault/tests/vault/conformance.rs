//! The Vault provider against the conformance suite: its store is the KV v2 engine of
//! `vault server -dev` (`secret/`), reached with a token from a Secret.

use keyward_e2e::stores::VaultDev;
use keyward_e2e::with_temp_namespace;
use keyward_proto::v1::{ProviderReference, SecretStoreCapabilities};
use keyward_provider_runtime::testkit::conformance::{self, ConformanceTarget, Hostile, Pointed, Properties};
use keyward_provider_runtime::testkit::{RunningProvider, TestkitError, launch, provider_ref};
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;

use crate::common;

const CONFIG: &str = "conformance";
const POLICY: &str = r#"path "secret/*" { capabilities = ["create", "read", "update", "delete", "list"] }"#;

struct VaultTarget {
    vault: VaultDev,
    client: Client,
    ns: String,
}

impl VaultTarget {
    /// The token Secret, a wrong token's Secret, and the working configuration.
    async fn setup(&self) -> Result<(), String> {
        self.vault.policy("keyward", POLICY);
        let created = self.vault.json(&["token", "create"], &["-policy=keyward"]);
        let token = created["auth"]["client_token"].as_str().ok_or("no client token")?.to_string();
        self.secret("vault-token", &token).await?;
        self.secret("bad-token", "hvs.not-a-token").await?;
        self.config(CONFIG, &self.vault.address(), "vault-token").await
    }

    async fn secret(&self, name: &str, token: &str) -> Result<(), String> {
        let obj =
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "stringData": {"token": token}});
        apply::<k8s_openapi::api::core::v1::Secret>(&self.client, &self.ns, obj).await
    }

    /// A configuration of the KV v2 engine at `secret/` on `server`, with the token of `token_secret`.
    async fn config(&self, name: &str, server: &str, token_secret: &str) -> Result<(), String> {
        let obj = json!({
            "apiVersion": "provider.external-secrets.io/v2alpha1", "kind": "Vault", "metadata": {"name": name},
            "spec": {"server": server, "path": "secret",
                     "auth": {"tokenSecretRef": {"name": token_secret, "key": "token"}}},
        });
        apply::<keyward_crds::Vault>(&self.client, &self.ns, obj).await
    }
}

async fn apply<K>(client: &Client, ns: &str, obj: serde_json::Value) -> Result<(), String>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let name = obj["metadata"]["name"].as_str().unwrap_or_default().to_string();
    Api::<K>::namespaced(client.clone(), ns)
        .patch(&name, &PatchParams::apply("keyward-conformance").force(), &Patch::Apply(&obj))
        .await
        .map(drop)
        .map_err(|e| format!("apply {name}: {e}"))
}

#[tonic::async_trait]
impl ConformanceTarget for VaultTarget {
    fn name(&self) -> String {
        "Vault KV v2".into()
    }

    async fn start(&self) -> Result<RunningProvider, TestkitError> {
        launch("keyward-provider-vault", &[]).await
    }

    fn provider_ref(&self) -> ProviderReference {
        provider_ref("Vault", CONFIG, "", "Provider")
    }

    fn source_namespace(&self) -> String {
        self.ns.clone()
    }

    fn key(&self, name: &str) -> String {
        format!("{}/{name}", self.ns)
    }

    fn find_path(&self) -> Option<String> {
        Some(format!("{}/find", self.ns))
    }

    async fn seed(&self, key: &str, properties: &Properties) -> Result<(), String> {
        let mut args = vec!["kv".to_string(), "put".into(), format!("secret/{key}")];
        args.extend(properties.iter().map(|(k, v)| format!("{k}={v}")));
        self.vault.try_cli(&args.iter().map(String::as_str).collect::<Vec<_>>()).map(drop)
    }

    async fn read(&self, key: &str) -> Result<Option<Properties>, String> {
        match self.vault.try_cli(&["kv", "get", "-format=json", &format!("secret/{key}")]) {
            Ok(out) => {
                let v: serde_json::Value = serde_json::from_str(&out).map_err(|e| format!("vault kv get: {e}"))?;
                serde_json::from_value(v["data"]["data"].clone()).map(Some).map_err(|e| format!("vault kv get: {e}"))
            }
            Err(e) if e.contains("No value found") => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn capabilities(&self) -> SecretStoreCapabilities {
        SecretStoreCapabilities::ReadWrite
    }

    async fn invalid_config(&self) -> Result<(ProviderReference, String), String> {
        self.config("bad-token", &self.vault.address(), "bad-token").await?;
        Ok((provider_ref("Vault", "bad-token", "", "Provider"), "permission denied".into()))
    }

    async fn point_at(&self, server: &Hostile) -> Result<Pointed, String> {
        let name = format!("flood-{}", server.http_url.rsplit(':').next().unwrap_or_default());
        self.config(&name, &server.http_url, "vault-token").await?;
        Ok(Pointed::Config(provider_ref("Vault", &name, "", "Provider")))
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_vault_provider_conforms() {
    let _guard = common::exclusive().await;
    let vault = VaultDev::start();
    with_temp_namespace(&[], |client, ns| async move {
        let target = VaultTarget { vault, client, ns };
        if let Err(e) = target.setup().await {
            panic!("setting up the Vault store: {e}");
        }
        match conformance::run_all(&target).await {
            Ok(report) => println!("{report}"),
            Err(report) => panic!("{report}"),
        }
    })
    .await;
}
