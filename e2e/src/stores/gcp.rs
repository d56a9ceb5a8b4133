//! A protocol test server for Google Cloud Secret Manager v1 (HTTP/JSON, the transport of
//! Google's Rust client and of the Python client's REST transport) and the token endpoints its
//! authentication calls: OAuth 2.0's JWT-bearer grant (`/token`), STS's token exchange
//! (`/v1/token`, for Kubernetes ServiceAccount tokens and signed AWS requests: [`aws`]), IAM
//! Credentials' `generateAccessToken`, and what Vault's GCP auth method calls to check a login
//! ([`iam`]: `signJwt`, `serviceAccounts.get`, the accounts' public keys).
//!
//! No Secret Manager emulator can be installed from the package registries, so the GCP
//! provider's tests run against this server, and `google-cloud-secret-manager` (Google's own
//! Python client) is run against it too, so it stays what Google's clients expect. It is strict
//! where the real service is: unknown paths, JSON fields, versions and credentials are answered
//! with the HTTP status and `google.rpc.Status` body (`{"error": {"code", "message",
//! "status"}}`) the service answers.
//!
//! Callers authenticate with a bearer token: a self-signed JWT of a service account the server
//! knows (RS256 with its key, scope `cloud-platform`; what Google's auth libraries send), or a
//! token one of the token endpoints issued. Principals act only where they were granted.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{Map, Value, json};

mod aws;
mod iam;

const SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";

/// A service-account key the server knows: the key file a client is given.
#[derive(Clone, Debug)]
pub struct ServiceAccountKey {
    /// The service account's e-mail.
    pub email: String,
    /// The key file (`"type": "service_account"` JSON), as `gcloud iam service-accounts keys
    /// create` writes it, with `token_uri` pointing at this server.
    pub json: String,
}

#[derive(Clone)]
struct Version {
    data: Vec<u8>,
    state: &'static str,
    created: SystemTime,
}

#[derive(Clone)]
struct Secret {
    /// The resource as the API answers it, without `name`, `createTime` and `etag`.
    fields: Map<String, Value>,
    created: SystemTime,
    etag: u64,
    versions: Vec<Version>,
}

#[derive(Default)]
struct Inner {
    /// `(project, location)` → secret ID → secret; location `""` is global.
    secrets: BTreeMap<(String, String), BTreeMap<String, Secret>>,
    /// Service account e-mail → (key ID, RSAPublicKey DER).
    accounts: HashMap<String, (String, Vec<u8>)>,
    /// Issued tokens → principal.
    tokens: HashMap<String, (String, SystemTime)>,
    /// Principals allowed to use Secret Manager.
    granted: HashSet<String>,
    /// (principal, service account) pairs allowed to impersonate.
    impersonation: HashSet<(String, String)>,
    /// Public keys (RSAPublicKey DER) of the Kubernetes issuers STS trusts.
    issuers: Vec<Vec<u8>>,
    /// Service account e-mail → what IAM knows of it (project, unique ID, keys).
    iam: HashMap<String, iam::Account>,
    /// (principal, service account) pairs allowed to sign JWTs for the account
    /// (`roles/iam.serviceAccountTokenCreator`).
    signers: HashSet<(String, String)>,
    /// AWS access key IDs STS accepts signed requests of → (secret access key, ARN).
    aws_keys: HashMap<String, (String, String)>,
    /// Every request, as `METHOD path`, for tests that count calls.
    log: Vec<String>,
    etags: u64,
}

/// A running server; it stops when dropped.
pub struct SecretManagerServer {
    /// `https://127.0.0.1:<port>`.
    pub url: String,
    /// The project number the server answers names with.
    pub project_number: String,
    inner: Arc<Mutex<Inner>>,
    task: tokio::task::JoinHandle<()>,
    dir: tempfile::TempDir,
}

impl Drop for SecretManagerServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A Google API error.
#[derive(Debug)]
struct ApiError(u16, &'static str, String);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = match (self.1, self.2.split_once(": ")) {
            // OAuth endpoints answer in OAuth's shape (RFC 6749 §5.2).
            ("OAUTH", Some((code, m))) => json!({"error": code, "error_description": m}),
            _ => json!({"error": {"code": self.0, "message": self.2, "status": self.1}}),
        };
        (StatusCode::from_u16(self.0).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR), axum::Json(body)).into_response()
    }
}

fn not_found(m: String) -> ApiError {
    ApiError(404, "NOT_FOUND", m)
}
fn invalid(m: impl Into<String>) -> ApiError {
    ApiError(400, "INVALID_ARGUMENT", m.into())
}

struct TlsListener {
    tcp: tokio::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
}

