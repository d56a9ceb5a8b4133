//! The VaultDynamicSecret generator served by the Vault provider process
//! (`provider.v1.GeneratorProvider/Generate`), over real mTLS, against `vault server -dev` and
//! the local control plane: a PKI certificate, an `auth` answer, a raw answer, an empty answer
//! refused unless allowed, the tenant boundary, the store-calls metric, and `retrySettings`
//! (a sealed Vault ridden out, a refusal never sent twice).

use keyward_provider_runtime::testkit::{generate, value_text as text};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use keyward_e2e::stores::VaultDev;
use keyward_e2e::with_temp_namespace;
use keyward_proto::v1::GenerateRequest;
use keyward_provider_runtime::testkit::{http_get, launch};
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common;

const POLICY: &str = r#"
path "pki/issue/web" { capabilities = ["create", "update"] }
path "kv1/*" { capabilities = ["create", "read", "update"] }
path "auth/token/create" { capabilities = ["create", "update"] }
"#;

/// A dev server with a PKI engine (root CA, role `web` for example.com), a KV v1 engine, and
/// a token of the `gen` policy.
fn vault() -> (VaultDev, String) {
    let v = VaultDev::start();
    v.policy("gen", POLICY);
    v.enable_pki();
    v.cli(&["secrets", "enable", "-path=kv1", "-version=1", "kv"]);
    let token = v.json(&["token", "create"], &["-policy=gen"])["auth"]["client_token"].as_str().unwrap().to_string();
    (v, token)
}

fn request(ns: &str, name: &str, spec: Value) -> GenerateRequest {
    GenerateRequest {
        kind: "VaultDynamicSecret".into(),
        spec_json: spec.to_string(),
        namespace: ns.into(),
        name: name.into(),
    }
}

/// A Secret `vault-token` holding `token` in `ns`, and the `spec.provider` of a generator
/// that logs in with it.
async fn token_store(client: &kube::Client, ns: &str, v: &VaultDev, token: String) -> Value {
    let s = Secret {
        metadata: ObjectMeta { name: Some("vault-token".into()), ..Default::default() },
        data: Some([("token".to_string(), ByteString(token.into_bytes()))].into()),
        ..Default::default()
    };
    Api::<Secret>::namespaced(client.clone(), ns).create(&PostParams::default(), &s).await.unwrap();
    json!({"server": v.address(), "auth": {"tokenSecretRef": {"name": "vault-token", "key": "token"}}})
}

/// The store-calls counter of the provider's `/metrics` for one call name and status.
async fn calls(health: std::net::SocketAddr, call: &str) -> u64 {
    let (_, body) = http_get(health, "/metrics").await.unwrap();
    let wanted = format!(
        "externalsecret_provider_api_calls_count{{provider=\"HashiCorp/Vault\",call=\"{call}\",status=\"success\"}} "
    );
    body.lines().find_map(|l| l.strip_prefix(&wanted)).map(|n| n.trim().parse().unwrap()).unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread")]
async fn vault_dynamic_secrets_issue_certificates_and_keep_to_the_namespace() {
    let _guard = common::shared().await;
    let (v, token) = vault();
    let p = launch("keyward-provider-vault", &[]).await.unwrap();
    let mut c = p.generator_client().await.unwrap();
    with_temp_namespace(&[], |client, ns| async move {
        let provider = token_store(&client, &ns, &v, token).await;

        // A certificate from the PKI engine: POST with parameters as the JSON body, the answer's
        // `data`, nested values JSON-encoded.
        let writes = calls(p.health, "WriteSecretData").await;
        let pki = json!({"method": "POST", "path": "pki/issue/web", "parameters": {"common_name": "a.example.com"},
                         "provider": provider});
        let values = generate(&mut c, request(&ns, "pki", pki.clone())).await.unwrap();
        assert!(text(&values, "certificate").starts_with("-----BEGIN CERTIFICATE-----"), "{values:?}");
        assert!(text(&values, "private_key").contains("PRIVATE KEY-----"));
        assert!(text(&values, "issuing_ca").starts_with("-----BEGIN CERTIFICATE-----"));
        let chain: Vec<String> = serde_json::from_slice(&values["ca_chain"]).unwrap();
        assert_eq!(chain.len(), 1, "a list is JSON-encoded");
        assert_eq!(calls(p.health, "WriteSecretData").await, writes + 1, "the issue is a counted store call");
        let again = generate(&mut c, request(&ns, "pki", pki)).await.unwrap();
        assert_ne!(again["serial_number"], values["serial_number"], "each generation issues a new certificate");

        // resultType Auth: a child token from auth/token/create is in the answer's `auth`.
        let auth = json!({"method": "POST", "path": "auth/token/create", "resultType": "Auth",
                          "parameters": {"policies": ["gen"], "ttl": "10m"}, "provider": provider});
        let values = generate(&mut c, request(&ns, "child", auth)).await.unwrap();
        let child = text(&values, "client_token");
        assert!(child.starts_with("hvs."), "{child}");
        let policies: Vec<String> = serde_json::from_slice(&values["policies"]).unwrap();
        assert!(policies.contains(&"gen".to_string()), "{policies:?}");
        // resultType Raw: the whole answer, its objects JSON-encoded.
        let raw = json!({"method": "POST", "path": "auth/token/create", "resultType": "Raw",
                         "parameters": {"policies": ["gen"], "ttl": "10m"}, "provider": provider});
        let values = generate(&mut c, request(&ns, "raw", raw)).await.unwrap();
        let whole_auth: Value = serde_json::from_slice(&values["auth"]).unwrap();
        assert!(whole_auth["client_token"].as_str().unwrap().starts_with("hvs."), "{whole_auth}");
        assert!(values.contains_key("request_id") && values.contains_key("lease_duration"), "{:?}", values.keys());

        // A KV v1 write answers 204: nothing to return, refused unless allowEmptyResponse.
        let empty = json!({"method": "POST", "path": format!("kv1/{ns}/marker"), "parameters": {"a": "b"},
                           "provider": provider});
        let e = generate(&mut c, request(&ns, "empty", empty.clone())).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::NotFound, "{e:?}");
        assert!(e.message().contains("allowEmptyResponse"), "{e:?}");
        let mut allowed = empty;
        allowed["allowEmptyResponse"] = json!(true);
        assert!(generate(&mut c, request(&ns, "empty", allowed)).await.unwrap().is_empty());
        // A GET sends getParameters as its query (KV v1 reads ignore it, the read succeeds).
        let get = json!({"path": format!("kv1/{ns}/marker"), "getParameters": {"x": ["1"]}, "provider": provider});
        assert_eq!(text(&generate(&mut c, request(&ns, "get", get)).await.unwrap(), "a"), "b");

        // The tenant boundary: the spec's Secret in another namespace is refused before any
        // call, as a SecretStore of the namespace would be.
        let other = json!({"method": "POST", "path": "pki/issue/web", "parameters": {"common_name": "b.example.com"},
                           "provider": {"server": v.address(), "auth": {"tokenSecretRef":
                               {"name": "vault-token", "key": "token", "namespace": "kube-system"}}}});
        let e = generate(&mut c, request(&ns, "other", other)).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e:?}");
        assert!(e.message().contains("kube-system"), "{e:?}");
        // A path leaving the API path, and a kind this provider does not generate.
        let escape = json!({"path": "pki/../sys/seal", "method": "PUT", "provider": provider});
        let e = generate(&mut c, request(&ns, "escape", escape)).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e:?}");
        let mut password = request(&ns, "pw", json!({"length": 12}));
        password.kind = "Password".into();
        let e = generate(&mut c, password).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unimplemented, "{e:?}");
    })
    .await;
}

