//! The Provider and ClusterProvider controllers: check the provider process, report Ready and
//! capabilities, and check again on an interval and when the configuration object or the TLS
//! Secret changes.

pub mod check;
pub mod refs;

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use keyward_crds::{ClusterProvider, Fake, Kubernetes, Provider};
use kube::core::PartialObjectMeta;
use kube::runtime::controller::{Action, Config as ControllerConfig, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::json;

use crate::clientmanager::{StoreObject, TLS_SECRET_NAME};
use crate::context::Context;
use refs::{ConfigObject, references};

/// API failures; the controller retries them.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API server failed.
    #[error(transparent)]
    Kube(#[from] kube::Error),
}

async fn reconcile_provider(p: Arc<Provider>, ctx: Arc<Context>) -> Result<Action, Error> {
    let ns = p.namespace().unwrap_or_default();
    let api: Api<Provider> = Api::namespaced(ctx.client.clone(), &ns);
    let store = StoreObject::Provider(p.clone());
    reconcile_store(&ctx, api, p.as_ref(), p.status.clone().unwrap_or_default(), store, &ns).await
}

async fn reconcile_cluster(p: Arc<ClusterProvider>, ctx: Arc<Context>) -> Result<Action, Error> {
    let api: Api<ClusterProvider> = Api::all(ctx.client.clone());
    let store = StoreObject::ClusterProvider(p.clone());
    reconcile_store(&ctx, api, p.as_ref(), p.status.clone().unwrap_or_default(), store, "").await
}

/// Checks one Provider or ClusterProvider, writes its status when it changed, reports it.
async fn reconcile_store<K>(
    ctx: &Context,
    api: Api<K>,
    object: &K,
    previous: keyward_crds::ProviderStatus,
    store: StoreObject,
    ns: &str,
) -> Result<Action, Error>
where
    K: Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let checked = check::check(ctx, &store, &previous, object.meta().generation).await;
    ctx.metrics.set_provider_condition(&K::kind(&()), &object.name_any(), ns, checked.ready);
    if checked.status != previous {
        api.patch_status(
            &object.name_any(),
            &Default::default(),
            &kube::api::Patch::Merge(json!({"status": checked.status})),
        )
        .await?;
    }
    report(ctx, &object.object_ref(&()), &previous, &checked).await;
    Ok(next(ctx, checked.ready))
}

async fn report(
    ctx: &Context,
    reference: &k8s_openapi::api::core::v1::ObjectReference,
    previous: &keyward_crds::ProviderStatus,
    checked: &check::Checked,
) {
    let was_ready = previous.conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True");
    if was_ready != checked.ready || previous.conditions.is_empty() {
        let reason = if checked.ready { "Ready" } else { "NotReady" };
        ctx.event(reference, !checked.ready, reason, "Check", checked.message.clone()).await;
    }
}

fn next(ctx: &Context, ready: bool) -> Action {
    let interval = ctx.settings.provider_check_interval;
    // A provider that did not answer is retried sooner, so it turns Ready soon after it is up.
    Action::requeue(if ready { interval } else { interval.min(std::time::Duration::from_secs(10)) })
}

fn error_policy<K: Resource<DynamicType = ()>>(obj: Arc<K>, error: &Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(name = %obj.name_any(), %error, "provider reconcile failed");
    Action::requeue(std::time::Duration::from_secs(5))
}

fn matching_providers(store: &Store<Provider>, obj: ConfigObject<'_>) -> Vec<ObjectRef<Provider>> {
    store
        .state()
        .iter()
        .filter(|p| references(&p.spec.config.provider_ref, p.namespace().as_deref(), obj))
        .map(|p| ObjectRef::from_obj(&**p))
        .collect()
}

fn matching_cluster(store: &Store<ClusterProvider>, obj: ConfigObject<'_>) -> Vec<ObjectRef<ClusterProvider>> {
    store
        .state()
        .iter()
        .filter(|p| references(&p.spec.config.provider_ref, None, obj))
        .map(|p| ObjectRef::from_obj(&**p))
        .collect()
}

