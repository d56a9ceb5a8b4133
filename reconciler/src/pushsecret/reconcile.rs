//! One reconcile of a PushSecret: push the selected keys of the source Secret to every store,
//! remove remote copies that are no longer pushed (deletionPolicy Delete), and on deletion
//! remove them all before releasing the finalizer.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use keyward_crds::push_secret::{PushSecretData, PushSecretDeletionPolicy, PushSecretUpdatePolicy};
use keyward_crds::rules::{
    check_push_override, parse_go_duration, parse_label_selector, push_metadata_remote_namespace, push_secret_free_json,
};
use keyward_crds::{PushSecret, PushSecretStatus, StoreKind};
use keyward_proto::ProviderError;
use keyward_proto::v1 as pb;
use kube::api::{ListParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::finalizer::{Event as FinalizerEvent, finalizer};
use kube::{Api, Resource, ResourceExt};
use serde_json::json;

use super::generated::generated_source;
use super::plan::{Push, Store, plan};
use super::stores::{Target, resolve_targets};
use crate::conditions;
use crate::context::{Context, ObjectKey};
use crate::externalsecret::render::{load_sources, render_in_pool};
use crate::renders::{RenderError, TEMPLATE_BUDGET_EXCEEDED};
use keyward_provider_client::{Need, ProviderClient, Waitable};

/// Finalizer that holds a PushSecret with deletionPolicy Delete until its remote copies are gone.
pub const FINALIZER: &str = "pushsecret.externalsecrets.io/finalizer";

/// API failures; the controller retries them.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API server failed.
    #[error(transparent)]
    Kube(#[from] kube::Error),
    /// Adding or removing the finalizer failed, or the sync or cleanup inside it.
    #[error(transparent)]
    Finalizer(Box<kube::runtime::finalizer::Error<Error>>),
    /// Remote copies could not be deleted; the finalizer stays.
    #[error("{0}")]
    Cleanup(String),
}

/// Identifies one remote value inside a store's entry map.
pub fn remote_id(remote_key: &str, property: Option<&str>) -> String {
    match property {
        Some(p) if !p.is_empty() => format!("{remote_key}/{p}"),
        _ => remote_key.to_string(),
    }
}

type Synced = BTreeMap<String, BTreeMap<String, PushSecretData>>;

/// Why a push (or a remote deletion) failed, and the provider to wait on when it did not
/// answer: the PushSecret is then requeued as soon as that provider answers again.
struct Failure {
    /// The `Ready` reason: `Errored`, or `TemplateBudgetExceeded` for a template out of budget.
    reason: &'static str,
    message: String,
    /// Boxed: the provider handle is large, and this travels in every `Result` of a push.
    waiting_on: Option<Box<Waitable>>,
    /// Nothing failed yet: no render slot was free. Retried with backoff, status untouched.
    busy: bool,
}

impl From<String> for Failure {
    fn from(message: String) -> Self {
        Failure { reason: "Errored", message, waiting_on: None, busy: false }
    }
}

impl Failure {
    /// A failed call through `client`; `what` says which call. Call right when it failed, so
    /// the provider's state is the one it failed against.
    fn call(client: &ProviderClient, what: String, error: &ProviderError) -> Self {
        Failure {
            message: format!("{what}: {error}"),
            waiting_on: error.is_transient().then(|| Box::new(client.waitable())),
            ..Failure::from(String::new())
        }
    }

    /// A template render of the Secret `name` that gave no result.
    fn render(name: &str, e: RenderError) -> Self {
        let message = format!("template failed for Secret {name:?}: {e}");
        match e {
            RenderError::Busy(_) => Failure { busy: true, ..Failure::from(message) },
            RenderError::OverBudget { .. } => Failure { reason: TEMPLATE_BUDGET_EXCEEDED, ..Failure::from(message) },
            RenderError::Failed(_) => Failure::from(message),
        }
    }

    fn context(self, prefix: &str) -> Self {
        Failure { message: format!("{prefix}: {}", self.message), ..self }
    }
}

/// The reconcile entry point.
pub async fn reconcile(ps: Arc<PushSecret>, ctx: Arc<Context>) -> Result<Action, Error> {
    let api: Api<PushSecret> = Api::namespaced(ctx.client.clone(), &ps.namespace().unwrap_or_default());
    let has_finalizer = ps.finalizers().iter().any(|f| f == FINALIZER);

    // Only a PushSecret that deletes its remote copies holds a finalizer; kube-runtime's helper
    // adds it, and removes it once the cleanup succeeded. One whose policy changed away from
    // Delete keeps it until deletion (the cleanup then deletes nothing).
    if ps.spec.deletion_policy == PushSecretDeletionPolicy::Delete || has_finalizer {
        let ctx = &ctx;
        return finalizer(&api, FINALIZER, ps, |event| async move {
            match event {
                FinalizerEvent::Apply(ps) => sync(ps, ctx).await,
                FinalizerEvent::Cleanup(ps) => cleanup(ps, ctx).await,
            }
        })
        .await
        .map_err(|e| Error::Finalizer(Box::new(e)));
    }
    if ps.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    sync(ps, &ctx).await
}

/// On deletion with deletionPolicy Delete: deletes every remote copy; a failure keeps the
/// finalizer (and is reported) so the deletion is retried.
async fn cleanup(ps: Arc<PushSecret>, ctx: &Context) -> Result<Action, Error> {
    let ns = ps.namespace().unwrap_or_default();
    let status = ps.status.clone().unwrap_or_default();
    if ps.spec.deletion_policy == PushSecretDeletionPolicy::Delete
        && let Err(e) = delete_remote(ctx, &ns, &status.synced_push_secrets, &BTreeMap::new()).await
    {
        let api: Api<PushSecret> = Api::namespaced(ctx.client.clone(), &ns);
        let failure = e.context("deleting remote copies");
        let message = failure.message.clone();
        fail(&ps, ctx, &api, status, failure).await?;
        return Err(Error::Cleanup(message));
    }
    Ok(Action::await_change())
}

/// Pushes and reports.
async fn sync(ps: Arc<PushSecret>, ctx: &Context) -> Result<Action, Error> {
    let ns = ps.namespace().unwrap_or_default();
    let name = ps.name_any();
    let api: Api<PushSecret> = Api::namespaced(ctx.client.clone(), &ns);
    let status = ps.status.clone().unwrap_or_default();
    ctx.metrics.push_secrets.sync_started(&ns, &name);
    let started = std::time::Instant::now();
    let outcome = push(&ps, ctx, &ns).await;
    ctx.metrics.push_secrets.set_duration(&ns, &name, started.elapsed());
    match outcome {
        Ok(synced) => {
            if ps.spec.deletion_policy == PushSecretDeletionPolicy::Delete
                && let Err(e) = delete_remote(ctx, &ns, &status.synced_push_secrets, &synced).await
            {
                ctx.metrics.push_secrets.sync_failed(&ns, &name);
                return fail(&ps, ctx, &api, status, e.context("deleting remote copies no longer pushed")).await;
            }
            ctx.clear_failures(&key(&ns, &name));
            ctx.metrics.push_secrets.set_ready(&ns, &name, true);
            let stores: Vec<&String> = synced.keys().collect();
            let message = format!("pushed to {}", stores.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", "));
            let new_status = PushSecretStatus {
                refresh_time: Some(Time(Timestamp::now())),
                synced_resource_version: Some(format!("{}", ps.metadata.generation.unwrap_or_default())),
                conditions: vec![conditions::ready(
                    &status.conditions,
                    true,
                    "Synced",
                    message.clone(),
                    ps.metadata.generation,
                )],
                synced_push_secrets: synced,
            };
            let changed = !conditions::same(&status.conditions, &new_status.conditions)
                || status.synced_push_secrets != new_status.synced_push_secrets;
            api.patch_status(&name, &PatchParams::default(), &Patch::Merge(json!({ "status": new_status }))).await?;
            if changed {
                ctx.event(&ps.object_ref(&()), false, "Synced", "Push", message).await;
            }
            Ok(match push_interval(&ps) {
                Some(interval) => Action::requeue(interval),
                None => Action::await_change(),
            })
        }
        Err(failure) => {
            ctx.metrics.push_secrets.sync_failed(&ns, &name);
            fail(&ps, ctx, &api, status, failure).await
        }
    }
}

