//! Rendering a request from the configuration's templates with Keyward's Go-template engine
//! (`keyward-template`, the one the reconciler renders target Secrets with).
//!
//! The data the templates see is upstream's: `.remoteRef` (`key`, `version`, `property`,
//! `namespace`; for pushes `remoteKey`, `secretKey` and the pushed value under the remote key's
//! name) and one map per entry of `secrets` (`.<name>.<key>`). In `url` the `.remoteRef` values
//! are URL-query-escaped; elsewhere they are as given. Fields that do not apply to an operation
//! are empty strings.
//!
//! Templates are the tenant's: rendering runs on a blocking thread with a CPU budget (steps), an
//! output cap and a deadline, so a hostile template never holds an async worker.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use keyward_provider_runtime::ProviderError;
use keyward_template::{Limits, Template, Value};

use crate::api::WebhookSpec;

/// How long rendering one request may take (all its templates).
pub const RENDER_DEADLINE: Duration = Duration::from_secs(2);

/// Bounds of one request's templates: a tenth of the reconciler's CPU budget, 1 MiB of output.
pub fn limits() -> Limits {
    Limits { max_steps: 1_000_000, ..Limits::default() }.within(RENDER_DEADLINE)
}

/// What a request is about.
#[derive(Clone, Debug, Default)]
pub struct RemoteRef {
    /// `remoteRef.key` (reads; for SecretExists the remote key).
    pub key: String,
    /// `remoteRef.version`.
    pub version: String,
    /// `remoteRef.property`.
    pub property: String,
    /// `remoteRef.remoteKey` (pushes and deletes).
    pub remote_key: String,
    /// `remoteRef.secretKey` (pushes).
    pub secret_key: String,
    /// The pushed value, seen as `remoteRef.<remoteKey>` (pushes).
    pub pushed: Option<Vec<u8>>,
}

/// One Secret's data: each key to its value.
pub type SecretKeys = BTreeMap<String, Vec<u8>>;

/// The Secrets of `secrets[]` by template name.
pub type SecretData = BTreeMap<String, SecretKeys>;

/// Most bytes (keys and values) of Secret data all of `secrets[]` together give the templates.
/// Templates for a URL, headers and a body need far less, and every render copies this data,
/// so one configuration naming a large Secret many times would otherwise hold and copy many
/// times its size.
pub const MAX_SECRET_DATA_BYTES: usize = 1 << 20;

fn data_bytes(data: &SecretKeys) -> usize {
    data.iter().map(|(k, v)| k.len() + v.len()).sum()
}

/// Adds `data`, read for the `secrets[]` entry at `field`, as the templates' `.<name>`; refused
/// when all entries together would hold more than [`MAX_SECRET_DATA_BYTES`].
pub fn add_secret(out: &mut SecretData, field: &str, name: &str, data: &SecretKeys) -> Result<(), ProviderError> {
    let total = out.values().map(data_bytes).sum::<usize>() + data_bytes(data);
    if total > MAX_SECRET_DATA_BYTES {
        return Err(ProviderError::BadConfig(format!(
            "spec.secrets: the Secrets it names hold more than {} KiB of data together ({total} bytes with {field}; \
             a Secret named twice counts twice); templates need far less: name Secrets holding only what the \
             templates use",
            MAX_SECRET_DATA_BYTES >> 10
        )));
    }
    out.entry(name.to_string()).or_default().extend(data.iter().map(|(k, v)| (k.clone(), v.clone())));
    Ok(())
}

/// A rendered request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rendered {
    /// The URL.
    pub url: String,
    /// Headers, in name order.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
    /// The JSONPath, when set and not empty once rendered.
    pub json_path: Option<String>,
}

/// Go's `url.QueryEscape`: everything but ASCII letters, digits and `-_.~` as `%XX`, spaces `+`.
pub fn query_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(b as char),
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// The fields of `.remoteRef` the templates see beside a pushed value.
pub const REMOTE_REF_FIELDS: [&str; 6] = ["key", "version", "property", "namespace", "remoteKey", "secretKey"];

