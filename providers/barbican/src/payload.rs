//! Properties of a JSON payload: the payload is read as a JSON object and a property is one of
//! its top-level keys (no dotted paths), as upstream's provider reads it. A string value is its
//! text; any other value is its JSON exactly as stored (an object or a number keeps its own
//! spelling, as upstream's `json.RawMessage`). Upstream also hands strings on as raw JSON, with
//! their quotes (`"admin"`); Keyward gives the string itself, as its other providers and the
//! conformance suite do.

use std::collections::HashMap;

use keyward_provider_runtime::{ProviderError, SecretMap};

/// Most top-level members (duplicates included) a payload may have. A payload is the tenant's
/// store's to write, up to the runtime's 4 MiB answer cap: that is room for ~500k tiny members,
/// far more than any secret holds (a Kubernetes Secret of 1 MiB has at most a few thousand keys).
/// Refusing beyond this bound keeps the work and memory of one read small.
pub const MAX_MEMBERS: usize = 10_000;

/// Why a payload has no members to read.
#[derive(Debug, PartialEq, Eq)]
pub enum Unreadable {
    /// Not a JSON object.
    NotAnObject,
    /// More than [`MAX_MEMBERS`] top-level members.
    TooManyMembers,
}

impl Unreadable {
    fn to_error(&self, what: &str, wanted: &str) -> ProviderError {
        match self {
            Unreadable::NotAnObject => {
                ProviderError::InvalidArgument(format!("{what}: the payload is not a JSON object, so it has {wanted}"))
            }
            Unreadable::TooManyMembers => ProviderError::InvalidArgument(format!(
                "{what}: the payload has more than {MAX_MEMBERS} top-level members; Keyward reads at most \
                 {MAX_MEMBERS} properties of a payload"
            )),
        }
    }
}

/// The top-level members of a JSON object, each value as its raw JSON text, in the order of
/// their last occurrence; a later duplicate key wins, as in Go.
pub fn raw_members(raw: &[u8]) -> Result<Vec<(String, &[u8])>, Unreadable> {
    // Validity first, without building the value (a few MiB of JSON would take tens of times
    // that as a `serde_json::Value`): the scanner below then only has to find where values end.
    // Strings are checked as UTF-8 here, as a `Value` would have.
    if std::str::from_utf8(raw).is_err() || serde_json::from_slice::<serde::de::IgnoredAny>(raw).is_err() {
        return Err(Unreadable::NotAnObject);
    }
    let mut all: Vec<(String, &[u8])> = Vec::new();
    let mut i = skip_ws(raw, 0);
    if raw.get(i) != Some(&b'{') {
        return Err(Unreadable::NotAnObject);
    }
    i += 1;
    loop {
        i = skip_ws(raw, i);
        match raw.get(i).ok_or(Unreadable::NotAnObject)? {
            b'}' => return Ok(last_of_each_key(all)),
            b',' => {
                i += 1;
                continue;
            }
            _ => {}
        }
        if all.len() == MAX_MEMBERS {
            return Err(Unreadable::TooManyMembers);
        }
        let (key, start, end) = member(raw, i).ok_or(Unreadable::NotAnObject)?;
        all.push((key, &raw[start..end]));
        i = end;
    }
}

/// The member whose key starts at `i`: its key, and where its value starts and ends.
fn member(raw: &[u8], i: usize) -> Option<(String, usize, usize)> {
    let key_end = skip_string(raw, i)?;
    let key: String = serde_json::from_slice(&raw[i..key_end]).ok()?;
    let colon = skip_ws(raw, key_end);
    if raw.get(colon)? != &b':' {
        return None;
    }
    let start = skip_ws(raw, colon + 1);
    let end = skip_value(raw, start)?;
    Some((key, start, end))
}

/// `members` with each key only at its last occurrence, in one pass over them and a map of
/// where each key last occurs (not a scan of the kept ones per member: that is quadratic).
fn last_of_each_key(members: Vec<(String, &[u8])>) -> Vec<(String, &[u8])> {
    let last: HashMap<&str, usize> = members.iter().enumerate().map(|(n, (k, _))| (k.as_str(), n)).collect();
    let keep: Vec<bool> = members.iter().enumerate().map(|(n, (k, _))| last.get(k.as_str()) == Some(&n)).collect();
    drop(last);
    members.into_iter().zip(keep).filter_map(|(m, kept)| kept.then_some(m)).collect()
}

fn skip_ws(raw: &[u8], mut i: usize) -> usize {
    while raw.get(i).is_some_and(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r')) {
        i += 1;
    }
    i
}

