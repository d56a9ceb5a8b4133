//! JSON Web Tokens as Entra ID checks client assertions: RS256 signatures against a registered
//! certificate's key or the ServiceAccount issuer's JWKS, and the claims that must hold.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::signature::{RSA_PKCS1_2048_8192_SHA256, RsaPublicKeyComponents, UnparsedPublicKey};
use serde_json::Value;

/// A token's parts, decoded but not yet trusted.
pub(crate) struct Jwt {
    pub header: Value,
    pub claims: Value,
    signing_input: String,
    signature: Vec<u8>,
}

/// Splits and decodes a compact JWT.
pub(crate) fn parse(token: &str) -> Option<Jwt> {
    let mut parts = token.split('.');
    let (h, c, s) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let header = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(h).ok()?).ok()?;
    let claims = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(c).ok()?).ok()?;
    Some(Jwt { header, claims, signing_input: format!("{h}.{c}"), signature: URL_SAFE_NO_PAD.decode(s).ok()? })
}

impl Jwt {
    /// Whether an RS256 signature verifies with the certificate's (DER) public key.
    pub fn verified_by_certificate(&self, der: &[u8]) -> bool {
        if self.header["alg"] != "RS256" {
            return false;
        }
        let Ok((_, cert)) = x509_parser::parse_x509_certificate(der) else { return false };
        let key = cert.public_key().subject_public_key.data.to_vec();
        UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, key)
            .verify(self.signing_input.as_bytes(), &self.signature)
            .is_ok()
    }

    /// Whether an RS256 signature verifies with the JWKS key its `kid` names.
    pub fn verified_by_jwks(&self, jwks: &Value) -> bool {
        if self.header["alg"] != "RS256" {
            return false;
        }
        let kid = self.header["kid"].as_str().unwrap_or_default();
        let keys = jwks["keys"].as_array().map(Vec::as_slice).unwrap_or_default();
        keys.iter().filter(|k| k["kid"].as_str() == Some(kid) && k["kty"] == "RSA").any(|k| {
            let part = |name: &str| k[name].as_str().and_then(|v| URL_SAFE_NO_PAD.decode(v).ok());
            let (Some(n), Some(e)) = (part("n"), part("e")) else { return false };
            RsaPublicKeyComponents { n: &n, e: &e }
                .verify(&RSA_PKCS1_2048_8192_SHA256, self.signing_input.as_bytes(), &self.signature)
                .is_ok()
        })
    }

    /// Whether `aud` is, or contains, `audience`.
    pub fn has_audience(&self, audience: &str) -> bool {
        match &self.claims["aud"] {
            Value::String(a) => a == audience,
            Value::Array(a) => a.iter().any(|v| v == audience),
            _ => false,
        }
    }

    /// Whether the token is within its validity at `now`.
    pub fn current(&self, now: i64) -> bool {
        let exp = self.claims["exp"].as_i64().unwrap_or(0);
        let nbf = self.claims["nbf"].as_i64().unwrap_or(0);
        exp > now && nbf <= now + 300
    }
}
