//! The TLS material the reconciler presents to a provider, read from the Secret
//! `keyward-provider-tls`, and its fingerprint (cache and pool keys change when it rotates).

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use sha2::{Digest, Sha256};

/// Name of the Secret holding the provider client TLS material.
pub const TLS_SECRET_NAME: &str = "keyward-provider-tls";
/// CA of the provider's server certificate.
pub const CA_KEY: &str = "ca.crt";
/// The reconciler's client certificate.
pub const CERT_KEY: &str = "tls.crt";
/// The client certificate's private key.
pub const KEY_KEY: &str = "tls.key";

/// PEM material for one mTLS connection.
#[derive(Clone, PartialEq, Eq)]
pub struct TlsMaterial {
    /// CA bundle that signs the provider's server certificate.
    pub ca_pem: Vec<u8>,
    /// Client certificate.
    pub cert_pem: Vec<u8>,
    /// Client private key.
    pub key_pem: Vec<u8>,
    /// SHA-256 over the three parts, hex encoded.
    pub fingerprint: String,
}

impl std::fmt::Debug for TlsMaterial {
    // Never print the key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsMaterial").field("fingerprint", &self.fingerprint).finish()
    }
}

impl TlsMaterial {
    /// Builds material from PEM parts.
    pub fn new(ca_pem: Vec<u8>, cert_pem: Vec<u8>, key_pem: Vec<u8>) -> Self {
        let mut h = Sha256::new();
        for part in [&ca_pem, &cert_pem, &key_pem] {
            // Length prefixes keep ("ab","c") and ("a","bc") apart.
            h.update((part.len() as u64).to_be_bytes());
            h.update(part);
        }
        let fingerprint = hex::encode(h.finalize());
        TlsMaterial { ca_pem, cert_pem, key_pem, fingerprint }
    }

    /// Reads the three keys of a Secret's data; the error names what is missing.
    pub fn from_secret_data(namespace: &str, data: Option<&BTreeMap<String, ByteString>>) -> Result<Self, String> {
        let get = |key: &str| {
            data.and_then(|d| d.get(key))
                .map(|v| v.0.clone())
                .filter(|v| !v.is_empty())
                .ok_or_else(|| format!("Secret {namespace}/{TLS_SECRET_NAME} has no {key:?} key"))
        };
        Ok(TlsMaterial::new(get(CA_KEY)?, get(CERT_KEY)?, get(KEY_KEY)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, ByteString> {
        pairs.iter().map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec()))).collect()
    }

    #[test]
    fn fingerprint_follows_every_part() {
        let a = TlsMaterial::new(b"ca".to_vec(), b"cert".to_vec(), b"key".to_vec());
        let same = TlsMaterial::new(b"ca".to_vec(), b"cert".to_vec(), b"key".to_vec());
        assert_eq!(a.fingerprint, same.fingerprint);
        for other in [
            TlsMaterial::new(b"ca2".to_vec(), b"cert".to_vec(), b"key".to_vec()),
            TlsMaterial::new(b"ca".to_vec(), b"cert2".to_vec(), b"key".to_vec()),
            TlsMaterial::new(b"ca".to_vec(), b"cert".to_vec(), b"key2".to_vec()),
            TlsMaterial::new(b"cac".to_vec(), b"ert".to_vec(), b"key".to_vec()),
        ] {
            assert_ne!(a.fingerprint, other.fingerprint);
        }
    }

    #[test]
    fn missing_key_is_named() {
        let err =
            TlsMaterial::from_secret_data("keyward", Some(&data(&[("ca.crt", "x"), ("tls.crt", "y")]))).unwrap_err();
        assert_eq!(err, "Secret keyward/keyward-provider-tls has no \"tls.key\" key");
        assert!(TlsMaterial::from_secret_data("keyward", None).is_err());
        let ok = TlsMaterial::from_secret_data(
            "keyward",
            Some(&data(&[("ca.crt", "x"), ("tls.crt", "y"), ("tls.key", "z")])),
        )
        .unwrap();
        assert_eq!(ok.key_pem, b"z");
        assert!(!format!("{ok:?}").contains('z'), "Debug must not print the key");
    }
}
