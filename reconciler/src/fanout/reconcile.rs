//! One reconcile of a [`FanOut`] owner: compute the selected namespaces, remove its children
//! where it no longer selects, write the child where it does (unless a store refuses the
//! namespace or another object of that name is there), and report `provisionedNamespaces`,
//! `failedNamespaces` and `Ready`. With a finalizer, it is released on deletion once the
//! children are deleted; without one, Kubernetes' garbage collector deletes them.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use keyward_crds::StoreKind;
use keyward_crds::cluster_external_secret::{ClusterExternalSecretNamespaceFailure, reason};
use keyward_crds::rules::{NamespaceView, parse_go_duration};
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::controller::Action;
use kube::runtime::finalizer::{Event as FinalizerEvent, finalizer};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Resource, ResourceExt};
use serde_json::{Value, json};

use super::index::Applied;
use super::{FanContext, FanOut, FanStatus};
use crate::conditions;

/// Namespaces written at once.
const PARALLEL_WRITES: usize = 8;

/// Failures that abort a reconcile; the controller retries them.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API server failed.
    #[error(transparent)]
    Kube(#[from] kube::Error),
    /// Adding or removing the finalizer failed, or the work inside it.
    #[error(transparent)]
    Finalizer(Box<kube::runtime::finalizer::Error<Error>>),
    /// Some children could not be deleted; the finalizer stays.
    #[error("{0}")]
    Cleanup(String),
}

/// The reconcile entry point.
pub async fn reconcile<P: FanOut>(owner: Arc<P>, cx: Arc<FanContext<P>>) -> Result<Action, Error> {
    let (name, started) = (owner.name_any(), Instant::now());
    let cx = &cx;
    let result = match P::FINALIZER {
        Some(name) => {
            let api: Api<P> = Api::all(cx.ctx.client.clone());
            finalizer(&api, name, owner, |event| async move {
                match event {
                    FinalizerEvent::Apply(owner) => provision(owner, cx).await,
                    FinalizerEvent::Cleanup(owner) => cleanup(owner, cx).await,
                }
            })
            .await
            .map_err(|e| Error::Finalizer(Box::new(e)))
        }
        // Being deleted: the garbage collector deletes its children.
        None if owner.meta().deletion_timestamp.is_some() => Ok(Action::await_change()),
        None => provision(owner, cx).await,
    };
    P::series(&cx.ctx.metrics).set_duration("", &name, started.elapsed());
    cx.forget_if_gone(&name);
    result
}

/// Whether `child` is controlled by the `P` named `owner` (a label alone does not count: anyone
/// who may edit the child may label it).
pub fn controlled_by<P: FanOut>(child: &impl Resource, owner: &str) -> bool {
    child.meta().owner_references.iter().flatten().any(|o| {
        o.controller == Some(true)
            && o.kind == P::KIND
            && o.api_version.starts_with("external-secrets.io/")
            && o.name == owner
    })
}

/// How writing one namespace ended.
enum Outcome {
    /// The namespace holds the current child.
    Provisioned,
    /// Not written, by rule (refused store, foreign object); retried on `refreshTime`.
    Refused(String),
    /// The API server failed; retried with backoff.
    Failed(String),
}

/// The manifest applied in every selected namespace (the namespace is added per write): the
/// owner's, with its controller reference.
pub fn desired<P: FanOut>(owner: &P, child_name: &str) -> Value {
    let mut body = owner.desired(child_name);
    body["metadata"]["name"] = json!(child_name);
    body["metadata"]["ownerReferences"] = json!([{
        "apiVersion": P::api_version(&()),
        "kind": P::KIND,
        "name": owner.name_any(),
        "uid": owner.uid().unwrap_or_default(),
        "controller": true,
        "blockOwnerDeletion": true,
    }]);
    body
}

/// A hash of a manifest.
pub fn hash_of(v: &Value) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    v.to_string().hash(&mut h);
    h.finish()
}

