//! The reconciler's caches, built once (in `run.rs`) and shared by every controller.
//!
//! One watch per kind. Each object is stripped of what no controller reads before it is stored
//! (`strip.rs`), so 10,000 ExternalSecrets cost their spec and status and nothing else. After
//! the store is updated, hooks keep indexes and per-object state in step with it and turn
//! changes into reconcile triggers: a hook is told about every object applied and every object
//! gone, whether deleted or missing from a re-list after a watch outage, so nothing keyed by
//! object outlives the object.

pub mod codec;
pub mod configs;
pub mod packed;
pub mod strip;

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt::Debug;
use std::sync::Arc;

use futures::StreamExt;
use futures::channel::mpsc;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use keyward_crds::workload::{MANAGED_LABEL, RELOAD_LABEL};
use keyward_crds::{
    ClusterExternalSecret, ClusterProvider, ClusterPushSecret, ClusterSecretStore, ExternalSecret, Provider,
    PushSecret, SecretStore,
};
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::store::Writer;
use kube::runtime::reflector::{self, Lookup, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;

use keyward_provider_client::TLS_SECRET_NAME;
pub use packed::{ManagedSecret, Packed};

/// What a hook is told, after the store was updated.
pub enum Change<'a, K: Lookup> {
    /// The object was created or changed (or listed again after a re-list).
    Applied(&'a K),
    /// The object is gone: deleted, or absent from a re-list (its last known state).
    Gone(&'a K),
}

// By hand: a derive would ask `K: Copy`, and a change is only a reference.
impl<K: Lookup> Clone for Change<'_, K> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<K: Lookup> Copy for Change<'_, K> {}

type Hook<K> = Box<dyn FnMut(Change<'_, K>) + Send>;

/// A kind the caches can hold.
pub trait Cached: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static {}
impl<K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static> Cached for K {}

/// One watched kind before its watch starts: the store readers use, and the hooks. The store
/// holds `S`: the object itself, or a compact form of it ([`packed`]) for the kinds there are as
/// many of as ExternalSecrets; hooks always see the whole (stripped) object.
pub struct Watched<K: Cached, S: Lookup<DynamicType = ()> + Clone + 'static = K> {
    store: Store<S>,
    writer: Writer<S>,
    hooks: Vec<Hook<K>>,
    pack: fn(&K) -> S,
    unpack: for<'a> fn(&'a S) -> Option<Cow<'a, K>>,
}

impl<K: Cached> Default for Watched<K> {
    fn default() -> Self {
        let (store, writer) = reflector::store();
        Watched { store, writer, hooks: Vec::new(), pack: K::clone, unpack: |obj| Some(Cow::Borrowed(obj)) }
    }
}

impl<K: Cached + serde::Serialize> Default for Watched<K, Packed<K>> {
    fn default() -> Self {
        let (store, writer) = reflector::store();
        let unpack = |p: &Packed<K>| match p.unpack() {
            Ok(obj) => Some(Cow::Owned(obj)),
            Err(e) => {
                tracing::error!(error = %e, "skipping a cached object");
                None
            }
        };
        Watched { store, writer, hooks: Vec::new(), pack: Packed::pack, unpack }
    }
}

impl Default for Watched<PartialObjectMeta<Secret>, ManagedSecret> {
    fn default() -> Self {
        let (store, writer) = reflector::store();
        Watched {
            store,
            writer,
            hooks: Vec::new(),
            pack: ManagedSecret::pack,
            unpack: |m| Some(Cow::Owned(m.unpack())),
        }
    }
}

impl<K: Cached, S: Lookup<DynamicType = ()> + Clone + Send + Sync + 'static> Watched<K, S> {
    /// The store (filled once the watch runs).
    pub fn store(&self) -> Store<S> {
        self.store.clone()
    }

    /// Runs `hook` for every change, after the store holds it.
    pub fn hook(&mut self, hook: impl FnMut(Change<'_, K>) + Send + 'static) {
        self.hooks.push(Box::new(hook));
    }

    /// Starts the watch: `strip` runs on every object before it is stored.
    /// An `Api<PartialObjectMeta<_>>` makes it a metadata-only watch.
    pub fn start(self, api: Api<K>, config: watcher::Config, strip: fn(&mut K)) -> tokio::task::JoinHandle<()> {
        let Watched { store, mut writer, mut hooks, pack, unpack } = self;
        let stream = watcher(api, config).default_backoff().modify(strip);
        tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            let mut relisting: Option<HashSet<ObjectRef<S>>> = None;
            while let Some(event) = stream.next().await {
                let event = match event {
                    Ok(e) => e,
                    Err(e) => {
                        tracing::warn!(kind = %K::kind(&()), error = %e, "watch failed; retrying");
                        continue;
                    }
                };
                // Objects of a re-list reach the store only when it completes; so do their hooks.
                // The re-list set keys by namespace and name only: it holds every object at once.
                let (mut applied, mut gone): (Vec<ObjectRef<S>>, Vec<Arc<S>>) = (Vec::new(), Vec::new());
                let stored = match event {
                    watcher::Event::Init => {
                        relisting = Some(HashSet::new());
                        watcher::Event::Init
                    }
                    watcher::Event::InitApply(ref obj) => {
                        let obj = pack(obj);
                        relisting.get_or_insert_default().insert(key(&obj));
                        watcher::Event::InitApply(obj)
                    }
                    watcher::Event::InitDone => {
                        let listed = relisting.take().unwrap_or_default();
                        gone = store.state().into_iter().filter(|o| !listed.contains(&key(o.as_ref()))).collect();
                        applied = listed.into_iter().collect();
                        watcher::Event::InitDone
                    }
                    watcher::Event::Delete(ref obj) => watcher::Event::Delete(pack(obj)),
                    watcher::Event::Apply(ref obj) => watcher::Event::Apply(pack(obj)),
                };
                writer.apply_watcher_event(&stored);
                drop(stored);
                if hooks.is_empty() {
                    continue;
                }
                // Hooks see the whole object: the event's own, or the stored one decoded, one at
                // a time (a re-list of 10,000 packed objects is never decoded all at once).
                let mut run = |change: Change<'_, K>| {
                    for hook in hooks.iter_mut() {
                        hook(change);
                    }
                };
                match &event {
                    watcher::Event::Apply(obj) => run(Change::Applied(obj)),
                    watcher::Event::Delete(obj) => run(Change::Gone(obj)),
                    _ => {}
                }
                for stored in applied.iter().filter_map(|r| store.get(r)) {
                    if let Some(obj) = unpack(&stored) {
                        run(Change::Applied(&obj));
                    }
                }
                for stored in &gone {
                    if let Some(obj) = unpack(stored) {
                        run(Change::Gone(&obj));
                    }
                }
            }
        })
    }
}