/// `spec.retrySettings` against a real server: while Vault is sealed (every request answers
/// 503) a generation without them fails at once, and one with them is served once Vault is
/// unsealed, a second after it started; a permission denied (403) is sent once, whatever the
/// settings, as Vault's audit log shows; an unreadable `retryInterval` is refused before any
/// request.
#[tokio::test(flavor = "multi_thread")]
async fn retry_settings_ride_out_a_sealed_vault_and_never_repeat_a_refusal() {
    let _guard = common::shared().await;
    let (v, token) = vault();
    let unseal_key = v
        .process()
        .log()
        .lines()
        .find_map(|l| l.trim().strip_prefix("Unseal Key:").map(|k| k.trim().to_string()))
        .unwrap_or_else(|| panic!("no unseal key in the dev server's log:\n{}", v.process().log()));
    let audit = v.audit(&[]);
    let v = Arc::new(v);
    let p = launch("keyward-provider-vault", &[]).await.unwrap();
    let mut c = p.generator_client().await.unwrap();
    with_temp_namespace(&[], |client, ns| async move {
        let provider = token_store(&client, &ns, &v, token).await;
        let spec = |path: &str, retry: Value| {
            let mut s = json!({"method": "POST", "path": path, "parameters": {"common_name": "r.example.com"},
                               "provider": provider});
            if !retry.is_null() {
                s["retrySettings"] = retry;
            }
            s
        };
        let retrying = json!({"maxRetries": 5, "retryInterval": "1s"});

        v.cli(&["operator", "seal"]);
        let e = generate(&mut c, request(&ns, "sealed", spec("pki/issue/web", Value::Null))).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unavailable, "{e:?}");
        assert!(e.message().contains("sealed"), "{e:?}");

        let unsealer = {
            let v = v.clone();
            tokio::task::spawn_blocking(move || {
                std::thread::sleep(Duration::from_secs(1));
                v.cli(&["operator", "unseal", &unseal_key])
            })
        };
        let started = Instant::now();
        let values = generate(&mut c, request(&ns, "patient", spec("pki/issue/web", retrying.clone()))).await;
        let took = started.elapsed();
        let unsealed = unsealer.await.unwrap();
        let values = values.unwrap_or_else(|e| panic!("{e:?}; unseal said: {unsealed}"));
        assert!(text(&values, "certificate").starts_with("-----BEGIN CERTIFICATE-----"), "{values:?}");
        assert!(took >= Duration::from_secs(1), "served only after the unseal: {took:?}");

        // A refusal is the answer: sent once, without waiting for a retry.
        let before = audit.count("pki/issue/other");
        let started = Instant::now();
        let e = generate(&mut c, request(&ns, "refused", spec("pki/issue/other", retrying.clone()))).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e:?}");
        assert!(started.elapsed() < Duration::from_secs(1), "no retry pause: {:?}", started.elapsed());
        assert_eq!(audit.count("pki/issue/other"), before + 1, "the 403 was not sent again");

        let bad = spec("pki/issue/web", json!({"maxRetries": 2, "retryInterval": "soon"}));
        let e = generate(&mut c, request(&ns, "bad", bad)).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e:?}");
        assert!(e.message().contains("spec.retrySettings.retryInterval"), "{e:?}");
    })
    .await;
}
