//! mTLS material read from a Secret-style directory (`ca.crt`, `tls.crt`, `tls.key`) and
//! reloaded without restart.
//!
//! The files are polled every second by content ([`keyward_certs::reload`]): this sees in-place
//! writes as well as the kubelet's atomic `..data` symlink swap. Each TLS handshake takes the
//! configuration current at that moment, so a rotated server certificate or client CA applies to
//! the next connection; established connections keep the material they were opened with. A
//! broken or half-written set of files is logged once and ignored: the last good configuration
//! stays in use.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use keyward_certs::reload::{Reloading, ca_roots, certificate_chain, private_key};
use rustls::ServerConfig;
use rustls::server::WebPkiClientVerifier;

pub use keyward_certs::reload::TlsError;
pub use keyward_certs::{CA_FILE, CERT_FILE, KEY_FILE};

/// Builds the server configuration: TLS 1.2 and 1.3 with the ring provider, client
/// certificate required and verified against `ca`, HTTP/2 by ALPN.
pub fn server_config(ca_pem: &[u8], cert_pem: &[u8], key_pem: &[u8]) -> Result<ServerConfig, TlsError> {
    let crypto = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(ca_roots(ca_pem)?), crypto.clone())
        .build()
        .map_err(|e| TlsError::Invalid { file: CA_FILE, message: format!("client verifier: {e}") })?;
    let mut config = ServerConfig::builder_with_provider(crypto)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
        .with_client_cert_verifier(verifier)
        .with_single_cert(certificate_chain(cert_pem)?, private_key(key_pem)?)?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(config)
}

/// The current server configuration, swapped when the files change.
#[derive(Clone, Debug)]
pub struct ReloadingConfig {
    files: Reloading<ServerConfig, 3>,
}

impl ReloadingConfig {
    /// Loads the directory; fails if the material is missing or unusable.
    pub fn load(dir: &Path) -> Result<Self, TlsError> {
        let files =
            Reloading::load(dir, [CA_FILE, CERT_FILE, KEY_FILE], |[ca, cert, key]| server_config(ca, cert, key))?;
        Ok(ReloadingConfig { files })
    }

    /// The configuration for the next handshake.
    pub fn current(&self) -> Arc<ServerConfig> {
        self.files.current()
    }

    /// Re-reads the files; swaps the configuration if they changed and are usable.
    /// Returns whether a new configuration was installed.
    pub fn reload_if_changed(&self) -> Result<bool, TlsError> {
        self.files.reload_if_changed()
    }

    /// Polls the directory every `interval` until the returned task is aborted.
    pub fn spawn_watch(&self, interval: Duration) -> tokio::task::JoinHandle<()> {
        self.files.spawn_watch(interval, |_| {})
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keyward_certs::{CertificateAuthority, CertifiedKey, TlsFiles, Usage, write_tls_dir};
    use rustls::pki_types::{CertificateDer, ServerName};
    use rustls::{ClientConfig, ClientConnection, ServerConnection};

    const DAY: Duration = Duration::from_secs(86_400);

    fn client_config(ca: &CertificateAuthority, identity: Option<&CertifiedKey>) -> Arc<ClientConfig> {
        let builder = ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(ca_roots(ca.cert_pem().as_bytes()).expect("roots"));
        Arc::new(match identity {
            Some(id) => builder
                .with_client_auth_cert(
                    certificate_chain(id.cert_pem.as_bytes()).expect("chain"),
                    private_key(id.key_pem.as_bytes()).expect("key"),
                )
                .expect("client cert"),
            None => builder.with_no_client_auth(),
        })
    }

    /// Runs a handshake in memory; returns the server certificate the client saw.
    fn handshake(
        server: Arc<ServerConfig>,
        client: Arc<ClientConfig>,
    ) -> Result<CertificateDer<'static>, rustls::Error> {
        let mut server = ServerConnection::new(server)?;
        let name = ServerName::try_from("localhost").expect("name");
        let mut client = ClientConnection::new(client, name)?;
        while client.is_handshaking() || server.is_handshaking() {
            let mut moved = false;
            while client.wants_write() {
                let mut buf = Vec::new();
                client.write_tls(&mut buf).expect("client write");
                server.read_tls(&mut buf.as_slice()).expect("server read");
                server.process_new_packets()?;
                moved = true;
            }
            while server.wants_write() {
                let mut buf = Vec::new();
                server.write_tls(&mut buf).expect("server write");
                client.read_tls(&mut buf.as_slice()).expect("client read");
                client.process_new_packets()?;
                moved = true;
            }
            assert!(moved, "handshake stalled");
        }
        // TLS 1.3: the server judges the client certificate after the client has finished.
        while client.wants_write() {
            let mut buf = Vec::new();
            client.write_tls(&mut buf).expect("client write");
            server.read_tls(&mut buf.as_slice()).expect("server read");
            server.process_new_packets()?;
        }
        Ok(client.peer_certificates().expect("server certificate")[0].clone())
    }