/// A reference to `obj` by namespace and name only (without the version and uid that
/// [`ObjectRef::from_obj`] copies), for keys kept between events.
pub fn key<K: Lookup<DynamicType = ()>>(obj: &K) -> ObjectRef<K> {
    let bare = ObjectRef::new(&obj.name().unwrap_or_default());
    match obj.namespace() {
        Some(ns) => bare.within(&ns),
        None => bare,
    }
}

/// Reconcile triggers for a controller of `K`: hooks send, the controller receives.
pub fn triggers<K: Cached>() -> (Trigger<K>, mpsc::UnboundedReceiver<ObjectRef<K>>) {
    let (tx, rx) = mpsc::unbounded();
    (Trigger(tx), rx)
}

/// The sending side of [`triggers`].
pub struct Trigger<K: Cached>(mpsc::UnboundedSender<ObjectRef<K>>);

impl<K: Cached> Clone for Trigger<K> {
    fn clone(&self) -> Self {
        Trigger(self.0.clone())
    }
}

impl<K: Cached> Trigger<K> {
    /// Asks for a reconcile of `r`.
    pub fn send(&self, r: ObjectRef<K>) {
        // A stopped controller no longer listens; nothing to do then.
        let _ = self.0.unbounded_send(r);
    }
}

/// Every cache of the reconciler. Built once in `run.rs`; controllers register their hooks and
/// triggers on it, then [`Caches::start`] runs one watch per kind.
#[derive(Default)]
pub struct Caches {
    /// ExternalSecrets in scope, of every controller class: the reload rule hashes every
    /// managed Secret a workload uses, as the webhook does. Kept packed.
    pub external_secrets: Watched<ExternalSecret, Packed<ExternalSecret>>,
    /// ClusterExternalSecrets of this controller class; watched only by an instance that
    /// watches every namespace.
    pub cluster_external_secrets: Watched<ClusterExternalSecret>,
    /// ClusterPushSecrets of this controller class; likewise only with every namespace watched.
    pub cluster_push_secrets: Watched<ClusterPushSecret>,
    /// PushSecrets of this controller class.
    pub push_secrets: Watched<PushSecret>,
    /// Providers in scope, of every class (an ExternalSecret may use any).
    pub providers: Watched<Provider>,
    /// ClusterProviders, of every class.
    pub cluster_providers: Watched<ClusterProvider>,
    /// SecretStores in scope, of every class (an ExternalSecret may use any).
    pub secret_stores: Watched<SecretStore>,
    /// ClusterSecretStores, of every class.
    pub cluster_secret_stores: Watched<ClusterSecretStore>,
    /// Secrets carrying the managed label, metadata only, kept as [`ManagedSecret`].
    pub managed_secrets: Watched<PartialObjectMeta<Secret>, ManagedSecret>,
    /// The provider TLS Secrets (`keyward-provider-tls`, selected by name), in every namespace.
    pub tls_secrets: Watched<Secret>,
    /// Namespaces, metadata only (ClusterProvider conditions read their labels).
    pub namespaces: Watched<PartialObjectMeta<Namespace>>,
    /// Provider configuration objects of every registered kind, metadata only.
    pub provider_configs: configs::ConfigWatches,
    /// Deployments, stripped to what the reload rule reads.
    pub deployments: Watched<Deployment>,
    /// StatefulSets, likewise.
    pub stateful_sets: Watched<StatefulSet>,
    /// DaemonSets, likewise.
    pub daemon_sets: Watched<DaemonSet>,
}

