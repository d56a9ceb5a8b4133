//! The HTTP transport every Azure SDK client of the provider sends through: reqwest on rustls
//! with ring, roots kept in memory (the system's, or `SSL_CERT_FILE`'s), and the runtime's
//! rules. A vault URL and an Entra ID authority are servers a configuration names, so for a
//! tenant's configuration every address is resolved and checked by the runtime's address guard;
//! every answer is capped in size and time (`body::read_limited`, 4 MiB, 15 s); every call is
//! counted in `externalsecret_provider_api_calls_count` under upstream's names. Redirects are not
//! followed (Azure's own transport does not follow them either).
//!
//! `KEYWARD_AZURE_HOST_ALIASES` (`name=ip,…`, the provider process's environment, the operator's
//! setting) pins names to addresses as a Pod's `hostAliases` would, for a provider run outside
//! a Pod; an alias to an address the guard denies a tenant is ignored for tenants, so the guard
//! is never bypassed.

use std::net::{IpAddr, SocketAddr};

use azure_core::error::{Error, ErrorKind};
use azure_core::http::headers::{HeaderName, HeaderValue, Headers};
use azure_core::http::{AsyncRawResponse, Body, HttpClient, Method, Request, Url};
use keyward_provider_runtime::netguard::{DeniedNetworks, denied_error, guarded_http};
use keyward_provider_runtime::{ProviderError, body, store_calls, store_tls};

/// The environment variable of host aliases.
pub const HOST_ALIASES_ENV: &str = "KEYWARD_AZURE_HOST_ALIASES";

/// Upstream's provider name of Key Vault calls.
pub const KEY_VAULT: &str = "Azure/KeyVault";
/// The provider name of token calls (Entra ID, the managed-identity endpoint, ACR's exchange).
pub const IDENTITY: &str = "Azure/Identity";

/// Parses `name=ip,name=ip`.
pub fn parse_aliases(text: &str) -> Result<Vec<(String, IpAddr)>, String> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|pair| {
            let (name, ip) =
                pair.split_once('=').ok_or_else(|| format!("{HOST_ALIASES_ENV}: {pair:?} is not name=ip"))?;
            let ip = ip.trim().parse().map_err(|_| format!("{HOST_ALIASES_ENV}: {ip:?} is not an IP address"))?;
            Ok((name.trim().to_ascii_lowercase(), ip))
        })
        .collect()
}

/// The transport of one trust level (a tenant's configurations, or the operator's).
#[derive(Clone, Debug)]
pub struct Transport {
    client: reqwest::Client,
    denied: DeniedNetworks,
}

impl Transport {
    /// A transport that reaches only what `denied` allows, with the operator's `aliases`.
    ///
    /// # Errors
    /// When the TLS roots or the client cannot be built.
    pub fn new(denied: DeniedNetworks, aliases: &[(String, IpAddr)]) -> Result<Self, ProviderError> {
        let tls = store_tls::client_config(None, "spec.vaultUrl")?;
        let mut builder = guarded_http(&denied)
            .tls_backend_preconfigured(tls)
            .timeout(body::REQUEST_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none());
        for (name, ip) in aliases {
            if denied.check(name, *ip).is_ok() {
                builder = builder.resolve(name, SocketAddr::new(*ip, 0));
            }
        }
        let client = builder.build().map_err(|e| ProviderError::Internal(format!("building the HTTP client: {e}")))?;
        Ok(Transport { client, denied })
    }
}

impl Transport {
    /// POSTs `form` (`application/x-www-form-urlencoded`) to `url` under this transport's rules
    /// (the address guard, the size cap, the store-calls metric): the answer's status and body.
    ///
    /// # Errors
    /// The guard's refusal, or the failure to reach or read the server.
    pub async fn post_form(&self, url: Url, form: &[(&str, &str)]) -> Result<(u16, Vec<u8>), ProviderError> {
        let mut encoder = Url::parse("https://form.invalid/")
            .map_err(|e| ProviderError::Internal(format!("encoding a form: {e}")))?;
        encoder.query_pairs_mut().extend_pairs(form);
        let mut request = Request::new(url, Method::Post);
        request.insert_header("content-type", "application/x-www-form-urlencoded");
        request.set_body(encoder.query().unwrap_or_default().as_bytes().to_vec());
        let unwrap = |e: Error| provider_error(&e).unwrap_or_else(|| ProviderError::Unavailable(e.to_string()));
        let answer = self.execute_request(&request).await.map_err(unwrap)?;
        let answer = answer.try_into_raw_response().await.map_err(unwrap)?;
        Ok((u16::from(answer.status()), answer.body().to_vec()))
    }
}

/// Which call a request is, in upstream's names (`GetSecret`, `ImportKey`, …), and whose.
pub fn call_name(method: Method, path: &str) -> (&'static str, &'static str) {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let kv = |call| (KEY_VAULT, call);
    match (parts.as_slice(), method) {
        ([.., "oauth2", "v2.0", "token"], _) => (IDENTITY, "GetToken"),
        (["oauth2", "exchange"], _) => (IDENTITY, "ACRExchange"),
        (["oauth2", "token"], _) => (IDENTITY, "ACRToken"),
        (["secrets"], _) => kv("GetSecrets"),
        (["secrets", _, "versions"], _) => kv("GetSecretVersions"),
        (["secrets", ..], Method::Get) => kv("GetSecret"),
        (["secrets", ..], Method::Put) => kv("SetSecret"),
        (["secrets", ..], Method::Patch) => kv("UpdateSecret"),
        (["secrets", ..], Method::Delete) => kv("DeleteSecret"),
        (["keys", ..], Method::Get) => kv("GetKey"),
        (["keys", ..], Method::Put) => kv("ImportKey"),
        (["keys", ..], Method::Delete) => kv("DeleteKey"),
        (["certificates", _, "import"], _) => kv("ImportCertificate"),
        (["certificates", ..], Method::Get) => kv("GetCertificate"),
        (["certificates", ..], Method::Delete) => kv("DeleteCertificate"),
        (["deletedsecrets", ..] | ["deletedkeys", ..] | ["deletedcertificates", ..], _) => kv("Purge"),
        _ => (IDENTITY, "ManagedIdentityToken"),
    }
}

