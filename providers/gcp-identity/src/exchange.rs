//! Where Google's endpoints are, and the calls that turn credentials into tokens: STS's token
//! exchange, IAM Credentials' `generateAccessToken` (impersonation) and `signJwt`, and the OAuth
//! 2.0 JWT-bearer grant of a service-account key.
//!
//! These calls are made here, not by Google's auth crate, because its programmatic
//! external-account builder hard-codes Google's IAM endpoint, and every endpoint must be the
//! operator's setting ([`Endpoints`]) so tests and private endpoints can name others. Their
//! answers are read through the runtime's size cap. A key's assertion is signed with `ring`, so
//! a provider using these calls needs no Google SDK.

use std::time::{Duration, SystemTime};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use keyward_provider_runtime::{ProviderError, body, store_calls};
use serde_json::{Value, json};

/// The scope every token is asked for, as upstream.
pub const CLOUD_PLATFORM: &str = "https://www.googleapis.com/auth/cloud-platform";
/// The ServiceAccount annotation naming the Google service account to impersonate.
pub const GCP_SA_ANNOTATION: &str = "iam.gke.io/gcp-service-account";
/// The subject token type of a Kubernetes ServiceAccount token.
pub const JWT_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:jwt";
/// The subject token type of a signed AWS `GetCallerIdentity` request.
pub const AWS_TOKEN_TYPE: &str = "urn:ietf:params:aws:token-type:aws4_request";
const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";
const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";

/// Where Google's APIs are: the operator's setting (flags or environment of the provider
/// process), never a configuration's.
#[derive(clap::Args, Debug, Clone)]
pub struct Endpoints {
    /// Secret Manager for global secrets.
    #[arg(long, env = "KEYWARD_GCP_SECRET_MANAGER_ENDPOINT", default_value = "https://secretmanager.googleapis.com")]
    pub secret_manager: String,
    /// Secret Manager for regional secrets; `{location}` is replaced by the configuration's
    /// `location`.
    #[arg(
        long,
        env = "KEYWARD_GCP_SECRET_MANAGER_REGIONAL_ENDPOINT",
        default_value = "https://secretmanager.{location}.rep.googleapis.com"
    )]
    pub secret_manager_regional: String,
    /// Google's Security Token Service (the token exchange of Workload Identity).
    #[arg(long, env = "KEYWARD_GCP_STS_ENDPOINT", default_value = "https://sts.googleapis.com")]
    pub sts: String,
    /// IAM Credentials (`generateAccessToken`, impersonation).
    #[arg(long, env = "KEYWARD_GCP_IAM_CREDENTIALS_ENDPOINT", default_value = "https://iamcredentials.googleapis.com")]
    pub iam_credentials: String,
    /// Google's OAuth 2.0 token endpoint, where a service-account key's signed assertion is
    /// exchanged for an access token (a GCRAccessToken's password; a key file's own `token_uri`
    /// is never used).
    #[arg(long, env = "KEYWARD_GCP_OAUTH_TOKEN_ENDPOINT", default_value = "https://oauth2.googleapis.com/token")]
    pub oauth_token: String,
    /// The project of configurations without `projectID` (upstream asks GKE's metadata server).
    #[arg(long, env = "KEYWARD_GCP_PROJECT_ID", default_value = "")]
    pub project_id: String,
    /// The GKE cluster's name, for `auth.workloadIdentity` without `clusterName`.
    #[arg(long, env = "KEYWARD_GCP_CLUSTER_NAME", default_value = "")]
    pub cluster_name: String,
    /// The GKE cluster's location, for `auth.workloadIdentity` without `clusterLocation`.
    #[arg(long, env = "KEYWARD_GCP_CLUSTER_LOCATION", default_value = "")]
    pub cluster_location: String,
}

impl Endpoints {
    /// The endpoints of the process's environment (the `KEYWARD_GCP_*` variables of
    /// [`Endpoints`]' flags), Google's own where none is set: for a provider that takes no GCP
    /// flags of its own.
    ///
    /// # Errors
    /// When a variable is set to something its flag would refuse.
    pub fn from_env() -> Result<Self, String> {
        #[derive(clap::Parser)]
        struct EnvOnly {
            #[command(flatten)]
            endpoints: Endpoints,
        }
        <EnvOnly as clap::Parser>::try_parse_from(["keyward"]).map(|e| e.endpoints).map_err(|e| e.to_string())
    }

