//! PEM bundles and chain checks: split a `ca.crt` bundle, check that a leaf is signed by one of
//! its CAs, read a certificate's names. Pure functions over PEM text.

use time::OffsetDateTime;
use x509_parser::pem::Pem;
use x509_parser::prelude::{FromDer, GeneralName, ParsedExtension, X509Certificate};

/// The certificates of a PEM bundle, each re-encoded as its own PEM block. Blocks that are not
/// certificates, and garbage between blocks, are skipped.
pub fn split_bundle(bundle: &str) -> Vec<String> {
    Pem::iter_from_buffer(bundle.as_bytes())
        .filter_map(Result::ok)
        .filter(|pem| pem.label == "CERTIFICATE")
        .map(|pem| pem_encode(&pem.contents))
        .collect()
}

/// Joins certificates into one bundle, dropping duplicates and keeping the order.
pub fn join_bundle<'a>(certs: impl IntoIterator<Item = &'a str>) -> String {
    let mut seen: Vec<Vec<u8>> = Vec::new();
    let mut out = String::new();
    for cert in certs {
        for pem in Pem::iter_from_buffer(cert.as_bytes()).filter_map(Result::ok) {
            if pem.label != "CERTIFICATE" || seen.contains(&pem.contents) {
                continue;
            }
            out.push_str(&pem_encode(&pem.contents));
            seen.push(pem.contents);
        }
    }
    out
}

/// True when both PEM texts hold the same certificates in the same order (ignoring formatting).
pub fn same_certificates(a: &str, b: &str) -> bool {
    let der = |s: &str| -> Vec<Vec<u8>> {
        Pem::iter_from_buffer(s.as_bytes()).filter_map(Result::ok).map(|p| p.contents).collect()
    };
    der(a) == der(b)
}

/// True when both PEM texts hold the same certificate authority: the same subject and the same
/// public key, though perhaps not the same certificate. A CA re-issued with its key kept (as
/// cert-manager does with `rotationPolicy: Never`) is one authority: a leaf signed under either
/// certificate verifies against the other, which is what a TLS peer trusting it checks.
pub fn same_authority(a: &str, b: &str) -> bool {
    with_cert(a, |a| {
        with_cert(b, |b| a.subject() == b.subject() && a.public_key().raw == b.public_key().raw).unwrap_or(false)
    })
    .unwrap_or(false)
}

/// True when `leaf_pem` is signed by the CA `ca_pem` (issuer name and signature).
pub fn signed_by(leaf_pem: &str, ca_pem: &str) -> bool {
    with_cert(leaf_pem, |leaf| {
        with_cert(ca_pem, |ca| leaf.issuer() == ca.subject() && leaf.verify_signature(Some(ca.public_key())).is_ok())
            .unwrap_or(false)
    })
    .unwrap_or(false)
}

/// True when `leaf_pem` is valid at `now` and signed by a CA of `bundle` that is valid at `now`:
/// what a TLS peer that trusts `bundle` checks (hostnames aside).
pub fn verifies_against_bundle(leaf_pem: &str, bundle: &str, now: OffsetDateTime) -> bool {
    let valid_now = |pem: &str| with_cert(pem, |c| c.validity().is_valid_at(now.into())).unwrap_or(false);
    valid_now(leaf_pem) && split_bundle(bundle).iter().any(|ca| valid_now(ca) && signed_by(leaf_pem, ca))
}

/// The names a certificate is issued to: its DNS and URI subject alternative names, then its
/// common names (cert-manager issues a client certificate with a common name only).
pub fn certificate_names(der: &[u8]) -> Result<Vec<String>, crate::CertError> {
    let (_, cert) = X509Certificate::from_der(der).map_err(|_| rcgen::Error::CouldNotParseCertificate)?;
    let mut names = Vec::new();
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for n in &san.value.general_names {
            match n {
                GeneralName::DNSName(d) => names.push((*d).to_string()),
                GeneralName::URI(u) => names.push((*u).to_string()),
                _ => {}
            }
        }
    }
    names.extend(cert.subject().iter_common_name().filter_map(|cn| cn.as_str().ok()).map(str::to_string));
    Ok(names)
}

