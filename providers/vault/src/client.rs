//! A Vault client built from a Vault configuration (a `Vault` object or a store's
//! `spec.provider.vault`): the HTTPS client (CA bundle, client certificate), the login method,
//! the headers every request carries, and the token it holds, renewed before it expires and
//! replaced by a new login when renewal fails or Vault refuses it. Tokens live in a
//! [`TokenCache`] that outlives the clients, so rebuilding a client does not log in again.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::{HeaderMap, HeaderName, HeaderValue};
use keyward_crds::rules::{VAULT_NO_LOGIN, parse_go_duration};
use keyward_crds::secret_store::SecretStoreRetrySettings;
use keyward_crds::vault::{VaultAuth, VaultSpec, VaultUserPassAuth};
use keyward_gcp_identity::TokenExchange;
use keyward_provider_runtime::netguard::{DeniedNetworks, denied_error, guarded_http};
use keyward_provider_runtime::refs::{CacheKey, ClusterRefs, NamedKind, named_namespace, require_operator_owned};
use keyward_provider_runtime::{ProviderError, RequestContext, body, keys, store_calls, store_tls};
use reqwest::Method;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{Value, json};
use tokio::sync::Mutex;

use crate::gcp::GcpLogin;
use crate::iam::{DEFAULT_MOUNT, IamLogin};
use crate::kv::map_status;

/// Lifetime requested for ServiceAccount tokens used to log in.
const SA_TOKEN_SECONDS: i64 = 600;
/// The provider process's own ServiceAccount token (Kubernetes auth without a reference).
const OWN_TOKEN_FILE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/token";
/// Vault's state index of a response; sent back with `readYourWrites`.
const INDEX_HEADER: &str = "x-vault-index";

/// How the client gets a token.
#[derive(Clone)]
enum Login {
    /// A fixed token; it is renewed when renewable, never replaced.
    Token(String),
    /// `POST <path>` (an encoded `auth/<mount>/login[/<user>]`) with this body.
    Post { path: String, body: Value },
    /// `POST <path>` with a body signed afresh for each login (the AWS auth method).
    Iam { path: String, iam: Box<IamLogin> },
    /// `POST <path>` with a JWT signed through Google at each login (the GCP auth method).
    Gcp { path: String, gcp: Box<GcpLogin> },
}

impl Login {
    /// `POST auth/<mount>/login[/<user>]`, each part checked by the key rule and encoded, so a
    /// mount or user name can never make the login go to another path.
    fn post(field: &str, mount: &str, user: Option<&str>, body: Value) -> Result<Login, ProviderError> {
        Ok(Login::Post { path: Self::path(field, mount, user)?, body })
    }

    /// The encoded `auth/<mount>/login[/<user>]` path.
    fn path(field: &str, mount: &str, user: Option<&str>) -> Result<String, ProviderError> {
        let bad = |what: &str, e: ProviderError| ProviderError::BadConfig(format!("{field}.{what}: {e}"));
        let mut segments = keys::segments(mount).map_err(|e| bad("path", e))?;
        if segments.is_empty() {
            return Err(ProviderError::BadConfig(format!("{field}.path: names no mount")));
        }
        segments.insert(0, "auth");
        segments.push("login");
        if let Some(user) = user {
            match keys::segments(user).map_err(|e| bad("username", e))?.as_slice() {
                [one] if *one == user => segments.push(one),
                _ => {
                    return Err(ProviderError::BadConfig(format!(
                        "{field}.username: {user:?} is not a single path segment"
                    )));
                }
            }
        }
        Ok(keys::url_path(segments))
    }
}

/// A token and what Vault said about its lifetime.
#[derive(Clone, Debug)]
struct Token {
    value: String,
    renewable: bool,
    ttl: Duration,
    obtained: Instant,
}

impl Token {
    /// Whether the token should be renewed (two thirds of its lifetime passed); tokens without
    /// a lifetime (root, or not known) never are.
    fn stale(&self) -> bool {
        !self.ttl.is_zero() && self.obtained.elapsed() >= self.ttl * 2 / 3
    }

    fn expired(&self) -> bool {
        !self.ttl.is_zero() && self.obtained.elapsed() >= self.ttl
    }
}

/// The token of one configuration, shared by the clients built for it.
type Slot = Arc<Mutex<Option<Token>>>;

/// Vault tokens per configuration (its [`CacheKey`]) and credentials, kept across client
/// rebuilds: a client built again for the same configuration, from the same credentials, takes
/// the token the previous one held instead of logging in again. A token is reused only by a
/// client whose server, login namespace and credentials hash the same (`fingerprint`), so
/// rotated credentials, or a new generation of the configuration, log in afresh. A
/// ClusterSecretStore is one configuration for every namespace it serves: the requests of all
/// namespaces that resolve to the same credentials share one token.
#[derive(Default)]
pub struct TokenCache {
    slots: std::sync::Mutex<HashMap<(CacheKey, Fingerprint), Slot>>,
}

impl TokenCache {
    fn slot(&self, key: &CacheKey, fingerprint: Fingerprint) -> Slot {
        let mut key = key.clone();
        if key.kind == "ClusterSecretStore" {
            key.namespace.clear();
        }
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        slots.retain(|(k, f), slot| {
            let same_config =
                k.kind == key.kind && k.namespace == key.namespace && k.name == key.name && k.operator == key.operator;
            if same_config && (k.generation, &k.uid) != (key.generation, &key.uid) {
                // Another generation of the configuration, or an earlier object of its name.
                return false;
            }
            // Tokens no client holds that are superseded by other credentials, gone or expired.
            let unused = Arc::strong_count(slot) == 1;
            let superseded = same_config && *f != fingerprint;
            !(unused && (superseded || slot.try_lock().is_ok_and(|t| t.as_ref().is_none_or(Token::expired))))
        });
        slots.entry((key, fingerprint)).or_default().clone()
    }

