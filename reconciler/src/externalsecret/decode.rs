//! Decoding strategies and key rewrites, applied by the reconciler after the provider answered
//! (providers return raw bytes and never decode).

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
use keyward_crds::external_secret::{
    DecodingStrategy, ExternalSecretRewrite, MergeConflictPolicy, MergePriorityPolicy, MergeStrategy, RewriteMerge,
};
use keyward_template::Limits;
use regex::Regex;

use crate::renders::RenderError;

/// Steps a key transform may take off the render pool (PushSecret `dataTo` rewrites, one key
/// at a time on an async worker): far more than renaming a key needs, far less than a `bcrypt`.
const KEY_TRANSFORM_STEPS: usize = 100_000;
/// Wall-clock limit of the rewrites of one map off the render pool.
const KEY_TRANSFORM_TIME: std::time::Duration = std::time::Duration::from_millis(100);

/// Decodes one value.
pub fn decode(strategy: Option<DecodingStrategy>, key: &str, value: Vec<u8>) -> Result<Vec<u8>, String> {
    let trimmed = |v: &[u8]| String::from_utf8_lossy(v).trim().to_string();
    match strategy.unwrap_or(DecodingStrategy::None) {
        DecodingStrategy::None => Ok(value),
        DecodingStrategy::Base64 => {
            let s = trimmed(&value);
            STANDARD
                .decode(&s)
                .or_else(|_| STANDARD_NO_PAD.decode(&s))
                .map_err(|e| format!("value of {key:?} is not Base64 (decodingStrategy Base64): {e}"))
        }
        DecodingStrategy::Base64Url => {
            let s = trimmed(&value);
            URL_SAFE
                .decode(&s)
                .or_else(|_| URL_SAFE_NO_PAD.decode(&s))
                .map_err(|e| format!("value of {key:?} is not URL-safe Base64 (decodingStrategy Base64URL): {e}"))
        }
        DecodingStrategy::Auto => {
            let s = trimmed(&value);
            Ok(STANDARD
                .decode(&s)
                .or_else(|_| URL_SAFE.decode(&s))
                .or_else(|_| URL_SAFE_NO_PAD.decode(&s))
                .unwrap_or(value))
        }
    }
}

/// Applies the rewrites of a dataFrom entry, in order, to every key of `map`, with the small
/// limits of a rewrite run where it is called (see [`KEY_TRANSFORM_STEPS`]).
pub fn rewrite(
    rewrites: &[ExternalSecretRewrite],
    map: BTreeMap<String, Vec<u8>>,
) -> Result<BTreeMap<String, Vec<u8>>, String> {
    let limits = Limits { max_steps: KEY_TRANSFORM_STEPS, ..Limits::default() }.within(KEY_TRANSFORM_TIME);
    rewrite_limited(rewrites, map, &limits).map_err(|e| e.to_string())
}

/// Whether any rewrite runs a template (and so belongs on the render pool).
pub fn has_transform(rewrites: &[ExternalSecretRewrite]) -> bool {
    rewrites.iter().any(|r| r.transform.is_some())
}

/// [`rewrite`] with `limits` for the transform templates (their deadline covers every key).
pub fn rewrite_limited(
    rewrites: &[ExternalSecretRewrite],
    map: BTreeMap<String, Vec<u8>>,
    limits: &Limits,
) -> Result<BTreeMap<String, Vec<u8>>, RenderError> {
    let limit = limits.deadline.map(|d| d.saturating_duration_since(std::time::Instant::now())).unwrap_or_default();
    let mut map = map;
    for (i, r) in rewrites.iter().enumerate() {
        if let Some(m) = &r.merge {
            map = merge(m, map).map_err(|e| RenderError::Failed(format!("rewrite[{i}].merge: {e}")))?;
            continue;
        }
        if let Some(t) = &r.transform {
            map = map
                .into_iter()
                .map(|(k, v)| {
                    keyward_template::transform_key(&t.template, &k, limits).map(|k| (k, v)).map_err(|e| {
                        RenderError::from_template(&e, limit).context(&format!("rewrite[{i}].transform: "))
                    })
                })
                .collect::<Result<_, _>>()?;
            continue;
        }
        let Some(re) = &r.regexp else { continue };
        let pattern = Regex::new(&re.source)
            .map_err(|e| RenderError::Failed(format!("rewrite[{i}].regexp.source {:?} is invalid: {e}", re.source)))?;
        map = map.into_iter().map(|(k, v)| (pattern.replace_all(&k, re.target.as_str()).into_owned(), v)).collect();
    }
    Ok(map)
}

