//! Reading a Secret-style TLS directory (see [`write_tls_dir`](crate::write_tls_dir)) and
//! reloading it without restart (feature `reload`).
//!
//! The webhook and the providers mount their Secret as such a directory. The files are polled by
//! content rather than watched: comparing the bytes sees in-place writes as well as the kubelet's
//! atomic `..data` symlink swap, where the paths stay the same and only what they resolve to
//! changes. A changed, usable set of files is built into a new value that the next TLS handshake
//! takes; connections already open keep what they were opened with. A broken or half-written set
//! is refused and the last good value stays in use.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::files::{CA_FILE, CERT_FILE, KEY_FILE};

/// TLS material that cannot be used, naming the file that is wrong.
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
        /// The file name within the directory.
        file: &'static str,
        /// What is wrong.
        message: String,
    },
    /// rustls refused the material.
    #[error("TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
}

fn invalid(file: &'static str, message: impl Into<String>) -> TlsError {
    TlsError::Invalid { file, message: message.into() }
}

/// The certificate chain of `tls.crt` (leaf first). An empty file is refused here, because
/// rustls would only notice at the first handshake.
pub fn certificate_chain(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let chain = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(CERT_FILE, format!("not PEM certificates: {e}")))?;
    if chain.is_empty() {
        return Err(invalid(CERT_FILE, "no certificate found"));
    }
    Ok(chain)
}

/// The private key of `tls.key` (PKCS#8, PKCS#1 or SEC1).
pub fn private_key(pem: &[u8]) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_slice(pem).map_err(|e| invalid(KEY_FILE, format!("no private key: {e}")))
}

/// The CA certificates of `ca.crt`, as the roots peers are verified against. An empty bundle is
/// refused: it would make every peer fail verification.
pub fn ca_roots(pem: &[u8]) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem) {
        let cert = cert.map_err(|e| invalid(CA_FILE, format!("not PEM certificates: {e}")))?;
        roots.add(cert).map_err(|e| invalid(CA_FILE, format!("not a usable CA certificate: {e}")))?;
    }
    if roots.is_empty() {
        return Err(invalid(CA_FILE, "no CA certificate found"));
    }
    Ok(roots)
}

type Build<T, const N: usize> = dyn Fn(&[Vec<u8>; N]) -> Result<T, TlsError> + Send + Sync;

struct Inner<T, const N: usize> {
    dir: PathBuf,
    files: [&'static str; N],
    build: Box<Build<T, N>>,
    /// The bytes last read, usable or not: a broken set is reported once, not on every poll.
    /// Held for the whole reload so two reloads never interleave.
    seen: Mutex<[Vec<u8>; N]>,
    current: RwLock<Arc<T>>,
}

/// A value built from `N` files of a TLS directory, rebuilt when their contents change.
///
/// Cloning is cheap and shares the directory state, so a poller and the TLS acceptor can each
/// hold one.
pub struct Reloading<T, const N: usize> {
    inner: Arc<Inner<T, N>>,
}

impl<T, const N: usize> Clone for Reloading<T, N> {
    fn clone(&self) -> Self {
        Reloading { inner: Arc::clone(&self.inner) }
    }
}

impl<T, const N: usize> std::fmt::Debug for Reloading<T, N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reloading").field("dir", &self.inner.dir).field("files", &self.inner.files).finish()
    }
}

impl<T, const N: usize> Reloading<T, N> {
    /// Reads `files` from `dir` and builds the first value with `build`, which gets their
    /// contents in the order of `files`. Fails if a file is missing or `build` refuses it: a
    /// process should not start without usable material.
    pub fn load(
        dir: impl Into<PathBuf>,
        files: [&'static str; N],
        build: impl Fn(&[Vec<u8>; N]) -> Result<T, TlsError> + Send + Sync + 'static,
    ) -> Result<Self, TlsError> {
        let dir = dir.into();
        let contents = read_files(&dir, &files)?;
        let current = build(&contents)?;
        Ok(Reloading {
            inner: Arc::new(Inner {
                dir,
                files,
                build: Box::new(build),
                seen: Mutex::new(contents),
                current: RwLock::new(Arc::new(current)),
            }),
        })
    }

    /// The directory read.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// The last good value, for the next handshake.
    pub fn current(&self) -> Arc<T> {
        Arc::clone(&self.inner.current.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Re-reads the files (following the `..data` symlink) and rebuilds the value if their bytes
    /// changed. Returns whether a new value is in use. On error the previous value stays; a
    /// changed but unusable set is returned as an error once and then counts as unchanged until
    /// the files change again. A file that cannot be read is an error on every call.
    pub fn reload_if_changed(&self) -> Result<bool, TlsError> {
        let contents = read_files(&self.inner.dir, &self.inner.files)?;
        let mut seen = self.inner.seen.lock().unwrap_or_else(PoisonError::into_inner);
        if *seen == contents {
            return Ok(false);
        }
        let built = (self.inner.build)(&contents);
        *seen = contents;
        let value = Arc::new(built?);
        *self.inner.current.write().unwrap_or_else(PoisonError::into_inner) = value;
        Ok(true)
    }
}

impl<T: Send + Sync + 'static, const N: usize> Reloading<T, N> {
    /// Polls the directory every `interval` until the task is aborted or the runtime stops.
    /// Each outcome is logged here, so every reader reports rotations alike, and then handed to
    /// `on_outcome` (for metrics; `Ok(false)` is an unchanged poll).
    pub fn spawn_watch(
        &self,
        interval: Duration,
        mut on_outcome: impl FnMut(&Result<bool, TlsError>) + Send + 'static,
    ) -> tokio::task::JoinHandle<()> {
        let this = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let outcome = this.reload_if_changed();
                match &outcome {
                    Ok(true) => tracing::info!(dir = %this.dir().display(), "reloaded TLS certificates"),
                    Ok(false) => {}
                    Err(e) => tracing::warn!(
                        dir = %this.dir().display(),
                        error = %e,
                        "TLS material changed but cannot be used; keeping the previous certificates"
                    ),
                }
                on_outcome(&outcome);
            }
        })
    }
}