    fn leaf(pem: &str) -> CertificateDer<'static> {
        certificate_chain(pem.as_bytes()).expect("chain")[0].clone()
    }

    #[test]
    fn requires_a_client_certificate_of_the_ca_and_follows_a_rotation() {
        let ca = CertificateAuthority::generate("test-ca", DAY).expect("ca");
        let other = CertificateAuthority::generate("other-ca", DAY).expect("ca");
        let one = ca.issue(&["localhost"], Usage::Server, DAY).expect("leaf");
        let client = ca.issue(&["keyward-reconciler"], Usage::Client, DAY).expect("client");
        let stranger = other.issue(&["keyward-reconciler"], Usage::Client, DAY).expect("client");
        let dir = tempfile::tempdir().expect("dir");
        write_tls_dir(dir.path(), &TlsFiles { ca_pem: ca.cert_pem(), cert_pem: &one.cert_pem, key_pem: &one.key_pem })
            .expect("write");
        let cfg = ReloadingConfig::load(dir.path()).expect("load");
        assert_eq!(cfg.current().alpn_protocols, vec![b"h2".to_vec()]);

        let seen = handshake(cfg.current(), client_config(&ca, Some(&client))).expect("client of the CA");
        assert_eq!(seen, leaf(&one.cert_pem));
        let err = handshake(cfg.current(), client_config(&ca, None)).expect_err("no client certificate");
        assert_eq!(err, rustls::Error::NoCertificatesPresented);
        let err = handshake(cfg.current(), client_config(&ca, Some(&stranger))).expect_err("client of another CA");
        assert!(matches!(err, rustls::Error::InvalidCertificate(_)), "{err:?}");

        let two = ca.issue(&["localhost"], Usage::Server, DAY).expect("leaf");
        write_tls_dir(dir.path(), &TlsFiles { ca_pem: ca.cert_pem(), cert_pem: &two.cert_pem, key_pem: &two.key_pem })
            .expect("rotate");
        assert!(cfg.reload_if_changed().expect("poll"), "rotation seen");
        let seen = handshake(cfg.current(), client_config(&ca, Some(&client))).expect("client of the CA");
        assert_eq!(seen, leaf(&two.cert_pem));
    }

    #[test]
    fn refuses_an_empty_client_ca() {
        let ca = CertificateAuthority::generate("test-ca", DAY).expect("ca");
        let server = ca.issue(&["localhost"], Usage::Server, DAY).expect("leaf");
        let err = server_config(b"", server.cert_pem.as_bytes(), server.key_pem.as_bytes()).expect_err("no CA");
        assert!(matches!(err, TlsError::Invalid { file: CA_FILE, .. }), "{err:?}");
        assert_eq!(err.to_string(), "ca.crt: no CA certificate found");
        let dir = tempfile::tempdir().expect("dir");
        write_tls_dir(dir.path(), &TlsFiles { ca_pem: "", cert_pem: &server.cert_pem, key_pem: &server.key_pem })
            .expect("write");
        let err = ReloadingConfig::load(dir.path()).expect_err("no CA");
        assert_eq!(err.to_string(), "ca.crt: no CA certificate found");
    }
}
