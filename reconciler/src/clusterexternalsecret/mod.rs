//! The ClusterExternalSecret controller: keeps one ExternalSecret in every namespace a
//! ClusterExternalSecret selects, and none where it no longer does.
//!
//! It reads the shared caches only (ClusterExternalSecrets, ExternalSecrets, Namespaces,
//! ClusterProviders, ClusterSecretStores); its ExternalSecrets are found again through their
//! `externalsecrets.external-secrets.io/cluster-external-secret-name` label, indexed here as the
//! ExternalSecret cache changes. It is triggered when a ClusterExternalSecret's spec changes,
//! when a namespace is created, relabelled, starts terminating or is gone, and when one of its
//! ExternalSecrets is edited or deleted; `refreshTime` is the timer for everything else.

pub mod index;
pub mod reconcile;

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use keyward_crds::cluster_external_secret::CLUSTER_EXTERNAL_SECRET_LABEL;
use keyward_crds::rules::{NamespaceView, selects_namespace};
use keyward_crds::{ClusterExternalSecret, ClusterProvider, ClusterSecretStore, ExternalSecret};
use kube::ResourceExt;
use kube::core::PartialObjectMeta;
use kube::runtime::controller::{Action, Config as ControllerConfig, Controller};
use kube::runtime::reflector::{ObjectRef, Store};

use crate::caches::{self, Caches, Change, Packed, Trigger};
use crate::context::{Context, ObjectKey};
use index::{Applied, OwnedIndex};

/// What the reconciles of this controller share.
pub struct CesContext {
    /// Client, events and error backoff.
    pub ctx: Arc<Context>,
    /// ExternalSecrets of every namespace.
    pub external_secrets: Store<Packed<ExternalSecret>>,
    /// Namespaces, metadata only.
    pub namespaces: Store<PartialObjectMeta<Namespace>>,
    /// ClusterProviders (their namespace conditions).
    pub cluster_providers: Store<ClusterProvider>,
    /// ClusterSecretStores (their namespace conditions).
    pub cluster_secret_stores: Store<ClusterSecretStore>,
    /// The ClusterExternalSecrets themselves (whether one is gone).
    pub cluster_external_secrets: Store<ClusterExternalSecret>,
    owned: Mutex<OwnedIndex>,
    applied: Mutex<HashMap<ObjectRef<ExternalSecret>, Applied>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Updates are single calls; a poisoned lock still holds a consistent map.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl CesContext {
    /// Forgets `name`'s state and series again when it has left the cache: a deletion seen
    /// while its reconcile ran dropped them already, and what the reconcile recorded after that
    /// would otherwise stay for the life of the process.
    pub fn forget_if_gone(&self, name: &str) {
        if self.cluster_external_secrets.get(&ObjectRef::new(name)).is_none() {
            self.ctx.forget(&ObjectKey::cluster_external_secret(name));
        }
    }

    /// The cached ExternalSecret `es`, decoded.
    pub fn external_secret(&self, es: &ObjectRef<ExternalSecret>) -> Option<Arc<ExternalSecret>> {
        crate::caches::packed::get(&self.external_secrets, es).map(Arc::new)
    }

    /// The ExternalSecrets labelled as belonging to ClusterExternalSecret `name`.
    pub fn labelled(&self, name: &str) -> Vec<ObjectRef<ExternalSecret>> {
        lock(&self.owned).of(name)
    }

    /// What this process last applied to `es`, if anything.
    pub fn last_applied(&self, es: &ObjectRef<ExternalSecret>) -> Option<Applied> {
        lock(&self.applied).get(es).cloned()
    }

    /// Remembers what was applied to `es`.
    pub fn record_applied(&self, es: ObjectRef<ExternalSecret>, applied: Applied) {
        lock(&self.applied).insert(es, applied);
    }
}

/// The controller's name in controller-runtime's metrics.
const CONTROLLER: &str = "clusterexternalsecret";

/// Reconciles run at once.
const CONCURRENCY: u16 = 4;

fn error_policy(ces: Arc<ClusterExternalSecret>, error: &reconcile::Error, cx: Arc<CesContext>) -> Action {
    let key = ObjectKey::cluster_external_secret(&ces.name_any());
    tracing::warn!(object = %key, %error, "reconcile failed");
    let action = Action::requeue(cx.ctx.failure_delay(&key));
    cx.ctx.metrics.controllers.requeued(CONTROLLER, "", &ces.name_any(), &action);
    cx.forget_if_gone(&ces.name_any());
    action
}

/// Whether the state of a namespace that selection depends on changed: its labels, whether it
/// is terminating, whether it exists.
fn namespace_state(ns: &PartialObjectMeta<Namespace>) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    ns.labels().hash(&mut h);
    ns.metadata.deletion_timestamp.is_some().hash(&mut h);
    h.finish()
}

