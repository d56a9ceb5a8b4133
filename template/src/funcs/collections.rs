//! Sprig list and dict functions.

use std::collections::BTreeMap;

use super::core::equal;
use super::{FnCtx, FnError, FnResult, Func, int, list, s, want, want_at_least};
use crate::value::{MapRef, Value};

pub const FUNCS: &[(&str, Func)] = &[
    ("list", list_fn),
    ("dict", dict),
    ("get", get),
    ("set", set),
    ("unset", unset),
    ("keys", keys),
    ("values", values),
    ("hasKey", has_key),
    ("pluck", pluck),
    ("pick", pick),
    ("omit", omit),
    ("merge", merge),
    ("mergeOverwrite", merge_overwrite),
    ("deepCopy", deep_copy),
    ("first", first),
    ("last", last),
    ("rest", rest),
    ("initial", initial),
    ("append", append),
    ("push", append),
    ("prepend", prepend),
    ("concat", concat),
    ("reverse", reverse),
    ("compact", compact),
    ("uniq", uniq),
    ("has", has),
    ("without", without),
    ("sortAlpha", sort_alpha),
    ("until", until),
    ("tuple", list_fn),
    ("dig", dig),
    ("chunk", chunk),
    ("toStrings", to_strings),
    ("all", all),
    ("any", any),
    ("mustAppend", append),
    ("mustPush", append),
    ("mustPrepend", prepend),
    ("mustFirst", first),
    ("mustLast", last),
    ("mustRest", rest),
    ("mustInitial", initial),
    ("mustReverse", reverse),
    ("mustCompact", compact),
    ("mustUniq", uniq),
    ("mustHas", has),
    ("mustWithout", without),
    ("mustChunk", chunk),
    ("mustMerge", merge),
    ("mustMergeOverwrite", merge_overwrite),
    ("mustDeepCopy", deep_copy),
];

/// `dig k1 k2 … default dict`: the value at the path of keys, or `default` where one is
/// missing.
fn dig(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    if a.len() < 3 {
        return Err("dig needs at least three arguments".into());
    }
    let (keys, rest) = a.split_at(a.len() - 2);
    let (default, mut at) = (&rest[0], rest[1].clone());
    for (i, k) in keys.iter().enumerate() {
        let Value::Str(k) = k else {
            return Err(format!("interface conversion: interface {{}} is {}, not string", k.type_name()).into());
        };
        let Value::Map(m) = &at else {
            return Err(format!(
                "interface conversion: interface {{}} is {}, not map[string]interface {{}}",
                at.type_name()
            )
            .into());
        };
        let next = m.borrow().get(k).cloned();
        match next {
            None => return Ok(default.clone()),
            Some(v) if i + 1 == keys.len() => return Ok(v),
            Some(v) => at = v,
        }
    }
    Ok(default.clone())
}

/// `chunk size list`: lists of `size` elements (the last one may be shorter).
fn chunk(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 2)?;
    let size = int(&a[0]);
    let items = list(&a[1])?;
    if size <= 0 {
        return Err(format!("invalid chunk size {size}").into());
    }
    let chunks = items.chunks(size as usize).map(|c| Value::list(c.to_vec())).collect();
    Ok(Value::list(chunks))
}

/// `toStrings x`: the elements of a list as strings (nil elements dropped); any other value is
/// a list of its text.
fn to_strings(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    let items = match &a[0] {
        Value::List(l) => l.iter().filter(|v| !matches!(v, Value::Nil)).map(|v| Value::Str(s(v))).collect(),
        Value::Nil => Vec::new(),
        other => vec![Value::Str(s(other))],
    };
    Ok(Value::list(items))
}

/// `all x …`: every argument is non-empty.
fn all(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    Ok(Value::Bool(a.iter().all(Value::truthy)))
}

/// `any x …`: some argument is non-empty.
fn any(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    Ok(Value::Bool(a.iter().any(Value::truthy)))
}

fn map_arg(v: &Value) -> Result<MapRef, FnError> {
    match v {
        Value::Map(m) => Ok(m.clone()),
        other => Err(FnError::Msg(format!("expected a dict, got {}", other.type_name()))),
    }
}

fn list_fn(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    Ok(Value::list(a))
}

/// `dict k1 v1 k2 v2 …`; a key without value maps to "".
fn dict(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    let mut m = BTreeMap::new();
    for pair in a.chunks(2) {
        m.insert(s(&pair[0]), pair.get(1).cloned().unwrap_or_else(|| Value::str("")));
    }
    Ok(Value::map(m))
}

/// `get dict key`: the entry, or "" when absent (Sprig semantics; use `index` to require it).
fn get(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 2)?;
    let m = map_arg(&a[0])?;
    let v = m.borrow().get(&s(&a[1])).cloned();
    Ok(v.unwrap_or_else(|| Value::str("")))
}

fn set(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 3)?;
    let m = map_arg(&a[0])?;
    // A copy, so that a dict can never contain itself.
    m.borrow_mut().insert(s(&a[1]), a[2].deep_clone());
    Ok(Value::Map(m))
}

fn unset(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 2)?;
    let m = map_arg(&a[0])?;
    m.borrow_mut().remove(&s(&a[1]));
    Ok(Value::Map(m))
}

/// Keys of one or more dicts, sorted.
fn keys(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    let mut out = Vec::new();
    for d in &a {
        out.extend(map_arg(d)?.borrow().keys().cloned());
    }
    out.sort();
    Ok(Value::list(out.into_iter().map(Value::Str).collect()))
}

