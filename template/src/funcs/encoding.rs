//! Encoding functions: base64, JSON, YAML, string conversion.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use super::{FnCtx, FnError, FnResult, Func, bytes, check_size, s, want};
use crate::value::{Value, format_float_json};

pub const FUNCS: &[(&str, Func)] = &[
    ("b64enc", b64enc),
    ("b64dec", b64dec),
    ("toJson", to_json),
    ("toRawJson", to_raw_json),
    ("toPrettyJson", to_pretty_json),
    ("fromJson", from_json),
    ("toYaml", to_yaml),
    ("fromYaml", from_yaml),
    ("toString", to_string),
    ("b32enc", b32enc),
    ("b32dec", b32dec),
    ("hexdec", hexdec),
    ("mustToJson", to_json),
    ("mustToRawJson", to_raw_json),
    ("mustToPrettyJson", to_pretty_json),
    ("mustFromJson", from_json),
];

fn b64enc(ctx: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    let b = bytes(&a[0]);
    check_size(ctx, b.len().saturating_mul(4) / 3 + 4)?;
    Ok(Value::Str(STANDARD.encode(b)))
}

/// The input without the line breaks Go's base64 and base32 decoders skip.
fn unwrapped(v: &Value) -> Vec<u8> {
    bytes(v).into_iter().filter(|b| *b != b'\r' && *b != b'\n').collect()
}

/// Decode standard base64 (line breaks ignored, as Go does). Unlike Sprig (which returns the
/// error text), invalid input is an error.
fn b64dec(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    let b = STANDARD.decode(unwrapped(&a[0])).map_err(|e| format!("illegal base64 data: {e}"))?;
    Ok(Value::from_bytes(b))
}

fn b32enc(ctx: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    let b = bytes(&a[0]);
    check_size(ctx, b.len().saturating_mul(8) / 5 + 8)?;
    Ok(Value::Str(data_encoding::BASE32.encode(&b)))
}

/// Decode standard (RFC 4648) base32; invalid input is an error, as for `b64dec`.
fn b32dec(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    let b = data_encoding::BASE32
        .decode(&unwrapped(&a[0]))
        .map_err(|e| format!("illegal base32 data at input byte {}", e.position))?;
    Ok(Value::from_bytes(b))
}

/// Decode hex (upstream's addition to Sprig); invalid input is an error, as for `b64dec`.
fn hexdec(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    let text = bytes(&a[0]);
    if let Some(c) = text.iter().find(|c| !c.is_ascii_hexdigit()) {
        return Err(format!("encoding/hex: invalid byte: U+{:04X} {:?}", c, char::from(*c)).into());
    }
    let b = hex::decode(&text).map_err(|_| "encoding/hex: odd length hex string".to_string())?;
    Ok(Value::from_bytes(b))
}

/// Write a value as JSON the way Go's `encoding/json` does (sorted keys, Go float format).
pub(crate) fn write_json(v: &Value, out: &mut String, html_escape: bool, indent: Option<usize>) {
    let nl = |out: &mut String, level: usize| {
        if indent.is_some() {
            out.push('\n');
            for _ in 0..level {
                out.push_str("  ");
            }
        }
    };
    let level = indent.unwrap_or(0);
    match v {
        Value::Nil => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int(i) | Value::Int64(i) => out.push_str(&i.to_string()),
        Value::Obj(o) => write_json_str(&o.json_text(), out, html_escape),
        Value::Float(f) => out.push_str(&format_float_json(*f)),
        Value::Str(_) | Value::Bytes(_) => write_json_str(&v.to_display(), out, html_escape),
        Value::List(l) => {
            if l.is_empty() {
                out.push_str("[]");
                return;
            }
            out.push('[');
            for (i, e) in l.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                nl(out, level + 1);
                write_json(e, out, html_escape, indent.map(|n| n + 1));
            }
            nl(out, level);
            out.push(']');
        }
        Value::Map(m) => {
            let m = m.borrow();
            if m.is_empty() {
                out.push_str("{}");
                return;
            }
            out.push('{');
            for (i, (k, e)) in m.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                nl(out, level + 1);
                write_json_str(k, out, html_escape);
                out.push(':');
                if indent.is_some() {
                    out.push(' ');
                }
                write_json(e, out, html_escape, indent.map(|n| n + 1));
            }
            nl(out, level);
            out.push('}');
        }
    }
}

fn write_json_str(text: &str, out: &mut String, html_escape: bool) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' if html_escape => out.push_str(&format!("\\u{:04x}", c as u32)),
            '\u{2028}' | '\u{2029}' => out.push_str(&format!("\\u{:04x}", c as u32)),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

fn json_with(a: &[Value], html: bool, indent: Option<usize>) -> FnResult {
    want(a, 1)?;
    let mut out = String::new();
    write_json(&a[0], &mut out, html, indent);
    Ok(Value::Str(out))
}

fn to_json(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    json_with(&a, true, None)
}

fn to_raw_json(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    json_with(&a, false, None)
}

fn to_pretty_json(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    json_with(&a, true, Some(0))
}

fn from_json(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    let j: serde_json::Value = serde_json::from_slice(&bytes(&a[0])).map_err(|e| format!("invalid JSON: {e}"))?;
    Ok(Value::from_json(&j))
}

/// YAML of a value without the trailing newline. Integral floats print as integers, as they do
/// when Go renders YAML through JSON.
fn to_yaml(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    fn norm(v: &Value) -> Value {
        match v {
            Value::Float(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => Value::Int(*f as i64),
            Value::List(l) => Value::list(l.iter().map(norm).collect()),
            Value::Map(m) => Value::map(m.borrow().iter().map(|(k, v)| (k.clone(), norm(v))).collect()),
            other => other.clone(),
        }
    }
    let y = norm(&a[0]).to_yaml();
    let text = serde_yaml::to_string(&y).map_err(|e| FnError::Msg(format!("cannot encode YAML: {e}")))?;
    Ok(Value::Str(text.strip_suffix('\n').unwrap_or(&text).to_string()))
}

fn from_yaml(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    let y: serde_yaml::Value = serde_yaml::from_slice(&bytes(&a[0])).map_err(|e| format!("invalid YAML: {e}"))?;
    Ok(Value::from_yaml(&y))
}

fn to_string(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    Ok(match &a[0] {
        Value::Bytes(b) => Value::Bytes(b.clone()),
        other => Value::Str(s(other)),
    })
}
