//! Password: upstream's semantics (the character classes of `sethvargo/go-password`) with a
//! CSPRNG (the operating system's) and limits on everything a tenant controls.

use std::collections::BTreeMap;

use base64::Engine;
use keyward_crds::generators::password::DEFAULT_PASSWORD_LENGTH;
use keyward_crds::generators::{PasswordEncoding, PasswordSpec};
use rand::Rng;
use rand::TryRngCore;
use rand::rngs::OsRng;

use super::GenerateError;

/// Longest password generated: far above any real use, small enough that a tenant cannot make
/// the reconciler build megabytes per sync.
pub const MAX_LENGTH: i64 = 1024;
/// Most keys one Password fills.
pub const MAX_SECRET_KEYS: usize = 64;
/// Most symbol characters a spec may list.
pub const MAX_SYMBOL_CHARACTERS: usize = 256;
/// Longest `symbolCharacters` read, in bytes: room for every allowed character four times over,
/// checked before the characters are looked at so a megabyte of them costs nothing.
pub const MAX_SYMBOL_CHARACTERS_BYTES: usize = 4 * 4 * MAX_SYMBOL_CHARACTERS;

const LOWER: &str = "abcdefghijklmnopqrstuvwxyz";
const UPPER: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
const DIGITS: &str = "0123456789";
/// Upstream's default symbols.
pub const DEFAULT_SYMBOLS: &str = "~!@#$%^&*()_+`-={}|[]\\:\"<>?,./";

/// What one password is made of, after defaults and checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Letters in the password.
    pub letters: usize,
    /// Digits in the password.
    pub digits: usize,
    /// Symbols in the password.
    pub symbols: usize,
    /// The letters to draw from.
    pub letter_set: Vec<char>,
    /// The symbols to draw from (distinct, in the order written).
    pub symbol_set: Vec<char>,
    /// Whether a character may appear more than once.
    pub allow_repeat: bool,
}

/// Applies upstream's defaults (length 24 when unset or not positive, digits and symbols 25 %
/// of the length each) and refuses what cannot be generated or is too large.
pub fn plan(spec: &PasswordSpec) -> Result<Plan, GenerateError> {
    let invalid = |m: String| GenerateError::Invalid(format!("Password: {m}"));
    let length = if spec.length > 0 { spec.length } else { DEFAULT_PASSWORD_LENGTH };
    if length > MAX_LENGTH {
        return Err(invalid(format!("length {length} is above the limit of {MAX_LENGTH}")));
    }
    // Upstream truncates a quarter of the length.
    let digits = spec.digits.unwrap_or(length / 4);
    let symbols = spec.symbols.unwrap_or(length / 4);
    if digits < 0 || symbols < 0 {
        return Err(invalid(format!("digits ({digits}) and symbols ({symbols}) must not be negative")));
    }
    if digits + symbols > length {
        return Err(invalid(format!("digits ({digits}) plus symbols ({symbols}) exceed the length ({length})")));
    }
    let symbol_set = symbol_set(spec.symbol_characters.as_deref().unwrap_or(DEFAULT_SYMBOLS)).map_err(invalid)?;
    if symbols > 0 && symbol_set.is_empty() {
        return Err(invalid(format!("{symbols} symbols asked for and symbolCharacters is empty")));
    }
    let mut letter_set: Vec<char> = LOWER.chars().collect();
    if !spec.no_upper {
        letter_set.extend(UPPER.chars());
    }
    // Bounded by MAX_LENGTH above: the casts cannot truncate.
    let (length, digits, symbols) = (length as usize, digits as usize, symbols as usize);
    let letters = length - digits - symbols;
    if !spec.allow_repeat {
        let short = |class: &str, wanted: usize, available: usize| {
            invalid(format!(
                "{wanted} {class} without repeats, but only {available} distinct {class} are available; set \
                 allowRepeat: true, or ask for fewer"
            ))
        };
        // Symbols are drawn first; symbol characters that are also digits or letters may then be
        // taken from those classes, so their counts assume the worst.
        let taken_from = |set: &[char]| symbols.min(symbol_set.iter().filter(|c| set.contains(c)).count());
        let digit_set: Vec<char> = DIGITS.chars().collect();
        if symbols > symbol_set.len() {
            return Err(short("symbols", symbols, symbol_set.len()));
        }
        let available = digit_set.len() - taken_from(&digit_set);
        if digits > available {
            return Err(short("digits", digits, available));
        }
        let available = letter_set.len() - taken_from(&letter_set);
        if letters > available {
            return Err(short("letters", letters, available));
        }
    }
    Ok(Plan { letters, digits, symbols, letter_set, symbol_set, allow_repeat: spec.allow_repeat })
}

