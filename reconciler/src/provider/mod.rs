//! The store controllers (Provider, ClusterProvider, SecretStore, ClusterSecretStore): check the
//! provider process, report Ready and capabilities, and check again on an interval and when the
//! store, its configuration object (Provider and ClusterProvider) or the TLS Secret changes. A
//! SecretStore or ClusterSecretStore carries its configuration inline; one whose provider
//! Keyward does not serve is reported `Ready=False` with the reason, without a call.

pub mod check;
pub mod refs;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use keyward_crds::rules::store_refresh_interval;
use keyward_crds::{ClusterProvider, ClusterSecretStore, Provider, SecretStore};
use kube::runtime::controller::{Action, Config as ControllerConfig, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Resource, ResourceExt};
use serde_json::json;

use crate::caches::{self, Cached, Caches, Change, Watched};
use crate::class::of_class;
use crate::context::Context;
use keyward_provider_client::{StoreObject, resolve_for_check};
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
    reconcile_store(&ctx, api, p.as_ref(), p.status.clone().unwrap_or_default(), store, &ns, None).await
}

async fn reconcile_cluster(p: Arc<ClusterProvider>, ctx: Arc<Context>) -> Result<Action, Error> {
    let api: Api<ClusterProvider> = Api::all(ctx.client.clone());
    let store = StoreObject::ClusterProvider(p.clone());
    reconcile_store(&ctx, api, p.as_ref(), p.status.clone().unwrap_or_default(), store, "", None).await
}

async fn reconcile_secret_store(s: Arc<SecretStore>, ctx: Arc<Context>) -> Result<Action, Error> {
    let ns = s.namespace().unwrap_or_default();
    let api: Api<SecretStore> = Api::namespaced(ctx.client.clone(), &ns);
    let store = StoreObject::SecretStore(s.clone());
    let interval = store_refresh_interval(&s.spec).ok().flatten();
    reconcile_store(&ctx, api, s.as_ref(), s.status.clone().unwrap_or_default(), store, &ns, interval).await
}

async fn reconcile_cluster_secret_store(s: Arc<ClusterSecretStore>, ctx: Arc<Context>) -> Result<Action, Error> {
    let api: Api<ClusterSecretStore> = Api::all(ctx.client.clone());
    let store = StoreObject::ClusterSecretStore(s.clone());
    let interval = store_refresh_interval(&s.spec.store).ok().flatten();
    reconcile_store(&ctx, api, s.as_ref(), s.status.clone().unwrap_or_default(), store, "", interval).await
}

/// Checks one store, writes its status when it changed, reports it; `interval` is the store's
/// own check interval (a SecretStore's `spec.refreshInterval`), else the reconciler's.
async fn reconcile_store<K>(
    ctx: &Context,
    api: Api<K>,
    object: &K,
    previous: keyward_crds::ProviderStatus,
    store: StoreObject,
    ns: &str,
    interval: Option<std::time::Duration>,
) -> Result<Action, Error>
where
    K: Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let started = std::time::Instant::now();
    let interval = interval.unwrap_or(ctx.settings.provider_check_interval);
    let checked = check::check(ctx, &store, &previous, object.meta().generation, interval).await;
    ctx.metrics.set_provider_condition(&K::kind(&()), &object.name_any(), ns, checked.ready);
    if let Some(series) = ctx.metrics.store_series(&K::kind(&())) {
        series.set_ready(ns, &object.name_any(), checked.ready);
        series.set_duration(ns, &object.name_any(), started.elapsed());
    }
    if checked.status != previous {
        api.patch_status(
            &object.name_any(),
            &Default::default(),
            &kube::api::Patch::Merge(json!({"status": checked.status})),
        )
        .await?;
    }
    report(ctx, &object.object_ref(&()), &previous, &checked).await;
    if !checked.ready {
        // A store that does not answer is a failed check, as upstream's store controllers count it.
        crate::controller_metrics::failed();
    }
    Ok(next(interval, checked.ready))
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

fn next(interval: std::time::Duration, ready: bool) -> Action {
    // A provider that did not answer is retried sooner, so it turns Ready soon after it is up.
    Action::requeue(if ready { interval } else { interval.min(std::time::Duration::from_secs(10)) })
}

fn error_policy<K: Store>(obj: Arc<K>, error: &Error, ctx: Arc<Context>) -> Action {
    tracing::warn!(name = %obj.name_any(), %error, "provider reconcile failed");
    let action = Action::requeue(std::time::Duration::from_secs(5));
    let ns = obj.namespace().unwrap_or_default();
    ctx.metrics.controllers.requeued(K::CONTROLLER, &ns, &obj.name_any(), &action);
    action
}

/// Which Providers (or ClusterProviders) reach their provider with the TLS Secret of a namespace,
/// so a change of one `keyward-provider-tls` Secret re-checks exactly those.
struct TlsIndex<K: Cached> {
    by_namespace: HashMap<String, HashSet<ObjectRef<K>>>,
    of_store: HashMap<ObjectRef<K>, String>,
}

