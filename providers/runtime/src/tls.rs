//! mTLS material read from a Secret-style directory (`ca.crt`, `tls.crt`, `tls.key`) and
//! reloaded without restart, and the client identities allowed to call.
//!
//! A client certificate must chain to `ca.crt` *and* be issued to one of the allowed client
//! names (a DNS or URI subject alternative name, or the common name): an issuer is often shared
//! (one cert-manager ClusterIssuer, one Keyward CA that also signs the webhook's serving
//! certificate), and any other certificate it signs must not be able to call a provider with a
//! forged ProviderReference. The default is the reconciler's client certificate name.
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
use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{CertificateError, DigitallySignedStruct, DistinguishedName, ServerConfig, SignatureScheme};

pub use keyward_certs::reload::TlsError;
pub use keyward_certs::{CA_FILE, CERT_FILE, KEY_FILE};

/// Installs the process's crypto provider as every Keyward server does
/// ([`keyward_process::install_crypto_provider`]), for tests and benchmarks that serve a
/// provider without [`crate::main`]; calling it again is harmless.
pub fn install_crypto_provider() {
    let _ = keyward_process::install_crypto_provider();
}

/// The name of the reconciler's client certificate, as `keyward-certs` and the chart issue it.
pub const DEFAULT_CLIENT_NAME: &str = "keyward-reconciler";

/// The client identities allowed to call: certificate names (never empty).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AllowedClients(Arc<[String]>);

impl AllowedClients {
    /// The allowed names; an empty list (or only empty names) is refused, so a misconfiguration
    /// never opens the provider to every certificate of the CA.
    pub fn new(names: impl IntoIterator<Item = String>) -> Result<Self, TlsError> {
        let names: Vec<String> = names.into_iter().map(|n| n.trim().to_string()).filter(|n| !n.is_empty()).collect();
        if names.is_empty() {
            return Err(TlsError::Invalid {
                file: CA_FILE,
                message: "no allowed client names: name at least the reconciler's client certificate".into(),
            });
        }
        Ok(AllowedClients(names.into()))
    }

    /// Whether a certificate issued to `names` may call.
    pub fn admits(&self, names: &[String]) -> bool {
        names.iter().any(|n| self.0.contains(n))
    }

    /// The allowed names.
    pub fn names(&self) -> &[String] {
        &self.0
    }
}

impl Default for AllowedClients {
    fn default() -> Self {
        AllowedClients(vec![DEFAULT_CLIENT_NAME.to_string()].into())
    }
}

/// Verifies the chain with WebPKI, then pins the identity to the allowed names.
#[derive(Debug)]
struct PinnedClientVerifier {
    chain: Arc<dyn ClientCertVerifier>,
    allowed: AllowedClients,
}

impl ClientCertVerifier for PinnedClientVerifier {
    fn offer_client_auth(&self) -> bool {
        self.chain.offer_client_auth()
    }

    fn client_auth_mandatory(&self) -> bool {
        self.chain.client_auth_mandatory()
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.chain.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        let verified = self.chain.verify_client_cert(end_entity, intermediates, now)?;
        let names = keyward_certs::certificate_names(end_entity)
            .map_err(|_| rustls::Error::InvalidCertificate(CertificateError::BadEncoding))?;
        if self.allowed.admits(&names) {
            return Ok(verified);
        }
        tracing::warn!(
            presented = ?names,
            allowed = ?self.allowed.names(),
            "client certificate refused: signed by the CA but not issued to an allowed client name"
        );
        Err(rustls::Error::InvalidCertificate(CertificateError::ApplicationVerificationFailure))
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.chain.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.chain.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.chain.supported_verify_schemes()
    }
}

/// Builds the server configuration: TLS 1.2 and 1.3 with the ring provider, client
/// certificate required, verified against `ca` and issued to one of `allowed`, HTTP/2 by ALPN.
pub fn server_config(
    ca_pem: &[u8],
    cert_pem: &[u8],
    key_pem: &[u8],
    allowed: &AllowedClients,
) -> Result<ServerConfig, TlsError> {
    let crypto = Arc::new(rustls::crypto::ring::default_provider());
    let chain = WebPkiClientVerifier::builder_with_provider(Arc::new(ca_roots(ca_pem)?), crypto.clone())
        .build()
        .map_err(|e| TlsError::Invalid { file: CA_FILE, message: format!("client verifier: {e}") })?;
    let verifier = Arc::new(PinnedClientVerifier { chain, allowed: allowed.clone() });
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
    /// Loads the directory; fails if the material is missing or unusable. Only `allowed`
    /// clients get through the handshake.
    pub fn load(dir: &Path, allowed: AllowedClients) -> Result<Self, TlsError> {
        let files = Reloading::load(dir, [CA_FILE, CERT_FILE, KEY_FILE], move |[ca, cert, key]| {
            server_config(ca, cert, key, &allowed)
        })?;
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
        let cfg = ReloadingConfig::load(dir.path(), AllowedClients::default()).expect("load");
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
        let err = server_config(b"", server.cert_pem.as_bytes(), server.key_pem.as_bytes(), &AllowedClients::default())
            .expect_err("no CA");
        assert!(matches!(err, TlsError::Invalid { file: CA_FILE, .. }), "{err:?}");
        assert_eq!(err.to_string(), "ca.crt: no CA certificate found");
        let dir = tempfile::tempdir().expect("dir");
        write_tls_dir(dir.path(), &TlsFiles { ca_pem: "", cert_pem: &server.cert_pem, key_pem: &server.key_pem })
            .expect("write");
        let err = ReloadingConfig::load(dir.path(), AllowedClients::default()).expect_err("no CA");
        assert_eq!(err.to_string(), "ca.crt: no CA certificate found");
    }

    #[test]
    fn only_allowed_client_names_of_the_ca_get_through() {
        let ca = CertificateAuthority::generate("test-ca", DAY).expect("ca");
        let server = ca.issue(&["localhost"], Usage::Server, DAY).expect("leaf");
        let config = |allowed: &AllowedClients| {
            Arc::new(
                server_config(ca.cert_pem().as_bytes(), server.cert_pem.as_bytes(), server.key_pem.as_bytes(), allowed)
                    .expect("config"),
            )
        };
        let reconciler = ca.issue(&[DEFAULT_CLIENT_NAME], Usage::Client, DAY).expect("client");
        // Another certificate of the same CA: the webhook's serving certificate, or any client
        // certificate a shared issuer hands out.
        let webhook = ca.issue(&["keyward-webhook.keyward.svc"], Usage::Client, DAY).expect("client");
        let defaults = config(&AllowedClients::default());
        handshake(defaults.clone(), client_config(&ca, Some(&reconciler))).expect("the reconciler");
        let err = handshake(defaults, client_config(&ca, Some(&webhook))).expect_err("same CA, other name");
        assert_eq!(err, rustls::Error::InvalidCertificate(CertificateError::ApplicationVerificationFailure));

        let custom =
            config(&AllowedClients::new(["a".to_string(), "keyward-webhook.keyward.svc".to_string()]).expect("names"));
        handshake(custom.clone(), client_config(&ca, Some(&webhook))).expect("listed");
        assert!(handshake(custom, client_config(&ca, Some(&reconciler))).is_err(), "not listed");
        assert!(AllowedClients::new([String::new(), " ".to_string()]).is_err(), "no names, no callers");
    }
}
