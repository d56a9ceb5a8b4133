//! Serving certificate: loaded from a Kubernetes-style TLS directory (`tls.crt`, `tls.key`,
//! usually symlinks into `..data`) and reloaded when the files change, without restart.
//!
//! Reading, polling and keeping the last good certificate are [`keyward_certs::reload`]'s; what
//! is the webhook's own is handing the certificate to rustls per handshake (the API server needs
//! no client certificate) and counting reloads in its metrics.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use keyward_certs::reload::{Reloading, certificate_chain, private_key};
use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::CertificateDer;

pub use keyward_certs::reload::TlsError;
pub use keyward_certs::{CERT_FILE, KEY_FILE};

use crate::metrics::Metrics;

/// A certificate resolver that always hands out the latest good certificate of a directory.
#[derive(Debug)]
pub struct ReloadingCert {
    files: Reloading<CertifiedKey, 2>,
}

/// The certificate and a signing key for it; a key that does not belong to the certificate is
/// refused here rather than failing every handshake.
fn certified_key(provider: &CryptoProvider, cert_pem: &[u8], key_pem: &[u8]) -> Result<CertifiedKey, TlsError> {
    let chain = certificate_chain(cert_pem)?;
    let signing = provider.key_provider.load_private_key(private_key(key_pem)?)?;
    let key = CertifiedKey::new(chain, signing);
    key.keys_match()?;
    Ok(key)
}

impl ReloadingCert {
    /// Loads the certificate of `dir`; fails if it is missing or unusable.
    pub fn load(dir: impl Into<PathBuf>, provider: Arc<CryptoProvider>) -> Result<Arc<Self>, TlsError> {
        let files =
            Reloading::load(dir, [CERT_FILE, KEY_FILE], move |[cert, key]| certified_key(&provider, cert, key))?;
        Ok(Arc::new(ReloadingCert { files }))
    }

    /// Re-reads the files (following the `..data` symlink) and swaps the certificate when they
    /// changed. Returns whether a new certificate is in use. On error the old one stays, and the
    /// same broken files are not reported again.
    pub fn reload_if_changed(&self) -> Result<bool, TlsError> {
        self.files.reload_if_changed()
    }

    /// The certificate chain in use (first is the leaf), DER.
    pub fn chain(&self) -> Vec<CertificateDer<'static>> {
        self.files.current().cert.clone()
    }

    /// When the certificate in use expires, in Unix seconds (`None` if its leaf does not parse).
    pub fn not_after(&self) -> Option<i64> {
        let chain = self.chain();
        keyward_certs::bundle::der_not_after(chain.first()?).map(|t| t.unix_timestamp())
    }

    /// Polls the directory every `interval` until the process ends, counting reloads and
    /// refused rotations in `metrics` and keeping its certificate expiry current.
    pub fn spawn_reloader(self: &Arc<Self>, interval: Duration, metrics: Arc<Metrics>) -> tokio::task::JoinHandle<()> {
        metrics.cert_expiry.set(self.not_after().unwrap_or_default());
        let cert = self.clone();
        self.files.spawn_watch(interval, move |outcome| {
            let counter = match outcome {
                Ok(true) => {
                    metrics.cert_expiry.set(cert.not_after().unwrap_or_default());
                    &metrics.cert_reloads
                }
                Ok(false) => return,
                Err(_) => &metrics.cert_reload_errors,
            };
            counter.inc();
        })
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.files.current())
    }
}

/// The server configuration: TLS 1.2 and 1.3 with the given provider, HTTP/2 and HTTP/1.1.
pub fn server_config(provider: Arc<CryptoProvider>, cert: Arc<ReloadingCert>) -> Result<ServerConfig, TlsError> {
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
        .with_no_client_auth()
        .with_cert_resolver(cert);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;
    use keyward_certs::{CertificateAuthority, TlsFiles, Usage, write_tls_dir};
    use rustls_pki_types::pem::PemObject;

    const DAY: Duration = Duration::from_secs(86_400);

    #[test]
    fn resolves_the_rotated_certificate_and_refuses_a_key_of_another_certificate() {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let ca = CertificateAuthority::generate("test-ca", DAY).expect("ca");
        let one = ca.issue(&["localhost"], Usage::Server, DAY).expect("leaf");
        let two = ca.issue(&["localhost"], Usage::Server, DAY).expect("leaf");
        let dir = tempfile::tempdir().expect("dir");
        let write = |cert_pem: &str, key_pem: &str| {
            write_tls_dir(dir.path(), &TlsFiles { ca_pem: ca.cert_pem(), cert_pem, key_pem }).expect("write")
        };
        let leaf = |pem: &str| CertificateDer::from_pem_slice(pem.as_bytes()).expect("pem");

        write(&one.cert_pem, &one.key_pem);
        let cert = ReloadingCert::load(dir.path(), provider.clone()).expect("load");
        let config = server_config(provider, cert.clone()).expect("config");
        assert_eq!(config.alpn_protocols, vec![b"h2".to_vec(), b"http/1.1".to_vec()]);
        assert_eq!(cert.chain(), vec![leaf(&one.cert_pem)]);

        write(&two.cert_pem, &two.key_pem);
        assert!(cert.reload_if_changed().expect("reload"));
        assert_eq!(cert.chain(), vec![leaf(&two.cert_pem)]);
        assert_eq!(cert.not_after(), Some(two.not_after.unix_timestamp()), "the expiry of the certificate in use");

        // The key of the first certificate with the second one: refused, the second stays.
        write(&two.cert_pem, &one.key_pem);
        let err = cert.reload_if_changed().expect_err("mismatched key");
        assert!(matches!(err, TlsError::Rustls(_)), "{err:?}");
        assert!(err.to_string().starts_with("TLS configuration: "), "{err}");
        assert_eq!(cert.chain(), vec![leaf(&two.cert_pem)]);
    }
}
