//! The Fake provider: serves the entries of `Fake` config objects
//! (`provider.external-secrets.io/v2alpha1`), keeps pushed values in memory. For tests and
//! demos; nothing it holds survives a restart.
//!
//! - GetSecret: the entry whose key matches (and whose version matches the requested one; no
//!   version asks for the entry without one). With `property`, the value is read as a JSON
//!   object and that property returned (strings as-is, anything else as JSON).
//! - GetSecretMap: the value read as a JSON object, one map entry per property.
//! - GetAllSecrets: entries whose key matches `find.name.regexp` and starts with `find.path`;
//!   entries carry no tags, so a `find` with tags is refused as unsupported.
//! - PushSecret: stores the value in memory under the config object and `remote_key` (the whole
//!   source Secret as a JSON object when no secret key is given; into a JSON object when a
//!   property is given). Pushed values shadow static entries with the same key.
//! - DeleteSecret / SecretExists: on pushed values (and static entries, for SecretExists).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use keyward_crds::rules::StoreBackend;
use keyward_crds::{Fake, FakeSpec};
use keyward_proto::v1::{
    ExternalSecretDataRemoteRef, ExternalSecretFind, PushSecretData, PushSecretRemoteRef, SecretStoreCapabilities,
};
use keyward_provider_runtime::refs::store_backend;
use keyward_provider_runtime::{Provider, ProviderError, RequestContext, SecretMap};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};

/// Pushed values: (config namespace, config name, remote key) → value.
type Pushed = HashMap<(String, String, String), Vec<u8>>;

/// The Fake provider.
pub struct FakeProvider {
    client: Client,
    store: Store<Fake>,
    pushed: Mutex<Pushed>,
}

impl FakeProvider {
    /// Starts watching Fake objects (they are small and few) and returns the provider.
    pub fn start(client: Client) -> Self {
        let (store, writer) = reflector::store();
        let api: Api<Fake> = Api::all(client.clone());
        let stream =
            reflector::reflector(writer, watcher(api, watcher::Config::default())).default_backoff().touched_objects();
        tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(event) = stream.next().await {
                if let Err(e) = event {
                    tracing::warn!(error = %e, "watching Fake objects");
                }
            }
        });
        FakeProvider { client, store, pushed: Mutex::new(HashMap::new()) }
    }

    /// The Fake spec the request names: from the watch cache, else straight from the API (a
    /// just-created object may not have reached the cache yet).
    /// A SecretStore or ClusterSecretStore request reads the store's `spec.provider.fake`
    /// (translated by `keyward_crds::rules::store_backend`).
    async fn config(&self, ctx: &RequestContext) -> Result<Arc<Fake>, ProviderError> {
        match store_backend(&self.client, ctx).await? {
            Some((StoreBackend::Fake(spec), _)) => return Ok(Arc::new(Fake::new(&ctx.name, spec))),
            Some((other, _)) => {
                return Err(ProviderError::BadConfig(format!(
                    "{} {}: spec.provider.{} is served by another provider process",
                    ctx.kind,
                    ctx.name,
                    other.provider_name()
                )));
            }
            None => {}
        }
        let ns = ctx.config_namespace();
        if let Some(found) = self.store.get(&ObjectRef::new(&ctx.name).within(ns)) {
            return Ok(found);
        }
        let api: Api<Fake> = Api::namespaced(self.client.clone(), ns);
        match api.get_opt(&ctx.name).await {
            Ok(Some(f)) => Ok(Arc::new(f)),
            Ok(None) => Err(ProviderError::BadConfig(format!(
                "Fake {ns}/{} not found (provider_ref.namespace, else the source namespace)",
                ctx.name
            ))),
            Err(e) => Err(ProviderError::Unavailable(format!("reading Fake {ns}/{}: {e}", ctx.name))),
        }
    }

    fn pushed(&self) -> std::sync::MutexGuard<'_, Pushed> {
        self.pushed.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn pushed_key(ctx: &RequestContext, key: &str) -> (String, String, String) {
        (ctx.config_namespace().to_string(), ctx.name.clone(), key.to_string())
    }

    /// The value of `key` (pushed first, then the static entry with the version).
    async fn value(&self, ctx: &RequestContext, key: &str, version: &str) -> Result<Vec<u8>, ProviderError> {
        let config = self.config(ctx).await?;
        if let Some(v) = self.pushed().get(&Self::pushed_key(ctx, key)) {
            return Ok(v.clone());
        }
        static_entry(&config.spec, key, version).map(|v| v.as_bytes().to_vec()).ok_or_else(|| {
            ProviderError::NoSecret(if version.is_empty() {
                format!("key {key:?} not found")
            } else {
                format!("key {key:?} version {version:?} not found")
            })
        })
    }
}

