//! Keystone v3 password logins and the tokens they yield, and the HTTP client both Keystone and
//! Barbican are reached with.
//!
//! A token is scoped to the configuration's project (`tenantName` in `domainName`) and carries
//! the catalog, where Barbican is the `key-manager` service. Tokens live in a [`TokenCache`]
//! keyed by Keystone's URL, the domain, the project, the user and a SHA-256 of the password, and
//! are reused until shortly before they expire: one login serves every read of a configuration
//! (and of every configuration with the same credentials). A token Barbican refuses is dropped
//! ([`TokenCache::forget`]) and the caller logs in once more.
//!
//! Keystone's URL is the tenant's to write, so what a login answer may make the process keep is
//! bounded: the token (at most [`MAX_TOKEN_LIFETIME`], whatever it says), at most
//! [`MAX_ENDPOINTS`] public key-manager endpoints of its catalog, at most [`MAX_CACHED_TOKENS`]
//! tokens.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use keyward_provider_runtime::netguard::{DeniedNetworks, denied_error, guarded_http};
use keyward_provider_runtime::{ProviderError, body, store_calls, store_tls};
use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::sync::Mutex;

/// A token is not used when it expires within this margin: a new login replaces it.
pub const EXPIRY_MARGIN: Duration = Duration::from_secs(60);

/// The catalog's type of Barbican's service.
pub const KEY_MANAGER: &str = "key-manager";

/// The only catalog interface Barbican is reached on, as gophercloud's default.
const PUBLIC: &str = "public";

/// Most key-manager endpoints a token keeps. Keystone's URL is the tenant's to write, and a
/// catalog of millions of endpoints fits in one answer; a real one has one public endpoint per
/// region. Further endpoints are ignored (not refused): a region listed beyond them is reported
/// as having no endpoint.
pub const MAX_ENDPOINTS: usize = 64;

/// Longest endpoint URL and region name kept; a longer one is ignored like a missing one. With
/// [`MAX_ENDPOINTS`] and [`MAX_TOKEN_BYTES`] this bounds what one cached token holds (~100 KiB,
/// so ~25 MiB for a full cache of [`MAX_CACHED_TOKENS`]).
const MAX_URL_BYTES: usize = 1024;
const MAX_REGION_BYTES: usize = 255;

/// Longest `X-Subject-Token` accepted (Fernet tokens are under 300 bytes; the PKI tokens of
/// old Keystones were a few KiB).
const MAX_TOKEN_BYTES: usize = 16 * 1024;

/// Longest a token is cached, whatever `expires_at` says (Keystone's default is 1 h): a Keystone
/// the tenant runs may say 2099, and the token and its catalog would stay for good.
pub const MAX_TOKEN_LIFETIME: Duration = Duration::from_secs(24 * 60 * 60);

/// Most tokens cached. Each distinct set of credentials adds one; when full, the least recently
/// used goes (it costs its owner one more login).
pub const MAX_CACHED_TOKENS: usize = 256;

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

/// A public catalog endpoint of the key-manager service.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// `region_id` (or `region`).
    pub region: String,
    /// The URL.
    pub url: String,
}

