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

/// Longest key a rewrite may make of an ExternalSecret's key: a Secret's data keys are at most
/// 253 characters (Kubernetes validates them as config keys), so a longer one could never be
/// written, and a rewrite that grows keys further (`$0$0…` doubles a key per rewrite) is stopped
/// before the key is built.
pub const SECRET_KEY_MAX: usize = 253;

/// Regexp matches and target pieces one set of rewrites may work through, over all its keys:
/// a target of thousands of references to a group that matches nothing builds no key but still
/// costs a loop per match. Far more than renaming even 50,000 keys needs (a few tens of ms).
const REGEXP_WORK: usize = 32 * 1024 * 1024;

/// Steps a key transform may take off the render pool: far more than renaming a key needs, far
/// less than a `bcrypt`.
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
///
/// A regexp or transform may not make a key longer than [`SECRET_KEY_MAX`] (or than the key
/// it was given, when the provider's key was already longer).
pub fn rewrite_limited(
    rewrites: &[ExternalSecretRewrite],
    map: BTreeMap<String, Vec<u8>>,
    limits: &Limits,
) -> Result<BTreeMap<String, Vec<u8>>, RenderError> {
    let mut map = map;
    let work = std::cell::Cell::new(0);
    for (i, r) in rewrites.iter().enumerate() {
        if let Some(m) = &r.merge {
            map = merge(m, map).map_err(|e| RenderError::Failed(format!("rewrite[{i}].merge: {e}")))?;
            continue;
        }
        // A template is parsed once per map, and not at all for an empty one (as upstream).
        if r.transform.is_some() && map.is_empty() {
            continue;
        }
        let step = Step::compile(i, r)?;
        map = map
            .into_iter()
            .map(|(k, v)| step.apply(i, &k, SECRET_KEY_MAX, "Secret key", limits, &work).map(|k| (k, v)))
            .collect::<Result<_, _>>()?;
    }
    Ok(map)
}

/// Rewrites compiled once (regexps and templates) to rename many single keys, each on its own
/// (PushSecret `dataTo` remote keys): merges do not apply.
pub struct KeyRewrites {
    steps: Vec<(usize, Step)>,
    max_key: usize,
    what: &'static str,
    work: std::cell::Cell<usize>,
}

impl KeyRewrites {
    /// Compiles `rewrites`; a rewritten key may be at most `max_key` bytes (or as long as the key
    /// it was given), `what` names such a key in errors.
    pub fn compile(
        rewrites: &[ExternalSecretRewrite],
        max_key: usize,
        what: &'static str,
    ) -> Result<Self, RenderError> {
        let steps = rewrites
            .iter()
            .enumerate()
            .filter(|(_, r)| r.merge.is_none())
            .map(|(i, r)| Step::compile(i, r).map(|s| (i, s)))
            .collect::<Result<_, _>>()?;
        Ok(KeyRewrites { steps, max_key, what, work: std::cell::Cell::new(0) })
    }

    /// No rewrites: every key stays as it is.
    pub fn none(max_key: usize, what: &'static str) -> Self {
        KeyRewrites { steps: Vec::new(), max_key, what, work: std::cell::Cell::new(0) }
    }

    /// How many transform templates one key goes through.
    pub fn transforms(&self) -> usize {
        self.steps.iter().filter(|(_, s)| matches!(s, Step::Transform(_))).count()
    }

    /// `key` after every rewrite, with `limits` for each transform template.
    pub fn key(&self, key: &str, limits: &Limits) -> Result<String, RenderError> {
        let mut key = key.to_string();
        for (i, step) in &self.steps {
            key = step.apply(*i, &key, self.max_key, self.what, limits, &self.work)?;
        }
        Ok(key)
    }
}

/// One compiled rewrite.
enum Step {
    Regexp { pattern: Regex, target: Vec<Piece> },
    Transform(keyward_template::Template),
    Nothing,
}

/// A part of a regexp rewrite's target.
#[derive(Debug, PartialEq)]
enum Piece {
    Literal(String),
    Group(usize),
}

