//! Password: upstream's semantics (the character classes of `sethvargo/go-password`) with a
//! CSPRNG (the operating system's) and limits on everything a tenant controls.

use std::collections::BTreeMap;

use base64::Engine;
use keyward_crds::generators::{PasswordEncoding, PasswordSpec};
pub use keyward_crds::rules::{
    DEFAULT_SYMBOLS, MAX_PASSWORD_LENGTH as MAX_LENGTH, MAX_PASSWORD_SECRET_KEYS as MAX_SECRET_KEYS,
    MAX_SYMBOL_CHARACTERS, MAX_SYMBOL_CHARACTERS_BYTES, PasswordPlan as Plan,
};
use keyward_crds::rules::{DIGITS, FieldError, password_keys, password_plan};
use rand::Rng;
use rand::TryRngCore;
use rand::rngs::OsRng;

use super::GenerateError;

fn invalid(e: FieldError) -> GenerateError {
    GenerateError::Invalid(format!("Password: {e}"))
}

/// The plan of a spec: upstream's defaults and Keyward's limits, the rule admission applies
/// (`keyward_crds::rules::password_plan`).
pub fn plan(spec: &PasswordSpec) -> Result<Plan, GenerateError> {
    password_plan("spec", spec).map_err(invalid)
}

/// Generates one password per secret key (`password` when none are listed), encoded as asked.
pub fn generate(spec: &PasswordSpec) -> Result<BTreeMap<String, Vec<u8>>, GenerateError> {
    let keys = password_keys("spec", spec).map_err(invalid)?;
    let plan = plan(spec)?;
    Ok(keys.into_iter().map(|key| (key, encode(one(&plan).as_bytes(), spec.encoding))).collect())
}

/// One password of the plan: the characters of each class drawn from the OS's CSPRNG, then
/// shuffled so no class sits at a predictable position.
pub fn one(plan: &Plan) -> String {
    let mut rng = OsRng.unwrap_err();
    let mut used: Vec<char> = Vec::with_capacity(plan.letters + plan.digits + plan.symbols);
    let digits: Vec<char> = DIGITS.chars().collect();
    // Symbols first: plan() counted what the later classes have left in the worst case.
    for (count, set) in [(plan.symbols, &plan.symbol_set), (plan.digits, &digits), (plan.letters, &plan.letter_set)] {
        // Without repeats, a class draws from what is still unused.
        let mut pool: Vec<char> =
            if plan.allow_repeat { set.clone() } else { set.iter().copied().filter(|c| !used.contains(c)).collect() };
        for _ in 0..count {
            if pool.is_empty() {
                // plan() rules this out; stop short rather than panic if it ever did not.
                break;
            }
            let i = rng.random_range(0..pool.len());
            if plan.allow_repeat {
                used.push(pool[i]);
            } else {
                used.push(pool.swap_remove(i));
            }
        }
    }
    // Fisher-Yates.
    for i in (1..used.len()).rev() {
        let j = rng.random_range(0..=i);
        used.swap(i, j);
    }
    used.into_iter().collect()
}

/// Upstream's encodings of a generated password.
pub fn encode(raw: &[u8], encoding: PasswordEncoding) -> Vec<u8> {
    match encoding {
        PasswordEncoding::Raw => raw.to_vec(),
        PasswordEncoding::Base64 => base64::engine::general_purpose::STANDARD.encode(raw).into_bytes(),
        PasswordEncoding::Base64url => base64::engine::general_purpose::URL_SAFE.encode(raw).into_bytes(),
        PasswordEncoding::Hex => hex::encode(raw).into_bytes(),
        PasswordEncoding::Base32 => base32(raw).into_bytes(),
    }
}