/// A project-scoped token and what came with it.
pub struct Token {
    /// `X-Subject-Token`. Never logged.
    pub value: String,
    /// When Keystone says it expires, or [`MAX_TOKEN_LIFETIME`] after the login if sooner.
    pub expires: SystemTime,
    /// The public key-manager endpoints of the catalog, at most [`MAX_ENDPOINTS`].
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
        let found = self.key_manager.iter().find(|e| region.is_empty() || e.region == region).ok_or_else(|| {
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

/// The token of a login answer: its expiry and the public key-manager endpoints of its catalog.
pub fn token_of(value: String, body: &[u8]) -> Result<Token, ProviderError> {
    token_at(value, body, SystemTime::now())
}

/// [`token_of`] for a login answered at `now`.
fn token_at(value: String, body: &[u8], now: SystemTime) -> Result<Token, ProviderError> {
    if value.len() > MAX_TOKEN_BYTES {
        return Err(ProviderError::Unavailable(format!(
            "Keystone's token is longer than {MAX_TOKEN_BYTES} bytes, which no Keystone token is"
        )));
    }
    let reply: LoginReply = serde_json::from_slice(body)
        .map_err(|e| ProviderError::Unavailable(format!("Keystone's login answer is not a token: {e}")))?;
    let expires = reply
        .token
        .expires_at
        .as_deref()
        .and_then(parse_expiry)
        .ok_or_else(|| ProviderError::Unavailable("Keystone's login answer has no token.expires_at".into()))?;
    Ok(Token {
        value,
        expires: expires.min(now + MAX_TOKEN_LIFETIME),
        key_manager: reply.token.catalog.map(|c| c.0).unwrap_or_default(),
    })
}

/// Keystone's login answer, only what is used of it: the rest is skipped as it is read, never
/// held.
#[derive(serde::Deserialize)]
struct LoginReply {
    token: ReplyToken,
}

#[derive(serde::Deserialize)]
struct ReplyToken {
    expires_at: Option<String>,
    catalog: Option<KeyManagerEndpoints>,
}

/// The public key-manager endpoints of a catalog, at most [`MAX_ENDPOINTS`], kept as the
/// catalog is read: other services' endpoints are read one at a time and dropped.
#[derive(Default)]
struct KeyManagerEndpoints(Vec<Endpoint>);

/// One catalog service: its endpoints are filtered before its type is known (JSON keys come in
/// any order), so each service holds at most [`MAX_ENDPOINTS`] while it is read.
#[derive(serde::Deserialize)]
struct Service {
    #[serde(rename = "type")]
    kind: Option<String>,
    endpoints: Option<PublicEndpoints>,
}

#[derive(Default)]
struct PublicEndpoints(Vec<Endpoint>);

/// A catalog endpoint as written; only its used fields are read, and one of them that is neither
/// a string nor null makes the answer refused (no Keystone writes that).
#[derive(serde::Deserialize)]
struct ReplyEndpoint {
    interface: Option<String>,
    region_id: Option<String>,
    region: Option<String>,
    url: Option<String>,
}

impl ReplyEndpoint {
    /// The endpoint when it is public and its URL and region are of a size worth keeping.
    fn public(self) -> Option<Endpoint> {
        if self.interface.as_deref() != Some(PUBLIC) {
            return None;
        }
        let region = self.region_id.filter(|r| !r.is_empty()).or(self.region).unwrap_or_default();
        let url = self.url.unwrap_or_default();
        (url.len() <= MAX_URL_BYTES && region.len() <= MAX_REGION_BYTES).then_some(Endpoint { region, url })
    }
}

/// A value that is used when it is a JSON object and skipped otherwise (a catalog entry or an
/// endpoint that is a number, a string, an array or null is ignored, as before).
struct IfObject<T>(Option<T>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for IfObject<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(IfObjectVisitor(std::marker::PhantomData))
    }
}

struct IfObjectVisitor<T>(std::marker::PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for IfObjectVisitor<T> {
    type Value = IfObject<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        T::deserialize(de::value::MapAccessDeserializer::new(map)).map(|t| IfObject(Some(t)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(IfObject(None))
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(IfObject(None))
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(IfObject(None))
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(IfObject(None))
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(IfObject(None))
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(IfObject(None))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(IfObject(None))
    }
}

/// Reads a JSON array one element at a time: each object is handed to `keep`, which says
/// whether to go on; once it says no, the rest is read past, not built.
fn each_object<'de, A: SeqAccess<'de>, T: Deserialize<'de>>(
    mut seq: A,
    mut keep: impl FnMut(T) -> bool,
) -> Result<(), A::Error> {
    while let Some(IfObject(element)) = seq.next_element::<IfObject<T>>()? {
        if let Some(element) = element
            && !keep(element)
        {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            break;
        }
    }
    Ok(())
}

impl<'de> Deserialize<'de> for PublicEndpoints {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Endpoints;
        impl<'de> Visitor<'de> for Endpoints {
            type Value = PublicEndpoints;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an array of endpoints")
            }

            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
                let mut kept = Vec::new();
                each_object(seq, |e: ReplyEndpoint| {
                    kept.extend(e.public());
                    kept.len() < MAX_ENDPOINTS
                })?;
                Ok(PublicEndpoints(kept))
            }
        }
        d.deserialize_seq(Endpoints)
    }
}

