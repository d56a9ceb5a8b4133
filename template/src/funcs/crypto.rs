//! Hashes, password hashes, PEM filtering and JWK conversion.

use base64::Engine as _;
use base64::engine::general_purpose::{URL_SAFE, URL_SAFE_NO_PAD};
use rsa::BoxedUint;
use rsa::pkcs8::{EncodePrivateKey, EncodePublicKey};
use sha1::Digest as _;

use super::{FnCtx, FnError, FnResult, Func, bytes, s, want};
use crate::value::Value;

pub const FUNCS: &[(&str, Func)] = &[
    ("sha1sum", sha1sum),
    ("sha256sum", sha256sum),
    ("sha512sum", sha512sum),
    ("bcrypt", bcrypt_fn),
    ("htpasswd", htpasswd),
    ("filterPEM", filter_pem),
    ("jwkPublicKeyPem", jwk_public_key_pem),
    ("jwkPrivateKeyPem", jwk_private_key_pem),
    ("rsaDecrypt", rsa_decrypt),
];

fn sha1sum(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    Ok(Value::Str(hex::encode(sha1::Sha1::digest(bytes(&a[0])))))
}

fn sha256sum(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    Ok(Value::Str(hex::encode(sha2::Sha256::digest(bytes(&a[0])))))
}

fn sha512sum(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    Ok(Value::Str(hex::encode(sha2::Sha512::digest(bytes(&a[0])))))
}

/// Cost of `golang.org/x/crypto/bcrypt.DefaultCost`, which Sprig uses.
const GO_DEFAULT_COST: u32 = 10;

/// Bcrypt with Go's default cost (10) in the `$2a$` format Go produces.
fn bcrypt_hash(password: &[u8]) -> Result<String, FnError> {
    let parts =
        bcrypt::hash_with_result(password, GO_DEFAULT_COST).map_err(|e| FnError::Msg(format!("bcrypt: {e}")))?;
    Ok(parts.format_for_version(bcrypt::Version::TwoA))
}

fn bcrypt_fn(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    Ok(Value::Str(bcrypt_hash(&bytes(&a[0]))?))
}

/// `htpasswd user password [algorithm]`: an Apache htpasswd line, with a bcrypt hash or, for
/// algorithm `sha`, `{SHA}` and the base64 SHA-1 of the password.
fn htpasswd(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    super::want_between(&a, 2, 3)?;
    let user = s(&a[0]);
    if user.contains(':') {
        return Err(FnError::Msg(format!("invalid username: {user}")));
    }
    if a.get(2).is_some_and(|alg| s(alg) == "sha") {
        use base64::engine::general_purpose::STANDARD;
        let sum = STANDARD.encode(sha1::Sha1::digest(bytes(&a[1])));
        return Ok(Value::Str(format!("{user}:{{SHA}}{sum}")));
    }
    Ok(Value::Str(format!("{user}:{}", bcrypt_hash(&bytes(&a[1]))?)))
}

/// PEM-encode DER bytes with LF line endings, like Go's `pem.Encode`.
pub(crate) fn pem_encode(tag: &str, der: &[u8]) -> String {
    pem::encode_config(&pem::Pem::new(tag, der), pem::EncodeConfig::new().set_line_ending(pem::LineEnding::LF))
}

/// `filterPEM type input`: the PEM blocks of one type (case-insensitive), re-encoded.
fn filter_pem(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 2)?;
    let kind = s(&a[0]);
    let blocks = pem::parse_many(bytes(&a[1])).map_err(|e| FnError::Msg(format!("invalid PEM: {e}")))?;
    if blocks.is_empty() {
        return Err(FnError::Msg("no PEM data found".into()));
    }
    let out: String = blocks
        .iter()
        .filter(|b| b.tag().eq_ignore_ascii_case(&kind))
        .map(|b| pem_encode(b.tag(), b.contents()))
        .collect();
    Ok(Value::Str(out))
}

fn jwk_field(jwk: &serde_json::Map<String, serde_json::Value>, name: &str) -> Result<Vec<u8>, FnError> {
    let text =
        jwk.get(name).and_then(|v| v.as_str()).ok_or_else(|| FnError::Msg(format!("JWK has no {name:?} member")))?;
    URL_SAFE_NO_PAD
        .decode(text.trim_end_matches('='))
        .or_else(|_| URL_SAFE.decode(text))
        .map_err(|e| FnError::Msg(format!("JWK member {name:?} is not base64url: {e}")))
}

fn parse_jwk(v: &Value) -> Result<serde_json::Map<String, serde_json::Value>, FnError> {
    match serde_json::from_slice::<serde_json::Value>(&bytes(v)) {
        Ok(serde_json::Value::Object(m)) => Ok(m),
        Ok(_) => Err(FnError::Msg("JWK is not a JSON object".into())),
        Err(e) => Err(FnError::Msg(format!("invalid JWK JSON: {e}"))),
    }
}

fn big(b: &[u8]) -> BoxedUint {
    BoxedUint::from_be_slice_vartime(b)
}

fn ec_point(jwk: &serde_json::Map<String, serde_json::Value>) -> Result<(String, Vec<u8>), FnError> {
    let crv = jwk.get("crv").and_then(|v| v.as_str()).unwrap_or_default().to_string();
    let (x, y) = (jwk_field(jwk, "x")?, jwk_field(jwk, "y")?);
    let mut point = vec![4u8];
    point.extend(x);
    point.extend(y);
    Ok((crv, point))
}

