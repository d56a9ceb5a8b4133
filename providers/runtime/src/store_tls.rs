//! The TLS of the providers' HTTPS clients to their stores, written once: rustls on ring with
//! the safe default protocol versions, trusting a configuration's CA bundle or else the system's
//! roots; and client errors printed with their causes (a TLS library's message is usually in a
//! cause, not in the error a client returns).

use std::error::Error as StdError;
use std::sync::Arc;

use rustls::pki_types::CertificateDer;
use rustls::{ClientConfig, ConfigBuilder, RootCertStore, WantsVerifier};

use crate::ProviderError;

/// A client configuration builder on ring, TLS 1.2 and 1.3.
pub fn builder() -> Result<ConfigBuilder<ClientConfig, WantsVerifier>, ProviderError> {
    ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| ProviderError::Internal(format!("TLS versions: {e}")))
}

/// The roots a store's certificate is checked against: the DER certificates a configuration
/// names (its `field`, for the message when one is unusable), or the system's when it names none.
pub fn roots(ders: Option<Vec<Vec<u8>>>, field: &str) -> Result<RootCertStore, ProviderError> {
    let mut store = RootCertStore::empty();
    match ders {
        Some(ders) => {
            for der in ders {
                store
                    .add(CertificateDer::from(der))
                    .map_err(|e| ProviderError::BadConfig(format!("{field}: unusable certificate: {e}")))?;
            }
        }
        None => {
            store.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
        }
    }
    Ok(store)
}

/// A client configuration trusting [`roots`], without a client certificate.
pub fn client_config(ders: Option<Vec<Vec<u8>>>, field: &str) -> Result<ClientConfig, ProviderError> {
    Ok(builder()?.with_root_certificates(roots(ders, field)?).with_no_client_auth())
}

/// An error and its causes on one line (`a: b: c`), each cause once.
pub fn causes(e: &(dyn StdError + 'static)) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] Inner);

    #[derive(Debug, thiserror::Error)]
    #[error("inner")]
    struct Inner;

    #[test]
    fn causes_are_joined_once() {
        assert_eq!(causes(&Outer(Inner)), "outer: inner");
    }

    #[test]
    fn a_configured_bundle_replaces_the_system_roots_and_a_bad_one_is_named() {
        let err = roots(Some(vec![b"not DER".to_vec()]), "spec.caBundle").unwrap_err();
        assert!(err.to_string().contains("spec.caBundle: unusable certificate"), "{err}");
        assert!(roots(Some(Vec::new()), "spec.caBundle").expect("empty bundle").is_empty());
        assert!(client_config(None, "spec.caBundle").is_ok());
    }
}