fn read_files<const N: usize>(dir: &Path, files: &[&'static str; N]) -> Result<[Vec<u8>; N], TlsError> {
    let mut contents: [Vec<u8>; N] = std::array::from_fn(|_| Vec::new());
    for (name, slot) in files.iter().zip(contents.iter_mut()) {
        let path = dir.join(name);
        *slot = std::fs::read(&path).map_err(|source| TlsError::Read { path, source })?;
    }
    Ok(contents)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CertificateAuthority, CertifiedKey, TlsFiles, Usage, write_tls_dir};

    const DAY: Duration = Duration::from_secs(86_400);

    /// What the tests build from a directory: the CA count, the leaf, and the key.
    type Material = (usize, CertificateDer<'static>, PrivateKeyDer<'static>);

    fn material([ca, cert, key]: &[Vec<u8>; 3]) -> Result<Material, TlsError> {
        let roots = ca_roots(ca)?;
        let chain = certificate_chain(cert)?;
        Ok((roots.len(), chain[0].clone(), private_key(key)?))
    }

    fn load(dir: &Path) -> Result<Reloading<Material, 3>, TlsError> {
        Reloading::load(dir, [CA_FILE, CERT_FILE, KEY_FILE], material)
    }

    fn write(dir: &Path, ca: &CertificateAuthority, leaf: &CertifiedKey, key_pem: &str) {
        write_tls_dir(dir, &TlsFiles { ca_pem: ca.cert_pem(), cert_pem: &leaf.cert_pem, key_pem }).expect("write");
    }

    fn der(cert_pem: &str) -> CertificateDer<'static> {
        CertificateDer::from_pem_slice(cert_pem.as_bytes()).expect("pem")
    }

    #[test]
    fn reloads_a_rotation_and_keeps_the_last_good_material() {
        let ca = CertificateAuthority::generate("test-ca", DAY).expect("ca");
        let one = ca.issue(&["localhost"], Usage::Server, DAY).expect("leaf");
        let dir = tempfile::tempdir().expect("dir");
        write(dir.path(), &ca, &one, &one.key_pem);
        let tls = load(dir.path()).expect("load");
        let first = tls.current();
        assert_eq!(first.0, 1);
        assert_eq!(first.1, der(&one.cert_pem));
        assert!(!tls.reload_if_changed().expect("poll"), "nothing changed");
        assert!(Arc::ptr_eq(&first, &tls.current()), "an unchanged poll keeps the same value");

        // A rotation through the ..data symlink swap is picked up.
        let two = ca.issue(&["localhost"], Usage::Server, DAY).expect("leaf");
        write(dir.path(), &ca, &two, &two.key_pem);
        assert!(tls.reload_if_changed().expect("poll"), "rotation seen");
        let second = tls.current();
        assert_eq!(second.1, der(&two.cert_pem));
        assert_ne!(second.1, first.1);

        // A broken key is refused, naming the file, and the previous material stays.
        write(dir.path(), &ca, &two, "not a key");
        let err = tls.reload_if_changed().expect_err("broken key");
        assert!(matches!(err, TlsError::Invalid { file: KEY_FILE, .. }), "{err:?}");
        assert!(err.to_string().starts_with("tls.key: no private key"), "{err}");
        assert!(Arc::ptr_eq(&second, &tls.current()));
        // ...and reported once, not on every poll.
        assert!(!tls.reload_if_changed().expect("poll"));
        assert!(Arc::ptr_eq(&second, &tls.current()));

        // Fixing the files is a change again.
        let three = ca.issue(&["localhost"], Usage::Server, DAY).expect("leaf");
        write(dir.path(), &ca, &three, &three.key_pem);
        assert!(tls.reload_if_changed().expect("poll"));
        assert_eq!(tls.current().1, der(&three.cert_pem));
    }

    #[test]
    fn a_file_that_cannot_be_read_is_reported_on_every_poll() {
        let ca = CertificateAuthority::generate("test-ca", DAY).expect("ca");
        let leaf = ca.issue(&["localhost"], Usage::Server, DAY).expect("leaf");
        let dir = tempfile::tempdir().expect("dir");
        write(dir.path(), &ca, &leaf, &leaf.key_pem);
        let tls = load(dir.path()).expect("load");
        let before = tls.current();
        std::fs::remove_file(dir.path().join("..data").join(CERT_FILE)).expect("remove");
        for _ in 0..2 {
            let err = tls.reload_if_changed().expect_err("missing file");
            assert!(matches!(&err, TlsError::Read { path, .. } if path == &dir.path().join(CERT_FILE)), "{err:?}");
            assert!(err.to_string().starts_with(&format!("reading {}: ", dir.path().join(CERT_FILE).display())));
        }
        assert!(Arc::ptr_eq(&before, &tls.current()));
    }

    #[test]
    fn refuses_missing_or_empty_material() {
        let dir = tempfile::tempdir().expect("dir");
        let err = load(dir.path()).expect_err("empty directory");
        assert!(matches!(&err, TlsError::Read { path, .. } if path == &dir.path().join(CA_FILE)), "{err:?}");

        assert_eq!(ca_roots(b"").expect_err("empty CA").to_string(), "ca.crt: no CA certificate found");
        assert_eq!(certificate_chain(b"").expect_err("empty chain").to_string(), "tls.crt: no certificate found");
        let err = private_key(b"").expect_err("empty key");
        assert!(matches!(err, TlsError::Invalid { file: KEY_FILE, .. }), "{err:?}");
        assert!(err.to_string().starts_with("tls.key: no private key"), "{err}");

        // Empty files in place are refused the same way when loading.
        write_tls_dir(dir.path(), &TlsFiles { ca_pem: "", cert_pem: "", key_pem: "" }).expect("write");
        assert_eq!(load(dir.path()).expect_err("empty files").to_string(), "ca.crt: no CA certificate found");
    }

    #[test]
    fn pem_helpers_read_a_chain_a_key_and_several_roots() {
        let ca = CertificateAuthority::generate("test-ca", DAY).expect("ca");
        let other = CertificateAuthority::generate("other-ca", DAY).expect("ca");
        let leaf = ca.issue(&["localhost"], Usage::Server, DAY).expect("leaf");
        let chain = certificate_chain(format!("{}{}", leaf.cert_pem, ca.cert_pem()).as_bytes()).expect("chain");
        assert_eq!(chain, vec![der(&leaf.cert_pem), der(ca.cert_pem())]);
        assert!(matches!(private_key(leaf.key_pem.as_bytes()).expect("key"), PrivateKeyDer::Pkcs8(_)));
        assert_eq!(ca_roots(format!("{}{}", ca.cert_pem(), other.cert_pem()).as_bytes()).expect("roots").len(), 2);
    }

    #[tokio::test]
    async fn the_watch_reports_each_outcome_after_logging_it() {
        let ca = CertificateAuthority::generate("test-ca", DAY).expect("ca");
        let one = ca.issue(&["localhost"], Usage::Server, DAY).expect("leaf");
        let dir = tempfile::tempdir().expect("dir");
        write(dir.path(), &ca, &one, &one.key_pem);
        let tls = load(dir.path()).expect("load");
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let watch = tls.spawn_watch(Duration::from_millis(10), move |outcome| {
            let _ = tx.send(outcome.as_ref().map_err(ToString::to_string).copied());
        });
        /// The next poll that did more than find the files unchanged.
        async fn next_change(
            rx: &mut tokio::sync::mpsc::UnboundedReceiver<Result<bool, String>>,
        ) -> Result<bool, String> {
            loop {
                match tokio::time::timeout(Duration::from_secs(5), rx.recv()).await.expect("polled").expect("open") {
                    Ok(false) => continue,
                    other => return other,
                }
            }
        }

        let two = ca.issue(&["localhost"], Usage::Server, DAY).expect("leaf");
        write(dir.path(), &ca, &two, &two.key_pem);
        assert_eq!(next_change(&mut rx).await, Ok(true));
        assert_eq!(tls.current().1, der(&two.cert_pem));

        write(dir.path(), &ca, &two, "not a key");
        let err = next_change(&mut rx).await.expect_err("broken key");
        assert!(err.starts_with("tls.key: no private key"), "{err}");
        assert_eq!(tls.current().1, der(&two.cert_pem));
        watch.abort();
    }
}
