//! Pure KV mapping: where a remote key lives (mount and path), the API paths of KV v1 and v2,
//! where the data sits in a response, and the push metadata format.

use std::collections::BTreeMap;

use keyward_crds::vault::VaultKvVersion;
use keyward_provider_runtime::{ProviderError, keys};
use serde::Deserialize;

/// Custom metadata key marking secrets written by a push (KV v2); pushes and deletes leave
/// secrets without it alone. The same marker upstream External Secrets writes.
pub const MANAGED_BY_KEY: &str = "managed-by";
/// Value of [`MANAGED_BY_KEY`].
pub const MANAGED_BY_VALUE: &str = "external-secrets";

/// A secret's location: the KV mount and the path inside it. Both are checked segments
/// (`keyward_provider_runtime::keys`), joined by `/`; API paths are built from them with each
/// segment percent-encoded, so nothing in a key can reach outside `<mount>/…` (KV v1) or
/// `<mount>/data/…` and `<mount>/metadata/…` (KV v2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// Mount path of the KV engine, without slashes around it.
    pub mount: String,
    /// Path of the secret inside the mount (empty: the mount's root, for listing).
    pub path: String,
    /// KV version of the mount.
    pub version: VaultKvVersion,
}

/// Paths Vault reserves for itself: no secrets engine can be mounted there, so a first key
/// segment naming one is never a KV mount. They hold the operator's token (`auth/token/…`),
/// the server's configuration (`sys/…`), the token's private storage (`cubbyhole/…`) and
/// identities, so they are refused before anything is sent.
pub const RESERVED_MOUNTS: [&str; 5] = ["auth", "sys", "cubbyhole", "identity", "audit"];

/// Where a remote key lives. With `spec.path` set, the key is relative to that mount (a key
/// that already starts with the mount has it removed, as upstream); without, the key's first
/// segment is the mount, which must not be one of Vault's [`RESERVED_MOUNTS`] (and is then
/// confirmed to be a KV engine by the caller, see `VaultProvider::located`). Every segment is
/// checked by the shared key rule, so `..` and its encodings never reach Vault.
pub fn locate(mount: Option<&str>, version: VaultKvVersion, key: &str) -> Result<Location, ProviderError> {
    let loc = locate_folder(mount, version, key)?;
    if loc.path.is_empty() {
        return Err(ProviderError::InvalidArgument(format!(
            "remote key {key:?} names no secret inside the mount {:?}",
            loc.mount
        )));
    }
    Ok(loc)
}

