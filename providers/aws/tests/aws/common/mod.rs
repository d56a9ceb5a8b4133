//! What the AWS provider's test modules share: the provider process pointed at moto, the test's
//! own SDK clients of moto, and the configuration objects.

// Each test module uses a part of this module.
#![allow(dead_code)]

use aws_config::{BehaviorVersion, Region};
use aws_credential_types::Credentials;
use aws_sdk_secretsmanager::Client as Sm;
use aws_sdk_ssm::Client as Ssm;
use keyward_e2e::stores::Moto;
use keyward_proto::v1::ProviderReference;
use keyward_provider_aws::api::SecretsManager;
use keyward_provider_runtime::testkit::{RunningProvider, TestkitError, launch, provider_ref};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;

/// Turns ([`keyward_e2e::turns`]): each test starts its own moto and provider. The batching and
/// shared-call tests count how many store calls concurrent reads coalesce into (a loaded machine
/// spreads the reads out), and the conformance suite's oversized-response case checks the
/// provider's peak RSS: those run alone.
pub use keyward_e2e::turns::{exclusive, shared};

pub const REGION: &str = "us-east-1";

/// The provider with its AWS endpoint at `endpoint`; its own (default chain) credentials are
/// test keys.
pub async fn start_provider_at(endpoint: &str) -> Result<RunningProvider, TestkitError> {
    let env = [
        ("AWS_ENDPOINT_URL", endpoint),
        ("AWS_ACCESS_KEY_ID", "operator"),
        ("AWS_SECRET_ACCESS_KEY", "operator"),
        ("AWS_EC2_METADATA_DISABLED", "true"),
    ];
    launch("keyward-provider-aws", &env).await
}

/// The provider pointed at moto.
pub async fn start_provider(moto: &Moto) -> RunningProvider {
    start_provider_at(&moto.endpoint()).await.unwrap_or_else(|e| panic!("{e}"))
}

/// A Secrets Manager client of the test itself, to seed and inspect moto.
pub async fn sm(moto: &Moto) -> Sm {
    Sm::new(&sdk(moto).await)
}

/// A Parameter Store client of the test itself, to seed and inspect moto.
pub async fn ssm(moto: &Moto) -> Ssm {
    Ssm::new(&sdk(moto).await)
}

async fn sdk(moto: &Moto) -> aws_config::SdkConfig {
    aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new(REGION))
        .endpoint_url(moto.endpoint())
        .credentials_provider(Credentials::new("test", "test", None, None, "test"))
        .http_client(
            aws_smithy_http_client::Builder::new()
                .tls_provider(aws_smithy_http_client::tls::Provider::Rustls(
                    aws_smithy_http_client::tls::rustls_provider::CryptoMode::Ring,
                ))
                .build_https(),
        )
        .load()
        .await
}

/// Creates or updates `obj` in `ns` (server-side apply), `api` as the resource's API.
async fn apply(api: Api<DynamicObject>, obj: serde_json::Value) -> Result<(), String> {
    let name = obj["metadata"]["name"].as_str().unwrap_or_default().to_string();
    api.patch(&name, &PatchParams::apply("keyward-aws-tests").force(), &Patch::Apply(&obj))
        .await
        .map(drop)
        .map_err(|e| format!("apply {name}: {e}"))
}

/// The Secret `aws-keys` (`id`, `secret`) in `ns`: the keys the configurations name.
pub async fn keys_secret(client: &Client, ns: &str) -> Result<(), String> {
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "aws-keys"},
                        "stringData": {"id": "AKIDTEST", "secret": "s3cr3t"}});
    let ar = ApiResource::erase::<k8s_openapi::api::core::v1::Secret>(&());
    apply(Api::namespaced_with(client.clone(), ns, &ar), secret).await
}

/// A SecretsManager configuration `name` in `ns`.
pub async fn config(client: &Client, ns: &str, name: &str, spec: serde_json::Value) -> Result<(), String> {
    let obj = json!({"apiVersion": "provider.external-secrets.io/v2alpha1", "kind": "SecretsManager",
                     "metadata": {"name": name}, "spec": spec});
    apply(Api::namespaced_with(client.clone(), ns, &ApiResource::erase::<SecretsManager>(&())), obj).await
}

/// `spec.auth` with the keys of the Secret `aws-keys` (of `ns`, or the configuration's own).
pub fn keys(ns: Option<&str>) -> serde_json::Value {
    let sel = |key: &str| match ns {
        Some(ns) => json!({"name": "aws-keys", "key": key, "namespace": ns}),
        None => json!({"name": "aws-keys", "key": key}),
    };
    json!({"secretRef": {"accessKeyIDSecretRef": sel("id"), "secretAccessKeySecretRef": sel("secret")}})
}

/// Creates a SecretStore in `ns` (a ClusterSecretStore without one) with `spec.provider.aws`.
pub async fn store(client: &Client, ns: Option<&str>, name: &str, aws: serde_json::Value) -> Result<(), String> {
    let kind = if ns.is_some() { "SecretStore" } else { "ClusterSecretStore" };
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("external-secrets.io", "v1", kind));
    let obj = json!({"apiVersion": "external-secrets.io/v1", "kind": kind,
                     "metadata": {"name": name}, "spec": {"provider": {"aws": aws}}});
    let api = match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    };
    apply(api, obj).await
}

/// A reference as the reconciler sends it for a SecretStore (in `ns`) or a ClusterSecretStore.
pub fn store_ref(kind: &str, name: &str, ns: &str) -> ProviderReference {
    ProviderReference { api_version: "external-secrets.io/v1".into(), ..provider_ref(kind, name, ns, kind) }
}

/// `spec.provider.aws` of a store of `service` under `prefix`.
pub fn aws_store(service: &str, prefix: &str, auth: serde_json::Value) -> serde_json::Value {
    json!({"service": service, "region": REGION, "prefix": prefix, "auth": auth})
}

/// A second key pair, `aws-keys-b`, in `ns`: another identity for the same store account.
pub async fn other_keys(client: &Client, ns: &str) {
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), ns);
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "aws-keys-b"},
                        "stringData": {"id": "AKIDOTHER", "secret": "other"}});
    secrets
        .patch("aws-keys-b", &PatchParams::apply("keyward-aws-tests").force(), &Patch::Apply(&secret))
        .await
        .expect("apply Secret aws-keys-b");
}

/// `spec.auth` with the keys of `aws-keys-b`.
pub fn other_auth() -> serde_json::Value {
    let sel = |key: &str| json!({"name": "aws-keys-b", "key": key});
    json!({"secretRef": {"accessKeyIDSecretRef": sel("id"), "secretAccessKeySecretRef": sel("secret")}})
}