impl axum::serve::Listener for TlsListener {
    type Io = tokio_rustls::server::TlsStream<tokio::net::TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            if let Ok((tcp, addr)) = self.tcp.accept().await
                && let Ok(Ok(tls)) = tokio::time::timeout(Duration::from_secs(10), self.acceptor.accept(tcp)).await
            {
                return (tls, addr);
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}

fn openssl(args: &[&str]) {
    let out = Command::new("openssl").args(args).output().unwrap_or_else(|e| panic!("run openssl: {e}"));
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A new 2048-bit RSA key in `out` (PKCS #8 PEM), through the `openssl` CLI.
fn rsa_key(out: &Path) {
    openssl(&["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", &out.to_string_lossy()]);
}

/// The RSAPublicKey DER of a PEM public key (SPKI) file, through the `openssl` CLI.
pub fn rsa_public_key_der(pem: &Path) -> Vec<u8> {
    let out = pem.with_extension("pkcs1.der");
    openssl(&[
        "rsa",
        "-pubin",
        "-in",
        &pem.to_string_lossy(),
        "-RSAPublicKey_out",
        "-outform",
        "DER",
        "-out",
        &out.to_string_lossy(),
    ]);
    std::fs::read(&out).expect("public key DER")
}

impl SecretManagerServer {
    /// Starts a server on loopback with `tls` (certificate chain and key PEM, naming
    /// `127.0.0.1`).
    ///
    /// # Panics
    /// When it cannot listen.
    pub async fn start(tls: (&str, &str)) -> SecretManagerServer {
        let chain = CertificateDer::pem_slice_iter(tls.0.as_bytes()).collect::<Result<Vec<_>, _>>().expect("PEM");
        let key = PrivateKeyDer::from_pem_slice(tls.1.as_bytes()).expect("key");
        let mut config =
            rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .expect("versions")
                .with_no_client_auth()
                .with_single_cert(chain, key)
                .expect("server TLS");
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("https://{}", tcp.local_addr().expect("addr"));
        let listener = TlsListener { tcp, acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)) };
        let inner = Arc::new(Mutex::new(Inner::default()));
        let shared = Server { inner: inner.clone(), url: url.clone(), number: "737373737373".into() };
        let app = axum::Router::new().fallback(handle).with_state(Arc::new(shared));
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        SecretManagerServer {
            url,
            project_number: "737373737373".into(),
            inner,
            task,
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Creates a service account with a new RSA key (through the `openssl` CLI) and returns its
    /// key file. With `granted`, it may use Secret Manager.
    pub fn service_account(&self, email: &str, granted: bool) -> ServiceAccountKey {
        let n = self.lock().accounts.len();
        let key = self.dir.path().join(format!("sa{n}.pem"));
        let public = self.dir.path().join(format!("sa{n}.pub"));
        rsa_key(&key);
        openssl(&["pkey", "-in", &key.to_string_lossy(), "-pubout", "-out", &public.to_string_lossy()]);
        let der = rsa_public_key_der(&public);
        let key_id = format!("{:040x}", rand::random::<u128>());
        let project = email.split('@').nth(1).and_then(|d| d.split('.').next()).unwrap_or("project");
        let account = iam::Account::new(self.dir.path(), n, email, project, &key_id, &key);
        let mut inner = self.lock();
        inner.accounts.insert(email.to_string(), (key_id.clone(), der));
        inner.iam.insert(email.to_string(), account);
        if granted {
            inner.granted.insert(email.to_string());
        }
        let json = json!({
            "type": "service_account",
            "project_id": project,
            "private_key_id": key_id,
            "private_key": std::fs::read_to_string(&key).expect("key"),
            "client_email": email,
            "client_id": "1000000000000000000",
            "auth_uri": "https://accounts.google.com/o/oauth2/auth",
            "token_uri": format!("{}/token", self.url),
            "auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
            "universe_domain": "googleapis.com",
        });
        ServiceAccountKey { email: email.into(), json: json.to_string() }
    }

    /// Lets `principal` use Secret Manager: a service account's e-mail, or
    /// `subject/<sub>` for a federated Kubernetes identity (`system:serviceaccount:<ns>:<name>`).
    pub fn grant(&self, principal: &str) {
        self.lock().granted.insert(principal.into());
    }

    /// Takes the grant of `principal` away.
    pub fn revoke(&self, principal: &str) {
        self.lock().granted.remove(principal);
    }

    /// Lets `principal` impersonate the service account `email` (`roles/iam.workloadIdentityUser`).
    pub fn allow_impersonation(&self, principal: &str, email: &str) {
        self.lock().impersonation.insert((principal.into(), email.into()));
    }

    /// Lets `principal` sign JWTs for the service account `email` through `signJwt`
    /// (`roles/iam.serviceAccountTokenCreator`; an account needs it on itself too).
    pub fn allow_sign_jwt(&self, principal: &str, email: &str) {
        self.lock().signers.insert((principal.into(), email.into()));
    }

    /// The unique ID IAM gave the service account `email`.
    pub fn unique_id(&self, email: &str) -> Option<String> {
        self.lock().iam.get(email).map(|a| a.unique_id.clone())
    }

    /// Makes STS accept Kubernetes ServiceAccount tokens signed by the key of `sa_pub` (PEM).
    pub fn trust_kubernetes(&self, sa_pub: &Path) {
        let der = rsa_public_key_der(sa_pub);
        self.lock().issuers.push(der);
    }

    /// Makes STS accept `GetCallerIdentity` requests signed with this AWS key: the caller is
    /// then `subject/<arn>`.
    pub fn trust_aws_key(&self, access_key_id: &str, secret_access_key: &str, arn: &str) {
        self.lock().aws_keys.insert(access_key_id.into(), (secret_access_key.into(), arn.into()));
    }

    /// The principal a token this server issued stands for, while it is valid.
    pub fn token_principal(&self, token: &str) -> Option<String> {
        let inner = self.lock();
        inner.tokens.get(token).filter(|(_, until)| *until > SystemTime::now()).map(|(p, _)| p.clone())
    }

    /// Every request so far, as `METHOD /path`.
    pub fn requests(&self) -> Vec<String> {
        self.lock().log.clone()
    }

    /// Writes a secret version straight into the store (creating the secret), as a test's
    /// fixture.
    pub fn seed(&self, project: &str, location: &str, id: &str, data: &[u8], labels: &[(&str, &str)]) {
        let mut inner = self.lock();
        inner.etags += 1;
        let etag = inner.etags;
        let secrets = inner.secrets.entry((project.into(), location.into())).or_default();
        let secret = secrets.entry(id.into()).or_insert_with(|| Secret {
            fields: Map::new(),
            created: SystemTime::now(),
            etag,
            versions: Vec::new(),
        });
        let labels: Map<String, Value> = labels.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
        if !labels.is_empty() {
            secret.fields.insert("labels".into(), Value::Object(labels));
        }
        secret.versions.push(Version { data: data.to_vec(), state: "ENABLED", created: SystemTime::now() });
    }

    /// The newest version's data of a secret, when the secret exists and has an enabled one.
    pub fn latest(&self, project: &str, location: &str, id: &str) -> Option<Vec<u8>> {
        let inner = self.lock();
        let s = inner.secrets.get(&(project.into(), location.into()))?.get(id)?;
        s.versions.last().filter(|v| v.state == "ENABLED").map(|v| v.data.clone())
    }

    /// The labels of a secret.
    pub fn labels(&self, project: &str, location: &str, id: &str) -> Option<Value> {
        let inner = self.lock();
        let s = inner.secrets.get(&(project.into(), location.into()))?.get(id)?;
        Some(s.fields.get("labels").cloned().unwrap_or_else(|| json!({})))
    }

    /// Sets the state of version `n` (1-based) of a secret: `ENABLED`, `DISABLED` or `DESTROYED`.
    pub fn set_state(&self, project: &str, location: &str, id: &str, n: usize, state: &'static str) {
        let mut inner = self.lock();
        if let Some(v) = inner
            .secrets
            .get_mut(&(project.into(), location.into()))
            .and_then(|s| s.get_mut(id))
            .and_then(|s| s.versions.get_mut(n - 1))
        {
            v.state = state;
            if state == "DESTROYED" {
                v.data.clear();
            }
        }
    }
}

struct Server {
    inner: Arc<Mutex<Inner>>,
    url: String,
    number: String,
}

fn rfc3339(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let ts = jiff::Timestamp::new(d.as_secs() as i64, d.subsec_nanos() as i32).unwrap_or_default();
    format!("{ts:.6}")
}

/// The CRC32C (Castagnoli) of `data`, as Secret Manager's `dataCrc32c`.
fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for b in data {
        crc ^= u32::from(*b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0x82F6_3B78 } else { crc >> 1 };
        }
    }
    !crc
}

/// A JWT's parts, when its RS256 signature verifies with one of `keys`.
fn verify_jwt(token: &str, keys: &[&[u8]]) -> Option<(Value, Value)> {
    let mut parts = token.split('.');
    let (h, c, s) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let header: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(h).ok()?).ok()?;
    let claims: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(c).ok()?).ok()?;
    let sig = URL_SAFE_NO_PAD.decode(s).ok()?;
    if header["alg"] != "RS256" {
        return None;
    }
    let signed = format!("{h}.{c}");
    let ok = keys.iter().any(|k| {
        ring::signature::UnparsedPublicKey::new(&ring::signature::RSA_PKCS1_2048_8192_SHA256, k)
            .verify(signed.as_bytes(), &sig)
            .is_ok()
    });
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    let live =
        claims["exp"].as_u64().is_some_and(|e| e + 60 > now) && claims["iat"].as_u64().is_none_or(|i| i <= now + 300);
    (ok && live).then_some((header, claims))
}

