//! What the ClusterExternalSecret and ClusterPushSecret controllers share: a cluster-scoped
//! object that keeps one namespaced object (its child: an ExternalSecret, a PushSecret) in
//! every namespace it selects, and none where it no longer does ([`FanOut`] says what differs).
//!
//! A controller reads the shared caches only (its own kind, the children, Namespaces,
//! ClusterProviders, ClusterSecretStores); children are found again through the owner they name
//! (`FanOut::owner_of`), indexed here as the child cache changes. It is triggered when the
//! owner's spec changes, when a namespace is created, relabelled, starts terminating or is gone,
//! and when one of its children is edited or deleted; `refreshTime` is the timer for everything
//! else.

pub mod index;
pub mod reconcile;

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt::Debug;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope};
use keyward_crds::cluster_external_secret::ClusterExternalSecretNamespaceFailure;
use keyward_crds::rules::{NamespaceDenied, NamespaceView, ValidationErrors};
use keyward_crds::{ClusterProvider, ClusterProviderCondition, ClusterSecretStore, Condition, StoreKind};
use kube::ResourceExt;
use kube::core::PartialObjectMeta;
use kube::runtime::controller::{Action, Config as ControllerConfig, Controller};
use kube::runtime::reflector::{Lookup, ObjectRef, Store};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::caches::{self, Caches, Change, Trigger, Watched};
use crate::context::{Context, ObjectKey};
use crate::metrics::Metrics;
use crate::object_metrics::ObjectSeries;
use index::{Applied, OwnedIndex};

/// The namespace conditions of a cluster-scoped store by kind and name, when it is known.
pub type StoreConditions<'a> = &'a dyn Fn(StoreKind, &str) -> Option<Cow<'static, [ClusterProviderCondition]>>;

/// What the owners and their children both are: API objects the caches hold and the
/// controller reads, writes and sends between tasks.
pub trait Object:
    kube::Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Serialize + Send + Sync + 'static
{
}
impl<K: kube::Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Serialize + Send + Sync + 'static> Object
    for K
{
}

/// A cluster-scoped kind that keeps one child in every namespace it selects.
pub trait FanOut: Object + kube::Resource<Scope = ClusterResourceScope> {
    /// The namespaced kind it writes.
    type Child: Object + kube::Resource<Scope = NamespaceResourceScope>;
    /// What the child cache stores (the child itself, or a packed form of it).
    type Stored: Lookup<DynamicType = ()> + Clone + Send + Sync + 'static;

    /// Its kind (object keys, owner references, messages).
    const KIND: &'static str;
    /// Its controller's name in controller-runtime's metrics.
    const CONTROLLER: &'static str;
    /// Field manager of the children it writes.
    const FIELD_MANAGER: &'static str;
    /// The spec field that names the children, and the status field that reports the name.
    const NAME_FIELD: &'static str;
    /// Finalizer that holds it until its children are deleted; `None`: Kubernetes' garbage
    /// collector deletes them through their controller reference, as upstream's does for this
    /// kind.
    const FINALIZER: Option<&'static str>;
    /// The `Ready` reason when every selected namespace holds the current child.
    const PROVISIONED: &'static str;

    /// Name of the children.
    fn child_name(&self) -> String;
    /// Whether it selects namespace `ns`.
    fn selects(&self, ns: NamespaceView<'_>) -> bool;
    /// Its spec rules (the webhook's).
    fn validate(&self) -> Result<(), ValidationErrors>;
    /// A store of the child spec that does not admit namespace `ns`, if any.
    fn refused(&self, ns: NamespaceView<'_>, conditions: StoreConditions<'_>) -> Option<NamespaceDenied>;
    /// The child manifest without its namespace: labels, annotations, spec (the controller
    /// reference is added by [`reconcile`]).
    fn desired(&self, child_name: &str) -> Value;
    /// `spec.refreshTime` as written, or its default.
    fn refresh_time(&self) -> &str;
    /// The owner a child names (what the index keys it by), if any.
    fn owner_of(child: &Self::Child) -> Option<String>;
    /// The cached child `r`.
    fn cached(store: &Store<Self::Stored>, r: &ObjectRef<Self::Child>) -> Option<Self::Child>;
    /// Its status, in the shape every such kind reports.
    fn status(&self) -> FanStatus;
    /// Its metric series (`<kind>_status_condition`, `<kind>_reconcile_duration`).
    fn series(metrics: &Metrics) -> &ObjectSeries;
    /// The watches its controller registers on: its own kind, its children, Namespaces.
    fn watched(caches: &mut Caches) -> Watches<'_, Self>;
}

/// [`FanOut::watched`]: its own kind, its children and Namespaces, borrowed from the caches.
pub type Watches<'a, P> = (
    &'a mut Watched<P>,
    &'a mut Watched<<P as FanOut>::Child, <P as FanOut>::Stored>,
    &'a mut Watched<PartialObjectMeta<Namespace>>,
);

