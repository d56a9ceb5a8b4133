//! The real connector: a tonic channel over rustls with the reconciler's client certificate.

use std::time::Duration;

use keyward_crds::rules::parse_address;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

use super::pool::{Connector, PoolKey};
use super::tls::TlsMaterial;

/// Builds lazily connecting mTLS channels: a provider that is down does not fail client
/// creation, only the calls, which are then retried and counted by the breaker.
#[derive(Debug, Clone, Copy)]
pub struct TonicConnector {
    /// Time allowed to establish TCP + TLS.
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
            .tcp_nodelay(true)
            .http2_keep_alive_interval(Duration::from_secs(30))
            .keep_alive_timeout(Duration::from_secs(10))
            .keep_alive_while_idle(false);
        Ok(endpoint.connect_lazy())
    }
}
