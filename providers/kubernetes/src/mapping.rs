//! Pure mapping between Kubernetes Secrets and the provider contract: what GetSecret,
//! GetSecretMap and GetAllSecrets return, what PushSecret writes, the push metadata format,
//! and how API errors travel.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use keyward_proto::v1::{ExternalSecretDataRemoteRef, PushSecretData};
use keyward_provider_runtime::json::json_bytes;
use keyward_provider_runtime::{ProviderError, RequestContext, SecretMap};
use serde::Deserialize;

/// `apiVersion` of the push metadata this provider accepts.
pub const PUSH_METADATA_API_VERSION: &str = "kubernetes.external-secrets.io/v1alpha1";
/// `kind` of the push metadata this provider accepts.
pub const PUSH_METADATA_KIND: &str = "PushSecretMetadata";

/// Checks that a remote key names a Secret: the shared key rule, then a valid object name
/// (a DNS-1123 subdomain: lowercase letters, digits, `-` and `.`, at most 253 characters).
/// The client library puts the name into the request URL as it is, so a `/`, `?`, `%` or a
/// `..` segment would reach another path of the API server; no Secret can have such a name,
/// so refusing it loses nothing.
pub fn check_remote_name(key: &str) -> Result<(), ProviderError> {
    keyward_provider_runtime::keys::check_key(key)?;
    if !keyward_crds::rules::is_dns_subdomain(key) {
        return Err(ProviderError::InvalidArgument(format!(
            "remote key {key:?} is not a Secret name: lowercase letters, digits, '-' and '.', at most 253 characters"
        )));
    }
    Ok(())
}

fn secret_name(s: &Secret) -> String {
    format!(
        "{}/{}",
        s.metadata.namespace.as_deref().unwrap_or_default(),
        s.metadata.name.as_deref().unwrap_or_default()
    )
}

/// A Secret's data as a JSON object of strings. Values must be UTF-8 to fit in JSON; others
/// must be requested one by one with `property`.
pub fn data_json(secret: &Secret) -> Result<Vec<u8>, ProviderError> {
    let mut out = BTreeMap::new();
    for (k, v) in secret.data.iter().flatten() {
        let s = std::str::from_utf8(&v.0).map_err(|_| {
            ProviderError::InvalidArgument(format!(
                "key {k:?} of Secret {} is not UTF-8, so the whole Secret cannot be returned as JSON; \
                 request it with property: {k}",
                secret_name(secret)
            ))
        })?;
        out.insert(k.as_str(), s);
    }
    serde_json::to_vec(&out).map_err(|e| ProviderError::Internal(e.to_string()))
}

fn string_map_json(m: Option<&BTreeMap<String, String>>) -> serde_json::Value {
    serde_json::to_value(m.cloned().unwrap_or_default()).unwrap_or_default()
}

/// GetSecret: with `property`, that data key; without, the whole data map as JSON. With
/// `metadataPolicy: Fetch`, the labels and annotations instead (`property` `labels` or
/// `annotations` picks one of them).
pub fn secret_value(secret: &Secret, remote_ref: &ExternalSecretDataRemoteRef) -> Result<Vec<u8>, ProviderError> {
    if remote_ref.metadata_policy.eq_ignore_ascii_case("Fetch") {
        let labels = string_map_json(secret.metadata.labels.as_ref());
        let annotations = string_map_json(secret.metadata.annotations.as_ref());
        let value = match remote_ref.property.as_str() {
            "" => serde_json::json!({ "labels": labels, "annotations": annotations }),
            "labels" => labels,
            "annotations" => annotations,
            other => {
                return Err(ProviderError::InvalidArgument(format!(
                    "with metadataPolicy Fetch, property must be empty, labels or annotations (got {other:?})"
                )));
            }
        };
        return Ok(value.to_string().into_bytes());
    }
    if remote_ref.property.is_empty() {
        return data_json(secret);
    }
    data_key(secret, &remote_ref.property)
}

fn data_key(secret: &Secret, key: &str) -> Result<Vec<u8>, ProviderError> {
    secret
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .map(|v| v.0.clone())
        .ok_or_else(|| ProviderError::NoSecret(format!("Secret {} has no key {key:?}", secret_name(secret))))
}

