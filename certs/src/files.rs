//! Writes TLS material into a directory the way the kubelet projects a Secret: the files live
//! in a timestamped directory and `..data` is a symlink swapped atomically, so a reader never
//! sees a certificate without its key.

use std::path::{Path, PathBuf};

use crate::CertError;

/// CA bundle file name.
pub const CA_FILE: &str = "ca.crt";
/// Certificate file name.
pub const CERT_FILE: &str = "tls.crt";
/// Private key file name.
pub const KEY_FILE: &str = "tls.key";

/// The three files of a TLS directory.
#[derive(Clone, Debug)]
pub struct TlsFiles<'a> {
    /// PEM CA bundle (`ca.crt`).
    pub ca_pem: &'a str,
    /// PEM certificate (`tls.crt`).
    pub cert_pem: &'a str,
    /// PEM private key (`tls.key`).
    pub key_pem: &'a str,
}

/// Writes `ca.crt`, `tls.crt` and `tls.key` into `dir` with an atomic `..data` symlink swap.
/// Safe to call again on the same directory: that is a rotation.
pub fn write_tls_dir(dir: &Path, files: &TlsFiles<'_>) -> Result<(), CertError> {
    let io = |path: &Path| {
        let path = path.display().to_string();
        move |source| CertError::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let stamp =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or_default();
    let version = format!("..{stamp}");
    let version_dir = dir.join(&version);
    std::fs::create_dir_all(&version_dir).map_err(io(&version_dir))?;
    for (name, contents) in [(CA_FILE, files.ca_pem), (CERT_FILE, files.cert_pem), (KEY_FILE, files.key_pem)] {
        let path = version_dir.join(name);
        std::fs::write(&path, contents).map_err(io(&path))?;
    }
    // Swap ..data to the new version atomically (rename over the old link).
    let tmp_link = dir.join("..data_tmp");
    let _ = std::fs::remove_file(&tmp_link);
    std::os::unix::fs::symlink(&version, &tmp_link).map_err(io(&tmp_link))?;
    let data = dir.join("..data");
    let previous = std::fs::read_link(&data).ok();
    std::fs::rename(&tmp_link, &data).map_err(io(&data))?;
    for name in [CA_FILE, CERT_FILE, KEY_FILE] {
        let link = dir.join(name);
        if std::fs::symlink_metadata(&link).is_err() {
            std::os::unix::fs::symlink(PathBuf::from("..data").join(name), &link).map_err(io(&link))?;
        }
    }
    if let Some(old) = previous.filter(|old| old.as_os_str() != version.as_str()) {
        let _ = std::fs::remove_dir_all(dir.join(old));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotation_swaps_all_three_files_at_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        write_tls_dir(dir.path(), &TlsFiles { ca_pem: "ca1", cert_pem: "c1", key_pem: "k1" }).expect("write");
        assert_eq!(std::fs::read_to_string(dir.path().join(CERT_FILE)).expect("read"), "c1");
        write_tls_dir(dir.path(), &TlsFiles { ca_pem: "ca2", cert_pem: "c2", key_pem: "k2" }).expect("rotate");
        for (f, want) in [(CA_FILE, "ca2"), (CERT_FILE, "c2"), (KEY_FILE, "k2")] {
            assert_eq!(std::fs::read_to_string(dir.path().join(f)).expect("read"), want);
        }
        // The old version directory is gone; only the current one remains.
        let versions = std::fs::read_dir(dir.path())
            .expect("ls")
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("..1"))
            .count();
        assert_eq!(versions, 1);
    }
}
