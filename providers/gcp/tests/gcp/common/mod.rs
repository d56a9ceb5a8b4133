//! What the GCP provider's tests share: the Secret Manager protocol test server
//! ([`keyward_e2e::stores::SecretManagerServer`]) over HTTPS with a test CA, the
//! `GCPSecretManager` CRD on the local control plane, configuration objects and Secrets, and the
//! provider process pointed at the server (its endpoints are the process's environment).

// Each test module uses a part of this module.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use keyward_certs::{CertificateAuthority, Usage};
use keyward_e2e::stores::SecretManagerServer;
use keyward_provider_gcp::api::GCPSecretManager;
use keyward_provider_runtime::testkit::{RunningProvider, launch};
use kube::api::{Patch, PatchParams};
use kube::{Api, Client, CustomResourceExt};
use serde_json::{Value, json};

pub use keyward_e2e::turns::{exclusive, shared};

/// The project the tests' secrets live in.
pub const PROJECT: &str = "keyward-test";

/// A server, and the CA file its certificate chains to (for the provider's `SSL_CERT_FILE`).
pub struct Google {
    pub server: SecretManagerServer,
    pub ca_file: PathBuf,
    _dir: tempfile::TempDir,
}

/// Starts the protocol test server with a certificate of a fresh CA.
pub async fn google() -> Google {
    let ca = CertificateAuthority::generate("keyward-gcp-test-ca", Duration::from_secs(86_400)).expect("CA");
    let leaf = ca.issue(&["127.0.0.1", "localhost"], Usage::Server, Duration::from_secs(86_400)).expect("leaf");
    let server = SecretManagerServer::start((&leaf.cert_pem, &leaf.key_pem)).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, ca.cert_pem()).expect("CA file");
    Google { server, ca_file, _dir: dir }
}

/// The provider process, every Google endpoint at `g`'s server.
pub async fn start_provider(g: &Google) -> RunningProvider {
    start_provider_at(g, &g.server.url).await
}

/// The provider process with Secret Manager at `sm` (tokens still at `g`).
pub async fn start_provider_at(g: &Google, sm: &str) -> RunningProvider {
    let ca = g.ca_file.to_string_lossy().to_string();
    let oauth = format!("{}/token", g.server.url);
    let env = [
        ("KEYWARD_GCP_SECRET_MANAGER_ENDPOINT", sm),
        ("KEYWARD_GCP_SECRET_MANAGER_REGIONAL_ENDPOINT", sm),
        ("KEYWARD_GCP_STS_ENDPOINT", g.server.url.as_str()),
        ("KEYWARD_GCP_IAM_CREDENTIALS_ENDPOINT", g.server.url.as_str()),
        ("KEYWARD_GCP_OAUTH_TOKEN_ENDPOINT", oauth.as_str()),
        ("KEYWARD_GCP_CLUSTER_NAME", "keyward-e2e"),
        ("KEYWARD_GCP_CLUSTER_LOCATION", "europe-west1"),
        ("SSL_CERT_FILE", ca.as_str()),
    ];
    launch("keyward-provider-gcp", &env).await.unwrap_or_else(|e| panic!("{e}"))
}

/// Installs the `GCPSecretManager` CRD (idempotent) and waits until it is served.
pub async fn install_crd(client: &Client) {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = GCPSecretManager::crd();
    let name = crd.metadata.name.clone().expect("name");
    api.patch(&name, &PatchParams::apply("keyward-gcp-tests").force(), &Patch::Apply(&crd)).await.expect("CRD");
    for _ in 0..100 {
        if Api::<GCPSecretManager>::all(client.clone()).list(&Default::default()).await.is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the GCPSecretManager CRD is not served");
}

/// A configuration reading with the service-account key in Secret `secret` (key `key.json`).
pub fn key_spec(secret: &str) -> Value {
    json!({"projectID": PROJECT, "auth": {"secretRef": {"secretAccessKeySecretRef": {"name": secret, "key": "key.json"}}}})
}

/// Applies a `GCPSecretManager` configuration object.
pub async fn apply_config(client: &Client, ns: &str, name: &str, spec: Value) {
    let obj = json!({
        "apiVersion": "provider.external-secrets.io/v2alpha1",
        "kind": "GCPSecretManager",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    });
    Api::<GCPSecretManager>::namespaced(client.clone(), ns)
        .patch(name, &PatchParams::apply("keyward-gcp-tests").force(), &Patch::Apply(&obj))
        .await
        .unwrap_or_else(|e| panic!("apply GCPSecretManager {ns}/{name}: {e}"));
}

/// Deletes the configuration object `name` and, once it is gone, creates it again with `spec`
/// (a new UID, generation 1 again).
pub async fn recreate_config(client: &Client, ns: &str, name: &str, spec: Value) {
    let api = Api::<GCPSecretManager>::namespaced(client.clone(), ns);
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
        .patch(name, &PatchParams::apply("keyward-gcp-tests").force(), &Patch::Apply(&obj))
        .await
        .unwrap_or_else(|e| panic!("apply Secret {ns}/{name}: {e}"));
}

/// Applies a ServiceAccount with `annotations`.
pub async fn apply_service_account(client: &Client, ns: &str, name: &str, annotations: &[(&str, &str)]) {
    let annotations: BTreeMap<&str, &str> = annotations.iter().copied().collect();
    let obj = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": ns, "annotations": annotations}});
    Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .patch(name, &PatchParams::apply("keyward-gcp-tests").force(), &Patch::Apply(&obj))
        .await
        .unwrap_or_else(|e| panic!("apply ServiceAccount {ns}/{name}: {e}"));
}
