//! A protocol test server for Azure Key Vault and the Entra ID endpoints its clients call, on
//! loopback over HTTPS (a test CA): no Key Vault emulator can be installed from the package
//! registries this project reaches, so the Azure provider is tested against this server, and the
//! server itself is checked by Microsoft's own Python clients (`azure-keyvault-secrets` with
//! `azure-identity`, `e2e/tools/azure/check_server.py`).
//!
//! What it implements, from Microsoft's REST references (Key Vault data plane 7.x and
//! `2025-07-01`, Entra ID's v2.0 token endpoint, App Service's managed-identity endpoint, ACR's
//! token exchange):
//!
//! - [`vault`]: secrets (set, get by version, update properties, list, list versions, delete
//!   with soft delete, get and purge deleted), keys (import, get, delete) and certificates
//!   (import PKCS#12 or PEM, get, delete; the certificate's secret), each checking `api-version`,
//!   a bearer token for `https://vault.azure.net` (else `401` with the challenge
//!   `Bearer authorization="…", resource="https://vault.azure.net"`), object names, and unknown
//!   JSON members, and answering Key Vault's error bodies;
//! - [`entra`]: `/{tenant}/oauth2/v2.0/token` (client secret, certificate assertion, federated
//!   ServiceAccount token checked against the cluster's signing keys), its OpenID configuration,
//!   the managed-identity endpoint (`X-IDENTITY-HEADER`), and ACR's `/oauth2/exchange` and
//!   `/oauth2/token`.
//!
//! The vault's host is [`VAULT_HOST`], under the resource's domain `vault.azure.net` so that the
//! SDKs' check of the challenge's resource against the vault's host passes unchanged, and the
//! registry's [`REGISTRY_HOST`]; clients resolve those names to loopback themselves (the
//! provider with `KEYWARD_AZURE_HOST_ALIASES`).

mod entra;
mod jwt;
mod vault;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// The test vault's host name.
pub const VAULT_HOST: &str = "keyward-e2e.vault.azure.net";
/// The test container registry's host name (ACR's token exchange).
pub const REGISTRY_HOST: &str = "keyward-e2e.azurecr.io";
/// The audience of Key Vault tokens, and the resource its challenge names.
pub const VAULT_RESOURCE: &str = "https://vault.azure.net";
/// The Entra ID tenant of the server.
pub const TENANT: &str = "8f4e6d2c-1b3a-4c5d-9e8f-0a1b2c3d4e5f";
/// The managed-identity endpoint's secret header value (`IDENTITY_HEADER`).
pub const IDENTITY_HEADER: &str = "keyward-test-identity-header";

/// Seconds since the epoch.
fn now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}

/// One version of a secret.
#[derive(Clone, Debug)]
pub(crate) struct SecretVersion {
    pub version: String,
    pub value: String,
    pub content_type: Option<String>,
    pub tags: HashMap<String, String>,
    pub enabled: bool,
    pub expires: Option<i64>,
    pub not_before: Option<i64>,
    pub created: i64,
    pub updated: i64,
    pub managed: bool,
}

/// One version of a key: its public JWK members.
#[derive(Clone, Debug)]
pub(crate) struct KeyVersion {
    pub version: String,
    pub jwk: serde_json::Map<String, serde_json::Value>,
    pub tags: HashMap<String, String>,
    pub created: i64,
}

/// One version of a certificate.
#[derive(Clone, Debug)]
pub(crate) struct CertVersion {
    pub version: String,
    pub der: Vec<u8>,
    pub tags: HashMap<String, String>,
    pub created: i64,
}

/// What an Entra ID application may authenticate with.
#[derive(Clone, Debug, Default)]
pub(crate) struct Application {
    pub secrets: Vec<String>,
    /// DER certificates.
    pub certificates: Vec<Vec<u8>>,
    /// Federated credentials: (issuer, subject).
    pub federated: Vec<(String, String)>,
}

/// An access token the server issued.
#[derive(Clone, Debug)]
pub(crate) struct Issued {
    pub audience: String,
    pub principal: String,
    pub expires: i64,
}

