//! What a remote key names in a vault, and how answers become values, as upstream's `azurekv`
//! provider does it (release 2.9.0): `secret/<name>` (or a bare name), `key/<name>` and
//! `cert/<name>`; tags and attributes as metadata (`metadataPolicy: Fetch`). Pure functions.

use std::collections::{BTreeMap, HashMap};

use keyward_provider_runtime::{ProviderError, SecretMap, json, keys};
use serde_json::Value;

/// Key Vault's three kinds of object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectType {
    /// A secret (the default, or `secret/`).
    Secret,
    /// A key (`key/`), read as its JSON Web Key.
    Key,
    /// A certificate (`cert/`), read as its DER bytes.
    Cert,
}

impl ObjectType {
    /// Upstream's prefix.
    pub fn prefix(self) -> &'static str {
        match self {
            ObjectType::Secret => "secret",
            ObjectType::Key => "key",
            ObjectType::Cert => "cert",
        }
    }
}

/// Longest name Key Vault accepts.
const MAX_NAME: usize = 127;

/// Whether `name` is a Key Vault object name: 1 to 127 letters, digits and dashes. Only such a
/// name is put into a request path (the SDK inserts names into paths as they are).
pub fn check_name(name: &str, key: &str) -> Result<(), ProviderError> {
    if name.is_empty() || name.len() > MAX_NAME || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
        return Err(ProviderError::InvalidArgument(format!(
            "remote key {key:?}: {name:?} is not a Key Vault object name (1 to 127 letters, digits and dashes)"
        )));
    }
    Ok(())
}

/// The object a remote key names: `name`, `secret/name`, `key/name` or `cert/name`. The key
/// passes the runtime's segment rule first.
pub fn object(key: &str) -> Result<(ObjectType, &str), ProviderError> {
    let segments = keys::segments(key)?;
    let (kind, name) = match segments.as_slice() {
        [name] => (ObjectType::Secret, *name),
        [prefix, name] => {
            let kind = match *prefix {
                "secret" => ObjectType::Secret,
                "key" => ObjectType::Key,
                "cert" => ObjectType::Cert,
                other => {
                    return Err(ProviderError::InvalidArgument(format!(
                        "remote key {key:?}: {other:?} is not an object type; use secret/, key/ or cert/ (as upstream)"
                    )));
                }
            };
            (kind, *name)
        }
        _ => {
            return Err(ProviderError::InvalidArgument(format!(
                "remote key {key:?} is not a Key Vault object: <name>, secret/<name>, key/<name> or cert/<name>"
            )));
        }
    };
    check_name(name, key)?;
    Ok((kind, name))
}

/// A version as a path segment: letters and digits only (Key Vault's are 32 hex digits).
pub fn check_version(version: &str) -> Result<Option<&str>, ProviderError> {
    if version.is_empty() {
        return Ok(None);
    }
    if version.len() > 64 || !version.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err(ProviderError::InvalidArgument(format!("version {version:?} is not a Key Vault object version")));
    }
    Ok(Some(version))
}

/// The metadata of an object as upstream reads it: its tags, and its attributes as
/// `attribute.created`, `attribute.updated`, `attribute.expires`, `attribute.notBefore` (RFC
/// 3339).
pub fn metadata(
    tags: Option<&HashMap<String, String>>,
    attributes: &[(&str, Option<String>)],
) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> =
        tags.map(|t| t.iter().map(|(k, v)| (k.clone(), v.clone())).collect()).unwrap_or_default();
    for (name, value) in attributes {
        if let Some(v) = value {
            out.insert(format!("attribute.{name}"), v.clone());
        }
    }
    out
}

/// GetSecret with `metadataPolicy: Fetch`: every tag as a JSON object, or one tag with
/// `property` (a tag whose value is JSON can be read into: `tag.field`).
pub fn metadata_value(meta: &BTreeMap<String, String>, property: &str, key: &str) -> Result<Vec<u8>, ProviderError> {
    if property.is_empty() {
        return serde_json::to_vec(meta).map_err(|e| ProviderError::Internal(e.to_string()));
    }
    if let Some(v) = meta.get(property) {
        return Ok(v.clone().into_bytes());
    }
    if let Some((tag, rest)) = property.split_once('.')
        && let Some(v) = meta.get(tag)
    {
        return json::value_property(v.as_bytes(), &format!("{key} tag {tag}"), rest);
    }
    Err(ProviderError::NoSecret(format!("{key} has no tag {property:?}")))
}

/// GetSecretMap with `metadataPolicy: Fetch`, as upstream: each tag under `<name>_<tag>` (a tag
/// holding a JSON object of strings as `<name>_<tag>_<field>` each), or with `property` the one
/// entry `<key>_<property>`.
pub fn metadata_map(meta: &BTreeMap<String, String>, name: &str, key: &str, property: &str) -> SecretMap {
    let mut out = SecretMap::new();
    if !property.is_empty() {
        let entry = format!("{key}_{property}");
        let value = metadata_value(meta, &entry, key).unwrap_or_default();
        out.insert(entry, value);
        return out;
    }
    for (tag, value) in meta {
        let entry = format!("{name}_{tag}");
        match serde_json::from_str::<BTreeMap<String, String>>(value) {
            Ok(fields) if !tag.starts_with("attribute.") => {
                out.extend(fields.into_iter().map(|(k, v)| (format!("{entry}_{k}"), v.into_bytes())));
            }
            _ => {
                out.insert(entry, value.clone().into_bytes());
            }
        }
    }
    out
}

