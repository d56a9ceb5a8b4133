//! What the webhook provider's tests share: a real HTTP(S) server acting as the store (values
//! in memory, httpbin-style echoes, an oversized and a slow answer), the `Webhook` CRD on the
//! local control plane, configuration objects and Secrets, and the provider process.

// Each test module uses a part of this module.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use keyward_certs::{CertificateAuthority, Usage};
use keyward_provider_runtime::testkit::{RunningProvider, TestkitError, launch};
use keyward_provider_webhook::api::Webhook;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client, CustomResourceExt};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{Value, json};
use tokio::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// The tests of this binary run side by side (the harness's threads) against one control plane;
/// each starts its own store server and provider process. The conformance suite measures: its
/// oversized-response case floods the provider with 300 MB answers from servers in this process
/// and checks the provider's peak RSS, so it runs alone ([`exclusive`]); every other test takes
/// [`shared`] and runs beside the others. Tokio's lock works across the tests' runtimes; a test
/// that panics drops its guard.
static SERIAL: RwLock<()> = RwLock::const_new(());

/// Runs alone: no other test of this binary runs while the guard lives.
pub async fn exclusive() -> RwLockWriteGuard<'static, ()> {
    SERIAL.write().await
}

/// Runs beside the other [`shared`] tests, never beside an [`exclusive`] one.
pub async fn shared() -> RwLockReadGuard<'static, ()> {
    SERIAL.read().await
}

/// Values by key, each a map of properties.
pub type Values = Arc<Mutex<BTreeMap<String, BTreeMap<String, String>>>>;

/// The store: an HTTP server on loopback, and the same routes over HTTPS with a test CA.
pub struct StoreServer {
    /// `http://127.0.0.1:<port>`.
    pub http_url: String,
    /// `https://127.0.0.1:<port>`.
    pub https_url: String,
    /// The CA of the HTTPS server (PEM).
    pub ca_pem: String,
    /// What the store holds.
    pub values: Values,
    /// The headers of the last request (lowercased names).
    pub last_headers: Arc<Mutex<BTreeMap<String, String>>>,
    /// The bodies pushed, in order: (key, body).
    pub pushes: Arc<Mutex<Vec<(String, String)>>>,
}