/// How long after a push the PushSecret pushes again: its `refreshInterval` (upstream's default
/// of an hour if it does not parse, which admission refuses anyway); `None` for 0, which pushes
/// again only when the PushSecret changes.
pub fn push_interval(ps: &PushSecret) -> Option<Duration> {
    let interval = parse_go_duration(&ps.spec.refresh_interval).unwrap_or(Duration::from_secs(3600));
    (!interval.is_zero()).then_some(interval)
}

fn key(ns: &str, name: &str) -> ObjectKey {
    ObjectKey::push_secret(ns, name)
}

async fn fail(
    ps: &PushSecret,
    ctx: &Context,
    api: &Api<PushSecret>,
    status: PushSecretStatus,
    Failure { reason, message, waiting_on, busy }: Failure,
) -> Result<Action, Error> {
    let ns = ps.namespace().unwrap_or_default();
    if busy {
        // Another render of the namespace holds its slot: not this object's failure.
        return Ok(Action::requeue(ctx.failure_delay(&key(&ns, &ps.name_any()))));
    }
    crate::controller_metrics::failed();
    match waiting_on {
        Some(provider) => ctx.manager.recovery().wait(key(&ns, &ps.name_any()), *provider),
        None => ctx.manager.recovery().forget(&key(&ns, &ps.name_any())),
    }
    ctx.metrics.push_secrets.set_ready(&ns, &ps.name_any(), false);
    let conditions =
        vec![conditions::ready(&status.conditions, false, reason, message.clone(), ps.metadata.generation)];
    if !conditions::same(&status.conditions, &conditions) {
        let new_status = PushSecretStatus { conditions, ..status };
        api.patch_status(&ps.name_any(), &PatchParams::default(), &Patch::Merge(json!({ "status": new_status })))
            .await?;
        ctx.event(&ps.object_ref(&()), true, reason, "Push", message).await;
    }
    Ok(Action::requeue(ctx.failure_delay(&key(&ns, &ps.name_any()))))
}

