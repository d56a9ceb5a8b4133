//! MFA: the TOTP code (RFC 6238) of a seed kept in a Secret, computed here: an HMAC of the
//! time-step counter keyed with the seed, truncated as HOTP does (RFC 4226, section 5.3). The
//! seed is read in the namespace that uses the generator, never another
//! (`keyward_crds::rules::mfa_secret_namespace`), and never logged or kept.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::Secret;
use keyward_crds::generators::MfaSpec;
use keyward_crds::rules::{MfaAlgorithm, MfaPlan, mfa_plan, mfa_secret_namespace};
use kube::{Api, Client};
use sha2::Digest;
use sha2::digest::core_api::BlockSizeUser;

use super::GenerateError;
use super::source::GeneratorError;

/// The code of `spec` for a generator used in `namespace`, under upstream's keys: `token` (the
/// code) and `timeLeft` (seconds until its time step ends).
pub async fn generate(
    client: &Client,
    namespace: &str,
    name: &str,
    spec: &MfaSpec,
) -> Result<BTreeMap<String, Vec<u8>>, GeneratorError> {
    let invalid = |e: String| GeneratorError::Invalid(format!("MFA {name:?}: {e}"));
    let plan = mfa_plan("spec", spec)
        .map_err(|errs| invalid(errs.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")))?;
    mfa_secret_namespace("spec", spec, namespace).map_err(|e| invalid(e.to_string()))?;
    let api = Api::<Secret>::namespaced(client.clone(), namespace);
    let secret = match api.get_opt(&plan.secret_name).await {
        Ok(Some(s)) => s,
        Ok(None) => {
            return Err(GeneratorError::NotFound {
                kind: "Secret".into(),
                name: plan.secret_name.clone(),
                namespace: Some(namespace.to_string()),
            });
        }
        Err(e) => {
            return Err(GeneratorError::Api { what: format!("Secret {:?}", plan.secret_name), message: e.to_string() });
        }
    };
    let seed = secret.data.as_ref().and_then(|d| d.get(&plan.secret_key)).ok_or_else(|| {
        invalid(format!("Secret {:?} has no key {:?} (spec.secret.key)", plan.secret_name, plan.secret_key))
    })?;
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or_default();
    let (token, left) = totp(&seed.0, &plan, plan.when.unwrap_or(now))
        .map_err(|e| GeneratorError::Generate(GenerateError::Invalid(format!("MFA {name:?}: {e}"))))?;
    Ok(BTreeMap::from([
        ("token".to_string(), token.into_bytes()),
        ("timeLeft".to_string(), left.to_string().into_bytes()),
    ]))
}

/// The code of `seed` (base32 text) at Unix time `at`, and the seconds left in its time step.
pub fn totp(seed: &[u8], plan: &MfaPlan, at: u64) -> Result<(String, u64), String> {
    let key = base32_seed(seed)?;
    // mfa_plan never gives a zero period; a zero here would be a bug, not a panic.
    let period = plan.time_period.max(1);
    let counter = (at / period).to_be_bytes();
    let mac = match plan.algorithm {
        MfaAlgorithm::Sha1 => hmac::<sha1::Sha1>(&key, &counter),
        MfaAlgorithm::Sha256 => hmac::<sha2::Sha256>(&key, &counter),
        MfaAlgorithm::Sha384 => hmac::<sha2::Sha384>(&key, &counter),
        MfaAlgorithm::Sha512 => hmac::<sha2::Sha512>(&key, &counter),
        MfaAlgorithm::Sha512_256 => hmac::<sha2::Sha512_256>(&key, &counter),
    };
    // Dynamic truncation: four bytes at the offset the last nibble names, top bit cleared.
    let offset = usize::from(mac.last().copied().unwrap_or_default() & 0x0f);
    let word: [u8; 4] = mac.get(offset..offset + 4).and_then(|b| b.try_into().ok()).ok_or("HMAC too short")?;
    let value = u64::from(u32::from_be_bytes(word) & 0x7fff_ffff);
    let modulus = 10u64.checked_pow(plan.length).ok_or("length too large")?;
    let width = plan.length as usize;
    Ok((format!("{:0width$}", value % modulus), period - at % period))
}

/// HMAC (RFC 2104) of `message` keyed with `key`, over the hash `D`.
fn hmac<D: Digest + BlockSizeUser>(key: &[u8], message: &[u8]) -> Vec<u8> {
    let block = D::block_size();
    let mut padded = if key.len() > block { D::digest(key).to_vec() } else { key.to_vec() };
    padded.resize(block, 0);
    let pad = |byte: u8| padded.iter().map(|k| k ^ byte).collect::<Vec<u8>>();
    let inner = D::new().chain_update(pad(0x36)).chain_update(message).finalize();
    D::new().chain_update(pad(0x5c)).chain_update(inner).finalize().to_vec()
}

/// Decodes a seed as authenticator apps show it: RFC 4648 base32, any case, spaces and line
/// breaks ignored (apps group it, a Secret's file often ends with a newline), padding optional.
fn base32_seed(seed: &[u8]) -> Result<Vec<u8>, String> {
    let text: Vec<u8> = seed.iter().copied().filter(|c| !matches!(c, b' ' | b'\n' | b'\r' | b'\t')).collect();
    let end = text.iter().rposition(|c| *c != b'=').map_or(0, |i| i + 1);
    let text = &text[..end];
    if text.is_empty() {
        return Err("the seed is empty".into());
    }
    // A base32 text never leaves 1, 3 or 6 characters after its last full group of 8.
    if matches!(text.len() % 8, 1 | 3 | 6) {
        return Err(format!("the seed is not base32: {} characters cannot be a base32 text", text.len()));
    }
    let (mut out, mut bits, mut acc) = (Vec::with_capacity(text.len() * 5 / 8), 0u32, 0u64);
    for (i, c) in text.iter().enumerate() {
        let v = match c.to_ascii_uppercase() {
            c @ b'A'..=b'Z' => c - b'A',
            c @ b'2'..=b'7' => c - b'2' + 26,
            _ => return Err(format!("the seed is not base32: character {} is not A-Z or 2-7", i + 1)),
        };
        acc = (acc << 5) | u64::from(v);
        bits += 5;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 4648's base32 of bytes, for the RFC's ASCII seeds.
    fn base32(bytes: &[u8]) -> String {
        const ALPHABET: &[u8; 32] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
        let (mut out, mut acc, mut bits) = (String::new(), 0u32, 0);
        for b in bytes {
            acc = (acc << 8) | u32::from(*b);
            bits += 8;
            while bits >= 5 {
                bits -= 5;
                out.push(ALPHABET[((acc >> bits) & 31) as usize] as char);
            }
        }
        if bits > 0 {
            out.push(ALPHABET[((acc << (5 - bits)) & 31) as usize] as char);
        }
        out
    }

    fn plan(algorithm: MfaAlgorithm, length: u32) -> MfaPlan {
        MfaPlan { length, time_period: 30, algorithm, when: None, secret_name: "s".into(), secret_key: "k".into() }
    }

    /// RFC 6238, appendix B: the seeds are the ASCII digits repeated to 20, 32 and 64 bytes.
    #[test]
    fn rfc_6238_test_vectors() {
        let seed = |n: usize| base32(&b"1234567890".repeat(7)[..n]);
        let vectors: [(u64, &str, &str, &str); 6] = [
            (59, "94287082", "46119246", "90693936"),
            (1111111109, "07081804", "68084774", "25091201"),
            (1111111111, "14050471", "67062674", "99943326"),
            (1234567890, "89005924", "91819424", "93441116"),
            (2000000000, "69279037", "90698825", "38618901"),
            (20000000000, "65353130", "77737706", "47863826"),
        ];
        for (at, sha1, sha256, sha512) in vectors {
            for (algorithm, n, want) in
                [(MfaAlgorithm::Sha1, 20, sha1), (MfaAlgorithm::Sha256, 32, sha256), (MfaAlgorithm::Sha512, 64, sha512)]
            {
                let (code, _) = totp(seed(n).as_bytes(), &plan(algorithm, 8), at).expect("a code");
                assert_eq!(code, want, "{algorithm:?} at {at}");
            }
        }
    }

    #[test]
    fn upstreams_defaults_six_digits_and_the_time_left() {
        let seed = base32(b"12345678901234567890");
        let (code, left) = totp(seed.as_bytes(), &plan(MfaAlgorithm::Sha1, 6), 59).expect("a code");
        assert_eq!((code.as_str(), left), ("287082", 1), "the last six digits of the RFC's 94287082");
        let (_, left) = totp(seed.as_bytes(), &plan(MfaAlgorithm::Sha1, 6), 60).expect("a code");
        assert_eq!(left, 30, "a step that just began has all of it left");
        let (code, _) = totp(seed.as_bytes(), &plan(MfaAlgorithm::Sha1, 10), 1111111109).expect("a code");
        assert_eq!(code.len(), 10, "zero-padded to the length: {code}");
    }

    #[test]
    fn seeds_are_read_as_authenticator_apps_show_them() {
        let seed = base32(b"12345678901234567890");
        let want = totp(seed.as_bytes(), &plan(MfaAlgorithm::Sha1, 8), 59).expect("a code");
        let spaced: String = seed
            .to_lowercase()
            .chars()
            .collect::<Vec<_>>()
            .chunks(4)
            .map(|c| c.iter().collect::<String>())
            .collect::<Vec<_>>()
            .join(" ");
        for written in [spaced, format!("{seed}\n"), format!("{seed}====")] {
            assert_eq!(totp(written.as_bytes(), &plan(MfaAlgorithm::Sha1, 8), 59), Ok(want.clone()), "{written:?}");
        }
        assert_eq!(totp(b"", &plan(MfaAlgorithm::Sha1, 6), 59).unwrap_err(), "the seed is empty");
        assert!(totp(b"JBSWY3DP1", &plan(MfaAlgorithm::Sha1, 6), 59).unwrap_err().contains("not base32"));
        assert!(totp(b"JBSWY3DPEHPK3PX!", &plan(MfaAlgorithm::Sha1, 6), 59).unwrap_err().contains("character 16"));
    }

    /// The hashes the RFC gives no vectors for, against Python's `hmac` module (OpenSSL):
    /// `hmac.new(b"12345678901234567890", struct.pack(">Q", 1), "sha384")` truncated as above.
    #[test]
    fn sha384_and_sha512_256_match_an_independent_hmac() {
        let seed = base32(b"12345678901234567890");
        for (algorithm, want) in [(MfaAlgorithm::Sha384, "46080675"), (MfaAlgorithm::Sha512_256, "28249673")] {
            assert_eq!(totp(seed.as_bytes(), &plan(algorithm, 8), 59).expect("a code").0, want, "{algorithm:?}");
        }
    }
}
