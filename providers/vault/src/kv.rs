//! Pure KV mapping: where a remote key lives (mount and path), the API paths of KV v1 and v2,
//! where the data sits in a response, and the push metadata format.

use std::collections::BTreeMap;

use keyward_crds::vault::VaultKvVersion;
use keyward_provider_runtime::ProviderError;
use serde::Deserialize;

/// Custom metadata key marking secrets written by a push (KV v2); pushes and deletes leave
/// secrets without it alone. The same marker upstream External Secrets writes.
pub const MANAGED_BY_KEY: &str = "managed-by";
/// Value of [`MANAGED_BY_KEY`].
pub const MANAGED_BY_VALUE: &str = "external-secrets";

/// A secret's location: the KV mount and the path inside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// Mount path of the KV engine, without slashes around it.
    pub mount: String,
    /// Path of the secret inside the mount.
    pub path: String,
    /// KV version of the mount.
    pub version: VaultKvVersion,
}

/// Where a remote key lives. With `spec.path` set, the key is relative to that mount (a key
/// that already starts with the mount has it removed, as upstream); without, the key's first
/// segment is the mount.
pub fn locate(mount: Option<&str>, version: VaultKvVersion, key: &str) -> Result<Location, ProviderError> {
    let key = key.trim_matches('/');
    let (mount, path) = match mount.map(|m| m.trim_matches('/')).filter(|m| !m.is_empty()) {
        Some(m) => {
            let path = key.strip_prefix(m).and_then(|rest| rest.strip_prefix('/')).unwrap_or(key);
            (m.to_string(), path.to_string())
        }
        None => match key.split_once('/') {
            Some((m, rest)) => (m.to_string(), rest.to_string()),
            None => {
                return Err(ProviderError::InvalidArgument(format!(
                    "remote key {key:?} names no mount: set spec.path in the Vault config, or write the key as \
                     <mount>/<path>"
                )));
            }
        },
    };
    Ok(Location { mount, path, version })
}

impl Location {
    /// API path of the secret's data (`v1/` prefix excluded).
    pub fn data(&self) -> String {
        match self.version {
            VaultKvVersion::V2 => format!("{}/data/{}", self.mount, self.path),
            VaultKvVersion::V1 => format!("{}/{}", self.mount, self.path),
        }
    }

    /// API path of the secret's metadata (KV v2).
    pub fn metadata(&self) -> String {
        format!("{}/metadata/{}", self.mount, self.path)
    }

    /// API path to LIST under this location (a folder).
    pub fn list(&self) -> String {
        match self.version {
            VaultKvVersion::V2 => format!("{}/metadata/{}", self.mount, self.path),
            VaultKvVersion::V1 => format!("{}/{}", self.mount, self.path),
        }
    }

    /// The same mount at another path.
    pub fn at(&self, path: &str) -> Location {
        Location { path: path.to_string(), ..self.clone() }
    }
}

/// The data map of a read response: `data.data` for KV v2, `data` for KV v1.
pub fn secret_data(
    version: VaultKvVersion,
    body: &serde_json::Value,
) -> Option<serde_json::Map<String, serde_json::Value>> {
    let data = match version {
        VaultKvVersion::V2 => body.pointer("/data/data"),
        VaultKvVersion::V1 => body.pointer("/data"),
    };
    data.and_then(|d| d.as_object()).cloned()
}

/// The custom metadata of a KV v2 metadata response.
pub fn custom_metadata(body: &serde_json::Value) -> BTreeMap<String, String> {
    body.pointer("/data/custom_metadata")
        .and_then(|m| m.as_object())
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// The push metadata this provider accepts, as JSON (upstream's format):
///
/// ```json
/// {"apiVersion": "kubernetes.external-secrets.io/v1alpha1", "kind": "PushSecretMetadata",
///  "spec": {"customMetadata": {"owner": "team-a"}}}
/// ```
#[derive(Debug, Default, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PushMetadata {
    /// Custom metadata of the secret (KV v2).
    #[serde(default)]
    pub custom_metadata: BTreeMap<String, String>,
}

/// Parses push metadata; empty bytes (or `null`) mean none.
pub fn parse_push_metadata(bytes: &[u8]) -> Result<PushMetadata, ProviderError> {
    keyward_provider_runtime::json::push_metadata_spec(bytes)
}

/// Maps a Vault HTTP status (with its `errors`) to the contract's codes.
pub fn map_status(status: u16, errors: &str, what: &str) -> ProviderError {
    let msg = format!("{what}: Vault answered {status}: {errors}");
    match status {
        404 => ProviderError::NoSecret(msg),
        400 | 405 | 412 => ProviderError::InvalidArgument(msg),
        401 => ProviderError::Unauthenticated(msg),
        403 => ProviderError::PermissionDenied(msg),
        429 | 500..=599 => ProviderError::Unavailable(msg),
        _ => ProviderError::Internal(msg),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use VaultKvVersion::{V1, V2};

    #[test]
    fn locations() {
        let l = locate(Some("secret"), V2, "app/db").unwrap();
        assert_eq!((l.mount.as_str(), l.path.as_str()), ("secret", "app/db"));
        assert_eq!(l.data(), "secret/data/app/db");
        assert_eq!(l.metadata(), "secret/metadata/app/db");
        assert_eq!(locate(Some("/secret/"), V2, "secret/app/db").unwrap().path, "app/db", "mount prefix dropped");
        assert_eq!(locate(Some("secret"), V2, "secretive/x").unwrap().path, "secretive/x");
        let l = locate(None, V1, "kv/app/db").unwrap();
        assert_eq!(l.data(), "kv/app/db");
        assert_eq!(l.list(), "kv/app/db");
        assert_eq!(locate(Some("team/kv"), V2, "a").unwrap().data(), "team/kv/data/a");
        assert!(locate(None, V2, "db").is_err(), "no mount anywhere");
    }

    #[test]
    fn response_data() {
        let v2 = serde_json::json!({"data": {"data": {"user": "app"}, "metadata": {"version": 3}}});
        assert_eq!(secret_data(V2, &v2).unwrap()["user"], "app");
        let v1 = serde_json::json!({"data": {"user": "app"}});
        assert_eq!(secret_data(V1, &v1).unwrap()["user"], "app");
        assert!(secret_data(V2, &v1).is_none() || secret_data(V2, &v1) == Some(Default::default()));
        let meta = serde_json::json!({"data": {"custom_metadata": {"managed-by": "external-secrets"}}});
        assert_eq!(custom_metadata(&meta)[MANAGED_BY_KEY], MANAGED_BY_VALUE);
        assert!(custom_metadata(&serde_json::json!({"data": {"custom_metadata": null}})).is_empty());
    }

    #[test]
    fn push_metadata_and_statuses() {
        assert_eq!(parse_push_metadata(b"").unwrap(), PushMetadata::default());
        let m =
            parse_push_metadata(br#"{"kind":"PushSecretMetadata","spec":{"customMetadata":{"owner":"a"}}}"#).unwrap();
        assert_eq!(m.custom_metadata["owner"], "a");
        assert!(parse_push_metadata(br#"{"kind":"Other"}"#).is_err());
        assert!(map_status(404, "", "x").is_not_found());
        assert_eq!(map_status(403, "permission denied", "x").code(), tonic::Code::PermissionDenied);
        assert_eq!(map_status(503, "Vault is sealed", "x").code(), tonic::Code::Unavailable);
        assert_eq!(map_status(400, "", "x").code(), tonic::Code::InvalidArgument);
    }
}
