//! What the Azure provider's tests share: the Key Vault protocol test server
//! ([`keyward_e2e::stores::AzureKeyVault`]), the `AzureKeyVault` CRD on the local control plane,
//! configuration objects, Secrets, ServiceAccounts and upstream's guide manifests, and the
//! provider process pointed at the server through its environment.

// Each test module uses a part of this module.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use keyward_e2e::stores::AzureKeyVault;
use keyward_e2e::stores::azure::TENANT;
use keyward_proto::v1::{ExternalSecretDataRemoteRef, GetSecretRequest, ProviderReference};
use keyward_provider_azure::api::AzureKeyVault as AzureKeyVaultKind;
use keyward_provider_runtime::testkit::{RunningProvider, launch};
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Api, Client, CustomResourceExt};
use serde_json::{Value, json};

pub use keyward_e2e::turns::{exclusive, shared};

/// A client of the provider.
pub type Grpc = keyward_proto::v1::secret_store_provider_client::SecretStoreProviderClient<tonic::transport::Channel>;

/// The service principal the tests log in as, and its secret.
pub const CLIENT_ID: &str = "6a1f0b7e-4c2d-4e8f-9a3b-5c7d9e1f2a4b";
pub const CLIENT_SECRET: &str = "kw~client-secret-value";

/// Starts the protocol test server with the tests' service principal.
pub fn azure() -> AzureKeyVault {
    let server = AzureKeyVault::start();
    server.add_client_secret(CLIENT_ID, CLIENT_SECRET);
    server
}

/// The provider process, Azure at `server` (tenants may reach loopback, where the server listens:
/// the launcher's denied networks).
pub async fn start_provider(server: &AzureKeyVault) -> RunningProvider {
    start_provider_with(server, &[]).await
}

/// [`start_provider`] with more environment.
pub async fn start_provider_with(server: &AzureKeyVault, extra: &[(&str, &str)]) -> RunningProvider {
    let env = server.provider_env();
    let mut env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    env.extend_from_slice(extra);
    launch("keyward-provider-azure", &env).await.unwrap_or_else(|e| panic!("{e}"))
}

/// Installs the `AzureKeyVault` CRD (idempotent) and waits until it is served.
pub async fn install_crd(client: &Client) {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = AzureKeyVaultKind::crd();
    let name = crd.metadata.name.clone().expect("name");
    api.patch(&name, &PatchParams::apply("keyward-azure-tests").force(), &Patch::Apply(&crd)).await.expect("CRD");
    for _ in 0..100 {
        if Api::<AzureKeyVaultKind>::all(client.clone()).list(&Default::default()).await.is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the AzureKeyVault CRD is not served");
}

/// A service-principal configuration of `server`, its credentials in Secret `secret`
/// (`ClientID`, `ClientSecret`, as upstream's guide names them).
pub fn sp_spec(server: &AzureKeyVault, secret: &str) -> Value {
    json!({
        "tenantId": TENANT,
        "vaultUrl": server.vault_url(),
        "authSecretRef": {
            "clientId": {"name": secret, "key": "ClientID"},
            "clientSecret": {"name": secret, "key": "ClientSecret"},
        },
    })
}

/// Applies an `AzureKeyVault` configuration object.
pub async fn apply_config(client: &Client, ns: &str, name: &str, spec: Value) {
    let obj = json!({
        "apiVersion": "provider.external-secrets.io/v2alpha1",
        "kind": "AzureKeyVault",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    });
    Api::<AzureKeyVaultKind>::namespaced(client.clone(), ns)
        .patch(name, &PatchParams::apply("keyward-azure-tests").force(), &Patch::Apply(&obj))
        .await
        .unwrap_or_else(|e| panic!("apply AzureKeyVault {ns}/{name}: {e}"));
}

/// Deletes the configuration object `name` and, once it is gone, creates it again with `spec`
/// (a new UID, generation 1 again).
pub async fn recreate_config(client: &Client, ns: &str, name: &str, spec: Value) {
    let api = Api::<AzureKeyVaultKind>::namespaced(client.clone(), ns);
    keyward_e2e::delete_and_wait(&api, name).await;
    apply_config(client, ns, name, spec).await;
    let created = api.get(name).await.expect("the new object");
    assert_eq!(created.metadata.generation, Some(1), "a new object starts at generation 1 again");
}

/// Applies a Secret with `data` (text).
pub async fn apply_secret(client: &Client, ns: &str, name: &str, data: &[(&str, &str)]) {
    let data: BTreeMap<&str, &str> = data.iter().copied().collect();
    let obj =
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": ns}, "stringData": data});
    Api::<Secret>::namespaced(client.clone(), ns)
        .patch(name, &PatchParams::apply("keyward-azure-tests").force(), &Patch::Apply(&obj))
        .await
        .unwrap_or_else(|e| panic!("apply Secret {ns}/{name}: {e}"));
}

/// The tests' service principal's Secret, as upstream's guide names its keys.
pub async fn apply_sp_secret(client: &Client, ns: &str, name: &str) {
    apply_secret(client, ns, name, &[("ClientID", CLIENT_ID), ("ClientSecret", CLIENT_SECRET)]).await;
}

/// Applies any object (a Secret, a ServiceAccount, a SecretStore, a ClusterSecretStore).
pub async fn apply(client: &Client, obj: &Value) {
    let api_version = obj["apiVersion"].as_str().expect("apiVersion");
    let kind = obj["kind"].as_str().expect("kind");
    let name = obj["metadata"]["name"].as_str().expect("name");
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let res = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind));
    let api: Api<DynamicObject> = match obj["metadata"]["namespace"].as_str() {
        Some(ns) if kind != "ClusterSecretStore" => Api::namespaced_with(client.clone(), ns, &res),
        _ => Api::all_with(client.clone(), &res),
    };
    api.patch(name, &PatchParams::apply("keyward-azure-tests").force(), &Patch::Apply(obj))
        .await
        .unwrap_or_else(|e| panic!("apply {kind} {name}: {e}"));
}