/// The source Secrets' data by name: the named Secret, or every Secret of the namespace the
/// label selector matches (none is not an error: there is nothing to push).
async fn source_secrets(ps: &PushSecret, ctx: &Context, ns: &str) -> Result<SourceData, Failure> {
    let source = match (&ps.spec.selector.secret, &ps.spec.selector.generator_ref) {
        (Some(s), _) => s,
        (None, Some(generator)) => return Ok(vec![generated_source(ps, ctx, ns, generator).await?]),
        (None, None) => return Err(String::from("selector.secret is required").into()),
    };
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), ns);
    let data = |s: Secret| -> HashMap<String, Vec<u8>> {
        s.data.unwrap_or_default().into_iter().map(|(k, v)| (k, v.0)).collect()
    };
    match (&source.name, &source.selector) {
        (Some(name), _) => {
            let secret = secrets
                .get_opt(name)
                .await
                .map_err(|e| format!("reading Secret {name:?}: {e}"))?
                .ok_or_else(|| format!("source Secret {name:?} not found"))?;
            Ok(vec![(name.clone(), data(secret))])
        }
        (None, Some(selector)) => {
            let selector =
                parse_label_selector(selector).map_err(|e| format!("selector.secret.selector is invalid: {e}"))?;
            let params = ListParams::default().labels_from(&selector);
            let list =
                secrets.list(&params).await.map_err(|e| format!("listing Secrets by selector.secret.selector: {e}"))?;
            Ok(list.items.into_iter().map(|s| (s.name_any(), data(s))).collect())
        }
        (None, None) => Err(String::from("selector.secret needs a name or a selector").into()),
    }
}