/// Like [`locate`], for `find.path`: the path may be empty (the whole mount); without
/// `spec.path` it must still name the mount.
pub fn locate_folder(mount: Option<&str>, version: VaultKvVersion, key: &str) -> Result<Location, ProviderError> {
    let key_segments = keys::segments(key)?;
    let (mount, path) = match mount {
        Some(m) => {
            // spec.path passed the same rule at admission; an object older than that rule is
            // an unusable configuration, not a bad request.
            let mount_segments = keys::segments(m).map_err(|e| ProviderError::BadConfig(format!("spec.path: {e}")))?;
            if mount_segments.is_empty() {
                return Err(ProviderError::BadConfig(format!("spec.path {m:?} names no mount")));
            }
            let rest = match key_segments.strip_prefix(mount_segments.as_slice()) {
                Some(rest) if !rest.is_empty() => rest,
                _ => key_segments.as_slice(),
            };
            (mount_segments.join("/"), rest.join("/"))
        }
        None => match key_segments.split_first() {
            Some((m, rest)) => (check_mount(m, key)?, rest.join("/")),
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

/// A mount named by the first segment of a key.
fn check_mount(mount: &str, key: &str) -> Result<String, ProviderError> {
    if RESERVED_MOUNTS.iter().any(|r| r.eq_ignore_ascii_case(mount)) {
        return Err(ProviderError::InvalidArgument(format!(
            "remote key {key:?}: {mount:?} is reserved by Vault and never a KV mount; keys name a secret of a KV \
             secrets engine (<mount>/<path>, or set spec.path in the Vault config)"
        )));
    }
    Ok(mount.to_string())
}

impl Location {
    fn api(&self, infix: Option<&str>) -> String {
        let segments = self.mount.split('/').chain(infix).chain(self.path.split('/').filter(|s| !s.is_empty()));
        keys::url_path(segments)
    }

    /// API path of the secret's data (`v1/` prefix excluded), percent-encoded.
    pub fn data(&self) -> String {
        match self.version {
            VaultKvVersion::V2 => self.api(Some("data")),
            VaultKvVersion::V1 => self.api(None),
        }
    }

    /// API path of the secret's metadata (KV v2), percent-encoded.
    pub fn metadata(&self) -> String {
        self.api(Some("metadata"))
    }

    /// API path to LIST under this location (a folder), percent-encoded, with the trailing
    /// slash Vault lists folders by.
    pub fn list(&self) -> String {
        let path = match self.version {
            VaultKvVersion::V2 => self.api(Some("metadata")),
            VaultKvVersion::V1 => self.api(None),
        };
        format!("{path}/")
    }

    /// The same mount at another path inside it (a path from a listing), checked like a key:
    /// a name a server lists is not trusted more than one a tenant writes.
    pub fn at(&self, path: &str) -> Result<Location, ProviderError> {
        let segments = keys::segments(path)?;
        Ok(Location { path: segments.join("/"), ..self.clone() })
    }
}

/// Checks a `sys/internal/ui/mounts/<mount>` answer (the lookup `vault kv` makes before every
/// call): `mount` must be exactly a mount of the KV engine (`kv`, or `generic`, its old name)
/// in `version`. Without `spec.path` the mount comes from the tenant's key, and any other
/// engine under the operator's token would act on the tenant's behalf: `database/creds/…`
/// hands out credentials on a read, `transit/decrypt/…` decrypts what a push writes.
pub fn check_kv_mount(body: &serde_json::Value, mount: &str, version: VaultKvVersion) -> Result<(), ProviderError> {
    let refused = |why: String| {
        ProviderError::InvalidArgument(format!(
            "{mount:?} is not a KV {} mount ({why}); remote keys name a secret of a KV secrets engine as \
             <mount>/<path>, or set spec.path in the Vault config",
            version_name(version)
        ))
    };
    let kind = body.pointer("/data/type").and_then(serde_json::Value::as_str).unwrap_or_default();
    let path = body.pointer("/data/path").and_then(serde_json::Value::as_str).unwrap_or_default();
    if path.trim_end_matches('/') != mount {
        return Err(refused(format!("Vault places it in the mount {path:?}")));
    }
    if kind != "kv" && kind != "generic" {
        return Err(refused(format!("it is a {kind:?} engine")));
    }
    let found = body.pointer("/data/options/version").and_then(serde_json::Value::as_str).unwrap_or("1");
    let found = if found == "2" { VaultKvVersion::V2 } else { VaultKvVersion::V1 };
    if found != version {
        return Err(refused(format!("it is KV {}; spec.version says {}", version_name(found), version_name(version))));
    }
    Ok(())
}

fn version_name(v: VaultKvVersion) -> &'static str {
    match v {
        VaultKvVersion::V1 => "v1",
        VaultKvVersion::V2 => "v2",
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

/// The KV v2 system metadata that `metadataPolicy: Fetch` and `find.tags` see beside the custom
/// metadata, as upstream exposes them.
pub const SYSTEM_METADATA_KEYS: [&str; 3] = ["created_time", "current_version", "delete_version_after"];

/// What `metadataPolicy: Fetch` reads from a KV v2 metadata response, as upstream: the system
/// keys of [`SYSTEM_METADATA_KEYS`] as text (a number as its digits), then the custom metadata,
/// which wins where a key is in both.
pub fn fetched_metadata(body: &serde_json::Value) -> BTreeMap<String, String> {
    let data = body.get("data");
    let mut out: BTreeMap<String, String> = SYSTEM_METADATA_KEYS
        .iter()
        .filter_map(|k| data?.get(*k).filter(|v| !v.is_null()).map(|v| (k.to_string(), metadata_text(v))))
        .collect();
    out.extend(custom_metadata(body));
    out
}

fn metadata_text(v: &serde_json::Value) -> String {
    v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string())
}

/// The custom metadata of a KV v2 metadata response.
pub fn custom_metadata(body: &serde_json::Value) -> BTreeMap<String, String> {
    body.pointer("/data/custom_metadata")
        .and_then(|m| m.as_object())
        .map(|m| m.iter().map(|(k, v)| (k.clone(), metadata_text(v))).collect())
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
        // Vault answers a revoked, expired or unknown token with 403 "invalid token": the
        // credentials are refused, not the path, so the cached client is dropped and rebuilt
        // from its (perhaps rotated) token Secret on the next call.
        403 if errors.contains("invalid token") => ProviderError::Unauthenticated(msg),
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
        assert_eq!(l.list(), "kv/app/db/");
        assert_eq!(locate(Some("team/kv"), V2, "a").unwrap().data(), "team/kv/data/a");
        assert!(locate(None, V2, "db").is_err(), "no mount anywhere");
    }

    #[test]
    fn keys_never_leave_the_mount() {
        for (mount, key) in [
            (Some("kv"), "../auth/token/lookup-self"),
            (Some("kv"), "kv/../auth/token/lookup-self"),
            (Some("kv"), "%2e%2e/auth/token/lookup-self"),
            (Some("kv"), "%2E%2e/auth/token/lookup-self"),
            (Some("kv"), "app/%252e%252e/%252e%252e/sys/mounts"),
            (Some("kv"), "..%2fauth/token/lookup-self"),
            (Some("kv"), "x?list=true"),
            (Some("kv"), "x#/../../auth/token/lookup-self"),
            (Some("kv"), "app\\..\\..\\auth"),
            (None, "auth/token/lookup-self"),
            (None, "AUTH/token/lookup-self"),
            (None, "sys/mounts/x"),
            (None, "cubbyhole/x"),
            (None, "identity/entity/id"),
            (None, "kv/../auth/token/lookup-self"),
            (None, "../auth/token/lookup-self"),
            (None, "%2e%2e/auth/token/lookup-self"),
        ] {
            for v in [V1, V2] {
                let e = locate(mount, v, key).expect_err(key);
                assert_eq!(e.code(), tonic::Code::InvalidArgument, "{key:?}: {e}");
            }
        }
        let e = locate(None, V1, "auth/token/lookup-self").expect_err("reserved");
        assert!(e.to_string().contains("\"auth\" is reserved by Vault"), "{e}");
        assert!(locate(Some("kv/.."), V1, "x").expect_err("bad spec.path").code() == tonic::Code::FailedPrecondition);
    }

    #[test]
    fn api_paths_are_encoded_and_survive_url_parsing() {
        let l = locate(Some("kv"), V2, "team a/100%/x;y").unwrap();
        assert_eq!(l.data(), "kv/data/team%20a/100%25/x%3By");
        assert_eq!(l.metadata(), "kv/metadata/team%20a/100%25/x%3By");
        assert_eq!(l.at("").unwrap().list(), "kv/metadata/");
        // What the client does with it: join to the server and parse. The path must come out
        // as sent: no segment resolved, split or cut.
        let url = reqwest::Url::parse(&format!("http://127.0.0.1:8200/v1/{}", l.data())).unwrap();
        assert_eq!(url.path(), "/v1/kv/data/team%20a/100%25/x%3By");
        assert_eq!((url.query(), url.fragment()), (None, None));
        let segments: Vec<_> = url.path_segments().unwrap().collect();
        assert_eq!(segments, ["v1", "kv", "data", "team%20a", "100%25", "x%3By"]);
    }

    #[test]
    fn only_kv_mounts_of_the_configured_version() {
        let answer = |kind: &str, path: &str, version: Option<&str>| {
            let options = version.map(|v| serde_json::json!({"version": v}));
            serde_json::json!({"data": {"type": kind, "path": path, "options": options}})
        };
        assert!(check_kv_mount(&answer("kv", "kv/", Some("2")), "kv", V2).is_ok());
        assert!(check_kv_mount(&answer("kv", "kv/", Some("1")), "kv", V1).is_ok());
        assert!(check_kv_mount(&answer("generic", "old/", None), "old", V1).is_ok());
        for (body, mount, v, want) in [
            (answer("database", "database/", None), "database", V1, "a \"database\" engine"),
            (answer("transit", "transit/", None), "transit", V2, "a \"transit\" engine"),
            (answer("kv", "kv/", Some("2")), "kv", V1, "it is KV v2; spec.version says v1"),
            (answer("kv", "kv/", Some("1")), "kv", V2, "it is KV v1; spec.version says v2"),
            (answer("kv", "team/kv/", Some("2")), "team", V2, "in the mount \"team/kv/\""),
            (serde_json::json!({}), "kv", V2, "in the mount \"\""),
        ] {
            let e = check_kv_mount(&body, mount, v).expect_err(want);
            assert_eq!(e.code(), tonic::Code::InvalidArgument);
            assert!(e.to_string().contains(want), "{e}");
        }
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
        // Fetch sees the system metadata too, as text; a custom key of the same name wins.
        let meta = serde_json::json!({"data": {"created_time": "2026-01-02T03:04:05.5Z", "current_version": 3,
            "delete_version_after": "0s", "max_versions": 0, "versions": {"3": {}},
            "custom_metadata": {"dev": "alice", "delete_version_after": "custom"}}});
        let fetched = fetched_metadata(&meta);
        assert_eq!(fetched.get("created_time").map(String::as_str), Some("2026-01-02T03:04:05.5Z"));
        assert_eq!(fetched.get("current_version").map(String::as_str), Some("3"));
        assert_eq!(fetched.get("delete_version_after").map(String::as_str), Some("custom"), "custom wins");
        assert_eq!(fetched.get("dev").map(String::as_str), Some("alice"));
        assert_eq!(fetched.len(), 4, "max_versions and versions are not exposed: {fetched:?}");
        assert!(!custom_metadata(&meta).contains_key("current_version"), "pushes see custom metadata only");
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
        assert_eq!(
            map_status(403, "2 errors occurred: permission denied; invalid token", "x").code(),
            tonic::Code::Unauthenticated,
            "a refused token is refused credentials"
        );
        assert_eq!(map_status(503, "Vault is sealed", "x").code(), tonic::Code::Unavailable);
        assert_eq!(map_status(400, "", "x").code(), tonic::Code::InvalidArgument);
    }
}
