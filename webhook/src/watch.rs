//! Watches that feed the caches. Namespaces, Providers and SecretStores are watched metadata-only;
//! ClusterProviders keep their spec, ClusterSecretStores and ClusterGenerators their namespace
//! conditions; ExternalSecrets and PushSecrets only leave their ClusterProvider references in a
//! small index (ExternalSecrets also their injection target).
//! No Secret is ever watched: the webhook has no access to Secrets at all.

use std::sync::Arc;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Namespace;
use keyward_crds::generators::ClusterGenerator;
use keyward_crds::{
    ClusterProvider, ClusterProviderCondition, ClusterProviderSpec, ClusterSecretStore, ExternalSecret, Provider,
    PushSecret, SecretStore,
};
use kube::api::{ApiResource, DynamicObject, PartialObjectMeta};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, watcher};
use kube::{Api, Client, ResourceExt};
use serde::Deserialize;

use std::time::Duration;

use crate::cache::{Caches, ObjectKey, Source, State, UserKind, external_secret_uses, push_secret_uses};
use crate::freshness::WATCH_RETRY_MAX;

/// How one watched kind lands in the caches.
trait Feed<K>: Send + 'static {
    /// Replaces everything this feed owns after a (re)list.
    fn replace(&self, state: &mut State, items: Vec<K>);
    /// An object was added or changed.
    fn apply(&self, state: &mut State, item: K);
    /// An object was deleted.
    fn delete(&self, state: &mut State, item: K);
}

struct Namespaces;
impl Feed<PartialObjectMeta<Namespace>> for Namespaces {
    fn replace(&self, state: &mut State, items: Vec<PartialObjectMeta<Namespace>>) {
        state.namespaces = items.into_iter().map(|n| (n.name_any(), n.metadata.labels.unwrap_or_default())).collect();
    }
    fn apply(&self, state: &mut State, n: PartialObjectMeta<Namespace>) {
        state.namespaces.insert(n.name_any(), n.metadata.labels.unwrap_or_default());
    }
    fn delete(&self, state: &mut State, n: PartialObjectMeta<Namespace>) {
        state.namespaces.remove(&n.name_any());
    }
}

/// Reads a ClusterProvider's spec, keeping why it could not be read.
pub fn cluster_provider_spec(obj: &DynamicObject) -> Result<ClusterProviderSpec, String> {
    match obj.data.get("spec") {
        Some(spec) => ClusterProviderSpec::deserialize(spec).map_err(|e| e.to_string()),
        None => Err("it has no spec".into()),
    }
}

struct ClusterProviders;
impl Feed<DynamicObject> for ClusterProviders {
    fn replace(&self, state: &mut State, items: Vec<DynamicObject>) {
        state.cluster_providers = items.iter().map(|o| (o.name_any(), cluster_provider_spec(o))).collect();
    }
    fn apply(&self, state: &mut State, o: DynamicObject) {
        state.cluster_providers.insert(o.name_any(), cluster_provider_spec(&o));
    }
    fn delete(&self, state: &mut State, o: DynamicObject) {
        state.cluster_providers.remove(&o.name_any());
    }
}

/// Reads a ClusterSecretStore's namespace conditions (none: every namespace is admitted),
/// keeping why they could not be read. Only the conditions are read, so a provider section
/// this version does not know never hides them.
pub fn cluster_secret_store_conditions(obj: &DynamicObject) -> Result<Vec<ClusterProviderCondition>, String> {
    match obj.data.pointer("/spec/conditions") {
        None | Some(serde_json::Value::Null) => Ok(Vec::new()),
        Some(c) => Vec::<ClusterProviderCondition>::deserialize(c).map_err(|e| format!("spec.conditions: {e}")),
    }
}

struct ClusterSecretStores;
impl Feed<DynamicObject> for ClusterSecretStores {
    fn replace(&self, state: &mut State, items: Vec<DynamicObject>) {
        state.cluster_secret_stores =
            items.iter().map(|o| (o.name_any(), cluster_secret_store_conditions(o))).collect();
    }
    fn apply(&self, state: &mut State, o: DynamicObject) {
        state.cluster_secret_stores.insert(o.name_any(), cluster_secret_store_conditions(&o));
    }
    fn delete(&self, state: &mut State, o: DynamicObject) {
        state.cluster_secret_stores.remove(&o.name_any());
    }
}

