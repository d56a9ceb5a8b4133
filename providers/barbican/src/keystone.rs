//! Keystone v3 password logins and the tokens they yield, and the HTTP client both Keystone and
//! Barbican are reached with.
//!
//! A token is scoped to the configuration's project (`tenantName` in `domainName`) and carries
//! the catalog, where Barbican is the `key-manager` service. Tokens live in a [`TokenCache`]
//! keyed by Keystone's URL, the domain, the project, the user and a SHA-256 of the password, and
//! are reused until shortly before they expire: one login serves every read of a configuration
//! (and of every configuration with the same credentials). A token Barbican refuses is dropped
//! ([`TokenCache::forget`]) and the caller logs in once more.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use keyward_provider_runtime::netguard::{DeniedNetworks, denied_error, guarded_http};
use keyward_provider_runtime::{ProviderError, body, store_calls, store_tls};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::sync::Mutex;

/// A token is not used when it expires within this margin: a new login replaces it.
pub const EXPIRY_MARGIN: Duration = Duration::from_secs(60);

/// The catalog's type of Barbican's service.
pub const KEY_MANAGER: &str = "key-manager";

/// The provider's name on [`store_calls`].
pub const PROVIDER_NAME: &str = "OpenStack/Barbican";

/// The HTTP(S) client Keystone and Barbican are reached with, and what it may not reach: the
/// Keystone URL is the configuration's to write and Barbican's URL is whatever that Keystone's
/// catalog says, so both go through the runtime's address guard.
#[derive(Clone)]
pub struct Http {
    client: reqwest::Client,
    denied: DeniedNetworks,
}

impl Http {
    /// rustls on ring with the system roots, the runtime's time limit, no redirects (an answer
    /// elsewhere is not followed with a token or a password), names resolved and checked by
    /// the guard against `denied`.
    pub fn new(denied: DeniedNetworks) -> Result<Self, ProviderError> {
        let tls = store_tls::client_config(None, "spec.authURL")?;
        let client = guarded_http(&denied)
            .tls_backend_preconfigured(tls)
            .timeout(body::REQUEST_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| ProviderError::Internal(format!("building the HTTP client: {e}")))?;
        Ok(Http { client, denied })
    }

    /// A request to `url`.
    pub fn request(&self, method: reqwest::Method, url: String) -> reqwest::RequestBuilder {
        self.client.request(method, url)
    }

    /// One request, its address checked and its answer capped by the runtime's body limits:
    /// status, headers and body. Counted as the store call `call` ([`store_calls`]; an answer
    /// below 400, or 404, is a successful call).
    pub async fn send(
        &self,
        req: reqwest::RequestBuilder,
        server: &str,
        call: &str,
    ) -> Result<(u16, http::HeaderMap, Vec<u8>), ProviderError> {
        let result = self.exchange(req, server).await;
        let ok = matches!(&result, Ok((s, _, _)) if *s < 400 || *s == 404);
        store_calls::record(PROVIDER_NAME, call, ok);
        result
    }

    async fn exchange(
        &self,
        req: reqwest::RequestBuilder,
        server: &str,
    ) -> Result<(u16, http::HeaderMap, Vec<u8>), ProviderError> {
        let req = req.build().map_err(|e| ProviderError::BadConfig(format!("{server}: {e}")))?;
        // An IP literal is never resolved, so it is checked here; names are checked when resolved.
        self.denied.check_url(req.url()).map_err(|d| ProviderError::PermissionDenied(format!("{server}: {d}")))?;
        let resp = self.client.execute(req).await.map_err(|e| {
            denied_error(&e).unwrap_or_else(|| {
                let kind = if e.is_timeout() { "timed out" } else { "failed" };
                ProviderError::Unavailable(format!("request to {server} {kind}: {}", store_tls::causes(&e)))
            })
        })?;
        let answer = http::Response::<reqwest::Body>::from(resp);
        let (head, bytes) = body::read_limited(answer, body::MAX_RESPONSE_BYTES).await.map_err(|e| {
            match body::limit_error(e.as_ref()) {
                Some(refused) => refused.to_provider_error(server),
                None => ProviderError::Unavailable(format!(
                    "reading the answer of {server}: {}",
                    store_tls::causes(e.as_ref())
                )),
            }
        })?;
        Ok((head.status.as_u16(), head.headers, bytes.to_vec()))
    }
}