/// GetSecretMap: the data map; with `property`, that key's value read as a JSON object.
pub fn secret_map(secret: &Secret, remote_ref: &ExternalSecretDataRemoteRef) -> Result<SecretMap, ProviderError> {
    if remote_ref.property.is_empty() {
        return Ok(secret.data.iter().flatten().map(|(k, v)| (k.clone(), v.0.clone())).collect());
    }
    let raw = data_key(secret, &remote_ref.property)?;
    match serde_json::from_slice::<serde_json::Value>(&raw) {
        Ok(serde_json::Value::Object(m)) => Ok(m.iter().map(|(k, v)| (k.clone(), json_bytes(v))).collect()),
        _ => Err(ProviderError::InvalidArgument(format!(
            "key {:?} of Secret {} is not a JSON object",
            remote_ref.property,
            secret_name(secret)
        ))),
    }
}

/// The label selector that `find.tags` becomes.
pub fn tags_selector(tags: &std::collections::HashMap<String, String>) -> Option<String> {
    if tags.is_empty() {
        return None;
    }
    let mut pairs: Vec<_> = tags.iter().map(|(k, v)| format!("{k}={v}")).collect();
    pairs.sort();
    Some(pairs.join(","))
}

/// Whether a Secret name passes `find.name.regexp` and `find.path` (a name prefix).
pub fn find_matches(name: &str, regex: Option<&regex::Regex>, path: &str) -> bool {
    name.starts_with(path) && regex.is_none_or(|r| r.is_match(name))
}

/// The push metadata this provider accepts, as JSON:
///
/// ```json
/// {"apiVersion": "kubernetes.external-secrets.io/v1alpha1", "kind": "PushSecretMetadata",
///  "spec": {"labels": {}, "annotations": {}, "secretType": "Opaque", "remoteNamespace": "other"}}
/// ```
///
/// `apiVersion` and `kind` may be omitted; other `spec` fields are ignored.
#[derive(Debug, Default, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PushMetadata {
    /// Labels added to the remote Secret.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Annotations added to the remote Secret.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// Type of a Secret the push creates (default `Opaque`); must match an existing Secret's.
    #[serde(default)]
    pub secret_type: Option<String>,
    /// Namespace to push into instead of the config's `remoteNamespace`; honoured only for an
    /// operator-owned config that sets `allowRemoteNamespaceOverride`.
    #[serde(default)]
    pub remote_namespace: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PushMetadataEnvelope {
    #[serde(default)]
    api_version: Option<String>,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    spec: PushMetadata,
}

/// Parses push metadata; empty bytes (or `null`) mean none.
pub fn parse_push_metadata(bytes: &[u8]) -> Result<PushMetadata, ProviderError> {
    let trimmed = std::str::from_utf8(bytes).unwrap_or_default().trim();
    if trimmed.is_empty() || trimmed == "null" {
        return Ok(PushMetadata::default());
    }
    let env: PushMetadataEnvelope = serde_json::from_slice(bytes).map_err(|e| {
        ProviderError::InvalidArgument(format!(
            "push metadata is not a {PUSH_METADATA_KIND} ({PUSH_METADATA_API_VERSION}) object: {e}"
        ))
    })?;
    if let Some(v) = env.api_version.filter(|v| v != PUSH_METADATA_API_VERSION) {
        return Err(ProviderError::InvalidArgument(format!(
            "push metadata apiVersion {v:?} is not {PUSH_METADATA_API_VERSION}"
        )));
    }
    if let Some(k) = env.kind.filter(|k| k != PUSH_METADATA_KIND) {
        return Err(ProviderError::InvalidArgument(format!("push metadata kind {k:?} is not {PUSH_METADATA_KIND}")));
    }
    Ok(env.spec)
}

/// The namespace a push (and DeleteSecret / SecretExists of the same entry) works in: the
/// config's `remoteNamespace`, or the metadata's override, which only an operator-owned config
/// that allows it honours (`keyward_crds::rules::push_namespace`).
pub fn push_namespace(
    ctx: &RequestContext,
    config_remote_namespace: &str,
    allow_override: bool,
    meta: &PushMetadata,
) -> Result<String, ProviderError> {
    keyward_crds::rules::push_namespace(
        ctx.owner(),
        allow_override,
        config_remote_namespace,
        meta.remote_namespace.as_deref(),
    )
    .map_err(ProviderError::PermissionDenied)
}