/// The documents of an upstream guide file (`e2e/fixtures/upstream-guides`), each put in `ns`.
pub fn guide(file: &str, ns: &str) -> Vec<Value> {
    let path = keyward_e2e::repo_root().join("e2e/fixtures/upstream-guides").join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| {
            let mut obj: Value = serde::Deserialize::deserialize(d).expect("the guide's YAML");
            obj["metadata"]["namespace"] = json!(ns);
            obj
        })
        .collect()
}

/// A ServiceAccount with `annotations`.
pub async fn apply_service_account(client: &Client, ns: &str, name: &str, annotations: &[(&str, &str)]) {
    let annotations: BTreeMap<&str, &str> = annotations.iter().copied().collect();
    let obj = json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": name, "namespace": ns, "annotations": annotations}});
    Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .patch(name, &PatchParams::apply("keyward-azure-tests").force(), &Patch::Apply(&obj))
        .await
        .unwrap_or_else(|e| panic!("apply ServiceAccount {ns}/{name}: {e}"));
}

/// The control plane's ServiceAccount issuer and its signing keys, as Entra ID reads them from
/// the issuer's discovery document.
pub async fn issuer(client: &Client) -> (String, Value) {
    let get = |path: &str| {
        let req = http::Request::get(path).body(Vec::new()).expect("request");
        let client = client.clone();
        async move { client.request::<Value>(req).await.expect("the API server's OIDC discovery") }
    };
    let config = get("/.well-known/openid-configuration").await;
    let jwks = get("/openid/v1/jwks").await;
    (config["issuer"].as_str().expect("issuer").to_string(), jwks)
}

/// A remote reference.
pub fn remote(key: &str, property: &str, version: &str, policy: &str) -> Option<ExternalSecretDataRemoteRef> {
    Some(ExternalSecretDataRemoteRef {
        key: key.into(),
        property: property.into(),
        version: version.into(),
        metadata_policy: policy.into(),
        ..Default::default()
    })
}

/// GetSecret, as bytes.
pub async fn get_bytes(
    c: &Grpc,
    r: &ProviderReference,
    ns: &str,
    remote_ref: Option<ExternalSecretDataRemoteRef>,
) -> Result<Vec<u8>, tonic::Status> {
    let req =
        GetSecretRequest { provider_ref: Some(r.clone()), source_namespace: ns.into(), remote_ref, max_age_millis: 0 };
    Ok(c.clone().get_secret(req).await?.into_inner().value)
}

/// GetSecret of `key`, as text.
pub async fn get(c: &Grpc, r: &ProviderReference, ns: &str, key: &str) -> Result<String, tonic::Status> {
    get_bytes(c, r, ns, remote(key, "", "", "")).await.map(|v| String::from_utf8_lossy(&v).into_owned())
}