/// ClusterGenerators: their namespace conditions, read as a ClusterSecretStore's (the same
/// field, the same rule), so a generator spec this version does not know never hides them.
struct ClusterGenerators;
impl Feed<DynamicObject> for ClusterGenerators {
    fn replace(&self, state: &mut State, items: Vec<DynamicObject>) {
        state.cluster_generators = items.iter().map(|o| (o.name_any(), cluster_secret_store_conditions(o))).collect();
    }
    fn apply(&self, state: &mut State, o: DynamicObject) {
        state.cluster_generators.insert(o.name_any(), cluster_secret_store_conditions(&o));
    }
    fn delete(&self, state: &mut State, o: DynamicObject) {
        state.cluster_generators.remove(&o.name_any());
    }
}

struct Providers;
impl Feed<PartialObjectMeta<Provider>> for Providers {
    fn replace(&self, state: &mut State, items: Vec<PartialObjectMeta<Provider>>) {
        state.providers.clear();
        for p in items {
            state.add_provider(&p.namespace().unwrap_or_default(), &p.name_any());
        }
    }
    fn apply(&self, state: &mut State, p: PartialObjectMeta<Provider>) {
        state.add_provider(&p.namespace().unwrap_or_default(), &p.name_any());
    }
    fn delete(&self, state: &mut State, p: PartialObjectMeta<Provider>) {
        state.remove_provider(&p.namespace().unwrap_or_default(), &p.name_any());
    }
}

struct SecretStores;
impl Feed<PartialObjectMeta<SecretStore>> for SecretStores {
    fn replace(&self, state: &mut State, items: Vec<PartialObjectMeta<SecretStore>>) {
        state.secret_stores.clear();
        for s in items {
            state.add_secret_store(&s.namespace().unwrap_or_default(), &s.name_any());
        }
    }
    fn apply(&self, state: &mut State, s: PartialObjectMeta<SecretStore>) {
        state.add_secret_store(&s.namespace().unwrap_or_default(), &s.name_any());
    }
    fn delete(&self, state: &mut State, s: PartialObjectMeta<SecretStore>) {
        state.remove_secret_store(&s.namespace().unwrap_or_default(), &s.name_any());
    }
}

struct Users(UserKind);
impl Users {
    fn key(&self, o: &DynamicObject) -> ObjectKey {
        ObjectKey { kind: self.0, namespace: o.namespace().unwrap_or_default(), name: o.name_any() }
    }
    fn uses(&self, o: &DynamicObject) -> Vec<crate::cache::StoreUse> {
        match self.0 {
            UserKind::ExternalSecret => external_secret_uses(&o.data),
            UserKind::PushSecret => push_secret_uses(&o.data),
        }
    }
}
impl Feed<DynamicObject> for Users {
    fn replace(&self, state: &mut State, items: Vec<DynamicObject>) {
        let entries = items.iter().map(|o| (self.key(o), self.uses(o))).collect();
        state.refs.replace_kind(self.0, entries);
        if self.0 == UserKind::ExternalSecret {
            state.injection.clear_external_secrets();
            for o in &items {
                state.injection.upsert_external_secret(&o.namespace().unwrap_or_default(), &o.name_any(), &o.data);
            }
        }
    }
    fn apply(&self, state: &mut State, o: DynamicObject) {
        state.refs.upsert(self.key(&o), self.uses(&o));
        if self.0 == UserKind::ExternalSecret {
            state.injection.upsert_external_secret(&o.namespace().unwrap_or_default(), &o.name_any(), &o.data);
        }
    }
    fn delete(&self, state: &mut State, o: DynamicObject) {
        state.refs.remove(&self.key(&o));
        if self.0 == UserKind::ExternalSecret {
            state.injection.remove_external_secret(&o.namespace().unwrap_or_default(), &o.name_any());
        }
    }
}

async fn run<K, S, F>(source: Source, stream: S, caches: Arc<Caches>, feed: F)
where
    S: Stream<Item = Result<Event<K>, watcher::Error>> + Send,
    F: Feed<K>,
{
    futures::pin_mut!(stream);
    let mut buffer: Vec<K> = Vec::new();
    while let Some(event) = stream.next().await {
        match &event {
            Ok(Event::Apply(_) | Event::Delete(_) | Event::InitDone) => caches.freshness.delivered(source),
            Ok(_) => {}
            Err(_) => caches.freshness.failed(source, std::time::Instant::now()),
        }
        match event {
            Ok(Event::Init) => buffer.clear(),
            Ok(Event::InitApply(k)) => buffer.push(k),
            Ok(Event::InitDone) => {
                let items = std::mem::take(&mut buffer);
                let n = items.len();
                feed.replace(&mut caches.write(), items);
                caches.mark_synced(source);
                caches.announce();
                tracing::info!(source = source.as_str(), objects = n, "cache listed");
            }
            Ok(Event::Apply(k)) => {
                feed.apply(&mut caches.write(), k);
                caches.announce();
            }
            Ok(Event::Delete(k)) => {
                feed.delete(&mut caches.write(), k);
                caches.announce();
            }
            Err(e) => tracing::warn!(source = source.as_str(), error = %e, "watch failed; retrying"),
        }
    }
}