fn new_token(inner: &mut Inner, principal: &str) -> String {
    let token = format!("ya29.test-{:032x}", rand::random::<u128>());
    inner.tokens.insert(token.clone(), (principal.into(), SystemTime::now() + Duration::from_secs(3600)));
    token
}

impl Server {
    /// The principal of a request's bearer token.
    fn principal(&self, inner: &Inner, headers: &HeaderMap) -> Result<String, ApiError> {
        let unauth = |m: &str| {
            ApiError(
                401,
                "UNAUTHENTICATED",
                format!(
                    "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or \
                     other valid authentication credential. {m}"
                ),
            )
        };
        let auth = headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or_default();
        let Some(token) = auth.strip_prefix("Bearer ") else { return Err(unauth("No bearer token.")) };
        if let Some((p, until)) = inner.tokens.get(token) {
            return if *until > SystemTime::now() { Ok(p.clone()) } else { Err(unauth("The token expired.")) };
        }
        // A self-signed JWT of a known service account (its key ID and signature).
        let header: Option<Value> = token
            .split('.')
            .next()
            .and_then(|h| URL_SAFE_NO_PAD.decode(h).ok())
            .and_then(|h| serde_json::from_slice(&h).ok());
        let iss = token
            .split('.')
            .nth(1)
            .and_then(|c| URL_SAFE_NO_PAD.decode(c).ok())
            .and_then(|c| serde_json::from_slice::<Value>(&c).ok())
            .and_then(|c| c["iss"].as_str().map(str::to_string))
            .unwrap_or_default();
        let Some((kid, key)) = inner.accounts.get(&iss) else { return Err(unauth("Unknown token.")) };
        if header.as_ref().and_then(|h| h["kid"].as_str()) != Some(kid.as_str()) {
            return Err(unauth("The JWT's key ID is not a key of its issuer."));
        }
        let (_, claims) =
            verify_jwt(token, &[key]).ok_or_else(|| unauth("The JWT's signature or lifetime is invalid."))?;
        let scoped = claims["scope"].as_str().is_some_and(|s| s.split(' ').any(|s| s == SCOPE));
        let audienced = claims["aud"].as_str().is_some_and(|a| a.starts_with("https://secretmanager."));
        if claims["sub"] != claims["iss"] || !(scoped || audienced) {
            return Err(unauth("The JWT has no cloud-platform scope or Secret Manager audience."));
        }
        Ok(iss)
    }
}

