//! Sprig integer math and conversions. Results are Go `int64`, as Sprig's are (`int` and `atoi`
//! give `int`).

use super::{FnCtx, FnError, FnResult, Func, float, int, s, want, want_at_least};
use crate::value::Value;

pub const FUNCS: &[(&str, Func)] = &[
    ("add", add),
    ("add1", add1),
    ("sub", sub),
    ("mul", mul),
    ("div", div),
    ("mod", modulo),
    ("max", max),
    ("biggest", max),
    ("min", min),
    ("atoi", atoi),
    ("int", to_int),
    ("int64", to_int64),
    ("float64", to_float),
];

fn add(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    Ok(Value::Int64(a.iter().fold(0i64, |acc, v| acc.wrapping_add(int(v)))))
}

fn add1(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    Ok(Value::Int64(int(&a[0]).wrapping_add(1)))
}

fn sub(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 2)?;
    Ok(Value::Int64(int(&a[0]).wrapping_sub(int(&a[1]))))
}

fn mul(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want_at_least(&a, 1)?;
    Ok(Value::Int64(a.iter().fold(1i64, |acc, v| acc.wrapping_mul(int(v)))))
}

fn div(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 2)?;
    let d = int(&a[1]);
    if d == 0 {
        return Err(FnError::Msg("integer divide by zero".into()));
    }
    Ok(Value::Int64(int(&a[0]).wrapping_div(d)))
}

fn modulo(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 2)?;
    let d = int(&a[1]);
    if d == 0 {
        return Err(FnError::Msg("integer divide by zero".into()));
    }
    Ok(Value::Int64(int(&a[0]).wrapping_rem(d)))
}

fn max(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want_at_least(&a, 1)?;
    Ok(Value::Int64(a.iter().map(int).max().unwrap_or(0)))
}

fn min(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want_at_least(&a, 1)?;
    Ok(Value::Int64(a.iter().map(int).min().unwrap_or(0)))
}

/// `atoi s`: decimal integer, or 0 when `s` is not one (Sprig semantics).
fn atoi(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    Ok(Value::Int(s(&a[0]).parse::<i64>().unwrap_or(0)))
}

fn to_int(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    Ok(Value::Int(int(&a[0])))
}

fn to_int64(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    Ok(Value::Int64(int(&a[0])))
}

fn to_float(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    Ok(Value::Float(float(&a[0])))
}
