//! Pure mapping between Secrets Manager and the provider contract: versions, the push metadata
//! format, name filters. JSON properties are `keyward_provider_runtime::json`.

use std::collections::BTreeMap;

use keyward_provider_runtime::ProviderError;
use serde::Deserialize;

/// Tag that marks secrets written by a push; pushes and deletes leave secrets without it alone.
/// The same tag upstream External Secrets writes, so secrets it manages stay manageable.
pub const MANAGED_BY_KEY: &str = "managed-by";
/// Value of [`MANAGED_BY_KEY`].
pub const MANAGED_BY_VALUE: &str = "external-secrets";

/// Which version of a secret a `remoteRef.version` asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Version {
    /// The current version (`AWSCURRENT`).
    Current,
    /// A staging label such as `AWSPREVIOUS`.
    Stage(String),
    /// A version ID, written `uuid/<id>`.
    Id(String),
}

/// Parses `remoteRef.version`: empty is the current version, `uuid/<id>` a version ID, anything
/// else a staging label.
pub fn parse_version(version: &str) -> Version {
    match version.strip_prefix("uuid/") {
        Some(id) => Version::Id(id.to_string()),
        None if version.is_empty() => Version::Current,
        None => Version::Stage(version.to_string()),
    }
}

/// The push metadata this provider accepts, as JSON:
///
/// ```json
/// {"apiVersion": "kubernetes.external-secrets.io/v1alpha1", "kind": "PushSecretMetadata",
///  "spec": {"secretPushFormat": "string", "tags": {"team": "a"}, "description": "…", "kmsKeyID": "…"}}
/// ```
#[derive(Debug, Default, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PushMetadata {
    /// `binary` (default, as upstream) stores SecretBinary, `string` SecretString.
    #[serde(default)]
    pub secret_push_format: Option<String>,
    /// Tags of the secret.
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
    /// Description of a secret the push creates.
    #[serde(default)]
    pub description: Option<String>,
    /// KMS key of a secret the push creates.
    #[serde(default, rename = "kmsKeyID")]
    pub kms_key_id: Option<String>,
}

impl PushMetadata {
    /// Whether values are written as SecretString.
    pub fn as_string(&self) -> bool {
        self.secret_push_format.as_deref() == Some("string")
    }
}

/// Parses push metadata; empty bytes (or `null`) mean none.
pub fn parse_push_metadata(bytes: &[u8]) -> Result<PushMetadata, ProviderError> {
    let spec: PushMetadata = keyward_provider_runtime::json::push_metadata_spec(bytes)?;
    match spec.secret_push_format.as_deref() {
        None | Some("binary") | Some("string") => Ok(spec),
        Some(other) => Err(ProviderError::InvalidArgument(format!(
            "push metadata secretPushFormat {other:?} is not binary or string"
        ))),
    }
}

/// The secret name of a remote key (or the name prefix of a `find.path`): the config's
/// prefix, then the key as written, once the key passed the shared key rule.
pub fn secret_name(prefix: &str, key: &str) -> Result<String, ProviderError> {
    keyward_provider_runtime::keys::check_key(key)?;
    Ok(format!("{prefix}{key}"))
}

/// Whether a secret (name without the config's prefix) passes `find.name.regexp`, `find.path`
/// (a name prefix) and `find.tags`.
pub fn find_matches(
    name: &str,
    tags: &BTreeMap<String, String>,
    regex: Option<&regex::Regex>,
    path: &str,
    want_tags: &std::collections::HashMap<String, String>,
) -> bool {
    name.starts_with(path)
        && regex.is_none_or(|r| r.is_match(name))
        && want_tags.iter().all(|(k, v)| tags.get(k) == Some(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_keep_the_key_as_written_and_refuse_what_the_key_rule_refuses() {
        assert_eq!(secret_name("team-a/", "db/creds").unwrap(), "team-a/db/creds");
        assert_eq!(secret_name("", "/dev/config").unwrap(), "/dev/config", "a leading slash is part of the name");
        assert_eq!(secret_name("", "arn:aws:secretsmanager:eu-west-1:1:secret:db-Ab12").unwrap().len(), 49);
        assert_eq!(secret_name("team-a/", "").unwrap(), "team-a/", "an empty find.path is the prefix");
        for key in ["../team-b/db", "db/%2e%2e/x", "a//b", "db?x", "db#x"] {
            let e = secret_name("team-a/", key).expect_err(key);
            assert_eq!(e.code(), tonic::Code::InvalidArgument, "{key}");
        }
    }

    #[test]
    fn versions() {
        assert_eq!(parse_version(""), Version::Current);
        assert_eq!(parse_version("AWSPREVIOUS"), Version::Stage("AWSPREVIOUS".into()));
        assert_eq!(parse_version("uuid/1234-abcd"), Version::Id("1234-abcd".into()));
    }

    #[test]
    fn push_metadata() {
        assert_eq!(parse_push_metadata(b"").unwrap(), PushMetadata::default());
        let m = parse_push_metadata(
            br#"{"apiVersion":"kubernetes.external-secrets.io/v1alpha1","kind":"PushSecretMetadata",
                "spec":{"secretPushFormat":"string","tags":{"team":"a"},"kmsKeyID":"k"}}"#,
        )
        .unwrap();
        assert!(m.as_string());
        assert_eq!(m.tags["team"], "a");
        assert_eq!(m.kms_key_id.as_deref(), Some("k"));
        assert!(!PushMetadata::default().as_string(), "binary is the default, as upstream");
        assert!(parse_push_metadata(br#"{"spec":{"secretPushFormat":"yaml"}}"#).is_err());
        assert!(parse_push_metadata(br#"{"kind":"Other"}"#).is_err());
    }

    #[test]
    fn finds() {
        let tags: BTreeMap<String, String> = [("team".to_string(), "a".to_string())].into();
        let re = regex::Regex::new("^app/").unwrap();
        let want: std::collections::HashMap<String, String> = [("team".to_string(), "a".to_string())].into();
        assert!(find_matches("app/db", &tags, Some(&re), "app", &want));
        assert!(!find_matches("web/db", &tags, Some(&re), "", &want));
        assert!(!find_matches("app/db", &BTreeMap::new(), None, "", &want));
        assert!(find_matches("app/db", &BTreeMap::new(), None, "", &Default::default()));
    }
}