async fn handle(State(s): State<Arc<Server>>, method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let path = uri.path().to_string();
    let query: HashMap<String, String> = uri
        .query()
        .map(|q| {
            q.split('&')
                .filter_map(|kv| kv.split_once('=').or(Some((kv, ""))))
                .map(|(k, v)| (decode(k), decode(v)))
                .collect()
        })
        .unwrap_or_default();
    let mut inner = s.inner.lock().unwrap_or_else(|e| e.into_inner());
    inner.log.push(format!("{method} {path}"));
    let r = route(&s, &mut inner, &method, &path, &query, &headers, &body);
    match r {
        Ok(v) => axum::Json(v).into_response(),
        Err(e) => e.into_response(),
    }
}

fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok().and_then(|h| u8::from_str_radix(h, 16).ok());
                match hex {
                    Some(b) => {
                        out.push(b);
                        i += 3;
                        continue;
                    }
                    None => out.push(b'%'),
                }
            }
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The body as a JSON object (an empty body is `{}`).
fn object(body: &[u8]) -> Result<Map<String, Value>, ApiError> {
    if body.is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_slice(body) {
        Ok(Value::Object(m)) => Ok(m),
        _ => Err(invalid("Invalid JSON payload received.")),
    }
}

/// Refuses fields a message does not have, as the service's JSON parser does.
fn known(m: &Map<String, Value>, at: &str, fields: &[&str]) -> Result<(), ApiError> {
    match m.keys().find(|k| !fields.contains(&k.as_str())) {
        Some(k) => {
            Err(invalid(format!("Invalid JSON payload received. Unknown name \"{k}\" at '{at}': Cannot find field.")))
        }
        None => Ok(()),
    }
}

const SECRET_FIELDS: &[&str] = &[
    "name",
    "replication",
    "createTime",
    "labels",
    "topics",
    "expireTime",
    "ttl",
    "etag",
    "rotation",
    "versionAliases",
    "annotations",
    "versionDestroyTtl",
    "customerManagedEncryption",
    "tags",
];