/// An error the SDK does not retry, carrying the provider's error for [`provider_error`].
fn final_error(e: ProviderError) -> Error {
    let message = e.to_string();
    Error::with_error(ErrorKind::Other, e, message)
}

/// The provider's error inside an SDK error, if the transport put one there.
pub fn provider_error(e: &Error) -> Option<ProviderError> {
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = current {
        if let Some(p) = err.downcast_ref::<ProviderError>() {
            return Some(p.clone());
        }
        current = err.source();
    }
    None
}

#[async_trait::async_trait]
impl HttpClient for Transport {
    async fn execute_request(&self, request: &Request) -> azure_core::Result<AsyncRawResponse> {
        let url = request.url().clone();
        let server = format!("{}://{}", url.scheme(), url.host_str().unwrap_or_default());
        self.denied
            .check_url(&url)
            .map_err(|d| final_error(ProviderError::PermissionDenied(format!("{server}: {d}"))))?;
        let method = match request.method() {
            Method::Get => reqwest::Method::GET,
            Method::Put => reqwest::Method::PUT,
            Method::Post => reqwest::Method::POST,
            Method::Patch => reqwest::Method::PATCH,
            Method::Delete => reqwest::Method::DELETE,
            Method::Head => reqwest::Method::HEAD,
            other => {
                return Err(final_error(ProviderError::Internal(format!("HTTP method {other:?} is not sent"))));
            }
        };
        let (provider, call) = call_name(request.method(), url.path());
        let mut req = self.client.request(method, url.clone());
        for (name, value) in request.headers().iter() {
            req = req.header(name.as_str(), value.as_str());
        }
        req = match request.body() {
            Body::Bytes(bytes) => req.body(bytes.clone()),
            #[allow(unreachable_patterns)]
            _ => {
                return Err(final_error(ProviderError::Internal("streamed request bodies are not sent".into())));
            }
        };
        let challenge = !request.headers().iter().any(|(n, _)| n.as_str().eq_ignore_ascii_case("authorization"));
        let answer = match req.send().await {
            Ok(a) => a,
            Err(e) => {
                store_calls::record(provider, call, false);
                if let Some(denied) = denied_error(&e) {
                    return Err(final_error(denied));
                }
                let kind = if e.is_connect() { ErrorKind::Connection } else { ErrorKind::Io };
                let message = format!("request to {server} failed: {}", store_tls::causes(&e));
                return Err(Error::with_error(kind, ProviderError::Unavailable(message.clone()), message));
            }
        };
        let status = answer.status().as_u16();
        // Key Vault's first request of a client carries no token, to be answered with the
        // challenge that names the token's resource: an expected answer, not a failed call.
        let ok = status < 400 || status == 404 || (status == 401 && challenge);
        store_calls::record(provider, if status == 401 && challenge { "Challenge" } else { call }, ok);
        let (head, bytes) = body::read_limited(http::Response::<reqwest::Body>::from(answer), body::MAX_RESPONSE_BYTES)
            .await
            .map_err(|e| match body::limit_error(e.as_ref()) {
                Some(refused) => final_error(refused.to_provider_error(&server)),
                None => {
                    let message = format!("reading the answer of {server}: {}", store_tls::causes(e.as_ref()));
                    Error::with_error(ErrorKind::Io, ProviderError::Unavailable(message.clone()), message)
                }
            })?;
        let mut headers = Headers::new();
        for (name, value) in &head.headers {
            if let Ok(v) = value.to_str() {
                headers.insert(HeaderName::from(name.as_str().to_owned()), HeaderValue::from(v.to_owned()));
            }
        }
        Ok(AsyncRawResponse::from_bytes(status.into(), headers, bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_are_named_as_upstream() {
        assert_eq!(call_name(Method::Get, "/secrets/db/"), (KEY_VAULT, "GetSecret"));
        assert_eq!(call_name(Method::Get, "/secrets"), (KEY_VAULT, "GetSecrets"));
        assert_eq!(call_name(Method::Put, "/secrets/db"), (KEY_VAULT, "SetSecret"));
        assert_eq!(call_name(Method::Delete, "/keys/k"), (KEY_VAULT, "DeleteKey"));
        assert_eq!(call_name(Method::Post, "/certificates/c/import"), (KEY_VAULT, "ImportCertificate"));
        assert_eq!(call_name(Method::Post, "/tenant/oauth2/v2.0/token"), (IDENTITY, "GetToken"));
    }

    #[test]
    fn aliases_parse() {
        let a = parse_aliases("kv.vault.azure.net=127.0.0.1, Login.Example=::1").expect("aliases");
        assert_eq!(a[0], ("kv.vault.azure.net".to_string(), "127.0.0.1".parse().expect("ip")));
        assert_eq!(a[1].0, "login.example");
        assert!(parse_aliases("nope").is_err());
        assert!(parse_aliases("a=b").is_err());
        assert!(parse_aliases("").expect("empty").is_empty());
    }

    #[test]
    fn errors_travel_inside_the_sdks() {
        let e = final_error(ProviderError::PermissionDenied("denied network".into()));
        assert_eq!(provider_error(&e).map(|p| p.code()), Some(tonic::Code::PermissionDenied));
        assert!(provider_error(&Error::with_message(ErrorKind::Other, "x")).is_none());
    }
}