/// The static entry with `key` and `version` (empty: the entry without a version).
pub fn static_entry<'a>(spec: &'a FakeSpec, key: &str, version: &str) -> Option<&'a str> {
    spec.data.iter().find(|e| e.key == key && e.version.as_deref().unwrap_or("") == version).map(|e| e.value.as_str())
}

/// One property of a JSON object value: strings as-is, anything else as JSON.
pub fn json_property(value: &[u8], key: &str, property: &str) -> Result<Vec<u8>, ProviderError> {
    let map = json_object(value, key)?;
    map.get(property)
        .map(json_to_bytes)
        .ok_or_else(|| ProviderError::NoSecret(format!("key {key:?} has no property {property:?}")))
}

/// A JSON object value as a map of its properties.
pub fn json_map(value: &[u8], key: &str) -> Result<SecretMap, ProviderError> {
    Ok(json_object(value, key)?.iter().map(|(k, v)| (k.clone(), json_to_bytes(v))).collect())
}

fn json_object(value: &[u8], key: &str) -> Result<serde_json::Map<String, serde_json::Value>, ProviderError> {
    match serde_json::from_slice::<serde_json::Value>(value) {
        Ok(serde_json::Value::Object(m)) => Ok(m),
        _ => Err(ProviderError::InvalidArgument(format!(
            "the value of key {key:?} is not a JSON object, so it has no properties"
        ))),
    }
}

fn json_to_bytes(v: &serde_json::Value) -> Vec<u8> {
    match v {
        serde_json::Value::String(s) => s.as_bytes().to_vec(),
        other => other.to_string().into_bytes(),
    }
}

/// A Secret's data as a JSON object of strings (non-UTF-8 values are refused).
pub fn data_to_json(data: &SecretMap) -> Result<Vec<u8>, ProviderError> {
    let mut out = BTreeMap::new();
    for (k, v) in data {
        let s = std::str::from_utf8(v).map_err(|_| {
            ProviderError::InvalidArgument(format!("value of {k:?} is not UTF-8 and cannot go into JSON"))
        })?;
        out.insert(k.clone(), serde_json::Value::String(s.to_string()));
    }
    serde_json::to_vec(&out).map_err(|e| ProviderError::Internal(e.to_string()))
}

/// The value a push writes, given what is stored already (for property pushes).
pub fn pushed_value(
    existing: Option<&[u8]>,
    secret_data: &SecretMap,
    data: &PushSecretData,
) -> Result<Vec<u8>, ProviderError> {
    let value = if data.secret_key.is_empty() {
        data_to_json(secret_data)?
    } else {
        secret_data
            .get(&data.secret_key)
            .cloned()
            .ok_or_else(|| ProviderError::InvalidArgument(format!("source has no key {:?}", data.secret_key)))?
    };
    if data.property.is_empty() {
        return Ok(value);
    }
    let mut obj = match existing {
        Some(bytes) => json_object(bytes, &data.remote_key)?,
        None => serde_json::Map::new(),
    };
    let v = match std::str::from_utf8(&value) {
        Ok(s) => serde_json::Value::String(s.to_string()),
        Err(_) => {
            return Err(ProviderError::InvalidArgument(format!("value for property {:?} is not UTF-8", data.property)));
        }
    };
    obj.insert(data.property.clone(), v);
    serde_json::to_vec(&obj).map_err(|e| ProviderError::Internal(e.to_string()))
}