fn route(
    s: &Server,
    inner: &mut Inner,
    method: &Method,
    path: &str,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Value, ApiError> {
    if path == "/token" && method == Method::POST {
        return oauth_token(s, inner, body);
    }
    if path == "/v1/token" && method == Method::POST {
        return sts_token(inner, headers, body);
    }
    if method == Method::GET
        && let Some(r) = iam::public_keys(inner, path)
    {
        return r;
    }
    let Some(rest) = path.strip_prefix("/v1/") else {
        return Err(not_found(format!("Requested entity was not found: {path}")));
    };
    if let Some(r) = iam::service_accounts(s, inner, method, rest, headers, body) {
        return r;
    }
    if let Some(sa) =
        rest.strip_prefix("projects/-/serviceAccounts/").and_then(|r| r.strip_suffix(":generateAccessToken"))
    {
        return generate_access_token(s, inner, headers, &decode(sa), body);
    }
    let principal = s.principal(inner, headers)?;
    let (resource, verb) = match rest.rsplit_once(':') {
        Some((r, v)) if !v.contains('/') => (r, Some(v)),
        _ => (rest, None),
    };
    let parts: Vec<&str> = resource.split('/').collect();
    // projects/P[/locations/L]/secrets[/S[/versions[/V]]]
    let (project, location, tail) = match parts.as_slice() {
        ["projects", p, "locations", l, tail @ ..] => (*p, *l, tail),
        ["projects", p, tail @ ..] => (*p, "", tail),
        _ => return Err(not_found(format!("Requested entity was not found: {path}"))),
    };
    let project = if project == s.number { "keyward-test" } else { project };
    if !inner.granted.contains(&principal) {
        return Err(ApiError(
            403,
            "PERMISSION_DENIED",
            format!(
                "Permission 'secretmanager.secrets.access' denied for resource 'projects/{project}' (or it may not exist)."
            ),
        ));
    }
    let parent_name = if location.is_empty() {
        format!("projects/{}", s.number)
    } else {
        format!("projects/{}/locations/{location}", s.number)
    };
    let key = (project.to_string(), location.to_string());
    match (method.clone(), tail, verb) {
        (Method::GET, ["secrets"], None) => list_secrets(inner, &key, &parent_name, query),
        (Method::POST, ["secrets"], None) => create_secret(inner, &key, &parent_name, query, body),
        (Method::GET, ["secrets", id], None) => secret_view(inner, &key, &parent_name, id),
        (Method::PATCH, ["secrets", id], None) => update_secret(inner, &key, &parent_name, id, query, body),
        (Method::DELETE, ["secrets", id], None) => delete_secret(inner, &key, &parent_name, id, query),
        (Method::POST, ["secrets", id], Some("addVersion")) => add_version(inner, &key, &parent_name, id, body),
        (Method::GET, ["secrets", id, "versions"], None) => list_versions(inner, &key, &parent_name, id, query),
        (Method::GET, ["secrets", id, "versions", v], None) => version(inner, &key, &parent_name, id, v, None),
        (Method::GET, ["secrets", id, "versions", v], Some("access")) => {
            version(inner, &key, &parent_name, id, v, Some("access"))
        }
        (Method::POST, ["secrets", id, "versions", v], Some(op @ ("disable" | "enable" | "destroy"))) => {
            version(inner, &key, &parent_name, id, v, Some(op))
        }
        _ => Err(not_found(format!("Requested entity was not found: {method} {path}"))),
    }
}

fn secrets_of<'a>(inner: &'a mut Inner, key: &(String, String)) -> &'a mut BTreeMap<String, Secret> {
    inner.secrets.entry(key.clone()).or_default()
}

fn render(parent: &str, id: &str, s: &Secret) -> Value {
    let mut m = s.fields.clone();
    m.insert("name".into(), json!(format!("{parent}/secrets/{id}")));
    m.insert("createTime".into(), json!(rfc3339(s.created)));
    m.insert("etag".into(), json!(format!("\"{}\"", s.etag)));
    Value::Object(m)
}

fn missing_secret(parent: &str, id: &str) -> ApiError {
    not_found(format!("Secret [{parent}/secrets/{id}] not found or has no versions."))
}

/// Secret Manager's list filter: space-separated (ANDed) terms `labels.K=V`, `labels.K:*`,
/// `name:SUBSTRING`, `state:STATE`.
fn matches_filter(filter: &str, name: &str, labels: &Map<String, Value>, state: &str) -> Result<bool, ApiError> {
    for term in filter.split_whitespace() {
        let ok = if let Some(l) = term.strip_prefix("labels.") {
            match l.split_once(['=', ':']) {
                Some((k, "*")) => labels.contains_key(k),
                Some((k, v)) => labels.get(k).and_then(Value::as_str) == Some(v),
                None => return Err(invalid(format!("Invalid filter: {filter}"))),
            }
        } else if let Some(n) = term.strip_prefix("name:") {
            name.contains(n)
        } else if let Some(st) = term.strip_prefix("state:") {
            state.eq_ignore_ascii_case(st)
        } else {
            return Err(invalid(format!("Invalid filter: {filter}")));
        };
        if !ok {
            return Ok(false);
        }
    }
    Ok(true)
}

/// A list answer: one page of `items` under `field`, with `totalSize` and `nextPageToken` as
/// Secret Manager writes them (an empty page and an empty token are left out).
fn page(field: &str, items: Vec<Value>, query: &HashMap<String, String>) -> Result<Value, ApiError> {
    let size: usize = match query.get("pageSize").map(String::as_str) {
        None | Some("") | Some("0") => 25_000,
        Some(n) => n.parse().map_err(|_| invalid("Invalid page size."))?,
    };
    let start: usize = match query.get("pageToken").map(String::as_str) {
        None | Some("") => 0,
        Some(t) => t.parse().map_err(|_| invalid("Invalid page token."))?,
    };
    let total = items.len();
    let out: Vec<Value> = items.into_iter().skip(start).take(size).collect();
    let mut answer = json!({"totalSize": total});
    if start + out.len() < total {
        answer["nextPageToken"] = json!((start + out.len()).to_string());
    }
    if !out.is_empty() {
        answer[field] = json!(out);
    }
    Ok(answer)
}

fn list_secrets(
    inner: &mut Inner,
    key: &(String, String),
    parent: &str,
    q: &HashMap<String, String>,
) -> Result<Value, ApiError> {
    let filter = q.get("filter").cloned().unwrap_or_default();
    let mut out = Vec::new();
    for (id, s) in secrets_of(inner, key).iter() {
        let labels = s.fields.get("labels").and_then(Value::as_object).cloned().unwrap_or_default();
        if matches_filter(&filter, &format!("{parent}/secrets/{id}"), &labels, "")? {
            out.push(render(parent, id, s));
        }
    }
    page("secrets", out, q)
}

