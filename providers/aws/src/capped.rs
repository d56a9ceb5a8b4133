//! The AWS SDK's HTTP client with the runtime's answer limits: every answer from the endpoint
//! (Secrets Manager, Parameter Store, STS) is refused above
//! `keyward_provider_runtime::body::MAX_RESPONSE_BYTES` — declared, before its body is read, or
//! counted as it arrives — and must arrive within `REQUEST_TIMEOUT`. The endpoint is the
//! operator's setting, yet one provider process serves every tenant, so an endpoint that floods
//! or drips (a proxy gone wrong, a hostile network) must not take the process down with it.
//! Every request leaves through here, so it is also where store calls are counted.

use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient, SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::HttpRequest;
use aws_smithy_runtime_api::client::result::ConnectorError;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::body::SdkBody;
use keyward_provider_runtime::body::{BodyError, Limited, MAX_RESPONSE_BYTES, REQUEST_TIMEOUT};
use keyward_provider_runtime::store_calls;

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

/// Which store call a request is, in upstream's names: the JSON protocol's `X-Amz-Target`
/// (`secretsmanager.GetSecretValue`, `AmazonSSM.GetParameter`,
/// `AmazonEC2ContainerRegistry_V20150921.GetAuthorizationToken`), else STS's form `Action`.
pub fn store_call(target: Option<&str>, form: Option<&[u8]>) -> (&'static str, String) {
    if let Some((service, call)) = target.and_then(|t| t.split_once('.')) {
        let provider = match service {
            "AmazonSSM" => "AWS/ParameterStore",
            s if s.starts_with("AmazonEC2ContainerRegistry") => "AWS/ECR",
            _ => "AWS/SecretsManager",
        };
        return (provider, call.to_string());
    }
    let action = form
        .and_then(|b| std::str::from_utf8(b).ok())
        .and_then(|f| f.split('&').find_map(|kv| kv.strip_prefix("Action=")))
        .unwrap_or("Unknown");
    ("AWS/STS", action.to_string())
}

impl HttpConnector for CappedConnector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let target = request.headers().get("x-amz-target").map(str::to_string);
        let (provider, call) = store_call(target.as_deref(), request.body().bytes());
        let answer = self.inner.call(request);
        HttpConnectorFuture::new(async move {
            let deadline = tokio::time::Instant::now() + REQUEST_TIMEOUT;
            let answered = tokio::time::timeout_at(deadline, answer).await;
            // Counted once the head arrives: an answer below 400 is a successful call.
            let ok = matches!(&answered, Ok(Ok(r)) if r.status().as_u16() < 400);
            store_calls::record(provider, &call, ok);
            let mut response = match answered {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_are_named_as_upstream() {
        assert_eq!(
            store_call(Some("secretsmanager.GetSecretValue"), None),
            ("AWS/SecretsManager", "GetSecretValue".to_string())
        );
        assert_eq!(
            store_call(Some("AmazonSSM.GetParameter"), None),
            ("AWS/ParameterStore", "GetParameter".to_string())
        );
        assert_eq!(
            store_call(Some("AmazonEC2ContainerRegistry_V20150921.GetAuthorizationToken"), None),
            ("AWS/ECR", "GetAuthorizationToken".to_string())
        );
        // A batch read is one call of its own name.
        assert_eq!(
            store_call(Some("secretsmanager.BatchGetSecretValue"), None),
            ("AWS/SecretsManager", "BatchGetSecretValue".to_string())
        );
        assert_eq!(
            store_call(Some("AmazonSSM.GetParameters"), None),
            ("AWS/ParameterStore", "GetParameters".to_string())
        );
        let form = b"Action=AssumeRoleWithWebIdentity&Version=2011-06-15";
        assert_eq!(store_call(None, Some(form)), ("AWS/STS", "AssumeRoleWithWebIdentity".to_string()));
        assert_eq!(store_call(None, None), ("AWS/STS", "Unknown".to_string()));
    }
}
