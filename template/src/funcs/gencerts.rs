//! Sprig's key and certificate generation: `genPrivateKey`, `genCA`, `genSelfSignedCert`,
//! `genSignedCert` (each also `…WithKey`, taking a PEM private key) and `buildCustomCert`.
//! Certificates are made as Sprig makes them: a random 128-bit serial, the common name as the
//! subject, valid from now for the given days, key usages digitalSignature and
//! keyEncipherment (and keyCertSign for a CA), extended usages serverAuth and clientAuth.
//! New keys are RSA-2048 for certificates, RSA-4096 for `genPrivateKey "rsa"`. Every call
//! makes new keys and serials: a template calling one renders differently every time.
//!
//! A certificate is a dict `{Cert, Key}` of PEM text (Sprig's struct has the same two fields).

use std::collections::BTreeMap;
use std::net::IpAddr;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    SanType, SerialNumber,
};
use rsa::pkcs1::EncodeRsaPrivateKey;
use rsa::pkcs8::EncodePrivateKey;
use rustls_pki_types::{CertificateDer, PrivatePkcs8KeyDer};

use super::crypto::pem_encode;
use super::{FnCtx, FnError, FnResult, Func, int, list, s, want};
use crate::value::Value;

pub const FUNCS: &[(&str, Func)] = &[
    ("genPrivateKey", gen_private_key),
    ("genCA", gen_ca),
    ("genCAWithKey", gen_ca_with_key),
    ("genSelfSignedCert", gen_self_signed),
    ("genSelfSignedCertWithKey", gen_self_signed_with_key),
    ("genSignedCert", gen_signed),
    ("genSignedCertWithKey", gen_signed_with_key),
    ("buildCustomCert", build_custom_cert),
];

/// The functions that make keys or serials: none can be repeated.
pub const NAMES: &[&str] = &[
    "genPrivateKey",
    "genCA",
    "genCAWithKey",
    "genSelfSignedCert",
    "genSelfSignedCertWithKey",
    "genSignedCert",
    "genSignedCertWithKey",
];

/// Bits of the RSA keys `genPrivateKey "rsa"` makes, and of the certificates' new keys.
pub const PRIVATE_KEY_RSA_BITS: usize = 4096;
pub const CERT_RSA_BITS: usize = 2048;

fn err(e: impl std::fmt::Display) -> FnError {
    FnError::Msg(e.to_string())
}

/// A private key: its PEM as Sprig writes it, and PKCS#8 DER to sign with.
struct Key {
    pem: String,
    pkcs8: Vec<u8>,
}

fn new_rsa(bits: usize) -> Result<Key, FnError> {
    let key = rsa::PrivateKey::new(&mut getrandom::SysRng, bits)
        .map_err(|e| err(format!("error generating rsa key: {e}")))?;
    let pkcs1 = key.to_pkcs1_der().map_err(err)?;
    let pkcs8 = key.to_pkcs8_der().map_err(err)?;
    Ok(Key { pem: pem_encode("RSA PRIVATE KEY", pkcs1.as_bytes()), pkcs8: pkcs8.as_bytes().to_vec() })
}

fn new_ecdsa() -> Result<Key, FnError> {
    let mut d = [0u8; 32];
    let secret = loop {
        super::random::fill(&mut d)?;
        if let Ok(k) = p256::SecretKey::from_slice(&d) {
            break k;
        }
    };
    let sec1 = secret.to_sec1_der().map_err(err)?;
    let pkcs8 = secret.to_pkcs8_der().map_err(err)?;
    Ok(Key { pem: pem_encode("EC PRIVATE KEY", &sec1), pkcs8: pkcs8.as_bytes().to_vec() })
}

/// PKCS#8 of an Ed25519 seed (RFC 8410), which Go writes as `PRIVATE KEY`.
fn ed25519_pkcs8(seed: &[u8; 32]) -> Vec<u8> {
    let mut der = hex::decode("302e020100300506032b657004220420").unwrap_or_default();
    der.extend_from_slice(seed);
    der
}

fn new_ed25519() -> Result<Key, FnError> {
    let mut seed = [0u8; 32];
    super::random::fill(&mut seed)?;
    let pkcs8 = ed25519_pkcs8(&seed);
    Ok(Key { pem: pem_encode("PRIVATE KEY", &pkcs8), pkcs8 })
}