    /// Number of kept token slots (configurations and credentials).
    pub fn len(&self) -> usize {
        self.slots.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Whether no token slot is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A logged-in Vault client.
#[derive(Clone)]
pub struct VaultClient {
    http: reqwest::Client,
    server: String,
    namespace: Option<String>,
    auth_namespace: Option<String>,
    login: Login,
    token: Slot,
    /// `spec.headers`, and `X-Vault-Inconsistent` with `forwardInconsistent`: on every request.
    headers: HeaderMap,
    /// With `readYourWrites`: the last `X-Vault-Index` Vault answered, sent with every request.
    index: Option<Arc<std::sync::Mutex<Option<HeaderValue>>>>,
    /// Retries of transient failures, on the copy one generation uses ([`VaultClient::with_retry`]);
    /// a cached client has none (a store's `spec.retrySettings` are the reconciler's).
    retry: Option<RetryRun>,
}

/// Most retries of one request a VaultDynamicSecret's `retrySettings.maxRetries` gets (more is
/// capped to this): a tenant chooses the number, and the provider process is shared.
pub const MAX_RETRIES: u32 = 5;
/// Longest pause between retries `retrySettings.retryInterval` gets (more is capped to this).
pub const MAX_RETRY_INTERVAL: Duration = Duration::from_secs(2);
/// The pause when `retrySettings` sets `maxRetries` without `retryInterval` (upstream's
/// Vault client waits about a second).
pub const DEFAULT_RETRY_INTERVAL: Duration = Duration::from_secs(1);
/// No retry starts later than this after the generation began, whatever the settings: the
/// whole of a generation's retrying fits in the reconciler's 10 s deadline of one call.
pub const RETRY_BUDGET: Duration = Duration::from_secs(8);

/// A VaultDynamicSecret's `spec.retrySettings`, capped: how many times a request that failed
/// transiently (no connection, a 5xx but 501, a 429) is sent again, and the pause before each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retry {
    /// Retries after the first attempt, at most [`MAX_RETRIES`].
    pub max_retries: u32,
    /// Pause before each retry, at most [`MAX_RETRY_INTERVAL`].
    pub interval: Duration,
}

impl Retry {
    /// The retries `settings` ask for, capped; `None` when they ask for none (unset, or
    /// `maxRetries` unset or not positive: as upstream, retrySettings without `maxRetries` leave
    /// retrying to the reconciliation). An unreadable `retryInterval` is an error naming it.
    pub fn of(settings: Option<&SecretStoreRetrySettings>) -> Result<Option<Retry>, String> {
        let Some(s) = settings else { return Ok(None) };
        let interval = match s.retry_interval.as_deref().map(str::trim).filter(|i| !i.is_empty()) {
            None => DEFAULT_RETRY_INTERVAL,
            Some(i) => parse_go_duration(i).map_err(|e| format!("spec.retrySettings.retryInterval {i:?}: {e}"))?,
        };
        let max_retries = u32::try_from(s.max_retries.unwrap_or(0)).unwrap_or(0);
        if max_retries == 0 {
            return Ok(None);
        }
        Ok(Some(Retry { max_retries: max_retries.min(MAX_RETRIES), interval: interval.min(MAX_RETRY_INTERVAL) }))
    }
}

/// [`Retry`] for one generation: retries stop at `until` ([`RETRY_BUDGET`] after it began).
#[derive(Clone, Copy, Debug)]
struct RetryRun {
    retry: Retry,
    until: Instant,
}

/// Whether an answer of `status` is worth sending the request again for: Vault sealed or a
/// standby (503), a node or proxy failing (5xx but 501, "not implemented"), rate limited
/// (429). Never another 4xx: a refusal stays a refusal.
pub fn transient_status(status: u16) -> bool {
    status == 429 || ((500..=599).contains(&status) && status != 501)
}

/// Whether a request that got no answer is worth sending again: the connection could not be
/// made (refused, reset, the name not resolved). Not a timeout (each attempt may already have
/// taken the whole request timeout), not a refused TLS handshake (a certificate does not fix
/// itself), not a denied address.
fn transient_transport(e: &reqwest::Error) -> bool {
    if !e.is_connect() || e.is_timeout() || denied_error(e).is_some() {
        return false;
    }
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cause {
        let tls = c.downcast_ref::<rustls::Error>().is_some()
            || c.downcast_ref::<std::io::Error>()
                .and_then(|io| io.get_ref())
                .is_some_and(|inner| inner.downcast_ref::<rustls::Error>().is_some());
        if tls {
            return false;
        }
        cause = c.source();
    }
    true
}

/// A request that got no usable answer, and whether it is worth retrying.
struct Failed {
    error: ProviderError,
    transient: bool,
}

fn pem_certs(pem: &[u8], field: &str) -> Result<Vec<CertificateDer<'static>>, ProviderError> {
    CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ProviderError::BadConfig(format!("{field}: not a PEM certificate: {e}")))
}

/// The HTTPS client over a TLS configuration, reaching only what `denied` allows.
fn http_client(tls: rustls::ClientConfig, denied: &DeniedNetworks) -> Result<reqwest::Client, ProviderError> {
    guarded_http(denied)
        .tls_backend_preconfigured(tls)
        .timeout(body::REQUEST_TIMEOUT)
        .build()
        .map_err(|e| ProviderError::Internal(format!("building the HTTPS client: {e}")))
}

/// The TLS configuration, and the client certificate and key it presents (PEM), if any: the
/// cert login's (`spec.auth.cert`, presented on the login and on later requests, as upstream)
/// or else `spec.tls`'s.
async fn tls_config(
    refs: &ClusterRefs,
    ctx: &RequestContext,
    spec: &VaultSpec,
) -> Result<(rustls::ClientConfig, Option<(Vec<u8>, Vec<u8>)>), ProviderError> {
    let ders = refs.ca_bundle(ctx, "spec", spec.ca_bundle.as_deref(), spec.ca_provider.as_ref()).await?;
    let builder = store_tls::builder()?.with_root_certificates(store_tls::roots(ders, "spec.caBundle")?);
    let (field, cert_pem, key_pem) = if let Some(c) = &spec.auth.cert {
        if !spec.server.starts_with("https://") {
            return Err(ProviderError::BadConfig(
                "spec.auth.cert: a client certificate is presented over TLS only; spec.server must be https://".into(),
            ));
        }
        let cert = refs.selected_secret_key(ctx, "spec.auth.cert.clientCert", &c.client_cert, "tls.crt").await?;
        let key = refs.selected_secret_key(ctx, "spec.auth.cert.secretRef", &c.secret_ref, "tls.key").await?;
        ("spec.auth.cert", cert, key)
    } else {
        let tls = spec.tls.as_ref().and_then(|t| Some((t.cert_secret_ref.as_ref()?, t.key_secret_ref.as_ref()?)));
        let Some((cert, key)) = tls else {
            return Ok((builder.with_no_client_auth(), None));
        };
        let cert = refs.selected_secret_key(ctx, "spec.tls.certSecretRef", cert, "tls.crt").await?;
        let key = refs.selected_secret_key(ctx, "spec.tls.keySecretRef", key, "tls.key").await?;
        ("spec.tls", cert, key)
    };
    let chain = pem_certs(&cert_pem, field)?;
    let key = PrivateKeyDer::from_pem_slice(&key_pem)
        .map_err(|e| ProviderError::BadConfig(format!("{field}: not a PEM private key: {e}")))?;
    let tls = builder
        .with_client_auth_cert(chain, key)
        .map_err(|e| ProviderError::BadConfig(format!("{field}: unusable client certificate: {e}")))?;
    Ok((tls, Some((cert_pem, key_pem))))
}

async fn sa_token(
    refs: &ClusterRefs,
    ctx: &RequestContext,
    field: &str,
    sa: &keyward_crds::provider_config::ServiceAccountSelector,
    audiences: &[String],
    seconds: i64,
) -> Result<String, ProviderError> {
    let ns = named_namespace(ctx, field, NamedKind::ServiceAccount, &sa.name, sa.namespace.as_deref())?;
    refs.service_account_token(ns, &sa.name, audiences, seconds, field).await
}

