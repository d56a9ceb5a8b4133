//! Picking the value out of an answer, as upstream: `result.jsonPath` (when set) over the JSON
//! answer; for GetSecret a string is returned as it is, an object as JSON, a list by its first
//! element, other scalars as text; GetSecretMap wants an object (or a string holding one).

use keyward_provider_runtime::{ProviderError, SecretMap};
use serde_json::Value;

use crate::cost::{self, EVALUATION_BUDGET, OverBudget, WORK_BUDGET};
use crate::rules::{is_singular, parse_json_path};

fn parse_answer(body: &[u8]) -> Result<Value, ProviderError> {
    serde_json::from_slice(body)
        .map_err(|e| ProviderError::Unavailable(format!("the webhook's answer is not JSON: {e}")))
}

/// What a JSONPath selects, borrowed from the answer: only the value used is ever copied.
enum Selected<'a> {
    /// The one match of a singular path.
    One(&'a Value),
    /// The matches of any other path, in order.
    Matches(Vec<&'a Value>),
}

fn over_budget(path: &str, over: OverBudget) -> ProviderError {
    let (budget, advice) = match over {
        OverBudget::Memory => {
            (format!("{} MiB", EVALUATION_BUDGET >> 20), "no wildcards or .. over long lists and long keys")
        }
        OverBudget::Work => (
            format!("{WORK_BUDGET} steps of work (about {} s of CPU)", WORK_BUDGET / 1_000_000_000),
            "no match() or search() with long patterns, and no comparisons of large values, over long lists",
        ),
    };
    ProviderError::Unavailable(format!(
        "the webhook's answer is too large or too deep to evaluate the JSONPath {path} over: evaluating it would \
         take more than the {budget} a JSONPath evaluation may use; make the webhook answer less, or select a \
         smaller part of it ({advice})"
    ))
}

/// The value(s) at `path` in `doc`, once the evaluation's cost is known to be within
/// [`EVALUATION_BUDGET`] and [`WORK_BUDGET`].
fn select<'a>(doc: &'a Value, path: &str) -> Result<Selected<'a>, ProviderError> {
    let query = parse_json_path(path).map_err(|e| ProviderError::BadConfig(format!("spec.result.jsonPath: {e}")))?;
    cost::estimate(&query, doc).map_err(|over| over_budget(path, over))?;
    let matches = jsonpath_rust::query::js_path_process(&query, doc)
        .map_err(|e| ProviderError::BadConfig(format!("spec.result.jsonPath: {path:?}: {e}")))?;
    let mut matches = matches.into_iter().map(|m| m.val);
    if is_singular(&query) {
        return matches
            .next()
            .map(Selected::One)
            .ok_or_else(|| ProviderError::Unavailable(format!("the webhook's answer has nothing at {path}")));
    }
    Ok(Selected::Matches(matches.collect()))
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
    let doc = parse_answer(body)?;
    match select(&doc, path)? {
        Selected::One(v) => single(v),
        // As a list of the matches would: its first element.
        Selected::Matches(matches) => match matches.first() {
            Some(first) => single(first),
            None => Err(ProviderError::Unavailable("the JSONPath matched nothing in the webhook's answer".into())),
        },
    }
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
    let answer = parse_answer(body)?;
    let not_an_object = || {
        ProviderError::Unavailable(format!(
            "the webhook's answer{} is not a JSON object",
            json_path.map(|p| format!(" at {p}")).unwrap_or_default()
        ))
    };
    let selected = match json_path {
        None => &answer,
        Some(path) => match select(&answer, path)? {
            Selected::One(v) => v,
            // A list of matches is never an object.
            Selected::Matches(_) => return Err(not_an_object()),
        },
    };
    let parsed;
    let doc = match selected {
        Value::String(s) => {
            parsed = serde_json::from_str::<Value>(s).map_err(|e| {
                ProviderError::Unavailable(format!("the selected value is a string that is not a JSON object: {e}"))
            })?;
            &parsed
        }
        v => v,
    };
    let Value::Object(map) = doc else {
        return Err(not_an_object());
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

    /// `{"<64 KiB key>": [0, 0, …600]}`: the attack's shape, small enough to evaluate, with
    /// paths of ~38 MiB (600 copies of the key), over the budget.
    fn hostile() -> Vec<u8> {
        let zeros = vec!["0"; 600].join(",");
        format!(r#"{{"{}": [{zeros}]}}"#, "k".repeat(64 << 10)).into_bytes()
    }

    #[test]
    fn answers_too_costly_to_evaluate_are_refused_before_evaluating() {
        let body = hostile();
        for path in ["$.*[*]", "$..x", "$..*", "$[*,*][*]", "$.*[?@ == 0]"] {
            let started = std::time::Instant::now();
            let e = secret_value(&body, Some(path)).expect_err(path);
            assert_eq!(e.code(), tonic::Code::Unavailable, "{path}: {e}");
            assert!(e.to_string().contains("too large or too deep to evaluate the JSONPath"), "{path}: {e}");
            assert!(e.to_string().contains("32 MiB"), "{path}: {e}");
            assert!(started.elapsed() < std::time::Duration::from_secs(2), "{path}: {:?}", started.elapsed());
            assert!(secret_map(&body, Some(path)).is_err(), "{path}");
        }
        // A path that reaches the key once is cheap, and the list as well.
        let key = format!("$['{}'][1]", "k".repeat(64 << 10));
        assert_eq!(secret_value(&body, Some(&key)).expect("one element"), b"0");
        assert_eq!(secret_value(&body, Some("$.*")).expect("the list, by its first element"), b"0");
    }

    #[test]
    fn wildcards_and_descendants_over_normal_answers_evaluate_as_before() {
        assert_eq!(get("$.*[*]").expect("wildcards"), "secret", "the first child of the first member (args)");
        assert_eq!(get("$.items[*].value").expect("wildcard"), "vx");
        assert_eq!(get("$..value").expect("descendants"), "vx");
        assert_eq!(get("$..user").expect("descendants"), "app");
        assert_eq!(get("$..[?@.name == 'y'].value").expect("descendants and a filter"), "vy");
        let e = get("$..x").expect_err("nothing named x");
        assert_eq!(e.code(), tonic::Code::Unavailable, "{e}");
        assert!(e.to_string().contains("matched nothing"), "{e}");
        assert!(secret_map(ANSWER, Some("$..obj")).is_err(), "a list of matches is not an object");
    }

    /// Refused for its work, promptly, with the budget named.
    fn refused_for_work(body: &[u8], path: &str) {
        let started = std::time::Instant::now();
        let e = secret_value(body, Some(path)).expect_err(path);
        assert_eq!(e.code(), tonic::Code::Unavailable, "{path}: {e}");
        assert!(e.to_string().contains("too large or too deep to evaluate the JSONPath"), "{path}: {e}");
        assert!(e.to_string().contains("2000000000 steps of work (about 2 s of CPU)"), "{path}: {e}");
        assert!(started.elapsed() < std::time::Duration::from_secs(1), "{path}: {:?}", started.elapsed());
    }

    #[test]
    fn filters_too_costly_to_run_are_refused_before_evaluating() {
        // A 4 KiB pattern from the answer, compiled on every run.
        let items: Vec<Value> = (0..1_000).map(|_| serde_json::json!({"a": "x", "b": ".".repeat(4096)})).collect();
        refused_for_work(&serde_json::to_vec(&items).expect("JSON"), "$[?match(@.a, @.b)]");
        // Two 1 MiB strings compared once per element of a list.
        let big = "z".repeat(1 << 20);
        let doc = serde_json::json!({"x": big, "y": big, "list": vec![0; 100_000]});
        refused_for_work(&serde_json::to_vec(&doc).expect("JSON"), "$.list[?$.x == $.y]");
    }

    #[test]
    fn a_literal_regex_over_ten_thousand_small_items_evaluates_as_before() {
        let items: Vec<Value> =
            (0..10_000).map(|i| serde_json::json!({"name": format!("db-{i}"), "value": format!("v{i}")})).collect();
        let body = serde_json::to_vec(&items).expect("JSON");
        assert_eq!(secret_value(&body, Some("$[?match(@.name, '^db-.*')].value")).expect("all match"), b"v0");
        // Normal filters over a small answer: unchanged.
        assert_eq!(get("$.items[?match(@.name, 'y')].value").expect("match"), "vy");
        assert_eq!(get("$.items[?@.name >= 'y'].value").expect("comparison"), "vy");
        assert_eq!(get("$.items[?length(@.value) == 2 && @.name != 'x'].value").expect("length"), "vy");
    }

    #[test]
    fn the_estimate_covers_the_paths_the_library_builds() {
        let doc = parse_answer(ANSWER).expect("JSON");
        for path in ["$", "$.*[*]", "$..*", "$..value", "$.items[?@.name == 'y'].value", "$[*,*][*]", "$.list[::-1]"] {
            let query = parse_json_path(path).expect(path);
            let found = jsonpath_rust::query::js_path_process(&query, &doc).expect(path);
            let built: u64 = found.iter().map(|m| m.path.len() as u64 + 32).sum();
            let estimate = cost::estimate(&query, &doc).expect(path).bytes;
            assert!(estimate >= built, "{path}: estimated {estimate} < {built} for the matches alone");
            assert!(estimate < 64 << 10, "{path}: a small answer costs little ({estimate})");
        }
        // One step from the root: the root pointer and the matches, nothing else; names escaped
        // as the library escapes them.
        let doc: Value = serde_json::json!({"a'b\\\u{1}\n": 1, "list": [1, 2], "é": null});
        let query = parse_json_path("$.*").expect("wildcard");
        let found = jsonpath_rust::query::js_path_process(&query, &doc).expect("wildcard");
        let built: u64 = found.iter().map(|m| m.path.len() as u64 + 32).sum();
        assert_eq!(cost::estimate(&query, &doc).map(|c| c.bytes), Ok(built + 1 + 32));
    }
}
