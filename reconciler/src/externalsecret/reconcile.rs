//! One reconcile of an ExternalSecret: decide whether a refresh is due, fetch, write the target
//! Secret according to the creation and deletion policies, and report status, events and
//! metrics. A failure never touches the target: it keeps its last good data.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use keyward_crds::external_secret::{CreationPolicy, DeletionPolicy, reason};
use keyward_crds::rules::{WindowGate, parse_go_duration, window_gate};
use keyward_crds::{ExternalSecret, ExternalSecretStatus, LocalObjectReference};
use kube::api::{Patch, PatchParams};
use kube::core::PartialObjectMeta;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Resource, ResourceExt};
use serde_json::json;

use super::fetch::{FetchError, fetch};
use super::generic::{GenericTarget, Refused, desired as desired_generic, resolve};
use super::refresh::{Decision, RefreshState, decide, jitter, object_hash, read_max_age};
use super::render::{RenderFor, Rendered, load_sources, render_for_in_pool};
use super::target::{
    FIELD_MANAGER, MANAGED_LABEL, data_hash, desired, owned_by, up_to_date, with_rendered_metadata, written_by_upstream,
};
use crate::caches::Packed;
use crate::caches::packed::UnpackError;
use crate::conditions;
use crate::context::{Context, ObjectKey};
use crate::renders::{RenderError, TEMPLATE_BUDGET_EXCEEDED};
use keyward_provider_client::Waitable;

/// A successful sync.
struct Synced {
    reason: &'static str,
    message: String,
    /// Event to publish when something changed: (reason, note).
    event: Option<(&'static str, String)>,
    /// The data hash the target Secret now carries; `None` when no Secret was written.
    data_hash: Option<String>,
}

/// A failed sync; the target is left as it was.
struct Failed {
    reason: &'static str,
    message: String,
    /// The provider that did not answer, when that is why: the object waits for it.
    waiting_on: Option<Waitable>,
    /// Nothing failed yet: no render slot was free. Retried with backoff, status untouched.
    busy: bool,
}

impl Failed {
    fn new(reason: &'static str, message: String) -> Self {
        Failed { reason, message, waiting_on: None, busy: false }
    }