#[derive(Clone)]
struct AppState {
    values: Values,
    last_headers: Arc<Mutex<BTreeMap<String, String>>>,
    pushes: Arc<Mutex<Vec<(String, String)>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn remember(state: &AppState, headers: &HeaderMap) {
    let seen = headers.iter().map(|(k, v)| (k.as_str().to_string(), v.to_str().unwrap_or("").to_string())).collect();
    *lock(&state.last_headers) = seen;
}

/// `GET /secrets/<key>?property=p`: the value as a JSON object, or one property as text.
async fn read(
    State(state): State<AppState>,
    Path(key): Path<String>,
    Query(q): Query<BTreeMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    remember(&state, &headers);
    let values = lock(&state.values);
    let Some(props) = values.get(&key) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    match q.get("property").filter(|p| !p.is_empty()) {
        Some(p) => match props.get(p) {
            Some(v) => v.clone().into_response(),
            None => StatusCode::NOT_FOUND.into_response(),
        },
        None => axum::Json(props.clone()).into_response(),
    }
}

/// `POST /secrets/<key>?property=p`: the body as that property (merged), or a JSON object as
/// the whole value.
async fn write(
    State(state): State<AppState>,
    Path(key): Path<String>,
    Query(q): Query<BTreeMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    remember(&state, &headers);
    let text = String::from_utf8_lossy(&body).into_owned();
    lock(&state.pushes).push((key.clone(), text.clone()));
    let mut values = lock(&state.values);
    match q.get("property").filter(|p| !p.is_empty()) {
        Some(p) => {
            values.entry(key).or_default().insert(p.clone(), text);
        }
        None => match serde_json::from_str::<BTreeMap<String, Value>>(&text) {
            Ok(m) => {
                let props = m.into_iter().map(|(k, v)| (k, v.as_str().map_or_else(|| v.to_string(), str::to_string)));
                values.insert(key, props.collect());
            }
            Err(_) => {
                values.insert(key, BTreeMap::from([("value".to_string(), text)]));
            }
        },
    }
    StatusCode::NO_CONTENT.into_response()
}

/// `DELETE /secrets/<key>?property=p`.
async fn delete(
    State(state): State<AppState>,
    Path(key): Path<String>,
    Query(q): Query<BTreeMap<String, String>>,
) -> Response {
    let mut values = lock(&state.values);
    let Some(props) = values.get_mut(&key) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    match q.get("property").filter(|p| !p.is_empty()) {
        Some(p) => {
            if props.remove(p).is_none() {
                return StatusCode::NOT_FOUND.into_response();
            }
            if props.is_empty() {
                values.remove(&key);
            }
        }
        None => {
            values.remove(&key);
        }
    }
    StatusCode::NO_CONTENT.into_response()
}

/// `GET /get?…`: httpbin's echo, `{"args": {...}, "headers": {...}}`.
async fn echo(
    State(state): State<AppState>,
    Query(q): Query<BTreeMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    remember(&state, &headers);
    let h: BTreeMap<String, String> =
        headers.iter().map(|(k, v)| (k.as_str().to_string(), v.to_str().unwrap_or("").to_string())).collect();
    axum::Json(json!({"args": q, "headers": h})).into_response()
}

/// `POST /post`: httpbin's echo of a request body, `{"json": <the body as JSON, or null>,
/// "data": <the body as text>}`.
async fn echo_post(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    remember(&state, &headers);
    let text = String::from_utf8_lossy(&body).into_owned();
    let parsed = serde_json::from_str::<Value>(&text).unwrap_or(Value::Null);
    axum::Json(json!({"json": parsed, "data": text})).into_response()
}

/// `GET /redirect?to=<url>`: a redirect to `to`.
async fn redirect(Query(q): Query<BTreeMap<String, String>>) -> Response {
    let to = q.get("to").cloned().unwrap_or_default();
    (StatusCode::FOUND, [(axum::http::header::LOCATION, to)]).into_response()
}

/// `GET /big`: 5 MiB of JSON, over the provider's 4 MiB cap.
async fn big() -> Response {
    let s = "x".repeat(5 * 1024 * 1024);
    axum::Json(json!({ "value": s })).into_response()
}

/// `GET /hostile`: just under the provider's 4 MiB cap, one 1 MiB key holding 1.5 million
/// zeros: a JSONPath that reaches every zero through the key (`$.*[*]`, `$..x`) would copy the
/// key into the path of each.
async fn hostile() -> Response {
    let zeros = vec!["0"; 1_500_000].join(",");
    let body = format!(r#"{{"{}": [{zeros}]}}"#, "k".repeat(1 << 20));
    ([(axum::http::header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// `GET /slow`: answers after a minute.
async fn slow() -> Response {
    tokio::time::sleep(Duration::from_secs(60)).await;
    "late".into_response()
}

fn router(state: AppState) -> Router {
    Router::new()
        .route("/secrets/{*key}", get(read).post(write).put(write).delete(delete))
        .route("/get", get(echo))
        .route("/post", axum::routing::post(echo_post))
        .route("/big", get(big))
        .route("/hostile", get(hostile))
        .route("/redirect", get(redirect))
        .route("/slow", get(slow))
        .with_state(state)
}

impl StoreServer {
    /// Starts both listeners on 127.0.0.1.
    pub async fn start() -> StoreServer {
        let state = AppState { values: Values::default(), last_headers: Arc::default(), pushes: Arc::default() };
        let app = router(state.clone());
        let http = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let http_url = format!("http://{}", http.local_addr().expect("addr"));
        let plain = app.clone();
        tokio::spawn(async move {
            let _ = axum::serve(http, plain).await;
        });

        let hour = Duration::from_secs(3600);
        let ca = CertificateAuthority::generate("webhook-test-ca", hour).expect("CA");
        let leaf = ca.issue(&["127.0.0.1"], Usage::Server, hour).expect("server certificate");
        let chain =
            CertificateDer::pem_slice_iter(leaf.cert_pem.as_bytes()).collect::<Result<Vec<_>, _>>().expect("PEM");
        let key = PrivateKeyDer::from_pem_slice(leaf.key_pem.as_bytes()).expect("key");
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .expect("server TLS");
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let https = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let https_url = format!("https://{}", https.local_addr().expect("addr"));
        tokio::spawn(async move {
            while let Ok((tcp, _)) = https.accept().await {
                let (acceptor, app) = (acceptor.clone(), app.clone());
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else { return };
                    let service = TowerToHyperService::new(app);
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(tls), service)
                        .await;
                });
            }
        });
        StoreServer {
            http_url,
            https_url,
            ca_pem: ca.cert_pem().to_string(),
            values: state.values,
            last_headers: state.last_headers,
            pushes: state.pushes,
        }
    }

    /// The port of the HTTP listener.
    pub fn http_addr(&self) -> SocketAddr {
        self.http_url.trim_start_matches("http://").parse().expect("addr")
    }

    /// Puts a value straight into the store.
    pub fn seed(&self, key: &str, props: &[(&str, &str)]) {
        let props = props.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        lock(&self.values).insert(key.to_string(), props);
    }

    /// A value as the store holds it.
    pub fn value(&self, key: &str) -> Option<BTreeMap<String, String>> {
        lock(&self.values).get(key).cloned()
    }

    /// The headers of the last request.
    pub fn last_headers(&self) -> BTreeMap<String, String> {
        lock(&self.last_headers).clone()
    }
}

/// The URL template of a configuration whose store is `base`: reads, pushes and deletes of one
/// key, with the property in the query.
pub fn store_url(base: &str) -> String {
    format!(
        "{base}/secrets/{{{{ .remoteRef.key }}}}{{{{ .remoteRef.remoteKey }}}}?property={{{{ .remoteRef.property }}}}"
    )
}

/// Installs the `Webhook` CRD (idempotent) and waits until it is served.
pub async fn install_crd(client: &Client) {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = Webhook::crd();
    let name = crd.metadata.name.clone().expect("name");
    api.patch(&name, &PatchParams::apply("keyward-webhook-tests").force(), &Patch::Apply(&crd)).await.expect("CRD");
    for _ in 0..100 {
        let served = Api::<Webhook>::all(client.clone()).list(&Default::default()).await.is_ok();
        if served {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the Webhook CRD is not served");
}

/// Applies a `Webhook` configuration object.
pub async fn apply_config(client: &Client, ns: &str, name: &str, spec: Value) {
    let obj = json!({
        "apiVersion": "provider.external-secrets.io/v2alpha1",
        "kind": "Webhook",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    });
    Api::<Webhook>::namespaced(client.clone(), ns)
        .patch(name, &PatchParams::apply("keyward-webhook-tests").force(), &Patch::Apply(&obj))
        .await
        .unwrap_or_else(|e| panic!("apply Webhook {ns}/{name}: {e}"));
}

/// Applies a Secret with `data` (text), labeled for webhook use when `labeled`.
pub async fn apply_secret(client: &Client, ns: &str, name: &str, data: &[(&str, &str)], labeled: bool) {
    let data: BTreeMap<&str, &str> = data.iter().copied().collect();
    let labels = if labeled { json!({"external-secrets.io/type": "webhook"}) } else { json!({}) };
    let obj = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "stringData": data,
    });
    Api::<Secret>::namespaced(client.clone(), ns)
        .patch(name, &PatchParams::apply("keyward-webhook-tests").force(), &Patch::Apply(&obj))
        .await
        .unwrap_or_else(|e| panic!("apply Secret {ns}/{name}: {e}"));
}

/// The provider with `denied` as its tenant denied networks (`None`: the default list).
pub async fn start_provider(denied: Option<&str>) -> Result<RunningProvider, TestkitError> {
    let denied = denied.unwrap_or(keyward_provider_runtime::netguard::DEFAULT_TENANT_DENIED_NETWORKS);
    launch("keyward-provider-webhook", &[(keyward_e2e::TENANT_DENIED_NETWORKS_ENV, denied)]).await
}