/// The merge rewrite: every value read as a JSON object, merged in key order with the
/// `priority` keys last (in their order), a later value winning a member.
fn merge(m: &RewriteMerge, map: BTreeMap<String, Vec<u8>>) -> Result<BTreeMap<String, Vec<u8>>, String> {
    let strict = m.priority_policy.unwrap_or(MergePriorityPolicy::Strict) == MergePriorityPolicy::Strict;
    let order = map.keys().filter(|k| !m.priority.contains(k)).chain(m.priority.iter());
    let mut merged: BTreeMap<String, serde_json::Value> = BTreeMap::new();
    let mut conflicts = Vec::new();
    for key in order {
        let Some(value) = map.get(key) else {
            if strict {
                return Err(format!(
                    "priority key {key:?} is not in the fetched map (priorityPolicy Strict; IgnoreNotFound skips it)"
                ));
            }
            continue;
        };
        let object: serde_json::Map<String, serde_json::Value> =
            serde_json::from_slice(value).map_err(|e| format!("value of {key:?} is not a JSON object: {e}"))?;
        for (member, v) in object {
            if merged.insert(member.clone(), v).is_some() {
                conflicts.push(member);
            }
        }
    }
    if !conflicts.is_empty() && m.conflict_policy.unwrap_or(MergeConflictPolicy::Error) == MergeConflictPolicy::Error {
        return Err(format!(
            "members found in more than one value: {} (conflictPolicy Error; Ignore lets the later value win)",
            conflicts.join(", ")
        ));
    }
    match m.strategy.unwrap_or(MergeStrategy::Extract) {
        MergeStrategy::Extract => Ok(merged.into_iter().map(|(k, v)| (k, json_bytes(v))).collect()),
        MergeStrategy::Json => {
            let into = m.into.as_deref().filter(|s| !s.is_empty()).ok_or("strategy JSON needs into")?;
            let json = serde_json::to_vec(&merged).map_err(|e| e.to_string())?;
            let mut out = map;
            out.insert(into.to_string(), json);
            Ok(out)
        }
    }
}

