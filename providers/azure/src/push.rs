//! What a push of a key or a certificate sends, as upstream's provider does (release 2.9.0):
//!
//! - `key/<name>`: a PEM private key (`PRIVATE KEY`, `RSA PRIVATE KEY`, `EC PRIVATE KEY`) becomes
//!   the JSON Web Key Key Vault imports (RSA, or EC on P-256/P-384/P-521); a value that is not
//!   PEM is a symmetric (`oct`) key, as upstream;
//! - `cert/<name>`: a PKCS#12 (without password), DER or PEM certificate, sent as Key Vault's
//!   import takes it (the value, Base64); its certificate's DER decides whether it changed.
//!
//! DER is read by the few lines below (sequences, integers, octet and bit strings, tagged
//! fields): the structures are fixed, and a parser of its own keeps the provider off another
//! ASN.1 stack.

use keyward_provider_runtime::ProviderError;

/// The key material of a JSON Web Key, before the SDK's model.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Jwk {
    /// `RSA`, `EC` or `oct`.
    pub kty: &'static str,
    /// The curve of an EC key (`P-256`, …).
    pub crv: Option<&'static str>,
    /// Named members (`n`, `e`, `d`, `p`, `q`, `dp`, `dq`, `qi`, `x`, `y`, `k`), unsigned
    /// big-endian.
    pub parts: Vec<(&'static str, Vec<u8>)>,
}

impl Jwk {
    /// A member.
    pub fn part(&self, name: &str) -> Option<&[u8]> {
        self.parts.iter().find(|(n, _)| *n == name).map(|(_, v)| v.as_slice())
    }
}

fn bad(m: impl Into<String>) -> ProviderError {
    ProviderError::InvalidArgument(format!("could not load private key: {}", m.into()))
}

/// One DER element: its tag, its content and what follows it.
fn tlv(der: &[u8]) -> Result<(u8, &[u8], &[u8]), ProviderError> {
    let (&tag, rest) = der.split_first().ok_or_else(|| bad("truncated DER"))?;
    let (&first, rest) = rest.split_first().ok_or_else(|| bad("truncated DER"))?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return Err(bad("bad DER length"));
        }
        (rest[..n].iter().fold(0usize, |acc, b| (acc << 8) | usize::from(*b)), &rest[n..])
    };
    if rest.len() < len {
        return Err(bad("truncated DER"));
    }
    Ok((tag, &rest[..len], &rest[len..]))
}

/// The elements of a SEQUENCE's content.
fn elements(mut content: &[u8]) -> Result<Vec<(u8, &[u8])>, ProviderError> {
    let mut out = Vec::new();
    while !content.is_empty() {
        let (tag, value, rest) = tlv(content)?;
        out.push((tag, value));
        content = rest;
    }
    Ok(out)
}

fn sequence(der: &[u8]) -> Result<Vec<(u8, &[u8])>, ProviderError> {
    match tlv(der)? {
        (0x30, content, _) => elements(content),
        _ => Err(bad("not a DER SEQUENCE")),
    }
}

/// An INTEGER's magnitude without the sign byte.
fn unsigned(v: &[u8]) -> Vec<u8> {
    let start = v.iter().position(|b| *b != 0).unwrap_or(v.len().saturating_sub(1));
    v[start..].to_vec()
}

const RSA_OID: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];
const EC_OID: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];

fn curve(oid: &[u8]) -> Result<&'static str, ProviderError> {
    match oid {
        [0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07] => Ok("P-256"),
        [0x2b, 0x81, 0x04, 0x00, 0x22] => Ok("P-384"),
        [0x2b, 0x81, 0x04, 0x00, 0x23] => Ok("P-521"),
        _ => Err(bad("the EC key's curve is not P-256, P-384 or P-521")),
    }
}

/// PKCS#1 `RSAPrivateKey`.
fn rsa(der: &[u8]) -> Result<Jwk, ProviderError> {
    let items = sequence(der)?;
    if items.len() < 9 || items[..9].iter().any(|(t, _)| *t != 0x02) {
        return Err(bad("not an RSA private key"));
    }
    let names = ["n", "e", "d", "p", "q", "dp", "dq", "qi"];
    let parts = names.iter().zip(&items[1..9]).map(|(n, (_, v))| (*n, unsigned(v))).collect();
    Ok(Jwk { kty: "RSA", crv: None, parts })
}

/// SEC1 `ECPrivateKey`, its curve from the key or from PKCS#8's parameters.
fn ec(der: &[u8], outer_curve: Option<&'static str>) -> Result<Jwk, ProviderError> {
    let items = sequence(der)?;
    let d =
        items.iter().find(|(t, _)| *t == 0x04).map(|(_, v)| v.to_vec()).ok_or_else(|| bad("no EC private scalar"))?;
    let mut crv = outer_curve;
    let mut point = None;
    for (tag, value) in &items {
        match tag {
            0xa0 => crv = Some(curve(tlv(value)?.1)?),
            0xa1 => point = Some(tlv(value)?.1.to_vec()),
            _ => {}
        }
    }
    let crv = crv.ok_or_else(|| bad("the EC key names no curve"))?;
    // A BIT STRING: the unused-bits byte, then 0x04 || x || y.
    let point = point.ok_or_else(|| bad("the EC key carries no public point"))?;
    let xy = match point.as_slice() {
        [0, 4, xy @ ..] if !xy.is_empty() && xy.len() % 2 == 0 => xy,
        _ => return Err(bad("the EC public point is not uncompressed")),
    };
    let (x, y) = xy.split_at(xy.len() / 2);
    Ok(Jwk { kty: "EC", crv: Some(crv), parts: vec![("d", d), ("x", x.to_vec()), ("y", y.to_vec())] })
}