/// The status of a [`FanOut`] kind: the same four fields, the name under `NAME_FIELD`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FanStatus {
    /// Name of the children.
    pub child_name: Option<String>,
    /// Selected namespaces not written, and why.
    pub failed_namespaces: Vec<ClusterExternalSecretNamespaceFailure>,
    /// Namespaces holding the current child, sorted.
    pub provisioned_namespaces: Vec<String>,
    /// The `Ready` condition.
    pub conditions: Vec<Condition>,
}

/// What the reconciles of one such controller share.
pub struct FanContext<P: FanOut> {
    /// Client, events and error backoff.
    pub ctx: Arc<Context>,
    /// The children, of every namespace.
    pub children: Store<P::Stored>,
    /// Namespaces, metadata only.
    pub namespaces: Store<PartialObjectMeta<Namespace>>,
    /// ClusterProviders (their namespace conditions).
    pub cluster_providers: Store<ClusterProvider>,
    /// ClusterSecretStores (their namespace conditions).
    pub cluster_secret_stores: Store<ClusterSecretStore>,
    /// The owners themselves (whether one is gone).
    pub owners: Store<P>,
    owned: Mutex<OwnedIndex<P::Child>>,
    applied: Mutex<HashMap<ObjectRef<P::Child>, Applied>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Updates are single calls; a poisoned lock still holds a consistent map.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<P: FanOut> FanContext<P> {
    /// A context over these stores, with an empty index.
    pub fn new(
        ctx: Arc<Context>,
        children: Store<P::Stored>,
        namespaces: Store<PartialObjectMeta<Namespace>>,
        cluster_providers: Store<ClusterProvider>,
        cluster_secret_stores: Store<ClusterSecretStore>,
        owners: Store<P>,
    ) -> Self {
        FanContext {
            ctx,
            children,
            namespaces,
            cluster_providers,
            cluster_secret_stores,
            owners,
            owned: Mutex::default(),
            applied: Mutex::default(),
        }
    }

    /// The key of owner `name` (its failures, its series).
    pub fn key(name: &str) -> ObjectKey {
        ObjectKey::new(P::KIND, "", name)
    }

    /// Forgets `name`'s state and series again when it has left the cache: a deletion seen
    /// while its reconcile ran dropped them already, and what the reconcile recorded after that
    /// would otherwise stay for the life of the process.
    pub fn forget_if_gone(&self, name: &str) {
        self.ctx.forget_if_gone(&Self::key(name), &self.owners);
    }

    /// The cached child `child`.
    pub fn child(&self, child: &ObjectRef<P::Child>) -> Option<Arc<P::Child>> {
        P::cached(&self.children, child).map(Arc::new)
    }

    /// The children of owner `name`.
    pub fn owned_by(&self, name: &str) -> Vec<ObjectRef<P::Child>> {
        lock(&self.owned).of(name)
    }

    /// Indexes `child` under the owner it names; returns the owner it had.
    pub fn index(&self, child: ObjectRef<P::Child>, owner: Option<String>) -> Option<String> {
        lock(&self.owned).set(child, owner)
    }

    /// What this process last applied to `child`, if anything.
    pub fn last_applied(&self, child: &ObjectRef<P::Child>) -> Option<Applied> {
        lock(&self.applied).get(child).cloned()
    }

    /// Remembers what was applied to `child`.
    pub fn record_applied(&self, child: ObjectRef<P::Child>, applied: Applied) {
        lock(&self.applied).insert(child, applied);
    }
}

/// Reconciles run at once.
const CONCURRENCY: u16 = 4;

fn error_policy<P: FanOut>(owner: Arc<P>, error: &reconcile::Error, cx: Arc<FanContext<P>>) -> Action {
    let name = owner.name_any();
    let key = FanContext::<P>::key(&name);
    tracing::warn!(object = %key, %error, "reconcile failed");
    let action = Action::requeue(cx.ctx.failure_delay(&key));
    cx.ctx.metrics.controllers.requeued(P::CONTROLLER, "", &name, &action);
    cx.forget_if_gone(&name);
    action
}

/// Whether the state of a namespace that selection depends on changed: its labels, whether it
/// is terminating, whether it exists.
pub fn namespace_state(ns: &PartialObjectMeta<Namespace>) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    ns.labels().hash(&mut h);
    ns.metadata.deletion_timestamp.is_some().hash(&mut h);
    h.finish()
}