/// What an OpenStack error answer says (`error.message`, Barbican's `description`), short.
pub fn error_text(body: &[u8]) -> String {
    let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let msg = v["error"]["message"]
        .as_str()
        .or_else(|| v["description"].as_str())
        .or_else(|| v["title"].as_str())
        .unwrap_or_default();
    msg.chars().take(300).collect()
}

/// Keystone's v3 base URL from `authURL`: as given when it ends with `/v3`, else with `/v3`
/// added (Keyward does not run Keystone's version discovery).
pub fn identity_v3(auth_url: &str) -> String {
    let base = auth_url.trim_end_matches('/');
    if base.ends_with("/v3") { base.to_string() } else { format!("{base}/v3") }
}

/// Who logs in where.
#[derive(Clone)]
pub struct Credentials {
    /// Keystone's v3 base URL ([`identity_v3`]).
    pub identity: String,
    /// The domain of the user and the project.
    pub domain: String,
    /// The project.
    pub project: String,
    /// The user name.
    pub user: String,
    /// The password. Never logged.
    pub password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("identity", &self.identity)
            .field("domain", &self.domain)
            .field("project", &self.project)
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

/// The cache key of a token: where and who, the password only as its hash.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct TokenKey {
    identity: String,
    domain: String,
    project: String,
    user: String,
    password_sha256: [u8; 32],
}

impl TokenKey {
    fn of(c: &Credentials) -> Self {
        TokenKey {
            identity: c.identity.clone(),
            domain: c.domain.clone(),
            project: c.project.clone(),
            user: c.user.clone(),
            password_sha256: Sha256::digest(c.password.as_bytes()).into(),
        }
    }
}

/// A catalog endpoint of the key-manager service.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// `region_id` (or `region`).
    pub region: String,
    /// `public`, `internal` or `admin`.
    pub interface: String,
    /// The URL.
    pub url: String,
}

/// A project-scoped token and what came with it.
#[derive(Clone)]
pub struct Token {
    /// `X-Subject-Token`. Never logged.
    pub value: String,
    /// When Keystone says it expires.
    pub expires: SystemTime,
    /// The key-manager endpoints of the catalog.
    pub key_manager: Vec<Endpoint>,
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Token").field("expires", &self.expires).field("key_manager", &self.key_manager).finish()
    }
}

impl Token {
    fn usable(&self) -> bool {
        SystemTime::now() + EXPIRY_MARGIN < self.expires
    }

    /// Barbican's endpoint: the catalog's public key-manager endpoint in `region` (any region
    /// when empty), as gophercloud picks it; used only when it is an `http(s)://` URL.
    pub fn barbican_url(&self, region: &str) -> Result<String, ProviderError> {
        let found = self
            .key_manager
            .iter()
            .find(|e| e.interface == "public" && (region.is_empty() || e.region == region))
            .ok_or_else(|| {
                let regions: Vec<&str> = self.key_manager.iter().map(|e| e.region.as_str()).collect();
                ProviderError::BadConfig(format!(
                    "Keystone's catalog has no public {KEY_MANAGER} (Barbican) endpoint{} (its key-manager regions: \
                     {regions:?})",
                    if region.is_empty() { String::new() } else { format!(" in region {region:?}") }
                ))
            })?;
        crate::api::check_http_url(&found.url).map_err(|e| {
            ProviderError::BadConfig(format!("Keystone's catalog names Barbican at {:?}, which {e}", found.url))
        })?;
        Ok(found.url.trim_end_matches('/').to_string())
    }
}