/// Writes the child into one selected namespace, unless it is current already.
async fn provision_one<P: FanOut>(
    cx: &FanContext<P>,
    owner: &P,
    ns: &str,
    labels: &BTreeMap<String, String>,
    body: &Value,
    hash: u64,
) -> Outcome {
    let (owner_name, child_kind) = (owner.name_any(), P::Child::kind(&()));
    let name = body["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let view = NamespaceView { name: ns, labels };
    let refusal = owner.refused(view, &|kind, store| match kind {
        StoreKind::ClusterProvider => {
            cx.cluster_providers.get(&ObjectRef::new(store)).map(|cp| Cow::Owned(cp.spec.conditions.clone()))
        }
        StoreKind::ClusterSecretStore => {
            cx.cluster_secret_stores.get(&ObjectRef::new(store)).map(|s| Cow::Owned(s.spec.store.conditions.clone()))
        }
        _ => None,
    });
    if let Some(denied) = refusal {
        tracing::info!(kind = P::KIND, owner = %owner_name, namespace = ns, detail = %denied.detail(), "namespace refused");
        return Outcome::Refused(format!("{denied}; no {child_kind} is written in this namespace"));
    }
    let key = ObjectRef::<P::Child>::new(&name).within(ns);
    let api: Api<P::Child> = Api::namespaced(cx.ctx.client.clone(), ns);
    let existing = match cx.child(&key) {
        Some(child) => Some(child),
        // Not cached (yet): ask, so a foreign object created a moment ago is not taken over.
        None => match api.get_opt(&name).await {
            Ok(found) => found.map(Arc::new),
            Err(e) => return Outcome::Failed(format!("reading {child_kind} {ns}/{name}: {e}")),
        },
    };
    if let Some(child) = &existing {
        if !controlled_by::<P>(child.as_ref(), &owner_name) {
            return Outcome::Refused(format!(
                "{child_kind} {ns}/{name} exists and is not managed by {} {owner_name:?}; it is left alone: delete or \
                 rename it, or set spec.{}",
                P::KIND,
                P::NAME_FIELD
            ));
        }
        let current = Applied { hash, uid: child.uid(), generation: child.meta().generation };
        if cx.last_applied(&key).as_ref() == Some(&current) && P::owner_of(child).as_ref() == Some(&owner_name) {
            return Outcome::Provisioned;
        }
    }
    let mut manifest = body.clone();
    manifest["metadata"]["namespace"] = json!(ns);
    match api.patch(&name, &PatchParams::apply(P::FIELD_MANAGER).force(), &Patch::Apply(manifest)).await {
        Ok(written) => {
            cx.record_applied(key, Applied { hash, uid: written.uid(), generation: written.meta().generation });
            Outcome::Provisioned
        }
        // Admission denials count as transient too: the refusals this controller can foresee
        // were decided above, so what is left (a webhook that does not know a new namespace's
        // labels yet, a conflict) is worth retrying soon.
        Err(kube::Error::Api(e)) => Outcome::Failed(format!("writing {child_kind} {ns}/{name}: {}", e.message)),
        Err(e) => Outcome::Failed(format!("writing {child_kind} {ns}/{name}: {e}")),
    }
}

/// Deletes `child` if it is still the one controlled by `owner` (by uid, so an object created
/// in its place is never deleted).
async fn delete_owned<P: FanOut>(cx: &FanContext<P>, child: &ObjectRef<P::Child>, owner: &str) -> Result<(), String> {
    let Some(cached) = cx.child(child) else { return Ok(()) };
    if !controlled_by::<P>(cached.as_ref(), owner) {
        return Ok(());
    }
    let (ns, kind) = (child.namespace.clone().unwrap_or_default(), P::Child::kind(&()));
    let api: Api<P::Child> = Api::namespaced(cx.ctx.client.clone(), &ns);
    let params = DeleteParams {
        preconditions: Some(Preconditions { uid: cached.uid(), resource_version: None }),
        ..DeleteParams::default()
    };
    match api.delete(&child.name, &params).await {
        Ok(_) => {
            tracing::info!(kind = P::KIND, owner, namespace = %ns, name = %child.name, "{kind} deleted");
            Ok(())
        }
        // Gone already, or replaced by another object (the uid precondition failed).
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(()),
        Err(e) => Err(format!("deleting {kind} {ns}/{}: {e}", child.name)),
    }
}

/// The selected namespaces that exist and are not terminating, with their labels.
fn selected_namespaces<P: FanOut>(cx: &FanContext<P>, owner: &P) -> BTreeMap<String, BTreeMap<String, String>> {
    cx.namespaces
        .state()
        .iter()
        .filter(|ns| ns.metadata.deletion_timestamp.is_none())
        .filter_map(|ns| {
            let name = ns.name_any();
            let view = NamespaceView { name: &name, labels: ns.labels() };
            owner.selects(view).then(|| (name.clone(), ns.labels().clone()))
        })
        .collect()
}

/// The `Ready` message of a reconcile that wrote `provisioned` of `selected` namespaces.
fn ready_message(
    child: &str,
    name: &str,
    failed: &BTreeMap<String, String>,
    selected: usize,
    written: usize,
) -> String {
    if failed.is_empty() {
        return format!("{child} {name:?} is current in {written} namespaces");
    }
    let listed: Vec<&str> = failed.keys().map(String::as_str).take(10).collect();
    let more = failed.len().saturating_sub(listed.len());
    let more = if more > 0 { format!(" and {more} more") } else { String::new() };
    format!(
        "{child} {name:?} could not be written in {} of {selected} selected namespaces ({}{more}); see \
         status.failedNamespaces",
        failed.len(),
        listed.join(", ")
    )
}

async fn provision<P: FanOut>(owner: Arc<P>, cx: &FanContext<P>) -> Result<Action, Error> {
    let owner_name = owner.name_any();
    let key = FanContext::<P>::key(&owner_name);
    let previous = owner.status();
    if let Err(errs) = owner.validate() {
        // Nothing is created or deleted on the strength of an invalid spec.
        let status = FanStatus {
            conditions: vec![conditions::ready(
                &previous.conditions,
                false,
                reason::INVALID_SPEC,
                format!("spec is invalid, nothing was changed: {errs}"),
                owner.meta().generation,
            )],
            ..previous.clone()
        };
        write_status(cx, owner.as_ref(), &previous, status).await?;
        crate::controller_metrics::failed();
        return Ok(Action::await_change());
    }
    let child_name = owner.child_name();
    let selected = selected_namespaces(cx, owner.as_ref());
    let mut failed: BTreeMap<String, String> = BTreeMap::new();
    let mut transient = false;

    // What it no longer selects, or wrote under another name, goes first.
    for child in cx.owned_by(&owner_name) {
        let ns = child.namespace.clone().unwrap_or_default();
        if child.name == child_name && selected.contains_key(&ns) {
            continue;
        }
        if let Err(e) = delete_owned(cx, &child, &owner_name).await {
            failed.insert(ns, e);
            transient = true;
        }
    }

    let body = desired(owner.as_ref(), &child_name);
    let hash = hash_of(&body);
    // The writes are built up front (a future does nothing until polled) and run a few at a
    // time, in namespace order.
    let writes: Vec<_> =
        selected.iter().map(|(ns, labels)| provision_one(cx, owner.as_ref(), ns, labels, &body, hash)).collect();
    let outcomes: Vec<Outcome> = futures::stream::iter(writes).buffered(PARALLEL_WRITES).collect().await;
    let mut provisioned = BTreeSet::new();
    for (ns, outcome) in selected.keys().cloned().zip(outcomes) {
        match outcome {
            Outcome::Provisioned => {
                provisioned.insert(ns);
            }
            Outcome::Refused(why) => {
                failed.insert(ns, why);
            }
            Outcome::Failed(why) => {
                failed.insert(ns, why);
                transient = true;
            }
        }
    }

    let ready = failed.is_empty();
    let message = ready_message(&P::Child::kind(&()), &child_name, &failed, selected.len(), provisioned.len());
    let status = FanStatus {
        child_name: Some(child_name),
        failed_namespaces: failed
            .into_iter()
            .map(|(namespace, reason)| ClusterExternalSecretNamespaceFailure { namespace, reason: Some(reason) })
            .collect(),
        provisioned_namespaces: provisioned.into_iter().collect(),
        conditions: vec![conditions::ready(
            &previous.conditions,
            ready,
            if ready { P::PROVISIONED } else { reason::NAMESPACES_FAILED },
            message,
            owner.meta().generation,
        )],
    };
    write_status(cx, owner.as_ref(), &previous, status).await?;
    if !ready {
        crate::controller_metrics::failed();
    }

    if transient {
        return Ok(Action::requeue(cx.ctx.failure_delay(&key)));
    }
    cx.ctx.clear_failures(&key);
    // The webhook refuses an invalid refreshTime; one that slipped in means "on change only".
    match parse_go_duration(owner.refresh_time()) {
        Ok(every) if !every.is_zero() => Ok(Action::requeue(every)),
        _ => Ok(Action::await_change()),
    }
}

/// Writes the status when it says something new, and publishes an event when the set of failed
/// namespaces changed.
async fn write_status<P: FanOut>(
    cx: &FanContext<P>,
    owner: &P,
    previous: &FanStatus,
    status: FanStatus,
) -> Result<(), kube::Error> {
    if let Some(ready) = status.conditions.first() {
        P::series(&cx.ctx.metrics).set_ready("", &owner.name_any(), ready.status == "True");
    }
    let same = previous.child_name == status.child_name
        && previous.failed_namespaces == status.failed_namespaces
        && previous.provisioned_namespaces == status.provisioned_namespaces
        && conditions::same(&previous.conditions, &status.conditions);
    if same {
        return Ok(());
    }
    // Every list is written, empty ones too, so a merge patch clears what is no longer true.
    let patch = json!({"status": {
        P::NAME_FIELD: status.child_name,
        "failedNamespaces": status.failed_namespaces,
        "provisionedNamespaces": status.provisioned_namespaces,
        "conditions": status.conditions,
    }});
    let api: Api<P> = Api::all(cx.ctx.client.clone());
    api.patch_status(&owner.name_any(), &PatchParams::default(), &Patch::Merge(patch)).await?;
    let failed_before: Vec<&str> = previous.failed_namespaces.iter().map(|f| f.namespace.as_str()).collect();
    let failed_now: Vec<&str> = status.failed_namespaces.iter().map(|f| f.namespace.as_str()).collect();
    if failed_before != failed_now
        && let Some(ready) = status.conditions.first()
    {
        let warning = ready.status != "True";
        let note = ready.message.clone().unwrap_or_default();
        let reason = ready.reason.as_deref().unwrap_or_default();
        cx.ctx.event(&owner.object_ref(&()), warning, reason, "Provision", note).await;
    }
    Ok(())
}

/// On deletion (with a finalizer): deletes every child it controls; a failure keeps the
/// finalizer.
async fn cleanup<P: FanOut>(owner: Arc<P>, cx: &FanContext<P>) -> Result<Action, Error> {
    let owner_name = owner.name_any();
    let mut errors = Vec::new();
    for child in cx.owned_by(&owner_name) {
        if let Err(e) = delete_owned(cx, &child, &owner_name).await {
            errors.push(e);
        }
    }
    if errors.is_empty() { Ok(Action::await_change()) } else { Err(Error::Cleanup(errors.join("; "))) }
}