/// Registers the controller of `P` on the shared caches and returns it; it runs until
/// `shutdown` resolves. Only for an instance that watches every namespace (see `run.rs`).
pub fn controller<P: FanOut>(
    caches: &mut Caches,
    ctx: Arc<Context>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    let (cluster_providers, cluster_secret_stores) =
        (caches.cluster_providers.store(), caches.cluster_secret_stores.store());
    let (owners, children, namespaces) = P::watched(caches);
    let store = owners.store();
    let cx = Arc::new(FanContext::<P>::new(
        ctx.clone(),
        children.store(),
        namespaces.store(),
        cluster_providers,
        cluster_secret_stores,
        store.clone(),
    ));
    let (trigger, triggers) = caches::triggers::<P>();

    {
        let (trigger, ctx) = (trigger.clone(), ctx.clone());
        let mut seen: HashMap<String, u64> = HashMap::new();
        owners.hook(move |change| match change {
            Change::Applied(owner) => {
                let hash = crate::predicate::spec_change(owner).unwrap_or_default();
                if seen.insert(owner.name_any(), hash) != Some(hash) {
                    trigger.send(ObjectRef::from_obj(owner));
                }
            }
            Change::Gone(owner) => {
                seen.remove(&owner.name_any());
                ctx.forget(&FanContext::<P>::key(&owner.name_any()));
            }
        });
    }
    child_hook(children, cx.clone(), store.clone(), trigger.clone());
    namespace_hook(namespaces, cx.clone(), store.clone(), trigger);

    let metrics = ctx.metrics.controllers.controller(P::CONTROLLER, CONCURRENCY);
    Controller::for_shared_stream(futures::stream::pending(), store)
        .reconcile_on(metrics.queued(triggers))
        .with_config(ControllerConfig::default().concurrency(CONCURRENCY))
        .graceful_shutdown_on(shutdown)
        .run(
            move |owner, cx| {
                let metrics = metrics.clone();
                async move {
                    let name = owner.name_any();
                    metrics.observe(None, &name, reconcile::reconcile(owner, cx)).await
                }
            },
            error_policy,
            cx,
        )
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(kind = P::KIND, error = %e, "controller event");
            }
        })
}

/// Keeps the owner index current, and reconciles an owner when one of its children is edited
/// (its generation, labels or annotations change) or gone, and when a child of the name it
/// writes disappears (a namespace it could not write may be free now).
fn child_hook<P: FanOut>(
    children: &mut Watched<P::Child, P::Stored>,
    cx: Arc<FanContext<P>>,
    owners: Store<P>,
    trigger: Trigger<P>,
) {
    let mut seen: HashMap<ObjectRef<P::Child>, u64> = HashMap::new();
    children.hook(move |change| match change {
        Change::Applied(child) => {
            let key = caches::key(child);
            let owner = P::owner_of(child);
            let before = cx.index(key.clone(), owner.clone());
            if let Some(before) = before.filter(|b| Some(b) != owner.as_ref()) {
                trigger.send(ObjectRef::new(&before));
            }
            match owner {
                Some(owner) => {
                    let hash = crate::predicate::spec_change(child).unwrap_or_default();
                    if seen.insert(key, hash) != Some(hash) {
                        trigger.send(ObjectRef::new(&owner));
                    }
                }
                None => {
                    seen.remove(&key);
                }
            }
        }
        Change::Gone(child) => {
            let key = caches::key(child);
            seen.remove(&key);
            lock(&cx.applied).remove(&key);
            if let Some(owner) = cx.index(key, None) {
                trigger.send(ObjectRef::new(&owner));
            }
            let name = child.name_any();
            for owner in owners.state().iter().filter(|o| o.child_name() == name) {
                trigger.send(ObjectRef::from_obj(owner.as_ref()));
            }
        }
    });
}

/// Reconciles the owners a namespace change concerns: those that select it now, and those with
/// a child in it.
fn namespace_hook<P: FanOut>(
    namespaces: &mut Watched<PartialObjectMeta<Namespace>>,
    cx: Arc<FanContext<P>>,
    owners: Store<P>,
    trigger: Trigger<P>,
) {
    let mut seen: HashMap<String, u64> = HashMap::new();
    namespaces.hook(move |change| {
        let (ns, state) = match change {
            Change::Applied(ns) => (ns, Some(namespace_state(ns))),
            Change::Gone(ns) => (ns, None),
        };
        let name = ns.name_any();
        let changed = match state {
            Some(h) => seen.insert(name.clone(), h) != Some(h),
            None => seen.remove(&name).is_some(),
        };
        if !changed {
            return;
        }
        let view = NamespaceView { name: &name, labels: ns.labels() };
        let with_children = lock(&cx.owned).owners_in(&name);
        for owner in owners.state() {
            if with_children.contains(&owner.name_any()) || owner.selects(view) {
                trigger.send(ObjectRef::from_obj(owner.as_ref()));
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_state_follows_labels_and_termination_only() {
        let mut ns = PartialObjectMeta::<Namespace>::default();
        ns.metadata.name = Some("a".into());
        let base = namespace_state(&ns);
        ns.metadata.resource_version = Some("7".into());
        ns.metadata.annotations = Some([("x".to_string(), "y".to_string())].into());
        assert_eq!(namespace_state(&ns), base);
        ns.metadata.labels = Some([("team".to_string(), "a".to_string())].into());
        let labelled = namespace_state(&ns);
        assert_ne!(labelled, base);
        ns.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now()));
        assert_ne!(namespace_state(&ns), labelled);
    }
}