/// Source Secret name → its data.
type SourceData = Vec<(String, HashMap<String, Vec<u8>>)>;

async fn push(ps: &PushSecret, ctx: &Context, ns: &str) -> Result<Synced, Failure> {
    // Admission's limits on free-form metadata, again: metadata written past them while the
    // webhook was away was not kept, so it cannot be sent.
    push_secret_free_json(&ps.spec).map_err(|e| e.to_string())?;
    let mut sources = source_secrets(ps, ctx, ns).await?;
    if let Some(template) = &ps.spec.template {
        // As upstream: the rendered keys are added to each source's, in memory only.
        let loaded = load_sources(&ctx.client, ns, template).await.map_err(|e| format!("template: {e}"))?;
        for (name, data) in &mut sources {
            let source: BTreeMap<String, Vec<u8>> = data.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            // On a render thread with a CPU budget and a time limit, never on an async worker.
            let rendered = render_in_pool(&ctx.renders, ns, template, &loaded, &source)
                .await
                .map_err(|e| Failure::render(name, e))?;
            data.extend(rendered.data);
        }
    }
    let targets = resolve_targets(&ctx.client, &ctx.manager, ns, &ps.spec.secret_store_refs).await?;
    if targets.is_empty() {
        return Err(String::from("no store matches secretStoreRefs").into());
    }
    check_one_source_per_remote_key(ps, ctx, ns, &targets, &sources).await?;
    let mut synced: Synced = targets.iter().map(|t| (t.key.clone(), BTreeMap::new())).collect();
    for (_, data) in &sources {
        for t in &targets {
            let entries = push_to(ps, ctx, ns, t, data).await?;
            synced.entry(t.key.clone()).or_default().extend(entries);
        }
    }
    Ok(synced)
}

/// Refuses, before anything is pushed, two source Secrets that would write one remote value of
/// one store (the later would silently overwrite the earlier).
async fn check_one_source_per_remote_key(
    ps: &PushSecret,
    ctx: &Context,
    ns: &str,
    targets: &[Target],
    sources: &SourceData,
) -> Result<(), Failure> {
    for t in targets {
        let store = Store { name: &t.store.name(), kind: t.store.kind(), labels: t.store.labels() };
        let mut pushed_from: HashMap<String, &str> = HashMap::new();
        for (name, data) in sources {
            for p in plan(&ps.spec, store, data, &ctx.renders, ns)
                .await
                .map_err(|e| format!("{}: Secret {name:?}: {e}", t.key))?
            {
                let remote = &p.entry.match_.remote_ref;
                let id = remote_id(&remote.remote_key, remote.property.as_deref());
                if let Some(other) = pushed_from.insert(id.clone(), name).filter(|other| other != name) {
                    return Err(format!(
                        "{}: Secrets {other:?} and {name:?} both push remote key {id:?}; nothing was pushed. Select \
                         Secrets that push to different remote keys",
                        t.key
                    )
                    .into());
                }
            }
        }
    }
    Ok(())
}

