//! Password specs: upstream's semantics (the character classes of `sethvargo/go-password`) and
//! the limits on everything a tenant writes, as one plan that admission and generation share.
//!
//! Every number here comes from a tenant as an `i64`. Release builds of an earlier version
//! added `digits + symbols` unchecked: `digits: 9223372036854775807` wrapped negative, passed
//! the check, and the letters left over (about 9.2e18) were generated until the reconciler was
//! killed for its memory, on every restart. So each count is bounded on its own before any sum
//! is formed, and sums are checked (`checked_add`), whatever the build's overflow checks.

use crate::generators::PasswordSpec;
use crate::generators::password::DEFAULT_PASSWORD_LENGTH;

use super::FieldError;

/// Longest password generated: far above any real use, small enough that a tenant cannot make
/// the reconciler build megabytes per sync.
pub const MAX_PASSWORD_LENGTH: i64 = 1024;
/// Most keys one Password fills.
pub const MAX_PASSWORD_SECRET_KEYS: usize = 64;
/// Most symbol characters a spec may list.
pub const MAX_SYMBOL_CHARACTERS: usize = 256;
/// Longest `symbolCharacters` read, in bytes: room for every allowed character four times over,
/// checked before the characters are looked at so a megabyte of them costs nothing.
pub const MAX_SYMBOL_CHARACTERS_BYTES: usize = 4 * 4 * MAX_SYMBOL_CHARACTERS;

/// Lowercase letters.
pub const LOWER: &str = "abcdefghijklmnopqrstuvwxyz";
/// Uppercase letters.
pub const UPPER: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
/// Digits.
pub const DIGITS: &str = "0123456789";
/// Upstream's default symbols.
pub const DEFAULT_SYMBOLS: &str = "~!@#$%^&*()_+`-={}|[]\\:\"<>?,./";

/// What one password is made of, after defaults and checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PasswordPlan {
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

impl PasswordPlan {
    /// Characters in one password.
    pub fn length(&self) -> usize {
        self.letters + self.digits + self.symbols
    }

    /// Most bytes one password takes before encoding: a symbol may be four bytes of UTF-8.
    pub fn max_bytes(&self) -> usize {
        self.letters + self.digits + 4 * self.symbols
    }
}

/// Applies upstream's defaults (length 24 when unset or not positive, digits and symbols 25 %
/// of the length each) and refuses what cannot be generated or is too large, naming the field
/// (`spec.length`, `spec.digits`, …; `path` is where the spec sits).
pub fn password_plan(path: &str, spec: &PasswordSpec) -> Result<PasswordPlan, FieldError> {
    let at = |field: &str, m: String| FieldError::new(format!("{path}.{field}"), m);
    let length = if spec.length > 0 { spec.length } else { DEFAULT_PASSWORD_LENGTH };
    if length > MAX_PASSWORD_LENGTH {
        return Err(at("length", format!("{length} is above the limit of {MAX_PASSWORD_LENGTH}")));
    }
    // Upstream truncates a quarter of the length.
    let digits = spec.digits.unwrap_or(length / 4);
    let symbols = spec.symbols.unwrap_or(length / 4);
    for (field, n) in [("digits", digits), ("symbols", symbols)] {
        if n < 0 {
            return Err(at(field, format!("{n} must not be negative")));
        }
        // Each bounded on its own first, so the sum below cannot wrap.
        if n > length {
            return Err(at(field, format!("{field} ({n}) exceed the length ({length})")));
        }
    }
    let classes = digits.checked_add(symbols).filter(|sum| *sum <= length);
    let Some(classes) = classes else {
        return Err(at("digits", format!("digits ({digits}) plus symbols ({symbols}) exceed the length ({length})")));
    };
    let symbol_chars = spec.symbol_characters.as_deref().unwrap_or(DEFAULT_SYMBOLS);
    let symbol_set = symbol_set(symbol_chars).map_err(|m| at("symbolCharacters", m))?;
    if symbols > 0 && symbol_set.is_empty() {
        return Err(at("symbolCharacters", format!("{symbols} symbols asked for and symbolCharacters is empty")));
    }
    let mut letter_set: Vec<char> = LOWER.chars().collect();
    if !spec.no_upper {
        letter_set.extend(UPPER.chars());
    }
    // All within 0..=MAX_PASSWORD_LENGTH above: the conversions cannot fail.
    let count = |n: i64| usize::try_from(n).unwrap_or(0);
    let (letters, digits, symbols) = (count(length - classes), count(digits), count(symbols));
    if !spec.allow_repeat {
        let short = |field: &str, class: &str, wanted: usize, available: usize| {
            at(
                field,
                format!(
                    "{wanted} {class} without repeats, but only {available} distinct {class} are available; set \
                     allowRepeat: true, or ask for fewer"
                ),
            )
        };
        // Symbols are drawn first; symbol characters that are also digits or letters may then be
        // taken from those classes, so their counts assume the worst.
        let taken_from = |set: &[char]| symbols.min(symbol_set.iter().filter(|c| set.contains(c)).count());
        let digit_set: Vec<char> = DIGITS.chars().collect();
        if symbols > symbol_set.len() {
            return Err(short("symbols", "symbols", symbols, symbol_set.len()));
        }
        let available = digit_set.len() - taken_from(&digit_set);
        if digits > available {
            return Err(short("digits", "digits", digits, available));
        }
        let available = letter_set.len() - taken_from(&letter_set);
        if letters > available {
            return Err(short("length", "letters", letters, available));
        }
    }
    Ok(PasswordPlan { letters, digits, symbols, letter_set, symbol_set, allow_repeat: spec.allow_repeat })
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

/// The keys a Password fills (`password` when none are listed), checked: at most
/// [`MAX_PASSWORD_SECRET_KEYS`], none empty, none twice.
pub fn password_keys(path: &str, spec: &PasswordSpec) -> Result<Vec<String>, FieldError> {
    let field = format!("{path}.secretKeys");
    if spec.secret_keys.is_empty() {
        return Ok(vec!["password".into()]);
    }
    if spec.secret_keys.len() > MAX_PASSWORD_SECRET_KEYS {
        let n = spec.secret_keys.len();
        return Err(FieldError::new(
            field,
            format!("{n} secretKeys are above the limit of {MAX_PASSWORD_SECRET_KEYS}"),
        ));
    }
    let mut seen = std::collections::HashSet::new();
    for key in &spec.secret_keys {
        if key.is_empty() {
            return Err(FieldError::new(field, "secretKeys must not hold an empty key"));
        }
        if !seen.insert(key.as_str()) {
            return Err(FieldError::new(field, format!("secretKeys lists {key:?} twice")));
        }
    }
    Ok(spec.secret_keys.clone())
}

#[cfg(test)]
#[path = "password_tests.rs"]
mod tests;