fn check_id(id: &str) -> Result<(), ApiError> {
    let ok = !id.is_empty() && id.len() <= 255 && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if ok {
        Ok(())
    } else {
        Err(invalid(format!("Secret id [{id}] is invalid: ids may contain letters, numbers, dashes and underscores.")))
    }
}

fn create_secret(
    inner: &mut Inner,
    key: &(String, String),
    parent: &str,
    q: &HashMap<String, String>,
    body: &[u8],
) -> Result<Value, ApiError> {
    let id = q.get("secretId").cloned().unwrap_or_default();
    check_id(&id)?;
    let mut fields = object(body)?;
    known(&fields, "secret", SECRET_FIELDS)?;
    for computed in ["name", "createTime", "etag"] {
        fields.remove(computed);
    }
    let regional = !key.1.is_empty();
    match (regional, fields.contains_key("replication")) {
        (false, false) => return Err(invalid("Secret.replication is required.")),
        (true, true) => return Err(invalid("Replication is not supported for regional secrets.")),
        _ => {}
    }
    inner.etags += 1;
    let etag = inner.etags;
    let secrets = secrets_of(inner, key);
    if secrets.contains_key(&id) {
        return Err(ApiError(409, "ALREADY_EXISTS", format!("Secret [{parent}/secrets/{id}] already exists.")));
    }
    let secret = Secret { fields, created: SystemTime::now(), etag, versions: Vec::new() };
    let out = render(parent, &id, &secret);
    secrets.insert(id, secret);
    Ok(out)
}

fn secret_view(inner: &mut Inner, key: &(String, String), parent: &str, id: &str) -> Result<Value, ApiError> {
    secrets_of(inner, key)
        .get(id)
        .map(|s| render(parent, id, s))
        .ok_or_else(|| not_found(format!("Secret [{parent}/secrets/{id}] not found.")))
}

fn check_etag(s: &Secret, given: Option<&str>) -> Result<(), ApiError> {
    match given.filter(|e| !e.is_empty()) {
        Some(e) if e.trim_matches('"') != s.etag.to_string() => {
            Err(ApiError(409, "ABORTED", "The etag provided in the request does not match the current etag.".into()))
        }
        _ => Ok(()),
    }
}

fn update_secret(
    inner: &mut Inner,
    key: &(String, String),
    parent: &str,
    id: &str,
    q: &HashMap<String, String>,
    body: &[u8],
) -> Result<Value, ApiError> {
    let fields = object(body)?;
    known(&fields, "secret", SECRET_FIELDS)?;
    let mask = q.get("updateMask").cloned().unwrap_or_default();
    if mask.is_empty() {
        return Err(invalid("update_mask is required."));
    }
    inner.etags += 1;
    let etag = inner.etags;
    let s = secrets_of(inner, key)
        .get_mut(id)
        .ok_or_else(|| not_found(format!("Secret [{parent}/secrets/{id}] not found.")))?;
    check_etag(s, fields.get("etag").and_then(Value::as_str))?;
    for path in mask.split(',') {
        match path {
            "labels" | "annotations" | "topics" | "rotation" | "expireTime" | "ttl" | "versionAliases"
            | "versionDestroyTtl" => {
                match fields.get(path) {
                    Some(v) if !v.is_null() && v != &json!({}) && v != &json!([]) => {
                        s.fields.insert(path.into(), v.clone())
                    }
                    _ => s.fields.remove(path),
                };
            }
            other => return Err(invalid(format!("Invalid field mask path: {other}"))),
        }
    }
    s.etag = etag;
    Ok(render(parent, id, s))
}

fn delete_secret(
    inner: &mut Inner,
    key: &(String, String),
    parent: &str,
    id: &str,
    q: &HashMap<String, String>,
) -> Result<Value, ApiError> {
    let secrets = secrets_of(inner, key);
    let s = secrets.get(id).ok_or_else(|| not_found(format!("Secret [{parent}/secrets/{id}] not found.")))?;
    check_etag(s, q.get("etag").map(String::as_str))?;
    secrets.remove(id);
    Ok(json!({}))
}

fn version_json(parent: &str, id: &str, n: usize, v: &Version) -> Value {
    let mut out = json!({
        "name": format!("{parent}/secrets/{id}/versions/{n}"),
        "createTime": rfc3339(v.created),
        "state": v.state,
        "etag": format!("\"{n}\""),
        "clientSpecifiedPayloadChecksum": false,
    });
    if v.state == "DESTROYED" {
        out["destroyTime"] = json!(rfc3339(v.created));
    }
    out
}