#[derive(Default)]
pub(crate) struct State {
    pub secrets: HashMap<String, Vec<SecretVersion>>,
    pub deleted_secrets: HashMap<String, (Vec<SecretVersion>, i64)>,
    pub keys: HashMap<String, Vec<KeyVersion>>,
    pub deleted_keys: HashMap<String, i64>,
    pub certs: HashMap<String, Vec<CertVersion>>,
    pub deleted_certs: HashMap<String, i64>,
    pub apps: HashMap<String, Application>,
    /// Client IDs of managed identities; `""` is the system-assigned one.
    pub managed_identities: Vec<String>,
    /// The ServiceAccount issuer's signing keys (a JWKS document).
    pub jwks: serde_json::Value,
    pub tokens: HashMap<String, Issued>,
    /// Principals that may only read.
    pub readers: Vec<String>,
    /// `METHOD path` of every request, in order.
    pub log: Vec<String>,
    pub counter: u64,
}

impl State {
    /// A fresh 32-hex-digit version (or token) id.
    pub(crate) fn next_id(&mut self) -> String {
        self.counter += 1;
        let mut bytes = [0u8; 12];
        rand::Rng::fill(&mut rand::rng(), &mut bytes[..]);
        format!("{:08x}{}", self.counter, bytes.iter().map(|b| format!("{b:02x}")).collect::<String>())
    }
}

pub(crate) type Shared = Arc<Mutex<State>>;

pub(crate) fn lock(s: &Shared) -> MutexGuard<'_, State> {
    s.lock().unwrap_or_else(|e| e.into_inner())
}

