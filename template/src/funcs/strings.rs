//! Sprig string functions.

use super::printf::go_quote;
use super::{FnCtx, FnError, FnResult, Func, check_size, int, s, want, want_at_least};
use crate::value::Value;

pub const FUNCS: &[(&str, Func)] = &[
    ("upper", upper),
    ("lower", lower),
    ("title", title),
    ("untitle", untitle),
    ("trim", trim),
    ("trimAll", trim_all),
    ("trimall", trim_all),
    ("trimPrefix", trim_prefix),
    ("trimSuffix", trim_suffix),
    ("replace", replace),
    ("quote", quote),
    ("squote", squote),
    ("indent", indent),
    ("nindent", nindent),
    ("contains", contains),
    ("hasPrefix", has_prefix),
    ("hasSuffix", has_suffix),
    ("split", split),
    ("splitList", split_list),
    ("splitn", splitn),
    ("join", join),
    ("repeat", repeat),
    ("substr", substr),
    ("trunc", trunc),
    ("abbrev", abbrev),
    ("nospace", nospace),
    ("cat", cat),
    ("default", default),
    ("empty", empty),
    ("coalesce", coalesce),
    ("ternary", ternary),
    ("required", required),
    ("fail", fail),
];

fn one(a: &[Value], f: impl Fn(&str) -> String) -> FnResult {
    want(a, 1)?;
    Ok(Value::Str(f(&s(&a[0]))))
}

fn upper(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    one(&a, str::to_uppercase)
}

fn lower(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    one(&a, str::to_lowercase)
}

fn map_words(text: &str, first: impl Fn(char) -> String) -> String {
    let mut out = String::with_capacity(text.len());
    let mut prev_sep = true;
    for c in text.chars() {
        if prev_sep && c.is_alphanumeric() {
            out.push_str(&first(c));
        } else {
            out.push(c);
        }
        prev_sep = !(c.is_alphanumeric() || c == '_');
    }
    out
}

fn title(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    one(&a, |t| map_words(t, |c| c.to_uppercase().collect()))
}

/// goutils' `Uncapitalize`: the first letter after whitespace is lowered.
fn untitle(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    one(&a, |t| {
        let mut next = true;
        t.chars()
            .map(|c| {
                if super::text::go_space(c) {
                    next = true;
                    c
                } else if std::mem::take(&mut next) {
                    let mut l = c.to_lowercase();
                    match (l.next(), l.next()) {
                        (Some(x), None) => x,
                        _ => c,
                    }
                } else {
                    c
                }
            })
            .collect()
    })
}

fn trim(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    one(&a, |t| t.trim().to_string())
}

fn trim_all(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 2)?;
    let cut: Vec<char> = s(&a[0]).chars().collect();
    Ok(Value::Str(s(&a[1]).trim_matches(|c| cut.contains(&c)).to_string()))
}

fn trim_prefix(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 2)?;
    let (p, t) = (s(&a[0]), s(&a[1]));
    Ok(Value::Str(t.strip_prefix(p.as_str()).unwrap_or(&t).to_string()))
}

fn trim_suffix(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 2)?;
    let (p, t) = (s(&a[0]), s(&a[1]));
    Ok(Value::Str(t.strip_suffix(p.as_str()).unwrap_or(&t).to_string()))
}

/// `replace old new s`: every occurrence.
fn replace(ctx: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 3)?;
    let (old, new, src) = (s(&a[0]), s(&a[1]), s(&a[2]));
    let hits = if old.is_empty() { src.chars().count() + 1 } else { src.matches(old.as_str()).count() };
    check_size(ctx, src.len().saturating_add(hits.saturating_mul(new.len())))?;
    Ok(Value::Str(src.replace(old.as_str(), &new)))
}

fn quote(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    let parts: Vec<String> = a.iter().filter(|v| !matches!(v, Value::Nil)).map(|v| go_quote(&s(v))).collect();
    Ok(Value::Str(parts.join(" ")))
}

fn squote(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    let parts: Vec<String> = a.iter().filter(|v| !matches!(v, Value::Nil)).map(|v| format!("'{}'", s(v))).collect();
    Ok(Value::Str(parts.join(" ")))
}

fn do_indent(ctx: &FnCtx<'_>, a: &[Value], newline: bool) -> FnResult {
    want(a, 2)?;
    let n = usize::try_from(int(&a[0])).unwrap_or(0);
    let text = s(&a[1]);
    let lines = text.matches('\n').count() + 1;
    check_size(ctx, text.len().saturating_add(lines.saturating_mul(n)))?;
    let pad = " ".repeat(n);
    let body = format!("{pad}{}", text.replace('\n', &format!("\n{pad}")));
    Ok(Value::Str(if newline { format!("\n{body}") } else { body }))
}

fn indent(ctx: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    do_indent(ctx, &a, false)
}

fn nindent(ctx: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    do_indent(ctx, &a, true)
}

fn contains(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 2)?;
    Ok(Value::Bool(s(&a[1]).contains(s(&a[0]).as_str())))
}

fn has_prefix(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 2)?;
    Ok(Value::Bool(s(&a[1]).starts_with(s(&a[0]).as_str())))
}

