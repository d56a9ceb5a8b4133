//! Certificate functions of External Secrets: PEM to PKCS#12 (keystores and truststores, base64
//! encoded), certificate chain ordering and filtering, and Subject Alternative Names.
//!
//! PKCS#12 output is written with PBES2 (AES-256-CBC, PBKDF2-SHA256) and an HMAC-SHA256 MAC.
//! Like upstream's, the salts are random: the same input encodes differently on every render.

use std::net::IpAddr;
use std::rc::Rc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use p12_keystore::{Certificate, KeyStore, KeyStoreEntry, PrivateKey, PrivateKeyChain};
use rsa::pkcs1::DecodeRsaPrivateKey;
use rsa::pkcs8::EncodePrivateKey;
use sha1::Digest as _;
use x509_parser::extensions::{GeneralName, ParsedExtension};
use x509_parser::prelude::{FromDer, X509Certificate};

use super::crypto::pem_encode;
use super::{FnCtx, FnError, FnResult, Func, bytes, s, want};
use crate::value::Value;

pub const FUNCS: &[(&str, Func)] = &[
    ("pemToPkcs12", pem_to_pkcs12),
    ("pemToPkcs12Pass", pem_to_pkcs12_pass),
    ("fullPemToPkcs12", full_pem_to_pkcs12),
    ("fullPemToPkcs12Pass", full_pem_to_pkcs12_pass),
    ("pemTruststoreToPKCS12", pem_truststore_to_pkcs12),
    ("pemTruststoreToPKCS12Pass", pem_truststore_to_pkcs12_pass),
    ("filterCertChain", filter_cert_chain),
    ("certSANs", cert_sans),
];

/// The keystore writers: their random salts make every render's bytes different.
pub const RANDOM_SALTS: &[&str] = &[
    "pemToPkcs12",
    "pemToPkcs12Pass",
    "fullPemToPkcs12",
    "fullPemToPkcs12Pass",
    "pemTruststoreToPKCS12",
    "pemTruststoreToPKCS12Pass",
];

/// The DER of every PEM block of `input`, each checked to be an X.509 certificate.
fn certificates(input: &[u8]) -> Result<Vec<Vec<u8>>, FnError> {
    let blocks = pem::parse_many(input).map_err(|e| FnError::Msg(format!("invalid PEM: {e}")))?;
    if blocks.is_empty() {
        return Err(FnError::Msg("no PEM data found".into()));
    }
    blocks
        .into_iter()
        .enumerate()
        .map(|(i, b)| {
            X509Certificate::from_der(b.contents())
                .map_err(|e| FnError::Msg(format!("PEM block {i} ({}) is not a certificate: {e}", b.tag())))?;
            Ok(b.into_contents())
        })
        .collect()
}

/// A private key PEM (PKCS#1 RSA, PKCS#8, or SEC1 EC on P-256/P-384) as PKCS#8 DER.
pub(crate) fn private_key_pkcs8(input: &[u8]) -> Result<Vec<u8>, FnError> {
    let block = pem::parse(input).map_err(|e| FnError::Msg(format!("invalid private key PEM: {e}")))?;
    let der = block.contents();
    if PrivateKey::from_der(der).is_ok() {
        return Ok(der.to_vec());
    }
    let enc = |e: rsa::pkcs8::Error| FnError::Msg(format!("cannot encode key: {e}"));
    if let Ok(k) = rsa::PrivateKey::from_pkcs1_der(der) {
        return Ok(k.to_pkcs8_der().map_err(enc)?.as_bytes().to_vec());
    }
    if let Ok(k) = p256::SecretKey::from_sec1_der(der) {
        return Ok(k.to_pkcs8_der().map_err(enc)?.as_bytes().to_vec());
    }
    if let Ok(k) = p384::SecretKey::from_sec1_der(der) {
        return Ok(k.to_pkcs8_der().map_err(enc)?.as_bytes().to_vec());
    }
    Err(FnError::Msg(format!("unable to parse private key type ({})", block.tag())))
}