/// A user name and password login (`userpass`, `ldap`): `POST auth/<path>/login/<username>`.
async fn password_login(
    refs: &ClusterRefs,
    ctx: &RequestContext,
    field: &str,
    default_path: &str,
    u: &VaultUserPassAuth,
) -> Result<Login, ProviderError> {
    let password = refs.selected_secret_text(ctx, &format!("{field}.secretRef"), &u.secret_ref).await?;
    let mount = u.path.as_deref().filter(|p| !p.is_empty()).unwrap_or(default_path);
    Login::post(field, mount, Some(u.username.trim()), json!({"password": password}))
}

/// Reads the credentials the login method names.
async fn login_method(
    refs: &ClusterRefs,
    ctx: &RequestContext,
    auth: &VaultAuth,
    google: &TokenExchange,
) -> Result<Login, ProviderError> {
    if let Some(t) = &auth.token_secret_ref {
        return Ok(Login::Token(refs.selected_secret_text(ctx, "spec.auth.tokenSecretRef", t).await?));
    }
    if let Some(a) = &auth.app_role {
        let role_id = match (&a.role_id, &a.role_ref) {
            (Some(id), _) if !id.is_empty() => id.clone(),
            (_, Some(r)) => refs.selected_secret_text(ctx, "spec.auth.appRole.roleRef", r).await?,
            _ => return Err(ProviderError::BadConfig("spec.auth.appRole: set roleId or roleRef".into())),
        };
        let secret_id = refs.selected_secret_text(ctx, "spec.auth.appRole.secretRef", &a.secret_ref).await?;
        let body = json!({"role_id": role_id, "secret_id": secret_id});
        return Login::post("spec.auth.appRole", &a.path, None, body);
    }
    if let Some(k) = &auth.kubernetes {
        let field = "spec.auth.kubernetes";
        let jwt = match (&k.service_account_ref, &k.secret_ref) {
            (Some(sa), _) => {
                let field = "spec.auth.kubernetes.serviceAccountRef";
                sa_token(refs, ctx, field, sa, &sa.audiences, SA_TOKEN_SECONDS).await?
            }
            // A Secret without a key holds the token under `token`, as upstream.
            (None, Some(s)) => {
                let token = refs.selected_secret_key(ctx, "spec.auth.kubernetes.secretRef", s, "token").await?;
                String::from_utf8_lossy(&token).trim().to_string()
            }
            (None, None) => {
                require_operator_owned(ctx, &format!("{field} without serviceAccountRef or secretRef"))?;
                tokio::fs::read_to_string(OWN_TOKEN_FILE).await.map(|t| t.trim().to_string()).map_err(|e| {
                    ProviderError::BadConfig(format!(
                        "{field}: cannot read the provider's own token {OWN_TOKEN_FILE}: {e}"
                    ))
                })?
            }
        };
        let body = json!({"role": k.role, "jwt": jwt});
        return Login::post("spec.auth.kubernetes", &k.mount_path, None, body);
    }
    if let Some(j) = &auth.jwt {
        let jwt = match (&j.secret_ref, &j.kubernetes_service_account_token) {
            (Some(s), _) => refs.selected_secret_text(ctx, "spec.auth.jwt.secretRef", s).await?,
            (None, Some(t)) => {
                let field = "spec.auth.jwt.kubernetesServiceAccountToken.serviceAccountRef";
                let audiences = t
                    .audiences
                    .clone()
                    .or_else(|| Some(t.service_account_ref.audiences.clone()).filter(|a| !a.is_empty()))
                    .unwrap_or_else(|| vec!["vault".to_string()]);
                let seconds = t.expiration_seconds.unwrap_or(SA_TOKEN_SECONDS);
                sa_token(refs, ctx, field, &t.service_account_ref, &audiences, seconds).await?
            }
            (None, None) => {
                return Err(ProviderError::BadConfig(
                    "spec.auth.jwt: set secretRef or kubernetesServiceAccountToken".into(),
                ));
            }
        };
        let mut body = json!({"jwt": jwt});
        if let Some(role) = &j.role {
            body["role"] = json!(role);
        }
        return Login::post("spec.auth.jwt", &j.path, None, body);
    }
    if let Some(u) = &auth.user_pass {
        return password_login(refs, ctx, "spec.auth.userPass", "userpass", u).await;
    }
    if let Some(u) = &auth.ldap {
        return password_login(refs, ctx, "spec.auth.ldap", "ldap", u).await;
    }
    if let Some(c) = &auth.cert {
        // The certificate itself is presented by the TLS client (see tls_config).
        let body = match c.vault_role.as_deref().filter(|r| !r.is_empty()) {
            Some(role) => json!({"name": role}),
            None => json!({}),
        };
        return Login::post("spec.auth.cert", &c.path, None, body);
    }
    if let Some(i) = &auth.iam {
        let iam = Box::new(IamLogin::read(refs, ctx, i).await?);
        let mount = i.path.as_deref().filter(|p| !p.is_empty()).unwrap_or(DEFAULT_MOUNT);
        return Ok(Login::Iam { path: Login::path("spec.auth.iam", mount, None)?, iam });
    }
    if let Some(g) = &auth.gcp {
        let gcp = Box::new(GcpLogin::read(refs, ctx, g, google).await?);
        // An empty path is the default mount, as upstream.
        let mount = if g.path.is_empty() { "gcp" } else { &g.path };
        return Ok(Login::Gcp { path: Login::path("spec.auth.gcp", mount, None)?, gcp });
    }
    // No login, as upstream allows: the provider's own VAULT_TOKEN, or none (a Vault Agent in
    // front of Vault logs in for it). Either is the provider's identity.
    require_operator_owned(ctx, VAULT_NO_LOGIN)?;
    Ok(Login::Token(std::env::var("VAULT_TOKEN").map(|t| t.trim().to_string()).unwrap_or_default()))
}

/// `spec.headers`, plus `X-Vault-Inconsistent: forward-active-node` when `forwardInconsistent`
/// goes with `readYourWrites` (as upstream: the header only matters for a request carrying an
/// index).
fn fixed_headers(spec: &VaultSpec) -> Result<HeaderMap, ProviderError> {
    let mut headers = HeaderMap::new();
    for (name, value) in &spec.headers {
        let field = format!("spec.headers[{name:?}]");
        let n = HeaderName::from_bytes(name.as_bytes())
            .map_err(|e| ProviderError::BadConfig(format!("{field}: not an HTTP header name: {e}")))?;
        let v = HeaderValue::from_str(value)
            .map_err(|e| ProviderError::BadConfig(format!("{field}: not an HTTP header value: {e}")))?;
        headers.append(n, v);
    }
    if spec.read_your_writes && spec.forward_inconsistent {
        headers.insert("x-vault-inconsistent", HeaderValue::from_static("forward-active-node"));
    }
    Ok(headers)
}

/// What a token was obtained with: a client built again with the same value may use the
/// token the last one held.
/// SHA-256 of what a token is obtained with: a slot shared between namespaces (a
/// ClusterSecretStore's) is found only by the very same server, namespace and credentials, never
/// by a colliding short hash of someone else's.
type Fingerprint = [u8; 32];