async fn push_to(
    ps: &PushSecret,
    ctx: &Context,
    ns: &str,
    t: &Target,
    secret_data: &HashMap<String, Vec<u8>>,
) -> Result<BTreeMap<String, PushSecretData>, Failure> {
    let client =
        ctx.manager.client_for_store(&t.store, ns, Need::Write).await.map_err(|e| format!("{}: {e}", t.key))?;
    if t.requested_kind.is_none() {
        tracing::debug!(store = %t.key, "secretStoreRefs kind omitted: a SecretStore, as upstream");
    }
    let store = Store { name: &t.store.name(), kind: t.store.kind(), labels: t.store.labels() };
    let pushes = plan(&ps.spec, store, secret_data, &ctx.renders, ns).await.map_err(|e| format!("{}: {e}", t.key))?;
    let mut entries = BTreeMap::new();
    for Push { origin, entry: d, data: secret_data } in pushes {
        let remote = &d.match_.remote_ref;
        // The tenant boundary: only an operator-owned configuration may send a push elsewhere
        // (the provider checks it again, with the configuration in hand).
        let requested = d.metadata.as_ref().map(push_metadata_remote_namespace).transpose();
        let requested = requested.map_err(|e| format!("{}: {origin}.metadata: {e}", t.key))?.flatten();
        check_push_override(client.owner(), requested.as_deref())
            .map_err(|e| format!("{}: {origin}.metadata: {e}", t.key))?;
        // The metadata travels as JSON bytes, exactly as written in the manifest.
        let metadata = metadata_bytes(&d).map_err(|e| format!("{origin}.metadata: {e}"))?;
        let remote_ref = remote_ref(&d, &metadata);
        let skip = ps.spec.update_policy == PushSecretUpdatePolicy::IfNotExists
            && client
                .secret_exists(remote_ref.clone())
                .await
                .map_err(|e| Failure::call(&client, format!("{}: {origin} SecretExists", t.key), &e))?;
        if !skip {
            let data = pb::PushSecretData {
                metadata,
                secret_key: d.match_.secret_key.clone().unwrap_or_default(),
                remote_key: remote.remote_key.clone(),
                property: remote.property.clone().unwrap_or_default(),
            };
            client
                .push_secret(Arc::unwrap_or_clone(secret_data), data)
                .await
                .map_err(|e| Failure::call(&client, format!("{}: {origin} PushSecret", t.key), &e))?;
        }
        entries.insert(remote_id(&remote.remote_key, remote.property.as_deref()), d);
    }
    Ok(entries)
}

/// The metadata as sent: its JSON text as kept (never decoded here), or nothing.
fn metadata_bytes(d: &PushSecretData) -> Result<Vec<u8>, keyward_crds::free_json::FreeJsonError> {
    d.metadata.as_ref().map_or(Ok(Vec::new()), |m| m.text().map(|t| t.as_bytes().to_vec()))
}

/// The remote reference of an entry. It carries the entry's metadata so that SecretExists and
/// DeleteSecret act where the push wrote (a remoteNamespace override included), never on a
/// same-named value elsewhere.
fn remote_ref(d: &PushSecretData, metadata: &[u8]) -> pb::PushSecretRemoteRef {
    let r = &d.match_.remote_ref;
    pb::PushSecretRemoteRef {
        remote_key: r.remote_key.clone(),
        property: r.property.clone().unwrap_or_default(),
        metadata: metadata.to_vec(),
    }
}

/// Deletes remote values recorded in `previous` and absent from `current`.
async fn delete_remote(ctx: &Context, ns: &str, previous: &Synced, current: &Synced) -> Result<(), Failure> {
    for (store_key, entries) in previous {
        let gone: Vec<&PushSecretData> = entries
            .iter()
            .filter(|(id, _)| current.get(store_key).is_none_or(|c| !c.contains_key(*id)))
            .map(|(_, d)| d)
            .collect();
        if gone.is_empty() {
            continue;
        }
        let (kind, name) = store_key.split_once('/').ok_or_else(|| format!("malformed store key {store_key:?}"))?;
        // Every kind a push can go through, as `stores.rs` writes the key.
        let kind: StoreKind = kind.parse().map_err(|e| format!("{e} in status key {store_key:?}"))?;
        let (client, _) =
            ctx.manager.client_for(kind, name, ns, Need::Write).await.map_err(|e| format!("{store_key}: {e}"))?;
        for d in gone {
            let r = &d.match_.remote_ref;
            // The metadata recorded with the push says where it wrote.
            let metadata = metadata_bytes(d).map_err(|e| format!("{store_key}: {}: metadata: {e}", r.remote_key))?;
            client
                .delete_secret(remote_ref(d, &metadata))
                .await
                .map_err(|e| Failure::call(&client, format!("{store_key}: DeleteSecret {}", r.remote_key), &e))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_ids_separate_properties() {
        assert_eq!(remote_id("db", None), "db");
        assert_eq!(remote_id("db", Some("")), "db");
        assert_eq!(remote_id("db", Some("user")), "db/user");
    }
}

#[cfg(test)]
mod api_tests;