/// Where the controllers watch.
pub struct Scope {
    /// The API client.
    pub client: Client,
    /// Namespace the instance is limited to, if any.
    pub namespace: Option<String>,
    /// Watch configuration for Providers and ClusterProviders (controller-class selector).
    pub watch: watcher::Config,
}

impl Scope {
    fn api<K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>>(&self) -> Api<K> {
        match &self.namespace {
            Some(ns) => Api::namespaced(self.client.clone(), ns),
            None => Api::all(self.client.clone()),
        }
    }
}

fn config_kind_of<K: Resource<DynamicType = ()>>() -> &'static str {
    // Only used with the two config kinds, whose kind names are static.
    if K::kind(&()) == "Kubernetes" { "Kubernetes" } else { "Fake" }
}

/// Runs both controllers until `shutdown` resolves.
pub async fn run(
    ctx: Arc<Context>,
    scope: Scope,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + Clone + 'static,
) {
    let tls_watch = watcher::Config::default().fields(&format!("metadata.name={TLS_SECRET_NAME}"));

    let (reader, writer) = reflector::store();
    let stream = watcher(scope.api::<Provider>(), scope.watch.clone())
        .default_backoff()
        .reflect(writer)
        .applied_objects()
        .predicate_filter(crate::predicate::spec_change, Default::default());
    let mut providers = Controller::for_stream(stream, reader.clone());
    providers = watch_config::<Kubernetes, _>(providers, &scope, reader.clone(), matching_providers);
    providers = watch_config::<Fake, _>(providers, &scope, reader.clone(), matching_providers);
    let all = reader.clone();
    let providers = providers
        .watches(scope.api::<PartialObjectMeta<Secret>>(), tls_watch.clone(), move |_| {
            all.state().iter().map(|p| ObjectRef::from_obj(&**p)).collect::<Vec<_>>()
        })
        .with_config(ControllerConfig::default().concurrency(8))
        .graceful_shutdown_on(shutdown.clone())
        .run(reconcile_provider, error_policy, ctx.clone())
        .for_each(|_| async {});

    let (creader, cwriter) = reflector::store();
    let cstream = watcher(Api::<ClusterProvider>::all(scope.client.clone()), scope.watch.clone())
        .default_backoff()
        .reflect(cwriter)
        .applied_objects()
        .predicate_filter(crate::predicate::spec_change, Default::default());
    let mut clusters = Controller::for_stream(cstream, creader.clone());
    clusters = watch_config::<Kubernetes, _>(clusters, &scope, creader.clone(), matching_cluster);
    clusters = watch_config::<Fake, _>(clusters, &scope, creader.clone(), matching_cluster);
    let all = creader.clone();
    let clusters = clusters
        .watches(Api::<PartialObjectMeta<Secret>>::all(scope.client.clone()), tls_watch, move |_| {
            all.state().iter().map(|p| ObjectRef::from_obj(&**p)).collect::<Vec<_>>()
        })
        .with_config(ControllerConfig::default().concurrency(8))
        .graceful_shutdown_on(shutdown)
        .run(reconcile_cluster, error_policy, ctx)
        .for_each(|_| async {});
    futures::join!(providers, clusters);
}

fn watch_config<C, K>(
    ctrl: Controller<K>,
    scope: &Scope,
    store: Store<K>,
    matcher: fn(&Store<K>, ConfigObject<'_>) -> Vec<ObjectRef<K>>,
) -> Controller<K>
where
    C: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
    K: Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    // Config objects live in the namespaces manifests use, so they are watched cluster-wide
    // (metadata only) even for a ClusterProvider whose reference has no namespace.
    let api: Api<PartialObjectMeta<C>> = Api::all(scope.client.clone());
    ctrl.watches(api, watcher::Config::default(), move |obj: PartialObjectMeta<C>| {
        let ns = obj.namespace().unwrap_or_default();
        let name = obj.name_any();
        matcher(&store, ConfigObject { kind: config_kind_of::<C>(), namespace: &ns, name: &name })
    })
}
