//! Properties of a JSON payload: the payload is read as a JSON object and a property is one of
//! its top-level keys (no dotted paths), as upstream's provider reads it. A string value is its
//! text; any other value is its JSON exactly as stored (an object or a number keeps its own
//! spelling, as upstream's `json.RawMessage`). Upstream also hands strings on as raw JSON, with
//! their quotes (`"admin"`); Keyward gives the string itself, as its other providers and the
//! conformance suite do.

use keyward_provider_runtime::{ProviderError, SecretMap};

/// The top-level members of a JSON object, each value as its raw JSON text; a later duplicate
/// key wins, as in Go. `None` when `raw` is not a JSON object.
pub fn raw_members(raw: &[u8]) -> Option<Vec<(String, &[u8])>> {
    // Validity first: the scanner below then only has to find where values end.
    let parsed: serde_json::Value = serde_json::from_slice(raw).ok()?;
    if !parsed.is_object() {
        return None;
    }
    let mut out: Vec<(String, &[u8])> = Vec::new();
    let mut i = skip_ws(raw, 0);
    i += 1; // '{'
    loop {
        i = skip_ws(raw, i);
        match raw.get(i)? {
            b'}' => return Some(out),
            b',' => {
                i += 1;
                continue;
            }
            _ => {}
        }
        let key_end = skip_string(raw, i)?;
        let key: String = serde_json::from_slice(&raw[i..key_end]).ok()?;
        i = skip_ws(raw, key_end);
        if raw.get(i)? != &b':' {
            return None;
        }
        let start = skip_ws(raw, i + 1);
        let end = skip_value(raw, start)?;
        out.retain(|(k, _)| *k != key);
        out.push((key, &raw[start..end]));
        i = end;
    }
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
    let members = raw_members(payload).ok_or_else(|| {
        ProviderError::InvalidArgument(format!(
            "{what}: the payload is not a JSON object, so it has no property {property:?}"
        ))
    })?;
    members
        .into_iter()
        .find(|(k, _)| k == property)
        .map(|(_, v)| value(v))
        .ok_or_else(|| ProviderError::NoSecret(format!("{what}: property {property:?} not found in the payload")))
}

/// Every property of a payload ([`value`]), as upstream's GetSecretMap.
pub fn map(payload: &[u8], what: &str) -> Result<SecretMap, ProviderError> {
    let members = raw_members(payload).ok_or_else(|| {
        ProviderError::InvalidArgument(format!("{what}: the payload is not a JSON object, so it has no properties"))
    })?;
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
        assert!(raw_members(b"{\"a\":1").is_none() && raw_members(b"").is_none() && raw_members(b"{} x").is_none());
    }
}