/// `genPrivateKey type`: a new private key as PEM: `rsa` (or "", 4096 bits, PKCS#1),
/// `ecdsa` (P-256, SEC1), `ed25519` (PKCS#8). Sprig answers an unknown type with the text
/// `Unknown type …`.
fn gen_private_key(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    let key = match s(&a[0]).as_str() {
        "" | "rsa" => new_rsa(PRIVATE_KEY_RSA_BITS)?,
        "ecdsa" => new_ecdsa()?,
        "ed25519" => new_ed25519()?,
        "dsa" => {
            return Err("dsa keys are not supported by Keyward (DSA is deprecated; use rsa, ecdsa or ed25519)".into());
        }
        other => return Ok(Value::Str(format!("Unknown type {other}"))),
    };
    Ok(Value::Str(key.pem))
}

/// Sprig's `parsePrivateKeyPEM`: PKCS#8, PKCS#1 RSA or SEC1 EC.
fn parse_key(pem_text: &str) -> Result<Key, FnError> {
    let block = pem::parse(pem_text).map_err(|_| err("no PEM data in input"))?;
    let tag = block.tag();
    if tag != "PRIVATE KEY" && !tag.ends_with(" PRIVATE KEY") {
        return Err(err(format!("no private key data in PEM block of type {tag}")));
    }
    if tag == "DSA PRIVATE KEY" {
        return Err(err("dsa keys are not supported by Keyward"));
    }
    if !matches!(tag, "PRIVATE KEY" | "RSA PRIVATE KEY" | "EC PRIVATE KEY") {
        return Err(err(format!("invalid private key type {tag}")));
    }
    let pkcs8 = super::certs::private_key_pkcs8(pem_text.as_bytes())?;
    Ok(Key { pem: pem_text.to_string(), pkcs8 })
}

fn signing_key(key: &Key) -> Result<KeyPair, FnError> {
    KeyPair::try_from(&PrivatePkcs8KeyDer::from(key.pkcs8.clone()))
        .map_err(|e| err(format!("unsupported private key for signing: {e}")))
}

/// Sprig's `getBaseCertTemplate`.
fn base_params(cn: &str, ips: &Value, dns: &Value, days: i64) -> Result<CertificateParams, FnError> {
    let mut p = CertificateParams::default();
    p.distinguished_name = rcgen::DistinguishedName::new();
    if !cn.is_empty() {
        p.distinguished_name.push(DnType::CommonName, cn);
    }
    for d in list(dns)? {
        let Value::Str(d) = d else {
            return Err(err(format!("error processing alternate dns name: {} is not a string", d.to_display())));
        };
        p.subject_alt_names.push(SanType::DnsName(d.try_into().map_err(err)?));
    }
    for ip in list(ips)? {
        let Value::Str(text) = &ip else {
            return Err(err(format!("error parsing ip: {} is not a string", ip.to_display())));
        };
        let addr: IpAddr = text.parse().map_err(|_| err(format!("error parsing ip: {text}")))?;
        p.subject_alt_names.push(SanType::IpAddress(addr));
    }
    let mut serial = [0u8; 16];
    super::random::fill(&mut serial)?;
    serial[0] &= 0x7f;
    p.serial_number = Some(SerialNumber::from_slice(&serial));
    let now = time::OffsetDateTime::now_utc();
    p.not_before = now;
    p.not_after = now
        .checked_add(time::Duration::days(days))
        .ok_or_else(|| err(format!("{days} days of validity are out of range")))?;
    p.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
    p.is_ca = IsCa::ExplicitNoCa;
    Ok(p)
}

fn certificate(cert: String, key: String) -> Value {
    Value::map(BTreeMap::from([("Cert".to_string(), Value::Str(cert)), ("Key".to_string(), Value::Str(key))]))
}

fn self_signed(params: CertificateParams, key: &Key) -> FnResult {
    let pair = signing_key(key)?;
    let cert = params.self_signed(&pair).map_err(|e| err(format!("error creating certificate: {e}")))?;
    Ok(certificate(cert.pem().replace("\r\n", "\n"), key.pem.clone()))
}