/// What the caches watch.
#[derive(Clone)]
pub struct Scope {
    /// The API client.
    pub client: Client,
    /// Namespace the instance is limited to, if any.
    pub namespace: Option<String>,
    /// Watch configuration of the kinds only this instance's controller class uses.
    pub class: watcher::Config,
    /// Whether workloads are watched (rollouts on rotation), those labelled
    /// `keyward.dev/reload=true` only.
    pub workloads: bool,
    /// Whether PushSecrets are watched: their controller runs, or the ClusterPushSecret
    /// controller's children are read.
    pub push_secrets: bool,
    /// Whether ClusterExternalSecrets are watched (with every namespace watched only).
    pub cluster_external_secrets: bool,
    /// Whether ClusterPushSecrets are watched (with every namespace watched only).
    pub cluster_push_secrets: bool,
}

impl Scope {
    fn api<K: Cached + Resource<Scope = NamespaceResourceScope>>(&self) -> Api<K> {
        match &self.namespace {
            Some(ns) => Api::namespaced(self.client.clone(), ns),
            None => Api::all(self.client.clone()),
        }
    }

    fn all<K: Cached>(&self) -> Api<K> {
        Api::all(self.client.clone())
    }
}

/// Waits until every cache listed once.
pub struct Ready(Vec<(&'static str, futures::future::BoxFuture<'static, bool>)>);

impl Ready {
    /// Resolves when every cache listed once (logging what it still waits for).
    pub async fn wait(self) {
        let pending: Vec<_> = self
            .0
            .into_iter()
            .map(|(kind, ready)| async move {
                if !ready.await {
                    tracing::warn!(kind, "cache stopped before it listed");
                }
            })
            .collect();
        futures::future::join_all(pending).await;
    }
}

