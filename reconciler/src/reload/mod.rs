//! Rollouts on rotation: Deployments, StatefulSets and DaemonSets annotated
//! `keyward.dev/reload: "true"` carry, in their pod template, a hash of the data of the
//! Keyward-managed Secrets they use. Each ExternalSecret mirrors the data hash it wrote into
//! `status.syncedDataHash`; when that (or its target) changes, the index names the workloads
//! using that Secret, and each recomputes its hash and writes it if it changed, which rolls it.
//! A refresh that fetched the same values leaves the data hash alone, so nothing rolls; a burst
//! of rotations inside the debounce window lands as one write. No Secret is watched, and the
//! workloads are cached stripped to what this rule reads (`workload.rs`).

pub mod index;
pub mod workload;

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use keyward_crds::ExternalSecret;
use keyward_crds::workload::{SECRETS_HASH_ANNOTATION, template_secrets_hash};
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::json;

use crate::caches::packed::Packed;
use crate::caches::{self, Caches, Change, Trigger, Watched};
use index::{Index, WorkloadKey};
use workload::{Kind, Workload, template_annotations, wants_reload};

/// Field manager of the hash writes.
const FIELD_MANAGER: &str = "keyward-reconciler-reload";

type Shared = Arc<Mutex<Index>>;

fn lock(index: &Shared) -> MutexGuard<'_, Index> {
    // Index updates are single calls; a poisoned lock still holds a consistent index.
    index.lock().unwrap_or_else(PoisonError::into_inner)
}

struct Ctx {
    client: Client,
    index: Shared,
    external_secrets: Store<Packed<ExternalSecret>>,
}

/// Error of one reload reconcile (only the API write can fail).
#[derive(Debug, thiserror::Error)]
#[error("writing the secrets hash of {kind:?} {namespace}/{name}: {source}")]
pub struct ReloadError {
    kind: Kind,
    namespace: String,
    name: String,
    source: kube::Error,
}

async fn reconcile<W: Workload>(w: Arc<W>, ctx: Arc<Ctx>) -> Result<Action, ReloadError> {
    if !wants_reload(w.meta()) {
        return Ok(Action::await_change());
    }
    let Some(spec) = w.template().and_then(|t| t.spec.as_ref()) else {
        return Ok(Action::await_change());
    };
    let namespace = w.namespace().unwrap_or_default();
    let annotations = template_annotations(w.as_ref());
    let hash = {
        let mut index = lock(&ctx.index);
        fill_pending(&mut index, &ctx.external_secrets);
        template_secrets_hash(
            spec,
            &annotations,
            |es| index.target_of(&namespace, es),
            |secret| index.data_hash_of(&namespace, secret),
        )
    };
    let Some(hash) = hash else {
        return Ok(Action::await_change());
    };
    if annotations.get(SECRETS_HASH_ANNOTATION) == Some(&hash) {
        return Ok(Action::await_change());
    }
    let name = w.name_any();
    let api: Api<W> = Api::namespaced(ctx.client.clone(), &namespace);
    let patch = json!({"spec": {"template": {"metadata": {"annotations": {SECRETS_HASH_ANNOTATION: hash}}}}});
    api.patch(&name, &PatchParams::apply(FIELD_MANAGER), &Patch::Merge(&patch))
        .await
        .map_err(|source| ReloadError { kind: W::KIND, namespace: namespace.clone(), name: name.clone(), source })?;
    tracing::info!(kind = ?W::KIND, %namespace, %name, %hash, "secrets rotated: rolling the workload");
    Ok(Action::await_change())
}

fn error_policy<W: Workload>(_: Arc<W>, error: &ReloadError, _: Arc<Ctx>) -> Action {
    tracing::warn!(%error, "reload failed; retrying");
    Action::requeue(Duration::from_secs(5))
}

/// Where the ExternalSecret hook sends the workloads a change concerns.
#[derive(Clone)]
struct Senders {
    deployments: Trigger<k8s_openapi::api::apps::v1::Deployment>,
    stateful_sets: Trigger<k8s_openapi::api::apps::v1::StatefulSet>,
    daemon_sets: Trigger<k8s_openapi::api::apps::v1::DaemonSet>,
}

impl Senders {
    fn send(&self, w: WorkloadKey) {
        // A stopped controller no longer listens; nothing to do then.
        match w.kind {
            Kind::Deployment => self.deployments.send(ObjectRef::new(&w.name).within(&w.namespace)),
            Kind::StatefulSet => self.stateful_sets.send(ObjectRef::new(&w.name).within(&w.namespace)),
            Kind::DaemonSet => self.daemon_sets.send(ObjectRef::new(&w.name).within(&w.namespace)),
        }
    }
}

