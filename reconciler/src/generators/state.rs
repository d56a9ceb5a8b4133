//! GeneratorState garbage collection.
//!
//! A GeneratorState records what a generator made that must be cleaned up later, with the
//! deadline after which it may be. No kind Keyward serves keeps state (upstream's cleanup is a
//! no-op for each), so Keyward creates none; this controller collects the ones brought from an
//! External Secrets install:
//!
//! - past `spec.garbageCollectionDeadline`, a state whose `spec.resource` is a kind Keyward
//!   serves is deleted (upstream's finalizer, when present, is removed first: the cleanup it
//!   waits for does nothing for these kinds);
//! - a state of any other kind (Grafana, GitLab, …) is kept: its cleanup revokes a credential
//!   Keyward cannot revoke, and deleting the record would forget the credential. It gets
//!   `Ready=False` (`CleanupNotServed`) and a Warning event, for the operator to revoke the
//!   credential by hand and delete the state;
//! - a state without a deadline is kept; one with a deadline that is not an RFC 3339 time gets
//!   `Ready=False` (`InvalidDeadline`) and is kept;
//! - a state being deleted (its owner went, or someone deleted it) with upstream's finalizer has
//!   the finalizer removed for a served kind, and is reported as above for any other.
//!
//! A state is looked at again at its deadline (at most [`MAX_WAIT`] ahead), not polled. Objects
//! are read into the view of what this controller reads ([`StateObject`]): the free-form
//! `spec.state` is never held, and a malformed field is reported, never fatal to the watch.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use keyward_crds::generators::state::{GENERATOR_STATE_FINALIZER, GENERATOR_STATE_READY};
use keyward_crds::generators::{GENERATOR_GROUP, GeneratorKind};
use keyward_crds::rules::CLUSTER_GENERATOR_KIND;
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Api, Resource, ResourceExt};
use serde_json::{Value, json};

use crate::context::Context;

mod view;
pub use view::StateObject;

/// The furthest ahead a state is looked at again: a deadline further away is reached in steps.
pub const MAX_WAIT: Duration = Duration::from_secs(24 * 60 * 60);

/// Retry delay after an API call failed.
const RETRY: Duration = Duration::from_secs(10);

/// The controller's name in controller-runtime's metrics (upstream's).
const CONTROLLER: &str = "generatorstate";

/// States looked at once: a garbage collector, in no hurry.
const CONCURRENCY: u16 = 2;

/// Reason of `Ready=False` when the kind's cleanup is not served.
pub const REASON_NOT_SERVED: &str = "CleanupNotServed";
/// Reason of `Ready=False` when the deadline cannot be read.
pub const REASON_INVALID_DEADLINE: &str = "InvalidDeadline";
/// Reason of `Ready=True`: the state waits for its deadline (upstream's reason).
pub const REASON_CREATED: &str = "Created";

/// What is known of one GeneratorState for the decision.
#[derive(Debug, Clone, Copy)]
pub struct StateView<'a> {
    /// `spec.garbageCollectionDeadline` as written, if set.
    pub deadline: Option<&'a Value>,
    /// `spec.resource`, if set.
    pub resource: Option<&'a Value>,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// Upstream's finalizer is on the object.
    pub finalized: bool,
}

/// What to do with a GeneratorState.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing, until the object changes: no deadline, or being deleted with nothing to wait for.
    Keep,
    /// Look again in this long: the deadline is ahead.
    Wait(Duration),
    /// Delete it: past its deadline, and its kind's cleanup does nothing.
    Delete,
    /// Remove upstream's finalizer: being deleted, and its kind's cleanup does nothing.
    Release,
    /// Keep it and say why on `Ready=False` (and in a Warning event).
    Report {
        /// The condition's reason.
        reason: &'static str,
        /// The condition's message.
        message: String,
    },
}

