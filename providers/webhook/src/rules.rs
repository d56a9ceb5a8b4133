//! The rules of a `Webhook` configuration (always built, pure): field errors for admission and
//! the provider, and what it reaches in the cluster for the tenant boundary.

use std::collections::BTreeSet;

use jsonpath_rust::parser::model::{JpQuery, Segment};
use keyward_crds::provider_config::{CaProvider, CaProviderType};
use keyward_crds::rules::{FieldError, NamedKind, NamedObject, Reach, ValidationErrors, parse_go_duration};
use keyward_template::{Limits, Template};

use crate::api::WebhookSpec;

/// Most entries of `secrets`.
pub const MAX_SECRETS: usize = 32;

/// Most descendant segments (`..`) in a JSONPath: each one multiplies the work over a deeply
/// nested answer, and a tenant writes the path.
pub const MAX_DESCENDANT_SEGMENTS: usize = 2;

/// Methods a request may use.
pub const METHODS: [&str; 7] = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];

const SECRET_FIELDS: [&str; MAX_SECRETS] = [
    "spec.secrets[0].secretRef",
    "spec.secrets[1].secretRef",
    "spec.secrets[2].secretRef",
    "spec.secrets[3].secretRef",
    "spec.secrets[4].secretRef",
    "spec.secrets[5].secretRef",
    "spec.secrets[6].secretRef",
    "spec.secrets[7].secretRef",
    "spec.secrets[8].secretRef",
    "spec.secrets[9].secretRef",
    "spec.secrets[10].secretRef",
    "spec.secrets[11].secretRef",
    "spec.secrets[12].secretRef",
    "spec.secrets[13].secretRef",
    "spec.secrets[14].secretRef",
    "spec.secrets[15].secretRef",
    "spec.secrets[16].secretRef",
    "spec.secrets[17].secretRef",
    "spec.secrets[18].secretRef",
    "spec.secrets[19].secretRef",
    "spec.secrets[20].secretRef",
    "spec.secrets[21].secretRef",
    "spec.secrets[22].secretRef",
    "spec.secrets[23].secretRef",
    "spec.secrets[24].secretRef",
    "spec.secrets[25].secretRef",
    "spec.secrets[26].secretRef",
    "spec.secrets[27].secretRef",
    "spec.secrets[28].secretRef",
    "spec.secrets[29].secretRef",
    "spec.secrets[30].secretRef",
    "spec.secrets[31].secretRef",
];

/// The JSONPath `path` parsed, with at most [`MAX_DESCENDANT_SEGMENTS`] descendant segments.
pub fn parse_json_path(path: &str) -> Result<JpQuery, String> {
    let query = jsonpath_rust::parser::parse_json_path(path).map_err(|e| format!("{path:?} is not a JSONPath: {e}"))?;
    let descendants = query.segments.iter().filter(|s| matches!(s, Segment::Descendant(_))).count();
    if descendants > MAX_DESCENDANT_SEGMENTS || path.matches("..").count() > MAX_DESCENDANT_SEGMENTS {
        return Err(format!(
            "{path:?} has more than {MAX_DESCENDANT_SEGMENTS} descendant segments (..); use a more precise path"
        ));
    }
    Ok(query)
}

/// Whether a parsed JSONPath names one place (names and indexes only), so its one match is the
/// value itself rather than a list of matches.
pub fn is_singular(query: &JpQuery) -> bool {
    use jsonpath_rust::parser::model::Selector;
    query.segments.iter().all(|s| matches!(s, Segment::Selector(Selector::Name(_) | Selector::Index(_))))
}

fn check_template(errs: &mut Vec<FieldError>, field: &str, source: &str) {
    if let Err(e) = Template::parse(field, source, &Limits::default()) {
        errs.push(FieldError::new(field, format!("not a valid template: {e}")));
    }
}

fn is_token(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// The authority of a URL whose scheme is `http://` or `https://`, when it is written literally
/// (no template action before its end).
fn literal_authority(rest: &str) -> Option<&str> {
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..end];
    (!authority.contains("{{")).then_some(authority)
}

