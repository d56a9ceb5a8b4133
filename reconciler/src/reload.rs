//! Rollouts on rotation: Deployments, StatefulSets and DaemonSets annotated
//! `keyward.dev/reload: "true"` carry, in their pod template, a hash of the data of the
//! Keyward-managed Secrets they use. Each ExternalSecret mirrors the data hash it wrote into
//! `status.syncedDataHash`; when that changes, the workloads of its namespace recompute their
//! hash and write it if it changed, which rolls them. A refresh that fetched the same values
//! leaves the data hash alone, so nothing rolls; a burst of rotations inside the debounce
//! window lands as one write. No Secret is watched: one shared ExternalSecret watch feeds the
//! cache and the triggers of every workload kind.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::PodSpec;
use keyward_crds::ExternalSecret;
use keyward_crds::workload::{self, RELOAD_ANNOTATION, SECRETS_HASH_ANNOTATION};
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams};
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
    let mut in_namespace: Vec<Arc<ExternalSecret>> =
        ctx.external_secrets.state().into_iter().filter(|es| es.namespace().as_deref() == Some(&namespace)).collect();
    // Two ExternalSecrets creating one Secret is a conflict; like the webhook, take the first
    // by name so both compute the same hash.
    in_namespace.sort_by_key(|es| es.name_any());
    let mut data_hashes: HashMap<String, &str> = HashMap::new();
    for es in &in_namespace {
        if let Some(hash) = es.rollout_data_hash() {
            data_hashes.entry(es.target_secret_name()).or_insert(hash);
        }
    }
    workload::template_secrets_hash(
        &spec,
        &annotations,
        |es| ctx.external_secrets.get(&ObjectRef::new(es).within(&namespace)).map(|es| es.target_secret_name()),
        |secret| data_hashes.get(secret).map(|h| h.to_string()),
    )
}

/// What of an ExternalSecret can change a workload's hash: its target Secret and data hash.
type RolloutInput = (String, Option<String>);

/// Passes on only the ExternalSecrets whose rollout input changed since last seen, so the
/// status writes of no-op refreshes do not wake every workload of the namespace.
fn rollout_input_changed() -> impl FnMut(&Arc<ExternalSecret>) -> bool {
    let seen: Mutex<HashMap<ObjectRef<ExternalSecret>, RolloutInput>> = Mutex::default();
    move |es| {
        let input = (es.target_secret_name(), es.rollout_data_hash().map(str::to_string));
        let mut seen = seen.lock().unwrap_or_else(PoisonError::into_inner);
        seen.insert(ObjectRef::from_obj(es.as_ref()), input.clone()) != Some(input)
    }
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
    let es_api: Api<ExternalSecret> = match &namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    // One watch of ExternalSecrets: a shared cache, and a subscription per workload kind.
    let (es_store, es_writer) = reflector::store_shared(256);
    let mut subscriptions = Vec::new();
    let mut controllers = Vec::new();
    for resource in workload_kinds() {
        let Some(subscription) = es_writer.subscribe() else {
            tracing::error!("the ExternalSecret cache cannot be shared; rollouts on rotation are off");
            return;
        };
        subscriptions.push((resource, subscription));
    }
    tokio::spawn(
        watcher(es_api, watcher::Config::default()).default_backoff().reflect_shared(es_writer).for_each(|_| async {}),
    );
    for (resource, subscription) in subscriptions {
        let ctx =
            Arc::new(Ctx { client: client.clone(), resource: resource.clone(), external_secrets: es_store.clone() });
        let controller = Controller::new_with(scoped(&resource), watcher::Config::default(), resource.clone())
            .with_config(Config::default().debounce(debounce));
        let workloads = controller.store();
        let mut changed = rollout_input_changed();
        let triggers = subscription.filter(move |es| std::future::ready(changed(es)));
        // An ExternalSecret's change concerns the reloadable workloads of its namespace; each
        // reconcile recomputes its own hash and writes only when it changed.
        let controller = controller.watches_shared_stream(triggers, move |es: Arc<ExternalSecret>| {
            let ns = es.namespace();
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

#[cfg(test)]
mod tests {
    use super::*;
    use keyward_crds::external_secret::ExternalSecretStatus;

    fn es(name: &str, hash: Option<&str>, refreshed: &str) -> Arc<ExternalSecret> {
        let mut es = ExternalSecret::new(name, Default::default());
        es.metadata.namespace = Some("team-a".into());
        es.status = Some(ExternalSecretStatus {
            synced_data_hash: hash.map(str::to_string),
            synced_resource_version: Some(refreshed.into()),
            ..Default::default()
        });
        Arc::new(es)
    }

    #[test]
    fn only_a_changed_target_or_data_hash_triggers_workloads() {
        let mut changed = rollout_input_changed();
        assert!(changed(&es("db", None, "r1")), "first sight");
        assert!(!changed(&es("db", None, "r2")), "a status write that changes nothing else");
        assert!(changed(&es("db", Some("h1"), "r3")), "first sync");
        assert!(!changed(&es("db", Some("h1"), "r4")), "a no-op refresh");
        assert!(changed(&es("db", Some("h2"), "r5")), "a rotation");
        assert!(changed(&es("api", Some("h2"), "r1")), "tracked per ExternalSecret");
        let mut renamed = (*es("db", Some("h2"), "r6")).clone();
        renamed.spec.target.name = Some("db-v2".into());
        assert!(changed(&Arc::new(renamed)), "a new target Secret");
    }
}
