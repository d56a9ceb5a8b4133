//! mTLS material read from a Secret-style directory (`ca.crt`, `tls.crt`, `tls.key`) and
//! reloaded without restart.
//!
//! The files are polled every second by content: this sees in-place writes as well as the
//! kubelet's atomic `..data` symlink swap (the paths stay the same, what they resolve to
//! changes). Each TLS handshake takes the configuration current at that moment, so a rotated
//! server certificate or client CA applies to the next connection; established connections
//! keep the material they were opened with. A broken or half-written set of files is logged
//! and ignored: the last good configuration stays in use.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};

/// CA bundle that signs the client certificates the server accepts.
pub const CA_FILE: &str = "ca.crt";
/// The server's certificate chain.
pub const CERT_FILE: &str = "tls.crt";
/// The server's private key.
pub const KEY_FILE: &str = "tls.key";

/// TLS material that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file cannot be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A file does not hold what it should.
    #[error("{file}: {message}")]
    Invalid {
        /// The file name.
        file: &'static str,
        /// What is wrong.
        message: String,
    },
    /// rustls refused the material.
    #[error("TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
}

/// The raw bytes of the three files, compared to detect a change.
#[derive(Clone, PartialEq, Eq)]
struct Snapshot {
    ca: Vec<u8>,
    cert: Vec<u8>,
    key: Vec<u8>,
}

fn read_snapshot(dir: &Path) -> Result<Snapshot, TlsError> {
    let read = |name: &str| {
        let path = dir.join(name);
        std::fs::read(&path).map_err(|source| TlsError::Read { path, source })
    };
    Ok(Snapshot { ca: read(CA_FILE)?, cert: read(CERT_FILE)?, key: read(KEY_FILE)? })
}

fn invalid(file: &'static str, message: impl Into<String>) -> TlsError {
    TlsError::Invalid { file, message: message.into() }
}

/// Builds the server configuration: TLS 1.2 and 1.3 with the ring provider, client
/// certificate required and verified against `ca`, HTTP/2 by ALPN.
pub fn server_config(ca_pem: &[u8], cert_pem: &[u8], key_pem: &[u8]) -> Result<ServerConfig, TlsError> {
    let crypto = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem) {
        let cert = cert.map_err(|e| invalid(CA_FILE, format!("not PEM certificates: {e}")))?;
        roots.add(cert).map_err(|e| invalid(CA_FILE, format!("not a usable CA certificate: {e}")))?;
    }
    if roots.is_empty() {
        return Err(invalid(CA_FILE, "no CA certificate found"));
    }
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), crypto.clone())
        .build()
        .map_err(|e| invalid(CA_FILE, format!("client verifier: {e}")))?;
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(CERT_FILE, format!("not PEM certificates: {e}")))?;
    if chain.is_empty() {
        return Err(invalid(CERT_FILE, "no certificate found"));
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| invalid(KEY_FILE, format!("no private key: {e}")))?;
    let mut config = ServerConfig::builder_with_provider(crypto)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(config)
}

/// The current server configuration, swapped when the files change.
#[derive(Clone)]
pub struct ReloadingConfig {
    dir: PathBuf,
    current: Arc<RwLock<Arc<ServerConfig>>>,
    seen: Arc<RwLock<Snapshot>>,
}

impl ReloadingConfig {
    /// Loads the directory; fails if the material is missing or unusable.
    pub fn load(dir: &Path) -> Result<Self, TlsError> {
        let snap = read_snapshot(dir)?;
        let config = server_config(&snap.ca, &snap.cert, &snap.key)?;
        Ok(ReloadingConfig {
            dir: dir.to_path_buf(),
            current: Arc::new(RwLock::new(Arc::new(config))),
            seen: Arc::new(RwLock::new(snap)),
        })
    }

    /// The configuration for the next handshake.
    pub fn current(&self) -> Arc<ServerConfig> {
        match self.current.read() {
            Ok(c) => c.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Re-reads the files; swaps the configuration if they changed and are usable.
    /// Returns whether a new configuration was installed.
    pub fn reload_if_changed(&self) -> Result<bool, TlsError> {
        let snap = read_snapshot(&self.dir)?;
        let unchanged = match self.seen.read() {
            Ok(seen) => *seen == snap,
            Err(p) => *p.into_inner() == snap,
        };
        if unchanged {
            return Ok(false);
        }
        // Remember what was seen even if it is unusable, so a broken file is reported once.
        match self.seen.write() {
            Ok(mut seen) => *seen = snap.clone(),
            Err(p) => *p.into_inner() = snap.clone(),
        }
        let config = Arc::new(server_config(&snap.ca, &snap.cert, &snap.key)?);
        match self.current.write() {
            Ok(mut c) => *c = config,
            Err(p) => *p.into_inner() = config,
        }
        Ok(true)
    }

    /// Polls the directory every `interval` until the task is dropped.
    pub fn spawn_watch(&self, interval: Duration) -> tokio::task::JoinHandle<()> {
        let this = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                match this.reload_if_changed() {
                    Ok(true) => tracing::info!(dir = %this.dir.display(), "reloaded TLS certificates"),
                    Ok(false) => {}
                    Err(e) => tracing::warn!(
                        dir = %this.dir.display(),
                        error = %e,
                        "TLS material changed but cannot be used; keeping the previous certificates"
                    ),
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keyward_certs::{CertificateAuthority, TlsFiles, Usage, write_tls_dir};

    const DAY: Duration = Duration::from_secs(86_400);

    #[test]
    fn loads_reloads_and_keeps_last_good_material() {
        crate::install_crypto_provider();
        let ca = CertificateAuthority::generate("test-ca", DAY).expect("ca");
        let one = ca.issue(&["localhost"], Usage::Server, DAY).expect("leaf");
        let dir = tempfile::tempdir().expect("dir");
        write_tls_dir(dir.path(), &TlsFiles { ca_pem: ca.cert_pem(), cert_pem: &one.cert_pem, key_pem: &one.key_pem })
            .expect("write");
        let cfg = ReloadingConfig::load(dir.path()).expect("load");
        let first = cfg.current();
        assert!(!cfg.reload_if_changed().expect("poll"), "nothing changed");
        assert!(Arc::ptr_eq(&first, &cfg.current()));

        // A rotation through the ..data symlink swap is picked up.
        let two = ca.issue(&["localhost"], Usage::Server, DAY).expect("leaf");
        write_tls_dir(dir.path(), &TlsFiles { ca_pem: ca.cert_pem(), cert_pem: &two.cert_pem, key_pem: &two.key_pem })
            .expect("rotate");
        assert!(cfg.reload_if_changed().expect("poll"), "rotation seen");
        let second = cfg.current();
        assert!(!Arc::ptr_eq(&first, &second));

        // A broken key is refused and the previous configuration stays.
        write_tls_dir(dir.path(), &TlsFiles { ca_pem: ca.cert_pem(), cert_pem: &two.cert_pem, key_pem: "not a key" })
            .expect("break");
        let err = cfg.reload_if_changed().unwrap_err();
        assert!(err.to_string().contains(KEY_FILE), "{err}");
        assert!(Arc::ptr_eq(&second, &cfg.current()));
        // ...and reported once, not on every poll.
        assert!(!cfg.reload_if_changed().expect("poll"));
    }

    #[test]
    fn refuses_missing_or_empty_material() {
        let dir = tempfile::tempdir().expect("dir");
        assert!(matches!(ReloadingConfig::load(dir.path()), Err(TlsError::Read { .. })));
        assert!(matches!(server_config(b"", b"", b""), Err(TlsError::Invalid { file: CA_FILE, .. })));
    }
}