/// Refuses a pushed remote key that is the name of a `.remoteRef` field: the value is seen as
/// `.remoteRef.<remote key>`, so it would replace that field, and a push named `namespace` or
/// `remoteKey` would choose where the operator's templates send it (`INVALID_ARGUMENT`).
pub fn check_pushed_key(remote_key: &str) -> Result<(), ProviderError> {
    if REMOTE_REF_FIELDS.contains(&remote_key) {
        return Err(ProviderError::InvalidArgument(format!(
            "remote key {remote_key:?} is the name of a field of .remoteRef in the Webhook store's templates \
             ({}), which a pushed value would replace; push under another remote key",
            REMOTE_REF_FIELDS.join(", ")
        )));
    }
    Ok(())
}

fn context(r: &RemoteRef, namespace: &str, secrets: &SecretData, escape: bool) -> Value {
    let text = |s: &str| Value::str(if escape { query_escape(s) } else { s.to_string() });
    let fields = [&r.key, &r.version, &r.property, &namespace.to_string(), &r.remote_key, &r.secret_key];
    let mut remote: BTreeMap<String, Value> = REMOTE_REF_FIELDS
        .iter()
        .zip(fields)
        .map(|(name, value)| (name.to_string(), if *name == "namespace" { Value::str(value) } else { text(value) }))
        .collect();
    // render_now refused a pushed key naming a field; the fields stay what they are regardless.
    if let Some(v) = r.pushed.as_ref().filter(|_| !remote.contains_key(&r.remote_key)) {
        let value =
            if escape { Value::str(query_escape(&String::from_utf8_lossy(v))) } else { Value::from_bytes(v.clone()) };
        remote.insert(r.remote_key.clone(), value);
    }
    let mut root: BTreeMap<String, Value> = secrets
        .iter()
        .map(|(name, data)| {
            let m = data.iter().map(|(k, v)| (k.clone(), Value::from_bytes(v.clone()))).collect();
            (name.clone(), Value::map(m))
        })
        .collect();
    root.insert("remoteRef".to_string(), Value::map(remote));
    Value::map(root)
}

fn run(field: &str, source: &str, data: &Value, limits: &Limits) -> Result<Vec<u8>, ProviderError> {
    Template::parse(field, source, limits)
        .and_then(|t| t.execute(data, limits))
        .map_err(|e| ProviderError::BadConfig(format!("{field}: {e}")))
}

fn text(field: &str, bytes: Vec<u8>) -> Result<String, ProviderError> {
    String::from_utf8(bytes)
        .map_err(|_| ProviderError::BadConfig(format!("{field}: renders to bytes that are not UTF-8")))
}

/// Renders `spec`'s templates for `r` (synchronously; see [`render`]). `default_body` is the
/// body when `spec.body` is unset (a push sends the value itself).
pub fn render_now(
    spec: &WebhookSpec,
    r: &RemoteRef,
    namespace: &str,
    secrets: &SecretData,
    default_body: Option<&[u8]>,
    limits: &Limits,
) -> Result<Rendered, ProviderError> {
    if r.pushed.is_some() {
        check_pushed_key(&r.remote_key)?;
    }
    let escaped = context(r, namespace, secrets, true);
    let raw = context(r, namespace, secrets, false);
    let url = text("spec.url", run("spec.url", &spec.url, &escaped, limits)?)?;
    let mut headers = Vec::with_capacity(spec.headers.len());
    for (name, value) in &spec.headers {
        let field = format!("spec.headers[{name:?}]");
        let v = text(&field, run(&field, value, &raw, limits)?)?;
        headers.push((name.clone(), v));
    }
    let body = match (spec.body.as_deref(), default_body) {
        (Some(b), _) => run("spec.body", b, &raw, limits)?,
        (None, Some(d)) => d.to_vec(),
        (None, None) => Vec::new(),
    };
    let json_path = match spec.json_path() {
        Some(p) => Some(text("spec.result.jsonPath", run("spec.result.jsonPath", p, &raw, limits)?)?),
        None => None,
    }
    .filter(|p| !p.trim().is_empty());
    let total = url.len() + body.len() + headers.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>();
    if total > limits.max_output_bytes {
        return Err(ProviderError::BadConfig(format!(
            "the rendered request is larger than {} bytes",
            limits.max_output_bytes
        )));
    }
    Ok(Rendered { url, headers, body, json_path })
}