/// Retry delays of a failing watch: doubling from 500 ms to [`WATCH_RETRY_MAX`], reset by
/// an event. Short, so the caches' freshness (see `freshness.rs`) is known within seconds of
/// the API server's return; five watches retrying every few seconds cost it nothing.
fn retry() -> watcher::ExponentialBackoff {
    backon::ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(500))
        .with_max_delay(WATCH_RETRY_MAX)
        .with_factor(2.0)
        .without_max_times()
        .into()
}

/// What is dropped from a full object before it reaches a feed: its write history, never read,
/// and as large as the spec (a re-list holds every object until it completes).
fn strip(o: &mut DynamicObject) {
    keyward_crds::common::strip_write_history(&mut o.metadata);
}

/// Starts every watch; the caches report synced once each has listed.
pub fn spawn_watches(client: Client, caches: Arc<Caches>) -> Vec<tokio::task::JoinHandle<()>> {
    let cfg = watcher::Config::default;
    let dynamic = |ar: ApiResource| Api::<DynamicObject>::all_with(client.clone(), &ar);
    vec![
        tokio::spawn(run(
            Source::Namespaces,
            watcher(Api::<PartialObjectMeta<Namespace>>::all(client.clone()), cfg()).backoff(retry()),
            caches.clone(),
            Namespaces,
        )),
        tokio::spawn(run(
            Source::ClusterProviders,
            watcher(dynamic(ApiResource::erase::<ClusterProvider>(&())), cfg()).backoff(retry()).modify(strip),
            caches.clone(),
            ClusterProviders,
        )),
        tokio::spawn(run(
            Source::Providers,
            watcher(Api::<PartialObjectMeta<Provider>>::all(client.clone()), cfg()).backoff(retry()),
            caches.clone(),
            Providers,
        )),
        tokio::spawn(run(
            Source::ExternalSecrets,
            watcher(dynamic(ApiResource::erase::<ExternalSecret>(&())), cfg()).backoff(retry()).modify(strip),
            caches.clone(),
            Users(UserKind::ExternalSecret),
        )),
        tokio::spawn(run(
            Source::PushSecrets,
            watcher(dynamic(ApiResource::erase::<PushSecret>(&())), cfg()).backoff(retry()).modify(strip),
            caches.clone(),
            Users(UserKind::PushSecret),
        )),
        tokio::spawn(run(
            Source::ClusterSecretStores,
            watcher(dynamic(ApiResource::erase::<ClusterSecretStore>(&())), cfg()).backoff(retry()).modify(strip),
            caches.clone(),
            ClusterSecretStores,
        )),
        tokio::spawn(run(
            Source::SecretStores,
            watcher(Api::<PartialObjectMeta<SecretStore>>::all(client.clone()), cfg()).backoff(retry()),
            caches.clone(),
            SecretStores,
        )),
        tokio::spawn(run(
            Source::ClusterGenerators,
            watcher(dynamic(ApiResource::erase::<ClusterGenerator>(&())), cfg()).backoff(retry()).modify(strip),
            caches,
            ClusterGenerators,
        )),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::ObjectMeta;
    use serde_json::json;

    fn ns(name: &str, env: &str) -> PartialObjectMeta<Namespace> {
        PartialObjectMeta {
            types: None,
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some([("env".to_string(), env.to_string())].into()),
                ..Default::default()
            },
            _phantom: std::marker::PhantomData,
        }
    }

    fn es(ns: &str, name: &str, store: &str) -> DynamicObject {
        let ar = ApiResource::erase::<ExternalSecret>(&());
        DynamicObject::new(name, &ar).within(ns).data(json!({
            "spec": {"secretStoreRef": {"name": store, "kind": "ClusterProvider"}}
        }))
    }

    #[tokio::test]
    async fn a_relist_replaces_and_events_update_the_namespace_cache() {
        let caches = Arc::new(Caches::new());
        let events = vec![
            Ok(Event::Init),
            Ok(Event::InitApply(ns("a", "prod"))),
            Ok(Event::InitApply(ns("b", "dev"))),
            Ok(Event::InitDone),
            Ok(Event::Apply(ns("b", "prod"))),
            Ok(Event::Delete(ns("a", "prod"))),
            // A relist that no longer has "b": it is dropped.
            Ok(Event::Init),
            Ok(Event::InitApply(ns("c", "dev"))),
            Ok(Event::InitDone),
        ];
        run(Source::Namespaces, futures::stream::iter(events), caches.clone(), Namespaces).await;
        let s = caches.read();
        assert_eq!(s.namespaces.keys().collect::<Vec<_>>(), ["c"]);
        assert!(caches.unsynced().iter().all(|u| *u != "namespaces"));
    }

    #[tokio::test]
    async fn external_secrets_land_in_the_index_only() {
        let caches = Arc::new(Caches::new());
        let events = vec![
            Ok(Event::Init),
            Ok(Event::InitApply(es("team-a", "one", "shared"))),
            Ok(Event::InitDone),
            Ok(Event::Apply(es("team-b", "two", "shared"))),
            Ok(Event::Apply(es("team-a", "one", "other"))),
        ];
        run(Source::ExternalSecrets, futures::stream::iter(events), caches.clone(), Users(UserKind::ExternalSecret))
            .await;
        let s = caches.read();
        let shared = s.refs.users_of("shared").expect("used");
        assert_eq!(shared.keys().collect::<Vec<_>>(), ["team-b"]);
        assert_eq!(s.refs.users_of("other").expect("used")["team-a"].external_secrets, 1);
        assert!(!caches.is_synced(), "only one source listed");
    }

    #[tokio::test]
    async fn full_objects_lose_their_write_history_before_any_feed_sees_them() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
        let mut o = es("team-a", "one", "shared");
        o.metadata.managed_fields =
            Some(vec![ManagedFieldsEntry { manager: Some("kubectl".into()), ..Default::default() }]);
        o.metadata.annotations = Some(
            [(keyward_crds::common::LAST_APPLIED.to_string(), "{}".to_string()), ("keep".to_string(), "1".to_string())]
                .into(),
        );
        let events = futures::stream::iter(vec![Ok::<_, watcher::Error>(Event::Apply(o))]).modify(strip);
        let seen: Vec<_> = events.collect().await;
        let Ok(Event::Apply(o)) = &seen[0] else { panic!("an Apply event") };
        assert!(o.metadata.managed_fields.is_none());
        assert_eq!(
            o.metadata.annotations.as_ref().map(|a| a.keys().map(String::as_str).collect::<Vec<_>>()),
            Some(vec!["keep"])
        );
        assert!(o.data.get("spec").is_some(), "the spec is kept");
    }

    #[test]
    fn unreadable_cluster_providers_are_kept_with_the_reason() {
        let ar = ApiResource::erase::<ClusterProvider>(&());
        let bad = DynamicObject::new("bad", &ar).data(json!({"spec": {"config": 3}}));
        assert!(cluster_provider_spec(&bad).is_err());
        let none = DynamicObject::new("none", &ar);
        assert_eq!(cluster_provider_spec(&none), Err("it has no spec".to_string()));
    }

    #[tokio::test]
    async fn cluster_secret_stores_keep_their_conditions_or_why_not() {
        let ar = ApiResource::erase::<ClusterSecretStore>(&());
        let store = |name: &str, spec: serde_json::Value| DynamicObject::new(name, &ar).data(json!({"spec": spec}));
        let events = vec![
            Ok(Event::Init),
            Ok(Event::InitApply(store("open", json!({"provider": {"vault": {"server": "x"}}})))),
            Ok(Event::InitApply(store("narrow", json!({"provider": {}, "conditions": [{"namespaces": ["a"]}]})))),
            Ok(Event::InitApply(store("odd", json!({"conditions": "all"})))),
            Ok(Event::InitDone),
            Ok(Event::Delete(store("open", json!({})))),
        ];
        let caches = Arc::new(Caches::new());
        run(Source::ClusterSecretStores, futures::stream::iter(events), caches.clone(), ClusterSecretStores).await;
        let s = caches.read();
        assert!(!s.cluster_secret_stores.contains_key("open"), "deleted");
        let narrow = s.cluster_secret_stores["narrow"].as_ref().expect("conditions read");
        assert_eq!(narrow[0].namespaces, ["a"]);
        let odd = s.cluster_secret_stores["odd"].as_ref().expect_err("not a list");
        assert!(odd.starts_with("spec.conditions: "), "{odd}");
        assert!(caches.unsynced().iter().all(|u| *u != "clustersecretstores"));
        drop(s);
        let none = DynamicObject::new("none", &ar);
        assert_eq!(cluster_secret_store_conditions(&none), Ok(Vec::new()), "no conditions admit every namespace");
    }
}
