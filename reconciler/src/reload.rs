//! Rollouts on rotation: Deployments, StatefulSets and DaemonSets annotated
//! `keyward.dev/reload: "true"` carry, in their pod template, a hash of the data of the
//! Keyward-managed Secrets they use. When a managed Secret's data hash changes, the hash is
//! recomputed and written, which rolls the workload. A refresh that fetched the same values
//! leaves the data hash alone, so nothing rolls; a burst of rotations inside the debounce
//! window lands as one write.

use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::{PodSpec, Secret};
use keyward_crds::ExternalSecret;
use keyward_crds::workload::{self, DATA_HASH_ANNOTATION, MANAGED_LABEL, RELOAD_ANNOTATION, SECRETS_HASH_ANNOTATION};
use kube::api::{ApiResource, DynamicObject, PartialObjectMeta, Patch, PatchParams};
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Api, Client, ResourceExt};
use serde_json::json;

/// Field manager of the hash writes.
const FIELD_MANAGER: &str = "keyward-reconciler-reload";

/// The workload kinds that can reload.
fn workload_kinds() -> [ApiResource; 3] {
    use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
    [
        ApiResource::erase::<Deployment>(&()),
        ApiResource::erase::<StatefulSet>(&()),
        ApiResource::erase::<DaemonSet>(&()),
    ]
}

struct Ctx {
    client: Client,
    resource: ApiResource,
    secrets: Store<PartialObjectMeta<Secret>>,
    external_secrets: Store<ExternalSecret>,
}

/// Error of one reload reconcile (only the API write can fail).
#[derive(Debug, thiserror::Error)]
#[error("writing the secrets hash of {kind} {namespace}/{name}: {source}")]
pub struct ReloadError {
    kind: String,
    namespace: String,
    name: String,
    source: kube::Error,
}

/// The hash a workload's pod template should carry, from the current caches; `None` when it
/// uses no managed Secret.
fn desired_hash(ctx: &Ctx, workload: &DynamicObject) -> Option<String> {
    let namespace = workload.namespace().unwrap_or_default();
    let template = workload.data.pointer("/spec/template")?;
    let spec: PodSpec = serde_json::from_value(template.get("spec")?.clone()).ok()?;
    let annotations = template
        .pointer("/metadata/annotations")
        .and_then(|a| serde_json::from_value(a.clone()).ok())
        .unwrap_or_default();
    let used = workload::secrets_used(&spec, &annotations, |es| {
        ctx.external_secrets.get(&ObjectRef::new(es).within(&namespace)).map(|es| es.target_secret_name())
    });
    let hashes: Vec<(String, String)> = used
        .into_iter()
        .filter_map(|name| {
            let secret = ctx.secrets.get(&ObjectRef::new(&name).within(&namespace))?;
            Some((name, secret.annotations().get(DATA_HASH_ANNOTATION)?.clone()))
        })
        .collect();
    workload::secrets_hash(hashes.iter().map(|(n, h)| (n.as_str(), h.as_str())))
}

fn wants_reload(workload: &DynamicObject) -> bool {
    workload.annotations().get(RELOAD_ANNOTATION).map(String::as_str) == Some("true")
}

async fn reconcile(workload: Arc<DynamicObject>, ctx: Arc<Ctx>) -> Result<Action, ReloadError> {
    if !wants_reload(&workload) {
        return Ok(Action::await_change());
    }
    let Some(hash) = desired_hash(&ctx, &workload) else {
        return Ok(Action::await_change());
    };
    let current = workload
        .data
        .pointer("/spec/template/metadata/annotations")
        .and_then(|a| a.get(SECRETS_HASH_ANNOTATION))
        .and_then(|v| v.as_str());
    if current == Some(hash.as_str()) {
        return Ok(Action::await_change());
    }
    let (namespace, name) = (workload.namespace().unwrap_or_default(), workload.name_any());
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), &namespace, &ctx.resource);
    let patch = json!({"spec": {"template": {"metadata": {"annotations": {SECRETS_HASH_ANNOTATION: hash}}}}});
    api.patch(&name, &PatchParams::apply(FIELD_MANAGER), &Patch::Merge(&patch)).await.map_err(|source| {
        ReloadError { kind: ctx.resource.kind.clone(), namespace: namespace.clone(), name: name.clone(), source }
    })?;
    tracing::info!(kind = %ctx.resource.kind, %namespace, %name, %hash, "secrets rotated: rolling the workload");
    Ok(Action::await_change())
}

fn error_policy(_: Arc<DynamicObject>, error: &ReloadError, _: Arc<Ctx>) -> Action {
    tracing::warn!(%error, "reload failed; retrying");
    Action::requeue(Duration::from_secs(5))
}

/// Runs the reload controllers (one per workload kind) until `shutdown` resolves.
pub async fn run(
    client: Client,
    namespace: Option<String>,
    debounce: Duration,
    shutdown: impl std::future::Future<Output = ()> + Clone + Send + Sync + 'static,
) {
    let scoped = |ar: &ApiResource| match &namespace {
        Some(ns) => Api::<DynamicObject>::namespaced_with(client.clone(), ns, ar),
        None => Api::<DynamicObject>::all_with(client.clone(), ar),
    };
    let secrets_api: Api<PartialObjectMeta<Secret>> = match &namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let es_api: Api<ExternalSecret> = match &namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let managed = || watcher::Config::default().labels(&format!("{MANAGED_LABEL}=true"));
    let (es_store, es_writer) = reflector::store();
    tokio::spawn(
        watcher(es_api, watcher::Config::default()).default_backoff().reflect(es_writer).for_each(|_| async {}),
    );
    // Managed Secrets are watched metadata-only and label-selected: their data hash annotation
    // is all reload needs, and no other Secret is ever cached.
    let (secret_store, secret_writer) = reflector::store();
    tokio::spawn(
        watcher(secrets_api.clone(), managed()).default_backoff().reflect(secret_writer).for_each(|_| async {}),
    );
    let mut controllers = Vec::new();
    for resource in workload_kinds() {
        let ctx = Arc::new(Ctx {
            client: client.clone(),
            resource: resource.clone(),
            secrets: secret_store.clone(),
            external_secrets: es_store.clone(),
        });
        let controller = Controller::new_with(scoped(&resource), watcher::Config::default(), resource.clone())
            .with_config(Config::default().debounce(debounce));
        let workloads = controller.store();
        let triggers = watcher(secrets_api.clone(), managed()).default_backoff().touched_objects();
        // A Secret change concerns the reloadable workloads of its namespace; each reconcile
        // recomputes its own hash and writes only when it changed.
        let controller = controller.watches_stream(triggers, move |secret: PartialObjectMeta<Secret>| {
            let ns = secret.namespace();
            workloads
                .state()
                .into_iter()
                .filter(|w| w.namespace() == ns && wants_reload(w))
                .map(|w| ObjectRef::from_obj_with(w.as_ref(), resource.clone()))
                .collect::<Vec<_>>()
        });
        controllers.push(
            controller
                .graceful_shutdown_on(shutdown.clone())
                .run(reconcile, error_policy, ctx)
                .for_each(|_| async {})
                .boxed(),
        );
    }
    futures::future::join_all(controllers).await;
}