fn values(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    Ok(Value::list(map_arg(&a[0])?.borrow().values().cloned().collect()))
}

fn has_key(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 2)?;
    Ok(Value::Bool(map_arg(&a[0])?.borrow().contains_key(&s(&a[1]))))
}

fn pluck(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want_at_least(&a, 1)?;
    let key = s(&a[0]);
    let mut out = Vec::new();
    for d in &a[1..] {
        if let Some(v) = map_arg(d)?.borrow().get(&key) {
            out.push(v.clone());
        }
    }
    Ok(Value::list(out))
}

fn pick(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want_at_least(&a, 1)?;
    let m = map_arg(&a[0])?;
    let wanted: Vec<String> = a[1..].iter().map(s).collect();
    let out = m.borrow().iter().filter(|(k, _)| wanted.contains(k)).map(|(k, v)| (k.clone(), v.clone())).collect();
    Ok(Value::map(out))
}

fn omit(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want_at_least(&a, 1)?;
    let m = map_arg(&a[0])?;
    let dropped: Vec<String> = a[1..].iter().map(s).collect();
    let out = m.borrow().iter().filter(|(k, _)| !dropped.contains(k)).map(|(k, v)| (k.clone(), v.clone())).collect();
    Ok(Value::map(out))
}

fn merge_into(dst: &MapRef, src: &MapRef, overwrite: bool) {
    if std::rc::Rc::ptr_eq(dst, src) {
        return;
    }
    let src = src.borrow().clone();
    let mut d = dst.borrow_mut();
    for (k, v) in src {
        match (d.get(&k), &v) {
            (Some(Value::Map(dm)), Value::Map(sm)) => {
                let (dm, sm) = (dm.clone(), sm.clone());
                drop(d);
                merge_into(&dm, &sm, overwrite);
                d = dst.borrow_mut();
            }
            (Some(existing), _) if existing.truthy() && !overwrite => {}
            _ => {
                d.insert(k, v.deep_clone());
            }
        }
    }
}

fn merge_with(a: Vec<Value>, overwrite: bool) -> FnResult {
    want_at_least(&a, 1)?;
    let dst = map_arg(&a[0])?;
    for src in &a[1..] {
        merge_into(&dst, &map_arg(src)?, overwrite);
    }
    Ok(Value::Map(dst))
}

/// `merge dst src…`: deep merge; keys already set in `dst` win.
fn merge(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    merge_with(a, false)
}

/// `mergeOverwrite dst src…`: deep merge; later sources win.
fn merge_overwrite(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    merge_with(a, true)
}

fn deep_copy(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    Ok(a[0].deep_clone())
}

fn first(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    Ok(list(&a[0])?.first().cloned().unwrap_or_default())
}

fn last(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    Ok(list(&a[0])?.last().cloned().unwrap_or_default())
}

fn rest(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    let l = list(&a[0])?;
    Ok(Value::list(l.get(1..).map(<[Value]>::to_vec).unwrap_or_default()))
}

fn initial(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    let mut l = list(&a[0])?;
    l.pop();
    Ok(Value::list(l))
}

fn append(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 2)?;
    let mut l = list(&a[0])?;
    l.push(a[1].clone());
    Ok(Value::list(l))
}

fn prepend(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 2)?;
    let mut l = list(&a[0])?;
    l.insert(0, a[1].clone());
    Ok(Value::list(l))
}

fn concat(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    let mut out = Vec::new();
    for l in &a {
        out.extend(list(l)?);
    }
    Ok(Value::list(out))
}

fn reverse(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    let mut l = list(&a[0])?;
    l.reverse();
    Ok(Value::list(l))
}

fn compact(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    Ok(Value::list(list(&a[0])?.into_iter().filter(Value::truthy).collect()))
}

fn same(x: &Value, y: &Value) -> bool {
    equal(x, y).unwrap_or_else(|_| x.to_display() == y.to_display() && x.type_name() == y.type_name())
}

fn uniq(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    let mut out: Vec<Value> = Vec::new();
    for v in list(&a[0])? {
        if !out.iter().any(|o| same(o, &v)) {
            out.push(v);
        }
    }
    Ok(Value::list(out))
}

/// `has needle list`.
fn has(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 2)?;
    Ok(Value::Bool(list(&a[1])?.iter().any(|v| same(v, &a[0]))))
}

/// `without list items…`.
fn without(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want_at_least(&a, 1)?;
    let l = list(&a[0])?;
    Ok(Value::list(l.into_iter().filter(|v| !a[1..].iter().any(|x| same(x, v))).collect()))
}

fn sort_alpha(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    let mut items: Vec<String> = match &a[0] {
        Value::List(l) => l.iter().map(s).collect(),
        other => vec![s(other)],
    };
    items.sort();
    Ok(Value::list(items.into_iter().map(Value::Str).collect()))
}

/// `until n`: the list 0..n, bounded by the range-iteration limit.
fn until(ctx: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    let n = int(&a[0]);
    if n.unsigned_abs() as usize > ctx.limits.max_range_iterations {
        return Err(FnError::Limit(format!("until {n} exceeds {} items", ctx.limits.max_range_iterations)));
    }
    let items: Vec<Value> =
        if n >= 0 { (0..n).map(Value::Int).collect() } else { (n + 1..=0).rev().map(Value::Int).collect() };
    Ok(Value::list(items))
}
