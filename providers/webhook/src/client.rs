//! The HTTP client of one configuration: its CA, its time limit, and the address check of
//! [`keyward_provider_runtime::netguard`] for a tenant's configuration. Answers are read
//! through the runtime's size cap ([`keyward_provider_runtime::body`]).

use std::time::Duration;

use keyward_crds::rules::parse_go_duration;
use keyward_provider_runtime::body::{self, MAX_RESPONSE_BYTES, REQUEST_TIMEOUT};
use keyward_provider_runtime::netguard::{DeniedNetworks, denied_error, guarded_http};
use keyward_provider_runtime::refs::ClusterRefs;
use keyward_provider_runtime::{ProviderError, RequestContext, store_calls, store_tls};
use reqwest::header::{HeaderName, HeaderValue};

use crate::api::WebhookSpec;
use crate::render::Rendered;

/// The provider's name on [`store_calls`], upstream's.
pub const PROVIDER_NAME: &str = "Webhook";

/// A configuration's HTTP client.
#[derive(Clone)]
pub struct HttpClient {
    http: reqwest::Client,
    denied: DeniedNetworks,
    timeout: Duration,
}

/// A status and a body.
#[derive(Debug)]
pub struct Answer {
    /// The HTTP status.
    pub status: u16,
    /// The body (at most [`MAX_RESPONSE_BYTES`]).
    pub body: Vec<u8>,
}

/// `spec.timeout`, capped at the runtime's [`REQUEST_TIMEOUT`] (also when unset or `0`).
pub fn request_timeout(spec: &WebhookSpec) -> Result<Duration, ProviderError> {
    let Some(t) = spec.timeout.as_deref().filter(|t| !t.is_empty()) else {
        return Ok(REQUEST_TIMEOUT);
    };
    let d = parse_go_duration(t).map_err(|e| ProviderError::BadConfig(format!("spec.timeout: {e}")))?;
    Ok(if d.is_zero() { REQUEST_TIMEOUT } else { d.min(REQUEST_TIMEOUT) })
}

/// `scheme://host:port` of a URL: how messages name the server (a rendered URL may carry
/// credentials in its path or query).
pub fn server_of(url: &reqwest::Url) -> String {
    match (url.host_str(), url.port_or_known_default()) {
        (Some(h), Some(p)) => format!("{}://{h}:{p}", url.scheme()),
        (Some(h), None) => format!("{}://{h}", url.scheme()),
        _ => url.scheme().to_string(),
    }
}

impl HttpClient {
    /// The client of `spec`: its CA (`caBundle`, `caProvider` read within the tenant boundary,
    /// else the system roots), its time limit, and `denied` checked for every address it
    /// connects to (empty for an operator's configuration).
    pub async fn build(
        refs: &ClusterRefs,
        ctx: &RequestContext,
        spec: &WebhookSpec,
        denied: DeniedNetworks,
    ) -> Result<Self, ProviderError> {
        let roots = refs.ca_bundle(ctx, "spec", spec.ca_bundle.as_deref(), spec.ca_provider.as_ref()).await?;
        let timeout = request_timeout(spec)?;
        let http = guarded_http(&denied)
            .tls_backend_preconfigured(store_tls::client_config(roots, "spec.caBundle")?)
            .connect_timeout(timeout)
            .timeout(timeout)
            .build()
            .map_err(|e| ProviderError::Internal(format!("building the HTTP client: {e}")))?;
        Ok(HttpClient { http, denied, timeout })
    }

    /// The addresses a tenant's configuration may not reach (for Validate).
    pub fn denied(&self) -> &DeniedNetworks {
        &self.denied
    }

    /// The time limit of one request.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Sends the rendered request and reads the answer, at most [`MAX_RESPONSE_BYTES`] within
    /// the time limit; counted as upstream's `HTTPRequest` store call ([`store_calls`]; an
    /// answer below 400, or 404, is a successful call).
    pub async fn send(&self, method: &str, r: &Rendered) -> Result<Answer, ProviderError> {
        let result = self.exchange(method, r).await;
        let ok = matches!(&result, Ok(a) if a.status < 400 || a.status == 404);
        store_calls::record(PROVIDER_NAME, "HTTPRequest", ok);
        result
    }

    async fn exchange(&self, method: &str, r: &Rendered) -> Result<Answer, ProviderError> {
        let url = parse_url(&r.url)?;
        let server = server_of(&url);
        self.denied.check_url(&url).map_err(|d| ProviderError::PermissionDenied(d.to_string()))?;
        let method = reqwest::Method::from_bytes(method.as_bytes())
            .map_err(|_| ProviderError::BadConfig(format!("spec.method: {method:?} is not an HTTP method")))?;
        let mut req = self.http.request(method, url);
        for (name, value) in &r.headers {
            let (n, v) = header(name, value)?;
            req = req.header(n, v);
        }
        let req = req.body(r.body.clone());
        let exchange = async {
            let resp = req.send().await.map_err(|e| self.send_error(&server, e))?;
            let status = resp.status().as_u16();
            let answer = http::Response::<reqwest::Body>::from(resp);
            let (_, bytes) =
                body::read_limited(answer, MAX_RESPONSE_BYTES).await.map_err(|e| {
                    match body::limit_error(e.as_ref()) {
                        Some(refused) => refused.to_provider_error(&format!("the webhook at {server}")),
                        None => ProviderError::Unavailable(format!(
                            "reading the answer of the webhook at {server}: {}",
                            store_tls::causes(e.as_ref())
                        )),
                    }
                })?;
            Ok(Answer { status, body: bytes.to_vec() })
        };
        // reqwest's limit covers the body too; this one also ends a call that is stuck anywhere.
        tokio::time::timeout(self.timeout + Duration::from_millis(250), exchange).await.map_err(|_| {
            ProviderError::Unavailable(format!("the webhook at {server} did not answer within {:?}", self.timeout))
        })?
    }