/// The running server. Stops when dropped.
pub struct AzureKeyVault {
    port: u16,
    ca_pem: String,
    ca_file: tempfile::NamedTempFile,
    state: Shared,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl AzureKeyVault {
    /// Starts the server on a free loopback port, with a fresh test CA.
    ///
    /// # Panics
    /// When it cannot listen or build its certificates: the tests that need it cannot run.
    pub fn start() -> AzureKeyVault {
        let ca_key = rcgen::KeyPair::generate().expect("CA key");
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params.distinguished_name.push(rcgen::DnType::CommonName, "keyward azure test CA");
        let ca = ca_params.self_signed(&ca_key).expect("CA");
        let issuer = rcgen::Issuer::new(ca_params, ca_key);
        let leaf_key = rcgen::KeyPair::generate().expect("server key");
        let names = vec![
            VAULT_HOST.to_string(),
            "*.vault.azure.net".into(),
            REGISTRY_HOST.into(),
            "localhost".into(),
            "127.0.0.1".into(),
        ];
        let leaf = rcgen::CertificateParams::new(names).expect("params").signed_by(&leaf_key, &issuer).expect("leaf");
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_no_client_auth()
            .with_single_cert(
                vec![CertificateDer::from(leaf.der().to_vec())],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der())),
            )
            .expect("server TLS");
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let port = listener.local_addr().expect("addr").port();
        let state: Shared = Arc::default();
        lock(&state).managed_identities.push(String::new());
        let app = axum::Router::new().fallback(handle).with_state(state.clone());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt =
                tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
                let serve = async {
                    while let Ok((tcp, _)) = listener.accept().await {
                        let (acceptor, app) = (acceptor.clone(), app.clone());
                        tokio::spawn(async move {
                            let Ok(tls) = acceptor.accept(tcp).await else { return };
                            let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                                .serve_connection(TokioIo::new(tls), TowerToHyperService::new(app))
                                .await;
                        });
                    }
                };
                tokio::select! {
                    () = serve => {}
                    _ = stopped => {}
                }
            });
        });
        let mut ca_file = tempfile::NamedTempFile::new().expect("CA file");
        std::io::Write::write_all(&mut ca_file, ca.pem().as_bytes()).expect("write CA");
        AzureKeyVault { port, ca_pem: ca.pem(), ca_file, state, stop: Some(stop), thread: Some(thread) }
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The vault's URL, `https://keyward-e2e.vault.azure.net:<port>`.
    pub fn vault_url(&self) -> String {
        format!("https://{VAULT_HOST}:{}", self.port)
    }

    /// The registry's name and port (an ACRAccessToken's `registry`), `keyward-e2e.azurecr.io:<port>`.
    pub fn registry(&self) -> String {
        format!("{REGISTRY_HOST}:{}", self.port)
    }

    /// Entra ID's authority host (tokens at `<host>/<tenant>/oauth2/v2.0/token`).
    pub fn authority_host(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// The managed-identity endpoint (`IDENTITY_ENDPOINT`).
    pub fn identity_endpoint(&self) -> String {
        format!("https://127.0.0.1:{}/msi/token", self.port)
    }

    /// The test CA (PEM), and a file holding it.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// A file holding the test CA (`SSL_CERT_FILE`).
    pub fn ca_file(&self) -> String {
        self.ca_file.path().display().to_string()
    }

    /// The environment of a provider process that reaches this server as Azure: the CA, the
    /// vault's and the registry's names on loopback, the authority host and the
    /// managed-identity endpoint.
    pub fn provider_env(&self) -> Vec<(String, String)> {
        vec![
            ("SSL_CERT_FILE".into(), self.ca_file()),
            ("KEYWARD_AZURE_HOST_ALIASES".into(), format!("{VAULT_HOST}=127.0.0.1,{REGISTRY_HOST}=127.0.0.1")),
            ("AZURE_AUTHORITY_HOST".into(), self.authority_host()),
            ("IDENTITY_ENDPOINT".into(), self.identity_endpoint()),
            ("IDENTITY_HEADER".into(), IDENTITY_HEADER.into()),
        ]
    }

    /// Registers an application that authenticates with a client secret.
    pub fn add_client_secret(&self, client_id: &str, secret: &str) {
        lock(&self.state).apps.entry(client_id.into()).or_default().secrets.push(secret.into());
    }

    /// Registers an application that authenticates with a certificate (DER).
    pub fn add_client_certificate(&self, client_id: &str, der: &[u8]) {
        lock(&self.state).apps.entry(client_id.into()).or_default().certificates.push(der.to_vec());
    }

    /// Registers a federated credential: tokens of `issuer` for `subject` stand for `client_id`.
    pub fn add_federated(&self, client_id: &str, issuer: &str, subject: &str) {
        lock(&self.state).apps.entry(client_id.into()).or_default().federated.push((issuer.into(), subject.into()));
    }

    /// The signing keys (JWKS) of the ServiceAccount issuer federated credentials trust.
    pub fn set_issuer_keys(&self, jwks: serde_json::Value) {
        lock(&self.state).jwks = jwks;
    }

    /// Adds a user-assigned managed identity (the system-assigned one always exists).
    pub fn add_managed_identity(&self, client_id: &str) {
        lock(&self.state).managed_identities.push(client_id.into());
    }

    /// Lets `principal` (a client ID) read but not write.
    pub fn make_reader(&self, principal: &str) {
        lock(&self.state).readers.push(principal.into());
    }

    /// Sets a secret straight into the vault (a new version); returns the version.
    pub fn set_secret(&self, name: &str, value: &str, tags: &[(&str, &str)]) -> String {
        let mut s = lock(&self.state);
        let version = s.next_id();
        let t = now();
        s.secrets.entry(name.into()).or_default().push(SecretVersion {
            version: version.clone(),
            value: value.into(),
            content_type: None,
            tags: tags.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            enabled: true,
            expires: None,
            not_before: None,
            created: t,
            updated: t,
            managed: false,
        });
        version
    }

    /// The current value and tags of a secret, straight from the vault.
    pub fn secret(&self, name: &str) -> Option<(String, HashMap<String, String>)> {
        lock(&self.state).secrets.get(name).and_then(|v| v.last()).map(|v| (v.value.clone(), v.tags.clone()))
    }

    /// Whether a secret is held deleted (soft delete).
    pub fn is_deleted(&self, name: &str) -> bool {
        lock(&self.state).deleted_secrets.contains_key(name)
    }

    /// Removes a secret and its deleted copy at once (a purge, without the API).
    pub fn purge(&self, name: &str) {
        let mut s = lock(&self.state);
        s.secrets.remove(name);
        s.deleted_secrets.remove(name);
    }

    /// Sets a key straight into the vault (a new version): its public JWK members (`kty`, `n`
    /// and `e`, or `crv`, `x` and `y`), as Key Vault returns them.
    pub fn set_key(&self, name: &str, jwk: serde_json::Value) {
        let mut s = lock(&self.state);
        let version = s.next_id();
        let jwk = jwk.as_object().cloned().unwrap_or_default();
        s.keys.entry(name.into()).or_default().push(KeyVersion { version, jwk, tags: HashMap::new(), created: now() });
    }

    /// Sets a certificate (DER) straight into the vault (a new version).
    pub fn set_certificate(&self, name: &str, der: &[u8]) {
        let mut s = lock(&self.state);
        let version = s.next_id();
        let cert = CertVersion { version, der: der.to_vec(), tags: HashMap::new(), created: now() };
        s.certs.entry(name.into()).or_default().push(cert);
    }

    /// The current public JWK of a key.
    pub fn key(&self, name: &str) -> Option<serde_json::Map<String, serde_json::Value>> {
        lock(&self.state).keys.get(name).and_then(|v| v.last()).map(|k| k.jwk.clone())
    }

    /// The current DER of a certificate, and its tags.
    pub fn certificate(&self, name: &str) -> Option<(Vec<u8>, HashMap<String, String>)> {
        lock(&self.state).certs.get(name).and_then(|v| v.last()).map(|c| (c.der.clone(), c.tags.clone()))
    }

    /// What a registry token (an ACRAccessToken's password) stands for: `acr-refresh:<service>`
    /// or `acr:<service>:<scope>`, and the principal it was issued to.
    pub fn registry_token(&self, token: &str) -> Option<(String, String)> {
        let s = lock(&self.state);
        s.tokens.get(token).filter(|i| i.audience.starts_with("acr")).map(|i| (i.audience.clone(), i.principal.clone()))
    }

    /// `METHOD path` of every request so far.
    pub fn requests(&self) -> Vec<String> {
        lock(&self.state).log.clone()
    }
}

