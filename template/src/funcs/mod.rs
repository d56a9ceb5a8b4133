//! The function library: Go builtins, Sprig functions and the External Secrets additions.
//!
//! Every function takes its arguments as values (the piped value last) and returns a value or an
//! error. [`ALL`] lists the families; `docs/templates.md` documents every name (a test checks).

mod certs;
mod cipher;
mod collections;
mod core;
mod crypto;
mod dates;
mod encoding;
mod floats;
mod gencerts;
mod numbers;
mod paths;
mod pkcs;
pub(crate) mod printf;
mod random;
mod reflect;
mod regexp;
mod strings;
mod text;
mod url;
mod versions;

use crate::Limits;
use crate::value::Value;

/// What a function sees besides its arguments.
pub struct FnCtx<'a> {
    /// The limits of this render; functions that build large values check `max_output_bytes`.
    pub limits: &'a Limits,
}

/// Why a function failed.
#[derive(Debug)]
pub enum FnError {
    /// A message shown as `error calling NAME: message`.
    Msg(String),
    /// A map lookup without entry.
    MissingKey(String),
    /// A value would exceed a limit.
    Limit(String),
}

impl From<String> for FnError {
    fn from(s: String) -> Self {
        FnError::Msg(s)
    }
}

impl From<&str> for FnError {
    fn from(s: &str) -> Self {
        FnError::Msg(s.to_string())
    }
}

/// Result of a function.
pub type FnResult = Result<Value, FnError>;

/// A template function.
pub type Func = fn(&FnCtx<'_>, Vec<Value>) -> FnResult;

/// Function tables of every family: the one list of template functions, which the engine,
/// admission (`keyward_template::unknown_functions`) and the CLI read.
pub const ALL: &[&[(&str, Func)]] = &[
    core::FUNCS,
    strings::FUNCS,
    text::FUNCS,
    encoding::FUNCS,
    collections::FUNCS,
    numbers::FUNCS,
    floats::FUNCS,
    reflect::FUNCS,
    paths::FUNCS,
    url::FUNCS,
    versions::FUNCS,
    regexp::FUNCS,
    dates::FUNCS,
    random::FUNCS,
    crypto::FUNCS,
    cipher::FUNCS,
    gencerts::FUNCS,
    pkcs::FUNCS,
    certs::FUNCS,
];

/// Functions whose result a render cannot repeat: they read the clock or the random
/// generator (`date` and friends only when not given a time or a number).
pub fn unrepeatable() -> impl Iterator<Item = &'static str> {
    dates::CLOCK
        .iter()
        .chain(random::NAMES)
        .chain(gencerts::NAMES)
        .chain(certs::RANDOM_SALTS)
        .chain(["encryptAES"].iter())
        .copied()
}

/// The function with this name.
pub fn lookup(name: &str) -> Option<Func> {
    static TABLE: std::sync::OnceLock<std::collections::HashMap<&'static str, Func>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| ALL.iter().flat_map(|t| t.iter()).map(|(n, f)| (*n, *f)).collect()).get(name).copied()
}

/// Whether a function with this name exists.
pub fn exists(name: &str) -> bool {
    lookup(name).is_some()
}

/// Names of all functions, sorted.
pub fn names() -> Vec<&'static str> {
    let mut v: Vec<&'static str> = ALL.iter().flat_map(|t| t.iter()).map(|(n, _)| *n).collect();
    v.sort_unstable();
    v
}

// ---- argument helpers ----

/// Check the number of arguments.
pub(crate) fn want(args: &[Value], n: usize) -> Result<(), FnError> {
    if args.len() != n {
        return Err(FnError::Msg(format!("wrong number of args: got {} want {n}", args.len())));
    }
    Ok(())
}

/// Check a minimum number of arguments.
pub(crate) fn want_at_least(args: &[Value], n: usize) -> Result<(), FnError> {
    if args.len() < n {
        return Err(FnError::Msg(format!("wrong number of args: got {} want at least {n}", args.len())));
    }
    Ok(())
}

/// Sprig's `strval`: strings as they are, nil as empty, everything else printed with `%v`.
pub(crate) fn s(v: &Value) -> String {
    match v {
        Value::Str(s) => s.clone(),
        Value::Nil => String::new(),
        other => other.to_display(),
    }
}

/// Raw bytes of a string-like value.
pub(crate) fn bytes(v: &Value) -> Vec<u8> {
    match v {
        Value::Nil => Vec::new(),
        other => other.to_bytes(),
    }
}

/// `spf13/cast`'s `ToInt64`, which Sprig's integer functions use: numbers (floats truncated),
/// booleans, and strings in Go's base-prefixed syntax (`0x1F`, `017` octal, `1_000`; a fraction
/// is dropped: `"1.9"` is 1). Anything else, and a string that is not a number, is 0.
pub(crate) fn int(v: &Value) -> i64 {
    match v {
        Value::Int(i) | Value::Int64(i) => *i,
        Value::Float(f) => *f as i64,
        Value::Bool(b) => i64::from(*b),
        Value::Str(s) => parse_go_int(trim_decimal(s)).unwrap_or(0),
        _ => 0,
    }
}