fn fingerprint(
    spec: &VaultSpec,
    auth_namespace: Option<&str>,
    login: &Login,
    identity: Option<&(Vec<u8>, Vec<u8>)>,
) -> Fingerprint {
    use sha2::Digest as _;
    let mut h = sha2::Sha256::new();
    // Each part length-prefixed, so no two different inputs concatenate alike.
    let mut part = |bytes: &[u8]| {
        h.update((bytes.len() as u64).to_be_bytes());
        h.update(bytes);
    };
    part(spec.server.trim_end_matches('/').as_bytes());
    part(auth_namespace.unwrap_or_default().as_bytes());
    match login {
        Login::Token(t) => {
            part(b"token");
            part(t.as_bytes());
        }
        Login::Post { path, body } => {
            part(b"post");
            part(path.as_bytes());
            part(body.to_string().as_bytes());
        }
        Login::Iam { path, iam } => {
            part(b"iam");
            part(path.as_bytes());
            for p in iam.identity_parts() {
                part(&p);
            }
        }
        Login::Gcp { path, gcp } => {
            part(b"gcp");
            part(path.as_bytes());
            for p in gcp.identity_parts() {
                part(&p);
            }
        }
    }
    if let Some((cert, key)) = identity {
        part(cert);
        part(key);
    }
    h.finalize().into()
}

fn errors_of(body: &Value) -> String {
    body.get("errors")
        .and_then(Value::as_array)
        .map(|e| e.iter().filter_map(Value::as_str).collect::<Vec<_>>().join("; "))
        .unwrap_or_default()
}

/// The provider's name on [`store_calls`], upstream's.
pub const PROVIDER_NAME: &str = "HashiCorp/Vault";

/// What a request to Vault is, in upstream's call names (`ReadMounts` and `RenewSelf` are
/// Keyward's: upstream makes neither call).
pub fn vault_call(method: &Method, path: &str) -> &'static str {
    match path {
        "auth/token/lookup-self" => return "LookupSelf",
        "auth/token/renew-self" => return "RenewSelf",
        "auth/token/revoke-self" => return "RevokeSelf",
        p if p.starts_with("auth/") => return "Login",
        p if p.starts_with("sys/") => return "ReadMounts",
        _ => {}
    }
    match method.as_str() {
        "GET" => "ReadSecretData",
        "LIST" => "ListSecrets",
        "DELETE" => "DeleteSecret",
        _ => "WriteSecretData",
    }
}

impl VaultClient {
    /// Builds a client for the server, CA, credentials and options `spec` describes, holding
    /// the token `tokens` keeps for `key` when it was obtained with the same credentials, and
    /// reaching only what `denied` allows (`spec.server` is the configuration's to write).
    /// Nothing is sent to Vault yet; the first call without a usable token logs in.
    pub async fn build(
        refs: &ClusterRefs,
        ctx: &RequestContext,
        spec: &VaultSpec,
        tokens: &TokenCache,
        key: &CacheKey,
        denied: &DeniedNetworks,
        google: &TokenExchange,
    ) -> Result<Self, ProviderError> {
        let server = reqwest::Url::parse(&spec.server)
            .map_err(|e| ProviderError::BadConfig(format!("spec.server {:?}: {e}", spec.server)))?;
        denied.check_url(&server).map_err(|d| ProviderError::PermissionDenied(format!("spec.server: {d}")))?;
        let (tls, identity) = tls_config(refs, ctx, spec).await?;
        let http = http_client(tls, denied)?;
        let login = login_method(refs, ctx, &spec.auth, google).await?;
        let namespace = spec.namespace.clone().filter(|n| !n.is_empty());
        let auth_namespace = spec.auth.namespace.clone().filter(|n| !n.is_empty()).or_else(|| namespace.clone());
        let token = tokens.slot(key, fingerprint(spec, auth_namespace.as_deref(), &login, identity.as_ref()));
        Ok(VaultClient {
            http,
            server: spec.server.trim_end_matches('/').to_string(),
            auth_namespace,
            namespace,
            login,
            token,
            headers: fixed_headers(spec)?,
            index: spec.read_your_writes.then(Arc::default),
            retry: None,
        })
    }

    /// A copy of this client (same connection pool, same token) that retries transient
    /// failures of each request per `retry`, for one generation: no retry starts later than
    /// [`RETRY_BUDGET`] from now.
    pub fn with_retry(&self, retry: Option<Retry>) -> VaultClient {
        let mut c = self.clone();
        c.retry = retry.map(|retry| RetryRun { retry, until: Instant::now() + RETRY_BUDGET });
        c
    }

    /// One raw request: the status and the JSON body (`Null` when empty), counted as a store
    /// call ([`store_calls`]; an answer below 400, or 404, is a successful call).
    async fn send(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        namespace: Option<&str>,
        body: Option<&Value>,
        query: &[(&str, String)],
    ) -> Result<(u16, Value), ProviderError> {
        let call = vault_call(&method, path);
        let mut retries = 0;
        loop {
            let result = self.exchange(method.clone(), path, token, namespace, body, query).await;
            store_calls::record(PROVIDER_NAME, call, matches!(&result, Ok((s, _)) if *s < 400 || *s == 404));
            let transient = match &result {
                Ok((status, _)) => transient_status(*status),
                Err(f) => f.transient,
            };
            if let Some(run) = self.retry
                && transient
                && retries < run.retry.max_retries
                && Instant::now() + run.retry.interval <= run.until
            {
                retries += 1;
                let status = result.as_ref().map_or(0, |(s, _)| *s);
                tracing::debug!(path, status, retry = retries, "transient failure of a Vault request; retrying");
                tokio::time::sleep(run.retry.interval).await;
                continue;
            }
            return result.map_err(|f| f.error);
        }
    }

    async fn exchange(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        namespace: Option<&str>,
        body: Option<&Value>,
        query: &[(&str, String)],
    ) -> Result<(u16, Value), Failed> {
        let url = format!("{}/v1/{}", self.server, path.trim_start_matches('/'));
        let mut req = self.http.request(method, &url).query(query).headers(self.headers.clone());
        // An empty token (a store without a login, the provider's environment has none) is left
        // out: a Vault Agent in front of Vault adds its own.
        if let Some(t) = token.filter(|t| !t.is_empty()) {
            req = req.header("X-Vault-Token", t);
        }
        if let Some(ns) = namespace {
            req = req.header("X-Vault-Namespace", ns);
        }
        if let Some(index) = self.index.as_ref().and_then(|i| i.lock().ok()?.clone()) {
            req = req.header(INDEX_HEADER, index);
        }
        if let Some(b) = body {
            req = req.json(b);
        }
        let resp = req.send().await.map_err(|e| {
            if let Some(refused) = denied_error(&e) {
                return Failed { error: refused, transient: false };
            }
            let kind = if e.is_timeout() { "timed out" } else { "failed" };
            let error = ProviderError::Unavailable(format!(
                "request to Vault at {} {kind}: {}",
                self.server,
                store_tls::causes(&e)
            ));
            Failed { error, transient: transient_transport(&e) }
        })?;
        if let (Some(slot), Some(index)) = (&self.index, resp.headers().get(INDEX_HEADER))
            && let Ok(mut last) = slot.lock()
        {
            *last = Some(index.clone());
        }
        // The server is the tenant's to name: its answer is capped, never read whole.
        let answer = http::Response::<reqwest::Body>::from(resp);
        // An answer that breaks off is not retried: the request may have taken effect.
        let (head, bytes) = body::read_limited(answer, body::MAX_RESPONSE_BYTES).await.map_err(|e| {
            let error = match body::limit_error(e.as_ref()) {
                Some(refused) => refused.to_provider_error(&format!("Vault at {}", self.server)),
                None => ProviderError::Unavailable(format!(
                    "reading the answer of Vault at {}: {}",
                    self.server,
                    store_tls::causes(e.as_ref())
                )),
            };
            Failed { error, transient: false }
        })?;
        let status = head.status.as_u16();
        let body = if bytes.is_empty() { Value::Null } else { serde_json::from_slice(&bytes).unwrap_or(Value::Null) };
        Ok((status, body))
    }