/// RFC 4648 Base32 with padding (Go's `base32.StdEncoding`).
fn base32(raw: &[u8]) -> String {
    const ALPHABET: &[u8; 32] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    let mut out = String::with_capacity(raw.len().div_ceil(5) * 8);
    for chunk in raw.chunks(5) {
        let mut block = [0u8; 5];
        block[..chunk.len()].copy_from_slice(chunk);
        let bits = block.iter().fold(0u64, |acc, b| (acc << 8) | u64::from(*b));
        // Characters that carry input bits; the rest of the 8 are padding.
        let chars = (chunk.len() * 8).div_ceil(5);
        for i in 0..8 {
            if i < chars {
                out.push(char::from(ALPHABET[((bits >> (35 - 5 * i)) & 31) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use keyward_crds::rules::{LOWER, UPPER};

    use super::*;

    fn spec(length: i64) -> PasswordSpec {
        PasswordSpec { length, ..Default::default() }
    }

    fn count(s: &str, set: &str) -> usize {
        s.chars().filter(|c| set.contains(*c)).count()
    }

    #[test]
    fn defaults_are_upstreams() {
        let p = plan(&PasswordSpec { length: 0, ..Default::default() }).unwrap();
        assert_eq!((p.letters, p.digits, p.symbols), (12, 6, 6), "length 24, a quarter digits and symbols");
        let out = generate(&spec(24)).unwrap();
        assert_eq!(out.keys().collect::<Vec<_>>(), ["password"]);
        let pw = String::from_utf8(out["password"].clone()).unwrap();
        assert_eq!(pw.chars().count(), 24);
        assert_eq!(count(&pw, DIGITS), 6);
        assert_eq!(count(&pw, DEFAULT_SYMBOLS), 6);
        assert_eq!(count(&pw, LOWER) + count(&pw, UPPER), 12);
        let p = plan(&spec(42)).unwrap();
        assert_eq!((p.digits, p.symbols), (10, 10), "truncated, as upstream");
    }

    #[test]
    fn classes_counts_and_no_repeats() {
        let s = PasswordSpec {
            length: 30,
            digits: Some(5),
            symbols: Some(4),
            symbol_characters: Some("-_$@".into()),
            no_upper: true,
            ..Default::default()
        };
        for _ in 0..50 {
            let pw = String::from_utf8(generate(&s).unwrap().remove("password").unwrap()).unwrap();
            assert_eq!(pw.chars().count(), 30);
            assert_eq!(count(&pw, DIGITS), 5, "{pw}");
            assert_eq!(count(&pw, "-_$@"), 4, "{pw}");
            assert_eq!(count(&pw, UPPER), 0, "noUpper: {pw}");
            assert_eq!(count(&pw, LOWER), 21, "{pw}");
            let distinct: HashSet<char> = pw.chars().collect();
            assert_eq!(distinct.len(), 30, "allowRepeat false: {pw}");
        }
    }

    #[test]
    fn repeats_when_allowed_and_passwords_differ() {
        let s = PasswordSpec { length: 200, digits: Some(100), symbols: Some(0), allow_repeat: true, ..spec(0) };
        let a = generate(&s).unwrap().remove("password").unwrap();
        let b = generate(&s).unwrap().remove("password").unwrap();
        assert_eq!(a.len(), 200);
        assert_ne!(a, b);
        assert_eq!(count(std::str::from_utf8(&a).unwrap(), DIGITS), 100);
    }

    #[test]
    fn impossible_and_oversized_specs_are_refused_with_what_to_change() {
        let cases = [
            (PasswordSpec { length: 80, digits: Some(0), symbols: Some(0), ..spec(0) }, "80 letters without repeats"),
            (PasswordSpec { digits: Some(11), ..spec(30) }, "11 digits without repeats"),
            (PasswordSpec { symbols: Some(5), symbol_characters: Some("ab".into()), ..spec(30) }, "symbols"),
            (PasswordSpec { digits: Some(10), symbols: Some(10), ..spec(12) }, "exceed the length (12)"),
            (PasswordSpec { digits: Some(-1), ..spec(12) }, "must not be negative"),
            (PasswordSpec { symbols: Some(1), symbol_characters: Some(String::new()), ..spec(12) }, "is empty"),
            (spec(MAX_LENGTH + 1), "above the limit"),
            (spec(i64::MAX), "above the limit"),
            (PasswordSpec { secret_keys: vec!["a".into(), "a".into()], ..spec(8) }, "twice"),
            (PasswordSpec { secret_keys: vec![String::new()], ..spec(8) }, "empty key"),
            (PasswordSpec { secret_keys: (0..65).map(|i| i.to_string()).collect(), ..spec(8) }, "secretKeys"),
        ];
        for (s, want) in cases {
            let e = generate(&s).unwrap_err().to_string();
            assert!(e.contains(want), "{e} should mention {want:?}");
        }
        let ok = PasswordSpec { length: 80, digits: Some(0), symbols: Some(0), allow_repeat: true, ..spec(0) };
        assert!(generate(&ok).is_ok(), "the same with allowRepeat");
    }

    /// The spec that crash-looped the shared reconciler in release builds: refused, at once.
    #[test]
    fn the_wrapping_spec_is_refused_before_anything_is_generated() {
        let started = std::time::Instant::now();
        let wrapping = PasswordSpec { digits: Some(i64::MAX), allow_repeat: true, ..spec(0) };
        let e = generate(&wrapping).unwrap_err().to_string();
        assert!(e.starts_with("Password: spec.digits: "), "{e}");
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
    }

    #[test]
    fn symbols_that_are_letters_are_never_repeated() {
        let s = PasswordSpec {
            length: 53,
            digits: Some(0),
            symbols: Some(2),
            symbol_characters: Some("ab".into()),
            ..spec(0)
        };
        let e = generate(&s).unwrap_err().to_string();
        assert!(e.contains("51 letters without repeats, but only 50"), "a and b are symbols then: {e}");
        let s = PasswordSpec { length: 52, ..s };
        let pw = String::from_utf8(generate(&s).unwrap().remove("password").unwrap()).unwrap();
        assert_eq!(pw.chars().collect::<HashSet<char>>().len(), 52, "every letter once: {pw}");
        let s = PasswordSpec {
            length: 12,
            digits: Some(0),
            symbols: Some(2),
            symbol_characters: Some("ab".into()),
            ..spec(0)
        };
        for _ in 0..50 {
            let pw = String::from_utf8(generate(&s).unwrap().remove("password").unwrap()).unwrap();
            let distinct: HashSet<char> = pw.chars().collect();
            assert_eq!(distinct.len(), 12, "{pw}");
        }
    }

    #[test]
    fn keys_and_encodings() {
        let s = PasswordSpec { secret_keys: vec!["key1".into(), "key2".into()], ..spec(36) };
        let out = generate(&s).unwrap();
        assert_eq!(out.keys().collect::<Vec<_>>(), ["key1", "key2"]);
        assert_ne!(out["key1"], out["key2"]);
        assert_eq!(encode(b"foobar", PasswordEncoding::Base32), b"MZXW6YTBOI======");
        assert_eq!(encode(b"fooba", PasswordEncoding::Base32), b"MZXW6YTB");
        assert_eq!(encode(b"f", PasswordEncoding::Base32), b"MY======");
        assert_eq!(encode(b"\xfb\xff", PasswordEncoding::Base64), b"+/8=");
        assert_eq!(encode(b"\xfb\xff", PasswordEncoding::Base64url), b"-_8=");
        assert_eq!(encode(b"ab", PasswordEncoding::Hex), b"6162");
        assert_eq!(encode(b"ab", PasswordEncoding::Raw), b"ab");
        let hexed = generate(&PasswordSpec { encoding: PasswordEncoding::Hex, ..spec(16) }).unwrap();
        assert_eq!(hexed["password"].len(), 32);
    }
}
