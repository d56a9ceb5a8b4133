//! Sprig's `urlParse` and `urlJoin`, with the parsing and escaping rules of Go's `net/url`.

use std::collections::BTreeMap;

use super::{FnCtx, FnError, FnResult, Func, s, want};
use crate::value::Value;

pub const FUNCS: &[(&str, Func)] = &[("urlParse", url_parse), ("urlJoin", url_join)];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Path,
    Host,
    UserPassword,
    Fragment,
}

/// Go's `shouldEscape`.
fn should_escape(c: u8, mode: Mode) -> bool {
    if c.is_ascii_alphanumeric() {
        return false;
    }
    if mode == Mode::Host && b"!$&'()*+,;=:[]<>\"".contains(&c) {
        return false;
    }
    match c {
        b'-' | b'_' | b'.' | b'~' => false,
        b'$' | b'&' | b'+' | b',' | b'/' | b':' | b';' | b'=' | b'?' | b'@' => match mode {
            Mode::Path => c == b'?',
            Mode::UserPassword => matches!(c, b'@' | b'/' | b'?' | b':'),
            Mode::Fragment => false,
            Mode::Host => true,
        },
        b'!' | b'(' | b')' | b'*' if mode == Mode::Fragment => false,
        _ => true,
    }
}

fn escape(text: &str, mode: Mode) -> String {
    let mut out = String::with_capacity(text.len());
    for &b in text.as_bytes() {
        if should_escape(b, mode) {
            out.push_str(&format!("%{b:02X}"));
        } else {
            out.push(char::from(b));
        }
    }
    out
}