fn ca(a: &[Value], key: &Key) -> FnResult {
    let mut p = base_params(&s(&a[0]), &Value::Nil, &Value::Nil, int(&a[1]))?;
    p.key_usages.push(KeyUsagePurpose::KeyCertSign);
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    self_signed(p, key)
}

/// `genCA cn days`.
fn gen_ca(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 2)?;
    ca(&a, &new_rsa(CERT_RSA_BITS)?)
}

/// `genCAWithKey cn days key`.
fn gen_ca_with_key(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 3)?;
    ca(&a, &given_key(&a[2])?)
}

/// The private key a `…WithKey` function is given.
fn given_key(v: &Value) -> Result<Key, FnError> {
    parse_key(&s(v)).map_err(|e| err(format!("parsing private key: {}", msg(e))))
}

fn msg(e: FnError) -> String {
    match e {
        FnError::Msg(m) | FnError::Limit(m) | FnError::MissingKey(m) => m,
    }
}

/// `genSelfSignedCert cn ips dns days`.
fn gen_self_signed(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 4)?;
    let p = base_params(&s(&a[0]), &a[1], &a[2], int(&a[3]))?;
    self_signed(p, &new_rsa(CERT_RSA_BITS)?)
}

/// `genSelfSignedCertWithKey cn ips dns days key`.
fn gen_self_signed_with_key(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 5)?;
    let key = given_key(&a[4])?;
    self_signed(base_params(&s(&a[0]), &a[1], &a[2], int(&a[3]))?, &key)
}

/// The `Cert` and `Key` of a certificate dict.
fn cert_fields(v: &Value) -> Result<(String, String), FnError> {
    let Value::Map(m) = v else {
        return Err(err(format!("wrong type for value; expected sprig.certificate; got {}", v.type_name())));
    };
    let m = m.borrow();
    let field = |k: &str| m.get(k).map(super::s).unwrap_or_default();
    Ok((field("Cert"), field("Key")))
}

fn signed(a: &[Value], key: &Key) -> FnResult {
    let (ca_cert, ca_key) = cert_fields(&a[4])?;
    let block = pem::parse(&ca_cert).map_err(|_| err("unable to decode certificate"))?;
    let ca_key = parse_key(&ca_key).map_err(|e| err(format!("error parsing private key: {}", msg(e))))?;
    let ca_pair = signing_key(&ca_key)?;
    let der = CertificateDer::from(block.contents().to_vec());
    let issuer = Issuer::from_ca_cert_der(&der, &ca_pair)
        .map_err(|e| err(format!("error parsing certificate: decodedSignerCert.Bytes: {e}")))?;
    let mut p = base_params(&s(&a[0]), &a[1], &a[2], int(&a[3]))?;
    p.use_authority_key_identifier_extension = true;
    let pair = signing_key(key)?;
    let cert = p.signed_by(&pair, &issuer).map_err(|e| err(format!("error creating certificate: {e}")))?;
    Ok(certificate(cert.pem().replace("\r\n", "\n"), key.pem.clone()))
}

/// `genSignedCert cn ips dns days ca`.
fn gen_signed(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 5)?;
    signed(&a, &new_rsa(CERT_RSA_BITS)?)
}

/// `genSignedCertWithKey cn ips dns days ca key`.
fn gen_signed_with_key(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 6)?;
    signed(&a, &given_key(&a[5])?)
}

/// `buildCustomCert b64cert b64key`: a certificate dict from base64 PEM, both checked.
fn build_custom_cert(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 2)?;
    let cert = STANDARD.decode(s(&a[0])).map_err(|_| err("unable to decode base64 certificate"))?;
    let key = STANDARD.decode(s(&a[1])).map_err(|_| err("unable to decode base64 private key"))?;
    let block = pem::parse(&cert).map_err(|_| err("unable to decode certificate"))?;
    x509_parser::parse_x509_certificate(block.contents())
        .map_err(|e| err(format!("error parsing certificate: decodedCert.Bytes: {e}")))?;
    let key = String::from_utf8_lossy(&key).into_owned();
    parse_key(&key).map_err(|e| err(format!("error parsing private key: {}", msg(e))))?;
    Ok(certificate(String::from_utf8_lossy(&cert).into_owned(), key))
}