fn add_version(
    inner: &mut Inner,
    key: &(String, String),
    parent: &str,
    id: &str,
    body: &[u8],
) -> Result<Value, ApiError> {
    let req = object(body)?;
    known(&req, "add_secret_version_request", &["parent", "payload"])?;
    let payload = req.get("payload").and_then(Value::as_object).cloned().unwrap_or_default();
    known(&payload, "add_secret_version_request.payload", &["data", "dataCrc32c"])?;
    let data = match payload.get("data").and_then(Value::as_str) {
        Some(d) => STANDARD
            .decode(d)
            .map_err(|_| invalid("Invalid value at 'payload.data' (TYPE_BYTES), Base64 decoding failed."))?,
        None => Vec::new(),
    };
    if data.len() > 64 * 1024 {
        return Err(invalid("Secret payload data length must be less than or equal to 65536 bytes."));
    }
    if let Some(c) = payload.get("dataCrc32c") {
        let given: Option<u64> = c.as_str().and_then(|c| c.parse().ok()).or(c.as_u64());
        if given != Some(u64::from(crc32c(&data))) {
            return Err(invalid("Checksum mismatch: the data_crc32c does not match the payload."));
        }
    }
    let s = secrets_of(inner, key)
        .get_mut(id)
        .ok_or_else(|| not_found(format!("Secret [{parent}/secrets/{id}] not found.")))?;
    s.versions.push(Version { data, state: "ENABLED", created: SystemTime::now() });
    let n = s.versions.len();
    Ok(version_json(parent, id, n, &s.versions[n - 1]))
}

fn list_versions(
    inner: &mut Inner,
    key: &(String, String),
    parent: &str,
    id: &str,
    q: &HashMap<String, String>,
) -> Result<Value, ApiError> {
    let filter = q.get("filter").cloned().unwrap_or_default();
    let s = secrets_of(inner, key)
        .get(id)
        .ok_or_else(|| not_found(format!("Secret [{parent}/secrets/{id}] not found.")))?;
    let mut out = Vec::new();
    // Newest first, as the service lists them.
    for (i, v) in s.versions.iter().enumerate().rev() {
        let name = format!("{parent}/secrets/{id}/versions/{}", i + 1);
        if matches_filter(&filter, &name, &Map::new(), v.state)? {
            out.push(version_json(parent, id, i + 1, v));
        }
    }
    page("versions", out, q)
}

fn version(
    inner: &mut Inner,
    key: &(String, String),
    parent: &str,
    id: &str,
    v: &str,
    op: Option<&str>,
) -> Result<Value, ApiError> {
    let s = secrets_of(inner, key).get_mut(id).ok_or_else(|| missing_secret(parent, id))?;
    let n = match v {
        "latest" => s.versions.len(),
        n => n.parse::<usize>().map_err(|_| invalid(format!("Invalid version id [{n}].")))?,
    };
    let name = format!("{parent}/secrets/{id}/versions/{v}");
    let version = match n.checked_sub(1).and_then(|i| s.versions.get_mut(i)) {
        Some(version) => version,
        None => return Err(not_found(format!("Secret Version [{name}] not found."))),
    };
    match op {
        None => {}
        Some("access") => {
            if version.state != "ENABLED" {
                return Err(ApiError(
                    400,
                    "FAILED_PRECONDITION",
                    format!("Secret Version [{name}] is in {} state.", version.state),
                ));
            }
            let data = version.data.clone();
            return Ok(json!({
                "name": format!("{parent}/secrets/{id}/versions/{n}"),
                "payload": {"data": STANDARD.encode(&data), "dataCrc32c": crc32c(&data).to_string()},
            }));
        }
        Some(op) => {
            if version.state == "DESTROYED" {
                return Err(ApiError(
                    400,
                    "FAILED_PRECONDITION",
                    format!("Secret Version [{name}] is in DESTROYED state."),
                ));
            }
            version.state = match op {
                "disable" => "DISABLED",
                "enable" => "ENABLED",
                _ => {
                    version.data.clear();
                    "DESTROYED"
                }
            };
        }
    }
    let v = version.clone();
    Ok(version_json(parent, id, n, &v))
}

/// A form or JSON body as a flat map of strings.
fn form(body: &[u8]) -> HashMap<String, String> {
    if let Ok(Value::Object(m)) = serde_json::from_slice::<Value>(body) {
        return m.into_iter().map(|(k, v)| (k, v.as_str().map_or_else(|| v.to_string(), str::to_string))).collect();
    }
    String::from_utf8_lossy(body)
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (decode(k), decode(v)))
        .collect()
}

fn oauth_error(code: &str, m: &str) -> ApiError {
    // OAuth endpoints answer in OAuth's shape; ApiError carries it in the message.
    ApiError(400, "OAUTH", format!("{code}: {m}"))
}

/// OAuth 2.0 token endpoint, JWT-bearer grant (RFC 7523), as `oauth2.googleapis.com/token`.
fn oauth_token(s: &Server, inner: &mut Inner, body: &[u8]) -> Result<Value, ApiError> {
    let f = form(body);
    if f.get("grant_type").map(String::as_str) != Some("urn:ietf:params:oauth:grant-type:jwt-bearer") {
        return Err(oauth_error("unsupported_grant_type", "Invalid grant_type"));
    }
    let assertion = f.get("assertion").cloned().unwrap_or_default();
    let claims = assertion
        .split('.')
        .nth(1)
        .and_then(|c| URL_SAFE_NO_PAD.decode(c).ok())
        .and_then(|c| serde_json::from_slice::<Value>(&c).ok())
        .unwrap_or(Value::Null);
    let iss = claims["iss"].as_str().unwrap_or_default().to_string();
    let Some((_, key)) = inner.accounts.get(&iss).cloned() else {
        return Err(oauth_error("invalid_grant", "Invalid grant: account not found"));
    };
    if verify_jwt(&assertion, &[&key]).is_none() {
        return Err(oauth_error("invalid_grant", "Invalid JWT Signature."));
    }
    if claims["aud"].as_str() != Some(&format!("{}/token", s.url))
        && claims["aud"] != "https://oauth2.googleapis.com/token"
    {
        return Err(oauth_error(
            "invalid_grant",
            "Invalid JWT: Token must be a short-lived token and in a reasonable timeframe",
        ));
    }
    let token = new_token(inner, &iss);
    Ok(json!({"access_token": token, "expires_in": 3599, "token_type": "Bearer"}))
}

