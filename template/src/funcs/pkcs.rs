//! PKCS#12 helpers: extract the private key or the certificates of a keystore as PEM.

use p12_keystore::{KeyStore, KeyStoreEntry, Pkcs12ImportPolicy};

use super::crypto::pem_encode;
use super::{FnCtx, FnError, FnResult, Func, bytes, s, want};
use crate::value::Value;

pub const FUNCS: &[(&str, Func)] = &[
    ("pkcs12key", pkcs12key),
    ("pkcs12keyPass", pkcs12key_pass),
    ("pkcs12cert", pkcs12cert),
    ("pkcs12certPass", pkcs12cert_pass),
];

fn open(data: &[u8], password: &str) -> Result<KeyStore, FnError> {
    KeyStore::from_pkcs12(data, password, Pkcs12ImportPolicy::Relaxed)
        .map_err(|e| FnError::Msg(format!("cannot read PKCS#12 data: {e}")))
}

/// The first private key, as PKCS#8 `PRIVATE KEY` PEM.
fn key_pem(data: &[u8], password: &str) -> FnResult {
    let store = open(data, password)?;
    let (_, chain) =
        store.private_key_chain().ok_or_else(|| FnError::Msg("PKCS#12 data holds no private key".into()))?;
    Ok(Value::Str(pem_encode("PRIVATE KEY", chain.key().as_der())))
}

/// The certificates: the key's chain (leaf first), then any other certificates.
fn cert_pem(data: &[u8], password: &str) -> FnResult {
    let store = open(data, password)?;
    let mut ders: Vec<Vec<u8>> = Vec::new();
    if let Some((_, chain)) = store.private_key_chain() {
        ders.extend(chain.certs().iter().map(|c| c.as_der().to_vec()));
    }
    for (_, entry) in store.entries() {
        if let KeyStoreEntry::Certificate(c) = entry
            && !ders.iter().any(|d| d == c.as_der())
        {
            ders.push(c.as_der().to_vec());
        }
    }
    if ders.is_empty() {
        return Err(FnError::Msg("PKCS#12 data holds no certificate".into()));
    }
    Ok(Value::Str(ders.iter().map(|d| pem_encode("CERTIFICATE", d)).collect()))
}

fn pkcs12key(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    key_pem(&bytes(&a[0]), "")
}

/// `pkcs12keyPass password data`.
fn pkcs12key_pass(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 2)?;
    key_pem(&bytes(&a[1]), &s(&a[0]))
}

fn pkcs12cert(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    cert_pem(&bytes(&a[0]), "")
}

/// `pkcs12certPass password data`.
fn pkcs12cert_pass(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 2)?;
    cert_pem(&bytes(&a[1]), &s(&a[0]))
}