/// A merged member as Secret bytes: a string as its text, null as nothing, anything else as
/// its JSON.
fn json_bytes(v: serde_json::Value) -> Vec<u8> {
    match v {
        serde_json::Value::String(s) => s.into_bytes(),
        serde_json::Value::Null => Vec::new(),
        other => other.to_string().into_bytes(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keyward_crds::external_secret::{RewriteRegexp, RewriteTransform};

    #[test]
    fn decoding_table() {
        use DecodingStrategy::*;
        let cases: Vec<(Option<DecodingStrategy>, &str, Result<&str, ()>)> = vec![
            (Option::None, "aGVsbG8=", Ok("aGVsbG8=")),
            (Some(None), "aGVsbG8=", Ok("aGVsbG8=")),
            (Some(Base64), "aGVsbG8=", Ok("hello")),
            (Some(Base64), "aGVsbG8", Ok("hello")),
            (Some(Base64), "not base64!", Err(())),
            (Some(Base64Url), "Pz8_", Ok("???")),
            (Some(Base64Url), "Pz8/", Err(())),
            (Some(Auto), "aGVsbG8=", Ok("hello")),
            (Some(Auto), "Pz8_", Ok("???")),
            (Some(Auto), "plain text", Ok("plain text")),
        ];
        for (strategy, input, want) in cases {
            let got = decode(strategy, "k", input.as_bytes().to_vec());
            match want {
                Ok(w) => assert_eq!(got.as_deref(), Ok(w.as_bytes()), "{strategy:?} {input}"),
                Err(()) => assert!(got.unwrap_err().contains("\"k\""), "{strategy:?} {input}"),
            }
        }
    }

    #[test]
    fn regexp_and_template_rewrites() {
        let map: BTreeMap<String, Vec<u8>> =
            [("db-user".to_string(), vec![1]), ("db-pass".to_string(), vec![2])].into();
        let rw = vec![
            ExternalSecretRewrite {
                regexp: Some(RewriteRegexp { source: "^db-(.*)$".into(), target: "DB_$1".into() }),
                ..Default::default()
            },
            ExternalSecretRewrite {
                regexp: Some(RewriteRegexp { source: "pass".into(), target: "PASSWORD".into() }),
                ..Default::default()
            },
        ];
        let out = rewrite(&rw, map.clone()).unwrap();
        assert_eq!(out.keys().collect::<Vec<_>>(), vec!["DB_PASSWORD", "DB_user"]);
        let t = vec![ExternalSecretRewrite {
            transform: Some(RewriteTransform { template: "{{ .value }}".into() }),
            ..Default::default()
        }];
        let out = rewrite(&t, map.clone()).unwrap();
        assert_eq!(out.keys().collect::<Vec<_>>(), map.keys().collect::<Vec<_>>(), "identity transform");
        let upper = vec![ExternalSecretRewrite {
            transform: Some(RewriteTransform { template: "{{ .value | upper }}".into() }),
            ..Default::default()
        }];
        let out = rewrite(&upper, map.clone()).unwrap();
        assert!(out.keys().all(|k| k.chars().all(|c| !c.is_lowercase())), "{out:?}");
    }

    fn merged(m: RewriteMerge, input: &[(&str, &str)]) -> Result<BTreeMap<String, String>, String> {
        let map = input.iter().map(|(k, v)| (k.to_string(), v.as_bytes().to_vec())).collect();
        let rw = vec![ExternalSecretRewrite { merge: Some(m), ..Default::default() }];
        rewrite(&rw, map).map(|out| out.into_iter().map(|(k, v)| (k, String::from_utf8(v).unwrap())).collect())
    }

    fn pairs(m: &BTreeMap<String, String>) -> Vec<(&str, &str)> {
        m.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
    }

    #[test]
    fn merge_extract_hoists_members_and_errors_on_conflicts() {
        let input = [("db", r#"{"user":"admin","port":5432}"#), ("api", r#"{"token":"t","tls":{"on":true}}"#)];
        let out = merged(RewriteMerge::default(), &input).unwrap();
        assert_eq!(
            pairs(&out),
            vec![("port", "5432"), ("tls", r#"{"on":true}"#), ("token", "t"), ("user", "admin")],
            "members replace the map; non-strings as JSON"
        );
        let clash = [("a", r#"{"user":"from-a"}"#), ("b", r#"{"user":"from-b"}"#)];
        let err = merged(RewriteMerge::default(), &clash).unwrap_err();
        assert!(err.contains("rewrite[0].merge") && err.contains("user") && err.contains("conflictPolicy"), "{err}");
        let ignore = RewriteMerge { conflict_policy: Some(MergeConflictPolicy::Ignore), ..Default::default() };
        assert_eq!(merged(ignore.clone(), &clash).unwrap()["user"], "from-b", "alphabetical: b is merged last");
        let prio = RewriteMerge { priority: vec!["a".into()], ..ignore.clone() };
        assert_eq!(merged(prio, &clash).unwrap()["user"], "from-a", "priority keys are merged last");
        let err = merged(RewriteMerge::default(), &[("a", "not json")]).unwrap_err();
        assert!(err.contains("\"a\" is not a JSON object"), "{err}");
    }

    #[test]
    fn merge_priority_policy() {
        let input = [("a", r#"{"x":"1"}"#)];
        let strict = RewriteMerge { priority: vec!["missing".into()], ..Default::default() };
        let err = merged(strict.clone(), &input).unwrap_err();
        assert!(err.contains("\"missing\"") && err.contains("Strict"), "{err}");
        let lenient = RewriteMerge { priority_policy: Some(MergePriorityPolicy::IgnoreNotFound), ..strict };
        assert_eq!(pairs(&merged(lenient, &input).unwrap()), vec![("x", "1")]);
    }

    #[test]
    fn merge_json_keeps_the_map_and_adds_into() {
        let input = [("b", r#"{"user":"u"}"#), ("a", r#"{"pass":"p<&>","n":1}"#)];
        let m = RewriteMerge { strategy: Some(MergeStrategy::Json), into: Some("all".into()), ..Default::default() };
        let out = merged(m.clone(), &input).unwrap();
        assert_eq!(out["all"], r#"{"n":1,"pass":"p<&>","user":"u"}"#, "sorted members, no HTML escaping");
        assert_eq!(out["b"], r#"{"user":"u"}"#, "the source keys stay");
        let over = [("all", r#"{"old":"x"}"#), ("b", r#"{"user":"u"}"#)];
        assert_eq!(merged(m, &over).unwrap()["all"], r#"{"old":"x","user":"u"}"#, "into is overwritten");
        let no_into = RewriteMerge { strategy: Some(MergeStrategy::Json), ..Default::default() };
        assert!(merged(no_into, &input).unwrap_err().contains("needs into"));
    }

    #[test]
    fn merge_then_regexp() {
        let map = [("creds".to_string(), br#"{"user":"u"}"#.to_vec())].into();
        let rw = vec![
            ExternalSecretRewrite { merge: Some(RewriteMerge::default()), ..Default::default() },
            ExternalSecretRewrite {
                regexp: Some(RewriteRegexp { source: "^".into(), target: "DB_".into() }),
                ..Default::default()
            },
        ];
        assert_eq!(rewrite(&rw, map).unwrap().keys().collect::<Vec<_>>(), vec!["DB_user"]);
    }
}
