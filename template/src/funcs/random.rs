//! Sprig's random functions, from the operating system's generator (as Sprig's `crypto/rand`).
//! Every call gives a different result: a template that calls one renders differently every
//! time (see `docs/templates.md`).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use super::{FnCtx, FnError, FnResult, Func, check_size, int, s, want};
use crate::value::Value;

pub const FUNCS: &[(&str, Func)] = &[
    ("randAlpha", rand_alpha),
    ("randAlphaNum", rand_alpha_num),
    ("randAscii", rand_ascii),
    ("randNumeric", rand_numeric),
    ("randInt", rand_int),
    ("randBytes", rand_bytes),
    ("shuffle", shuffle),
    ("uuidv4", uuidv4),
];

/// The functions of this family: none can be repeated.
pub const NAMES: &[&str] =
    &["randAlpha", "randAlphaNum", "randAscii", "randNumeric", "randInt", "randBytes", "shuffle", "uuidv4"];

/// Random bytes from the operating system.
pub(crate) fn fill(buf: &mut [u8]) -> Result<(), FnError> {
    getrandom::fill(buf).map_err(|e| FnError::Msg(format!("no random numbers: {e}")))
}

/// A uniform number below `n` (> 0).
pub(crate) fn below(n: u64) -> Result<u64, FnError> {
    let zone = u64::MAX - u64::MAX % n;
    loop {
        let mut b = [0u8; 8];
        fill(&mut b)?;
        let x = u64::from_le_bytes(b);
        if x < zone {
            return Ok(x % n);
        }
    }
}

/// `count` characters drawn from `set` (goutils' `CryptoRandom` restricted to the same set).
fn from_set(ctx: &FnCtx<'_>, a: &[Value], set: &[u8]) -> FnResult {
    want(a, 1)?;
    let count = int(&a[0]);
    if count <= 0 {
        return Ok(Value::str(""));
    }
    let count = count as usize;
    check_size(ctx, count)?;
    let mut out = String::with_capacity(count);
    for _ in 0..count {
        out.push(char::from(set[below(set.len() as u64)? as usize]));
    }
    Ok(Value::Str(out))
}

const LETTERS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const DIGITS: &[u8] = b"0123456789";

fn rand_alpha(ctx: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    from_set(ctx, &a, LETTERS)
}

fn rand_alpha_num(ctx: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    from_set(ctx, &a, b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
}

fn rand_numeric(ctx: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    from_set(ctx, &a, DIGITS)
}

/// Printable ASCII, space to `~`.
fn rand_ascii(ctx: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    let printable: Vec<u8> = (32u8..127).collect();
    from_set(ctx, &a, &printable)
}

/// `randInt min max`: an integer in [min, max).
fn rand_int(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 2)?;
    let (min, max) = (int(&a[0]), int(&a[1]));
    let span = i128::from(max) - i128::from(min);
    if span <= 0 {
        return Err("invalid argument to Intn".into());
    }
    let n = below(span as u64)?;
    Ok(Value::Int((i128::from(min) + i128::from(n)) as i64))
}

/// `randBytes n`: `n` random bytes, base64 encoded.
fn rand_bytes(ctx: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    let n = usize::try_from(int(&a[0])).map_err(|_| FnError::Msg("makeslice: len out of range".into()))?;
    check_size(ctx, n.saturating_mul(4) / 3 + 4)?;
    let mut buf = vec![0u8; n];
    fill(&mut buf)?;
    Ok(Value::Str(STANDARD.encode(buf)))
}

/// `shuffle s`: the characters of `s` in random order.
fn shuffle(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    let mut chars: Vec<char> = s(&a[0]).chars().collect();
    for i in (1..chars.len()).rev() {
        let j = below(i as u64 + 1)? as usize;
        chars.swap(i, j);
    }
    Ok(Value::Str(chars.into_iter().collect()))
}

/// `uuidv4`: a random (version 4) UUID.
fn uuidv4(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 0)?;
    let mut b = [0u8; 16];
    fill(&mut b)?;
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex::encode(b);
    Ok(Value::Str(format!("{}-{}-{}-{}-{}", &h[..8], &h[8..12], &h[12..16], &h[16..20], &h[20..])))
}
