//! End to end through a provider the rest of Keyward knows only by its registry row: the
//! Webhook provider (`providers/webhook`). The webhook admits a SecretStore's
//! `spec.provider.webhook` block with the kind's own rules (a malformed block and one naming
//! another namespace's Secret are denied); the reconciler sends the store to the `webhook`
//! process, reports the store Ready and syncs an ExternalSecret from a real HTTP server, and a
//! change at the server reaches the Secret on refresh. A Provider naming a `Webhook`
//! configuration object is served too, and editing that object (a kind the reconciler watches
//! only through the registry) re-checks the Provider. A ClusterSecretStore naming a Secret without
//! its namespace is denied at admission and refused by the provider when admission is bypassed.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use k8s_openapi::api::core::v1::Secret;
use keyward_crds::{ExternalSecret, Provider, SecretStore};
use keyward_e2e::with_temp_namespace;
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Api, Client};
use serde_json::json;

use crate::support::*;

const WAIT: Duration = Duration::from_secs(90);

/// The `result.jsonPath` of the configurations: the entry's property of the answer's `data`.
const PROPERTY_PATH: &str = "$.data.{{ .remoteRef.property }}";

/// A real HTTP server on loopback answering `GET /secrets/<key>` with the JSON body stored under
/// the key (404 otherwise), one connection at a time, each closed after its answer.
struct HttpStore {
    url: String,
    bodies: Arc<Mutex<HashMap<String, String>>>,
}

impl HttpStore {
    fn start() -> HttpStore {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let bodies: Arc<Mutex<HashMap<String, String>>> = Arc::default();
        let served = bodies.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let mut reader = BufReader::new(&stream);
                let mut request_line = String::new();
                if reader.read_line(&mut request_line).is_err() {
                    continue;
                }
                // The headers, up to the empty line (GET has no body).
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                    line.clear();
                }
                let path = request_line.split_whitespace().nth(1).unwrap_or_default();
                let key = path.strip_prefix("/secrets/").unwrap_or_default().split('?').next().unwrap_or_default();
                let body = served.lock().unwrap().get(key).cloned();
                let (status, body) = match body {
                    Some(b) => ("200 OK", b),
                    None => ("404 Not Found", "{}".to_string()),
                };
                let answer = format!(
                    "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = (&stream).write_all(answer.as_bytes());
            }
        });
        HttpStore { url, bodies }
    }

    fn put(&self, key: &str, body: serde_json::Value) {
        self.bodies.lock().unwrap().insert(key.to_string(), body.to_string());
    }
}

/// Registers the webhook for SecretStores and Webhook configuration objects of `ns`.
async fn start_webhook(client: &Client, pki: &Pki, ns: &str) -> Webhook {
    let mut webhook = Webhook::start(&pki.issue_server_dir("webhook")).await;
    let ca = base64::engine::general_purpose::STANDARD.encode(&pki.ca);
    let rules = json!([
        {"apiGroups": ["external-secrets.io"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
         "resources": ["secretstores"], "scope": "Namespaced"},
        {"apiGroups": ["provider.external-secrets.io"], "apiVersions": ["v2alpha1"], "operations": ["CREATE", "UPDATE"],
         "resources": ["webhooks"], "scope": "Namespaced"},
    ]);
    let config = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": format!("keyward-plugin-e2e-{ns}")},
        "webhooks": [{
            "name": "plugin.e2e.keyward.dev",
            "clientConfig": {"url": format!("{}/validate", webhook.url()), "caBundle": ca},
            "rules": rules, "failurePolicy": "Fail", "sideEffects": "None",
            "admissionReviewVersions": ["v1"], "timeoutSeconds": 10,
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
        }],
    });
    webhook.register(client, config).await;
    webhook
}

fn secret_store(ns: &str, name: &str, webhook: serde_json::Value) -> serde_json::Value {
    json!({"apiVersion": "external-secrets.io/v1", "kind": "SecretStore",
           "metadata": {"name": name, "namespace": ns, "labels": {CLASS_LABEL: ns}},
           "spec": {"provider": {"webhook": webhook}}})
}

fn external_secret(ns: &str, name: &str, store_kind: &str, store: &str) -> serde_json::Value {
    json!({"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
           "metadata": {"name": name, "namespace": ns, "labels": {CLASS_LABEL: ns}},
           "spec": {"refreshInterval": "1s", "secretStoreRef": {"kind": store_kind, "name": store},
                    "target": {"name": name},
                    "data": [{"secretKey": "user", "remoteRef": {"key": "db", "property": "user"}}]}})
}

