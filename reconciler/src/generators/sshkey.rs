//! SSHKey: a key pair as upstream writes it, the private key in OpenSSH format (`privateKey`)
//! and the public key as an `authorized_keys` line ending in a newline (`publicKey`), both with
//! the spec's comment.

use std::collections::BTreeMap;

use keyward_crds::generators::{SshKeySpec, SshKeyType};
use keyward_crds::rules::AnyGeneratorSpec;
use ssh_key::private::{EcdsaKeypair, Ed25519Keypair, KeypairData, RsaKeypair};
use ssh_key::rand_core::OsRng;
use ssh_key::{EcdsaCurve, LineEnding, PrivateKey};

use super::GenerateError;

pub use keyward_crds::rules::{ECDSA_BITS, MAX_SSH_COMMENT as MAX_COMMENT, RSA_BITS};

/// Generates a key pair as the spec asks (RSA 2048 when the spec is empty, as upstream), once
/// the spec passed the rule admission applies (`keyward_crds::rules::validate_generator_spec`).
pub fn generate(spec: &SshKeySpec) -> Result<BTreeMap<String, Vec<u8>>, GenerateError> {
    super::check(AnyGeneratorSpec::SshKey(spec))?;
    let failed = |e: ssh_key::Error| GenerateError::Failed(format!("SSHKey: {e}"));
    let data: KeypairData = match (spec.key_type, spec.key_size) {
        (SshKeyType::Rsa, bits) => {
            // One of RSA_BITS (checked above): the conversion cannot fail.
            let bits = usize::try_from(bits.unwrap_or(2048)).unwrap_or(2048);
            RsaKeypair::random(&mut OsRng, bits).map_err(failed)?.into()
        }
        (SshKeyType::Ecdsa, bits) => {
            let curve = match bits {
                Some(384) => EcdsaCurve::NistP384,
                Some(521) => EcdsaCurve::NistP521,
                _ => EcdsaCurve::NistP256,
            };
            EcdsaKeypair::random(&mut OsRng, curve).map_err(failed)?.into()
        }
        (SshKeyType::Ed25519, _) => Ed25519Keypair::random(&mut OsRng).into(),
    };
    let key = PrivateKey::new(data, spec.comment.clone().unwrap_or_default()).map_err(failed)?;
    let private = key.to_openssh(LineEnding::LF).map_err(failed)?;
    let public = key.public_key().to_openssh().map_err(failed)?;
    Ok(BTreeMap::from([
        ("privateKey".to_string(), private.as_bytes().to_vec()),
        ("publicKey".to_string(), format!("{public}\n").into_bytes()),
    ]))
}

#[cfg(test)]
mod tests {
    use ssh_key::{Algorithm, PublicKey};

    use super::*;

    fn parse(out: &BTreeMap<String, Vec<u8>>) -> (PrivateKey, PublicKey, String) {
        let private = PrivateKey::from_openssh(&out["privateKey"]).unwrap();
        let line = String::from_utf8(out["publicKey"].clone()).unwrap();
        assert!(line.ends_with('\n'), "an authorized_keys line: {line:?}");
        let public = PublicKey::from_openssh(line.trim_end()).unwrap();
        assert_eq!(private.public_key().key_data(), public.key_data(), "the pair matches");
        (private, public, line)
    }

    #[test]
    fn ed25519_keys_parse_back_with_their_comment() {
        let spec = SshKeySpec {
            key_type: SshKeyType::Ed25519,
            comment: Some("user@example.com".into()),
            ..Default::default()
        };
        let out = generate(&spec).unwrap();
        let (private, public, line) = parse(&out);
        assert_eq!(private.algorithm(), Algorithm::Ed25519);
        assert_eq!(public.comment(), "user@example.com");
        assert_eq!(private.comment(), "user@example.com");
        assert!(line.starts_with("ssh-ed25519 ") && line.ends_with(" user@example.com\n"), "{line}");
        assert!(
            String::from_utf8(out["privateKey"].clone()).unwrap().starts_with("-----BEGIN OPENSSH PRIVATE KEY-----")
        );
        assert_ne!(generate(&spec).unwrap()["privateKey"], out["privateKey"]);
    }

    #[test]
    fn rsa_by_default_at_2048_bits() {
        let out = generate(&SshKeySpec::default()).unwrap();
        let (private, _, line) = parse(&out);
        assert!(matches!(private.algorithm(), Algorithm::Rsa { .. }));
        let rsa = private.key_data().rsa().unwrap();
        assert_eq!(rsa.public.n.as_positive_bytes().unwrap().len() * 8, 2048);
        assert!(line.starts_with("ssh-rsa "), "{line}");
    }

    #[test]
    fn ecdsa_curves() {
        for (bits, curve) in [(256, EcdsaCurve::NistP256), (384, EcdsaCurve::NistP384), (521, EcdsaCurve::NistP521)] {
            let spec = SshKeySpec { key_type: SshKeyType::Ecdsa, key_size: Some(bits), ..Default::default() };
            let (private, _, _) = parse(&generate(&spec).unwrap());
            assert_eq!(private.algorithm(), Algorithm::Ecdsa { curve });
        }
    }

    #[test]
    fn sizes_outside_the_allowed_sets_and_bad_comments_are_refused() {
        for (key_type, bits, want) in [
            (SshKeyType::Rsa, 8192, "spec.keySize: 8192 is not generated for rsa"),
            (SshKeyType::Rsa, 1024, "use 2048, 3072 or 4096"),
            (SshKeyType::Ecdsa, 2048, "spec.keySize: 2048 is not generated for ecdsa"),
        ] {
            let e = generate(&SshKeySpec { key_type, key_size: Some(bits), ..Default::default() }).unwrap_err();
            assert!(e.to_string().contains(want), "{e}");
        }
        let ed = |comment: String| SshKeySpec {
            key_type: SshKeyType::Ed25519,
            comment: Some(comment),
            ..Default::default()
        };
        assert!(generate(&ed("a\nb".into())).unwrap_err().to_string().contains("one line"));
        assert!(generate(&ed("x".repeat(MAX_COMMENT + 1))).unwrap_err().to_string().contains("longer"));
        let ignored = SshKeySpec { key_size: Some(4096), ..ed(String::new()) };
        assert!(generate(&ignored).is_ok(), "keySize is ignored for ed25519, as upstream");
    }
}