/// The DNS and IP subject alternative names of a certificate, as text.
pub fn subject_alt_names(cert_pem: &str) -> Vec<String> {
    with_cert(cert_pem, |cert| {
        let mut names = Vec::new();
        for ext in cert.extensions() {
            if let ParsedExtension::SubjectAlternativeName(san) = ext.parsed_extension() {
                for name in &san.general_names {
                    match name {
                        GeneralName::DNSName(dns) => names.push((*dns).to_string()),
                        GeneralName::IPAddress(bytes) => {
                            if let Ok(v4) = <[u8; 4]>::try_from(*bytes) {
                                names.push(std::net::Ipv4Addr::from(v4).to_string());
                            } else if let Ok(v6) = <[u8; 16]>::try_from(*bytes) {
                                names.push(std::net::Ipv6Addr::from(v6).to_string());
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        names
    })
    .unwrap_or_default()
}

/// Expiry of the first certificate of a PEM text, if it has one.
pub fn first_not_after(pem: &str) -> Option<OffsetDateTime> {
    with_cert(pem, |c| c.validity().not_after.to_datetime())
}

/// The `notAfter` of a DER certificate (what a TLS library holds of a chain), if it parses.
pub fn der_not_after(der: &[u8]) -> Option<OffsetDateTime> {
    let (_, cert) = X509Certificate::from_der(der).ok()?;
    Some(cert.validity().not_after.to_datetime())
}

fn with_cert<T>(pem: &str, f: impl FnOnce(&X509Certificate<'_>) -> T) -> Option<T> {
    let pem = Pem::iter_from_buffer(pem.as_bytes()).filter_map(Result::ok).find(|p| p.label == "CERTIFICATE")?;
    let cert = pem.parse_x509().ok()?;
    Some(f(&cert))
}

fn pem_encode(der: &[u8]) -> String {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = String::from("-----BEGIN CERTIFICATE-----\n");
    for chunk in b64.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(chunk));
        out.push('\n');
    }
    out.push_str("-----END CERTIFICATE-----\n");
    out
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::{CertificateAuthority, Usage};

    const DAY: Duration = Duration::from_secs(86_400);

    #[test]
    fn bundles_split_join_and_deduplicate() {
        let a = CertificateAuthority::generate("a", DAY).expect("a");
        let b = CertificateAuthority::generate("b", DAY).expect("b");
        let bundle = join_bundle([a.cert_pem(), b.cert_pem(), a.cert_pem()]);
        let parts = split_bundle(&bundle);
        assert_eq!(parts.len(), 2);
        assert!(same_certificates(&parts[0], a.cert_pem()));
        assert!(same_certificates(&parts[1], b.cert_pem()));
        assert!(!same_certificates(&bundle, a.cert_pem()));
        assert!(split_bundle("not a pem").is_empty());
    }

    #[test]
    fn a_ca_reissued_with_its_key_is_the_same_authority() {
        let now = OffsetDateTime::now_utc();
        let first = CertificateAuthority::generate("keyward-ca", DAY).expect("CA");
        let key = rcgen::KeyPair::from_pem(&first.certified_key().key_pem).expect("key");
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        params.distinguished_name = rcgen::DistinguishedName::new();
        params.distinguished_name.push(rcgen::DnType::CommonName, "keyward-ca");
        params.distinguished_name.push(rcgen::DnType::OrganizationName, "Keyward");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Constrained(0));
        let reissued = params.self_signed(&key).expect("re-issued CA").pem();
        assert!(!same_certificates(first.cert_pem(), &reissued), "a new certificate");
        let leaf = first.issue(&["p.keyward.svc"], Usage::Server, DAY).expect("leaf");
        assert!(same_authority(first.cert_pem(), &reissued), "same subject and key");
        assert!(verifies_against_bundle(&leaf.cert_pem, &reissued, now), "one authority verifies the same leaves");
        let other_key = CertificateAuthority::generate("keyward-ca", DAY).expect("another CA");
        assert!(!same_authority(first.cert_pem(), other_key.cert_pem()), "same name, another key");
        let other_name = CertificateAuthority::generate("corp-ca", DAY).expect("corp CA");
        assert!(!same_authority(first.cert_pem(), other_name.cert_pem()));
        assert!(!same_authority(first.cert_pem(), "not a pem"));
    }

    #[test]
    fn a_leaf_verifies_only_against_a_bundle_holding_its_issuer() {
        let now = OffsetDateTime::now_utc();
        let old = CertificateAuthority::generate("old", DAY).expect("old");
        let new = CertificateAuthority::generate("new", DAY).expect("new");
        let leaf = old.issue(&["w.keyward.svc"], Usage::Server, DAY).expect("leaf");
        assert!(signed_by(&leaf.cert_pem, old.cert_pem()));
        assert!(!signed_by(&leaf.cert_pem, new.cert_pem()));
        assert!(verifies_against_bundle(&leaf.cert_pem, &join_bundle([old.cert_pem(), new.cert_pem()]), now));
        assert!(!verifies_against_bundle(&leaf.cert_pem, new.cert_pem(), now));
        // An expired leaf does not verify, even against its own CA.
        assert!(!verifies_against_bundle(&leaf.cert_pem, old.cert_pem(), now + time::Duration::days(2)));
    }

    #[test]
    fn names_are_read_back() {
        let ca = CertificateAuthority::generate("ca", DAY).expect("ca");
        let leaf = ca.issue(&["svc.ns.svc", "127.0.0.1", "::1"], Usage::Server, DAY).expect("leaf");
        assert_eq!(subject_alt_names(&leaf.cert_pem), ["svc.ns.svc", "127.0.0.1", "::1"]);
        assert_eq!(first_not_after(&leaf.cert_pem).map(|t| t.unix_timestamp()), Some(leaf.not_after.unix_timestamp()));
        let der = Pem::iter_from_buffer(leaf.cert_pem.as_bytes()).next().expect("a PEM block").expect("PEM").contents;
        assert_eq!(der_not_after(&der).map(|t| t.unix_timestamp()), Some(leaf.not_after.unix_timestamp()));
        assert_eq!(der_not_after(b"not a certificate"), None);
    }
}