fn ready<S: Lookup<DynamicType = ()> + Clone + Send + Sync + 'static>(
    kind: &'static str,
    store: Store<S>,
) -> (&'static str, futures::future::BoxFuture<'static, bool>) {
    (kind, Box::pin(async move { store.wait_until_ready().await.is_ok() }))
}

/// The running watches; dropping it stops them (a reconciler that stops leading stops
/// watching, and watches afresh when it leads again).
pub struct Running(Vec<tokio::task::JoinHandle<()>>);

impl Drop for Running {
    fn drop(&mut self) {
        for watch in &self.0 {
            watch.abort();
        }
    }
}

impl Caches {
    /// Starts one watch per kind; they run until the returned [`Running`] is dropped.
    pub fn start(self, scope: &Scope) -> (Ready, Running) {
        let all = watcher::Config::default();
        let managed = watcher::Config::default().labels(&format!("{MANAGED_LABEL}=true"));
        let tls = watcher::Config::default().fields(&format!("metadata.name={TLS_SECRET_NAME}"));
        let mut waits = vec![
            ready("ExternalSecret", self.external_secrets.store()),
            ready("Provider", self.providers.store()),
            ready("ClusterProvider", self.cluster_providers.store()),
            ready("SecretStore", self.secret_stores.store()),
            ready("ClusterSecretStore", self.cluster_secret_stores.store()),
            ready("managed Secret", self.managed_secrets.store()),
            ready("provider TLS Secret", self.tls_secrets.store()),
            ready("Namespace", self.namespaces.store()),
        ];
        let mut watches = vec![
            self.external_secrets.start(scope.api(), all.clone(), strip::object),
            self.providers.start(scope.api(), all.clone(), strip::object),
            self.cluster_providers.start(scope.all(), all.clone(), strip::object),
            self.secret_stores.start(scope.api(), all.clone(), strip::secret_store),
            self.cluster_secret_stores.start(scope.all(), all.clone(), strip::cluster_secret_store),
            self.managed_secrets.start(scope.api(), managed, strip::none),
            self.tls_secrets.start(scope.all(), tls, strip::tls_secret),
            self.namespaces.start(scope.all(), all, strip::namespace),
        ];
        // A kind switched off (`--process-*`) is not watched at all: no list, no memory.
        if scope.push_secrets {
            waits.push(ready("PushSecret", self.push_secrets.store()));
            watches.push(self.push_secrets.start(scope.api(), scope.class.clone(), strip::object));
        }
        if scope.workloads {
            // Only opted-in workloads: every other one stays out of memory and out of reach.
            let opted_in = watcher::Config::default().labels(&format!("{RELOAD_LABEL}=true"));
            waits.push(ready("Deployment", self.deployments.store()));
            waits.push(ready("StatefulSet", self.stateful_sets.store()));
            waits.push(ready("DaemonSet", self.daemon_sets.store()));
            watches.push(self.deployments.start(scope.api(), opted_in.clone(), crate::reload::workload::strip));
            watches.push(self.stateful_sets.start(scope.api(), opted_in.clone(), crate::reload::workload::strip));
            watches.push(self.daemon_sets.start(scope.api(), opted_in, crate::reload::workload::strip));
        }
        // Not waited for: they only re-check Providers when a configuration changes, and a kind
        // whose CRD is missing (CRDs installed apart from the chart) must not hold the rest up.
        watches.extend(self.provider_configs.start(&scope.client));
        if scope.namespace.is_none() && scope.cluster_external_secrets {
            waits.push(ready("ClusterExternalSecret", self.cluster_external_secrets.store()));
            watches.push(self.cluster_external_secrets.start(scope.all(), scope.class.clone(), strip::object));
        }
        if scope.namespace.is_none() && scope.cluster_push_secrets {
            // Not waited for: a cluster whose CRDs predate ClusterPushSecret keeps the rest
            // running (the watch logs the missing kind); its controller starts from what lists.
            watches.push(self.cluster_push_secrets.start(scope.all(), scope.class.clone(), strip::object));
        }
        (Ready(waits), Running(watches))
    }
}
