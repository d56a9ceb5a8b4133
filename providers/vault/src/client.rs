//! A Vault client built from a `Vault` config object: the HTTPS client (CA bundle, client
//! certificate), the login method, and the token it holds, renewed before it expires and
//! replaced by a new login when renewal fails or Vault refuses it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use keyward_crds::vault::{VaultAuth, VaultSpec};
use keyward_provider_runtime::refs::{ClusterRefs, NamedKind, named_namespace, require_operator_owned};
use keyward_provider_runtime::{ProviderError, RequestContext};
use reqwest::Method;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{Value, json};
use tokio::sync::Mutex;

use crate::kv::map_status;

/// Lifetime requested for ServiceAccount tokens used to log in.
const SA_TOKEN_SECONDS: i64 = 600;
/// The provider process's own ServiceAccount token (Kubernetes auth without a reference).
const OWN_TOKEN_FILE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/token";
/// Timeout of one Vault request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

/// How the client gets a token.
#[derive(Clone)]
enum Login {
    /// A fixed token; it is renewed when renewable, never replaced.
    Token(String),
    /// `POST auth/<mount>/login` with this body.
    Post { mount: String, body: Value },
}

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

/// A logged-in Vault client.
#[derive(Clone)]
pub struct VaultClient {
    http: reqwest::Client,
    server: String,
    namespace: Option<String>,
    auth_namespace: Option<String>,
    login: Login,
    token: Arc<Mutex<Option<Token>>>,
}

fn pem_certs(pem: &[u8], field: &str) -> Result<Vec<CertificateDer<'static>>, ProviderError> {
    CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ProviderError::BadConfig(format!("{field}: not a PEM certificate: {e}")))
}