/// What the index keeps of an ExternalSecret: its target Secret and the data hash it wrote.
fn rollout_input(es: &ExternalSecret) -> (String, Option<String>) {
    (es.target_secret_name(), es.rollout_data_hash().map(str::to_string))
}

/// Indexes the cached ExternalSecrets of the namespaces that got their first reloadable
/// workload since the last read, in one pass over the cache whatever their number. The
/// ExternalSecret hook runs after its store changed and takes the same lock, so a change racing
/// this one is either read here or applied by the hook afterwards, the same either way.
fn fill_pending(index: &mut Index, external_secrets: &Store<Packed<ExternalSecret>>) {
    let pending = index.take_pending();
    if pending.is_empty() {
        return;
    }
    for packed in external_secrets.state() {
        let Some(namespace) = packed.meta().namespace.as_deref().filter(|ns| pending.contains(*ns)) else {
            continue;
        };
        match packed.unpack() {
            Ok(es) => {
                index.set_external_secret(namespace, &es.name_any(), Some(rollout_input(&es)));
            }
            Err(e) => tracing::error!(error = %e, "skipping a cached object"),
        }
    }
}

/// Keeps the index of one workload kind and triggers a workload when what it uses changed.
fn follow<W: Workload>(watched: &mut Watched<W>, index: Shared, senders: Senders) {
    watched.hook(move |change| match change {
        Change::Applied(w) => {
            let key = WorkloadKey { kind: W::KIND, namespace: w.namespace().unwrap_or_default(), name: w.name_any() };
            let uses = wants_reload(w.meta())
                .then(|| w.template().and_then(|t| t.spec.as_ref()))
                .flatten()
                .map(|spec| index::uses(spec, &template_annotations(w)));
            let reload = uses.is_some();
            let changed = lock(&index).set_workload(key.clone(), uses);
            if changed && reload {
                senders.send(key);
            }
        }
        Change::Gone(w) => {
            let key = WorkloadKey { kind: W::KIND, namespace: w.namespace().unwrap_or_default(), name: w.name_any() };
            lock(&index).set_workload(key, None);
        }
    });
}

/// Registers the reload rule on the shared caches and returns its controllers (one per workload
/// kind), which run until `shutdown` resolves.
pub fn controllers(
    caches: &mut Caches,
    client: Client,
    debounce: Duration,
    shutdown: impl std::future::Future<Output = ()> + Clone + Send + Sync + 'static,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    let index: Shared = Arc::default();
    let (d_tx, d_rx) = caches::triggers();
    let (s_tx, s_rx) = caches::triggers();
    let (ds_tx, ds_rx) = caches::triggers();
    let senders = Senders { deployments: d_tx, stateful_sets: s_tx, daemon_sets: ds_tx };
    {
        let (index, senders) = (index.clone(), senders.clone());
        caches.external_secrets.hook(move |change| {
            let hit = match change {
                Change::Applied(es) => lock(&index).set_external_secret(
                    &es.namespace().unwrap_or_default(),
                    &es.name_any(),
                    Some(rollout_input(es)),
                ),
                Change::Gone(es) => {
                    lock(&index).set_external_secret(&es.namespace().unwrap_or_default(), &es.name_any(), None)
                }
            };
            for w in hit {
                senders.send(w);
            }
        });
    }
    follow(&mut caches.deployments, index.clone(), senders.clone());
    follow(&mut caches.stateful_sets, index.clone(), senders.clone());
    follow(&mut caches.daemon_sets, index.clone(), senders);
    let ctx = Arc::new(Ctx { client, index, external_secrets: caches.external_secrets.store() });
    let d = controller(caches.deployments.store(), d_rx, debounce, shutdown.clone(), ctx.clone());
    let s = controller(caches.stateful_sets.store(), s_rx, debounce, shutdown.clone(), ctx.clone());
    let ds = controller(caches.daemon_sets.store(), ds_rx, debounce, shutdown, ctx);
    async move {
        futures::join!(d, s, ds);
    }
}

fn controller<W: Workload>(
    store: kube::runtime::reflector::Store<W>,
    triggers: impl futures::Stream<Item = ObjectRef<W>> + Send + 'static,
    debounce: Duration,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
    ctx: Arc<Ctx>,
) -> futures::future::BoxFuture<'static, ()> {
    Controller::for_shared_stream(futures::stream::pending(), store)
        .reconcile_on(triggers)
        .with_config(Config::default().debounce(debounce))
        .graceful_shutdown_on(shutdown)
        .run(reconcile::<W>, error_policy::<W>, ctx)
        .for_each(|_| async {})
        .boxed()
}