/// Registers the controller on the shared caches and returns it; it runs until `shutdown`
/// resolves. Only for an instance that watches every namespace (see `run.rs`).
pub fn controller(
    caches: &mut Caches,
    ctx: Arc<Context>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    let ces_store = caches.cluster_external_secrets.store();
    let cx = Arc::new(CesContext {
        ctx: ctx.clone(),
        external_secrets: caches.external_secrets.store(),
        namespaces: caches.namespaces.store(),
        cluster_providers: caches.cluster_providers.store(),
        cluster_secret_stores: caches.cluster_secret_stores.store(),
        cluster_external_secrets: ces_store.clone(),
        owned: Mutex::new(OwnedIndex::default()),
        applied: Mutex::new(HashMap::new()),
    });
    let (trigger, triggers) = caches::triggers::<ClusterExternalSecret>();

    {
        let (trigger, ctx) = (trigger.clone(), ctx.clone());
        let mut seen: HashMap<String, u64> = HashMap::new();
        caches.cluster_external_secrets.hook(move |change| match change {
            Change::Applied(ces) => {
                let hash = crate::predicate::spec_change(ces).unwrap_or_default();
                if seen.insert(ces.name_any(), hash) != Some(hash) {
                    trigger.send(ObjectRef::from_obj(ces));
                }
            }
            Change::Gone(ces) => {
                seen.remove(&ces.name_any());
                ctx.forget(&ObjectKey::cluster_external_secret(&ces.name_any()));
            }
        });
    }
    external_secret_hook(caches, cx.clone(), ces_store.clone(), trigger.clone());
    namespace_hook(caches, cx.clone(), ces_store.clone(), trigger);

    let metrics = ctx.metrics.controllers.controller(CONTROLLER, CONCURRENCY);
    Controller::for_shared_stream(futures::stream::pending(), ces_store)
        .reconcile_on(metrics.queued(triggers))
        .with_config(ControllerConfig::default().concurrency(CONCURRENCY))
        .graceful_shutdown_on(shutdown)
        .run(
            move |ces, cx| {
                let metrics = metrics.clone();
                async move {
                    let name = ces.name_any();
                    metrics.observe(None, &name, reconcile::reconcile(ces, cx)).await
                }
            },
            error_policy,
            cx,
        )
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(error = %e, "ClusterExternalSecret controller event");
            }
        })
}

/// Keeps the label index current, and reconciles a ClusterExternalSecret when one of its
/// ExternalSecrets is edited (its generation, labels or annotations change) or gone, and when an
/// ExternalSecret of the name it writes disappears (a namespace it could not write may be free
/// now).
fn external_secret_hook(
    caches: &mut Caches,
    cx: Arc<CesContext>,
    ces_store: Store<ClusterExternalSecret>,
    trigger: Trigger<ClusterExternalSecret>,
) {
    let mut seen: HashMap<ObjectRef<ExternalSecret>, u64> = HashMap::new();
    caches.external_secrets.hook(move |change| match change {
        Change::Applied(es) => {
            let key = caches::key(es);
            let owner = es.labels().get(CLUSTER_EXTERNAL_SECRET_LABEL).cloned();
            let before = lock(&cx.owned).set(key.clone(), owner.clone());
            if let Some(before) = before.filter(|b| Some(b) != owner.as_ref()) {
                trigger.send(ObjectRef::new(&before));
            }
            match owner {
                Some(owner) => {
                    let hash = crate::predicate::spec_change(es).unwrap_or_default();
                    if seen.insert(key, hash) != Some(hash) {
                        trigger.send(ObjectRef::new(&owner));
                    }
                }
                None => {
                    seen.remove(&key);
                }
            }
        }
        Change::Gone(es) => {
            let key = caches::key(es);
            seen.remove(&key);
            lock(&cx.applied).remove(&key);
            if let Some(owner) = lock(&cx.owned).set(key, None) {
                trigger.send(ObjectRef::new(&owner));
            }
            let name = es.name_any();
            for ces in ces_store.state().iter().filter(|c| c.external_secret_name() == name) {
                trigger.send(ObjectRef::from_obj(ces.as_ref()));
            }
        }
    });
}

/// Reconciles the ClusterExternalSecrets a namespace change concerns: those that select it now,
/// and those with an ExternalSecret in it.
fn namespace_hook(
    caches: &mut Caches,
    cx: Arc<CesContext>,
    ces_store: Store<ClusterExternalSecret>,
    trigger: Trigger<ClusterExternalSecret>,
) {
    let mut seen: HashMap<String, u64> = HashMap::new();
    caches.namespaces.hook(move |change| {
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
        let owners = lock(&cx.owned).owners_in(&name);
        for ces in ces_store.state() {
            if owners.contains(&ces.name_any()) || selects_namespace(&ces.spec, view) {
                trigger.send(ObjectRef::from_obj(ces.as_ref()));
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
