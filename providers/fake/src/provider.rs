//! The Fake provider process: the entries of the configuration a request reaches, and pushed
//! values in memory.

use std::collections::HashMap;
use std::sync::Mutex;

use keyward_proto::v1::{
    ExternalSecretDataRemoteRef, ExternalSecretFind, PushSecretData, PushSecretRemoteRef, SecretStoreCapabilities,
};
use keyward_provider_runtime::json::{
    find_regex, has_property, push_value, value_map, value_property, without_property,
};
use keyward_provider_runtime::refs::ClusterRefs;
use keyward_provider_runtime::{Provider, ProviderError, RequestContext, SecretMap};
use kube::Client;

use crate::api::{Fake, FakeSpec, KIND};

/// Pushed values: (config namespace, config name, remote key) → value.
type Pushed = HashMap<(String, String, String), Vec<u8>>;

/// The Fake provider.
pub struct FakeProvider {
    refs: ClusterRefs,
    pushed: Mutex<Pushed>,
}

impl FakeProvider {
    /// The provider, reading the configuration each request names with `client` (the
    /// provider's own identity). Configurations are read on every call, as the other providers
    /// do, so an edited Fake object serves its new entries at once.
    pub fn start(client: Client) -> Self {
        FakeProvider { refs: ClusterRefs::new(client), pushed: Mutex::new(HashMap::new()) }
    }

    /// The Fake spec the request names: a Fake object, or the `spec.provider.fake` of a
    /// SecretStore or ClusterSecretStore, checked by the configuration rules either way.
    async fn config(&self, ctx: &RequestContext) -> Result<FakeSpec, ProviderError> {
        Ok(self.refs.resolve_spec::<Fake>(ctx, &KIND).await?.spec)
    }

    fn pushed(&self) -> std::sync::MutexGuard<'_, Pushed> {
        self.pushed.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn pushed_key(ctx: &RequestContext, key: &str) -> (String, String, String) {
        (ctx.config_namespace().to_string(), ctx.name.clone(), key.to_string())
    }

