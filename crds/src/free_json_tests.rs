use serde_json::json;

use super::*;

fn read(text: &str) -> FreeJson {
    serde_json::from_str(text).unwrap()
}

/// `{"pad": [0, 0, …]}` of about `bytes` bytes: what a tenant bloats a field with.
pub(crate) fn padded(bytes: usize) -> String {
    format!("{{\"pad\":[{}0]}}", "0,".repeat(bytes / 2))
}

#[test]
fn values_within_the_limits_are_kept_as_compact_text_and_read_back() {
    let v = read(r#" { "labels" : {"a": "b\n\"c\""}, "n": [1, -2, 3.5, true, null], "e": {} , "l": []} "#);
    assert_eq!(v.text().unwrap(), r#"{"labels":{"a":"b\n\"c\""},"n":[1,-2,3.5,true,null],"e":{},"l":[]}"#);
    assert_eq!(
        v.value().unwrap(),
        json!({"labels": {"a": "b\n\"c\""}, "n": [1, -2, 3.5, true, null], "e": {}, "l": []})
    );
    assert!(v.is_object() && !v.is_null());
    assert_eq!(read("\"x\"").text().unwrap(), "\"x\"");
    assert!(read("null").is_null());
    assert_eq!(serde_json::to_value(&v).unwrap(), v.value().unwrap(), "written back as the value");
    // Admission's tree measures the same.
    assert_eq!(FreeJson::from_value(&v.value().unwrap()), v);
    // YAML too, with a number as a member name.
    let y: FreeJson = serde_yaml::from_str("{1: a, b: [x, 2]}").unwrap();
    assert_eq!(y.value().unwrap(), json!({"1": "a", "b": ["x", 2]}));
}

#[test]
fn each_limit_drops_the_content_and_says_what_was_measured() {
    let at_limit = format!("\"{}\"", "a".repeat(MAX_FREE_JSON_BYTES - 2));
    assert!(read(&at_limit).check("f").is_ok(), "exactly the byte limit is kept");
    let over = format!("\"{}\"", "a".repeat(MAX_FREE_JSON_BYTES - 1));
    let o = read(&over).oversized().expect("one byte over");
    assert_eq!((o.limit, o.bytes, o.values), (Limit::Bytes, MAX_FREE_JSON_BYTES + 1, 1));

    let bloat = read(&padded(1_400_000));
    let o = bloat.oversized().expect("1.4 MB");
    assert_eq!(o.limit, Limit::Values, "values pass first: 4097 zeros are 8 KiB");
    assert_eq!((o.values, o.depth), (700_003, 2), "everything is still counted");
    assert!(o.bytes > 1_400_000);
    let e = bloat.check("spec.data[0].metadata").unwrap_err();
    assert_eq!(e.field, "spec.data[0].metadata");
    assert!(e.message.contains("more than Keyward keeps") && e.message.contains("at most 65536 bytes"), "{e}");
    assert!(bloat.value().is_err() && bloat.text().is_err());
    assert!(std::mem::size_of::<FreeJson>() <= 48, "what a cache holds of a field past the limits");
    assert!(serde_json::to_string(&bloat).is_err(), "never written back as something else");

    let deep = |n: usize| format!("{}1{}", "[".repeat(n), "]".repeat(n));
    assert!(read(&deep(MAX_FREE_JSON_DEPTH)).check("f").is_ok());
    assert_eq!(read(&deep(MAX_FREE_JSON_DEPTH + 1)).oversized().map(|o| o.limit), Some(Limit::Depth));

    let values = |n: usize| format!("[{}]", vec!["1"; n].join(","));
    assert!(read(&values(MAX_FREE_JSON_VALUES - 1)).check("f").is_ok(), "the array is a value too");
    assert_eq!(read(&values(MAX_FREE_JSON_VALUES)).oversized().map(|o| o.limit), Some(Limit::Values));
}

#[test]
fn maps_count_all_members_together_and_keep_their_names() {
    let m: FreeJsonMap = serde_json::from_str(r#"{"gcpsm": {"projectID": "p"}, "webhook": {"url": "u"}}"#).unwrap();
    assert_eq!(m.keys().collect::<Vec<_>>(), ["gcpsm", "webhook"]);
    assert_eq!(m.get("webhook").unwrap().value().unwrap(), json!({"url": "u"}));
    assert_eq!(serde_json::to_value(&m).unwrap(), json!({"gcpsm": {"projectID": "p"}, "webhook": {"url": "u"}}));
    let mut trimmed = m.clone();
    trimmed.keep_content(|n| n == "webhook");
    assert!(trimmed.get("gcpsm").unwrap().is_null(), "the name stays, the content goes");
    assert_eq!(trimmed.get("webhook"), m.get("webhook"));

    // Two members of half the limit each pass it together.
    let half = format!("\"{}\"", "a".repeat(MAX_FREE_JSON_BYTES / 2));
    let two: FreeJsonMap = serde_json::from_str(&format!(r#"{{"a": {half}, "b": {half}}}"#)).unwrap();
    assert_eq!(two.oversized().map(|o| o.limit), Some(Limit::Bytes));
    assert_eq!(two.keys().count(), 0, "nothing kept past a limit");
    assert!(!two.is_empty());
    assert!(two.check("spec.provider").unwrap_err().message.contains("more than Keyward keeps"));
    // The same measure as one FreeJson of the whole object, within a few bytes.
    let whole = read(&format!(r#"{{"a": {half}, "b": {half}}}"#)).oversized().unwrap();
    assert!(whole.bytes.abs_diff(two.oversized().unwrap().bytes) <= 2, "{whole:?} {two:?}");
    assert_eq!(FreeJsonMap::from_value(&json!({"x": 1})).unwrap().keys().collect::<Vec<_>>(), ["x"]);
}