async fn tls_config(
    refs: &ClusterRefs,
    ctx: &RequestContext,
    spec: &VaultSpec,
) -> Result<rustls::ClientConfig, ProviderError> {
    let mut roots = rustls::RootCertStore::empty();
    match refs.ca_bundle(ctx, "spec", spec.ca_bundle.as_deref(), spec.ca_provider.as_ref()).await? {
        Some(ders) => {
            for der in ders {
                roots
                    .add(CertificateDer::from(der))
                    .map_err(|e| ProviderError::BadConfig(format!("spec.caBundle: unusable certificate: {e}")))?;
            }
        }
        None => {
            let native = rustls_native_certs::load_native_certs();
            roots.add_parsable_certificates(native.certs);
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ProviderError::Internal(format!("TLS versions: {e}")))?
        .with_root_certificates(roots);
    let tls = spec.tls.as_ref().and_then(|t| Some((t.cert_secret_ref.as_ref()?, t.key_secret_ref.as_ref()?)));
    let Some((cert, key)) = tls else {
        return Ok(builder.with_no_client_auth());
    };
    let cert_pem = secret_bytes(refs, ctx, "spec.tls.certSecretRef", cert, "tls.crt").await?;
    let key_pem = secret_bytes(refs, ctx, "spec.tls.keySecretRef", key, "tls.key").await?;
    let chain = pem_certs(&cert_pem, "spec.tls.certSecretRef")?;
    let key = PrivateKeyDer::from_pem_slice(&key_pem)
        .map_err(|e| ProviderError::BadConfig(format!("spec.tls.keySecretRef: not a PEM private key: {e}")))?;
    builder
        .with_client_auth_cert(chain, key)
        .map_err(|e| ProviderError::BadConfig(format!("spec.tls: unusable client certificate: {e}")))
}

async fn secret_bytes(
    refs: &ClusterRefs,
    ctx: &RequestContext,
    field: &str,
    sel: &keyward_crds::SecretKeySelector,
    default_key: &str,
) -> Result<Vec<u8>, ProviderError> {
    let ns = named_namespace(ctx, field, NamedKind::Secret, &sel.name, sel.namespace.as_deref())?;
    let key = sel.key.as_deref().filter(|k| !k.is_empty()).unwrap_or(default_key);
    refs.secret_key(ns, &sel.name, key, field).await
}

async fn secret_text(
    refs: &ClusterRefs,
    ctx: &RequestContext,
    field: &str,
    sel: &keyward_crds::SecretKeySelector,
) -> Result<String, ProviderError> {
    let ns = named_namespace(ctx, field, NamedKind::Secret, &sel.name, sel.namespace.as_deref())?;
    refs.secret_text(ns, &sel.name, sel.key.as_deref().unwrap_or_default(), field).await
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

/// Reads the credentials the login method names.
async fn login_method(refs: &ClusterRefs, ctx: &RequestContext, auth: &VaultAuth) -> Result<Login, ProviderError> {
    if let Some(t) = &auth.token_secret_ref {
        return Ok(Login::Token(secret_text(refs, ctx, "spec.auth.tokenSecretRef", t).await?));
    }
    if let Some(a) = &auth.app_role {
        let role_id = match (&a.role_id, &a.role_ref) {
            (Some(id), _) if !id.is_empty() => id.clone(),
            (_, Some(r)) => secret_text(refs, ctx, "spec.auth.appRole.roleRef", r).await?,
            _ => return Err(ProviderError::BadConfig("spec.auth.appRole: set roleId or roleRef".into())),
        };
        let secret_id = secret_text(refs, ctx, "spec.auth.appRole.secretRef", &a.secret_ref).await?;
        return Ok(Login::Post { mount: a.path.clone(), body: json!({"role_id": role_id, "secret_id": secret_id}) });
    }
    if let Some(k) = &auth.kubernetes {
        let field = "spec.auth.kubernetes";
        let jwt = match (&k.service_account_ref, &k.secret_ref) {
            (Some(sa), _) => {
                let field = "spec.auth.kubernetes.serviceAccountRef";
                sa_token(refs, ctx, field, sa, &sa.audiences, SA_TOKEN_SECONDS).await?
            }
            (None, Some(s)) => secret_text(refs, ctx, "spec.auth.kubernetes.secretRef", s).await?,
            (None, None) => {
                require_operator_owned(ctx, &format!("{field} without serviceAccountRef or secretRef"))?;
                tokio::fs::read_to_string(OWN_TOKEN_FILE).await.map(|t| t.trim().to_string()).map_err(|e| {
                    ProviderError::BadConfig(format!(
                        "{field}: cannot read the provider's own token {OWN_TOKEN_FILE}: {e}"
                    ))
                })?
            }
        };
        return Ok(Login::Post { mount: k.mount_path.clone(), body: json!({"role": k.role, "jwt": jwt}) });
    }
    if let Some(j) = &auth.jwt {
        let jwt = match (&j.secret_ref, &j.kubernetes_service_account_token) {
            (Some(s), _) => secret_text(refs, ctx, "spec.auth.jwt.secretRef", s).await?,
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
        return Ok(Login::Post { mount: j.path.clone(), body });
    }
    Err(ProviderError::BadConfig("spec.auth: set exactly one of tokenSecretRef, appRole, kubernetes or jwt".into()))
}

/// An error with its causes (`a: b: c`): reqwest's own message leaves out why a connection
/// failed, such as a certificate signed by an unknown CA.
fn causes(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

fn errors_of(body: &Value) -> String {
    body.get("errors")
        .and_then(Value::as_array)
        .map(|e| e.iter().filter_map(Value::as_str).collect::<Vec<_>>().join("; "))
        .unwrap_or_default()
}

impl VaultClient {
    /// Builds a client for the server, CA and credentials `spec` describes. Nothing is sent to
    /// Vault yet; the first call logs in.
    pub async fn build(refs: &ClusterRefs, ctx: &RequestContext, spec: &VaultSpec) -> Result<Self, ProviderError> {
        let tls = tls_config(refs, ctx, spec).await?;
        let http = reqwest::Client::builder()
            .tls_backend_preconfigured(tls)
            .timeout(REQUEST_TIMEOUT)
            .build()
            .map_err(|e| ProviderError::Internal(format!("building the HTTPS client: {e}")))?;
        let login = login_method(refs, ctx, &spec.auth).await?;
        let namespace = spec.namespace.clone().filter(|n| !n.is_empty());
        Ok(VaultClient {
            http,
            server: spec.server.trim_end_matches('/').to_string(),
            auth_namespace: spec.auth.namespace.clone().filter(|n| !n.is_empty()).or_else(|| namespace.clone()),
            namespace,
            login,
            token: Arc::new(Mutex::new(None)),
        })
    }

    /// One raw request: the status and the JSON body (`Null` when empty).
    async fn send(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        namespace: Option<&str>,
        body: Option<&Value>,
        query: &[(&str, String)],
    ) -> Result<(u16, Value), ProviderError> {
        let url = format!("{}/v1/{}", self.server, path.trim_start_matches('/'));
        let mut req = self.http.request(method, &url).query(query);
        if let Some(t) = token {
            req = req.header("X-Vault-Token", t);
        }
        if let Some(ns) = namespace {
            req = req.header("X-Vault-Namespace", ns);
        }
        if let Some(b) = body {
            req = req.json(b);
        }
        let resp = req.send().await.map_err(|e| {
            let kind = if e.is_timeout() { "timed out" } else { "failed" };
            ProviderError::Unavailable(format!("request to Vault at {} {kind}: {}", self.server, causes(&e)))
        })?;
        let status = resp.status().as_u16();
        let bytes =
            resp.bytes().await.map_err(|e| ProviderError::Unavailable(format!("reading Vault's answer: {e}")))?;
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
            Login::Post { mount, body } => {
                let path = format!("auth/{}/login", mount.trim_matches('/'));
                let (status, answer) = self.send(Method::POST, &path, None, ns, Some(body), &[]).await?;
                if status != 200 {
                    // A refused login is a credentials problem, whatever status Vault uses.
                    return Err(match map_status(status, &errors_of(&answer), &format!("logging in at {path}")) {
                        ProviderError::InvalidArgument(m) | ProviderError::PermissionDenied(m) => {
                            ProviderError::Unauthenticated(m)
                        }
                        other => other,
                    });
                }
                tracing::info!(mount = %mount, "logged in to Vault");
                Self::token_of(&answer)
                    .ok_or_else(|| ProviderError::Unavailable(format!("{path}: Vault returned no token")))
            }
        }
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
        if status == 403 && matches!(self.login, Login::Post { .. }) {
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
        self.token().await?;
        let ns = self.auth_namespace.as_deref().or(self.namespace.as_deref()).map(str::to_string);
        let token = self.token().await?;
        let (status, body) =
            self.send(Method::GET, "auth/token/lookup-self", Some(&token), ns.as_deref(), None, &[]).await?;
        if status == 200 { Ok(body) } else { Err(map_status(status, &errors_of(&body), "looking up the Vault token")) }
    }
}