/// Waits until Secret `name` holds `user`; on timeout, fails with the ExternalSecret's status.
async fn wait_synced(client: &Client, ns: &str, name: &str, user: &str) {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let externals: Api<ExternalSecret> = Api::namespaced(client.clone(), ns);
    let deadline = tokio::time::Instant::now() + WAIT;
    while tokio::time::Instant::now() < deadline {
        let s = secrets.get_opt(name).await.unwrap();
        if s.as_ref().and_then(|s| value(s, "user")).as_deref() == Some(user) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let status = externals.get(name).await.map(|es| format!("{:?}", es.status)).unwrap_or_else(|e| e.to_string());
    panic!("{name} does not hold user={user} after {WAIT:?}; ExternalSecret status: {status}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_providers_stores_are_admitted_checked_and_synced() {
    let _turn = shared().await;
    with_temp_namespace(&[], |client, ns| async move {
        let http = HttpStore::start();
        http.put("db", json!({"data": {"user": "app", "password": "s3cret"}}));
        let pki = Pki::new();
        pki.install(&client, &ns).await;
        // The store listens on loopback, which a tenant's configuration may not reach by default.
        let provider = ProviderProcess::start_with_env(
            "keyward-provider-webhook",
            pki.provider_dir(),
            &[(keyward_e2e::TENANT_DENIED_NETWORKS_ENV, "")],
        )
        .await;
        let _webhook = start_webhook(&client, &pki, &ns).await;
        let _reconciler = Reconciler::start_with_stores(&ns, &[("webhook", &provider)], &[]).await;

        // Admission judges the block with the Webhook kind's own rules, under the store's key.
        let stores: Api<SecretStore> = Api::namespaced(client.clone(), &ns);
        let pp = PatchParams::apply("e2e-test");
        let bad = secret_store(&ns, "bad", json!({"url": "ftp://example", "result": {"jsonPath": "$["}}));
        let err = stores.patch("bad", &pp, &Patch::Apply(bad)).await.unwrap_err().to_string();
        assert!(err.contains("spec.provider.webhook.url"), "{err}");
        let across = secret_store(
            &ns,
            "across",
            json!({"url": format!("{}/secrets/x", http.url),
                   "secrets": [{"name": "creds", "secretRef": {"name": "c", "key": "k", "namespace": "kube-system"}}]}),
        );
        let err = stores.patch("across", &pp, &Patch::Apply(across)).await.unwrap_err().to_string();
        assert!(err.contains("spec.provider.webhook.secrets"), "{err}");

        // Upstream's shape: the key in the URL, the property picked by a templated JSONPath.
        let url = format!("{}/secrets/{{{{ .remoteRef.key }}}}", http.url);
        apply(&stores, secret_store(&ns, "http", json!({"url": url, "result": {"jsonPath": PROPERTY_PATH}}))).await;
        let ready = eventually("the SecretStore is Ready", WAIT, || async {
            let s = stores.get("http").await.ok()?;
            ready_of(&s.status?.conditions).filter(|(status, ..)| status == "True")
        })
        .await;
        assert_eq!(ready.0, "True");
        let externals: Api<ExternalSecret> = Api::namespaced(client.clone(), &ns);
        apply(&externals, external_secret(&ns, "from-store", "SecretStore", "http")).await;
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
        wait_synced(&client, &ns, "from-store", "app").await;
        http.put("db", json!({"data": {"user": "rotated"}}));
        wait_synced(&client, &ns, "from-store", "rotated").await;

        // A Provider naming a Webhook configuration object: same provider, same rules.
        let resource = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("provider.external-secrets.io", "v2alpha1", "Webhook"),
            "webhooks",
        );
        let configs: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &resource);
        let config = |path: &str| {
            json!({"apiVersion": "provider.external-secrets.io/v2alpha1", "kind": "Webhook",
                   "metadata": {"name": "cfg"},
                   "spec": {"url": format!("{}/{path}/{{{{ .remoteRef.key }}}}", http.url), "result": {"jsonPath": PROPERTY_PATH}}})
        };
        configs.patch("cfg", &pp, &Patch::Apply(config("nowhere"))).await.unwrap();
        let providers: Api<Provider> = Api::namespaced(client.clone(), &ns);
        apply(
            &providers,
            json!({"apiVersion": "external-secrets.io/v1", "kind": "Provider",
                   "metadata": {"name": "http", "labels": {CLASS_LABEL: ns}},
                   "spec": {"config": {"address": provider.address(), "providerRef": {
                       "apiVersion": "provider.external-secrets.io/v2alpha1", "kind": "Webhook", "name": "cfg"}}}}),
        )
        .await;
        apply(&externals, external_secret(&ns, "from-provider", "Provider", "http")).await;
        // The object points at a path the server does not know: the ExternalSecret fails, the
        // Secret is not created.
        eventually("the ExternalSecret reports the missing value", WAIT, || async {
            let es = externals.get("from-provider").await.ok()?;
            ready_of(&es.status?.conditions).filter(|(status, ..)| status == "False")
        })
        .await;
        assert!(secrets.get_opt("from-provider").await.unwrap().is_none());
        // Fixing the object is seen through the registry's watch of the kind.
        configs.patch("cfg", &pp, &Patch::Apply(config("secrets"))).await.unwrap();
        wait_synced(&client, &ns, "from-provider", "rotated").await;
        eventually("the Provider is Ready", WAIT, || async {
            let p = providers.get("http").await.ok()?;
            ready_of(&p.status?.conditions).filter(|(status, ..)| status == "True")
        })
        .await;

        cluster_store_references_name_their_namespace(&client, &pki, &ns, &http).await;
    })
    .await;
}

