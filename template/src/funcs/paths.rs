//! Sprig's path functions: `path` (slash-separated) and `filepath` (`os*`, the same on Linux,
//! where the controller runs).

use super::{FnCtx, FnResult, Func, s, want};
use crate::value::Value;

pub const FUNCS: &[(&str, Func)] = &[
    ("base", base),
    ("dir", dir),
    ("clean", clean),
    ("ext", ext),
    ("isAbs", is_abs),
    ("osBase", base),
    ("osDir", dir),
    ("osClean", clean),
    ("osExt", ext),
    ("osIsAbs", is_abs),
];

/// Go's `path.Clean`: the shortest equivalent path, lexically.
pub(crate) fn clean_path(p: &str) -> String {
    if p.is_empty() {
        return ".".into();
    }
    let rooted = p.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for seg in p.split('/') {
        match seg {
            "" | "." => {}
            ".." => match parts.last() {
                Some(&l) if l != ".." => {
                    parts.pop();
                }
                _ if rooted => {}
                _ => parts.push(".."),
            },
            s => parts.push(s),
        }
    }
    let joined = parts.join("/");
    match (rooted, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".into(),
        (false, false) => joined,
    }
}

fn base(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    let p = s(&a[0]);
    if p.is_empty() {
        return Ok(Value::str("."));
    }
    let t = p.trim_end_matches('/');
    if t.is_empty() {
        return Ok(Value::str("/"));
    }
    Ok(Value::str(t.rsplit('/').next().unwrap_or(t)))
}

fn dir(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    let p = s(&a[0]);
    let d = match p.rfind('/') {
        Some(i) => &p[..=i],
        None => "",
    };
    Ok(Value::Str(clean_path(d)))
}

fn clean(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    Ok(Value::Str(clean_path(&s(&a[0]))))
}

/// The extension: from the last `.` of the last element, or "".
fn ext(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    let p = s(&a[0]);
    for (i, c) in p.char_indices().rev() {
        match c {
            '/' => break,
            '.' => return Ok(Value::str(&p[i..])),
            _ => {}
        }
    }
    Ok(Value::str(""))
}

fn is_abs(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    Ok(Value::Bool(s(&a[0]).starts_with('/')))
}