    /// Google's own endpoints.
    pub fn google() -> Self {
        Endpoints {
            secret_manager: "https://secretmanager.googleapis.com".into(),
            secret_manager_regional: "https://secretmanager.{location}.rep.googleapis.com".into(),
            sts: "https://sts.googleapis.com".into(),
            iam_credentials: "https://iamcredentials.googleapis.com".into(),
            oauth_token: "https://oauth2.googleapis.com/token".into(),
            project_id: String::new(),
            cluster_name: String::new(),
            cluster_location: String::new(),
        }
    }

    /// The Secret Manager endpoint for `location` (global when empty).
    pub fn secret_manager_for(&self, location: &str) -> String {
        if location.is_empty() {
            self.secret_manager.clone()
        } else {
            self.secret_manager_regional.replace("{location}", location)
        }
    }
}

/// A service-account key file as JSON, when it is one (`"type": "service_account"` with a
/// `client_email` and a `private_key`).
///
/// # Errors
/// `FAILED_PRECONDITION` naming `field` when it is not.
pub fn checked_key(key: &[u8], field: &str) -> Result<Value, ProviderError> {
    let bad = |m: String| ProviderError::BadConfig(format!("{field}: {m}"));
    let json: Value = serde_json::from_slice(key).map_err(|e| bad(format!("the key is not JSON: {e}")))?;
    if json["type"] != "service_account" {
        return Err(bad(format!(
            "the key's type is {}, not \"service_account\" (external_account configurations go in \
             auth.workloadIdentityFederation.credConfig)",
            json["type"]
        )));
    }
    for k in ["client_email", "private_key"] {
        if json[k].as_str().is_none_or(str::is_empty) {
            return Err(bad(format!("the key has no {k}")));
        }
    }
    Ok(json)
}

/// The token exchange and impersonation calls, with one HTTP client for the process.
#[derive(Clone)]
pub struct TokenExchange {
    http: reqwest::Client,
    endpoints: Endpoints,
    /// The provider label of the store-calls metric.
    provider: &'static str,
}

/// A token and when it expires.
pub struct Token {
    /// The access token.
    pub value: String,
    /// When it stops working.
    pub expires: SystemTime,
}