/// The Secret a push writes: the existing one (or a new one) with the pushed data, labels and
/// annotations merged in. Without a secret key the whole source Secret is pushed; otherwise its
/// value goes under `property`, else under the secret key's name.
pub fn apply_push(
    existing: Option<Secret>,
    name: &str,
    namespace: &str,
    secret_data: &SecretMap,
    data: &PushSecretData,
    meta: &PushMetadata,
) -> Result<Secret, ProviderError> {
    let mut secret = existing.unwrap_or_else(|| Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(namespace.to_string()),
            ..Default::default()
        },
        type_: Some(meta.secret_type.clone().unwrap_or_else(|| "Opaque".to_string())),
        ..Default::default()
    });
    if let Some(want) = &meta.secret_type {
        let have = secret.type_.as_deref().unwrap_or("Opaque");
        if have != want {
            return Err(ProviderError::BadConfig(format!(
                "Secret {namespace}/{name} has type {have:?}, the push metadata asks for {want:?}; \
                 a Secret's type cannot change"
            )));
        }
    }
    let out = secret.data.get_or_insert_with(BTreeMap::new);
    if data.secret_key.is_empty() {
        for (k, v) in secret_data {
            out.insert(k.clone(), ByteString(v.clone()));
        }
    } else {
        let value = secret_data
            .get(&data.secret_key)
            .ok_or_else(|| ProviderError::InvalidArgument(format!("source has no key {:?}", data.secret_key)))?;
        let key = if data.property.is_empty() { &data.secret_key } else { &data.property };
        out.insert(key.clone(), ByteString(value.clone()));
    }
    if !meta.labels.is_empty() {
        secret.metadata.labels.get_or_insert_with(BTreeMap::new).extend(meta.labels.clone());
    }
    if !meta.annotations.is_empty() {
        secret.metadata.annotations.get_or_insert_with(BTreeMap::new).extend(meta.annotations.clone());
    }
    Ok(secret)
}

