//! Go `text/template` builtins.

use std::cmp::Ordering;

use super::printf::{sprint, sprintf, sprintln};
use super::{FnCtx, FnError, FnResult, Func, check_size, want, want_at_least};
use crate::value::Value;

pub const FUNCS: &[(&str, Func)] = &[
    ("and", and),
    ("or", or),
    ("not", not),
    ("eq", eq),
    ("ne", ne),
    ("lt", lt),
    ("le", le),
    ("gt", gt),
    ("ge", ge),
    ("len", len),
    ("index", index),
    ("slice", slice),
    // Sprig's `slice` replaces Go's upstream (lists only); this one also slices strings.
    ("mustSlice", slice),
    ("print", print),
    ("printf", printf),
    ("println", println),
    ("html", html),
    ("js", js),
    ("urlquery", urlquery),
    ("call", call),
];

/// `call fn args…`: data holds no functions, so this fails as Go's does for a value that is
/// not one.
fn call(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want_at_least(&a, 1)?;
    match &a[0] {
        Value::Nil => Err("call of nil".into()),
        other => Err(format!("non-function of type {}", other.type_name()).into()),
    }
}

// `and` / `or` are evaluated lazily by the evaluator; these run only if called through `call`.
fn and(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want_at_least(&a, 1)?;
    Ok(a.iter().find(|v| !v.truthy()).or(a.last()).cloned().unwrap_or_default())
}

fn or(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want_at_least(&a, 1)?;
    Ok(a.iter().find(|v| v.truthy()).or(a.last()).cloned().unwrap_or_default())
}

fn not(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    Ok(Value::Bool(!a[0].truthy()))
}

/// Go's basic-kind equality.
pub(crate) fn equal(a: &Value, b: &Value) -> Result<bool, FnError> {
    Ok(match (a, b) {
        (Value::Nil, Value::Nil) => true,
        (Value::Nil, _) | (_, Value::Nil) => false,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Int(x) | Value::Int64(x), Value::Int(y) | Value::Int64(y)) => x == y,
        (Value::Float(x), Value::Float(y)) => x == y,
        (Value::Int(x) | Value::Int64(x), Value::Float(y)) | (Value::Float(y), Value::Int(x) | Value::Int64(x)) => {
            (*x as f64) == *y
        }
        (Value::Obj(x), Value::Obj(y)) => x == y,
        (Value::Str(_) | Value::Bytes(_), Value::Str(_) | Value::Bytes(_)) => a.to_bytes() == b.to_bytes(),
        (Value::List(_) | Value::Map(_), _) | (_, Value::List(_) | Value::Map(_)) => {
            return Err(FnError::Msg(format!("non-comparable type {}", a.type_name())));
        }
        _ => return Err(format!("incompatible types for comparison: {} and {}", a.type_name(), b.type_name()).into()),
    })
}

fn eq(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want_at_least(&a, 2)?;
    for b in &a[1..] {
        if equal(&a[0], b)? {
            return Ok(Value::Bool(true));
        }
    }
    Ok(Value::Bool(false))
}

fn ne(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 2)?;
    Ok(Value::Bool(!equal(&a[0], &a[1])?))
}

fn order(a: &Value, b: &Value) -> Result<Ordering, FnError> {
    let o = match (a, b) {
        (Value::Int(x) | Value::Int64(x), Value::Int(y) | Value::Int64(y)) => x.cmp(y),
        (Value::Int(_) | Value::Int64(_) | Value::Float(_), Value::Int(_) | Value::Int64(_) | Value::Float(_)) => {
            super::float(a).partial_cmp(&super::float(b)).unwrap_or(Ordering::Equal)
        }
        (Value::Str(_) | Value::Bytes(_), Value::Str(_) | Value::Bytes(_)) => a.to_bytes().cmp(&b.to_bytes()),
        _ => {
            return Err(format!("incompatible types for comparison: {} and {}", a.type_name(), b.type_name()).into());
        }
    };
    Ok(o)
}

fn cmp_fn(a: Vec<Value>, ok: fn(Ordering) -> bool) -> FnResult {
    want(&a, 2)?;
    Ok(Value::Bool(ok(order(&a[0], &a[1])?)))
}