/// Whether the generator `resource` names has a cleanup Keyward serves (a no-op, as upstream's
/// for those kinds); if not, why, as the start of a sentence.
pub fn cleanup_served(resource: Option<&Value>) -> Result<(), String> {
    let Some(resource) = resource.and_then(Value::as_object) else {
        return Err("spec.resource is not a generator manifest, so what the state records is unknown".into());
    };
    let Some(kind) = resource.get("kind").and_then(Value::as_str).filter(|k| !k.is_empty()) else {
        return Err("spec.resource names no generator kind, so what the state records is unknown".into());
    };
    if let Some(api_version) = resource.get("apiVersion").and_then(Value::as_str) {
        let group = api_version.split_once('/').map_or("", |(group, _)| group);
        if group != GENERATOR_GROUP {
            return Err(format!(
                "spec.resource is a {kind:?} of {api_version:?}, not a generator of {GENERATOR_GROUP}"
            ));
        }
    }
    // A kind whose CRD is installed but which Keyward does not generate (Grafana, …) is not served.
    if GeneratorKind::parse(kind).is_some_and(GeneratorKind::served) || kind == CLUSTER_GENERATOR_KIND {
        Ok(())
    } else {
        Err(format!("cleanup of generator kind {kind:?} is not served by Keyward"))
    }
}

/// The decision for one GeneratorState at `now`.
pub fn decide(state: StateView<'_>, now: Timestamp) -> Verdict {
    let served = cleanup_served(state.resource);
    if state.deleting {
        return match (state.finalized, served) {
            (false, _) => Verdict::Keep,
            (true, Ok(())) => Verdict::Release,
            (true, Err(why)) => Verdict::Report {
                reason: REASON_NOT_SERVED,
                message: format!(
                    "{why}: its deletion waits on the finalizer {GENERATOR_STATE_FINALIZER}, which Keyward does not \
                     remove for it. Revoke what spec.state records by hand, then remove the finalizer"
                ),
            },
        };
    }
    let Some(deadline) = state.deadline.filter(|d| !d.is_null()) else {
        return Verdict::Keep;
    };
    let parsed = match deadline.as_str() {
        Some(text) => text.parse::<Timestamp>().map_err(|e| format!("{text:?} is not an RFC 3339 time ({e})")),
        None => Err(format!("{deadline} is not a string")),
    };
    let deadline = match parsed {
        Ok(t) => t,
        Err(why) => {
            return Verdict::Report {
                reason: REASON_INVALID_DEADLINE,
                message: format!(
                    "spec.garbageCollectionDeadline {why}: the state is kept until it is one, such as \
                     2030-01-01T00:00:00Z"
                ),
            };
        }
    };
    if deadline > now {
        let ahead = now.duration_until(deadline).unsigned_abs();
        return Verdict::Wait(ahead.min(MAX_WAIT));
    }
    match served {
        Ok(()) => Verdict::Delete,
        Err(why) => Verdict::Report {
            reason: REASON_NOT_SERVED,
            message: format!(
                "{why}: the state is kept past its garbage collection deadline, so the credential it records is \
                 not forgotten. Revoke what spec.state records by hand, then delete this GeneratorState"
            ),
        },
    }
}

/// The `status.conditions` to write for a `Ready` condition of `status`, `reason` and `message`,
/// or `None` when the current ones already say so. The transition time moves only when the
/// status changes; other conditions are kept as they are.
pub fn conditions_with_ready(current: Option<&Value>, status: &str, reason: &str, message: &str) -> Option<Value> {
    let current: Vec<Value> = current.and_then(Value::as_array).cloned().unwrap_or_default();
    let is_ready = |c: &Value| c.get("type").and_then(Value::as_str) == Some(GENERATOR_STATE_READY);
    let ready = current.iter().find(|c| is_ready(c));
    let field = |c: Option<&Value>, name: &str| c.and_then(|c| c.get(name)).and_then(Value::as_str).map(str::to_string);
    let unchanged = field(ready, "status").as_deref() == Some(status)
        && field(ready, "reason").as_deref() == Some(reason)
        && field(ready, "message").as_deref() == Some(message);
    if unchanged {
        return None;
    }
    let since = match field(ready, "lastTransitionTime") {
        Some(t) if field(ready, "status").as_deref() == Some(status) => json!(t),
        _ => json!(Time(Timestamp::now())),
    };
    let mut conditions: Vec<Value> = current.into_iter().filter(|c| !is_ready(c)).collect();
    conditions.push(json!({
        "type": GENERATOR_STATE_READY, "status": status, "reason": reason, "message": message,
        "lastTransitionTime": since,
    }));
    Some(Value::Array(conditions))
}

/// A failed API call.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// The Kubernetes API refused or failed.
    #[error("{action}: {source}")]
    Api {
        /// What was being done.
        action: &'static str,
        /// The error.
        source: kube::Error,
    },
}