/// cast's `trimDecimal`: `"12.50"` is read as `"12"`, `".5"` as `"0"`.
fn trim_decimal(s: &str) -> &str {
    let Some((int_part, frac)) = s.split_once('.') else { return s };
    let sign_ok = int_part.strip_prefix(['-', '+']).unwrap_or(int_part);
    if !sign_ok.bytes().all(|c| c.is_ascii_digit()) || !frac.bytes().all(|c| c.is_ascii_digit()) {
        return s;
    }
    match int_part {
        "" | "+" => "0",
        "-" => "-0",
        p => p,
    }
}

/// Go's `strconv.ParseInt(s, 0, 64)`.
pub(crate) fn parse_go_int(s: &str) -> Option<i64> {
    let (neg, body) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let lower = body.to_ascii_lowercase();
    let (radix, digits, prefixed) = if let Some(d) = lower.strip_prefix("0x") {
        (16, d.to_string(), true)
    } else if let Some(d) = lower.strip_prefix("0o") {
        (8, d.to_string(), true)
    } else if let Some(d) = lower.strip_prefix("0b") {
        (2, d.to_string(), true)
    } else if lower.len() > 1 && lower.starts_with('0') {
        (8, lower[1..].to_string(), true)
    } else {
        (10, lower.clone(), false)
    };
    if digits.contains('_') && !underscores_ok(&lower, radix == 16, prefixed) {
        return None;
    }
    let digits = digits.replace('_', "");
    if digits.is_empty() || digits.starts_with(['+', '-']) {
        return None;
    }
    let n = i128::from_str_radix(&digits, radix).ok()?;
    i64::try_from(if neg { -n } else { n }).ok()
}

/// Go's `underscoreOK`: underscores only between digits, or after a base prefix.
fn underscores_ok(s: &str, hex: bool, prefixed: bool) -> bool {
    let b = s.as_bytes();
    let (mut saw, mut i) = (b'^', 0);
    if prefixed && b.len() >= 2 && b[0] == b'0' && matches!(b[1], b'x' | b'o' | b'b') {
        (saw, i) = (b'0', 2);
    }
    for &c in &b[i..] {
        if c.is_ascii_digit() || (hex && c.is_ascii_hexdigit()) {
            saw = b'0';
        } else if c == b'_' {
            if saw != b'0' {
                return false;
            }
            saw = b'_';
        } else {
            if saw == b'_' {
                return false;
            }
            saw = b'!';
        }
    }
    saw != b'_'
}

/// cast's `ToFloat64`: numbers, booleans, and strings in Go's float syntax; anything else is 0.
pub(crate) fn float(v: &Value) -> f64 {
    match v {
        Value::Int(i) | Value::Int64(i) => *i as f64,
        Value::Float(f) => *f,
        Value::Bool(b) => f64::from(u8::from(*b)),
        Value::Str(s) => parse_go_float(s).unwrap_or(0.0),
        _ => 0.0,
    }
}

/// Go's `strconv.ParseFloat(s, 64)` for decimal input (`1.5`, `-2e3`, `.5`, `Inf`, `NaN`).
pub(crate) fn parse_go_float(s: &str) -> Option<f64> {
    let t = s.replace('_', "");
    if t.len() != s.len() && !s.to_ascii_lowercase().trim_start_matches(['+', '-']).starts_with("0x") {
        return None;
    }
    let lower = t.to_ascii_lowercase();
    let body = lower.trim_start_matches(['+', '-']);
    if matches!(body, "inf" | "infinity" | "nan") {
        return t.parse::<f64>().ok();
    }
    if !body.bytes().all(|c| c.is_ascii_digit() || matches!(c, b'.' | b'e' | b'+' | b'-')) {
        return None;
    }
    t.parse::<f64>().ok()
}

/// Check a number of arguments within a range.
pub(crate) fn want_between(args: &[Value], min: usize, max: usize) -> Result<(), FnError> {
    if args.len() < min || args.len() > max {
        return Err(FnError::Msg(format!("wrong number of args: got {} want {min} to {max}", args.len())));
    }
    Ok(())
}

/// A list argument (nil is an empty list).
pub(crate) fn list(v: &Value) -> Result<Vec<Value>, FnError> {
    match v {
        Value::List(l) => Ok(l.to_vec()),
        Value::Nil => Ok(Vec::new()),
        other => Err(FnError::Msg(format!("cannot use type {} as a list", other.type_name()))),
    }
}

/// Fail when a value built by a function would exceed the output limit.
pub(crate) fn check_size(ctx: &FnCtx<'_>, size: usize) -> Result<(), FnError> {
    if size > ctx.limits.max_output_bytes {
        return Err(FnError::Limit(format!("function result larger than {} bytes", ctx.limits.max_output_bytes)));
    }
    Ok(())
}
