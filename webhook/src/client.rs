//! A small HTTPS client with keep-alive, for the tests and the benchmark: one connection,
//! requests sent one after another over it.

use std::net::SocketAddr;
use std::sync::Arc;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use rustls_pki_types::pem::PemObject;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// Client TLS configuration trusting the PEM CA `ca_pem`.
pub fn client_config(ca_pem: &str) -> anyhow::Result<Arc<ClientConfig>> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert?)?;
    }
    let config = ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// One keep-alive HTTP/1.1 connection over TLS.
pub struct Connection {
    sender: SendRequest<Full<Bytes>>,
    /// The server certificate presented in the handshake.
    pub peer_certificate: Option<CertificateDer<'static>>,
}

impl Connection {
    /// Connects to `addr`, verifying the server as `server_name`.
    pub async fn connect(config: Arc<ClientConfig>, addr: SocketAddr, server_name: &str) -> anyhow::Result<Self> {
        let tcp = TcpStream::connect(addr).await?;
        tcp.set_nodelay(true)?;
        let name = ServerName::try_from(server_name.to_string())?;
        let tls = TlsConnector::from(config).connect(name, tcp).await?;
        let peer_certificate =
            tls.get_ref().1.peer_certificates().and_then(|c| c.first()).map(|c| c.clone().into_owned());
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(Connection { sender, peer_certificate })
    }

    /// POSTs `body` to `path`; returns the status and body.
    pub async fn post(&mut self, path: &str, body: Vec<u8>) -> anyhow::Result<(u16, Vec<u8>)> {
        self.sender.ready().await?;
        let req = http::Request::post(path)
            .header(http::header::HOST, "keyward-webhook")
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body)))?;
        let resp = self.sender.send_request(req).await?;
        let status = resp.status().as_u16();
        let body = resp.into_body().collect().await?.to_bytes().to_vec();
        Ok((status, body))
    }
}