fn check_authority(authority: &str) -> Result<(), String> {
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let (host, port) = if let Some(v6) = host_port.strip_prefix('[') {
        let (h, rest) = v6.split_once(']').ok_or("an IPv6 host must end with ]")?;
        (h, rest.strip_prefix(':'))
    } else {
        match host_port.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (host_port, None),
        }
    };
    if host.is_empty() {
        return Err("has no host".into());
    }
    if host.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("has a host with spaces or control characters".into());
    }
    if let Some(p) = port
        && p.parse::<u16>().is_err()
    {
        return Err(format!("has a port {p:?} that is not a number up to 65535"));
    }
    Ok(())
}

/// The field errors of a `Webhook` configuration, with paths as in the configuration object
/// (`spec.url`, `spec.secrets[1].name`, …).
pub fn validate_webhook(spec: &WebhookSpec) -> Result<(), ValidationErrors> {
    let mut errs = Vec::new();
    let url = spec.url.trim();
    let lower = url.get(..8).unwrap_or(url).to_ascii_lowercase();
    let rest = if lower.starts_with("https://") {
        Some(&url[8..])
    } else if lower.starts_with("http://") {
        Some(&url[7..])
    } else {
        None
    };
    match rest {
        None if url.is_empty() => errs.push(FieldError::new("spec.url", "is required")),
        None => errs.push(FieldError::new(
            "spec.url",
            "must start with http:// or https:// (written literally, not from a template)",
        )),
        Some(rest) => {
            if let Some(authority) = literal_authority(rest)
                && let Err(e) = check_authority(authority)
            {
                errs.push(FieldError::new("spec.url", format!("{url:?} {e}")));
            }
            check_template(&mut errs, "spec.url", url);
        }
    }
    if let Some(m) = spec.method.as_deref().filter(|m| !m.is_empty())
        && !METHODS.contains(&m.to_ascii_uppercase().as_str())
    {
        errs.push(FieldError::new("spec.method", format!("{m:?} is not one of {}", METHODS.join(", "))));
    }
    for (name, value) in &spec.headers {
        let field = format!("spec.headers[{name:?}]");
        if !is_token(name) {
            errs.push(FieldError::new(field.clone(), "is not a valid HTTP header name"));
        }
        check_template(&mut errs, &field, value);
    }
    if let Some(body) = &spec.body {
        check_template(&mut errs, "spec.body", body);
    }
    if let Some(t) = &spec.timeout
        && let Err(e) = parse_go_duration(t)
    {
        errs.push(FieldError::new("spec.timeout", e.to_string()));
    }
    if let Some(path) = spec.json_path() {
        if path.contains("{{") {
            check_template(&mut errs, "spec.result.jsonPath", path);
        } else if let Err(e) = parse_json_path(path) {
            errs.push(FieldError::new("spec.result.jsonPath", e));
        }
    }
    if spec.secrets.len() > MAX_SECRETS {
        errs.push(FieldError::new("spec.secrets", format!("has more than {MAX_SECRETS} entries")));
    }
    let mut names = BTreeSet::new();
    for (i, s) in spec.secrets.iter().enumerate() {
        if s.name.is_empty() {
            errs.push(FieldError::new(format!("spec.secrets[{i}].name"), "is required"));
        } else if s.name == "remoteRef" {
            errs.push(FieldError::new(
                format!("spec.secrets[{i}].name"),
                "\"remoteRef\" is the name of the remote reference in templates; choose another name",
            ));
        } else if !names.insert(s.name.as_str()) {
            errs.push(FieldError::new(format!("spec.secrets[{i}].name"), format!("duplicate name {:?}", s.name)));
        }
        if s.secret_ref.name.is_empty() {
            errs.push(FieldError::new(format!("spec.secrets[{i}].secretRef.name"), "is required"));
        }
    }
    if spec.auth.as_ref().is_some_and(|a| a.ntlm.is_some()) {
        errs.push(FieldError::new(
            "spec.auth.ntlm",
            "NTLM authentication is not supported by Keyward's webhook provider; send credentials with templated \
             headers (for example Authorization: Basic) instead",
        ));
    }
    if spec.ca_bundle.is_some() && spec.ca_provider.is_some() {
        errs.push(FieldError::new("spec.caProvider", "set caBundle or caProvider, not both"));
    }
    if spec.ca_provider.as_ref().is_some_and(|p| p.name.is_empty()) {
        errs.push(FieldError::new("spec.caProvider.name", "is required"));
    }
    ValidationErrors(errs).into_result()
}

