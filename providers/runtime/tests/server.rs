//! The runtime's server in-process, over real mTLS: in-flight calls finish on shutdown.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use keyward_proto::v1::{
    ExternalSecretDataRemoteRef, ExternalSecretFind, GetSecretRequest, PushSecretData, PushSecretRemoteRef,
    SecretStoreCapabilities,
};
use keyward_provider_runtime::testkit::{TestPki, connect, http_get, provider_ref, wait_ready};
use keyward_provider_runtime::{Provider, ProviderError, RequestContext, SecretMap, ServerOptions, serve};

/// Answers GetSecret after a delay; everything else is unsupported.
struct Slow(Duration);

#[tonic::async_trait]
impl Provider for Slow {
    async fn get_secret(&self, _: &RequestContext, r: &ExternalSecretDataRemoteRef) -> Result<Vec<u8>, ProviderError> {
        tokio::time::sleep(self.0).await;
        Ok(format!("value-of-{}", r.key).into_bytes())
    }
    async fn get_secret_map(
        &self,
        _: &RequestContext,
        _: &ExternalSecretDataRemoteRef,
    ) -> Result<SecretMap, ProviderError> {
        Err(ProviderError::Unsupported("map".into()))
    }
    async fn get_all_secrets(&self, _: &RequestContext, _: &ExternalSecretFind) -> Result<SecretMap, ProviderError> {
        Err(ProviderError::Unsupported("find".into()))
    }
    async fn push_secret(&self, _: &RequestContext, _: &SecretMap, _: &PushSecretData) -> Result<(), ProviderError> {
        Err(ProviderError::Unsupported("push".into()))
    }
    async fn delete_secret(&self, _: &RequestContext, _: &PushSecretRemoteRef) -> Result<(), ProviderError> {
        Err(ProviderError::Unsupported("delete".into()))
    }
    async fn secret_exists(&self, _: &RequestContext, _: &PushSecretRemoteRef) -> Result<bool, ProviderError> {
        Err(ProviderError::Unsupported("exists".into()))
    }
    async fn validate(&self, _: &RequestContext) -> Result<Vec<String>, ProviderError> {
        Ok(vec![])
    }
    fn capabilities(&self) -> SecretStoreCapabilities {
        SecretStoreCapabilities::ReadOnly
    }
}

fn local_addr() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr")
}

#[tokio::test]
async fn in_flight_calls_finish_on_shutdown() {
    keyward_provider_runtime::install_crypto_provider();
    let pki = TestPki::new().expect("pki");
    let options = ServerOptions {
        listen: local_addr(),
        health_listen: local_addr(),
        tls_dir: pki.tls_dir().to_path_buf(),
        shutdown_timeout: Duration::from_secs(10),
        ..ServerOptions::default()
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve(Slow(Duration::from_millis(1500)), options.clone(), async move {
        let _ = stopped.await;
    }));
    wait_ready(options.health_listen, Duration::from_secs(10)).await.expect("ready");

    let id = pki.client().expect("client");
    let mut client = connect(options.listen, pki.ca.cert_pem(), Some(&id)).await.expect("connect");
    let request = GetSecretRequest {
        remote_ref: Some(ExternalSecretDataRemoteRef { key: "db".into(), ..Default::default() }),
        provider_ref: Some(provider_ref("Slow", "x", "", "Provider")),
        source_namespace: "team-a".into(),
        max_age_millis: 0,
    };
    let started = Instant::now();
    let call = tokio::spawn(async move { client.get_secret(request).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.send(()).expect("signal shutdown");

    // The call that was running when shutdown started still gets its answer.
    let answer = call.await.expect("join").expect("in-flight call finished");
    assert_eq!(answer.into_inner().value, b"value-of-db");
    assert!(started.elapsed() >= Duration::from_millis(1400));

    // Then the server stops, and new connections are refused.
    let result = tokio::time::timeout(Duration::from_secs(10), server).await.expect("server stopped in time");
    result.expect("join").expect("clean shutdown");
    assert!(connect(options.listen, pki.ca.cert_pem(), Some(&id)).await.is_err());
    assert!(http_get(options.health_listen, "/healthz").await.is_err());
}