/// A key's JSON Web Key as upstream returns it (`key/…`): the public parts Key Vault answers,
/// as JSON, or one member with `property`.
pub fn key_value(jwk: &Value, property: &str, key: &str) -> Result<Vec<u8>, ProviderError> {
    let raw = serde_json::to_vec(jwk).map_err(|e| ProviderError::Internal(e.to_string()))?;
    if property.is_empty() { Ok(raw) } else { json::value_property(&raw, key, property) }
}

/// Tags a find asks for: every pair must be on the secret.
pub fn has_tags(tags: Option<&HashMap<String, String>>, wanted: &HashMap<String, String>) -> bool {
    wanted.iter().all(|(k, v)| tags.and_then(|t| t.get(k)) == Some(v))
}

/// The tag upstream marks what it pushed with; a push never overwrites, nor a delete removes,
/// an object without it.
pub const MANAGED_BY: &str = "managed-by";
/// Its value.
pub const MANAGER: &str = "external-secrets";

/// Whether the tags carry upstream's marker.
pub fn is_managed(tags: Option<&HashMap<String, String>>) -> bool {
    tags.and_then(|t| t.get(MANAGED_BY)).is_some_and(|v| v == MANAGER)
}

/// Upstream's push metadata for Key Vault.
#[derive(Debug, Default, Clone, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PushMetadata {
    /// RFC 3339 expiry of a pushed secret.
    #[serde(default)]
    pub expiration_date: String,
    /// Content type of a pushed secret; empty keeps what the secret has.
    #[serde(default)]
    pub content_type: String,
    /// Tags added to what is pushed (`managed-by` may not be given).
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
}

/// Reads and checks push metadata (upstream's envelope).
pub fn push_metadata(raw: &[u8]) -> Result<PushMetadata, ProviderError> {
    let meta: PushMetadata = json::push_metadata_spec(raw)?;
    if meta.tags.contains_key(MANAGED_BY) {
        return Err(ProviderError::InvalidArgument(format!(
            "push metadata spec.tags: cannot specify a {MANAGED_BY:?} tag (the provider sets it)"
        )));
    }
    Ok(meta)
}

/// The tags of a push: the metadata's and the marker.
pub fn push_tags(meta: &PushMetadata) -> HashMap<String, String> {
    let mut tags: HashMap<String, String> = meta.tags.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    tags.insert(MANAGED_BY.into(), MANAGER.into());
    tags
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_name_objects_as_upstream() {
        assert_eq!(object("db").expect("bare"), (ObjectType::Secret, "db"));
        assert_eq!(object("secret/db").expect("secret"), (ObjectType::Secret, "db"));
        assert_eq!(object("key/enc-1").expect("key"), (ObjectType::Key, "enc-1"));
        assert_eq!(object("cert/tls").expect("cert"), (ObjectType::Cert, "tls"));
        for bad in ["", "blob/x", "secret/a/b", "../x", "secret/%2e%2e", "a_b", "secret/a?b", "x".repeat(128).as_str()]
        {
            let e = object(bad).expect_err(bad);
            assert_eq!(e.code(), tonic::Code::InvalidArgument, "{bad}: {e}");
        }
        assert_eq!(check_version("0123abcd").expect("hex"), Some("0123abcd"));
        assert_eq!(check_version("").expect("none"), None);
        assert!(check_version("../v").is_err());
    }

    #[test]
    fn metadata_reads_as_upstream() {
        let tags: HashMap<String, String> =
            [("environment".into(), "dev".into()), ("owner".into(), r#"{"team":"a","site":"b"}"#.into())].into();
        let meta = metadata(Some(&tags), &[("created", Some("2026-01-01T00:00:00Z".into())), ("expires", None)]);
        let all: BTreeMap<String, String> =
            serde_json::from_slice(&metadata_value(&meta, "", "db").expect("all")).expect("json");
        assert_eq!(all["environment"], "dev");
        assert_eq!(all["attribute.created"], "2026-01-01T00:00:00Z");
        assert_eq!(metadata_value(&meta, "environment", "db").expect("one"), b"dev");
        assert_eq!(metadata_value(&meta, "owner.team", "db").expect("into JSON"), b"a");
        assert!(metadata_value(&meta, "nope", "db").expect_err("missing").is_not_found());
        let map = metadata_map(&meta, "db", "db", "");
        assert_eq!(map["db_environment"], b"dev");
        assert_eq!(map["db_owner_team"], b"a");
        assert_eq!(map["db_attribute.created"], b"2026-01-01T00:00:00Z");
        let one = metadata_map(&meta, "db", "db", "environment");
        assert_eq!(one.len(), 1);
        assert!(one.contains_key("db_environment"));
    }

    #[test]
    fn push_metadata_refuses_the_marker() {
        let meta = push_metadata(
            br#"{"kind":"PushSecretMetadata","spec":{"tags":{"env":"prod"},"contentType":"text/plain"}}"#,
        )
        .expect("metadata");
        let tags = push_tags(&meta);
        assert_eq!(tags["env"], "prod");
        assert!(is_managed(Some(&tags)));
        assert!(push_metadata(br#"{"spec":{"tags":{"managed-by":"me"}}}"#).is_err());
        assert!(push_metadata(b"").expect("none").tags.is_empty());
    }
}