    /// The value of `key` (pushed first, then the static entry with the version).
    async fn value(&self, ctx: &RequestContext, key: &str, version: &str) -> Result<Vec<u8>, ProviderError> {
        let spec = self.config(ctx).await?;
        if let Some(v) = self.pushed().get(&Self::pushed_key(ctx, key)) {
            return Ok(v.clone());
        }
        static_entry(&spec, key, version).map(|v| v.as_bytes().to_vec()).ok_or_else(|| {
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

/// GetSecret on a value: the whole value, or with `property` that property of it read as JSON.
pub fn secret_value(value: Vec<u8>, remote_ref: &ExternalSecretDataRemoteRef) -> Result<Vec<u8>, ProviderError> {
    if remote_ref.property.is_empty() {
        Ok(value)
    } else {
        value_property(&value, &remote_ref.key, &remote_ref.property)
    }
}

#[tonic::async_trait]
impl Provider for FakeProvider {
    async fn get_secret(
        &self,
        ctx: &RequestContext,
        remote_ref: &ExternalSecretDataRemoteRef,
    ) -> Result<Vec<u8>, ProviderError> {
        let value = self.value(ctx, &remote_ref.key, &remote_ref.version).await?;
        secret_value(value, remote_ref)
    }

    async fn get_secret_map(
        &self,
        ctx: &RequestContext,
        remote_ref: &ExternalSecretDataRemoteRef,
    ) -> Result<SecretMap, ProviderError> {
        let value = self.value(ctx, &remote_ref.key, &remote_ref.version).await?;
        value_map(&value, &remote_ref.key, &remote_ref.property)
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
        let re = find_regex(find)?;
        let matches = |key: &str| key.starts_with(&find.path) && re.as_ref().is_none_or(|re| re.is_match(key));
        let spec = self.config(ctx).await?;
        let mut out = SecretMap::new();
        for e in spec.data.iter().filter(|e| e.version.is_none()) {
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
        let value = push_value(pushed.get(&key).map(Vec::as_slice), secret_data, data, &data.remote_key)?;
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
            match without_property(existing, &remote_ref.remote_key, &remote_ref.property)? {
                Some(rest) => pushed.insert(key, rest),
                None => pushed.remove(&key),
            };
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
        Ok(has_property(&value, &remote_ref.property))
    }

    async fn validate(&self, ctx: &RequestContext) -> Result<Vec<String>, ProviderError> {
        // The configuration rules are checked where it is read.
        let spec = self.config(ctx).await?;
        Ok(if spec.data.is_empty() { vec!["the Fake config has no entries".to_string()] } else { vec![] })
    }

    async fn object(&self, ctx: &RequestContext) -> keyward_provider_runtime::Generation {
        self.refs.generation_of::<Fake>(ctx).await
    }

    fn capabilities(&self) -> SecretStoreCapabilities {
        SecretStoreCapabilities::ReadWrite
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::FakeEntry;
    use keyward_provider_runtime::check_provider_ref;
    use keyward_provider_runtime::testkit::provider_ref;
    use serde_json::json;

    const NS: &str = "team-a";
    const FAKE_PATH: &str = "/apis/provider.external-secrets.io/v2alpha1/namespaces/team-a/fakes/static";

    fn spec() -> FakeSpec {
        FakeSpec {
            data: vec![
                FakeEntry { key: "db".into(), version: None, value: r#"{"user":"app"}"#.into() },
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

    /// A provider whose API server holds one Fake object, `team-a/static`, and answers 404 for
    /// anything else, as the API server does. Only the configuration read goes to it.
    fn provider() -> FakeProvider {
        let fake = json!({
            "apiVersion": "provider.external-secrets.io/v2alpha1", "kind": "Fake",
            "metadata": {"name": "static", "namespace": NS, "generation": 1},
            "spec": {"data": [
                {"key": "app", "value": r#"{"db":{"host":"primary","port":5432},"replicas":[{"host":"r0"},{"host":"r1"}],"a.b":"literal"}"#},
                {"key": "plain", "value": "text"}
            ]}
        });
        let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
            let (status, body) = if req.uri().path() == FAKE_PATH {
                (200, fake.clone())
            } else {
                (
                    404,
                    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound",
                             "message": "not found", "code": 404}),
                )
            };
            let answer = http::Response::builder()
                .status(status)
                .header("content-type", "application/json")
                .body(kube::client::Body::from(body.to_string().into_bytes()));
            async move { answer }
        });
        FakeProvider::start(Client::new(service, NS))
    }

    fn ctx(name: &str) -> RequestContext {
        check_provider_ref("GetSecret", Some(&provider_ref("Fake", name, "", "Provider")), NS, true).expect("ctx")
    }

    fn rr(key: &str, property: &str) -> ExternalSecretDataRemoteRef {
        ExternalSecretDataRemoteRef { key: key.into(), property: property.into(), ..Default::default() }
    }

    async fn get(p: &FakeProvider, key: &str, property: &str) -> Result<String, ProviderError> {
        let bytes = p.get_secret(&ctx("static"), &rr(key, property)).await?;
        Ok(String::from_utf8(bytes).expect("UTF-8"))
    }

    #[tokio::test]
    async fn properties_resolve_as_in_the_other_providers() {
        let p = provider();
        assert_eq!(get(&p, "app", "db.host").await.expect("dotted path"), "primary");
        assert_eq!(get(&p, "app", "db.port").await.expect("number"), "5432");
        assert_eq!(get(&p, "app", "replicas.1.host").await.expect("array index"), "r1");
        assert_eq!(get(&p, "app", "a.b").await.expect("literal key"), "literal", "a literal key wins");
        assert_eq!(get(&p, "app", "db").await.expect("object"), r#"{"host":"primary","port":5432}"#);
        assert!(get(&p, "app", "replicas.2.host").await.expect_err("past the end").is_not_found());
        assert!(get(&p, "app", "db.nope").await.expect_err("missing").is_not_found());
        let e = get(&p, "plain", "x").await.expect_err("not JSON");
        assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e}");
        assert_eq!(get(&p, "plain", "").await.expect("whole value"), "text");

        let map = p.get_secret_map(&ctx("static"), &rr("app", "replicas.0")).await.expect("map of a path");
        assert_eq!(map, SecretMap::from([("host".to_string(), b"r0".to_vec())]));
        let exists =
            |prop: &str| PushSecretRemoteRef { remote_key: "app".into(), property: prop.into(), ..Default::default() };
        assert!(p.secret_exists(&ctx("static"), &exists("replicas.1.host")).await.expect("exists"));
        assert!(!p.secret_exists(&ctx("static"), &exists("replicas.5")).await.expect("absent"));
    }

    #[tokio::test]
    async fn pushed_values_are_read_the_same_way() {
        let p = provider();
        let src = SecretMap::from([("pw".to_string(), b"s3cret".to_vec())]);
        let push = |prop: &str| PushSecretData {
            remote_key: "pushed".into(),
            secret_key: "pw".into(),
            property: prop.into(),
            ..Default::default()
        };
        p.push_secret(&ctx("static"), &src, &push("password")).await.expect("push");
        p.push_secret(&ctx("static"), &src, &push("again")).await.expect("push into the same value");
        let whole: serde_json::Value =
            serde_json::from_str(&get(&p, "pushed", "").await.expect("pushed")).expect("JSON");
        assert_eq!(whole, json!({"password": "s3cret", "again": "s3cret"}));
        assert_eq!(get(&p, "pushed", "password").await.expect("property"), "s3cret");
        let delete = |prop: &str| PushSecretRemoteRef {
            remote_key: "pushed".into(),
            property: prop.into(),
            ..Default::default()
        };
        p.delete_secret(&ctx("static"), &delete("password")).await.expect("delete a property");
        assert!(get(&p, "pushed", "password").await.expect_err("deleted").is_not_found());
        p.delete_secret(&ctx("static"), &delete("again")).await.expect("delete the last property");
        assert!(get(&p, "pushed", "").await.expect_err("gone with its last property").is_not_found());
    }

    #[tokio::test]
    async fn a_missing_configuration_is_a_precondition() {
        let e = provider().get_secret(&ctx("missing"), &rr("app", "")).await.expect_err("no such Fake");
        assert_eq!(e.code(), tonic::Code::FailedPrecondition, "{e}");
        assert!(e.to_string().contains("Fake team-a/missing not found"), "{e}");
    }
}