    fn send_error(&self, server: &str, e: reqwest::Error) -> ProviderError {
        if let Some(refused) = denied_error(&e) {
            return refused;
        }
        if e.is_timeout() {
            return ProviderError::Unavailable(format!(
                "the webhook at {server} did not answer within {:?}",
                self.timeout
            ));
        }
        ProviderError::Unavailable(format!(
            "request to the webhook at {server} failed: {}",
            store_tls::causes(&e.without_url())
        ))
    }
}

/// A rendered header. A value with CR, LF or NUL (from a hostile key, say) is refused, never
/// sent; other bytes pass as Go's client lets them.
pub fn header(name: &str, value: &str) -> Result<(HeaderName, HeaderValue), ProviderError> {
    let n = HeaderName::from_bytes(name.as_bytes())
        .map_err(|_| ProviderError::BadConfig(format!("spec.headers: {name:?} is not a header name")))?;
    let v = HeaderValue::from_bytes(value.as_bytes()).map_err(|_| {
        ProviderError::BadConfig(format!("spec.headers[{name:?}]: renders to a value that is not a valid header"))
    })?;
    Ok((n, v))
}

/// A rendered URL, which must be `http` or `https` with a host.
pub fn parse_url(raw: &str) -> Result<reqwest::Url, ProviderError> {
    let url = reqwest::Url::parse(raw.trim())
        .map_err(|e| ProviderError::BadConfig(format!("spec.url: the rendered URL does not parse: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none_or(str::is_empty) {
        return Err(ProviderError::BadConfig(
            "spec.url: the rendered URL must be http:// or https:// with a host".into(),
        ));
    }
    Ok(url)
}

/// What a status means for a read: 2xx is the value; 404 is no secret (upstream: the
/// ExternalSecret's deletion policy applies).
pub fn check_status(status: u16, what: &str) -> Result<(), ProviderError> {
    match status {
        200..=299 => Ok(()),
        404 => Err(ProviderError::NoSecret(format!("{what} answered 404 Not Found"))),
        401 => Err(ProviderError::Unauthenticated(format!("{what} answered 401 Unauthorized"))),
        403 => Err(ProviderError::PermissionDenied(format!("{what} answered 403 Forbidden"))),
        304 => Err(ProviderError::Unavailable(format!("{what} answered 304 Not Modified; the current value is kept"))),
        s => Err(ProviderError::Unavailable(format!("{what} answered with status {s}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_are_capped() {
        let spec = |t: Option<&str>| WebhookSpec { timeout: t.map(str::to_string), ..WebhookSpec::default() };
        assert_eq!(request_timeout(&spec(None)).expect("default"), REQUEST_TIMEOUT);
        assert_eq!(request_timeout(&spec(Some("0"))).expect("zero"), REQUEST_TIMEOUT);
        assert_eq!(request_timeout(&spec(Some("2s"))).expect("2s"), Duration::from_secs(2));
        assert_eq!(request_timeout(&spec(Some("1h"))).expect("capped"), REQUEST_TIMEOUT);
        assert_eq!(
            request_timeout(&spec(Some("soon"))).map_err(|e| e.code()).expect_err("bad"),
            tonic::Code::FailedPrecondition
        );
    }

    #[test]
    fn messages_name_the_server_without_path_or_query() {
        let url = parse_url("https://user:pw@api.example.com/v1/s?token=secret").expect("url");
        assert_eq!(server_of(&url), "https://api.example.com:443");
        assert!(parse_url("ftp://x/").is_err());
        assert!(parse_url("http://").is_err());
        assert_eq!(check_status(404, "x").map_err(|e| e.code()), Err(tonic::Code::NotFound));
        assert_eq!(check_status(500, "x").map_err(|e| e.code()), Err(tonic::Code::Unavailable));
        assert!(check_status(204, "x").is_ok());
    }

    #[test]
    fn header_values_cannot_smuggle_lines() {
        assert!(header("Authorization", "Basic dGVzdA==").is_ok());
        assert!(header("X-Name", "Jürgen").is_ok(), "non-ASCII bytes pass, as with Go's client");
        for bad in ["a\r\nInjected: 1", "a\nb", "a\0b"] {
            let e = header("X", bad).expect_err("refused");
            assert_eq!(e.code(), tonic::Code::FailedPrecondition);
        }
        assert!(header("Bad Name", "v").is_err());
    }
}