impl<'de> Deserialize<'de> for KeyManagerEndpoints {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Catalog;
        impl<'de> Visitor<'de> for Catalog {
            type Value = KeyManagerEndpoints;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an array of services")
            }

            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
                let mut kept = Vec::new();
                each_object(seq, |s: Service| {
                    if s.kind.as_deref() == Some(KEY_MANAGER) {
                        let endpoints = s.endpoints.unwrap_or_default().0;
                        kept.extend(endpoints.into_iter().take(MAX_ENDPOINTS.saturating_sub(kept.len())));
                    }
                    kept.len() < MAX_ENDPOINTS
                })?;
                Ok(KeyManagerEndpoints(kept))
            }
        }
        d.deserialize_seq(Catalog)
    }
}

/// Where one set of credentials' token is kept: shared by the requests that use it, and handed
/// out as an `Arc` (the token and its endpoints are not copied per request).
type Slot = Arc<Mutex<Option<Arc<Token>>>>;

/// A slot and when a request last asked for it.
struct Cached {
    slot: Slot,
    used: Instant,
}

/// Keystone tokens by (Keystone URL, domain, project, user, password hash), shared by every
/// configuration that logs in with the same credentials; counted logins for tests and metrics.
/// At most [`MAX_CACHED_TOKENS`].
#[derive(Default)]
pub struct TokenCache {
    slots: std::sync::Mutex<HashMap<TokenKey, Cached>>,
    logins: std::sync::atomic::AtomicU64,
}

impl TokenCache {
    fn slot(&self, key: &TokenKey) -> Slot {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        // Expired tokens no request is using go.
        slots.retain(|_, c| {
            Arc::strong_count(&c.slot) > 1
                || c.slot.try_lock().map(|t| t.as_ref().is_some_and(|t| t.usable())).unwrap_or(true)
        });
        if !slots.contains_key(key) && slots.len() >= MAX_CACHED_TOKENS {
            evict_least_recently_used(&mut slots);
        }
        let cached = slots.entry(key.clone()).or_insert_with(|| Cached { slot: Slot::default(), used: Instant::now() });
        cached.used = Instant::now();
        cached.slot.clone()
    }

    /// A usable token for `creds`: the cached one, else a new login (one at a time per key).
    pub async fn token(&self, http: &Http, creds: &Credentials) -> Result<Arc<Token>, ProviderError> {
        let slot = self.slot(&TokenKey::of(creds));
        let mut held = slot.lock().await;
        if let Some(t) = held.as_ref().filter(|t| t.usable()) {
            return Ok(Arc::clone(t));
        }
        let token = Arc::new(self.login(http, creds).await?);
        *held = Some(Arc::clone(&token));
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
        // A reply of a few MiB takes a while to read, even skipped: off the async workers.
        let token = keyward_provider_runtime::body::off_thread(move || token_of(value, &body)).await?;
        tracing::debug!(keystone = %c.identity, user = %c.user, project = %c.project, "logged in to Keystone");
        Ok(token)
    }
}

