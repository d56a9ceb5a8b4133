//! Certificate material for Keyward: a CA and the leaf certificates it issues (webhook serving
//! certificates, provider server certificates, reconciler client certificates), and writing
//! them the way Kubernetes mounts a Secret, so readers can reload them without restart
//! (module `reload`, feature `reload`).
//!
//! The self-managed mode of the chart runs [`manager::reconcile`] in a leader-elected loop (the
//! `keyward-certs run` binary): it keeps a CA Secret and the leaf Secrets current, rotates them
//! before they expire ([`plan`] decides when), and keeps the `caBundle` of Keyward's webhook
//! configurations in step.

pub mod bundle;
mod files;
pub mod manager;
#[cfg(feature = "cli")]
pub mod metrics;
pub mod plan;
#[cfg(feature = "reload")]
pub mod reload;

use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use time::OffsetDateTime;

pub use bundle::certificate_names;
pub use files::{CA_FILE, CERT_FILE, KEY_FILE, TlsFiles, write_tls_dir};

/// Anything that goes wrong while issuing or storing certificates.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// rcgen refused the parameters or the key.
    #[error("certificate generation failed: {0}")]
    Generate(#[from] rcgen::Error),
    /// Writing the files failed.
    #[error("writing {path}: {source}")]
    Io {
        /// The file or directory.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// A certificate and its private key, PEM encoded.
#[derive(Clone, Debug)]
pub struct CertifiedKey {
    /// PEM certificate.
    pub cert_pem: String,
    /// PEM private key (PKCS#8).
    pub key_pem: String,
    /// When the certificate stops being valid.
    pub not_after: OffsetDateTime,
}

/// A certificate authority that issues Keyward's leaf certificates.
pub struct CertificateAuthority {
    issued: CertifiedKey,
    issuer: Issuer<'static, KeyPair>,
}

/// What a leaf certificate is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Usage {
    /// TLS server (webhook, provider).
    Server,
    /// TLS client (the reconciler calling providers).
    Client,
}

impl CertificateAuthority {
    /// Creates a new self-signed CA valid for `validity` from now.
    pub fn generate(common_name: &str, validity: Duration) -> Result<Self, CertError> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name = name(common_name);
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages =
            vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        let not_after = set_validity(&mut params, validity);
        let key = KeyPair::generate()?;
        let cert = params.self_signed(&key)?;
        let issued = CertifiedKey { cert_pem: cert.pem(), key_pem: key.serialize_pem(), not_after };
        Ok(CertificateAuthority { issued, issuer: Issuer::new(params, key) })
    }

    /// Loads an existing CA from its PEM certificate and key.
    pub fn from_pem(cert_pem: &str, key_pem: &str) -> Result<Self, CertError> {
        let key = KeyPair::from_pem(key_pem)?;
        let issuer = Issuer::from_ca_cert_pem(cert_pem, key)?;
        let not_after = not_after(cert_pem)?;
        Ok(CertificateAuthority {
            issued: CertifiedKey { cert_pem: cert_pem.to_string(), key_pem: key_pem.to_string(), not_after },
            issuer,
        })
    }

    /// The CA's own certificate and key.
    pub fn certified_key(&self) -> &CertifiedKey {
        &self.issued
    }

    /// The CA certificate in PEM, as put into `ca.crt` and `caBundle`.
    pub fn cert_pem(&self) -> &str {
        &self.issued.cert_pem
    }

    /// Issues a leaf certificate. `dns_names` become DNS SANs, except entries that parse as IP
    /// addresses, which become IP SANs. The first name is also the common name.
    pub fn issue(&self, dns_names: &[&str], usage: Usage, validity: Duration) -> Result<CertifiedKey, CertError> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name = name(dns_names.first().copied().unwrap_or("keyward"));
        params.subject_alt_names = dns_names
            .iter()
            .map(|n| match n.parse::<std::net::IpAddr>() {
                Ok(ip) => Ok(SanType::IpAddress(ip)),
                Err(_) => Ok(SanType::DnsName((*n).try_into()?)),
            })
            .collect::<Result<_, rcgen::Error>>()?;
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        params.extended_key_usages = vec![match usage {
            Usage::Server => ExtendedKeyUsagePurpose::ServerAuth,
            Usage::Client => ExtendedKeyUsagePurpose::ClientAuth,
        }];
        params.use_authority_key_identifier_extension = true;
        let not_after = set_validity(&mut params, validity);
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(CertifiedKey { cert_pem: cert.pem(), key_pem: key.serialize_pem(), not_after })
    }
}

