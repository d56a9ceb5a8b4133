//! Sprig regular-expression functions (RE2 syntax, as in Go).

use regex::{Regex, RegexBuilder};

use super::{FnCtx, FnError, FnResult, Func, check_size, int, s, want};
use crate::value::Value;

pub const FUNCS: &[(&str, Func)] = &[
    ("regexMatch", regex_match),
    ("regexFind", regex_find),
    ("regexFindAll", regex_find_all),
    ("regexReplaceAll", regex_replace_all),
    ("regexReplaceAllLiteral", regex_replace_all_literal),
    ("regexSplit", regex_split),
    ("regexQuoteMeta", regex_quote_meta),
    // Sprig's `must` forms return the error their plain forms panic with: the same here.
    ("mustRegexMatch", regex_match),
    ("mustRegexFind", regex_find),
    ("mustRegexFindAll", regex_find_all),
    ("mustRegexReplaceAll", regex_replace_all),
    ("mustRegexReplaceAllLiteral", regex_replace_all_literal),
    ("mustRegexSplit", regex_split),
];

/// Compile with a bounded program size; an invalid pattern is an error.
fn compile(pattern: &str) -> Result<Regex, FnError> {
    RegexBuilder::new(pattern)
        .size_limit(1 << 20)
        .dfa_size_limit(1 << 20)
        .build()
        .map_err(|e| FnError::Msg(format!("invalid regular expression {pattern:?}: {e}")))
}

fn regex_match(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 2)?;
    Ok(Value::Bool(compile(&s(&a[0]))?.is_match(&s(&a[1]))))
}

fn regex_find(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 2)?;
    let text = s(&a[1]);
    Ok(Value::Str(compile(&s(&a[0]))?.find(&text).map(|m| m.as_str().to_string()).unwrap_or_default()))
}

/// `regexFindAll regex s n`: at most `n` matches (all when `n` < 0).
fn regex_find_all(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 3)?;
    let (re, text, n) = (compile(&s(&a[0]))?, s(&a[1]), int(&a[2]));
    let limit = if n < 0 { usize::MAX } else { n as usize };
    Ok(Value::list(re.find_iter(&text).take(limit).map(|m| Value::str(m.as_str())).collect()))
}

/// `regexReplaceAll regex s replacement`; `$1` and `${name}` expand capture groups.
/// Replace every match, checking the size of the result as it grows.
fn replace_bounded(ctx: &FnCtx<'_>, re: &Regex, text: &str, rep: &str, literal: bool) -> FnResult {
    let mut out = String::new();
    let mut last = 0;
    for caps in re.captures_iter(text) {
        let Some(m) = caps.get(0) else { continue };
        out.push_str(&text[last..m.start()]);
        if literal {
            out.push_str(rep);
        } else {
            caps.expand(rep, &mut out);
        }
        last = m.end();
        check_size(ctx, out.len())?;
    }
    out.push_str(&text[last..]);
    check_size(ctx, out.len())?;
    Ok(Value::Str(out))
}

/// `regexReplaceAll regex s replacement`; `$1` and `${name}` expand capture groups.
fn regex_replace_all(ctx: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 3)?;
    replace_bounded(ctx, &compile(&s(&a[0]))?, &s(&a[1]), &s(&a[2]), false)
}

fn regex_replace_all_literal(ctx: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 3)?;
    replace_bounded(ctx, &compile(&s(&a[0]))?, &s(&a[1]), &s(&a[2]), true)
}

/// `regexSplit regex s n`: at most `n` parts (all when `n` < 0).
fn regex_split(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 3)?;
    let (re, text, n) = (compile(&s(&a[0]))?, s(&a[1]), int(&a[2]));
    let parts: Vec<Value> = match n {
        0 => Vec::new(),
        n if n < 0 => re.split(&text).map(Value::str).collect(),
        n => re.splitn(&text, n as usize).map(Value::str).collect(),
    };
    Ok(Value::list(parts))
}

fn regex_quote_meta(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    Ok(Value::Str(regex::escape(&s(&a[0]))))
}