/// [`render_now`] on a blocking thread, with [`limits`].
pub async fn render(
    spec: &WebhookSpec,
    r: &RemoteRef,
    namespace: &str,
    secrets: &Arc<SecretData>,
    default_body: Option<Vec<u8>>,
) -> Result<Rendered, ProviderError> {
    let (spec, r, namespace, secrets) = (spec.clone(), r.clone(), namespace.to_string(), Arc::clone(secrets));
    tokio::task::spawn_blocking(move || render_now(&spec, &r, &namespace, &secrets, default_body.as_deref(), &limits()))
        .await
        .map_err(|e| ProviderError::Internal(format!("rendering the request: {e}")))?
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(url: &str) -> WebhookSpec {
        WebhookSpec { url: url.into(), ..WebhookSpec::default() }
    }

    fn get(key: &str, property: &str) -> RemoteRef {
        RemoteRef { key: key.into(), property: property.into(), ..RemoteRef::default() }
    }

    fn creds() -> SecretData {
        BTreeMap::from([(
            "auth".to_string(),
            BTreeMap::from([("username".to_string(), b"test".to_vec()), ("password".to_string(), b"p w".to_vec())]),
        )])
    }

    #[test]
    fn url_values_are_query_escaped_and_the_rest_raw() {
        let mut s = spec("http://h/get?parameter={{ .remoteRef.key }}&p={{ .remoteRef.property }}");
        s.headers
            .insert("Authorization".into(), "Basic {{ print .auth.username \":\" .auth.password | b64enc }}".into());
        s.body = Some(r#"{"k": "{{ .remoteRef.key }}", "ns": "{{ .remoteRef.namespace }}"}"#.into());
        s.result.json_path = Some("$.args.{{ .remoteRef.property }}".into());
        let r = render_now(&s, &get("a b&c/d", "parameter"), "team-a", &creds(), None, &limits()).expect("renders");
        assert_eq!(r.url, "http://h/get?parameter=a+b%26c%2Fd&p=parameter");
        assert_eq!(r.headers, [("Authorization".to_string(), "Basic dGVzdDpwIHc=".to_string())]);
        assert_eq!(r.body, br#"{"k": "a b&c/d", "ns": "team-a"}"#);
        assert_eq!(r.json_path.as_deref(), Some("$.args.parameter"));
    }

    #[test]
    fn a_push_sees_its_value_and_sends_it_without_a_body() {
        let s = spec("http://h/push?id={{ .remoteRef.remoteKey }}&secret={{ .remoteRef.secretKey }}");
        let r = RemoteRef {
            remote_key: "remotekey".into(),
            secret_key: "testsecret".into(),
            pushed: Some(b"v a l".to_vec()),
            ..RemoteRef::default()
        };
        let out = render_now(&s, &r, "ns", &SecretData::new(), Some(b"v a l"), &limits()).expect("renders");
        assert_eq!(out.url, "http://h/push?id=remotekey&secret=testsecret");
        assert_eq!(out.body, b"v a l");
        // Upstream's documented body: the value under the remote key's name.
        let mut s = s.clone();
        s.body = Some(r#"{"secret-field": "{{ index .remoteRef .remoteRef.remoteKey }}"}"#.into());
        let out = render_now(&s, &r, "ns", &SecretData::new(), Some(b"v a l"), &limits()).expect("renders");
        assert_eq!(out.body, br#"{"secret-field": "v a l"}"#);
        // A remote key is data, never template source: nothing it holds is executed.
        let r = RemoteRef { remote_key: "x }}{{ .evil".into(), pushed: Some(b"v".to_vec()), ..RemoteRef::default() };
        let out = render_now(&spec("http://h/"), &r, "ns", &SecretData::new(), Some(b"v"), &limits()).expect("plain");
        assert_eq!(out.body, b"v");
    }

    #[test]
    fn a_pushed_key_never_replaces_a_template_field() {
        let s = spec("http://h/{{ .remoteRef.namespace }}/{{ .remoteRef.remoteKey }}");
        for field in REMOTE_REF_FIELDS {
            let r = RemoteRef { remote_key: field.into(), pushed: Some(b"victim".to_vec()), ..RemoteRef::default() };
            let e = render_now(&s, &r, "team-a", &SecretData::new(), Some(b"victim"), &limits())
                .expect_err("a field's name is refused as a pushed key");
            assert_eq!(e.code(), tonic::Code::InvalidArgument, "{field}: {e}");
            assert!(e.to_string().contains(&format!("remote key {field:?} is the name of a field")), "{e}");
        }
        // A delete names the key without a value: the fields are its own.
        let r = RemoteRef { remote_key: "namespace".into(), ..RemoteRef::default() };
        let out = render_now(&s, &r, "team-a", &SecretData::new(), None, &limits()).expect("no value, no collision");
        assert_eq!(out.url, "http://h/team-a/namespace");
    }

    #[test]
    fn missing_data_and_hostile_templates_are_configuration_errors() {
        let e = render_now(&spec("http://h/{{ .auth.user }}"), &get("k", ""), "ns", &creds(), None, &limits())
            .expect_err("no such key");
        assert_eq!(e.code(), tonic::Code::FailedPrecondition);
        assert!(e.to_string().contains("spec.url"), "{e}");
        let spin = spec("http://h/{{ range $i := until 100000 }}{{ range $j := until 100000 }}x{{ end }}{{ end }}");
        let started = std::time::Instant::now();
        let e = render_now(&spin, &get("k", ""), "ns", &creds(), None, &limits()).expect_err("over budget");
        assert_eq!(e.code(), tonic::Code::FailedPrecondition);
        assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
        let mut crlf = spec("http://h/");
        crlf.headers.insert("X".into(), "{{ .remoteRef.key }}".into());
        let out = render_now(&crlf, &get("a\r\nInjected: 1", ""), "ns", &creds(), None, &limits()).expect("renders");
        // Rendered as given; the client refuses the header value (tested there).
        assert!(out.headers[0].1.contains('\n'));
    }

    #[test]
    fn query_escape_is_gos() {
        assert_eq!(query_escape("a-b_c.d~e f/g?h#i%j"), "a-b_c.d~e+f%2Fg%3Fh%23i%25j");
        assert_eq!(query_escape("é"), "%C3%A9");
    }

    #[test]
    fn secrets_data_is_capped_in_total_however_often_a_secret_is_named() {
        let big = BTreeMap::from([("blob".to_string(), vec![b'x'; 600 << 10])]);
        let mut out = SecretData::new();
        add_secret(&mut out, "spec.secrets[0].secretRef", "a", &big).expect("600 KiB is within the cap");
        let e = add_secret(&mut out, "spec.secrets[1].secretRef", "b", &big).expect_err("twice is 1200 KiB");
        assert_eq!(e.code(), tonic::Code::FailedPrecondition, "{e}");
        assert!(e.to_string().contains("spec.secrets: the Secrets it names hold more than 1024 KiB"), "{e}");
        assert!(e.to_string().contains("spec.secrets[1].secretRef"), "{e}");
        assert!(!out.contains_key("b"), "nothing of a refused Secret is kept");
        add_secret(&mut out, "spec.secrets[1].secretRef", "b", &creds()["auth"]).expect("small ones still fit");
        assert_eq!(out["b"]["username"], b"test");
    }
}