/// Expiry of a PEM certificate.
pub fn not_after(cert_pem: &str) -> Result<OffsetDateTime, CertError> {
    use x509_parser::prelude::{FromDer, X509Certificate, parse_x509_pem};
    let (_, pem) = parse_x509_pem(cert_pem.as_bytes()).map_err(|_| rcgen::Error::CouldNotParseCertificate)?;
    let (_, cert) = X509Certificate::from_der(&pem.contents).map_err(|_| rcgen::Error::CouldNotParseCertificate)?;
    Ok(cert.validity().not_after.to_datetime())
}

fn name(common_name: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    dn.push(DnType::OrganizationName, "Keyward");
    dn
}

/// Valid from a minute ago (clock skew) for `validity`; returns the expiry.
fn set_validity(params: &mut CertificateParams, validity: Duration) -> OffsetDateTime {
    let now = OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::minutes(1);
    params.not_after = now + validity;
    params.not_after
}

#[cfg(test)]
mod tests {
    use super::*;
    use x509_parser::prelude::*;

    const DAY: Duration = Duration::from_secs(86_400);

    fn parse(pem: &str) -> Vec<u8> {
        let (_, p) = parse_x509_pem(pem.as_bytes()).expect("pem");
        p.contents
    }

    #[test]
    fn issues_server_and_client_leaves_signed_by_the_ca() {
        let ca = CertificateAuthority::generate("keyward-ca", DAY).expect("ca");
        let server = ca.issue(&["webhook.keyward.svc", "127.0.0.1"], Usage::Server, DAY).expect("leaf");
        let ca_der = parse(ca.cert_pem());
        let (_, ca_cert) = X509Certificate::from_der(&ca_der).expect("ca der");
        assert!(ca_cert.is_ca());
        let der = parse(&server.cert_pem);
        let (_, cert) = X509Certificate::from_der(&der).expect("leaf der");
        assert!(!cert.is_ca());
        cert.verify_signature(Some(ca_cert.public_key())).expect("signed by the CA");
        let sans = cert.subject_alternative_name().expect("ext").expect("sans").value.general_names.clone();
        assert!(sans.iter().any(|n| matches!(n, GeneralName::DNSName("webhook.keyward.svc"))));
        assert!(sans.iter().any(|n| matches!(n, GeneralName::IPAddress([127, 0, 0, 1]))));
        let eku = cert.extended_key_usage().expect("ext").expect("eku").value.clone();
        assert!(eku.server_auth && !eku.client_auth);

        let client = ca.issue(&["keyward-reconciler"], Usage::Client, DAY).expect("client");
        assert_eq!(
            certificate_names(&parse(&client.cert_pem)).expect("names"),
            ["keyward-reconciler", "keyward-reconciler"],
            "DNS name, then common name"
        );
        assert!(certificate_names(b"not DER").is_err());
        let der = parse(&client.cert_pem);
        let (_, cert) = X509Certificate::from_der(&der).expect("client der");
        let eku = cert.extended_key_usage().expect("ext").expect("eku").value.clone();
        assert!(eku.client_auth && !eku.server_auth);
    }

    #[test]
    fn a_reloaded_ca_keeps_issuing_under_the_same_identity() {
        let ca = CertificateAuthority::generate("keyward-ca", DAY).expect("ca");
        let again = CertificateAuthority::from_pem(ca.cert_pem(), &ca.certified_key().key_pem).expect("reload");
        let leaf = again.issue(&["p.keyward.svc"], Usage::Server, DAY).expect("leaf");
        let ca_der = parse(ca.cert_pem());
        let (_, ca_cert) = X509Certificate::from_der(&ca_der).expect("ca der");
        let der = parse(&leaf.cert_pem);
        let (_, cert) = X509Certificate::from_der(&der).expect("leaf der");
        cert.verify_signature(Some(ca_cert.public_key())).expect("signed by the original CA");
        assert_eq!(again.certified_key().not_after.unix_timestamp(), ca.certified_key().not_after.unix_timestamp());
    }
}
