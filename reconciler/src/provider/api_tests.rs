//! The store check against the fake API server: the status patch and event a Provider or
//! SecretStore gets when its provider cannot be reached or is not served. A provider that
//! answers needs a live gRPC server over mTLS, which these tests do not run (the end-to-end
//! tests do).

use std::time::Duration;

use keyward_certs::{CertificateAuthority, Usage};
use serde_json::Value;

use super::*;
use crate::fake_api::{self, Requests};
use keyward_provider_client::{CA_KEY, CERT_KEY, KEY_KEY};

const PROVIDER: &str = "/apis/external-secrets.io/v1/namespaces/team-a/providers/vault";
/// The TLS Secret of a provider at a `*.keyward.svc` address.
const TLS_SECRET: &str = "/api/v1/namespaces/keyward/secrets/keyward-provider-tls";
/// The TLS Secret of a provider at an IP address: the Provider's own namespace.
const OWN_TLS_SECRET: &str = "/api/v1/namespaces/team-a/secrets/keyward-provider-tls";
const EVENTS: &str = "POST /apis/events.k8s.io/v1/namespaces/team-a/events?";

/// Provider `vault` of team-a at `address`, with `status`.
fn provider(address: &str, status: Value) -> Arc<Provider> {
    Arc::new(
        serde_json::from_value(json!({
            "apiVersion": "external-secrets.io/v1", "kind": "Provider",
            "metadata": {"name": "vault", "namespace": "team-a", "generation": 2},
            "spec": {"config": {"address": address, "providerRef": {
                "apiVersion": "provider.external-secrets.io/v2alpha1", "kind": "Vault", "name": "remote"}}},
            "status": status,
        }))
        .unwrap(),
    )
}

/// The provider TLS Secret: a client certificate of a fresh CA, as the chart issues it.
fn tls_secret() -> Value {
    use base64::Engine;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let ca = CertificateAuthority::generate("test-ca", Duration::from_secs(600)).unwrap();
    let client = ca.issue(&["keyward-reconciler"], Usage::Client, Duration::from_secs(600)).unwrap();
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    json!({"apiVersion": "v1", "kind": "Secret",
           "metadata": {"name": "keyward-provider-tls", "namespace": "keyward"},
           "data": {CA_KEY: b64(ca.cert_pem()), CERT_KEY: b64(&client.cert_pem), KEY_KEY: b64(&client.key_pem)}})
}

/// An address where nothing listens (a port that was free a moment ago).
async fn closed_address() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    drop(listener);
    address
}

async fn check_provider(p: Arc<Provider>, tls: Option<Value>) -> (Action, Requests) {
    let (client, requests) = fake_api::client(move |method, path| match (method.as_str(), path.split('?').next()) {
        ("GET", Some(TLS_SECRET | OWN_TLS_SECRET)) => match &tls {
            Some(secret) => (200, secret.clone()),
            None => fake_api::not_found("secrets \"keyward-provider-tls\" not found"),
        },
        ("PATCH", Some(p)) if p.starts_with(PROVIDER) => {
            (200, serde_json::to_value(provider("x.keyward.svc:8443", json!({})).as_ref()).unwrap())
        }
        _ => (200, json!({})),
    });
    let action = reconcile_provider(p, Arc::new(Context::for_tests(client))).await.unwrap();
    (action, requests)
}

#[tokio::test]
async fn a_provider_that_does_not_answer_is_not_ready_and_retried_soon() {
    let p = provider(&closed_address().await, json!({}));
    let (action, requests) = check_provider(p, Some(tls_secret())).await;
    // Not ready: checked again within 10 s, not at the minute-long interval.
    assert_eq!(action, Action::requeue(Duration::from_secs(10)));
    assert_eq!(requests.all(), [format!("GET {OWN_TLS_SECRET}"), format!("PATCH {PROVIDER}/status?"), EVENTS.into()]);
    let status = &requests.body(1)["status"];
    let ready = &status["conditions"][0];
    assert_eq!(
        (&ready["type"], &ready["status"], &ready["reason"], &ready["observedGeneration"]),
        (&json!("Ready"), &json!("False"), &json!("ProviderUnreachable"), &json!(2))
    );
    assert!(ready["message"].as_str().unwrap().starts_with("Capabilities: "), "{ready}");
    // Nothing is known of what it can do.
    assert!(status.get("capabilities").is_none(), "{status}");
    let event = requests.body(2);
    assert_eq!(
        (&event["type"], &event["reason"], &event["action"]),
        (&json!("Warning"), &json!("NotReady"), &json!("Check"))
    );
    assert_eq!(event["note"], ready["message"]);
    assert_eq!((&event["regarding"]["kind"], &event["regarding"]["name"]), (&json!("Provider"), &json!("vault")));
}

