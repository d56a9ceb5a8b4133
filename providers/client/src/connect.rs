//! The real connector: a tonic channel over rustls with the reconciler's client certificate.

use std::time::Duration;

use hyper_util::client::legacy::connect::HttpConnector;
use keyward_crds::rules::parse_address;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

use super::pool::{Connector, PoolKey};
use super::tls::TlsMaterial;

/// Builds lazily connecting mTLS channels: a provider that is down does not fail client
/// creation, only the calls, which are then retried and counted by the breaker.
#[derive(Debug, Clone, Copy)]
pub struct TonicConnector {
    /// Time allowed to establish TCP + TLS. A provider address is tenant input: a server that
    /// accepts the connection and never finishes the handshake must not hold it (and every
    /// call to it) for longer.
    pub connect_timeout: Duration,
}

impl Default for TonicConnector {
    fn default() -> Self {
        TonicConnector { connect_timeout: Duration::from_secs(5) }
    }
}

impl Connector for TonicConnector {
    fn connect(&self, key: &PoolKey, tls: &TlsMaterial) -> Result<Channel, String> {
        let addr = parse_address(&key.address)?;
        let uri = if addr.host.contains(':') {
            format!("https://[{}]:{}", addr.host, addr.port)
        } else {
            format!("https://{}:{}", addr.host, addr.port)
        };
        let tls_config = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(&tls.ca_pem))
            .identity(Identity::from_pem(&tls.cert_pem, &tls.key_pem))
            .domain_name(addr.host.clone());
        let endpoint = Endpoint::from_shared(uri)
            .map_err(|e| e.to_string())?
            .tls_config(tls_config)
            .map_err(|e| e.to_string())?
            .connect_timeout(self.connect_timeout)
            .http2_keep_alive_interval(Duration::from_secs(30))
            .keep_alive_timeout(Duration::from_secs(10))
            .keep_alive_while_idle(false);
        // `connect_lazy` would time out the TCP connect only; a connector of our own gets the
        // timeout around TCP and tonic's TLS handshake together.
        let mut tcp = HttpConnector::new();
        tcp.enforce_http(false);
        tcp.set_nodelay(true);
        Ok(endpoint.connect_with_connector_lazy(tcp))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::time::Duration;

    use keyward_certs::{CertificateAuthority, Usage};
    use keyward_proto::v1::secret_store_provider_client::SecretStoreProviderClient;
    use tokio::io::AsyncReadExt;

    use super::*;

    /// A server that accepts TCP and never answers the TLS handshake is dropped at the
    /// connect timeout, and the call fails then instead of waiting for its own deadline.
    #[tokio::test]
    async fn a_handshake_that_never_finishes_is_dropped_at_the_connect_timeout() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let ca = CertificateAuthority::generate("test-ca", Duration::from_secs(600)).unwrap();
        let client = ca.issue(&["keyward-reconciler"], Usage::Client, Duration::from_secs(600)).unwrap();
        let tls = TlsMaterial::new(ca.cert_pem().into(), client.cert_pem.into(), client.key_pem.into());
        let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let key =
            PoolKey { address: silent.local_addr().unwrap().to_string(), tls_fingerprint: tls.fingerprint.clone() };
        let connector = TonicConnector { connect_timeout: Duration::from_millis(300) };
        let mut provider = SecretStoreProviderClient::new(connector.connect(&key, &tls).unwrap());
        let call =
            tokio::spawn(async move { provider.capabilities(keyward_proto::v1::CapabilitiesRequest::default()).await });

        let (mut conn, _) = silent.accept().await.unwrap();
        let mut buf = [0u8; 4096];
        let closed = tokio::time::timeout(Duration::from_secs(10), async {
            while conn.read(&mut buf).await.is_ok_and(|n| n > 0) {}
        })
        .await;
        assert!(closed.is_ok(), "the connection was still open 10 s after a 300 ms connect timeout");
        let answer = tokio::time::timeout(Duration::from_secs(10), call).await.unwrap().unwrap();
        // Counted as the provider being unreachable: retried, and waited on for its return.
        let err = keyward_proto::ProviderError::from(answer.unwrap_err());
        assert!(matches!(err, keyward_proto::ProviderError::Unavailable(_)), "{err:?}");
    }
}