    fn token_of(body: &Value) -> Option<Token> {
        let auth = body.get("auth")?;
        Some(Token {
            value: auth.get("client_token")?.as_str()?.to_string(),
            renewable: auth.get("renewable").and_then(Value::as_bool).unwrap_or(false),
            ttl: Duration::from_secs(auth.get("lease_duration").and_then(Value::as_u64).unwrap_or(0)),
            obtained: Instant::now(),
        })
    }

    /// Logs in (or, for a fixed token, looks it up to learn its lifetime).
    async fn log_in(&self) -> Result<Token, ProviderError> {
        let ns = self.auth_namespace.as_deref();
        match &self.login {
            Login::Token(t) => {
                let (status, body) = self.send(Method::GET, "auth/token/lookup-self", Some(t), ns, None, &[]).await?;
                if status != 200 {
                    return Err(
                        match map_status(status, &errors_of(&body), "looking up spec.auth.tokenSecretRef's token") {
                            ProviderError::PermissionDenied(m) => ProviderError::Unauthenticated(m),
                            other => other,
                        },
                    );
                }
                let data = &body["data"];
                Ok(Token {
                    value: t.clone(),
                    renewable: data.get("renewable").and_then(Value::as_bool).unwrap_or(false),
                    ttl: Duration::from_secs(data.get("ttl").and_then(Value::as_u64).unwrap_or(0)),
                    obtained: Instant::now(),
                })
            }
            Login::Post { path, body } => self.post_login(path, body).await,
            Login::Iam { path, iam } => self.post_login(path, &iam.login_body().await?).await,
            Login::Gcp { path, gcp } => self.post_login(path, &gcp.login_body().await?).await,
        }
    }

    /// `POST <path>` with a login body; the token Vault answers with.
    async fn post_login(&self, path: &str, body: &Value) -> Result<Token, ProviderError> {
        let ns = self.auth_namespace.as_deref();
        let (status, answer) = self.send(Method::POST, path, None, ns, Some(body), &[]).await?;
        if status != 200 {
            // A refused login is a credentials problem, whatever status Vault uses.
            return Err(match map_status(status, &errors_of(&answer), &format!("logging in at {path}")) {
                ProviderError::InvalidArgument(m) | ProviderError::PermissionDenied(m) => {
                    ProviderError::Unauthenticated(m)
                }
                other => other,
            });
        }
        tracing::info!(path = %path, "logged in to Vault");
        Self::token_of(&answer).ok_or_else(|| ProviderError::Unavailable(format!("{path}: Vault returned no token")))
    }

    /// Renews the token; `None` when Vault refused (the caller logs in again).
    async fn renew(&self, token: &Token) -> Result<Option<Token>, ProviderError> {
        let ns = self.auth_namespace.as_deref();
        let (status, body) =
            self.send(Method::POST, "auth/token/renew-self", Some(&token.value), ns, Some(&json!({})), &[]).await?;
        if status != 200 {
            tracing::info!(status, "token renewal refused; logging in again");
            return Ok(None);
        }
        tracing::debug!("renewed the Vault token");
        Ok(Self::token_of(&body).map(|mut t| {
            t.value = token.value.clone();
            t
        }))
    }

    /// A usable token: the held one, renewed when two thirds of its lifetime passed, or a new
    /// login when it expired or could not be renewed.
    async fn token(&self) -> Result<String, ProviderError> {
        let mut held = self.token.lock().await;
        let current = match held.take() {
            Some(t) if !t.stale() => t,
            Some(t) if t.renewable && !t.expired() => match self.renew(&t).await? {
                Some(renewed) => renewed,
                None => self.log_in().await?,
            },
            _ => self.log_in().await?,
        };
        let value = current.value.clone();
        *held = Some(current);
        Ok(value)
    }

    /// Forgets the held token, so the next call logs in again.
    async fn drop_token(&self) {
        *self.token.lock().await = None;
    }

