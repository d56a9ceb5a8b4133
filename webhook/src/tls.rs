//! Serving certificate: loaded from a Kubernetes-style TLS directory (`tls.crt`, `tls.key`,
//! usually symlinks into `..data`) and reloaded when the files change, without restart.

use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::metrics::Metrics;

/// Certificate file in the TLS directory.
pub const CERT_FILE: &str = "tls.crt";
/// Key file in the TLS directory.
pub const KEY_FILE: &str = "tls.key";

/// Why the serving certificate could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// The PEM contents are not usable.
    #[error("{0}")]
    Pem(String),
    /// rustls refused the configuration.
    #[error("TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
}

#[derive(Debug)]
struct Loaded {
    cert_pem: Vec<u8>,
    key_pem: Vec<u8>,
    key: Arc<CertifiedKey>,
}

/// A certificate resolver that always hands out the latest good certificate of a directory.
#[derive(Debug)]
pub struct ReloadingCert {
    dir: PathBuf,
    provider: Arc<CryptoProvider>,
    current: RwLock<Arc<Loaded>>,
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read { path: path.display().to_string(), source })
}

fn certified_key(provider: &CryptoProvider, cert_pem: &[u8], key_pem: &[u8]) -> Result<CertifiedKey, TlsError> {
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Pem(format!("{CERT_FILE}: {e}")))?;
    if chain.is_empty() {
        return Err(TlsError::Pem(format!("{CERT_FILE} holds no certificate")));
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| TlsError::Pem(format!("{KEY_FILE}: {e}")))?;
    let signing = provider.key_provider.load_private_key(key)?;
    let ck = CertifiedKey::new(chain, signing);
    ck.keys_match()?;
    Ok(ck)
}

impl ReloadingCert {
    /// Loads the certificate of `dir`; fails if it is missing or unusable.
    pub fn load(dir: impl Into<PathBuf>, provider: Arc<CryptoProvider>) -> Result<Arc<Self>, TlsError> {
        let dir = dir.into();
        let loaded = Self::read_dir(&dir, &provider)?;
        Ok(Arc::new(ReloadingCert { dir, provider, current: RwLock::new(Arc::new(loaded)) }))
    }

    fn read_dir(dir: &Path, provider: &CryptoProvider) -> Result<Loaded, TlsError> {
        let cert_pem = read(&dir.join(CERT_FILE))?;
        let key_pem = read(&dir.join(KEY_FILE))?;
        let key = Arc::new(certified_key(provider, &cert_pem, &key_pem)?);
        Ok(Loaded { cert_pem, key_pem, key })
    }

    /// Re-reads the files (following the `..data` symlink) and swaps the certificate when they
    /// changed. Returns whether a new certificate is in use. On error the old one stays.
    pub fn reload_if_changed(&self) -> Result<bool, TlsError> {
        let cert_pem = read(&self.dir.join(CERT_FILE))?;
        let key_pem = read(&self.dir.join(KEY_FILE))?;
        {
            let cur = self.current.read().unwrap_or_else(PoisonError::into_inner);
            if cur.cert_pem == cert_pem && cur.key_pem == key_pem {
                return Ok(false);
            }
        }
        let key = Arc::new(certified_key(&self.provider, &cert_pem, &key_pem)?);
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(Loaded { cert_pem, key_pem, key });
        Ok(true)
    }

    /// The certificate chain in use (first is the leaf), DER.
    pub fn chain(&self) -> Vec<CertificateDer<'static>> {
        self.current.read().unwrap_or_else(PoisonError::into_inner).key.cert.clone()
    }

    /// Polls the directory every `interval` until the process ends.
    pub fn spawn_reloader(self: &Arc<Self>, interval: Duration, metrics: Arc<Metrics>) -> tokio::task::JoinHandle<()> {
        let this = Arc::clone(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                match this.reload_if_changed() {
                    Ok(true) => {
                        metrics.cert_reloads.inc();
                        tracing::info!(dir = %this.dir.display(), "serving certificate reloaded");
                    }
                    Ok(false) => {}
                    Err(e) => {
                        metrics.cert_reload_errors.inc();
                        tracing::warn!(dir = %this.dir.display(), error = %e, "serving certificate not reloaded; keeping the previous one");
                    }
                }
            }
        })
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.read().unwrap_or_else(PoisonError::into_inner).key.clone())
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
