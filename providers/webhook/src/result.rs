//! Picking the value out of an answer, as upstream: `result.jsonPath` (when set) over the JSON
//! answer; for GetSecret a string is returned as it is, an object as JSON, a list by its first
//! element, other scalars as text; GetSecretMap wants an object (or a string holding one).

use keyward_provider_runtime::{ProviderError, SecretMap};
use serde_json::Value;

use crate::rules::{is_singular, parse_json_path};

fn parse_answer(body: &[u8]) -> Result<Value, ProviderError> {
    serde_json::from_slice(body)
        .map_err(|e| ProviderError::Unavailable(format!("the webhook's answer is not JSON: {e}")))
}

/// The value at `path` in `doc`: the one match of a singular path, else the list of matches.
fn select(doc: &Value, path: &str) -> Result<Value, ProviderError> {
    let query = parse_json_path(path).map_err(|e| ProviderError::BadConfig(format!("spec.result.jsonPath: {e}")))?;
    let matches = jsonpath_rust::query::js_path_vals(path, doc)
        .map_err(|e| ProviderError::BadConfig(format!("spec.result.jsonPath: {path:?}: {e}")))?;
    if is_singular(&query) {
        return matches
            .first()
            .map(|v| (*v).clone())
            .ok_or_else(|| ProviderError::Unavailable(format!("the webhook's answer has nothing at {path}")));
    }
    Ok(Value::Array(matches.into_iter().cloned().collect()))
}

/// A JSON number as text: integers exactly, others as JSON writes them.
fn number(n: &serde_json::Number) -> String {
    match n.as_f64() {
        Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 1e15 => format!("{f:.0}"),
        _ => n.to_string(),
    }
}

/// One value of GetSecret.
fn single(v: &Value) -> Result<Vec<u8>, ProviderError> {
    match v {
        Value::String(s) => Ok(s.clone().into_bytes()),
        Value::Null => Ok(Vec::new()),
        Value::Bool(b) => Ok(b.to_string().into_bytes()),
        Value::Number(n) => Ok(number(n).into_bytes()),
        // Upstream keeps this for compatibility: a list stands for its first element.
        Value::Array(items) => match items.first() {
            Some(first) => single(first),
            None => Err(ProviderError::Unavailable("the JSONPath matched nothing in the webhook's answer".into())),
        },
        Value::Object(_) => serde_json::to_vec(v).map_err(|e| ProviderError::Internal(e.to_string())),
    }
}

/// GetSecret: the whole answer without a JSONPath, else what it selects.
pub fn secret_value(body: &[u8], json_path: Option<&str>) -> Result<Vec<u8>, ProviderError> {
    let Some(path) = json_path else {
        return Ok(body.to_vec());
    };
    single(&select(&parse_answer(body)?, path)?)
}

/// A value of GetSecretMap.
fn map_value(v: &Value) -> Vec<u8> {
    match v {
        Value::String(s) => s.clone().into_bytes(),
        Value::Null => Vec::new(),
        Value::Number(n) => n.to_string().into_bytes(),
        other => keyward_provider_runtime::json::json_bytes(other),
    }
}

/// GetSecretMap: the properties of the JSON object the answer is (or the JSONPath selects; a
/// string holding a JSON object is read as that object).
pub fn secret_map(body: &[u8], json_path: Option<&str>) -> Result<SecretMap, ProviderError> {
    let mut doc = parse_answer(body)?;
    if let Some(path) = json_path {
        doc = select(&doc, path)?;
    }
    if let Value::String(s) = &doc {
        doc = serde_json::from_str(s).map_err(|e| {
            ProviderError::Unavailable(format!("the selected value is a string that is not a JSON object: {e}"))
        })?;
    }
    let Value::Object(map) = doc else {
        return Err(ProviderError::Unavailable(format!(
            "the webhook's answer{} is not a JSON object",
            json_path.map(|p| format!(" at {p}")).unwrap_or_default()
        )));
    };
    Ok(map.iter().map(|(k, v)| (k.clone(), map_value(v))).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ANSWER: &[u8] = br#"{"args": {"parameter": "secret"}, "n": 42, "f": 1.5, "ok": true, "none": null,
        "list": ["first", "second"], "obj": {"user": "app", "port": 5432},
        "nested": "{\"a\": \"b\"}", "items": [{"name": "x", "value": "vx"}, {"name": "y", "value": "vy"}]}"#;

    fn get(path: &str) -> Result<String, ProviderError> {
        secret_value(ANSWER, Some(path)).map(|v| String::from_utf8(v).expect("utf-8"))
    }

    #[test]
    fn get_picks_scalars_objects_and_first_elements() {
        assert_eq!(get("$.args.parameter").expect("string"), "secret");
        assert_eq!(get("$.n").expect("int"), "42");
        assert_eq!(get("$.f").expect("float"), "1.5");
        assert_eq!(get("$.ok").expect("bool"), "true");
        assert_eq!(get("$.none").expect("null"), "");
        assert_eq!(get("$.list").expect("list"), "first");
        assert_eq!(get("$.obj").expect("object"), r#"{"port":5432,"user":"app"}"#);
        assert_eq!(get("$.items[?(@.name == 'y')].value").expect("filter"), "vy");
        assert_eq!(get("$..parameter").expect("descendant"), "secret");
        assert_eq!(secret_value(b"raw text", None).expect("raw"), b"raw text");
        let e = get("$.missing").expect_err("nothing there");
        assert_eq!(e.code(), tonic::Code::Unavailable, "{e}");
        let e = get("$.items[?(@.name == 'z')].value").expect_err("no match");
        assert_eq!(e.code(), tonic::Code::Unavailable, "{e}");
        assert!(secret_value(b"not json", Some("$.a")).is_err());
    }

    #[test]
    fn maps_come_from_objects_or_strings_holding_one() {
        let m = secret_map(ANSWER, Some("$.obj")).expect("object");
        assert_eq!(m["user"], b"app");
        assert_eq!(m["port"], b"5432");
        let m = secret_map(ANSWER, Some("$.nested")).expect("string holding an object");
        assert_eq!(m["a"], b"b");
        let whole = secret_map(ANSWER, None).expect("the answer");
        assert_eq!(whole["obj"], br#"{"port":5432,"user":"app"}"#);
        assert_eq!(whole["list"], br#"["first","second"]"#);
        assert!(secret_map(ANSWER, Some("$.list")).is_err());
        assert!(secret_map(ANSWER, Some("$.n")).is_err());
    }

    #[test]
    fn hostile_paths_are_refused() {
        assert!(get("$..a..b..c").is_err());
        assert!(get("$[").is_err());
    }
}