fn has_suffix(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 2)?;
    Ok(Value::Bool(s(&a[1]).ends_with(s(&a[0]).as_str())))
}

fn go_split(sep: &str, text: &str, n: Option<usize>) -> Vec<String> {
    if sep.is_empty() {
        let mut parts: Vec<String> = text.chars().map(String::from).collect();
        if let Some(n) = n
            && n > 0
            && parts.len() > n
        {
            let tail: String = parts[n - 1..].concat();
            parts.truncate(n - 1);
            parts.push(tail);
        }
        return parts;
    }
    match n {
        Some(n) => text.splitn(n, sep).map(String::from).collect(),
        None => text.split(sep).map(String::from).collect(),
    }
}

fn indexed(parts: Vec<String>) -> Value {
    Value::map(parts.into_iter().enumerate().map(|(i, p)| (format!("_{i}"), Value::Str(p))).collect())
}

/// `split sep s`: a dict `{_0: …, _1: …}`.
fn split(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 2)?;
    Ok(indexed(go_split(&s(&a[0]), &s(&a[1]), None)))
}

fn split_list(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 2)?;
    Ok(Value::list(go_split(&s(&a[0]), &s(&a[1]), None).into_iter().map(Value::Str).collect()))
}

fn splitn(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 3)?;
    let n = int(&a[1]);
    if n == 0 {
        return Ok(Value::map(Default::default()));
    }
    let n = usize::try_from(n).ok();
    Ok(indexed(go_split(&s(&a[0]), &s(&a[2]), n)))
}

/// `join sep list`; a single string joins as itself.
fn join(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 2)?;
    let items: Vec<String> = match &a[1] {
        Value::List(l) => l.iter().filter(|v| !matches!(v, Value::Nil)).map(s).collect(),
        Value::Nil => Vec::new(),
        other => vec![s(other)],
    };
    Ok(Value::Str(items.join(&s(&a[0]))))
}

fn repeat(ctx: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 2)?;
    let n = int(&a[0]);
    if n < 0 {
        return Err("negative repeat count".into());
    }
    let text = s(&a[1]);
    check_size(ctx, text.len().saturating_mul(usize::try_from(n).unwrap_or(usize::MAX)))?;
    Ok(Value::Str(text.repeat(n as usize)))
}

fn byte_slice(text: &str, lo: usize, hi: usize) -> Value {
    let b = text.as_bytes();
    let hi = hi.min(b.len());
    let lo = lo.min(hi);
    Value::from_bytes(b[lo..hi].to_vec())
}

/// `substr start end s` (byte offsets, like Sprig).
fn substr(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 3)?;
    let (start, end, text) = (int(&a[0]), int(&a[1]), s(&a[2]));
    let len = text.len() as i64;
    Ok(if start < 0 {
        byte_slice(&text, 0, end.max(0) as usize)
    } else if end < 0 || end > len {
        byte_slice(&text, start as usize, text.len())
    } else {
        byte_slice(&text, start as usize, end as usize)
    })
}

fn trunc(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 2)?;
    let (c, text) = (int(&a[0]), s(&a[1]));
    let len = text.len() as i64;
    Ok(if c < 0 && len + c > 0 {
        byte_slice(&text, (len + c) as usize, text.len())
    } else if c >= 0 && len > c {
        byte_slice(&text, 0, c as usize)
    } else {
        Value::Str(text)
    })
}

fn abbrev(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 2)?;
    let (w, text) = (int(&a[0]), s(&a[1]));
    if w < 4 || text.len() as i64 <= w {
        return Ok(Value::Str(text));
    }
    let Value::Str(head) = byte_slice(&text, 0, (w - 3) as usize) else {
        return Ok(Value::Str(text));
    };
    Ok(Value::Str(format!("{head}...")))
}

fn nospace(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    one(&a, |t| t.chars().filter(|c| !c.is_whitespace()).collect())
}

fn cat(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    let parts: Vec<String> = a.iter().filter(|v| !matches!(v, Value::Nil)).map(s).collect();
    Ok(Value::Str(parts.join(" ")))
}

/// `default fallback value`: the value unless it is empty.
fn default(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want_at_least(&a, 1)?;
    match a.get(1) {
        Some(v) if v.truthy() => Ok(v.clone()),
        _ => Ok(a[0].clone()),
    }
}

fn empty(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    Ok(Value::Bool(!a[0].truthy()))
}

fn coalesce(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    Ok(a.into_iter().find(Value::truthy).unwrap_or_default())
}

/// `ternary ifTrue ifFalse condition`.
fn ternary(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 3)?;
    Ok(if a[2].truthy() { a[0].clone() } else { a[1].clone() })
}

/// `required message value`: fails with the message when the value is nil or "".
fn required(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 2)?;
    match &a[1] {
        Value::Nil => Err(FnError::Msg(s(&a[0]))),
        Value::Str(x) if x.is_empty() => Err(FnError::Msg(s(&a[0]))),
        v => Ok(v.clone()),
    }
}

fn fail(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    Err(FnError::Msg(s(&a[0])))
}