impl Step {
    fn compile(i: usize, r: &ExternalSecretRewrite) -> Result<Step, RenderError> {
        if let Some(t) = &r.transform {
            let parsed = keyward_template::Template::parse("transform", &t.template, &Limits::default());
            return parsed.map(Step::Transform).map_err(|e| {
                RenderError::from_template(&e, std::time::Duration::ZERO).context(&format!("rewrite[{i}].transform: "))
            });
        }
        let Some(re) = &r.regexp else { return Ok(Step::Nothing) };
        let pattern = Regex::new(&re.source)
            .map_err(|e| RenderError::Failed(format!("rewrite[{i}].regexp.source {:?} is invalid: {e}", re.source)))?;
        let target = pieces(&pattern, &re.target);
        Ok(Step::Regexp { pattern, target })
    }

    /// `key` rewritten, refused (before it is built) when longer than `max_key` bytes and than
    /// `key`.
    fn apply(
        &self,
        i: usize,
        key: &str,
        max_key: usize,
        what: &str,
        limits: &Limits,
        work: &std::cell::Cell<usize>,
    ) -> Result<String, RenderError> {
        let max = max_key.max(key.len());
        let too_long = || {
            RenderError::Failed(format!(
                "rewrite[{i}] makes key {:?} longer than {max} bytes, more than a {what} may hold",
                shortened(key)
            ))
        };
        match self {
            Step::Nothing => Ok(key.to_string()),
            Step::Transform(t) => {
                let limit = limits.deadline.map(|d| d.saturating_duration_since(std::time::Instant::now()));
                let data = keyward_template::Value::map(BTreeMap::from([(
                    "value".to_string(),
                    keyward_template::Value::str(key),
                )]));
                let out = t.execute(&data, limits).map_err(|e| {
                    RenderError::from_template(&e, limit.unwrap_or_default())
                        .context(&format!("rewrite[{i}].transform: "))
                })?;
                if out.len() > max {
                    return Err(too_long());
                }
                String::from_utf8(out)
                    .map_err(|_| RenderError::Failed(format!("rewrite[{i}].transform: rendered key is not UTF-8")))
            }
            Step::Regexp { pattern, target } => replace_bounded(pattern, target, key, max, work).map_err(|e| match e {
                Bound::Length => too_long(),
                Bound::Work => RenderError::Failed(format!(
                    "rewrite[{i}].regexp takes more than {REGEXP_WORK} matches and target parts over its keys"
                )),
            }),
        }
    }
}

/// The first 64 characters of a key, for messages.
fn shortened(key: &str) -> String {
    match key.char_indices().nth(64) {
        Some((end, _)) => format!("{}…", &key[..end]),
        None => key.to_string(),
    }
}

/// Why a bounded replacement stopped.
enum Bound {
    Length,
    Work,
}

/// `pattern.replace_all(key, target)`, built piece by piece and stopped as soon as it would be
/// longer than `max` bytes or `work` passes [`REGEXP_WORK`].
fn replace_bounded(
    pattern: &Regex,
    target: &[Piece],
    key: &str,
    max: usize,
    work: &std::cell::Cell<usize>,
) -> Result<String, Bound> {
    let mut out = String::new();
    let push = |out: &mut String, s: &str| {
        if out.len() + s.len() > max {
            return Err(Bound::Length);
        }
        out.push_str(s);
        Ok(())
    };
    let mut last = 0;
    for caps in pattern.captures_iter(key) {
        work.set(work.get() + 1 + target.len());
        if work.get() > REGEXP_WORK {
            return Err(Bound::Work);
        }
        let Some(whole) = caps.get(0) else { continue };
        push(&mut out, &key[last..whole.start()])?;
        for piece in target {
            match piece {
                Piece::Literal(s) => push(&mut out, s)?,
                Piece::Group(g) => push(&mut out, caps.get(*g).map_or("", |m| m.as_str()))?,
            }
        }
        last = whole.end();
    }
    push(&mut out, &key[last..])?;
    Ok(out)
}