/// How a Kubernetes API error travels: 404 is "no secret" only where the caller says the
/// missing object is the secret itself (`what` names the object for the message).
pub fn map_kube_error(e: kube::Error, what: &str) -> ProviderError {
    match e {
        kube::Error::Api(s) => {
            let msg = format!("{what}: {} ({})", s.message, s.code);
            match s.code {
                404 => ProviderError::NoSecret(msg),
                401 => ProviderError::Unauthenticated(msg),
                403 => ProviderError::PermissionDenied(msg),
                400 | 422 => ProviderError::InvalidArgument(msg),
                409 | 429 => ProviderError::Unavailable(msg),
                c if c >= 500 => ProviderError::Unavailable(msg),
                _ => ProviderError::Internal(msg),
            }
        }
        // A refused address, or a refused answer of the target cluster (too large, too slow),
        // says so plainly.
        other => match (
            keyward_provider_runtime::netguard::denied_in(&other),
            keyward_provider_runtime::body::limit_error(&other),
        ) {
            (Some(denied), _) => ProviderError::PermissionDenied(format!("{what}: {denied}")),
            (None, Some(refused)) => refused.to_provider_error(&format!("{what}: the target cluster's API server")),
            (None, None) => ProviderError::Unavailable(format!("{what}: {other}")),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keyward_proto::v1::ProviderReference;
    use keyward_provider_runtime::check_provider_ref;

    fn secret() -> Secret {
        Secret {
            metadata: kube::api::ObjectMeta {
                name: Some("db".into()),
                namespace: Some("remote".into()),
                labels: Some([("team".to_string(), "a".to_string())].into()),
                annotations: Some([("note".to_string(), "x".to_string())].into()),
                ..Default::default()
            },
            data: Some(
                [
                    ("user".to_string(), ByteString(b"app".to_vec())),
                    ("config".to_string(), ByteString(br#"{"host":"db","port":5432}"#.to_vec())),
                ]
                .into(),
            ),
            ..Default::default()
        }
    }

    fn rr(property: &str, policy: &str) -> ExternalSecretDataRemoteRef {
        ExternalSecretDataRemoteRef {
            key: "db".into(),
            property: property.into(),
            metadata_policy: policy.into(),
            ..Default::default()
        }
    }

    fn ctx(kind: &str, scope: &str) -> RequestContext {
        let r = ProviderReference {
            api_version: "provider.external-secrets.io/v2alpha1".into(),
            kind: "Kubernetes".into(),
            name: "remote".into(),
            namespace: "creds".into(),
            store_ref_kind: kind.into(),
            authentication_scope: scope.into(),
        };
        check_provider_ref("PushSecret", Some(&r), "creds", true).expect("ctx")
    }

    #[test]
    fn remote_keys_must_be_secret_names() {
        for ok in ["db", "app.db-1", "a"] {
            assert!(check_remote_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "../../kube-system/secrets/admin",
            "..",
            "db/status",
            "db%2F..",
            "db?labelSelector=x",
            "db#x",
            "Db",
            "/db",
            "db.",
            "-db",
            "a..b",
            "",
        ] {
            let e = check_remote_name(bad).expect_err(bad);
            assert_eq!(e.code(), tonic::Code::InvalidArgument, "{bad}");
        }
        assert!(check_remote_name(&"a".repeat(254)).is_err());
        assert!(check_remote_name(&"a".repeat(100)).is_ok(), "parts of a Secret name may be longer than a DNS label");
    }

    #[test]
    fn get_secret_property_whole_and_metadata() {
        let s = secret();
        assert_eq!(secret_value(&s, &rr("user", "")).expect("user"), b"app");
        let whole: serde_json::Value =
            serde_json::from_slice(&secret_value(&s, &rr("", "")).expect("whole")).expect("json");
        assert_eq!(whole, serde_json::json!({"user":"app","config":"{\"host\":\"db\",\"port\":5432}"}));
        let e = secret_value(&s, &rr("missing", "")).expect_err("missing key");
        assert!(e.is_not_found(), "{e}");
        assert!(e.to_string().contains("remote/db"), "{e}");
        let meta: serde_json::Value =
            serde_json::from_slice(&secret_value(&s, &rr("", "Fetch")).expect("meta")).expect("json");
        assert_eq!(meta, serde_json::json!({"labels":{"team":"a"},"annotations":{"note":"x"}}));
        assert_eq!(secret_value(&s, &rr("labels", "Fetch")).expect("labels"), br#"{"team":"a"}"#);
        assert!(secret_value(&s, &rr("user", "Fetch")).is_err());
    }

    #[test]
    fn whole_secret_with_binary_value_is_refused_with_advice() {
        let mut s = secret();
        s.data.get_or_insert_with(BTreeMap::new).insert("bin".into(), ByteString(vec![0xff, 0xfe]));
        let e = secret_value(&s, &rr("", "")).expect_err("binary");
        assert!(e.to_string().contains("property: bin"), "{e}");
        assert_eq!(secret_value(&s, &rr("bin", "")).expect("bin"), vec![0xff, 0xfe]);
    }

    #[test]
    fn get_secret_map() {
        let s = secret();
        let m = secret_map(&s, &rr("", "")).expect("map");
        assert_eq!(m.len(), 2);
        assert_eq!(m["user"], b"app");
        let m = secret_map(&s, &rr("config", "")).expect("json map");
        assert_eq!(m["host"], b"db");
        assert_eq!(m["port"], b"5432");
        assert!(secret_map(&s, &rr("user", "")).is_err(), "not a JSON object");
        assert!(secret_map(&s, &rr("nope", "")).expect_err("missing").is_not_found());
    }

    #[test]
    fn find_by_regex_path_and_tags() {
        let re = regex::Regex::new("^db-").expect("re");
        assert!(find_matches("db-one", Some(&re), ""));
        assert!(!find_matches("cache", Some(&re), ""));
        assert!(find_matches("app-db", None, "app-"));
        assert!(!find_matches("db-one", Some(&re), "app-"));
        let tags = [("team".to_string(), "a".to_string()), ("env".to_string(), "prod".to_string())].into();
        assert_eq!(tags_selector(&tags).as_deref(), Some("env=prod,team=a"));
        assert_eq!(tags_selector(&Default::default()), None);
    }

    #[test]
    fn push_metadata_shapes() {
        assert_eq!(parse_push_metadata(b"").expect("empty"), PushMetadata::default());
        assert_eq!(parse_push_metadata(b"null").expect("null"), PushMetadata::default());
        let m = parse_push_metadata(
            br#"{"apiVersion":"kubernetes.external-secrets.io/v1alpha1","kind":"PushSecretMetadata",
                "spec":{"labels":{"a":"1"},"annotations":{"b":"2"},"secretType":"kubernetes.io/basic-auth",
                "remoteNamespace":"other","sourceMergePolicy":"Merge"}}"#,
        )
        .expect("full");
        assert_eq!(m.labels["a"], "1");
        assert_eq!(m.annotations["b"], "2");
        assert_eq!(m.secret_type.as_deref(), Some("kubernetes.io/basic-auth"));
        assert_eq!(m.remote_namespace.as_deref(), Some("other"));
        assert!(parse_push_metadata(br#"{"spec":{"labels":{"a":"1"}}}"#).is_ok(), "apiVersion/kind optional");
        assert!(parse_push_metadata(br#"{"apiVersion":"v1","kind":"PushSecretMetadata"}"#).is_err());
        assert!(parse_push_metadata(br#"{"kind":"Other"}"#).is_err());
        assert!(parse_push_metadata(b"[1]").is_err());
    }

    #[test]
    fn remote_namespace_override_only_for_an_operator_config_that_allows_it() {
        let meta = PushMetadata { remote_namespace: Some("other".into()), ..Default::default() };
        let operator = ctx("ClusterProvider", "ProviderNamespace");
        assert_eq!(push_namespace(&operator, "remote", true, &meta).expect("operator, allowed"), "other");
        let e = push_namespace(&operator, "remote", false, &meta).expect_err("operator, not allowed");
        assert_eq!(e.code(), tonic::Code::PermissionDenied);
        assert!(e.to_string().contains("allowRemoteNamespaceOverride"), "{e}");
        // A tenant-owned config never redirects, even when it claims to allow it: through a
        // Provider, a ManifestNamespace ClusterProvider, or an older peer that sends no scope.
        for (kind, scope) in
            [("Provider", ""), ("ClusterProvider", "ManifestNamespace"), ("ClusterProvider", ""), ("", "")]
        {
            let e = push_namespace(&ctx(kind, scope), "remote", true, &meta).expect_err(kind);
            assert!(e.to_string().contains("tenant-owned"), "{e}");
        }
        // A tenant-owned config takes no remoteNamespace at all, not even its own.
        let same = PushMetadata { remote_namespace: Some("remote".into()), ..Default::default() };
        let tenant = ctx("Provider", "");
        assert!(push_namespace(&tenant, "remote", false, &same).is_err());
        assert_eq!(push_namespace(&tenant, "remote", false, &PushMetadata::default()).expect("none"), "remote");
        assert_eq!(push_namespace(&operator, "remote", false, &same).expect("operator, own"), "remote");
    }

    #[test]
    fn push_creates_merges_and_keeps_type() {
        let src: SecretMap =
            [("password".to_string(), b"s3cret".to_vec()), ("user".to_string(), b"app".to_vec())].into();
        let meta = PushMetadata {
            labels: [("l".to_string(), "1".to_string())].into(),
            annotations: [("a".to_string(), "2".to_string())].into(),
            ..Default::default()
        };
        let one = PushSecretData { remote_key: "db".into(), secret_key: "password".into(), ..Default::default() };
        let s = apply_push(None, "db", "remote", &src, &one, &meta).expect("create");
        assert_eq!(s.type_.as_deref(), Some("Opaque"));
        assert_eq!(s.data.as_ref().expect("data")["password"].0, b"s3cret");
        assert_eq!(s.data.as_ref().expect("data").len(), 1);
        assert_eq!(s.metadata.labels.as_ref().expect("labels")["l"], "1");
        assert_eq!(s.metadata.annotations.as_ref().expect("ann")["a"], "2");

        let prop = PushSecretData {
            remote_key: "db".into(),
            secret_key: "password".into(),
            property: "pw".into(),
            ..Default::default()
        };
        let s2 = apply_push(Some(secret()), "db", "remote", &src, &prop, &meta).expect("merge");
        let d = s2.data.as_ref().expect("data");
        assert_eq!(d["pw"].0, b"s3cret");
        assert_eq!(d["user"].0, b"app", "existing keys stay");
        assert_eq!(s2.metadata.labels.as_ref().expect("labels").len(), 2, "labels merged");

        let whole = PushSecretData { remote_key: "db".into(), ..Default::default() };
        let s3 = apply_push(None, "db", "remote", &src, &whole, &PushMetadata::default()).expect("whole");
        assert_eq!(s3.data.as_ref().expect("data").len(), 2);

        let typed = PushMetadata { secret_type: Some("kubernetes.io/basic-auth".into()), ..Default::default() };
        let e = apply_push(Some(secret()), "db", "remote", &src, &one, &typed).expect_err("type change");
        assert_eq!(e.code(), tonic::Code::FailedPrecondition);
        let s4 = apply_push(None, "db", "remote", &src, &one, &typed).expect("typed create");
        assert_eq!(s4.type_.as_deref(), Some("kubernetes.io/basic-auth"));
    }

    #[test]
    fn kube_errors_map_to_codes() {
        let api = |code: u16| kube::Error::Api(Box::new(kube::core::Status::failure("boom", "Reason").with_code(code)));
        assert!(map_kube_error(api(404), "Secret remote/db").is_not_found());
        assert_eq!(map_kube_error(api(403), "x").code(), tonic::Code::PermissionDenied);
        assert_eq!(map_kube_error(api(401), "x").code(), tonic::Code::Unauthenticated);
        assert_eq!(map_kube_error(api(422), "x").code(), tonic::Code::InvalidArgument);
        assert_eq!(map_kube_error(api(503), "x").code(), tonic::Code::Unavailable);
        assert_eq!(map_kube_error(api(409), "x").code(), tonic::Code::Unavailable);
        let e = map_kube_error(api(404), "Secret remote/db");
        assert!(e.to_string().contains("Secret remote/db"), "{e}");
    }
}