/// Makes room for one more token: the one no request asked for the longest goes. A request
/// still using it keeps its `Arc`; its token is just not cached any more.
fn evict_least_recently_used(slots: &mut HashMap<TokenKey, Cached>) {
    let oldest = slots.iter().min_by_key(|(_, c)| c.used).map(|(k, _)| k.clone());
    if let Some(key) = oldest {
        slots.remove(&key);
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

    /// A login answer expiring at `expires_at` whose key-manager service has `endpoints`.
    fn reply(expires_at: &str, endpoints: &str) -> Vec<u8> {
        format!(
            r#"{{"token":{{"expires_at":"{expires_at}","catalog":[{{"endpoints":{endpoints},"type":"key-manager"}}]}}}}"#
        )
        .into_bytes()
    }

    #[test]
    fn only_public_object_endpoints_are_kept_up_to_the_cap() {
        let mut endpoints = vec!["0".to_string(), "\"x\"".into(), "null".into(), "[{\"interface\":\"public\"}]".into()];
        endpoints.push(r#"{"interface":"internal","region_id":"R","url":"http://internal"}"#.into());
        endpoints
            .push(format!(r#"{{"interface":"public","region_id":"R","url":"http://{}"}}"#, "x".repeat(MAX_URL_BYTES)));
        endpoints.extend(
            (0..MAX_ENDPOINTS + 10).map(|n| format!(r#"{{"interface":"public","region":"R{n}","url":"http://b{n}"}}"#)),
        );
        endpoints.extend(std::iter::repeat_n("0".to_string(), 500_000));
        let t = token_of("tok".into(), &reply("2099-01-01T00:00:00Z", &format!("[{}]", endpoints.join(","))))
            .expect("token");
        assert_eq!(t.key_manager.len(), MAX_ENDPOINTS);
        assert_eq!(t.key_manager[0], Endpoint { region: "R0".into(), url: "http://b0".into() });
        assert_eq!(t.barbican_url("R63").expect("the last kept"), "http://b63");
        assert!(t.barbican_url("R64").is_err(), "beyond the cap");
        // Other services' endpoints are not kept, whatever their number.
        let other = format!(
            r#"{{"token":{{"expires_at":"2099-01-01T00:00:00Z","catalog":[{{"type":"identity","endpoints":[{}]}},0,"s"]}}}}"#,
            vec![r#"{"interface":"public","url":"http://k"}"#; 1000].join(",")
        );
        assert!(token_of("tok".into(), other.as_bytes()).expect("token").key_manager.is_empty());
    }

    #[test]
    fn a_far_expiry_is_capped() {
        let now = SystemTime::now();
        let t = token_at("tok".into(), &reply("2099-01-01T00:00:00Z", "[]"), now).expect("token");
        assert_eq!(t.expires, now + MAX_TOKEN_LIFETIME);
        let soon = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(3600);
        let t = token_at("tok".into(), &reply(&soon.to_string(), "[]"), now).expect("token");
        assert!(t.expires < now + Duration::from_secs(3601), "a nearer expiry is kept as Keystone says");
        assert!(token_of("x".repeat(MAX_TOKEN_BYTES + 1), &reply("2099-01-01T00:00:00Z", "[]")).is_err());
    }

    #[test]
    fn the_token_cache_keeps_the_most_recently_used() {
        let cache = TokenCache::default();
        let key = |n: usize| TokenKey {
            identity: "http://k/v3".into(),
            domain: "d".into(),
            project: "p".into(),
            user: format!("user{n}"),
            password_sha256: [0; 32],
        };
        let cached = |n: usize| {
            let slot = cache.slot(&key(n));
            let mut held = slot.try_lock().expect("free");
            *held = Some(Arc::new(token_of(format!("t{n}"), &reply("2099-01-01T00:00:00Z", "[]")).expect("token")));
        };
        for n in 0..MAX_CACHED_TOKENS + 100 {
            cached(n);
            if n % 10 == 0 {
                cached(0); // used often, so kept
            }
        }
        let slots = cache.slots.lock().expect("lock");
        assert_eq!(slots.len(), MAX_CACHED_TOKENS);
        assert!(slots.contains_key(&key(0)) && slots.contains_key(&key(MAX_CACHED_TOKENS + 99)));
        assert!(!slots.contains_key(&key(1)), "the least recently used went");
    }
}