fn p12_cert(der: &[u8]) -> Result<Certificate, FnError> {
    Certificate::from_der(der).map_err(|e| FnError::Msg(format!("cannot read certificate: {e}")))
}

fn write(store: &KeyStore, password: &str) -> FnResult {
    let der = store.writer(password).write().map_err(|e| FnError::Msg(format!("cannot write PKCS#12: {e}")))?;
    Ok(Value::Str(STANDARD.encode(der)))
}

/// A keystore of the key and `certs` (leaf first), base64 encoded.
fn keystore(certs: &[Vec<u8>], key_pem: &[u8], password: &str) -> FnResult {
    let key = PrivateKey::from_der(&private_key_pkcs8(key_pem)?)
        .map_err(|e| FnError::Msg(format!("cannot use private key: {e}")))?;
    let leaf = certs.first().ok_or_else(|| FnError::Msg("no certificate".into()))?;
    // The local key id ties the key to its certificate; Go's pkcs12 uses the leaf's SHA-1 too.
    let key_id = sha1::Sha1::digest(leaf).to_vec();
    let chain = PrivateKeyChain::new(key_id, key, certs.iter().map(|c| p12_cert(c)).collect::<Result<Vec<_>, _>>()?);
    let mut store = KeyStore::new();
    store.add_entry("1", KeyStoreEntry::PrivateKeyChain(chain));
    write(&store, password)
}

/// `pemToPkcs12Pass cert key password`: the first certificate of `cert` and the key.
fn pem_to_pkcs12_pass(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 3)?;
    let certs = certificates(&bytes(&a[0]))?;
    keystore(&certs[..1], &bytes(&a[1]), &s(&a[2]))
}

fn pem_to_pkcs12(ctx: &FnCtx<'_>, mut a: Vec<Value>) -> FnResult {
    want(&a, 2)?;
    a.push(Value::Str(String::new()));
    pem_to_pkcs12_pass(ctx, a)
}

/// `fullPemToPkcs12Pass chain key password`: the leaf (first) and the rest of the chain.
fn full_pem_to_pkcs12_pass(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 3)?;
    keystore(&certificates(&bytes(&a[0]))?, &bytes(&a[1]), &s(&a[2]))
}

fn full_pem_to_pkcs12(ctx: &FnCtx<'_>, mut a: Vec<Value>) -> FnResult {
    want(&a, 2)?;
    a.push(Value::Str(String::new()));
    full_pem_to_pkcs12_pass(ctx, a)
}

/// `pemTruststoreToPKCS12Pass certs password`: every certificate as a trusted entry.
fn pem_truststore_to_pkcs12_pass(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 2)?;
    let mut store = KeyStore::new();
    for (i, der) in certificates(&bytes(&a[0]))?.iter().enumerate() {
        store.add_entry(&i.to_string(), KeyStoreEntry::Certificate(p12_cert(der)?));
    }
    write(&store, &s(&a[1]))
}

fn pem_truststore_to_pkcs12(ctx: &FnCtx<'_>, mut a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    a.push(Value::Str(String::new()));
    pem_truststore_to_pkcs12_pass(ctx, a)
}

/// A parsed certificate's key identifiers (empty when the extension is absent, as Go's nil).
struct Node {
    der: Vec<u8>,
    subject_key_id: Vec<u8>,
    authority_key_id: Vec<u8>,
}

impl Node {
    fn parse(der: Vec<u8>) -> Result<Node, FnError> {
        let (_, cert) =
            X509Certificate::from_der(&der).map_err(|e| FnError::Msg(format!("invalid certificate: {e}")))?;
        let (mut ski, mut aki) = (Vec::new(), Vec::new());
        for ext in cert.extensions() {
            match ext.parsed_extension() {
                ParsedExtension::SubjectKeyIdentifier(k) => ski = k.0.to_vec(),
                ParsedExtension::AuthorityKeyIdentifier(k) => {
                    aki = k.key_identifier.as_ref().map(|k| k.0.to_vec()).unwrap_or_default();
                }
                _ => {}
            }
        }
        drop(cert);
        Ok(Node { der, subject_key_id: ski, authority_key_id: aki })
    }

