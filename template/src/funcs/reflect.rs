//! Sprig's reflection functions. A value's Go type is the one upstream's functions give it
//! (`int` for constants and `len`, `int64` for Sprig's integer math, `float64`, `string`,
//! `time.Time`, …); lists and dicts are `[]interface {}` and `map[string]interface {}`
//! whichever function built them.

use super::{FnCtx, FnResult, Func, s, want};
use crate::value::Value;

pub const FUNCS: &[(&str, Func)] = &[
    ("typeOf", type_of),
    ("typeIs", type_is),
    ("typeIsLike", type_is_like),
    ("kindOf", kind_of),
    ("kindIs", kind_is),
    ("deepEqual", deep_equal),
];

/// `%T`.
pub(crate) fn type_text(v: &Value) -> &'static str {
    match v {
        Value::Nil => "<nil>",
        Value::Bytes(_) => "[]uint8",
        other => other.type_name(),
    }
}

/// `reflect.Value.Kind()`.
pub(crate) fn kind(v: &Value) -> &'static str {
    match v {
        Value::Nil => "invalid",
        Value::Bool(_) => "bool",
        Value::Int(_) => "int",
        Value::Int64(_) => "int64",
        Value::Float(_) => "float64",
        Value::Str(_) => "string",
        Value::Bytes(_) | Value::List(_) => "slice",
        Value::Map(_) => "map",
        Value::Obj(o) => o.kind(),
    }
}

fn type_of(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    Ok(Value::str(type_text(&a[0])))
}

fn type_is(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 2)?;
    Ok(Value::Bool(s(&a[0]) == type_text(&a[1])))
}

/// `typeIsLike t x`: the type is `t` or `*t`.
fn type_is_like(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 2)?;
    let (t, actual) = (s(&a[0]), type_text(&a[1]));
    Ok(Value::Bool(t == actual || format!("*{t}") == actual))
}

fn kind_of(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    Ok(Value::str(kind(&a[0])))
}

fn kind_is(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 2)?;
    Ok(Value::Bool(s(&a[0]) == kind(&a[1])))
}

/// `reflect.DeepEqual`: same types and equal contents (`1` and `int64 1` differ).
pub(crate) fn deep_eq(x: &Value, y: &Value) -> bool {
    match (x, y) {
        (Value::Nil, Value::Nil) => true,
        (Value::Bool(a), Value::Bool(b)) => a == b,
        (Value::Int(a), Value::Int(b)) | (Value::Int64(a), Value::Int64(b)) => a == b,
        (Value::Float(a), Value::Float(b)) => a == b,
        (Value::Str(a), Value::Str(b)) => a == b,
        (Value::Bytes(a), Value::Bytes(b)) => a == b,
        (Value::List(a), Value::List(b)) => a.len() == b.len() && a.iter().zip(b.iter()).all(|(p, q)| deep_eq(p, q)),
        (Value::Map(a), Value::Map(b)) => {
            if std::rc::Rc::ptr_eq(a, b) {
                return true;
            }
            let (a, b) = (a.borrow(), b.borrow());
            a.len() == b.len() && a.iter().all(|(k, v)| b.get(k).is_some_and(|w| deep_eq(v, w)))
        }
        (Value::Obj(a), Value::Obj(b)) => a == b,
        _ => false,
    }
}

fn deep_equal(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 2)?;
    Ok(Value::Bool(deep_eq(&a[0], &a[1])))
}