/// The body of a password login scoped to the project, as gophercloud sends it for a user name,
/// a domain name and a tenant name.
fn login_body(c: &Credentials) -> Value {
    json!({
        "auth": {
            "identity": {
                "methods": ["password"],
                "password": {"user": {"name": c.user, "domain": {"name": c.domain}, "password": c.password}},
            },
            "scope": {"project": {"name": c.project, "domain": {"name": c.domain}}},
        }
    })
}

fn parse_expiry(s: &str) -> Option<SystemTime> {
    let t: jiff::Timestamp = s.parse().ok()?;
    let secs = u64::try_from(t.as_second()).ok()?;
    Some(SystemTime::UNIX_EPOCH + Duration::from_secs(secs))
}

/// The token of a login answer: its expiry and the key-manager endpoints of its catalog.
pub fn token_of(value: String, body: &[u8]) -> Result<Token, ProviderError> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| ProviderError::Unavailable(format!("Keystone's login answer is not JSON: {e}")))?;
    let expires = v["token"]["expires_at"]
        .as_str()
        .and_then(parse_expiry)
        .ok_or_else(|| ProviderError::Unavailable("Keystone's login answer has no token.expires_at".into()))?;
    let mut key_manager = Vec::new();
    for service in v["token"]["catalog"].as_array().map(Vec::as_slice).unwrap_or_default() {
        if service["type"].as_str() != Some(KEY_MANAGER) {
            continue;
        }
        for e in service["endpoints"].as_array().map(Vec::as_slice).unwrap_or_default() {
            let s = |k: &str| e[k].as_str().unwrap_or_default().to_string();
            let region = if s("region_id").is_empty() { s("region") } else { s("region_id") };
            key_manager.push(Endpoint { region, interface: s("interface"), url: s("url") });
        }
    }
    Ok(Token { value, expires, key_manager })
}

type Slot = Arc<Mutex<Option<Token>>>;

/// Keystone tokens by (Keystone URL, domain, project, user, password hash), shared by every
/// configuration that logs in with the same credentials; counted logins for tests and metrics.
#[derive(Default)]
pub struct TokenCache {
    slots: std::sync::Mutex<HashMap<TokenKey, Slot>>,
    logins: std::sync::atomic::AtomicU64,
}

impl TokenCache {
    fn slot(&self, key: &TokenKey) -> Slot {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        // Expired tokens no request is using go.
        slots.retain(|_, slot| {
            Arc::strong_count(slot) > 1
                || slot.try_lock().map(|t| t.as_ref().is_some_and(Token::usable)).unwrap_or(true)
        });
        slots.entry(key.clone()).or_default().clone()
    }

    /// A usable token for `creds`: the cached one, else a new login (one at a time per key).
    pub async fn token(&self, http: &Http, creds: &Credentials) -> Result<Token, ProviderError> {
        let slot = self.slot(&TokenKey::of(creds));
        let mut held = slot.lock().await;
        if let Some(t) = held.as_ref().filter(|t| t.usable()) {
            return Ok(t.clone());
        }
        let token = self.login(http, creds).await?;
        *held = Some(token.clone());
        Ok(token)
    }

    /// Drops `refused` (Barbican answered 401 to it), unless another request replaced it already.
    pub async fn forget(&self, creds: &Credentials, refused: &Token) {
        let slot = self.slot(&TokenKey::of(creds));
        let mut held = slot.lock().await;
        if held.as_ref().is_some_and(|t| t.value == refused.value) {
            *held = None;
        }
    }

