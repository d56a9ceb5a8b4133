//! What the Barbican provider's tests share: real Keystone and Barbican servers
//! ([`keyward_e2e::stores::OpenStack`]), the `Barbican` CRD on the local control plane,
//! configuration objects and Secrets, the provider process and calls to it.

// Each test module uses a part of this module.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use keyward_e2e::stores::OpenStack;
use keyward_proto::v1::secret_store_provider_client::SecretStoreProviderClient;
use keyward_proto::v1::{ExternalSecretDataRemoteRef, GetSecretMapRequest, GetSecretRequest, ProviderReference};
use keyward_provider_barbican::api::Barbican;
use keyward_provider_runtime::testkit::{RunningProvider, launch, provider_ref};
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Api, Client, CustomResourceExt};
use serde_json::{Value, json};
use tonic::Status;
use tonic::transport::Channel;

/// Turns ([`keyward_e2e::turns`]): each test starts its own Keystone, Barbican and provider; the
/// conformance suite's oversized-response case checks the provider's peak RSS, so it runs alone.
pub use keyward_e2e::turns::{exclusive, shared};

/// A client of the provider.
pub type Grpc = SecretStoreProviderClient<Channel>;

/// Starts Keystone and Barbican (first run: installs them) off the async workers.
pub async fn openstack() -> OpenStack {
    tokio::task::spawn_blocking(OpenStack::start).await.unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
}

/// Installs the `Barbican` CRD (idempotent) and waits until it is served.
pub async fn install_crd(client: &Client) {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = Barbican::crd();
    let name = crd.metadata.name.clone().expect("name");
    api.patch(&name, &PatchParams::apply("keyward-barbican-tests").force(), &Patch::Apply(&crd)).await.expect("CRD");
    for _ in 0..100 {
        if Api::<Barbican>::all(client.clone()).list(&Default::default()).await.is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the Barbican CRD is not served");
}

/// The provider process.
pub async fn start_provider() -> RunningProvider {
    launch("keyward-provider-barbican", &[]).await.unwrap_or_else(|e| panic!("{e}"))
}

/// The spec of a configuration that logs in as the OpenStack tenant user, its password in the
/// Secret `secret` (key `password`).
pub fn spec(os: &OpenStack, secret: &str) -> Value {
    json!({
        "authURL": os.auth_url(),
        "tenantName": os.project(),
        "domainName": os.domain(),
        "region": os.region(),
        "auth": {
            "username": {"value": os.user()},
            "password": {"secretRef": {"name": secret, "key": "password"}},
        },
    })
}

/// Applies a `Barbican` configuration object.
pub async fn apply_config(client: &Client, ns: &str, name: &str, spec: Value) {
    let obj = json!({
        "apiVersion": "provider.external-secrets.io/v2alpha1",
        "kind": "Barbican",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    });
    Api::<Barbican>::namespaced(client.clone(), ns)
        .patch(name, &PatchParams::apply("keyward-barbican-tests").force(), &Patch::Apply(&obj))
        .await
        .unwrap_or_else(|e| panic!("apply Barbican {ns}/{name}: {e}"));
}

/// Applies a Secret with `data` (text).
pub async fn apply_secret(client: &Client, ns: &str, name: &str, data: &[(&str, &str)]) {
    let data: BTreeMap<&str, &str> = data.iter().copied().collect();
    let obj = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": ns},
        "stringData": data,
    });
    Api::<Secret>::namespaced(client.clone(), ns)
        .patch(name, &PatchParams::apply("keyward-barbican-tests").force(), &Patch::Apply(&obj))
        .await
        .unwrap_or_else(|e| panic!("apply Secret {ns}/{name}: {e}"));
}

/// The resource of a SecretStore or ClusterSecretStore.
pub fn store_resource(kind: &str) -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk("external-secrets.io", "v1", kind))
}

/// Applies a SecretStore (namespaced) or ClusterSecretStore object.
pub async fn apply_store(client: &Client, obj: &Value) {
    let kind = obj["kind"].as_str().expect("kind");
    let name = obj["metadata"]["name"].as_str().expect("name");
    let api: Api<DynamicObject> = match obj["metadata"]["namespace"].as_str() {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &store_resource(kind)),
        None => Api::all_with(client.clone(), &store_resource(kind)),
    };
    api.patch(name, &PatchParams::apply("keyward-barbican-tests").force(), &Patch::Apply(obj))
        .await
        .unwrap_or_else(|e| panic!("apply {kind} {name}: {e}"));
}

/// A reference to the `Barbican` object `name` of the source namespace.
pub fn barbican_ref(name: &str) -> ProviderReference {
    provider_ref("Barbican", name, "", "Provider")
}

/// A remote reference.
pub fn remote(key: &str, property: &str) -> Option<ExternalSecretDataRemoteRef> {
    Some(ExternalSecretDataRemoteRef { key: key.into(), property: property.into(), ..Default::default() })
}

/// GetSecret, as text.
pub async fn get(c: &Grpc, r: &ProviderReference, ns: &str, key: &str, property: &str) -> Result<String, Status> {
    let req = GetSecretRequest {
        provider_ref: Some(r.clone()),
        source_namespace: ns.into(),
        remote_ref: remote(key, property),
        max_age_millis: 0,
    };
    let v = c.clone().get_secret(req).await?.into_inner().value;
    Ok(String::from_utf8_lossy(&v).into_owned())
}

/// GetSecret, as bytes.
pub async fn get_bytes(c: &Grpc, r: &ProviderReference, ns: &str, key: &str) -> Result<Vec<u8>, Status> {
    let req = GetSecretRequest {
        provider_ref: Some(r.clone()),
        source_namespace: ns.into(),
        remote_ref: remote(key, ""),
        max_age_millis: 0,
    };
    Ok(c.clone().get_secret(req).await?.into_inner().value)
}

/// GetSecretMap, values as text, sorted.
pub async fn get_map(
    c: &Grpc,
    r: &ProviderReference,
    ns: &str,
    key: &str,
    property: &str,
) -> Result<BTreeMap<String, String>, Status> {
    let req = GetSecretMapRequest {
        provider_ref: Some(r.clone()),
        source_namespace: ns.into(),
        remote_ref: remote(key, property),
        max_age_millis: 0,
    };
    let m: HashMap<String, Vec<u8>> = c.clone().get_secret_map(req).await?.into_inner().secrets;
    Ok(m.into_iter().map(|(k, v)| (k, String::from_utf8_lossy(&v).into_owned())).collect())
}