/// STS token exchange (RFC 8693): a Kubernetes ServiceAccount token of a trusted issuer, for
/// `identitynamespace:<pool>:<provider>` (GKE) or a workload identity provider's resource name.
fn sts_token(inner: &mut Inner, _: &HeaderMap, body: &[u8]) -> Result<Value, ApiError> {
    let f = form(body);
    let get = |a: &str, b: &str| f.get(a).or_else(|| f.get(b)).cloned().unwrap_or_default();
    if get("grant_type", "grantType") != "urn:ietf:params:oauth:grant-type:token-exchange" {
        return Err(invalid("Invalid value for \"grant_type\"."));
    }
    let audience = get("audience", "audience");
    let subject = get("subject_token", "subjectToken");
    match get("subject_token_type", "subjectTokenType").as_str() {
        "urn:ietf:params:oauth:token-type:jwt" => {}
        "urn:ietf:params:aws:token-type:aws4_request" => {
            let arn = aws::verify(&subject, &audience, &inner.aws_keys, SystemTime::now()).map_err(|e| {
                ApiError(400, "INVALID_ARGUMENT", format!("invalid_grant: The AWS subject token is refused: {e}."))
            })?;
            return Ok(federated(inner, &arn));
        }
        _ => return Err(invalid("Invalid value for \"subject_token_type\".")),
    }
    let expected = match audience.strip_prefix("identitynamespace:") {
        Some(rest) => rest.split(':').next().unwrap_or_default().to_string(),
        None => audience.clone(),
    };
    if expected.is_empty() {
        return Err(invalid("Invalid value for \"audience\"."));
    }
    let keys: Vec<&[u8]> = inner.issuers.iter().map(Vec::as_slice).collect();
    let Some((_, claims)) = verify_jwt(&subject, &keys) else {
        return Err(ApiError(
            400,
            "INVALID_ARGUMENT",
            "invalid_grant: The subject token could not be verified.".into(),
        ));
    };
    let aud_ok = match &claims["aud"] {
        Value::String(a) => *a == expected,
        Value::Array(a) => a.iter().any(|a| a == &json!(expected)),
        _ => false,
    };
    if !aud_ok {
        return Err(ApiError(
            400,
            "INVALID_ARGUMENT",
            format!("invalid_grant: The audience in the subject token does not match {expected}."),
        ));
    }
    Ok(federated(inner, claims["sub"].as_str().unwrap_or_default()))
}

/// STS's answer: a federated token of the principal `subject/<sub>`.
fn federated(inner: &mut Inner, sub: &str) -> Value {
    let token = new_token(inner, &format!("subject/{sub}"));
    json!({
        "access_token": token,
        "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
        "token_type": "Bearer",
        "expires_in": 3600,
    })
}

/// IAM Credentials `generateAccessToken`: a token of `email` for a caller allowed to
/// impersonate it.
fn generate_access_token(
    s: &Server,
    inner: &mut Inner,
    headers: &HeaderMap,
    email: &str,
    body: &[u8],
) -> Result<Value, ApiError> {
    let caller = s.principal(inner, headers)?;
    let req = object(body)?;
    known(&req, "generate_access_token_request", &["name", "delegates", "scope", "lifetime"])?;
    if req.get("scope").and_then(Value::as_array).is_none_or(|s| s.is_empty()) {
        return Err(invalid("Scope is required."));
    }
    if !inner.accounts.contains_key(email) {
        return Err(not_found(format!("Not found; Gaia id not found for email {email}")));
    }
    if !inner.impersonation.contains(&(caller, email.to_string())) {
        return Err(ApiError(
            403,
            "PERMISSION_DENIED",
            "Permission 'iam.serviceAccounts.getAccessToken' denied on resource (or it may not exist).".into(),
        ));
    }
    let token = new_token(inner, email);
    Ok(json!({"accessToken": token, "expireTime": rfc3339(SystemTime::now() + Duration::from_secs(3600))}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_of_known_strings() {
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c(b""), 0);
    }

    #[test]
    fn filters() {
        let labels: Map<String, Value> = serde_json::from_value(json!({"env": "prod"})).unwrap();
        assert!(matches_filter("labels.env=prod name:db", "projects/1/secrets/db-a", &labels, "").unwrap());
        assert!(!matches_filter("labels.env=dev", "x", &labels, "").unwrap());
        assert!(matches_filter("labels.env:*", "x", &labels, "").unwrap());
        assert!(matches_filter("bogus", "x", &labels, "").is_err());
    }
}