/// PKCS#8 `PrivateKeyInfo` holding an RSA or EC key.
fn pkcs8(der: &[u8]) -> Result<Jwk, ProviderError> {
    let items = sequence(der)?;
    let (Some((0x30, alg)), Some((0x04, key))) = (items.get(1).copied(), items.get(2).copied()) else {
        return Err(bad("not a PKCS#8 private key"));
    };
    let alg = elements(alg)?;
    match alg.first() {
        Some((0x06, oid)) if *oid == RSA_OID => rsa(key),
        Some((0x06, oid)) if *oid == EC_OID => {
            let outer = match alg.get(1) {
                Some((0x06, c)) => Some(curve(c)?),
                _ => None,
            };
            ec(key, outer)
        }
        _ => Err(bad("the PKCS#8 key is neither RSA nor EC")),
    }
}

/// The JSON Web Key of a pushed value, as upstream reads it.
pub fn jwk(value: &[u8]) -> Result<Jwk, ProviderError> {
    let Some(Ok(item)) = rustls_pemfile::read_one(&mut &value[..]).transpose() else {
        // Not PEM: a symmetric key, as upstream.
        return Ok(Jwk { kty: "oct", crv: None, parts: vec![("k", value.to_vec())] });
    };
    match item {
        rustls_pemfile::Item::Pkcs8Key(k) => pkcs8(k.secret_pkcs8_der()),
        rustls_pemfile::Item::Pkcs1Key(k) => rsa(k.secret_pkcs1_der()),
        rustls_pemfile::Item::Sec1Key(k) => ec(k.secret_sec1_der(), None),
        _ => Err(bad("the PEM block is not PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY")),
    }
}

/// The certificate (DER) of a pushed value: PKCS#12 without password, DER, or PEM.
pub fn certificate_der(value: &[u8]) -> Result<Vec<u8>, ProviderError> {
    if let Ok(store) = p12_keystore::KeyStore::from_pkcs12(value, "", p12_keystore::Pkcs12ImportPolicy::Relaxed) {
        for (_, entry) in store.entries() {
            match entry {
                p12_keystore::KeyStoreEntry::PrivateKeyChain(chain) => {
                    if let Some(c) = chain.certs().first() {
                        return Ok(c.as_der().to_vec());
                    }
                }
                p12_keystore::KeyStoreEntry::Certificate(c) => return Ok(c.as_der().to_vec()),
                _ => {}
            }
        }
    }
    if value.first() == Some(&0x30) && tlv(value).is_ok_and(|(t, _, rest)| t == 0x30 && rest.is_empty()) {
        return Ok(value.to_vec());
    }
    for item in rustls_pemfile::read_all(&mut &value[..]).flatten() {
        if let rustls_pemfile::Item::X509Certificate(c) = item {
            return Ok(c.to_vec());
        }
    }
    Err(ProviderError::InvalidArgument(
        "value from secret is not a valid certificate: could not parse it as PKCS#12, DER or PEM".into(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rsa_and_ec_keys_become_jwks() {
        let rsa_key = rcgen::KeyPair::from_pem(&keyward_e2e::stores::azure::rsa_key_pem()).expect("RSA");
        let j = jwk(rsa_key.serialize_pem().as_bytes()).expect("pkcs8 RSA");
        assert_eq!(j.kty, "RSA");
        assert_eq!(j.part("e"), Some(&[1u8, 0, 1][..]));
        assert_eq!(j.part("n").map(<[u8]>::len), Some(256), "2048 bits, no sign byte");
        let ec_key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("EC");
        let j = jwk(ec_key.serialize_pem().as_bytes()).expect("pkcs8 EC");
        assert_eq!((j.kty, j.crv), ("EC", Some("P-256")));
        assert_eq!(j.part("x").map(<[u8]>::len), Some(32));
        assert_eq!(jwk(b"raw bytes").expect("oct").kty, "oct");
        assert!(jwk(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n").is_err());
    }

    #[test]
    fn certificates_are_read_from_pem_and_der() {
        let key = rcgen::KeyPair::generate().expect("key");
        let cert = rcgen::CertificateParams::new(vec!["x".into()]).expect("params").self_signed(&key).expect("cert");
        assert_eq!(certificate_der(cert.pem().as_bytes()).expect("pem"), cert.der().to_vec());
        assert_eq!(certificate_der(cert.der()).expect("der"), cert.der().to_vec());
        assert!(certificate_der(b"nope").is_err());
    }
}