struct Ctx {
    ctx: Arc<Context>,
}

/// The GeneratorState controller: watches GeneratorStates (in `namespace`, or all) until
/// `shutdown`. A cluster without the CRD only logs the failing watch.
pub fn controller(
    ctx: Arc<Context>,
    namespace: Option<String>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    let api: Api<StateObject> = match &namespace {
        Some(ns) => Api::namespaced(ctx.client.clone(), ns),
        None => Api::all(ctx.client.clone()),
    };
    // Its own watch: its triggers and deletions are not seen, so its queue is not followed.
    let metrics = ctx.metrics.controllers.watching_controller(CONTROLLER, CONCURRENCY);
    let ctx = Arc::new(Ctx { ctx });
    Controller::new(api, watcher::Config::default())
        .with_config(kube::runtime::controller::Config::default().concurrency(CONCURRENCY))
        .graceful_shutdown_on(shutdown)
        .run(
            move |obj, ctx| {
                let metrics = metrics.clone();
                async move {
                    let (ns, name) = (obj.namespace(), obj.name_any());
                    metrics.observe(ns.as_deref(), &name, reconcile(obj, ctx)).await
                }
            },
            error_policy,
            ctx,
        )
        .for_each(|r| async move {
            if let Err(e) = r {
                tracing::debug!(error = %e, "GeneratorState controller event");
            }
        })
}

fn error_policy(obj: Arc<StateObject>, e: &StateError, _: Arc<Ctx>) -> Action {
    tracing::warn!(namespace = ?obj.namespace(), name = %obj.name_any(), error = %e, "GeneratorState: retrying");
    Action::requeue(RETRY)
}

async fn reconcile(obj: Arc<StateObject>, ctx: Arc<Ctx>) -> Result<Action, StateError> {
    let (Some(ns), name) = (obj.namespace(), obj.name_any()) else {
        return Ok(Action::await_change());
    };
    let api: Api<StateObject> = Api::namespaced(ctx.ctx.client.clone(), &ns);
    let view = StateView {
        deadline: obj.spec.garbage_collection_deadline.as_ref(),
        resource: obj.spec.resource.as_ref(),
        deleting: obj.metadata.deletion_timestamp.is_some(),
        finalized: obj.finalizers().iter().any(|f| f == GENERATOR_STATE_FINALIZER),
    };
    let kind = view.resource.and_then(|r| r.get("kind")).and_then(Value::as_str).unwrap_or("").to_string();
    match decide(view, Timestamp::now()) {
        Verdict::Keep => {
            settle(&api, &obj, "kept: it has no garbage collection deadline").await?;
            Ok(Action::await_change())
        }
        Verdict::Wait(after) => {
            settle(&api, &obj, "kept until its garbage collection deadline").await?;
            Ok(Action::requeue(after))
        }
        Verdict::Release => {
            release(&api, &obj).await?;
            tracing::info!(namespace = %ns, name = %name, kind = %kind, "GeneratorState: finalizer removed (no cleanup to run)");
            Ok(Action::await_change())
        }
        Verdict::Delete => {
            let mut version = obj.resource_version();
            if view.finalized {
                version = release(&api, &obj).await?;
            }
            let params = DeleteParams {
                preconditions: Some(Preconditions { uid: obj.uid(), resource_version: version }),
                ..DeleteParams::default()
            };
            match api.delete(&name, &params).await {
                Ok(_) => {
                    tracing::info!(namespace = %ns, name = %name, kind = %kind, "GeneratorState: deleted past its deadline")
                }
                // Gone already, or changed since it was read (the change brings it back here).
                Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
                Err(source) => return Err(StateError::Api { action: "deleting the GeneratorState", source }),
            }
            Ok(Action::await_change())
        }
        Verdict::Report { reason, message } => {
            let current = obj.status.as_ref().and_then(|s| s.get("conditions"));
            if let Some(conditions) = conditions_with_ready(current, "False", reason, &message) {
                let patch = json!({"status": {"conditions": conditions}});
                api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map_err(|source| StateError::Api { action: "writing the GeneratorState's status", source })?;
                tracing::warn!(namespace = %ns, name = %name, kind = %kind, reason, "GeneratorState kept: {message}");
                let regarding = obj.object_ref(&());
                ctx.ctx.event(&regarding, true, reason, "GarbageCollect", message).await;
            }
            Ok(Action::await_change())
        }
    }
}