/// A replacement string as `regex` reads it (`$1`, `$name`, `${name}`, `$$`; a reference to a
/// group the pattern lacks is empty; a `$` that starts no reference is literal), resolved
/// against `pattern`'s groups, adjacent literals joined.
fn pieces(pattern: &Regex, target: &str) -> Vec<Piece> {
    let group = |name: &str| match name.parse::<usize>() {
        Ok(n) => (n < pattern.captures_len()).then_some(n),
        Err(_) => pattern.capture_names().position(|n| n == Some(name)),
    };
    let mut out: Vec<Piece> = Vec::new();
    let literal = |out: &mut Vec<Piece>, s: &str| match out.last_mut() {
        Some(Piece::Literal(l)) => l.push_str(s),
        _ if s.is_empty() => {}
        _ => out.push(Piece::Literal(s.to_string())),
    };
    let is_name = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut rest = target;
    while let Some(at) = rest.find('$') {
        literal(&mut out, &rest[..at]);
        rest = &rest[at..];
        let bytes = rest.as_bytes();
        if bytes.get(1) == Some(&b'$') {
            literal(&mut out, "$");
            rest = &rest[2..];
            continue;
        }
        let (name, end) = if bytes.get(1) == Some(&b'{') {
            match rest[2..].find('}') {
                Some(close) => (&rest[2..2 + close], 2 + close + 1),
                None => ("", 0),
            }
        } else {
            let len = bytes[1..].iter().take_while(|b| is_name(**b)).count();
            (&rest[1..1 + len], if len == 0 { 0 } else { 1 + len })
        };
        if end == 0 {
            literal(&mut out, "$");
            rest = &rest[1..];
            continue;
        }
        if let Some(g) = group(name) {
            out.push(Piece::Group(g));
        }
        rest = &rest[end..];
    }
    literal(&mut out, rest);
    out
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

    fn regexp(source: &str, target: &str) -> ExternalSecretRewrite {
        ExternalSecretRewrite {
            regexp: Some(RewriteRegexp { source: source.into(), target: target.into() }),
            ..Default::default()
        }
    }

    #[test]
    fn a_rewrite_that_grows_keys_is_refused_before_the_key_is_built() {
        // Each rewrite multiplies the key's length by 16: 2 GB after the 8th without a bound.
        let rw = vec![regexp(".", "$0$0$0$0$0$0$0$0$0$0$0$0$0$0$0$0"); 8];
        let map: BTreeMap<String, Vec<u8>> = [("password".to_string(), b"x".to_vec())].into();
        let started = std::time::Instant::now();
        let err = rewrite(&rw, map).unwrap_err();
        assert!(started.elapsed() < std::time::Duration::from_secs(1), "{:?}", started.elapsed());
        assert!(err.contains("rewrite[1]") && err.contains("253 bytes"), "{err}");
        // A provider key already longer than a Secret key may still be rewritten, never grown.
        let long = "p".repeat(300);
        let out = rewrite(&[regexp("^p", "q")], [(long.clone(), vec![])].into()).unwrap();
        assert_eq!(out.keys().next().unwrap().len(), 300);
        assert!(rewrite(&[regexp("^", "x")], [(long, vec![])].into()).unwrap_err().contains("rewrite[0]"));
        let grow = vec![ExternalSecretRewrite {
            transform: Some(RewriteTransform { template: "{{ .value }}{{ .value }}".into() }),
            ..Default::default()
        }];
        let err = rewrite(&grow, [("k".repeat(200), vec![])].into()).unwrap_err();
        assert!(err.contains("rewrite[0]") && err.contains("253"), "{err}");
    }

    #[test]
    fn bounded_replacement_reads_targets_as_regex_does() {
        let key = "db-user_name-42";
        let patterns = [r"^(?P<p>[a-z]+)-(\w+)-(\d+)$", r"(\w)", "", "-", r"(?P<n>\d)?"];
        let targets = [
            "$1", "${1}x", "$1x", "$p_$2", "${p}_$2", "$$1", "$", "a$", "${", "${}", "$9", "$0$0", "$nope", "${2}${3}",
            "x$-y", "$01", "${01}", "lit",
        ];
        for source in patterns {
            let pattern = Regex::new(source).unwrap();
            for target in targets {
                let want = pattern.replace_all(key, target).into_owned();
                let got = replace_bounded(&pattern, &pieces(&pattern, target), key, 10_000, &Default::default());
                assert_eq!(got.ok(), Some(want), "{source:?} {target:?}");
            }
        }
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