/// A ClusterSecretStore is the operator's: a `secrets[]` entry without a namespace would be read
/// in the namespace of each ExternalSecret using it, so the tenant would supply what the
/// operator's templates send. Admission denies it naming the field; written while the webhook
/// is away, the provider refuses it before reading anything, and nothing syncs.
async fn cluster_store_references_name_their_namespace(client: &Client, pki: &Pki, ns: &str, http: &HttpStore) {
    let name = format!("{ns}-referent");
    let mut webhook = Webhook::start(&pki.issue_server_dir("webhook-css")).await;
    let ca = base64::engine::general_purpose::STANDARD.encode(&pki.ca);
    let registration = format!("keyward-css-e2e-{ns}");
    webhook
        .register(
            client,
            json!({
                "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
                "metadata": {"name": registration},
                "webhooks": [{
                    "name": "css.e2e.keyward.dev",
                    "clientConfig": {"url": format!("{}/validate", webhook.url()), "caBundle": ca},
                    "rules": [{"apiGroups": ["external-secrets.io"], "apiVersions": ["v1"],
                               "operations": ["CREATE", "UPDATE"], "resources": ["clustersecretstores"],
                               "scope": "Cluster"}],
                    "failurePolicy": "Fail", "sideEffects": "None", "admissionReviewVersions": ["v1"],
                    "timeoutSeconds": 10, "objectSelector": {"matchLabels": {CLASS_LABEL: ns}},
                }],
            }),
        )
        .await;
    // The tenant's Secret the store would read for its templates.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    apply(
        &secrets,
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "c", "labels": {"external-secrets.io/type": "webhook"}},
               "stringData": {"k": "tenant"}}),
    )
    .await;
    let store = json!({"apiVersion": "external-secrets.io/v1", "kind": "ClusterSecretStore",
        "metadata": {"name": name, "labels": {CLASS_LABEL: ns}},
        "spec": {"provider": {"webhook": {
            "url": format!("{}/secrets/{{{{ .remoteRef.key }}}}?from={{{{ .creds.k }}}}", http.url),
            "result": {"jsonPath": PROPERTY_PATH},
            "secrets": [{"name": "creds", "secretRef": {"name": "c", "key": "k"}}]}}}});
    let stores: Api<keyward_crds::ClusterSecretStore> = Api::all(client.clone());
    let pp = PatchParams::apply("e2e-test");
    let err = stores.patch(&name, &pp, &Patch::Apply(store.clone())).await.unwrap_err().to_string();
    assert!(
        err.contains("spec.provider.webhook.secrets[0].secretRef.namespace: is required on a ClusterSecretStore"),
        "{err}"
    );

    // Admission bypassed: the store exists, and the provider refuses it on every call.
    keyward_e2e::kubectl().args(["delete", "validatingwebhookconfiguration", &registration]).output().unwrap();
    apply(&stores, store).await;
    let externals: Api<ExternalSecret> = Api::namespaced(client.clone(), ns);
    apply(&externals, external_secret(ns, "from-cluster-store", "ClusterSecretStore", &name)).await;
    let message = eventually("the ExternalSecret names the missing namespace", WAIT, || async {
        let es = externals.get("from-cluster-store").await.ok()?;
        let (status, _, message) = ready_of(&es.status?.conditions)?;
        (status == "False" && message.contains("secretRef.namespace: is required")).then_some(message)
    })
    .await;
    assert!(message.contains("ClusterSecretStore"), "{message}");
    assert!(secrets.get_opt("from-cluster-store").await.unwrap().is_none(), "nothing synced: {message}");
    stores.delete(&name, &Default::default()).await.unwrap();
}