/// The end (exclusive) of the string starting at `i` (its opening quote).
fn skip_string(raw: &[u8], mut i: usize) -> Option<usize> {
    if raw.get(i)? != &b'"' {
        return None;
    }
    i += 1;
    loop {
        match raw.get(i)? {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
}

/// The end (exclusive) of the (valid) JSON value starting at `i`.
fn skip_value(raw: &[u8], mut i: usize) -> Option<usize> {
    match raw.get(i)? {
        b'"' => skip_string(raw, i),
        b'{' | b'[' => {
            let mut depth = 0usize;
            loop {
                match raw.get(i)? {
                    b'"' => {
                        i = skip_string(raw, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
        }
        _ => {
            while raw.get(i).is_some_and(|b| !matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r')) {
                i += 1;
            }
            Some(i)
        }
    }
}

/// A member's value as handed on: a JSON string decoded to its text, anything else as written.
fn value(raw: &[u8]) -> Vec<u8> {
    if raw.first() == Some(&b'"')
        && let Ok(s) = serde_json::from_slice::<String>(raw)
    {
        return s.into_bytes();
    }
    raw.to_vec()
}

/// One property of a payload ([`value`]), as upstream's `property`.
pub fn property(payload: &[u8], property: &str, what: &str) -> Result<Vec<u8>, ProviderError> {
    let members = raw_members(payload).map_err(|e| e.to_error(what, &format!("no property {property:?}")))?;
    members
        .into_iter()
        .find(|(k, _)| k == property)
        .map(|(_, v)| value(v))
        .ok_or_else(|| ProviderError::NoSecret(format!("{what}: property {property:?} not found in the payload")))
}

/// Every property of a payload ([`value`]), as upstream's GetSecretMap.
pub fn map(payload: &[u8], what: &str) -> Result<SecretMap, ProviderError> {
    let members = raw_members(payload).map_err(|e| e.to_error(what, "no properties"))?;
    Ok(members.into_iter().map(|(k, v)| (k, value(v))).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(raw: &str) -> Vec<(String, String)> {
        raw_members(raw.as_bytes())
            .expect("object")
            .into_iter()
            .map(|(k, v)| (k, String::from_utf8_lossy(v).into_owned()))
            .collect()
    }

    #[test]
    fn strings_are_text_and_other_values_raw_json() {
        // Upstream's own test payload; upstream answers `"admin"` (quoted) for username.
        let payload = r#"{"username":"admin","password":"secret123","nested":{"key":"value"},"esc":"a\"b\u00e9"}"#;
        assert_eq!(property(payload.as_bytes(), "username", "s").expect("username"), b"admin");
        assert_eq!(property(payload.as_bytes(), "esc", "s").expect("escaped"), "a\"bé".as_bytes());
        assert_eq!(property(payload.as_bytes(), "nested", "s").expect("nested"), br#"{"key":"value"}"#);
        let e = property(payload.as_bytes(), "nonexistent", "s").expect_err("missing");
        assert!(e.is_not_found() && e.to_string().contains("not found"), "{e}");
        let e = property(b"invalid-json", "username", "s").expect_err("not JSON");
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        assert!(map(b"[1,2]", "s").is_err() && map(b"\"x\"", "s").is_err());
        let m = map(br#"{"n":1.50,"s":"t","o":{"a": [1]}}"#, "s").expect("map");
        let got: std::collections::BTreeMap<&str, &[u8]> = m.iter().map(|(k, v)| (k.as_str(), v.as_slice())).collect();
        assert_eq!(got, [("n", &b"1.50"[..]), ("o", &br#"{"a": [1]}"#[..]), ("s", &b"t"[..])].into_iter().collect());
    }

    #[test]
    fn the_scanner_keeps_each_value_as_written() {
        let raw = " { \"a\" : 1.50 , \"b\":[1, {\"c\":\"}]\\\"\"}], \"k\\u00e9y\":\"v\\n\", \"t\":true,\"n\":null,\"a\":-2e3 } ";
        assert_eq!(
            members(raw),
            [
                ("b".to_string(), "[1, {\"c\":\"}]\\\"\"}]".to_string()),
                ("kéy".to_string(), "\"v\\n\"".to_string()),
                ("t".to_string(), "true".to_string()),
                ("n".to_string(), "null".to_string()),
                ("a".to_string(), "-2e3".to_string()),
            ]
        );
        assert_eq!(members("{}"), Vec::<(String, String)>::new());
        assert!(raw_members(b"{\"a\":1").is_err() && raw_members(b"").is_err() && raw_members(b"{} x").is_err());
        assert_eq!(raw_members(b"{\"a\":\"\xff\"}"), Err(Unreadable::NotAnObject), "not UTF-8");
        let deep = format!("{{\"a\":{}{}}}", "[".repeat(1_000_000), "]".repeat(1_000_000));
        assert_eq!(members(&deep).len(), 1, "deep nesting is read without recursion");
    }

    /// `{"k0":0,"k1":0,…}` with `n` members.
    fn keys(n: usize) -> Vec<u8> {
        let members: Vec<String> = (0..n).map(|k| format!("\"k{k}\":{k}")).collect();
        format!("{{{}}}", members.join(",")).into_bytes()
    }

    #[test]
    fn many_members_are_refused_quickly() {
        // ~2.6 MB, within the 4 MiB answer cap: each key once used to scan every key before it.
        let payload = keys(200_000);
        let started = std::time::Instant::now();
        let e = map(&payload, "secret s").expect_err("too many members");
        assert!(started.elapsed() < std::time::Duration::from_secs(1), "took {:?}", started.elapsed());
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        assert!(e.to_string().contains(&format!("more than {MAX_MEMBERS} top-level members")), "{e}");
        assert!(property(&payload, "k1", "secret s").is_err(), "property reads the same members");
    }

    #[test]
    fn members_up_to_the_cap_are_read_with_the_last_duplicate_winning() {
        let m = map(&keys(MAX_MEMBERS), "s").expect("at the cap");
        assert_eq!((m.len(), m["k9999"].as_slice()), (MAX_MEMBERS, &b"9999"[..]));
        // Duplicates count towards the cap, as they are work to scan.
        let mut twice = keys(MAX_MEMBERS / 2);
        twice.pop();
        twice.extend_from_slice(b",");
        twice.extend_from_slice(&keys(MAX_MEMBERS / 2 + 1)[1..]);
        assert!(raw_members(&twice) == Err(Unreadable::TooManyMembers));
        let dup = br#"{"a":1,"b":2,"a":3,"c":4,"b":5,"a":6}"#;
        assert_eq!(
            members(std::str::from_utf8(dup).expect("text")),
            [
                ("c".to_string(), "4".to_string()),
                ("b".to_string(), "5".to_string()),
                ("a".to_string(), "6".to_string())
            ]
        );
        assert_eq!(property(dup, "a", "s").expect("a"), b"6");
    }
}
