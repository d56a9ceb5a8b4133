//! Properties of a JSON payload as upstream's provider reads them: the payload is decoded as a
//! JSON object whose values stay raw JSON (Go's `map[string]json.RawMessage`), so a property's
//! value is its JSON text exactly as stored: a string keeps its quotes (`"admin"`), an object
//! or number its own spelling.

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

/// One property of a payload (its raw JSON), as upstream's `property`.
pub fn property(payload: &[u8], property: &str, what: &str) -> Result<Vec<u8>, ProviderError> {
    let members = raw_members(payload).ok_or_else(|| {
        ProviderError::InvalidArgument(format!(
            "{what}: the payload is not a JSON object, so it has no property {property:?}"
        ))
    })?;
    members
        .into_iter()
        .find(|(k, _)| k == property)
        .map(|(_, v)| v.to_vec())
        .ok_or_else(|| ProviderError::NoSecret(format!("{what}: property {property:?} not found in the payload")))
}

/// Every property of a payload (raw JSON values), as upstream's GetSecretMap.
pub fn map(payload: &[u8], what: &str) -> Result<SecretMap, ProviderError> {
    let members = raw_members(payload).ok_or_else(|| {
        ProviderError::InvalidArgument(format!("{what}: the payload is not a JSON object, so it has no properties"))
    })?;
    Ok(members.into_iter().map(|(k, v)| (k, v.to_vec())).collect())
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
    fn values_stay_raw_json_as_upstream() {
        // Upstream's own test payload and answers.
        let payload = r#"{"username":"admin","password":"secret123","nested":{"key":"value"}}"#;
        assert_eq!(property(payload.as_bytes(), "username", "s").expect("username"), br#""admin""#);
        assert_eq!(property(payload.as_bytes(), "nested", "s").expect("nested"), br#"{"key":"value"}"#);
        let e = property(payload.as_bytes(), "nonexistent", "s").expect_err("missing");
        assert!(e.is_not_found() && e.to_string().contains("not found"), "{e}");
        let e = property(b"invalid-json", "username", "s").expect_err("not JSON");
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        assert!(map(b"[1,2]", "s").is_err() && map(b"\"x\"", "s").is_err());
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