impl Drop for AzureKeyVault {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Every request, by host: the vault's, the registry's, else Entra ID's and the managed-identity
/// endpoints by path.
async fn handle(
    axum::extract::State(state): axum::extract::State<Shared>,
    method: http::Method,
    uri: http::Uri,
    headers: http::HeaderMap,
    body: axum::body::Bytes,
) -> axum::response::Response {
    let path = uri.path().to_string();
    lock(&state).log.push(format!("{method} {path}"));
    let query: HashMap<String, String> =
        uri.query().map(|q| url_decode_pairs(q).into_iter().collect()).unwrap_or_default();
    let host = headers.get(http::header::HOST).and_then(|h| h.to_str().ok()).unwrap_or_default();
    let host = host.rsplit_once(':').map_or(host, |(h, _)| h).to_ascii_lowercase();
    let req = Req { method, path, query, headers, body };
    if host.ends_with(".vault.azure.net") {
        vault::handle(&state, &req)
    } else if host.ends_with(".azurecr.io") {
        entra::registry(&state, &req)
    } else {
        entra::handle(&state, &req)
    }
}

/// A request as the handlers read it.
pub(crate) struct Req {
    pub method: http::Method,
    pub path: String,
    pub query: HashMap<String, String>,
    pub headers: http::HeaderMap,
    pub body: axum::body::Bytes,
}

impl Req {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// `a=1&b=x%20y` as pairs (`+` is a space, as in forms).
pub(crate) fn url_decode_pairs(q: &str) -> Vec<(String, String)> {
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect()
}

fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 3 <= bytes.len() => {
                match u8::from_str_radix(std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("zz"), 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A JSON answer.
pub(crate) fn json(status: u16, body: serde_json::Value) -> axum::response::Response {
    let mut resp = axum::response::Response::new(axum::body::Body::from(body.to_string()));
    *resp.status_mut() = http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
    resp.headers_mut()
        .insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json; charset=utf-8"));
    resp
}

/// A fresh 2048-bit RSA private key (PKCS#8 PEM) from the `openssl` CLI: ring, which signs
/// here, cannot generate RSA keys.
///
/// # Panics
/// When `openssl` fails.
pub fn rsa_key_pem() -> String {
    let out = std::process::Command::new("openssl")
        .args(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"])
        .output()
        .unwrap_or_else(|e| panic!("run openssl: {e}"));
    assert!(out.status.success(), "openssl genpkey: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("PEM")
}

/// How long issued tokens live.
pub(crate) const TOKEN_LIFETIME: Duration = Duration::from_secs(3600);