    /// A render that gave no result: a budget overrun has a reason of its own.
    fn render(e: RenderError) -> Self {
        let keeps = "; the target Secret keeps its last data";
        match e {
            RenderError::Busy(_) => Failed { busy: true, ..Failed::new(reason::SECRET_SYNCED_ERROR, e.to_string()) },
            RenderError::OverBudget { .. } => Failed::new(TEMPLATE_BUDGET_EXCEEDED, format!("{e}{keeps}")),
            RenderError::Failed(_) => Failed::new(reason::SECRET_SYNCED_ERROR, format!("template failed: {e}{keeps}")),
        }
    }
}

/// Errors that abort the reconcile (API trouble); the controller retries them.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API server failed.
    #[error(transparent)]
    Kube(#[from] kube::Error),
    /// The cached object could not be decoded.
    #[error(transparent)]
    Cache(#[from] UnpackError),
}

/// The target Secret as it stands, metadata only: from the managed-Secret cache for the
/// policies that label it (no API call; a copy with the label the cache leaves out), read once for `Merge` (a Secret someone else owns is
/// not labelled, so not cached), never for `None`.
async fn existing_target(
    es: &ExternalSecret,
    ctx: &Context,
    secrets: &Api<Secret>,
) -> Result<Option<Arc<PartialObjectMeta<Secret>>>, kube::Error> {
    let name = es.target_secret_name();
    match es.spec.target.creation_policy {
        CreationPolicy::None => Ok(None),
        CreationPolicy::Merge => Ok(secrets.get_metadata_opt(&name).await?.map(Arc::new)),
        CreationPolicy::Owner | CreationPolicy::Orphan | CreationPolicy::CreateOrMerge => {
            let ns = es.namespace().unwrap_or_default();
            let cached = ctx.caches.managed_secrets.get(&ObjectRef::new(&name).within(&ns));
            Ok(cached.map(|s| Arc::new(s.unpack())))
        }
    }
}

/// The controller's entry point: the cached ExternalSecret, decoded.
pub async fn reconcile_cached(es: Arc<Packed<ExternalSecret>>, ctx: Arc<Context>) -> Result<Action, Error> {
    reconcile(Arc::new(es.unpack()?), ctx).await
}

/// The reconcile entry point.
pub async fn reconcile(es: Arc<ExternalSecret>, ctx: Arc<Context>) -> Result<Action, Error> {
    let started = Instant::now();
    let ns = es.namespace().unwrap_or_default();
    let name = es.name_any();
    let key = ObjectKey::external_secret(&ns, &name);
    if es.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    // A store naming another controller in spec.controller is that controller's, and so is an
    // ExternalSecret using it: nothing is written here, not even status (as upstream).
    let refs: Vec<(Option<keyward_crds::StoreKind>, &str)> =
        es.store_refs().into_iter().map(|(_, r)| (r.kind, r.name.as_str())).collect();
    if !ctx.manager.serves_stores(&refs, &ns).await {
        tracing::debug!(namespace = %ns, name = %name, "a store it uses names another controller; left alone");
        return Ok(Action::await_change());
    }
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &ns);
    let policy = es.spec.target.creation_policy;
    let target_name = es.target_secret_name();
    let status = es.status.clone().unwrap_or_default();
    let hash = object_hash(&es);
    // A generic target is resolved and checked against the operator's rule before anything is
    // fetched; a refusal is said once, not retried until the ExternalSecret changes.
    let generic = match es.spec.target.manifest.as_ref().filter(|m| !m.is_secret()) {
        None => None,
        Some(m) => match resolve(&ctx.client, ctx.settings.generic_targets, &ns, m).await {
            Ok(target) => Some(target),
            Err(refused) => {
                let retry = matches!(refused, Refused::Discovery(_));
                let (Refused::Rule(message) | Refused::Discovery(message)) = refused;
                let failed = Failed::new(reason::SECRET_SYNCED_ERROR, message);
                return report_failure(&es, &ctx, status, failed, retry, false).await;
            }
        },
    };
    let existing = match &generic {
        Some(target) => target.existing(&target_name).await?,
        None => existing_target(&es, &ctx, &secrets).await?,
    };
    let interval = match parse_go_duration(&es.spec.refresh_interval) {
        Ok(d) => d,
        Err(e) => {
            let failed = Failed::new(reason::SECRET_SYNCED_ERROR, format!("spec.refreshInterval: {e}"));
            return report_failure(&es, &ctx, status, failed, false, existing.is_some()).await;
        }
    };
    // The last refresh is the later of the last one written to status and the last one this
    // process remembers (a no-change refresh writes nothing; a written one may not be cached yet).
    let written = status.refresh_time.as_ref().map(|t| {
        let elapsed = Timestamp::now().duration_since(t.0);
        Duration::try_from(elapsed).unwrap_or(Duration::ZERO)
    });
    let remembered = ctx.last_refresh(&key);
    let unwritten = remembered.map(|r| r.at.elapsed());
    let since_last_refresh = match (written, unwritten) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let jitter = jitter(es.uid().as_deref().unwrap_or(&name), interval);
    let state = RefreshState {
        policy: es.spec.refresh_policy,
        interval,
        since_last_refresh,
        // What this process remembers having synced is never older than the cached status: a
        // stale cache must not count as a spec change (which would read the store anew).
        synced_hash: match remembered {
            Some(r) if r.synced(&hash) => Some(hash.as_str()),
            _ => status.synced_resource_version.as_deref(),
        },
        current_hash: &hash,
        target_missing: policy.manages_target() && existing.is_none(),
        jitter,
        window: es.spec.sync_windows.as_ref().map_or(WindowGate::Open, |w| window_gate(w, Timestamp::now())),
    };
    match decide(state) {
        Decision::Wait(d) => return Ok(Action::requeue(d)),
        Decision::Never => return Ok(Action::await_change()),
        Decision::Sync => {}
    }

    ctx.metrics.external_secrets.sync_started(&ns, &name);
    let writer = match &generic {
        Some(target) => Writer::Generic(target),
        None => Writer::Secret(&secrets),
    };
    let outcome = sync(&es, &ctx, &writer, existing.as_deref(), read_max_age(&state)).await;
    let action = match outcome {
        Ok(synced) => {
            ctx.clear_failures(&key);
            let conditions = vec![conditions::ready(
                &status.conditions,
                true,
                synced.reason,
                synced.message,
                es.metadata.generation,
            )];
            let new_status = ExternalSecretStatus {
                refresh_time: Some(Time(Timestamp::now())),
                synced_resource_version: Some(hash.clone()),
                conditions,
                // A binding names a Secret (Pod injection reads it); a generic target is none.
                binding: (policy != CreationPolicy::None && generic.is_none())
                    .then_some(LocalObjectReference { name: target_name }),
                synced_data_hash: synced.data_hash,
            };
            // A refresh that changed nothing writes nothing: refreshTime is the time of the
            // last sync that changed the status.
            if !same_status(&status, &new_status) {
                patch_status(&es, &ctx, &new_status).await?;
            }
            ctx.refreshed(&key, Instant::now(), &hash);
            ctx.metrics.external_secrets.set_ready(&ns, &name, true);
            if let Some((event_reason, note)) = synced.event {
                ctx.event(&es.object_ref(&()), false, event_reason, "Sync", note).await;
            }
            let next = decide(RefreshState {
                since_last_refresh: Some(Duration::ZERO),
                synced_hash: Some(&hash),
                target_missing: false,
                ..state
            });
            match next {
                Decision::Wait(d) => Action::requeue(d),
                Decision::Never | Decision::Sync => Action::await_change(),
            }
        }
        Err(failed) if failed.busy => {
            // Another render of this namespace holds its slot: try again later, quietly.
            tracing::debug!(namespace = %ns, name = %name, message = %failed.message, "render deferred");
            Action::requeue(ctx.failure_delay(&key))
        }
        Err(mut failed) => {
            ctx.metrics.external_secrets.sync_failed(&ns, &name);
            match failed.waiting_on.take() {
                Some(provider) => ctx.manager.recovery().wait(key.clone(), provider),
                None => ctx.manager.recovery().forget(&key),
            }
            report_failure(&es, &ctx, status, failed, true, existing.is_some()).await?
        }
    };
    ctx.metrics.external_secrets.set_duration(&ns, &name, started.elapsed());
    Ok(action)
}

/// Whether two statuses say the same thing, apart from the refresh time.
fn same_status(old: &ExternalSecretStatus, new: &ExternalSecretStatus) -> bool {
    conditions::same(&old.conditions, &new.conditions)
        && old.synced_resource_version == new.synced_resource_version
        && old.binding == new.binding
        && old.synced_data_hash == new.synced_data_hash
        && old.refresh_time.is_some()
}

/// Reports a failed sync. `target_present`: whether the target Secret exists. Everything in the
/// status keeps describing the last good sync, except that a binding to a Secret that is gone
/// is dropped: injection admits Pods of a failing ExternalSecret only while its binding says
/// the Secret is there with its last good data.
async fn report_failure(
    es: &ExternalSecret,
    ctx: &Context,
    status: ExternalSecretStatus,
    failed: Failed,
    retry: bool,
    target_present: bool,
) -> Result<Action, Error> {
    let ns = es.namespace().unwrap_or_default();
    let name = es.name_any();
    crate::controller_metrics::failed();
    tracing::info!(namespace = %ns, name = %name, reason = failed.reason, message = %failed.message, "sync failed");
    let conditions = vec![conditions::ready(
        &status.conditions,
        false,
        failed.reason,
        failed.message.clone(),
        es.metadata.generation,
    )];
    let binding = status.binding.clone().filter(|_| target_present);
    let changed = !conditions::same(&status.conditions, &conditions) || binding != status.binding;
    // refreshTime, syncedResourceVersion and syncedDataHash keep describing the last good sync.
    let new_status = ExternalSecretStatus { conditions, binding, ..status };
    if changed {
        patch_status(es, ctx, &new_status).await?;
        ctx.event(&es.object_ref(&()), true, failed.reason, "Sync", failed.message).await;
    }
    ctx.metrics.external_secrets.set_ready(&ns, &name, false);
    Ok(if retry {
        Action::requeue(ctx.failure_delay(&ObjectKey::external_secret(&ns, &name)))
    } else {
        Action::await_change()
    })
}

async fn patch_status(es: &ExternalSecret, ctx: &Context, status: &ExternalSecretStatus) -> Result<(), Error> {
    let api: Api<ExternalSecret> = Api::namespaced(ctx.client.clone(), &es.namespace().unwrap_or_default());
    let mut body = json!({ "status": status });
    // A merge patch keeps fields it does not mention: a Secret that is no longer written must
    // not keep advertising its old hash.
    if status.synced_data_hash.is_none() {
        body["status"]["syncedDataHash"] = serde_json::Value::Null;
    }
    if status.binding.is_none() {
        body["status"]["binding"] = serde_json::Value::Null;
    }
    api.patch_status(&es.name_any(), &PatchParams::default(), &Patch::Merge(body)).await?;
    Ok(())
}

/// Where a sync writes: the target Secret, or a generic target's object.
enum Writer<'a> {
    Secret(&'a Api<Secret>),
    Generic(&'a GenericTarget),
}

impl Writer<'_> {
    /// The kind written, for messages.
    fn noun(&self) -> &str {
        match self {
            Writer::Secret(_) => "Secret",
            Writer::Generic(g) => g.kind(),
        }
    }

    async fn delete(&self, name: &str) -> Result<(), kube::Error> {
        match self {
            Writer::Secret(api) => api.delete(name, &Default::default()).await.map(drop),
            Writer::Generic(g) => g.api.delete(name, &Default::default()).await.map(drop),
        }
    }
}

async fn sync(
    es: &ExternalSecret,
    ctx: &Context,
    writer: &Writer<'_>,
    existing: Option<&PartialObjectMeta<Secret>>,
    max_age: Duration,
) -> Result<Synced, Failed> {
    let target = &es.spec.target;
    let target_name = es.target_secret_name();
    let noun = writer.noun();
    let err = |message: String| Failed::new(reason::SECRET_SYNCED_ERROR, message);
    let fetched = fetch(&ctx.client, &ctx.manager, &ctx.renders, es, ctx.settings.fetch_concurrency, max_age)
        .await
        .map_err(|e| {
            let kind = match &e {
                FetchError::Config(_) => "invalid ExternalSecret",
                FetchError::Client { .. } => "cannot use store",
                FetchError::Provider { .. } => "provider error",
                FetchError::Render { .. } => "rewrite",
                FetchError::Generator { .. } => "generator",
            };
            // A store naming a provider this controller lacks says so in the reason too.
            let reason = match &e {
                FetchError::Client { error, .. } => error.reason().unwrap_or(reason::SECRET_SYNCED_ERROR),
                _ => reason::SECRET_SYNCED_ERROR,
            };
            let message = format!("{kind}: {e}; the target Secret keeps its last data");
            match e {
                FetchError::Render { entry, error } => Failed::render(error.context(&format!("{entry}: "))),
                e => Failed { reason, message, waiting_on: e.waiting_on(), busy: false },
            }
        })?;

    if target.creation_policy == CreationPolicy::None {
        return Ok(Synced {
            reason: reason::SECRET_SYNCED,
            message: format!("{} values fetched; creationPolicy None writes no {noun}", fetched.data.len()),
            event: None,
            data_hash: None,
        });
    }
    if target.creation_policy == CreationPolicy::Merge && existing.is_none() {
        return Err(Failed::new(
            reason::SECRET_MISSING,
            format!("{noun} {target_name:?} does not exist; creationPolicy Merge never creates it"),
        ));
    }

    if fetched.all_gone() && target.deletion_policy == DeletionPolicy::Delete {
        let Some(existing) = existing else {
            return Ok(Synced {
                reason: reason::SECRET_DELETED,
                message: format!("every remote value is gone; no {noun} (deletionPolicy Delete)"),
                event: None,
                data_hash: None,
            });
        };
        // Only delete what this ExternalSecret created.
        let ours = owned_by(existing, es) || existing.labels().get(MANAGED_LABEL).map(String::as_str) == Some("true");
        if ours && target.creation_policy != CreationPolicy::Merge {
            writer.delete(&target_name).await.map_err(|e| err(format!("deleting {noun} {target_name:?}: {e}")))?;
            return Ok(Synced {
                reason: reason::SECRET_DELETED,
                message: format!("every remote value is gone; {noun} {target_name:?} deleted (deletionPolicy Delete)"),
                event: Some((reason::SECRET_DELETED, format!("{noun} {target_name:?} deleted"))),
                data_hash: None,
            });
        }
    }

    let rendered = match &target.template {
        None => None,
        Some(template) => {
            let ns = es.namespace().unwrap_or_default();
            let sources = load_sources(&ctx.client, &ns, template)
                .await
                .map_err(|e| err(format!("cannot load templates: {e}; the target Secret keeps its last data")))?;
            // Rendered on a render thread with a CPU budget and a time limit: a template is
            // tenant input and must never hold the async workers other tenants sync on.
            let purpose = if matches!(writer, Writer::Generic(_)) { RenderFor::Generic } else { RenderFor::Secret };
            let r = render_for_in_pool(&ctx.renders, &ns, purpose, template, &sources, &fetched.data)
                .await
                .map_err(Failed::render)?;
            Some(r)
        }
    };
    let data = rendered.as_ref().map_or(&fetched.data, |r| &r.data);
    let secrets = match writer {
        Writer::Secret(secrets) => *secrets,
        Writer::Generic(g) => {
            return write_generic(es, ctx, g, existing, data, rendered.as_ref(), &fetched.missing).await;
        }
    };
    let mut hash = data_hash(ctx.settings.hash_key, data, target.creation_policy, target.immutable);
    if let Some(r) = &rendered {
        hash = with_rendered_metadata(&hash, r);
    }
    if existing.is_some_and(|existing| {
        up_to_date(existing, es, &hash) || written_by_upstream(existing, es, data, rendered.as_ref())
    }) {
        return Ok(Synced {
            reason: reason::SECRET_SYNCED,
            message: synced_message(&fetched.missing),
            event: None,
            data_hash: Some(hash),
        });
    }
    let body = desired(es, data, &hash, rendered.as_ref());
    secrets.patch(&target_name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(body)).await.map_err(
        |e| match e {
            // The API server refuses new data for an immutable Secret.
            kube::Error::Api(s) if s.code == 422 && s.message.contains("immutable") => err(format!(
                "Secret {target_name:?} is immutable and holds other values; delete it to let the new values be written"
            )),
            e => err(format!("writing Secret {target_name:?}: {e}")),
        },
    )?;
    let (event_reason, verb) = if existing.is_some() { ("Updated", "updated") } else { ("Created", "created") };
    Ok(Synced {
        reason: reason::SECRET_SYNCED,
        message: synced_message(&fetched.missing),
        event: Some((event_reason, format!("Secret {target_name:?} {verb} with {} keys", data.len()))),
        data_hash: Some(hash),
    })
}

fn synced_message(missing: &[String]) -> String {
    synced_message_of("Secret", missing)
}

fn synced_message_of(noun: &str, missing: &[String]) -> String {
    if missing.is_empty() {
        format!("{noun} was synced")
    } else {
        format!("{noun} was synced; gone remotely and removed: {}", missing.join(", "))
    }
}

/// Writes a generic target. It is applied at every sync (server-side apply leaves an object
/// that already holds it untouched, so a hand edit is corrected at the next refresh); an event
/// says when the API server changed it.
async fn write_generic(
    es: &ExternalSecret,
    ctx: &Context,
    target: &GenericTarget,
    existing: Option<&PartialObjectMeta<Secret>>,
    data: &BTreeMap<String, Vec<u8>>,
    rendered: Option<&Rendered>,
    missing: &[String],
) -> Result<Synced, Failed> {
    let (name, kind) = (es.target_secret_name(), target.kind());
    let err = |m: String| Failed::new(reason::SECRET_SYNCED_ERROR, format!("{m}; the {kind} keeps its last data"));
    let body =
        desired_generic(es, &target.manifest, data, rendered).map_err(|e| err(format!("{kind} {name:?}: {e}")))?;
    // The status's data hash covers the whole object written, keyed as a Secret's.
    let whole = BTreeMap::from([(String::new(), serde_json::to_vec(&body).unwrap_or_default())]);
    let hash = data_hash(ctx.settings.hash_key, &whole, es.spec.target.creation_policy, false);
    let before = existing.and_then(|e| e.resource_version());
    let changed =
        target.apply(&name, body, before.as_deref()).await.map_err(|e| err(format!("writing {kind} {name:?}: {e}")))?;
    let (event_reason, verb) = if existing.is_some() { ("Updated", "updated") } else { ("Created", "created") };
    Ok(Synced {
        reason: reason::SECRET_SYNCED,
        message: synced_message_of(kind, missing),
        event: changed.then(|| (event_reason, format!("{kind} {name:?} {verb}"))),
        data_hash: Some(hash),
    })
}

#[cfg(test)]
mod api_tests;