/// Replaces a `Ready=False` this controller wrote (the deadline or resource was fixed since)
/// with `Ready=True`; writes nothing otherwise.
async fn settle(api: &Api<StateObject>, obj: &StateObject, message: &str) -> Result<(), StateError> {
    let current = obj.status.as_ref().and_then(|s| s.get("conditions"));
    let ours = current.and_then(Value::as_array).into_iter().flatten().any(|c| {
        c.get("type").and_then(Value::as_str) == Some(GENERATOR_STATE_READY)
            && c.get("status").and_then(Value::as_str) == Some("False")
            && matches!(c.get("reason").and_then(Value::as_str), Some(REASON_NOT_SERVED | REASON_INVALID_DEADLINE))
    });
    if !ours {
        return Ok(());
    }
    if let Some(conditions) = conditions_with_ready(current, "True", REASON_CREATED, message) {
        let patch = json!({"status": {"conditions": conditions}});
        api.patch_status(&obj.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|source| StateError::Api { action: "writing the GeneratorState's status", source })?;
    }
    Ok(())
}

/// Removes upstream's finalizer, if the object is still the version read; returns the new
/// resource version.
async fn release(api: &Api<StateObject>, obj: &StateObject) -> Result<Option<String>, StateError> {
    let rest: Vec<&String> = obj.finalizers().iter().filter(|f| *f != GENERATOR_STATE_FINALIZER).collect();
    let patch = json!({"metadata": {"resourceVersion": obj.resource_version(), "finalizers": rest}});
    match api.patch(&obj.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await {
        Ok(updated) => Ok(updated.resource_version()),
        // Gone, or changed since it was read: the next event brings it back here.
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(None),
        Err(source) => Err(StateError::Api { action: "removing the GeneratorState's finalizer", source }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Timestamp {
        "2026-06-01T12:00:00Z".parse().unwrap()
    }

    fn generator(kind: &str) -> Value {
        json!({"apiVersion": "generators.external-secrets.io/v1alpha1", "kind": kind, "spec": {}})
    }

    fn view<'a>(deadline: Option<&'a Value>, resource: Option<&'a Value>) -> StateView<'a> {
        StateView { deadline, resource, deleting: false, finalized: false }
    }

    #[test]
    fn a_served_kind_past_its_deadline_is_deleted() {
        let past = json!("2026-06-01T11:59:59Z");
        for kind in [
            "Password",
            "UUID",
            "SSHKey",
            "Fake",
            "VaultDynamicSecret",
            "ECRAuthorizationToken",
            "STSSessionToken",
            "Webhook",
            "ClusterGenerator",
        ] {
            assert_eq!(decide(view(Some(&past), Some(&generator(kind))), now()), Verdict::Delete, "{kind}");
        }
        // Exactly at the deadline counts as passed; an offset is honoured.
        let at = json!("2026-06-01T14:00:00+02:00");
        assert_eq!(decide(view(Some(&at), Some(&generator("Password"))), now()), Verdict::Delete);
        // No apiVersion: the kind decides, as upstream.
        let bare = json!({"kind": "UUID"});
        assert_eq!(decide(view(Some(&past), Some(&bare)), now()), Verdict::Delete);
    }

    #[test]
    fn a_deadline_ahead_is_waited_for_in_steps_of_at_most_a_day() {
        let soon = json!("2026-06-01T12:05:00Z");
        assert_eq!(
            decide(view(Some(&soon), Some(&generator("Password"))), now()),
            Verdict::Wait(Duration::from_secs(300))
        );
        let far = json!("2126-06-01T12:00:00Z");
        assert_eq!(decide(view(Some(&far), Some(&generator("Password"))), now()), Verdict::Wait(MAX_WAIT));
        // An unserved kind is waited for too: it is reported when its deadline passes.
        assert_eq!(
            decide(view(Some(&soon), Some(&generator("Grafana"))), now()),
            Verdict::Wait(Duration::from_secs(300))
        );
    }

    #[test]
    fn a_state_without_a_deadline_is_kept() {
        assert_eq!(decide(view(None, Some(&generator("Password"))), now()), Verdict::Keep);
        assert_eq!(decide(view(Some(&Value::Null), Some(&generator("Grafana"))), now()), Verdict::Keep);
    }

    #[test]
    fn a_malformed_deadline_is_reported_and_kept() {
        for bad in [json!("yesterday"), json!("2026-13-01T00:00:00Z"), json!("2026-06-01"), json!(42), json!({})] {
            match decide(view(Some(&bad), Some(&generator("Password"))), now()) {
                Verdict::Report { reason, message } => {
                    assert_eq!(reason, REASON_INVALID_DEADLINE);
                    assert!(message.starts_with("spec.garbageCollectionDeadline "), "{message}");
                    assert!(message.contains("the state is kept"), "{message}");
                }
                other => panic!("{bad}: {other:?}"),
            }
        }
    }

    #[test]
    fn an_unserved_kind_past_its_deadline_is_kept_and_reported() {
        let past = json!("2020-01-01T00:00:00Z");
        for kind in ["Grafana", "GitlabDeployToken", "SomethingNew"] {
            match decide(view(Some(&past), Some(&generator(kind))), now()) {
                Verdict::Report { reason, message } => {
                    assert_eq!(reason, REASON_NOT_SERVED);
                    assert!(
                        message.contains(&format!("cleanup of generator kind {kind:?} is not served")),
                        "{message}"
                    );
                    assert!(message.contains("Revoke what spec.state records by hand"), "{message}");
                }
                other => panic!("{kind}: {other:?}"),
            }
        }
        // What cannot be identified is not deleted either.
        let other_group = json!({"apiVersion": "example.com/v1", "kind": "Password"});
        for resource in [None, Some(&Value::Null), Some(&other_group), Some(&json!({"spec": {}})), Some(&json!("x"))] {
            let verdict = decide(view(Some(&past), resource), now());
            assert!(matches!(verdict, Verdict::Report { reason: REASON_NOT_SERVED, .. }), "{resource:?}: {verdict:?}");
        }
    }

    #[test]
    fn upstreams_finalizer_is_removed_only_for_served_kinds() {
        let past = json!("2020-01-01T00:00:00Z");
        let deleting = |resource, finalized| StateView { deadline: Some(&past), resource, deleting: true, finalized };
        let password = generator("Password");
        let grafana = generator("Grafana");
        assert_eq!(decide(deleting(Some(&password), true), now()), Verdict::Release);
        assert_eq!(decide(deleting(Some(&password), false), now()), Verdict::Keep);
        assert_eq!(decide(deleting(Some(&grafana), false), now()), Verdict::Keep);
        match decide(deleting(Some(&grafana), true), now()) {
            Verdict::Report { reason, message } => {
                assert_eq!(reason, REASON_NOT_SERVED);
                assert!(message.contains(GENERATOR_STATE_FINALIZER), "{message}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_ready_condition_is_written_only_when_it_changes() {
        let first = conditions_with_ready(None, "False", REASON_NOT_SERVED, "m").unwrap();
        let ready = &first[0];
        assert_eq!(
            (&ready["type"], &ready["status"], &ready["reason"]),
            (&json!("Ready"), &json!("False"), &json!(REASON_NOT_SERVED))
        );
        assert!(ready["lastTransitionTime"].is_string());
        assert_eq!(conditions_with_ready(Some(&first), "False", REASON_NOT_SERVED, "m"), None);
        // Same status, new message: the transition time stays.
        let mut old = first.clone();
        old[0]["lastTransitionTime"] = json!("2020-01-01T00:00:00Z");
        let moved = conditions_with_ready(Some(&old), "False", REASON_INVALID_DEADLINE, "n").unwrap();
        assert_eq!(moved[0]["lastTransitionTime"], "2020-01-01T00:00:00Z");
        assert_eq!(moved[0]["message"], "n");
        // A new status moves it; other conditions are kept.
        let mut with_other = old.clone();
        with_other.as_array_mut().unwrap().insert(0, json!({"type": "Other", "status": "True"}));
        let flipped = conditions_with_ready(Some(&with_other), "True", REASON_CREATED, "ok").unwrap();
        assert_eq!(flipped[0]["type"], "Other");
        assert_ne!(flipped[1]["lastTransitionTime"], "2020-01-01T00:00:00Z");
        assert_eq!(flipped.as_array().unwrap().len(), 2);
    }
}

#[cfg(test)]
mod api_tests;