#[tokio::test]
async fn a_missing_tls_secret_is_reported_without_a_call() {
    let p = provider("vault.keyward.svc:8443", json!({}));
    let (action, requests) = check_provider(p, None).await;
    assert_eq!(action, Action::requeue(Duration::from_secs(10)));
    assert_eq!(requests.all(), [format!("GET {TLS_SECRET}"), format!("PATCH {PROVIDER}/status?"), EVENTS.into()]);
    let ready = &requests.body(1)["status"]["conditions"][0];
    assert_eq!((&ready["status"], &ready["reason"]), (&json!("False"), &json!("ConfigError")));
    let message = ready["message"].as_str().unwrap();
    assert!(message.contains("Secret keyward/keyward-provider-tls not found"), "{message}");
}

#[tokio::test]
async fn an_unchanged_status_is_not_written_and_not_announced_again() {
    let first = provider("vault.keyward.svc:8443", json!({}));
    let (_, requests) = check_provider(first, None).await;
    let status = requests.body(1)["status"].clone();
    let again = provider("vault.keyward.svc:8443", status);
    let (action, requests) = check_provider(again, None).await;
    assert_eq!(action, Action::requeue(Duration::from_secs(10)));
    assert_eq!(requests.all(), [format!("GET {TLS_SECRET}")]);
}

#[tokio::test]
async fn a_ready_provider_that_stops_answering_is_announced_and_keeps_its_capabilities() {
    let was_ready = json!({
        "conditions": [{"type": "Ready", "status": "True", "reason": "Valid", "message": "ok",
                        "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 2}],
        "capabilities": "ReadWrite",
    });
    let p = provider(&closed_address().await, was_ready);
    let (_, requests) = check_provider(p, Some(tls_secret())).await;
    assert_eq!(requests.all(), [format!("GET {OWN_TLS_SECRET}"), format!("PATCH {PROVIDER}/status?"), EVENTS.into()]);
    let status = &requests.body(1)["status"];
    assert_eq!(status["conditions"][0]["status"], "False");
    assert_ne!(status["conditions"][0]["lastTransitionTime"], "2026-01-01T00:00:00Z");
    // What it could do last is what it still advertises (ExternalSecrets check it before a call).
    assert_eq!(status["capabilities"], "ReadWrite");
    assert_eq!(requests.body(2)["type"], "Warning");
}

#[tokio::test]
async fn a_secret_store_of_a_provider_not_served_is_reported_without_any_read() {
    let manifest = json!({
        "apiVersion": "external-secrets.io/v1", "kind": "SecretStore",
        "metadata": {"name": "legacy", "namespace": "team-a", "generation": 1},
        "spec": {"refreshInterval": 30, "provider": {"vault": {"server": "https://vault:8200", "path": "kv"}}},
    });
    let store: SecretStore = serde_json::from_value(manifest.clone()).unwrap();
    let (client, requests) = fake_api::client(move |_, _| (200, manifest.clone()));
    let action = reconcile_secret_store(Arc::new(store), Arc::new(Context::for_tests(client))).await;
    assert_eq!(action.unwrap(), Action::requeue(Duration::from_secs(10)));
    assert_eq!(
        requests.all(),
        ["PATCH /apis/external-secrets.io/v1/namespaces/team-a/secretstores/legacy/status?", EVENTS]
    );
    let status = &requests.body(0)["status"];
    let ready = &status["conditions"][0];
    assert_eq!((&ready["status"], &ready["reason"]), (&json!("False"), &json!("ProviderNotSupported")));
    let message = ready["message"].as_str().unwrap();
    assert!(
        message.contains(
            "spec.provider.vault is served by Keyward's vault provider, which this installation does not run"
        ),
        "{message}"
    );
    assert!(status.get("capabilities").is_none(), "no provider answered: {status}");
    assert_eq!(requests.body(1)["note"], message);
}