/// The distinct characters of `symbolCharacters`, in the order written; refused past the limits
/// in time linear in its length.
fn symbol_set(symbol_chars: &str) -> Result<Vec<char>, String> {
    if symbol_chars.len() > MAX_SYMBOL_CHARACTERS_BYTES {
        return Err(format!(
            "symbolCharacters is {} bytes long, above the limit of {MAX_SYMBOL_CHARACTERS_BYTES}",
            symbol_chars.len()
        ));
    }
    let mut seen = std::collections::HashSet::new();
    let mut set = Vec::new();
    for c in symbol_chars.chars() {
        if seen.insert(c) {
            set.push(c);
        }
        if set.len() > MAX_SYMBOL_CHARACTERS {
            return Err(format!("symbolCharacters lists more than {MAX_SYMBOL_CHARACTERS} characters"));
        }
    }
    Ok(set)
}

/// Generates one password per secret key (`password` when none are listed), encoded as asked.
pub fn generate(spec: &PasswordSpec) -> Result<BTreeMap<String, Vec<u8>>, GenerateError> {
    let keys: Vec<String> =
        if spec.secret_keys.is_empty() { vec!["password".into()] } else { spec.secret_keys.clone() };
    if keys.len() > MAX_SECRET_KEYS {
        return Err(GenerateError::Invalid(format!(
            "Password: {} secretKeys are above the limit of {MAX_SECRET_KEYS}",
            keys.len()
        )));
    }
    let plan = plan(spec)?;
    let mut out = BTreeMap::new();
    for key in keys {
        if key.is_empty() {
            return Err(GenerateError::Invalid("Password: secretKeys must not hold an empty key".into()));
        }
        let password = one(&plan);
        let encoded = encode(password.as_bytes(), spec.encoding);
        if out.insert(key.clone(), encoded).is_some() {
            return Err(GenerateError::Invalid(format!("Password: secretKeys lists {key:?} twice")));
        }
    }
    Ok(out)
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

    #[test]
    fn long_symbol_characters_are_refused_without_reading_them() {
        // Distinct characters outside ASCII: deduplicating a megabyte of them one by one took
        // tens of seconds of a generation slot.
        let many: String = (0..350_000u32).filter_map(|i| char::from_u32(0x4e00 + i % 20_000)).collect();
        let started = std::time::Instant::now();
        let e = generate(&PasswordSpec { symbol_characters: Some(many), ..spec(12) }).unwrap_err().to_string();
        assert!(e.contains("bytes long, above the limit of 4096"), "{e}");
        assert!(started.elapsed() < std::time::Duration::from_millis(100), "{:?}", started.elapsed());

        let distinct: String = (0..300u32).filter_map(|i| char::from_u32(0x4e00 + i)).collect();
        let e = generate(&PasswordSpec { symbol_characters: Some(distinct), ..spec(12) }).unwrap_err().to_string();
        assert!(e.contains("more than 256 characters"), "{e}");

        let repeated = "-_".repeat(MAX_SYMBOL_CHARACTERS_BYTES / 2);
        let plan = plan(&PasswordSpec { symbol_characters: Some(repeated), symbols: Some(2), ..spec(12) }).unwrap();
        assert_eq!(plan.symbol_set, vec!['-', '_'], "duplicates within the byte limit are dropped, in order");
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