fn enc_err(e: impl std::fmt::Display) -> FnError {
    FnError::Msg(format!("cannot encode key: {e}"))
}

/// `jwkPublicKeyPem jwk`: the public key of an RSA or EC (P-256, P-384) JWK as PKIX PEM.
fn jwk_public_key_pem(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    let jwk = parse_jwk(&a[0])?;
    let der = match jwk.get("kty").and_then(|v| v.as_str()) {
        Some("RSA") => {
            let key = rsa::PublicKey::new(big(&jwk_field(&jwk, "n")?), big(&jwk_field(&jwk, "e")?))
                .map_err(|e| FnError::Msg(format!("invalid RSA JWK: {e}")))?;
            key.to_public_key_der().map_err(enc_err)?.into_vec()
        }
        Some("EC") => {
            let (crv, point) = ec_point(&jwk)?;
            let bad = |e: p256::elliptic_curve::Error| FnError::Msg(format!("invalid EC JWK: {e}"));
            match crv.as_str() {
                "P-256" => p256::PublicKey::from_sec1_bytes(&point).map_err(bad)?.to_public_key_der(),
                "P-384" => p384::PublicKey::from_sec1_bytes(&point).map_err(bad)?.to_public_key_der(),
                other => return Err(FnError::Msg(format!("unsupported EC curve {other:?}"))),
            }
            .map_err(enc_err)?
            .into_vec()
        }
        other => return Err(FnError::Msg(format!("unsupported JWK key type {other:?}"))),
    };
    Ok(Value::Str(pem_encode("PUBLIC KEY", &der)))
}

/// `jwkPrivateKeyPem jwk`: the private key of an RSA or EC (P-256, P-384) JWK as PKCS#8 PEM.
fn jwk_private_key_pem(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    let jwk = parse_jwk(&a[0])?;
    let der = match jwk.get("kty").and_then(|v| v.as_str()) {
        Some("RSA") => {
            let f = |n: &str| jwk_field(&jwk, n).map(|b| big(&b));
            let key = rsa::PrivateKey::from_components(f("n")?, f("e")?, f("d")?, vec![f("p")?, f("q")?])
                .map_err(|e| FnError::Msg(format!("invalid RSA JWK: {e}")))?;
            key.to_pkcs8_der().map_err(enc_err)?.as_bytes().to_vec()
        }
        Some("EC") => {
            let (crv, _) = ec_point(&jwk)?;
            let d = jwk_field(&jwk, "d")?;
            let bad = |e: p256::elliptic_curve::Error| FnError::Msg(format!("invalid EC JWK: {e}"));
            match crv.as_str() {
                "P-256" => p256::SecretKey::from_slice(&d).map_err(bad)?.to_pkcs8_der(),
                "P-384" => p384::SecretKey::from_slice(&d).map_err(bad)?.to_pkcs8_der(),
                other => return Err(FnError::Msg(format!("unsupported EC curve {other:?}"))),
            }
            .map_err(enc_err)?
            .as_bytes()
            .to_vec()
        }
        other => return Err(FnError::Msg(format!("unsupported JWK key type {other:?}"))),
    };
    Ok(Value::Str(pem_encode("PRIVATE KEY", &der)))
}

/// `rsaDecrypt scheme hash ciphertext privateKey`: the plaintext of binary `ciphertext`, as
/// upstream defines it. `scheme` is `RSA-OAEP` (or `None`, which returns the input unchanged);
/// `hash` (`SHA1`, `SHA256`, `SHA512`; anything else means SHA-256, as upstream) is used for the
/// label and for MGF1. The key is a PEM RSA key, PKCS#1 or PKCS#8, not itself encrypted.
fn rsa_decrypt(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    use rsa::sha2::{Sha256, Sha512};
    want(&a, 4)?;
    let scheme = s(&a[0]);
    match scheme.as_str() {
        "None" => return Ok(a[2].clone()),
        "RSA-OAEP" => {}
        other => return Err(FnError::Msg(format!("decryption scheme {other} is not supported"))),
    }
    let key = rsa_private_key(&bytes(&a[3]))?;
    let ciphertext = bytes(&a[2]);
    let plain = match s(&a[1]).as_str() {
        "SHA1" => key.decrypt(rsa::Oaep::<oaep_sha1::Sha1>::new(), &ciphertext),
        "SHA512" => key.decrypt(rsa::Oaep::<Sha512>::new(), &ciphertext),
        _ => key.decrypt(rsa::Oaep::<Sha256>::new(), &ciphertext),
    }
    // The padding error says nothing about the key or the plaintext.
    .map_err(|e| FnError::Msg(format!("error decrypting data with RSA: {e}")))?;
    Ok(Value::from_bytes(plain))
}

fn rsa_private_key(pem_text: &[u8]) -> Result<rsa::PrivateKey, FnError> {
    use rsa::pkcs1::DecodeRsaPrivateKey;
    use rsa::pkcs8::DecodePrivateKey;
    let block = pem::parse(pem_text).map_err(|_| FnError::Msg("failed to decode PEM block".into()))?;
    rsa::PrivateKey::from_pkcs1_der(block.contents())
        .or_else(|_| rsa::PrivateKey::from_pkcs8_der(block.contents()))
        .map_err(|_| FnError::Msg(format!("could not parse RSA private key (PEM block {:?})", block.tag())))
}