#[tonic::async_trait]
impl Provider for FakeProvider {
    async fn get_secret(
        &self,
        ctx: &RequestContext,
        remote_ref: &ExternalSecretDataRemoteRef,
    ) -> Result<Vec<u8>, ProviderError> {
        let value = self.value(ctx, &remote_ref.key, &remote_ref.version).await?;
        if remote_ref.property.is_empty() {
            Ok(value)
        } else {
            json_property(&value, &remote_ref.key, &remote_ref.property)
        }
    }

    async fn get_secret_map(
        &self,
        ctx: &RequestContext,
        remote_ref: &ExternalSecretDataRemoteRef,
    ) -> Result<SecretMap, ProviderError> {
        let value = self.value(ctx, &remote_ref.key, &remote_ref.version).await?;
        if remote_ref.property.is_empty() {
            json_map(&value, &remote_ref.key)
        } else {
            let inner = json_property(&value, &remote_ref.key, &remote_ref.property)?;
            json_map(&inner, &format!("{}.{}", remote_ref.key, remote_ref.property))
        }
    }

    async fn get_all_secrets(
        &self,
        ctx: &RequestContext,
        find: &ExternalSecretFind,
    ) -> Result<SecretMap, ProviderError> {
        if !find.tags.is_empty() {
            return Err(ProviderError::Unsupported(
                "Fake entries have no tags; find them by name.regexp or path".into(),
            ));
        }
        let re = match find.name.as_ref().map(|n| n.regexp.as_str()).filter(|r| !r.is_empty()) {
            Some(r) => Some(
                regex::Regex::new(r)
                    .map_err(|e| ProviderError::InvalidArgument(format!("find.name.regexp {r:?}: {e}")))?,
            ),
            None => None,
        };
        let matches = |key: &str| key.starts_with(&find.path) && re.as_ref().is_none_or(|re| re.is_match(key));
        let config = self.config(ctx).await?;
        let mut out = SecretMap::new();
        for e in config.spec.data.iter().filter(|e| e.version.is_none()) {
            if matches(&e.key) {
                out.insert(e.key.clone(), e.value.as_bytes().to_vec());
            }
        }
        let ns = ctx.config_namespace();
        for ((pns, pname, key), v) in self.pushed().iter() {
            if pns == ns && *pname == ctx.name && matches(key) {
                out.insert(key.clone(), v.clone());
            }
        }
        Ok(out)
    }

    async fn push_secret(
        &self,
        ctx: &RequestContext,
        secret_data: &SecretMap,
        data: &PushSecretData,
    ) -> Result<(), ProviderError> {
        self.config(ctx).await?;
        let key = Self::pushed_key(ctx, &data.remote_key);
        let mut pushed = self.pushed();
        let value = pushed_value(pushed.get(&key).map(Vec::as_slice), secret_data, data)?;
        pushed.insert(key, value);
        tracing::info!(remote_key = %data.remote_key, property = %data.property, "stored pushed value in memory");
        Ok(())
    }

    async fn delete_secret(&self, ctx: &RequestContext, remote_ref: &PushSecretRemoteRef) -> Result<(), ProviderError> {
        self.config(ctx).await?;
        let key = Self::pushed_key(ctx, &remote_ref.remote_key);
        let mut pushed = self.pushed();
        if remote_ref.property.is_empty() {
            pushed.remove(&key);
            return Ok(());
        }
        if let Some(existing) = pushed.get(&key) {
            let mut obj = json_object(existing, &remote_ref.remote_key)?;
            obj.remove(&remote_ref.property);
            if obj.is_empty() {
                pushed.remove(&key);
            } else {
                let bytes = serde_json::to_vec(&obj).map_err(|e| ProviderError::Internal(e.to_string()))?;
                pushed.insert(key, bytes);
            }
        }
        Ok(())
    }

