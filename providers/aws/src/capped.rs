//! The AWS SDK's HTTP client with the runtime's answer limits: every answer from the endpoint
//! (Secrets Manager, Parameter Store, STS) is refused above
//! `keyward_provider_runtime::body::MAX_RESPONSE_BYTES` — declared, before its body is read, or
//! counted as it arrives — and must arrive within `REQUEST_TIMEOUT`. The endpoint is the
//! operator's setting, yet one provider process serves every tenant, so an endpoint that floods
//! or drips (a proxy gone wrong, a hostile network) must not take the process down with it.

use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient, SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::HttpRequest;
use aws_smithy_runtime_api::client::result::ConnectorError;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::body::SdkBody;
use keyward_provider_runtime::body::{BodyError, Limited, MAX_RESPONSE_BYTES, REQUEST_TIMEOUT};

/// Wraps the connectors `inner` hands out in [`CappedConnector`].
#[derive(Debug, Clone)]
pub struct CappedClient {
    inner: SharedHttpClient,
}

impl CappedClient {
    /// `inner` with the runtime's limits.
    pub fn wrap(inner: SharedHttpClient) -> SharedHttpClient {
        SharedHttpClient::new(CappedClient { inner })
    }
}

impl HttpClient for CappedClient {
    fn http_connector(&self, settings: &HttpConnectorSettings, components: &RuntimeComponents) -> SharedHttpConnector {
        SharedHttpConnector::new(CappedConnector { inner: self.inner.http_connector(settings, components) })
    }
}

/// Refuses a declared length above the cap, and caps the body of every other answer.
#[derive(Debug)]
struct CappedConnector {
    inner: SharedHttpConnector,
}

impl HttpConnector for CappedConnector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let answer = self.inner.call(request);
        HttpConnectorFuture::new(async move {
            let deadline = tokio::time::Instant::now() + REQUEST_TIMEOUT;
            let mut response = match tokio::time::timeout_at(deadline, answer).await {
                Ok(r) => r?,
                Err(_) => return Err(ConnectorError::timeout(Box::new(BodyError::TooSlow(REQUEST_TIMEOUT)))),
            };
            let declared = response.headers().get("content-length").and_then(|v| v.trim().parse::<u64>().ok());
            if declared.is_some_and(|n| n > MAX_RESPONSE_BYTES) {
                return Err(ConnectorError::other(Box::new(BodyError::TooLarge(MAX_RESPONSE_BYTES)), None));
            }
            let body = response.take_body();
            let timer = Box::pin(tokio::time::sleep_until(deadline));
            *response.body_mut() =
                SdkBody::from_body_1_x(Limited::new(body, MAX_RESPONSE_BYTES, Some((timer, REQUEST_TIMEOUT))));
            Ok(response)
        })
    }
}