    /// How many logins this cache made.
    pub fn logins(&self) -> u64 {
        self.logins.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// `POST <identity>/auth/tokens`.
    async fn login(&self, http: &Http, c: &Credentials) -> Result<Token, ProviderError> {
        self.logins.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let server = format!("Keystone at {}", c.identity);
        let req = http.request(reqwest::Method::POST, format!("{}/auth/tokens", c.identity)).json(&login_body(c));
        let (status, headers, body) = http.send(req, &server, "Login").await?;
        let who = format!("user {:?} of domain {:?} for project {:?}", c.user, c.domain, c.project);
        match status {
            201 | 200 => {}
            401 => {
                return Err(ProviderError::Unauthenticated(format!(
                    "{server} refused the login of {who}: wrong user name or password, or the user has no role on \
                     the project ({})",
                    error_text(&body)
                )));
            }
            403 => {
                return Err(ProviderError::PermissionDenied(format!(
                    "{server} refused the login of {who}: {}",
                    error_text(&body)
                )));
            }
            400 | 404 => {
                return Err(ProviderError::BadConfig(format!(
                    "{server} answered {status} to the login of {who}: {} (is authURL Keystone's v3 endpoint?)",
                    error_text(&body)
                )));
            }
            s => {
                return Err(ProviderError::Unavailable(format!(
                    "{server} answered {s} to the login of {who}: {}",
                    error_text(&body)
                )));
            }
        }
        let value = headers
            .get("x-subject-token")
            .and_then(|v| v.to_str().ok())
            .filter(|v| !v.is_empty())
            .ok_or_else(|| ProviderError::Unavailable(format!("{server} answered the login without X-Subject-Token")))?
            .to_string();
        let token = token_of(value, &body)?;
        tracing::debug!(keystone = %c.identity, user = %c.user, project = %c.project, "logged in to Keystone");
        Ok(token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_urls() {
        assert_eq!(identity_v3("https://k:5000/v3"), "https://k:5000/v3");
        assert_eq!(identity_v3("https://k:5000/v3/"), "https://k:5000/v3");
        assert_eq!(identity_v3("https://k:5000"), "https://k:5000/v3");
        assert_eq!(identity_v3("https://k/identity/"), "https://k/identity/v3");
    }

    #[test]
    fn catalog_endpoints() {
        let body = br#"{"token":{"expires_at":"2099-01-01T00:00:00.000000Z","catalog":[
            {"type":"identity","endpoints":[{"interface":"public","region_id":"RegionOne","url":"http://k/v3"}]},
            {"type":"key-manager","endpoints":[
                {"interface":"internal","region_id":"RegionOne","url":"http://internal:9311"},
                {"interface":"public","region_id":"RegionOne","url":"http://one:9311/"},
                {"interface":"public","region_id":"RegionTwo","url":"file:///etc/passwd"}]}]}}"#;
        let t = token_of("tok".into(), body).expect("token");
        assert!(t.usable());
        assert_eq!(t.barbican_url("RegionOne").expect("one"), "http://one:9311");
        assert_eq!(t.barbican_url("").expect("any"), "http://one:9311");
        let e = t.barbican_url("RegionTwo").expect_err("not http");
        assert!(e.to_string().contains("must start with http"), "{e}");
        let e = t.barbican_url("RegionThree").expect_err("none");
        assert!(e.to_string().contains("no public key-manager"), "{e}");
        assert!(!format!("{t:?}").contains("tok\""), "the token value is not printed");
        let stale = br#"{"token":{"expires_at":"2001-01-01T00:00:00Z","catalog":[]}}"#;
        assert!(!token_of("x".into(), stale).expect("token").usable());
    }

    #[test]
    fn credentials_hide_the_password() {
        let c = Credentials {
            identity: "http://k/v3".into(),
            domain: "d".into(),
            project: "p".into(),
            user: "u".into(),
            password: "hunter2".into(),
        };
        assert!(!format!("{c:?}").contains("hunter2"));
        let mut other = c.clone();
        other.password = "other".into();
        assert_ne!(TokenKey::of(&c), TokenKey::of(&other), "another password, another token");
        assert_eq!(login_body(&c)["auth"]["scope"]["project"]["domain"]["name"], "d");
    }
}