    async fn secret_exists(
        &self,
        ctx: &RequestContext,
        remote_ref: &PushSecretRemoteRef,
    ) -> Result<bool, ProviderError> {
        let value = match self.value(ctx, &remote_ref.remote_key, "").await {
            Ok(v) => v,
            Err(ProviderError::NoSecret(_)) => return Ok(false),
            Err(e) => return Err(e),
        };
        if remote_ref.property.is_empty() {
            return Ok(true);
        }
        Ok(json_object(&value, &remote_ref.remote_key).is_ok_and(|o| o.contains_key(&remote_ref.property)))
    }

    async fn validate(&self, ctx: &RequestContext) -> Result<Vec<String>, ProviderError> {
        let config = self.config(ctx).await?;
        keyward_crds::rules::validate_fake(&config.spec).map_err(|e| ProviderError::BadConfig(e.to_string()))?;
        Ok(if config.spec.data.is_empty() { vec!["the Fake config has no entries".to_string()] } else { vec![] })
    }

    fn capabilities(&self) -> SecretStoreCapabilities {
        SecretStoreCapabilities::ReadWrite
    }

    async fn ready(&self) -> bool {
        tokio::time::timeout(Duration::from_millis(200), self.store.wait_until_ready()).await.is_ok_and(|r| r.is_ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keyward_crds::provider_config::FakeEntry;

    fn spec() -> FakeSpec {
        FakeSpec {
            data: vec![
                FakeEntry {
                    key: "db".into(),
                    version: None,
                    value: r#"{"user":"app","port":5432,"nested":{"a":"b"}}"#.into(),
                },
                FakeEntry { key: "db".into(), version: Some("v1".into()), value: "old".into() },
                FakeEntry { key: "plain".into(), version: None, value: "text".into() },
            ],
        }
    }

    #[test]
    fn entries_by_key_and_version() {
        let s = spec();
        assert_eq!(static_entry(&s, "db", "v1"), Some("old"));
        assert!(static_entry(&s, "db", "").is_some_and(|v| v.starts_with('{')));
        assert_eq!(static_entry(&s, "db", "v2"), None);
        assert_eq!(static_entry(&s, "nope", ""), None);
    }

    #[test]
    fn json_properties() {
        let v = static_entry(&spec(), "db", "").expect("entry").as_bytes().to_vec();
        assert_eq!(json_property(&v, "db", "user").expect("user"), b"app");
        assert_eq!(json_property(&v, "db", "port").expect("port"), b"5432");
        assert_eq!(json_property(&v, "db", "nested").expect("nested"), br#"{"a":"b"}"#);
        assert!(json_property(&v, "db", "missing").expect_err("missing").is_not_found());
        let e = json_property(b"text", "plain", "x").expect_err("not json");
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        let m = json_map(&v, "db").expect("map");
        assert_eq!(m.len(), 3);
        assert_eq!(m["user"], b"app");
    }

    #[test]
    fn push_values() {
        let mut src = SecretMap::new();
        src.insert("password".into(), b"s3cret".to_vec());
        src.insert("user".into(), b"app".to_vec());
        let whole = PushSecretData { remote_key: "r".into(), ..Default::default() };
        let v = pushed_value(None, &src, &whole).expect("whole");
        let parsed: serde_json::Value = serde_json::from_slice(&v).expect("json");
        assert_eq!(parsed, serde_json::json!({"password":"s3cret","user":"app"}));
        let one = PushSecretData { remote_key: "r".into(), secret_key: "password".into(), ..Default::default() };
        assert_eq!(pushed_value(None, &src, &one).expect("one"), b"s3cret");
        let prop = PushSecretData {
            remote_key: "r".into(),
            secret_key: "password".into(),
            property: "pw".into(),
            ..Default::default()
        };
        let v = pushed_value(Some(br#"{"keep":"me"}"#), &src, &prop).expect("prop");
        let parsed: serde_json::Value = serde_json::from_slice(&v).expect("json");
        assert_eq!(parsed, serde_json::json!({"keep":"me","pw":"s3cret"}));
        let missing = PushSecretData { remote_key: "r".into(), secret_key: "nope".into(), ..Default::default() };
        assert!(pushed_value(None, &src, &missing).is_err());
    }
}