    /// A root: no authority key id, or its own.
    fn is_root(&self) -> bool {
        self.authority_key_id.is_empty() || self.authority_key_id == self.subject_key_id
    }
}

/// The certificates of `input` ordered leaf, intermediates, root, by their key identifiers (a
/// formatting helper: nothing is verified). One chain only: several leaves are an error.
fn ordered_chain(input: &[u8]) -> Result<Vec<Node>, FnError> {
    let nodes = certificates(input)?.into_iter().map(Node::parse).collect::<Result<Vec<_>, _>>()?;
    let mut parent: Vec<Option<usize>> = vec![None; nodes.len()];
    let mut is_parent = vec![false; nodes.len()];
    for i in 0..nodes.len() {
        if let Some(j) = (0..nodes.len()).find(|&j| j != i && nodes[i].authority_key_id == nodes[j].subject_key_id) {
            parent[i] = Some(j);
            is_parent[j] = true;
        }
    }
    let leaves: Vec<usize> = (0..nodes.len()).filter(|&i| !is_parent[i]).collect();
    let leaf = match leaves.as_slice() {
        [one] => *one,
        [] => return Err(FnError::Msg("no leaf certificate found".into())),
        _ => return Err(FnError::Msg("found multiple leaf or disjunct certificates".into())),
    };
    let mut order = vec![leaf];
    while let Some(p) = order.last().and_then(|&i| parent[i]) {
        if order.len() >= nodes.len() {
            return Err(FnError::Msg("constructing chain resulted in cycle".into()));
        }
        order.push(p);
    }
    let mut nodes: Vec<Option<Node>> = nodes.into_iter().map(Some).collect();
    Ok(order.into_iter().filter_map(|i| nodes[i].take()).collect())
}

/// `filterCertChain type chain`: the `leaf`, the `intermediate`s or the `root` of a chain, as
/// PEM; "" when the chain has none.
fn filter_cert_chain(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 2)?;
    let kind = s(&a[0]);
    let chain = ordered_chain(&bytes(&a[1]))?;
    let pem_of = |n: &Node| pem_encode("CERTIFICATE", &n.der);
    let out = match kind.as_str() {
        "leaf" => chain.first().filter(|n| !n.is_root()).map(pem_of).unwrap_or_default(),
        "intermediate" => chain.iter().skip(1).take_while(|n| !n.is_root()).map(pem_of).collect(),
        "root" => chain.last().filter(|n| n.is_root()).map(pem_of).unwrap_or_default(),
        other => {
            return Err(FnError::Msg(format!("unknown certificate type {other:?}: use leaf, intermediate or root")));
        }
    };
    Ok(Value::Str(out))
}

/// `certSANs cert`: the Subject Alternative Names of the first certificate: DNS names, IP
/// addresses, email addresses, then URIs.
fn cert_sans(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    let input = bytes(&a[0]);
    let block = pem::parse(&input).map_err(|e| FnError::Msg(format!("failed to decode PEM block: {e}")))?;
    let (_, cert) = X509Certificate::from_der(block.contents())
        .map_err(|e| FnError::Msg(format!("failed to parse certificate: {e}")))?;
    let (mut dns, mut ips, mut emails, mut uris) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for name in &san.value.general_names {
            match name {
                GeneralName::DNSName(n) => dns.push(n.to_string()),
                GeneralName::IPAddress(b) => {
                    let ip = match b.len() {
                        4 => <[u8; 4]>::try_from(*b).map(IpAddr::from).ok(),
                        16 => <[u8; 16]>::try_from(*b).map(IpAddr::from).ok(),
                        _ => None,
                    };
                    ips.extend(ip.map(|ip| ip.to_string()));
                }
                GeneralName::RFC822Name(n) => emails.push(n.to_string()),
                GeneralName::URI(n) => uris.push(n.to_string()),
                _ => {}
            }
        }
    }
    let all = dns.into_iter().chain(ips).chain(emails).chain(uris).map(Value::Str).collect();
    Ok(Value::List(Rc::new(all)))
}