impl<K: Cached> Default for TlsIndex<K> {
    fn default() -> Self {
        TlsIndex { by_namespace: HashMap::new(), of_store: HashMap::new() }
    }
}

impl<K: Cached> TlsIndex<K> {
    fn set(&mut self, store: ObjectRef<K>, tls_namespace: Option<String>) {
        if let Some(old) = self.of_store.remove(&store)
            && let Some(set) = self.by_namespace.get_mut(&old)
        {
            set.remove(&store);
            if set.is_empty() {
                self.by_namespace.remove(&old);
            }
        }
        if let Some(ns) = tls_namespace {
            self.by_namespace.entry(ns.clone()).or_default().insert(store.clone());
            self.of_store.insert(store, ns);
        }
    }

    fn in_namespace(&self, ns: &str) -> Vec<ObjectRef<K>> {
        self.by_namespace.get(ns).into_iter().flatten().cloned().collect()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Index updates are single calls; a poisoned lock still holds a consistent index.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The kind-specific parts of the store controllers.
trait Store: Cached {
    /// The controller's name in controller-runtime's metrics (the lowercase kind).
    const CONTROLLER: &'static str;
    fn store_object(self: Arc<Self>) -> StoreObject;
    /// The configuration object it names (none for a store with its configuration inline).
    fn provider_ref(&self) -> Option<&keyward_crds::ProviderRef>;
    fn own_namespace(&self) -> Option<String>;
}

impl Store for Provider {
    const CONTROLLER: &'static str = "provider";
    fn store_object(self: Arc<Self>) -> StoreObject {
        StoreObject::Provider(self)
    }
    fn provider_ref(&self) -> Option<&keyward_crds::ProviderRef> {
        Some(&self.spec.config.provider_ref)
    }
    fn own_namespace(&self) -> Option<String> {
        self.namespace()
    }
}

impl Store for ClusterProvider {
    const CONTROLLER: &'static str = "clusterprovider";
    fn store_object(self: Arc<Self>) -> StoreObject {
        StoreObject::ClusterProvider(self)
    }
    fn provider_ref(&self) -> Option<&keyward_crds::ProviderRef> {
        Some(&self.spec.config.provider_ref)
    }
    fn own_namespace(&self) -> Option<String> {
        // A ClusterProvider's omitted config namespace means "any manifest's namespace".
        None
    }
}

impl Store for SecretStore {
    const CONTROLLER: &'static str = "secretstore";
    fn store_object(self: Arc<Self>) -> StoreObject {
        StoreObject::SecretStore(self)
    }
    fn provider_ref(&self) -> Option<&keyward_crds::ProviderRef> {
        None
    }
    fn own_namespace(&self) -> Option<String> {
        self.namespace()
    }
}

impl Store for ClusterSecretStore {
    const CONTROLLER: &'static str = "clustersecretstore";
    fn store_object(self: Arc<Self>) -> StoreObject {
        StoreObject::ClusterSecretStore(self)
    }
    fn provider_ref(&self) -> Option<&keyward_crds::ProviderRef> {
        None
    }
    fn own_namespace(&self) -> Option<String> {
        None
    }
}

/// Registers the triggers of one store kind on the caches: its own changes (not its status
/// writes), its TLS Secret (through the index), and its config object.
fn follow<K: Store>(
    watched: &mut Watched<K>,
    tls: &mut Watched<Secret>,
    configs: Option<&mut caches::configs::ConfigWatches>,
    ctx: Arc<Context>,
    class: Option<String>,
) -> impl futures::Stream<Item = ObjectRef<K>> + Send + use<K> {
    let (trigger, triggers) = caches::triggers::<K>();
    let index: Arc<Mutex<TlsIndex<K>>> = Arc::default();
    {
        let (trigger, index, class) = (trigger.clone(), index.clone(), class.clone());
        let mut seen: HashMap<ObjectRef<K>, u64> = HashMap::new();
        watched.hook(move |change| match change {
            Change::Applied(p) => {
                let key = caches::key(p);
                // Stores of another controller class (or, for a SecretStore or ClusterSecretStore,
                // naming another controller in spec.controller) are cached (manifests may use
                // them) but never checked here: no trigger of any kind.
                if !of_class(p, class.as_deref()) || !Arc::new(p.clone()).store_object().served_by(class.as_deref()) {
                    seen.remove(&key);
                    lock(&index).set(key, None);
                    return;
                }
                let tls_ns = resolve_for_check(&Arc::new(p.clone()).store_object(), ctx.manager.store_providers())
                    .ok()
                    .map(|r| r.tls_namespace);
                lock(&index).set(key.clone(), tls_ns);
                let hash = crate::predicate::spec_change(p).unwrap_or_default();
                if seen.insert(key, hash) != Some(hash) {
                    trigger.send(ObjectRef::from_obj(p));
                }
            }
            Change::Gone(p) => {
                let key = caches::key(p);
                seen.remove(&key);
                lock(&index).set(key, None);
                let store = Arc::new(p.clone()).store_object();
                ctx.manager.forget_store(store.kind(), &store.name());
                ctx.metrics.forget_provider(&K::kind(&()), &p.name_any(), &p.namespace().unwrap_or_default());
            }
        });
    }
    {
        let (trigger, index) = (trigger.clone(), index);
        tls.hook(move |change| {
            let secret = match change {
                Change::Applied(s) | Change::Gone(s) => s,
            };
            for r in lock(&index).in_namespace(&secret.namespace().unwrap_or_default()) {
                trigger.send(r);
            }
        });
    }
    let stores = watched.store();
    if let Some(config) = configs {
        let (trigger, stores, class) = (trigger.clone(), stores.clone(), class.clone());
        config.hook(move |obj: ConfigObject<'_>| {
            for p in stores.state() {
                if of_class(p.as_ref(), class.as_deref())
                    && p.provider_ref().is_some_and(|r| references(r, p.own_namespace().as_deref(), obj))
                {
                    trigger.send(ObjectRef::from_obj(p.as_ref()));
                }
            }
        });
    }
    triggers
}

/// Checks each store controller runs at once.
const CONCURRENCY: u16 = 8;

/// One store controller, on the shared caches.
fn run_controller<K, F, Fut>(
    store: kube::runtime::reflector::Store<K>,
    triggers: impl futures::Stream<Item = ObjectRef<K>> + Send + 'static,
    reconcile: F,
    ctx: Arc<Context>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) -> impl std::future::Future<Output = ()> + Send + 'static
where
    K: Store,
    F: FnMut(Arc<K>, Arc<Context>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<Action, Error>> + Send + 'static,
{
    let cache = store.clone();
    let mut reconcile = reconcile;
    let metrics = ctx.metrics.controllers.controller(K::CONTROLLER, CONCURRENCY);
    let observed = metrics.clone();
    // A store deleted while its check ran (its namespace going away, say) has had its series
    // dropped by the cache's hook already; what the check then recorded is dropped again, or it
    // would name the deleted store for the life of the process.
    let reconcile = move |obj: Arc<K>, ctx: Arc<Context>| {
        let (cache, checked) = (cache.clone(), reconcile(obj.clone(), ctx.clone()));
        let metrics = observed.clone();
        async move {
            let ns = obj.namespace();
            let result = metrics.observe(ns.as_deref(), &obj.name_any(), checked).await;
            if cache.get(&caches::key(obj.as_ref())).is_none() {
                ctx.metrics.forget_provider(&K::kind(&()), &obj.name_any(), &obj.namespace().unwrap_or_default());
            }
            result
        }
    };
    Controller::for_shared_stream(futures::stream::pending(), store)
        .reconcile_on(metrics.queued(triggers))
        .with_config(ControllerConfig::default().concurrency(CONCURRENCY))
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(|_| async {})
}

/// Registers the store controllers on the shared caches and returns them; they run until
/// `shutdown` resolves. A SecretStore or ClusterSecretStore controller switched off
/// (`--process-secret-store`, `--process-cluster-store`) registers nothing and checks nothing.
pub fn controllers(
    caches: &mut Caches,
    ctx: Arc<Context>,
    class: Option<String>,
    switches: crate::cli::Controllers,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + Clone + 'static,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    // Providers and ClusterProviders name a configuration object; stores carry theirs inline.
    let p_triggers = follow(
        &mut caches.providers,
        &mut caches.tls_secrets,
        Some(&mut caches.provider_configs),
        ctx.clone(),
        class.clone(),
    );
    let c_triggers = follow(
        &mut caches.cluster_providers,
        &mut caches.tls_secrets,
        Some(&mut caches.provider_configs),
        ctx.clone(),
        class.clone(),
    );
    let providers =
        run_controller(caches.providers.store(), p_triggers, reconcile_provider, ctx.clone(), shutdown.clone());
    let clusters =
        run_controller(caches.cluster_providers.store(), c_triggers, reconcile_cluster, ctx.clone(), shutdown.clone());
    let secret_stores = switches.process_secret_store.then(|| {
        let triggers = follow(&mut caches.secret_stores, &mut caches.tls_secrets, None, ctx.clone(), class.clone());
        run_controller(caches.secret_stores.store(), triggers, reconcile_secret_store, ctx.clone(), shutdown.clone())
    });
    let cluster_secret_stores = switches.process_cluster_store.then(|| {
        let triggers = follow(&mut caches.cluster_secret_stores, &mut caches.tls_secrets, None, ctx.clone(), class);
        let store = caches.cluster_secret_stores.store();
        run_controller(store, triggers, reconcile_cluster_secret_store, ctx, shutdown)
    });
    async move {
        futures::join!(
            providers,
            clusters,
            futures::future::OptionFuture::from(secret_stores),
            futures::future::OptionFuture::from(cluster_secret_stores)
        );
    }
}

#[cfg(test)]
mod api_tests;