impl TokenExchange {
    /// Calls to `endpoints`, through the process's TLS roots, counted in the store-calls metric
    /// as `provider`'s.
    pub fn new(endpoints: Endpoints, provider: &'static str) -> Self {
        let http = reqwest::Client::builder()
            .timeout(body::REQUEST_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_default();
        TokenExchange { http, endpoints, provider }
    }

    /// The endpoints.
    pub fn endpoints(&self) -> &Endpoints {
        &self.endpoints
    }

    /// The process's HTTP client (timeouts, no redirects).
    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    async fn post(&self, url: String, call: &str, bearer: Option<&str>, payload: Body) -> Result<Value, ProviderError> {
        let mut req = match payload {
            Body::Json(v) => self.http.post(&url).json(&v),
            Body::Form(pairs) => self
                .http
                .post(&url)
                .header(http::header::CONTENT_TYPE, "application/x-www-form-urlencoded")
                .body(form(&pairs)),
        };
        if let Some(t) = bearer {
            req = req.bearer_auth(t);
        }
        let sent = req.send().await;
        let res = match sent {
            Ok(r) => r,
            Err(e) => {
                store_calls::record(self.provider, call, false);
                return Err(ProviderError::Unavailable(format!("{call} at {url}: {e}")));
            }
        };
        let status = res.status().as_u16();
        store_calls::record(self.provider, call, status < 400);
        let (_, bytes) = body::read_limited(http::Response::from(res), body::MAX_RESPONSE_BYTES)
            .await
            .map_err(|e| ProviderError::Unavailable(format!("{call} at {url}: {e}")))?;
        let answer: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        if status >= 400 {
            let msg = answer["error"]["message"]
                .as_str()
                .or(answer["error_description"].as_str())
                .map_or_else(|| String::from_utf8_lossy(&bytes).chars().take(400).collect(), str::to_string);
            let msg = format!("{call} at {url} answered {status}: {msg}");
            return Err(match status {
                400 => ProviderError::PermissionDenied(msg),
                401 => ProviderError::Unauthenticated(msg),
                403 | 404 => ProviderError::PermissionDenied(msg),
                _ => ProviderError::Unavailable(msg),
            });
        }
        Ok(answer)
    }

    /// Exchanges a subject token of `token_type` (a Kubernetes ServiceAccount token, a signed AWS
    /// request) at STS for a federated access token.
    ///
    /// # Errors
    /// `PERMISSION_DENIED` when STS refuses the token, `UNAVAILABLE` when it cannot be reached.
    pub async fn sts(&self, subject_token: &str, token_type: &str, audience: &str) -> Result<Token, ProviderError> {
        let url = format!("{}/v1/token", self.endpoints.sts.trim_end_matches('/'));
        let answer = self
            .post(
                url,
                "ExchangeToken",
                None,
                Body::Json(json!({
                    "grant_type": TOKEN_EXCHANGE,
                    "audience": audience,
                    "scope": CLOUD_PLATFORM,
                    "requested_token_type": ACCESS_TOKEN_TYPE,
                    "subject_token_type": token_type,
                    "subject_token": subject_token,
                })),
            )
            .await?;
        let value = answer["access_token"].as_str().unwrap_or_default().to_string();
        if value.is_empty() {
            return Err(ProviderError::Unavailable("STS answered without an access_token".into()));
        }
        let secs = answer["expires_in"].as_u64().unwrap_or(3600);
        Ok(Token { value, expires: SystemTime::now() + Duration::from_secs(secs) })
    }

    /// A token of the Google service account `email`, through IAM Credentials
    /// `generateAccessToken`, called with `token`.
    ///
    /// # Errors
    /// `PERMISSION_DENIED` when IAM refuses the impersonation.
    pub async fn impersonate(&self, token: &str, email: &str) -> Result<Token, ProviderError> {
        let url = format!(
            "{}/v1/projects/-/serviceAccounts/{}:generateAccessToken",
            self.endpoints.iam_credentials.trim_end_matches('/'),
            keyward_provider_runtime::keys::url_path([email])
        );
        let answer = self
            .post(
                url,
                "GenerateAccessToken",
                Some(token),
                Body::Json(json!({"scope": [CLOUD_PLATFORM], "lifetime": "3600s"})),
            )
            .await?;
        let value = answer["accessToken"].as_str().unwrap_or_default().to_string();
        if value.is_empty() {
            return Err(ProviderError::Unavailable("IAM Credentials answered without an accessToken".into()));
        }
        let expires = answer["expireTime"]
            .as_str()
            .and_then(|t| t.parse::<jiff::Timestamp>().ok())
            .map_or_else(|| SystemTime::now() + Duration::from_secs(3600), SystemTime::from);
        Ok(Token { value, expires })
    }

    /// An access token of the service-account key `key` (JSON): an assertion signed with the
    /// key, exchanged at the OAuth 2.0 token endpoint (the JWT-bearer grant, RFC 7523), as
    /// Google's libraries do when a token rather than a self-signed JWT is wanted.
    ///
    /// # Errors
    /// `FAILED_PRECONDITION` naming `field` when the key cannot sign; the endpoint's refusal.
    pub async fn key_token(&self, key: &[u8], field: &str) -> Result<Token, ProviderError> {
        let assertion = signed_assertion(key, &self.endpoints.oauth_token, SystemTime::now(), field)?;
        let form = vec![("grant_type", JWT_BEARER.to_string()), ("assertion", assertion)];
        let answer = self.post(self.endpoints.oauth_token.clone(), "OAuthToken", None, Body::Form(form)).await?;
        let value = answer["access_token"].as_str().unwrap_or_default().to_string();
        if value.is_empty() {
            return Err(ProviderError::Unavailable("the OAuth token endpoint answered without an access_token".into()));
        }
        let secs = answer["expires_in"].as_u64().unwrap_or(3600);
        Ok(Token { value, expires: SystemTime::now() + Duration::from_secs(secs) })
    }
}

impl TokenExchange {
    /// A JWT of `claims` signed by Google for the service account `email` (a key Google manages
    /// for it), through IAM Credentials `signJwt`, called with `token`. Google signs the claims
    /// as given; an `exp` must be at most 12 hours ahead.
    ///
    /// # Errors
    /// `PERMISSION_DENIED` when IAM refuses (the caller needs `iam.serviceAccounts.signJwt` on
    /// the account), `UNAVAILABLE` when it cannot be reached.
    pub async fn sign_jwt(&self, token: &str, email: &str, claims: &Value) -> Result<String, ProviderError> {
        let url = format!(
            "{}/v1/projects/-/serviceAccounts/{}:signJwt",
            self.endpoints.iam_credentials.trim_end_matches('/'),
            keyward_provider_runtime::keys::url_path([email])
        );
        let answer = self.post(url, "SignJwt", Some(token), Body::Json(json!({"payload": claims.to_string()}))).await?;
        match answer["signedJwt"].as_str() {
            Some(jwt) if !jwt.is_empty() => Ok(jwt.to_string()),
            _ => Err(ProviderError::Unavailable("IAM Credentials answered without a signedJwt".into())),
        }
    }
}

/// A request body of the token endpoints.
enum Body {
    Json(Value),
    Form(Vec<(&'static str, String)>),
}

/// `pairs` as `application/x-www-form-urlencoded`.
fn form(pairs: &[(&str, String)]) -> String {
    let enc = |s: &str| {
        s.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
                _ => format!("%{b:02X}"),
            })
            .collect::<String>()
    };
    pairs.iter().map(|(k, v)| format!("{}={}", enc(k), enc(v))).collect::<Vec<_>>().join("&")
}

/// The JWT-bearer grant's assertion for `audience` (the token endpoint): the key's e-mail as
/// issuer, scope `cloud-platform`, an hour's lifetime, signed RS256 with the key by Google's
/// key.
fn signed_assertion(key: &[u8], audience: &str, now: SystemTime, field: &str) -> Result<String, ProviderError> {
    let bad = |m: String| ProviderError::BadConfig(format!("{field}: {m}"));
    let json = checked_key(key, field)?;
    let iat = now.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let header = json!({"alg": "RS256", "typ": "JWT", "kid": json["private_key_id"]});
    let claims = json!({"iss": json["client_email"], "scope": CLOUD_PLATFORM, "aud": audience,
                        "iat": iat, "exp": iat + 3600});
    let unsigned =
        format!("{}.{}", URL_SAFE_NO_PAD.encode(header.to_string()), URL_SAFE_NO_PAD.encode(claims.to_string()));
    let signature = rs256(json["private_key"].as_str().unwrap_or_default(), unsigned.as_bytes())
        .map_err(|e| bad(format!("the key cannot sign: {e}")))?;
    Ok(format!("{unsigned}.{}", URL_SAFE_NO_PAD.encode(signature)))
}

/// An RS256 (RSASSA-PKCS1-v1_5 with SHA-256) signature of `data` with the PKCS #8 PEM key
/// `pem`, the form of a service-account key's `private_key`.
fn rs256(pem: &str, data: &[u8]) -> Result<Vec<u8>, String> {
    use rustls_pki_types::PrivatePkcs8KeyDer;
    use rustls_pki_types::pem::PemObject;
    let der = PrivatePkcs8KeyDer::from_pem_slice(pem.as_bytes()).map_err(|e| format!("not a PKCS #8 PEM key: {e}"))?;
    let key =
        ring::signature::RsaKeyPair::from_pkcs8(der.secret_pkcs8_der()).map_err(|e| format!("not an RSA key: {e}"))?;
    let mut signature = vec![0; key.public().modulus_len()];
    key.sign(&ring::signature::RSA_PKCS1_SHA256, &ring::rand::SystemRandom::new(), data, &mut signature)
        .map_err(|e| format!("signing failed: {e}"))?;
    Ok(signature)
}

/// The subject token of an AWS workload identity provider, as Google's STS reads it: a
/// `GetCallerIdentity` request to STS of `region`, signed (SigV4) with `creds` at `time`, its
/// signed headers including `x-goog-cloud-target-resource: audience` (so a token made for one
/// workload identity provider is refused by another); the JSON of its URL, method and headers,
/// URL-encoded.
///
/// # Errors
/// `INTERNAL` when the request cannot be signed.
pub fn aws_subject_token(
    creds: &aws_credential_types::Credentials,
    region: &str,
    audience: &str,
    time: SystemTime,
) -> Result<String, ProviderError> {
    let host = format!("sts.{region}.amazonaws.com");
    let url = format!("https://{host}?Action=GetCallerIdentity&Version=2011-06-15");
    let headers = [("host".to_string(), host), ("x-goog-cloud-target-resource".to_string(), audience.to_string())];
    let signed =
        crate::sigv4::sign_sts_post(creds, region, &url, &headers, b"", time, "signing the AWS subject token")?;
    let mut all: Vec<(String, String)> = headers.into_iter().chain(signed).collect();
    all.sort();
    let headers: Vec<Value> = all.into_iter().map(|(key, value)| json!({"key": key, "value": value})).collect();
    let token = json!({"url": url, "method": "POST", "headers": headers}).to_string();
    Ok(keyward_provider_runtime::keys::url_path([token.as_str()]))
}