fn ca_provider(p: &CaProvider) -> NamedObject<'_> {
    let kind = match p.type_ {
        CaProviderType::Secret => NamedKind::Secret,
        CaProviderType::ConfigMap => NamedKind::ConfigMap,
    };
    NamedObject { field: "spec.caProvider", kind, name: &p.name, namespace: p.namespace.as_deref() }
}

/// Every Secret and ConfigMap a `Webhook` configuration names: `secrets[].secretRef`,
/// `auth.ntlm` and `caProvider`.
pub fn webhook_reach(spec: &WebhookSpec) -> Reach<'_> {
    let mut named = Vec::new();
    for (i, s) in spec.secrets.iter().enumerate() {
        let field = SECRET_FIELDS.get(i).copied().unwrap_or("spec.secrets[].secretRef");
        let r = &s.secret_ref;
        named.push(NamedObject { field, kind: NamedKind::Secret, name: &r.name, namespace: r.namespace.as_deref() });
    }
    if let Some(n) = spec.auth.as_ref().and_then(|a| a.ntlm.as_ref()) {
        for (field, r) in [
            ("spec.auth.ntlm.usernameSecret", &n.username_secret),
            ("spec.auth.ntlm.passwordSecret", &n.password_secret),
        ] {
            named.push(NamedObject {
                field,
                kind: NamedKind::Secret,
                name: &r.name,
                namespace: r.namespace.as_deref(),
            });
        }
    }
    if let Some(p) = &spec.ca_provider {
        named.push(ca_provider(p));
    }
    Reach { named, ..Reach::default() }
}

#[cfg(test)]
mod tests {
    use keyward_crds::SecretKeySelector;
    use keyward_crds::rules::{ConfigOwner, check_boundary};

    use super::*;
    use crate::api::{NtlmProtocol, WebhookAuth, WebhookSecret};

    fn fields(spec: &WebhookSpec) -> Vec<String> {
        validate_webhook(spec).err().map(|e| e.0.into_iter().map(|f| f.field).collect()).unwrap_or_default()
    }

    fn spec(url: &str) -> WebhookSpec {
        WebhookSpec { url: url.into(), ..WebhookSpec::default() }
    }

    fn secret(name: &str, secret: &str, ns: Option<&str>) -> WebhookSecret {
        WebhookSecret {
            name: name.into(),
            secret_ref: SecretKeySelector { name: secret.into(), key: None, namespace: ns.map(str::to_string) },
        }
    }