    /// A request with the client's token and namespace. A 403 with a token from a login is
    /// retried once after a fresh login (the token may have been revoked or expired early).
    /// Returns the status and body; statuses are the caller's to judge.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        query: &[(&str, String)],
    ) -> Result<(u16, Value), ProviderError> {
        let token = self.token().await?;
        let ns = self.namespace.as_deref();
        let (status, answer) = self.send(method.clone(), path, Some(&token), ns, body, query).await?;
        if status == 403 && !matches!(self.login, Login::Token(_)) {
            self.drop_token().await;
            let token = self.token().await?;
            return self.send(method, path, Some(&token), ns, body, query).await;
        }
        Ok((status, answer))
    }

    /// Like [`Self::call`], mapping any status but 2xx to an error; `None` for 204.
    pub async fn ok(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        query: &[(&str, String)],
        what: &str,
    ) -> Result<Value, ProviderError> {
        let (status, answer) = self.call(method, path, body, query).await?;
        if (200..300).contains(&status) { Ok(answer) } else { Err(map_status(status, &errors_of(&answer), what)) }
    }

    /// Looks the token up: proves the login works.
    pub async fn lookup_self(&self) -> Result<Value, ProviderError> {
        let token = self.token().await?;
        let ns = self.auth_namespace.as_deref();
        let (status, body) = self.send(Method::GET, "auth/token/lookup-self", Some(&token), ns, None, &[]).await?;
        if status == 200 { Ok(body) } else { Err(map_status(status, &errors_of(&body), "looking up the Vault token")) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// One request as a server saw it.
    #[derive(Debug)]
    struct Seen {
        line: String,
        headers: Vec<(String, String)>,
    }

    impl Seen {
        fn header(&self, name: &str) -> Option<&str> {
            self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
        }
    }

    /// An HTTP/1.1 listener answering each connection with the next `(status, body)` and
    /// recording what it received. Vault Enterprise namespaces cannot be exercised against the
    /// open-source dev server (it ignores the header), so this checks what the client sends.
    async fn listener(answers: Vec<(u16, &'static str)>) -> (String, tokio::task::JoinHandle<Vec<Seen>>) {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = format!("http://{}", l.local_addr().expect("addr"));
        let task = tokio::spawn(async move {
            let mut seen = Vec::new();
            for (status, body) in answers {
                let (mut conn, _) = l.accept().await.expect("accept");
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                let head_end = loop {
                    let n = conn.read(&mut chunk).await.expect("read");
                    buf.extend_from_slice(&chunk[..n]);
                    if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        break i;
                    }
                    assert!(n > 0, "connection closed mid-request");
                };
                let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
                let mut lines = head.lines();
                let line = lines.next().unwrap_or_default().to_string();
                let headers: Vec<(String, String)> = lines
                    .filter_map(|l| l.split_once(':').map(|(k, v)| (k.trim().to_string(), v.trim().to_string())))
                    .collect();
                let length: usize = headers
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
                    .and_then(|(_, v)| v.parse().ok())
                    .unwrap_or(0);
                while buf.len() < head_end + 4 + length {
                    let n = conn.read(&mut chunk).await.expect("read body");
                    assert!(n > 0, "connection closed mid-body");
                    buf.extend_from_slice(&chunk[..n]);
                }
                // Every answer carries a state index, as Vault Enterprise's do.
                let answer = format!(
                    "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nX-Vault-Index: \
                     idx-{}\r\nConnection: close\r\n\r\n{body}",
                    body.len(),
                    seen.len() + 1
                );
                conn.write_all(answer.as_bytes()).await.expect("write");
                seen.push(Seen { line, headers });
            }
            seen
        });
        (addr, task)
    }

    fn client(server: String, namespace: Option<&str>, auth_namespace: Option<&str>) -> VaultClient {
        let tls = store_tls::builder()
            .expect("tls")
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth();
        VaultClient {
            http: http_client(tls, &DeniedNetworks::none()).expect("http"),
            server,
            namespace: namespace.map(str::to_string),
            auth_namespace: auth_namespace.map(str::to_string),
            login: Login::post("spec.auth.appRole", "approle", None, json!({"role_id": "r", "secret_id": "s"}))
                .expect("login"),
            token: Slot::default(),
            headers: HeaderMap::new(),
            index: None,
            retry: None,
        }
    }

    const LOGIN_T1: &str = r#"{"auth":{"client_token":"t1","renewable":true,"lease_duration":3600}}"#;
    const LOGIN_T2: &str = r#"{"auth":{"client_token":"t2","renewable":true,"lease_duration":3600}}"#;
    const DATA: &str = r#"{"data":{"data":{"user":"app"}}}"#;

    #[tokio::test]
    async fn namespace_headers_on_login_and_on_calls() {
        let (addr, seen) = listener(vec![(200, LOGIN_T1), (200, DATA), (200, DATA)]).await;
        let c = client(addr, Some("team-a"), Some("admin"));
        let body = c.ok(Method::GET, "secret/data/db", None, &[], "reading").await.expect("read");
        assert_eq!(body["data"]["data"]["user"], "app");
        c.ok(Method::GET, "secret/data/db", None, &[], "reading").await.expect("read again");
        let seen = seen.await.expect("listener");
        assert_eq!(seen.len(), 3, "one login, two reads: {seen:?}");
        assert_eq!(seen[0].line, "POST /v1/auth/approle/login HTTP/1.1");
        assert_eq!(seen[0].header("x-vault-namespace"), Some("admin"), "the login goes to auth.namespace");
        assert_eq!(seen[0].header("x-vault-token"), None);
        for read in &seen[1..] {
            assert_eq!(read.line, "GET /v1/secret/data/db HTTP/1.1");
            assert_eq!(read.header("x-vault-namespace"), Some("team-a"), "calls go to spec.namespace");
            assert_eq!(read.header("x-vault-token"), Some("t1"), "the token is reused");
        }

        // Without namespaces no header is sent; auth.namespace defaults to spec.namespace in
        // build(), tested through the config there.
        let (addr, seen) = listener(vec![(200, LOGIN_T1), (200, DATA)]).await;
        client(addr, None, None).ok(Method::GET, "secret/data/db", None, &[], "reading").await.expect("read");
        assert!(seen.await.expect("listener").iter().all(|s| s.header("x-vault-namespace").is_none()));
    }

    #[tokio::test]
    async fn a_refused_token_is_replaced_by_a_new_login_once() {
        let forbidden = r#"{"errors":["permission denied"]}"#;
        let (addr, seen) = listener(vec![(200, LOGIN_T1), (403, forbidden), (200, LOGIN_T2), (200, DATA)]).await;
        let c = client(addr, None, None);
        c.ok(Method::GET, "secret/data/db", None, &[], "reading").await.expect("read after a new login");
        let seen = seen.await.expect("listener");
        assert_eq!(seen[3].header("x-vault-token"), Some("t2"), "{seen:?}");

        // A second refusal right after the new login is the caller's answer, not a loop.
        let (addr, seen) = listener(vec![(200, LOGIN_T1), (403, forbidden), (200, LOGIN_T2), (403, forbidden)]).await;
        let e = client(addr, None, None).ok(Method::GET, "secret/data/db", None, &[], "reading").await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e}");
        assert!(e.to_string().contains("permission denied"), "{e}");
        assert_eq!(seen.await.expect("listener").len(), 4);
    }

    #[test]
    fn retry_settings_are_capped() {
        let settings = |n: Option<i32>, i: Option<&str>| SecretStoreRetrySettings {
            max_retries: n,
            retry_interval: i.map(str::to_string),
        };
        let of = |n, i| Retry::of(Some(&settings(n, i)));
        assert_eq!(Retry::of(None), Ok(None), "no retrySettings: no retries");
        assert_eq!(of(None, Some("1s")), Ok(None), "no maxRetries: none, as upstream");
        assert_eq!(of(Some(0), None), Ok(None));
        assert_eq!(of(Some(-3), None), Ok(None));
        let r = |max_retries, ms| Ok(Some(Retry { max_retries, interval: Duration::from_millis(ms) }));
        assert_eq!(of(Some(3), Some("500ms")), r(3, 500));
        assert_eq!(of(Some(2), None), r(2, 1000), "the default pause");
        assert_eq!(of(Some(2), Some("")), r(2, 1000));
        assert_eq!(of(Some(2), Some("0s")), r(2, 0));
        assert_eq!(of(Some(1000), Some("1h")), r(MAX_RETRIES, 2000), "both capped");
        assert_eq!(of(Some(i32::MAX), Some("2s")), r(5, 2000));
        assert_eq!(of(Some(5), Some("2001ms")), r(5, 2000));
        let e = of(Some(2), Some("soon")).unwrap_err();
        assert!(e.starts_with("spec.retrySettings.retryInterval \"soon\""), "{e}");
        // The caps keep every retry of a generation inside the reconciler's call deadline.
        assert!(MAX_RETRY_INTERVAL * MAX_RETRIES >= RETRY_BUDGET && RETRY_BUDGET < Duration::from_secs(10));
    }

    #[test]
    fn only_transient_statuses_are_retried() {
        for s in [429, 500, 502, 503, 504, 599] {
            assert!(transient_status(s), "{s}");
        }
        for s in [200, 204, 400, 401, 403, 404, 405, 412, 501] {
            assert!(!transient_status(s), "{s}");
        }
    }

    #[tokio::test]
    async fn transient_failures_are_retried_and_refusals_are_not() {
        let sealed = r#"{"errors":["Vault is sealed"]}"#;
        let forbidden = r#"{"errors":["permission denied"]}"#;
        let retry = Some(Retry { max_retries: 3, interval: Duration::from_millis(50) });
        // A sealed server (503) on the login and on the read: each retried, then served.
        let answers = vec![(503, sealed), (200, LOGIN_T1), (503, sealed), (429, sealed), (200, DATA)];
        let (addr, seen) = listener(answers).await;
        let c = client(addr, None, None).with_retry(retry);
        let body = c.ok(Method::GET, "secret/data/db", None, &[], "reading").await.expect("read after retries");
        assert_eq!(body["data"]["data"]["user"], "app");
        assert_eq!(seen.await.expect("listener").len(), 5);
        // Without retries the first 503 is the answer.
        let (addr, seen) = listener(vec![(503, sealed)]).await;
        let e = client(addr, None, None).ok(Method::GET, "secret/data/db", None, &[], "reading").await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unavailable, "{e}");
        assert_eq!(seen.await.expect("listener").len(), 1);
        // At most max_retries retries.
        let (addr, seen) =
            listener(vec![(200, LOGIN_T1), (500, sealed), (500, sealed), (500, sealed), (500, sealed)]).await;
        let c = client(addr, None, None).with_retry(retry);
        let e = c.ok(Method::GET, "secret/data/db", None, &[], "reading").await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unavailable, "{e}");
        assert_eq!(seen.await.expect("listener").len(), 5, "one login, the read and three retries");
        // A refusal is not retried: the 403 gets its one fresh login, as without retries.
        let answers = vec![(200, LOGIN_T1), (403, forbidden), (200, LOGIN_T2), (403, forbidden)];
        let (addr, seen) = listener(answers).await;
        let c = client(addr.clone(), None, None).with_retry(retry);
        let e = c.ok(Method::GET, "secret/data/db", None, &[], "reading").await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e}");
        assert_eq!(seen.await.expect("listener").len(), 4);
        // Nor a 400 or a 501.
        for status in [400, 501] {
            let (addr, seen) = listener(vec![(200, LOGIN_T1), (status, forbidden)]).await;
            let c = client(addr, None, None).with_retry(retry);
            assert!(c.ok(Method::GET, "secret/data/db", None, &[], "reading").await.is_err());
            assert_eq!(seen.await.expect("listener").len(), 2, "{status}");
        }
    }

    #[tokio::test]
    async fn a_refused_connection_is_retried_within_the_budget() {
        // Nothing listens on the port at first; the server comes up after 300 ms.
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            l.local_addr().expect("addr").port()
        };
        let c = client(format!("http://127.0.0.1:{port}"), None, None)
            .with_retry(Some(Retry { max_retries: 5, interval: Duration::from_millis(200) }));
        let late = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            let l = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.expect("bind late");
            let (mut conn, _) = l.accept().await.expect("accept");
            let mut buf = [0u8; 4096];
            let _ = conn.read(&mut buf).await;
            let body = r#"{"errors":["permission denied"]}"#;
            let answer = format!(
                "HTTP/1.1 400 X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            conn.write_all(answer.as_bytes()).await.expect("write");
        });
        // The login reaches the late server (which refuses it: a 400 is not retried).
        let e = c.ok(Method::GET, "secret/data/db", None, &[], "reading").await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unauthenticated, "the login got its answer: {e}");
        late.await.expect("late server");

        // Nothing ever listens: retried until the budget, then the connection failure.
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            l.local_addr().expect("addr").port()
        };
        let mut c = client(format!("http://127.0.0.1:{port}"), None, None)
            .with_retry(Some(Retry { max_retries: 5, interval: Duration::from_millis(100) }));
        if let Some(run) = c.retry.as_mut() {
            run.until = Instant::now() + Duration::from_millis(250);
        }
        let started = Instant::now();
        let e = c.ok(Method::GET, "secret/data/db", None, &[], "reading").await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unavailable, "{e}");
        let took = started.elapsed();
        assert!(took >= Duration::from_millis(200) && took < Duration::from_secs(2), "stopped at the budget: {took:?}");
    }

    /// A server answering every request with a 300 MB body, declared in `Content-Length` or
    /// chunked; returns its address and the bytes it managed to send per connection.
    async fn flood(declared: bool) -> (String, tokio::task::JoinHandle<Vec<u64>>) {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = format!("http://{}", l.local_addr().expect("addr"));
        let task = tokio::spawn(async move {
            let mut sent = Vec::new();
            // The login, then the read.
            for _ in 0..2 {
                let (mut conn, _) = l.accept().await.expect("accept");
                let mut buf = [0u8; 8192];
                let _ = conn.read(&mut buf).await;
                let head = if declared {
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 314572800\r\n\r\n"
                } else {
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                };
                let mut n = 0u64;
                if conn.write_all(head.as_bytes()).await.is_ok() {
                    let chunk = vec![b' '; 64 * 1024];
                    let framed =
                        [format!("{:x}\r\n", chunk.len()).into_bytes(), chunk.clone(), b"\r\n".to_vec()].concat();
                    let piece = if declared { &chunk } else { &framed };
                    while n < 300 * 1024 * 1024 && conn.write_all(piece).await.is_ok() {
                        n += piece.len() as u64;
                    }
                }
                sent.push(n);
            }
            sent
        });
        (addr, task)
    }

    #[tokio::test]
    async fn oversized_answers_are_refused_while_streaming() {
        for declared in [true, false] {
            let (addr, sent) = flood(declared).await;
            let c = client(addr.clone(), None, None);
            let e = c.ok(Method::GET, "secret/data/db", None, &[], "reading").await.expect_err("refused");
            assert_eq!(e.code(), tonic::Code::Unavailable, "{e}");
            assert_eq!(
                e.to_string(),
                format!("store unavailable: Vault at {addr} answered with more than 4 MiB; refusing the response"),
                "declared: {declared}"
            );
            // Each call stops at its login (both connections are logins); the server stopped
            // being read long before its 300 MB.
            let sent = tokio::time::timeout(Duration::from_secs(5), async {
                let _ = c.ok(Method::GET, "secret/data/db", None, &[], "reading").await;
                sent.await.expect("server")
            })
            .await
            .expect("server done");
            assert!(sent.iter().all(|n| *n < 64 * 1024 * 1024), "declared: {declared}: sent {sent:?}");
        }
    }

    #[tokio::test]
    async fn headers_and_read_your_writes_on_every_request() {
        let (addr, seen) = listener(vec![(200, LOGIN_T1), (200, DATA), (200, DATA)]).await;
        let spec = VaultSpec {
            headers: [("X-Team".to_string(), "a".to_string())].into(),
            read_your_writes: true,
            forward_inconsistent: true,
            ..Default::default()
        };
        let mut c = client(addr, None, None);
        c.headers = fixed_headers(&spec).expect("headers");
        c.index = Some(Arc::default());
        c.ok(Method::GET, "secret/data/db", None, &[], "reading").await.expect("read");
        c.ok(Method::GET, "secret/data/db", None, &[], "reading").await.expect("read again");
        let seen = seen.await.expect("listener");
        for (i, s) in seen.iter().enumerate() {
            assert_eq!(s.header("x-team"), Some("a"), "{i}: {s:?}");
            assert_eq!(s.header("x-vault-inconsistent"), Some("forward-active-node"), "{i}: {s:?}");
        }
        assert_eq!(seen[0].header("x-vault-index"), None, "nothing to send back yet");
        assert_eq!(seen[1].header("x-vault-index"), Some("idx-1"), "the login's index");
        assert_eq!(seen[2].header("x-vault-index"), Some("idx-2"), "the last index");

        // Without readYourWrites: no index and, as upstream, no X-Vault-Inconsistent.
        let (addr, seen) = listener(vec![(200, LOGIN_T1), (200, DATA)]).await;
        let mut c = client(addr, None, None);
        c.headers = fixed_headers(&VaultSpec { forward_inconsistent: true, ..Default::default() }).expect("headers");
        c.ok(Method::GET, "secret/data/db", None, &[], "reading").await.expect("read");
        let seen = seen.await.expect("listener");
        assert!(seen.iter().all(|s| s.header("x-vault-index").is_none() && s.header("x-vault-inconsistent").is_none()));

        let bad = VaultSpec { headers: [("X-Team".to_string(), "a\nb".to_string())].into(), ..Default::default() };
        assert_eq!(fixed_headers(&bad).expect_err("line break").code(), tonic::Code::FailedPrecondition);
    }

    #[test]
    fn login_paths_are_checked_segments() {
        let path =
            |mount: &str, user: Option<&str>| Login::path("spec.auth.userPass", mount, user).map_err(|e| e.to_string());
        assert_eq!(path("userpass", Some("alice")).unwrap(), "auth/userpass/login/alice");
        assert_eq!(path("/team/ldap/", Some("bob")).unwrap(), "auth/team/ldap/login/bob");
        assert_eq!(path("cert", None).unwrap(), "auth/cert/login");
        assert_eq!(path("userpass", Some("al ice")).unwrap(), "auth/userpass/login/al%20ice");
        for (mount, user) in [
            ("../token", Some("a")),
            ("%2e%2e/token", Some("a")),
            ("", Some("a")),
            ("userpass", Some("..")),
            ("userpass", Some("a/../../token/create")),
            ("userpass", Some("a/b")),
            ("userpass", Some("a?x")),
        ] {
            let e = path(mount, user).expect_err(&format!("{mount:?} {user:?}"));
            assert!(e.contains("spec.auth.userPass."), "{e}");
        }
    }

    #[test]
    fn tokens_are_kept_per_configuration_and_credentials() {
        let key = |kind: &str, ns: &str, generation| CacheKey {
            kind: kind.into(),
            namespace: ns.into(),
            name: "vault".into(),
            uid: "u".into(),
            generation,
            operator: kind == "ClusterSecretStore",
        };
        let cache = TokenCache::default();
        let first = cache.slot(&key("SecretStore", "a", 1), [7; 32]);
        assert!(
            Arc::ptr_eq(&first, &cache.slot(&key("SecretStore", "a", 1), [7; 32])),
            "a rebuilt client shares the token"
        );
        let rotated = cache.slot(&key("SecretStore", "a", 1), [8; 32]);
        assert!(!Arc::ptr_eq(&first, &rotated), "other credentials log in again");
        assert_eq!(cache.len(), 2, "the first token is still held");
        drop(first);
        drop(cache.slot(&key("SecretStore", "a", 1), [8; 32]));
        assert_eq!(cache.len(), 1, "a superseded token nobody holds is forgotten");
        let next = cache.slot(&key("SecretStore", "a", 2), [8; 32]);
        assert!(!Arc::ptr_eq(&rotated, &next), "a new generation logs in again");
        assert_eq!(cache.len(), 1, "older generations are forgotten");
        // Another namespace's SecretStore of the same name is another configuration.
        let other = cache.slot(&key("SecretStore", "b", 2), [8; 32]);
        assert!(!Arc::ptr_eq(&other, &next));
        // A ClusterSecretStore's namespaces share a token when their credentials are the same.
        let cluster_a = cache.slot(&key("ClusterSecretStore", "a", 1), [8; 32]);
        assert!(Arc::ptr_eq(&cluster_a, &cache.slot(&key("ClusterSecretStore", "b", 1), [8; 32])));
        let cluster_c = cache.slot(&key("ClusterSecretStore", "c", 1), [9; 32]);
        assert!(!Arc::ptr_eq(&cluster_a, &cluster_c), "other credentials, another token");
        assert_eq!(cache.len(), 4);
        // A slot nobody holds whose token is gone is pruned on the next insert.
        drop((other, cluster_a, cluster_c));
        drop(cache.slot(&key("SecretStore", "a", 2), [8; 32]));
        assert_eq!(cache.len(), 1, "only the held slot stays");
        drop(next);
    }

    #[test]
    fn fingerprints_separate_every_part_of_the_credentials() {
        let spec = |server: &str| VaultSpec { server: server.into(), ..Default::default() };
        let token = |t: &str| Login::Token(t.into());
        let base = fingerprint(&spec("https://v"), None, &token("t"), None);
        assert_eq!(
            base,
            fingerprint(&spec("https://v/"), None, &token("t"), None),
            "a trailing slash is the same server"
        );
        for other in [
            fingerprint(&spec("https://w"), None, &token("t"), None),
            fingerprint(&spec("https://v"), Some("team"), &token("t"), None),
            fingerprint(&spec("https://v"), None, &token("u"), None),
            fingerprint(&spec("https://v"), None, &token("t"), Some(&(b"c".to_vec(), b"k".to_vec()))),
        ] {
            assert_ne!(base, other);
        }
        // Length prefixes: moving a byte from one part to the next is another input.
        let id =
            |c: &[u8], k: &[u8]| fingerprint(&spec("https://v"), None, &token("t"), Some(&(c.to_vec(), k.to_vec())));
        assert_ne!(id(b"ab", b"c"), id(b"a", b"bc"));
    }

    #[derive(Debug)]
    struct Outer(std::io::Error);

    impl std::fmt::Display for Outer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("error sending request")
        }
    }

    impl std::error::Error for Outer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn causes_are_joined() {
        let e = Outer(std::io::Error::other("invalid peer certificate: UnknownIssuer"));
        assert_eq!(store_tls::causes(&e), "error sending request: invalid peer certificate: UnknownIssuer");
    }

    #[test]
    fn calls_have_upstreams_names() {
        let list = Method::from_bytes(b"LIST").expect("method");
        assert_eq!(vault_call(&Method::POST, "auth/approle/login"), "Login");
        assert_eq!(vault_call(&Method::GET, "auth/token/lookup-self"), "LookupSelf");
        assert_eq!(vault_call(&Method::GET, "sys/internal/ui/mounts/secret"), "ReadMounts");
        assert_eq!(vault_call(&Method::GET, "secret/data/db"), "ReadSecretData");
        assert_eq!(vault_call(&list, "secret/metadata/app"), "ListSecrets");
        assert_eq!(vault_call(&Method::POST, "secret/data/db"), "WriteSecretData");
        assert_eq!(vault_call(&Method::DELETE, "secret/metadata/db"), "DeleteSecret");
    }
}
