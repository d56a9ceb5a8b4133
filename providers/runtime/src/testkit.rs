//! Helpers for tests and benchmarks of provider processes (feature `testkit`): a throwaway
//! PKI written as a Secret-style TLS directory, an mTLS gRPC client, a tiny HTTP GET for the
//! health port, the launcher every provider test starts its process with ([`launch`]), and the
//! [`conformance`] suite every provider runs against its real store.

pub mod conformance;
mod launch;

pub use launch::{RunningProvider, launch, launch_with};

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use keyward_certs::{CertificateAuthority, CertifiedKey, TlsFiles, Usage, write_tls_dir};
use keyward_proto::v1::ProviderReference;
use keyward_proto::v1::secret_store_provider_client::SecretStoreProviderClient;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

const DAY: Duration = Duration::from_secs(86_400);

/// Anything the testkit cannot do.
pub type TestkitError = Box<dyn std::error::Error + Send + Sync>;

/// A CA, a provider server certificate written into a TLS directory, and client identities.
pub struct TestPki {
    /// The CA that signs the server certificate and the accepted client certificates.
    pub ca: CertificateAuthority,
    dir: tempfile::TempDir,
}

impl TestPki {
    /// A new CA and a server certificate for `localhost` / `127.0.0.1`.
    pub fn new() -> Result<Self, TestkitError> {
        let ca = CertificateAuthority::generate("keyward-test-ca", DAY)?;
        let dir = tempfile::tempdir()?;
        let pki = TestPki { ca, dir };
        pki.rotate_server(&pki.ca)?;
        Ok(pki)
    }

    /// The TLS directory to pass as `--tls-dir`.
    pub fn tls_dir(&self) -> &Path {
        self.dir.path()
    }

    /// A client certificate signed by the CA.
    pub fn client(&self) -> Result<CertifiedKey, TestkitError> {
        Ok(self.ca.issue(&["keyward-reconciler"], Usage::Client, DAY)?)
    }

    /// Writes a new server certificate issued by `issuer` (the client CA in `ca.crt` stays this
    /// PKI's CA), with the kubelet-style `..data` swap.
    pub fn rotate_server(&self, issuer: &CertificateAuthority) -> Result<CertifiedKey, TestkitError> {
        let server = issuer.issue(&["localhost", "127.0.0.1"], Usage::Server, DAY)?;
        write_tls_dir(
            self.dir.path(),
            &TlsFiles { ca_pem: self.ca.cert_pem(), cert_pem: &server.cert_pem, key_pem: &server.key_pem },
        )?;
        Ok(server)
    }
}

/// Connects over mTLS to a provider at `addr`, trusting `server_ca_pem`, presenting `identity`
/// (or no client certificate).
pub async fn connect(
    addr: SocketAddr,
    server_ca_pem: &str,
    identity: Option<&CertifiedKey>,
) -> Result<SecretStoreProviderClient<Channel>, TestkitError> {
    Ok(SecretStoreProviderClient::new(connect_channel(addr, server_ca_pem, identity).await?))
}

/// The mTLS channel of [`connect`], for a client of any of the contract's services.
pub async fn connect_channel(
    addr: SocketAddr,
    server_ca_pem: &str,
    identity: Option<&CertifiedKey>,
) -> Result<Channel, TestkitError> {
    let mut tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(server_ca_pem)).domain_name("localhost");
    if let Some(id) = identity {
        tls = tls.identity(Identity::from_pem(&id.cert_pem, &id.key_pem));
    }
    let channel = Endpoint::from_shared(format!("https://{addr}"))?
        .tls_config(tls)?
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(30))
        .connect()
        .await?;
    Ok(channel)
}

/// A ProviderReference (without an authentication scope).
pub fn provider_ref(kind: &str, name: &str, namespace: &str, store_ref_kind: &str) -> ProviderReference {
    ProviderReference {
        api_version: "provider.external-secrets.io/v2alpha1".into(),
        kind: kind.into(),
        name: name.into(),
        namespace: namespace.into(),
        store_ref_kind: store_ref_kind.into(),
        authentication_scope: String::new(),
    }
}

/// A reference as the reconciler sends it for a ClusterProvider with `authenticationScope:
/// ProviderNamespace` naming `namespace`: the configuration there is operator-owned.
pub fn operator_ref(kind: &str, name: &str, namespace: &str) -> ProviderReference {
    ProviderReference {
        authentication_scope: "ProviderNamespace".into(),
        ..provider_ref(kind, name, namespace, "ClusterProvider")
    }
}

/// `GET path` over plain HTTP/1.0; returns the status code and body.
pub async fn http_get(addr: SocketAddr, path: &str) -> Result<(u16, String), TestkitError> {
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    stream.write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes()).await?;
    let mut buf = Vec::new();
    stream.read_to_end(&mut buf).await?;
    let text = String::from_utf8_lossy(&buf).to_string();
    let status = text.split_whitespace().nth(1).and_then(|s| s.parse().ok()).ok_or("no HTTP status line")?;
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    Ok((status, body))
}

/// Waits until `/readyz` answers 200.
pub async fn wait_ready(health: SocketAddr, timeout: Duration) -> Result<(), TestkitError> {
    let start = std::time::Instant::now();
    loop {
        if let Ok((200, _)) = http_get(health, "/readyz").await {
            return Ok(());
        }
        if start.elapsed() > timeout {
            return Err(format!("{health}/readyz not ready within {timeout:?}").into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `provider.v1.GeneratorProvider/Generate` on `c`: the generated values, or the provider's status.
pub async fn generate(
    c: &mut keyward_proto::v1::generator_provider_client::GeneratorProviderClient<Channel>,
    req: keyward_proto::v1::GenerateRequest,
) -> Result<std::collections::HashMap<String, Vec<u8>>, tonic::Status> {
    c.generate(req).await.map(|r| r.into_inner().values)
}

/// One generated value as UTF-8 text; panics naming the keys there are when `key` is missing.
pub fn value_text(values: &std::collections::HashMap<String, Vec<u8>>, key: &str) -> String {
    let value = values.get(key).unwrap_or_else(|| panic!("no {key} in {:?}", values.keys()));
    String::from_utf8(value.clone()).unwrap_or_else(|e| panic!("{key} is not UTF-8: {e}"))
}