fn unescape(text: &str, mode: Mode) -> Result<String, String> {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let hexpair = b.get(i + 1..i + 3).filter(|h| h.iter().all(u8::is_ascii_hexdigit));
                let Some(h) = hexpair else {
                    let bad = text.get(i..(i + 3).min(text.len())).unwrap_or("%");
                    return Err(format!("invalid URL escape {}", super::printf::go_quote(bad)));
                };
                out.push(u8::from_str_radix(std::str::from_utf8(h).unwrap_or("00"), 16).unwrap_or(0));
                i += 3;
            }
            c if mode == Mode::Host && c < 0x80 && should_escape(c, mode) => {
                return Err(format!(
                    "invalid character {} in host name",
                    super::printf::go_quote(&char::from(c).to_string())
                ));
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// A user name and, when given, a password.
type UserInfo = (String, Option<String>);

#[derive(Default)]
struct Url {
    scheme: String,
    opaque: String,
    user: Option<UserInfo>,
    host: String,
    path: String,
    raw_query: String,
    fragment: String,
    omit_host: bool,
}

fn userinfo_text(user: &UserInfo) -> String {
    let mut s = escape(&user.0, Mode::UserPassword);
    if let Some(p) = &user.1 {
        s.push(':');
        s.push_str(&escape(p, Mode::UserPassword));
    }
    s
}

fn parse_authority(authority: &str) -> Result<(Option<UserInfo>, String), String> {
    let (user, host) = match authority.rfind('@') {
        Some(i) => (Some(&authority[..i]), &authority[i + 1..]),
        None => (None, authority),
    };
    let port_ok = |p: &str| p.is_empty() || p.strip_prefix(':').is_some_and(|d| d.bytes().all(|c| c.is_ascii_digit()));
    if host.starts_with('[') {
        let i = host.rfind(']').ok_or("missing ']' in host")?;
        if !port_ok(&host[i + 1..]) {
            return Err(format!("invalid port {} after host", super::printf::go_quote(&host[i + 1..])));
        }
    } else if let Some(i) = host.rfind(':')
        && !port_ok(&host[i..])
    {
        return Err(format!("invalid port {} after host", super::printf::go_quote(&host[i..])));
    }
    let host = unescape(host, Mode::Host)?;
    let user = match user {
        None => None,
        Some(u) => {
            let valid = u.bytes().all(|c| c.is_ascii_alphanumeric() || b"-._:~!$&'()*+,;=%@".contains(&c));
            if !valid {
                return Err("net/url: invalid userinfo".into());
            }
            Some(match u.split_once(':') {
                Some((name, pass)) => (unescape(name, Mode::UserPassword)?, Some(unescape(pass, Mode::UserPassword)?)),
                None => (unescape(u, Mode::UserPassword)?, None),
            })
        }
    };
    Ok((user, host))
}

/// Go's `url.Parse`.
fn parse(raw: &str) -> Result<Url, String> {
    let (rest, frag) = raw.split_once('#').map_or((raw, None), |(a, b)| (a, Some(b)));
    if rest.bytes().any(|c| c < 0x20 || c == 0x7f) {
        return Err("net/url: invalid control character in URL".into());
    }
    let mut u = Url::default();
    if rest == "*" {
        u.path = "*".into();
        return Ok(u);
    }
    let mut rest = rest;
    for (i, c) in rest.char_indices() {
        match c {
            'a'..='z' | 'A'..='Z' => {}
            '0'..='9' | '+' | '-' | '.' if i > 0 => {}
            ':' if i == 0 => return Err("missing protocol scheme".into()),
            ':' => {
                u.scheme = rest[..i].to_ascii_lowercase();
                rest = &rest[i + 1..];
                break;
            }
            _ => break,
        }
    }
    if rest.ends_with('?') && rest.matches('?').count() == 1 {
        rest = &rest[..rest.len() - 1];
    } else if let Some((r, q)) = rest.split_once('?') {
        u.raw_query = q.to_string();
        rest = r;
    }
    if !rest.starts_with('/') {
        if !u.scheme.is_empty() {
            u.opaque = rest.to_string();
            return finish(u, frag);
        }
        if rest.split('/').next().is_some_and(|seg| seg.contains(':')) {
            return Err("first path segment in URL cannot contain colon".into());
        }
    }
    if (!u.scheme.is_empty() || !rest.starts_with("///")) && rest.starts_with("//") {
        let (authority, path) = match rest[2..].find('/') {
            Some(i) => (&rest[2..2 + i], &rest[2 + i..]),
            None => (&rest[2..], ""),
        };
        (u.user, u.host) = parse_authority(authority)?;
        rest = path;
    } else if !u.scheme.is_empty() && rest.starts_with('/') {
        u.omit_host = true;
    }
    u.path = unescape(rest, Mode::Path)?;
    finish(u, frag)
}

fn finish(mut u: Url, frag: Option<&str>) -> Result<Url, String> {
    if let Some(f) = frag {
        u.fragment = unescape(f, Mode::Fragment)?;
    }
    Ok(u)
}

/// Go's `URL.String()` for a URL without `RawPath`.
fn to_string(u: &Url) -> String {
    let mut out = String::new();
    if !u.scheme.is_empty() {
        out.push_str(&u.scheme);
        out.push(':');
    }
    if !u.opaque.is_empty() {
        out.push_str(&u.opaque);
    } else {
        let authority = !u.scheme.is_empty() || !u.host.is_empty() || u.user.is_some();
        let omitted = u.omit_host && u.host.is_empty() && u.user.is_none();
        if authority && !omitted {
            if !u.host.is_empty() || !u.path.is_empty() || u.user.is_some() {
                out.push_str("//");
            }
            if let Some(user) = &u.user {
                out.push_str(&userinfo_text(user));
                out.push('@');
            }
            out.push_str(&escape(&u.host, Mode::Host));
        }
        let path = escape(&u.path, Mode::Path);
        if !path.is_empty() && !path.starts_with('/') && !u.host.is_empty() {
            out.push('/');
        }
        if out.is_empty() && path.split('/').next().is_some_and(|seg| seg.contains(':')) {
            out.push_str("./");
        }
        out.push_str(&path);
    }
    if !u.raw_query.is_empty() {
        out.push('?');
        out.push_str(&u.raw_query);
    }
    if !u.fragment.is_empty() {
        out.push('#');
        out.push_str(&escape(&u.fragment, Mode::Fragment));
    }
    out
}

/// `urlParse url`: a dict of `scheme`, `host`, `hostname`, `path`, `query`, `opaque`,
/// `fragment` and `userinfo`.
fn url_parse(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    let u = parse(&s(&a[0])).map_err(|e| FnError::Msg(format!("unable to parse url: {e}")))?;
    let hostname = match u.host.strip_prefix('[') {
        Some(h) => h.split(']').next().unwrap_or(h).to_string(),
        None => u.host.rsplit_once(':').map_or(u.host.clone(), |(h, _)| h.to_string()),
    };
    let m = BTreeMap::from([
        ("scheme".to_string(), Value::str(&u.scheme)),
        ("host".to_string(), Value::str(&u.host)),
        ("hostname".to_string(), Value::Str(hostname)),
        ("path".to_string(), Value::str(&u.path)),
        ("query".to_string(), Value::str(&u.raw_query)),
        ("opaque".to_string(), Value::str(&u.opaque)),
        ("fragment".to_string(), Value::str(&u.fragment)),
        ("userinfo".to_string(), Value::Str(u.user.as_ref().map(userinfo_text).unwrap_or_default())),
    ]);
    Ok(Value::map(m))
}

/// `urlJoin dict`: the URL of `urlParse`'s keys (missing keys are empty; all must be strings).
fn url_join(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    let Value::Map(m) = &a[0] else {
        return Err(
            format!("wrong type for value; expected map[string]interface {{}}; got {}", a[0].type_name()).into()
        );
    };
    let m = m.borrow();
    let get = |k: &str| -> Result<String, FnError> {
        match m.get(k) {
            None => Ok(String::new()),
            Some(Value::Str(v)) => Ok(v.clone()),
            Some(other) => Err(FnError::Msg(format!(
                "unable to parse {k} key, must be of type string, but {} found",
                super::reflect::kind(other)
            ))),
        }
    };
    let mut u = Url {
        scheme: get("scheme")?,
        host: get("host")?,
        path: get("path")?,
        raw_query: get("query")?,
        opaque: get("opaque")?,
        fragment: get("fragment")?,
        ..Url::default()
    };
    let userinfo = get("userinfo")?;
    if !userinfo.is_empty() {
        let parsed = parse(&format!("proto://{userinfo}@host"))
            .map_err(|e| FnError::Msg(format!("unable to parse userinfo in dict: {e}")))?;
        u.user = parsed.user;
    }
    Ok(Value::Str(to_string(&u)))
}