    #[test]
    fn upstreams_examples_are_valid() {
        let mut s = spec("http://httpbin.org/get?parameter={{ .remoteRef.key }}");
        s.result.json_path = Some("$.args.parameter".into());
        s.headers.insert("Content-Type".into(), "application/json".into());
        s.headers
            .insert("Authorization".into(), r#"Basic {{ print .auth.username ":" .auth.password | b64enc }}"#.into());
        s.secrets.push(secret("auth", "webhook-credentials", None));
        assert_eq!(validate_webhook(&s), Ok(()));
        let mut push = spec("http://httpbin.org/push?id={{ .remoteRef.remoteKey }}&secret={{ .remoteRef.secretKey }}");
        push.body = Some(r#"{"secret-field": "{{ index .remoteRef .remoteRef.remoteKey }}"}"#.into());
        push.method = Some("post".into());
        push.timeout = Some("1s".into());
        assert_eq!(validate_webhook(&push), Ok(()));
        // The host may come from a template (checked once rendered); a templated JSONPath too.
        let mut t = spec("https://{{ .remoteRef.key }}.example.com:8443/x");
        t.result.json_path = Some("$.{{ .remoteRef.property }}".into());
        assert_eq!(validate_webhook(&t), Ok(()));
    }

    #[test]
    fn every_field_is_checked_with_its_path() {
        assert_eq!(fields(&spec("")), ["spec.url"]);
        assert_eq!(fields(&spec("ftp://h/")), ["spec.url"]);
        assert_eq!(fields(&spec("{{ .remoteRef.key }}")), ["spec.url"], "the scheme is literal");
        assert_eq!(fields(&spec("http://:80/")), ["spec.url"]);
        assert_eq!(fields(&spec("http://h:99999/")), ["spec.url"]);
        assert_eq!(fields(&spec("http://h/{{ .remoteRef.key")), ["spec.url"]);
        let mut s = spec("https://h/");
        s.method = Some("BREW".into());
        s.timeout = Some("soon".into());
        s.result.json_path = Some("$[".into());
        s.body = Some("{{ end }}".into());
        s.headers.insert("Bad Header".into(), "{{".into());
        s.secrets = vec![
            secret("auth", "a", None),
            secret("auth", "b", None),
            secret("remoteRef", "c", None),
            secret("", "", None),
        ];
        s.auth = Some(WebhookAuth {
            ntlm: Some(NtlmProtocol {
                username_secret: SecretKeySelector { name: "u".into(), key: Some("u".into()), namespace: None },
                password_secret: SecretKeySelector { name: "u".into(), key: Some("p".into()), namespace: None },
            }),
        });
        assert_eq!(
            fields(&s),
            [
                "spec.method",
                "spec.headers[\"Bad Header\"]",
                "spec.headers[\"Bad Header\"]",
                "spec.body",
                "spec.timeout",
                "spec.result.jsonPath",
                "spec.secrets[1].name",
                "spec.secrets[2].name",
                "spec.secrets[3].name",
                "spec.secrets[3].secretRef.name",
                "spec.auth.ntlm",
            ]
        );
        let msg = validate_webhook(&s).expect_err("invalid").to_string();
        assert!(msg.contains("duplicate name \"auth\""), "{msg}");
        assert!(msg.contains("NTLM authentication is not supported"), "{msg}");
        let mut deep = spec("https://h/");
        deep.result.json_path = Some("$..a..b..c".into());
        assert_eq!(fields(&deep), ["spec.result.jsonPath"]);
    }

    #[test]
    fn reach_names_every_secret_and_the_ca() {
        let mut s = spec("https://h/");
        s.secrets = vec![secret("auth", "creds", Some("team-b")), secret("other", "mine", None)];
        s.ca_provider = Some(CaProvider {
            type_: CaProviderType::ConfigMap,
            name: "ca".into(),
            key: "ca.crt".into(),
            namespace: Some("certs".into()),
        });
        let reach = webhook_reach(&s);
        let named: Vec<_> = reach.named.iter().map(|n| (n.field, n.kind, n.name, n.namespace)).collect();
        assert_eq!(
            named,
            [
                ("spec.secrets[0].secretRef", NamedKind::Secret, "creds", Some("team-b")),
                ("spec.secrets[1].secretRef", NamedKind::Secret, "mine", None),
                ("spec.caProvider", NamedKind::ConfigMap, "ca", Some("certs")),
            ]
        );
        let refused = check_boundary(ConfigOwner::Tenant, "team-a", &reach).expect_err("another namespace");
        let refused: Vec<_> = refused.0.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(refused, ["spec.secrets[0].secretRef.namespace", "spec.caProvider.namespace"]);
        assert!(check_boundary(ConfigOwner::Operator, "keyward", &reach).is_ok());
    }

    #[test]
    fn singular_paths_are_recognised() {
        for (path, singular) in
            [("$.a.b", true), ("$['a'][0]", true), ("$.a[*]", false), ("$..a", false), ("$.a[?(@.x)]", false)]
        {
            assert_eq!(is_singular(&parse_json_path(path).expect("parses")), singular, "{path}");
        }
    }
}