fn lt(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    cmp_fn(a, |o| o == Ordering::Less)
}
fn le(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    cmp_fn(a, |o| o != Ordering::Greater)
}
fn gt(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    cmp_fn(a, |o| o == Ordering::Greater)
}
fn ge(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    cmp_fn(a, |o| o != Ordering::Less)
}

fn len(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    match a[0].length() {
        Some(n) => Ok(Value::Int(n as i64)),
        None => Err(format!("len of type {}", a[0].type_name()).into()),
    }
}

/// `index x k1 k2 …`: list element or map entry. A missing map key is an error.
fn index(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want_at_least(&a, 1)?;
    let mut v = a[0].clone();
    for k in &a[1..] {
        v = match (&v, k) {
            (Value::List(l), Value::Int(i) | Value::Int64(i)) => {
                match usize::try_from(*i).ok().and_then(|i| l.get(i)) {
                    Some(x) => x.clone(),
                    None => return Err(format!("index out of range: {i}").into()),
                }
            }
            (Value::Str(_) | Value::Bytes(_), Value::Int(i) | Value::Int64(i)) => {
                let b = v.to_bytes();
                match usize::try_from(*i).ok().and_then(|i| b.get(i)) {
                    Some(x) => Value::Int(i64::from(*x)),
                    None => return Err(format!("index out of range: {i}").into()),
                }
            }
            (Value::Map(m), key) => {
                let key = super::s(key);
                let got = m.borrow().get(&key).cloned();
                match got {
                    Some(x) => x,
                    None => return Err(FnError::MissingKey(key)),
                }
            }
            (Value::Nil, _) => return Err("index of untyped nil".into()),
            (x, k) => return Err(format!("cannot index {} with {}", x.type_name(), k.type_name()).into()),
        };
    }
    Ok(v)
}

fn slice(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want_at_least(&a, 1)?;
    if a.len() > 3 {
        return Err("too many slice indexes".into());
    }
    let n = a[0].length().ok_or_else(|| format!("can't slice item of type {}", a[0].type_name()))?;
    let idx = |i: usize, d: usize| -> Result<usize, FnError> {
        match a.get(i) {
            None => Ok(d),
            Some(Value::Int(x) | Value::Int64(x)) if *x >= 0 && (*x as usize) <= n => Ok(*x as usize),
            Some(x) => Err(format!("slice index out of range: {}", x.to_display()).into()),
        }
    };
    let (lo, hi) = (idx(1, 0)?, idx(2, n)?);
    if lo > hi {
        return Err(format!("invalid slice index: {lo} > {hi}").into());
    }
    Ok(match &a[0] {
        Value::List(l) => Value::list(l[lo..hi].to_vec()),
        Value::Str(s) => match s.get(lo..hi) {
            Some(x) => Value::Str(x.to_string()),
            None => Value::from_bytes(s.as_bytes()[lo..hi].to_vec()),
        },
        Value::Bytes(b) => Value::from_bytes(b[lo..hi].to_vec()),
        other => return Err(format!("can't slice item of type {}", other.type_name()).into()),
    })
}

fn print(ctx: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    let out = sprint(&a);
    check_size(ctx, out.len())?;
    Ok(Value::from_bytes(out))
}

fn println(ctx: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    let out = sprintln(&a);
    check_size(ctx, out.len())?;
    Ok(Value::from_bytes(out))
}

fn printf(ctx: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want_at_least(&a, 1)?;
    let format = super::s(&a[0]);
    let out = sprintf(&format, &a[1..], ctx.limits.max_output_bytes).map_err(FnError::Limit)?;
    Ok(Value::from_bytes(out))
}

fn html(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    let text = String::from_utf8_lossy(&sprint(&a)).into_owned();
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '\'' => out.push_str("&#39;"),
            '"' => out.push_str("&#34;"),
            '\0' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    Ok(Value::Str(out))
}

fn js(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    let text = String::from_utf8_lossy(&sprint(&a)).into_owned();
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '"' => out.push_str("\\\""),
            '<' => out.push_str("\\u003C"),
            '>' => out.push_str("\\u003E"),
            '&' => out.push_str("\\u0026"),
            '=' => out.push_str("\\u003D"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    Ok(Value::Str(out))
}

fn urlquery(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    let mut out = String::new();
    for b in sprint(&a) {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(b as char),
            b' ' => out.push('+'),
            b => out.push_str(&format!("%{b:02X}")),
        }
    }
    Ok(Value::Str(out))
}
