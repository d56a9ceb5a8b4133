//! The function library: Go builtins, Sprig functions and the External Secrets additions.
//!
//! Every function takes its arguments as values (the piped value last) and returns a value or an
//! error. [`ALL`] lists the families; `docs/templates.md` documents every name (a test checks).

mod certs;
mod collections;
mod core;
mod crypto;
mod encoding;
mod numbers;
mod pkcs;
pub(crate) mod printf;
mod regexp;
mod strings;

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

/// Function tables of every family.
pub const ALL: &[&[(&str, Func)]] = &[
    core::FUNCS,
    strings::FUNCS,
    encoding::FUNCS,
    collections::FUNCS,
    numbers::FUNCS,
    regexp::FUNCS,
    crypto::FUNCS,
    pkcs::FUNCS,
    certs::FUNCS,
];

/// The function with this name.
pub fn lookup(name: &str) -> Option<Func> {
    ALL.iter().flat_map(|t| t.iter()).find(|(n, _)| *n == name).map(|(_, f)| *f)
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

/// Sprig's `toInt64`: numbers, numeric strings and booleans; anything else is 0.
pub(crate) fn int(v: &Value) -> i64 {
    match v {
        Value::Int(i) => *i,
        Value::Float(f) => *f as i64,
        Value::Bool(b) => i64::from(*b),
        Value::Str(s) => {
            let t = s.trim();
            t.parse::<i64>().ok().or_else(|| t.parse::<f64>().ok().map(|f| f as i64)).unwrap_or(0)
        }
        _ => 0,
    }
}

/// Sprig's `toFloat64`.
pub(crate) fn float(v: &Value) -> f64 {
    match v {
        Value::Int(i) => *i as f64,
        Value::Float(f) => *f,
        Value::Bool(b) => f64::from(u8::from(*b)),
        Value::Str(s) => s.trim().parse::<f64>().unwrap_or(0.0),
        _ => 0.0,
    }
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
