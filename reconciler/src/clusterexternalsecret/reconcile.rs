//! One reconcile of a ClusterExternalSecret: compute the selected namespaces, remove its
//! ExternalSecrets where it no longer selects, write the ExternalSecret where it does (unless the
//! store refuses the namespace or another ExternalSecret of that name is there), and report
//! `provisionedNamespaces`, `failedNamespaces` and `Ready`. On deletion, the finalizer is
//! released once its ExternalSecrets are deleted.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use futures::StreamExt;
use keyward_crds::cluster_external_secret::{
    CLUSTER_EXTERNAL_SECRET_FINALIZER, CLUSTER_EXTERNAL_SECRET_LABEL, ClusterExternalSecretNamespaceFailure, reason,
};
use keyward_crds::external_secret::FORCE_SYNC_ANNOTATION;
use keyward_crds::rules::{
    NamespaceView, parse_go_duration, refused_store, selects_namespace, validate_cluster_external_secret,
};
use keyward_crds::{ClusterExternalSecret, ClusterExternalSecretStatus, ExternalSecret, StoreKind};
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::controller::Action;
use kube::runtime::finalizer::{Event as FinalizerEvent, finalizer};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Resource, ResourceExt};
use serde_json::{Value, json};

use super::CesContext;
use super::index::Applied;
use crate::conditions;
use crate::context::ObjectKey;

/// Field manager of the ExternalSecrets this controller writes.
pub const FIELD_MANAGER: &str = "keyward-clusterexternalsecret";

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
    /// Some ExternalSecrets could not be deleted; the finalizer stays.
    #[error("{0}")]
    Cleanup(String),
}

/// The reconcile entry point.
pub async fn reconcile(ces: Arc<ClusterExternalSecret>, cx: Arc<CesContext>) -> Result<Action, Error> {
    let api: Api<ClusterExternalSecret> = Api::all(cx.ctx.client.clone());
    let (name, started) = (ces.name_any(), std::time::Instant::now());
    let cx = &cx;
    let result = finalizer(&api, CLUSTER_EXTERNAL_SECRET_FINALIZER, ces, |event| async move {
        match event {
            FinalizerEvent::Apply(ces) => provision(ces, cx).await,
            FinalizerEvent::Cleanup(ces) => cleanup(ces, cx).await,
        }
    })
    .await
    .map_err(|e| Error::Finalizer(Box::new(e)));
    cx.ctx.metrics.cluster_external_secrets.set_duration("", &name, started.elapsed());
    cx.forget_if_gone(&name);
    result
}

/// Whether `es` is controlled by the ClusterExternalSecret `owner` (a label alone does not
/// count: anyone who may edit an ExternalSecret may label it).
pub fn controlled_by(es: &ExternalSecret, owner: &str) -> bool {
    es.owner_references().iter().any(|o| {
        o.controller == Some(true)
            && o.kind == "ClusterExternalSecret"
            && o.api_version.starts_with("external-secrets.io/")
            && o.name == owner
    })
}

/// How writing one namespace ended.
enum Outcome {
    /// The namespace holds the current ExternalSecret.
    Provisioned,
    /// Not written, by rule (refused store, foreign ExternalSecret); retried on `refreshTime`.
    Refused(String),
    /// The API server failed; retried with backoff.
    Failed(String),
}

/// The manifest applied in every selected namespace (the namespace is added per write).
fn desired(ces: &ClusterExternalSecret, es_name: &str) -> Value {
    let owner = ces.name_any();
    let meta = ces.spec.external_secret_metadata.clone().unwrap_or_default();
    let mut labels = meta.labels;
    labels.insert(CLUSTER_EXTERNAL_SECRET_LABEL.to_string(), owner.clone());
    let mut annotations = meta.annotations;
    if let Some(v) = ces.annotations().get(FORCE_SYNC_ANNOTATION) {
        annotations.insert(FORCE_SYNC_ANNOTATION.to_string(), v.clone());
    }
    json!({
        "apiVersion": "external-secrets.io/v1",
        "kind": "ExternalSecret",
        "metadata": {
            "name": es_name,
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [{
                "apiVersion": "external-secrets.io/v1",
                "kind": "ClusterExternalSecret",
                "name": owner,
                "uid": ces.uid().unwrap_or_default(),
                "controller": true,
                "blockOwnerDeletion": true,
            }],
        },
        "spec": ces.spec.external_secret_spec,
    })
}

fn hash_of(v: &Value) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    v.to_string().hash(&mut h);
    h.finish()
}

/// Writes the ExternalSecret into one selected namespace, unless it is current already.
async fn provision_one(
    cx: &CesContext,
    ces: &ClusterExternalSecret,
    ns: &str,
    labels: &BTreeMap<String, String>,
    body: &Value,
    hash: u64,
) -> Outcome {
    let owner = ces.name_any();
    let es_name = body["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let view = NamespaceView { name: ns, labels };
    let refusal = refused_store(&ces.spec.external_secret_spec, view, |kind, name| match kind {
        StoreKind::ClusterProvider => {
            cx.cluster_providers.get(&ObjectRef::new(name)).map(|cp| Cow::Owned(cp.spec.conditions.clone()))
        }
        StoreKind::ClusterSecretStore => {
            cx.cluster_secret_stores.get(&ObjectRef::new(name)).map(|s| Cow::Owned(s.spec.store.conditions.clone()))
        }
        _ => None,
    });
    if let Some(denied) = refusal {
        tracing::info!(cluster_external_secret = %owner, namespace = ns, detail = %denied.detail(), "namespace refused");
        return Outcome::Refused(format!("{denied}; no ExternalSecret is written in this namespace"));
    }
    let key = ObjectRef::<ExternalSecret>::new(&es_name).within(ns);
    let api: Api<ExternalSecret> = Api::namespaced(cx.ctx.client.clone(), ns);
    let existing = match cx.external_secret(&key) {
        Some(es) => Some(es),
        // Not cached (yet): ask, so a foreign ExternalSecret created a moment ago is not taken over.
        None => match api.get_opt(&es_name).await {
            Ok(found) => found.map(Arc::new),
            Err(e) => return Outcome::Failed(format!("reading ExternalSecret {ns}/{es_name}: {e}")),
        },
    };
    if let Some(es) = &existing {
        if !controlled_by(es, &owner) {
            return Outcome::Refused(format!(
                "ExternalSecret {ns}/{es_name} exists and is not managed by ClusterExternalSecret {owner:?}; it is \
                 left alone: delete or rename it, or set spec.externalSecretName"
            ));
        }
        let current = Applied { hash, uid: es.uid(), generation: es.metadata.generation };
        if cx.last_applied(&key).as_ref() == Some(&current)
            && es.labels().get(CLUSTER_EXTERNAL_SECRET_LABEL) == Some(&owner)
        {
            return Outcome::Provisioned;
        }
    }
    let mut manifest = body.clone();
    manifest["metadata"]["namespace"] = json!(ns);
    match api.patch(&es_name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(manifest)).await {
        Ok(written) => {
            cx.record_applied(key, Applied { hash, uid: written.uid(), generation: written.metadata.generation });
            Outcome::Provisioned
        }
        // Admission denials count as transient too: the refusals this controller can foresee
        // were decided above, so what is left (a webhook that does not know a new namespace's
        // labels yet, a conflict) is worth retrying soon.
        Err(kube::Error::Api(e)) => Outcome::Failed(format!("writing ExternalSecret {ns}/{es_name}: {}", e.message)),
        Err(e) => Outcome::Failed(format!("writing ExternalSecret {ns}/{es_name}: {e}")),
    }
}

/// Deletes `es` if it is still the one controlled by `owner` (by uid, so an ExternalSecret
/// created in its place is never deleted).
async fn delete_owned(cx: &CesContext, es: &ObjectRef<ExternalSecret>, owner: &str) -> Result<(), String> {
    let Some(cached) = cx.external_secret(es) else { return Ok(()) };
    if !controlled_by(&cached, owner) {
        return Ok(());
    }
    let ns = es.namespace.clone().unwrap_or_default();
    let api: Api<ExternalSecret> = Api::namespaced(cx.ctx.client.clone(), &ns);
    let params = DeleteParams {
        preconditions: Some(Preconditions { uid: cached.uid(), resource_version: None }),
        ..DeleteParams::default()
    };
    match api.delete(&es.name, &params).await {
        Ok(_) => {
            tracing::info!(cluster_external_secret = owner, namespace = %ns, name = %es.name, "ExternalSecret deleted");
            Ok(())
        }
        // Gone already, or replaced by another object (the uid precondition failed).
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(()),
        Err(e) => Err(format!("deleting ExternalSecret {ns}/{}: {e}", es.name)),
    }
}

/// The selected namespaces that exist and are not terminating, with their labels.
fn selected_namespaces(cx: &CesContext, ces: &ClusterExternalSecret) -> BTreeMap<String, BTreeMap<String, String>> {
    cx.namespaces
        .state()
        .iter()
        .filter(|ns| ns.metadata.deletion_timestamp.is_none())
        .filter_map(|ns| {
            let name = ns.name_any();
            let view = NamespaceView { name: &name, labels: ns.labels() };
            selects_namespace(&ces.spec, view).then(|| (name.clone(), ns.labels().clone()))
        })
        .collect()
}

async fn provision(ces: Arc<ClusterExternalSecret>, cx: &CesContext) -> Result<Action, Error> {
    let owner = ces.name_any();
    let key = ObjectKey::cluster_external_secret(&owner);
    let previous = ces.status.clone().unwrap_or_default();
    if let Err(errs) = validate_cluster_external_secret(&ces.spec) {
        // Nothing is created or deleted on the strength of an invalid spec.
        let status = ClusterExternalSecretStatus {
            conditions: vec![conditions::ready(
                &previous.conditions,
                false,
                reason::INVALID_SPEC,
                format!("spec is invalid, nothing was changed: {errs}"),
                ces.metadata.generation,
            )],
            ..previous.clone()
        };
        write_status(cx, &ces, &previous, status).await?;
        crate::controller_metrics::failed();
        return Ok(Action::await_change());
    }
    let es_name = ces.external_secret_name();
    let selected = selected_namespaces(cx, &ces);
    let mut failed: BTreeMap<String, String> = BTreeMap::new();
    let mut transient = false;

    // What it no longer selects, or wrote under another name, goes first.
    for es in cx.labelled(&owner) {
        let ns = es.namespace.clone().unwrap_or_default();
        if es.name == es_name && selected.contains_key(&ns) {
            continue;
        }
        if let Err(e) = delete_owned(cx, &es, &owner).await {
            failed.insert(ns, e);
            transient = true;
        }
    }

    let body = desired(&ces, &es_name);
    let hash = hash_of(&body);
    // The writes are built up front (a future does nothing until polled) and run a few at a
    // time, in namespace order.
    let writes: Vec<_> = selected.iter().map(|(ns, labels)| provision_one(cx, &ces, ns, labels, &body, hash)).collect();
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
    let message = if ready {
        format!("ExternalSecret {es_name:?} is current in {} namespaces", provisioned.len())
    } else {
        let listed: Vec<&str> = failed.keys().map(String::as_str).take(10).collect();
        let more = failed.len().saturating_sub(listed.len());
        let more = if more > 0 { format!(" and {more} more") } else { String::new() };
        format!(
            "ExternalSecret {es_name:?} could not be written in {} of {} selected namespaces ({}{more}); see \
             status.failedNamespaces",
            failed.len(),
            selected.len(),
            listed.join(", ")
        )
    };
    let status = ClusterExternalSecretStatus {
        external_secret_name: Some(es_name),
        failed_namespaces: failed
            .into_iter()
            .map(|(namespace, reason)| ClusterExternalSecretNamespaceFailure { namespace, reason: Some(reason) })
            .collect(),
        provisioned_namespaces: provisioned.into_iter().collect(),
        conditions: vec![conditions::ready(
            &previous.conditions,
            ready,
            if ready { reason::PROVISIONED } else { reason::NAMESPACES_FAILED },
            message,
            ces.metadata.generation,
        )],
    };
    write_status(cx, &ces, &previous, status).await?;
    if !ready {
        crate::controller_metrics::failed();
    }

    if transient {
        return Ok(Action::requeue(cx.ctx.failure_delay(&key)));
    }
    cx.ctx.clear_failures(&key);
    // The webhook refuses an invalid refreshTime; one that slipped in means "on change only".
    match parse_go_duration(&ces.spec.refresh_time) {
        Ok(every) if !every.is_zero() => Ok(Action::requeue(every)),
        _ => Ok(Action::await_change()),
    }
}

/// Writes the status when it says something new, and publishes an event when the set of failed
/// namespaces changed.
async fn write_status(
    cx: &CesContext,
    ces: &ClusterExternalSecret,
    previous: &ClusterExternalSecretStatus,
    status: ClusterExternalSecretStatus,
) -> Result<(), kube::Error> {
    if let Some(ready) = status.conditions.first() {
        cx.ctx.metrics.cluster_external_secrets.set_ready("", &ces.name_any(), ready.status == "True");
    }
    let same = previous.external_secret_name == status.external_secret_name
        && previous.failed_namespaces == status.failed_namespaces
        && previous.provisioned_namespaces == status.provisioned_namespaces
        && conditions::same(&previous.conditions, &status.conditions);
    if same {
        return Ok(());
    }
    // Every list is written, empty ones too, so a merge patch clears what is no longer true.
    let patch = json!({"status": {
        "externalSecretName": status.external_secret_name,
        "failedNamespaces": status.failed_namespaces,
        "provisionedNamespaces": status.provisioned_namespaces,
        "conditions": status.conditions,
    }});
    let api: Api<ClusterExternalSecret> = Api::all(cx.ctx.client.clone());
    api.patch_status(&ces.name_any(), &PatchParams::default(), &Patch::Merge(patch)).await?;
    let failed_before: Vec<&str> = previous.failed_namespaces.iter().map(|f| f.namespace.as_str()).collect();
    let failed_now: Vec<&str> = status.failed_namespaces.iter().map(|f| f.namespace.as_str()).collect();
    if failed_before != failed_now
        && let Some(ready) = status.conditions.first()
    {
        let warning = ready.status != "True";
        let note = ready.message.clone().unwrap_or_default();
        let reason = ready.reason.as_deref().unwrap_or_default();
        cx.ctx.event(&ces.object_ref(&()), warning, reason, "Provision", note).await;
    }
    Ok(())
}

/// On deletion: deletes every ExternalSecret it controls; a failure keeps the finalizer.
async fn cleanup(ces: Arc<ClusterExternalSecret>, cx: &CesContext) -> Result<Action, Error> {
    let owner = ces.name_any();
    let mut errors = Vec::new();
    for es in cx.labelled(&owner) {
        if let Err(e) = delete_owned(cx, &es, &owner).await {
            errors.push(e);
        }
    }
    if errors.is_empty() { Ok(Action::await_change()) } else { Err(Error::Cleanup(errors.join("; "))) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    fn es_with_owner(kind: &str, api_version: &str, name: &str, controller: Option<bool>) -> ExternalSecret {
        let mut es = ExternalSecret::new("db", Default::default());
        es.metadata.owner_references = Some(vec![OwnerReference {
            api_version: api_version.into(),
            kind: kind.into(),
            name: name.into(),
            uid: "u".into(),
            controller,
            block_owner_deletion: None,
        }]);
        es
    }

    #[test]
    fn only_a_controller_reference_to_the_cluster_external_secret_counts() {
        let v1 = "external-secrets.io/v1";
        assert!(controlled_by(&es_with_owner("ClusterExternalSecret", v1, "shared", Some(true)), "shared"));
        assert!(!controlled_by(&es_with_owner("ClusterExternalSecret", v1, "other", Some(true)), "shared"));
        assert!(!controlled_by(&es_with_owner("ClusterExternalSecret", v1, "shared", None), "shared"));
        assert!(!controlled_by(&es_with_owner("Deployment", "apps/v1", "shared", Some(true)), "shared"));
        assert!(!controlled_by(&es_with_owner("ClusterExternalSecret", "evil.io/v1", "shared", Some(true)), "shared"));
        assert!(!controlled_by(&ExternalSecret::new("db", Default::default()), "shared"));
    }

    #[test]
    fn the_manifest_carries_label_owner_metadata_and_force_sync() {
        let mut ces: ClusterExternalSecret = serde_yaml::from_str(
            "apiVersion: external-secrets.io/v1\nkind: ClusterExternalSecret\n\
             metadata: {name: shared, uid: abc, annotations: {force-sync: '5'}}\n\
             spec:\n  externalSecretMetadata: {labels: {app: x}, annotations: {note: y}}\n  \
             externalSecretSpec: {secretStoreRef: {name: s, kind: ClusterProvider}, data: [{secretKey: k, remoteRef: {key: r}}]}\n",
        )
        .expect("parses");
        let body = desired(&ces, "db");
        assert_eq!(body["metadata"]["name"], "db");
        assert_eq!(body["metadata"]["labels"]["app"], "x");
        assert_eq!(body["metadata"]["labels"][CLUSTER_EXTERNAL_SECRET_LABEL], "shared");
        assert_eq!(body["metadata"]["annotations"]["note"], "y");
        assert_eq!(body["metadata"]["annotations"]["force-sync"], "5");
        let owner = &body["metadata"]["ownerReferences"][0];
        assert_eq!(
            (owner["kind"].as_str(), owner["uid"].as_str(), owner["controller"].as_bool()),
            (Some("ClusterExternalSecret"), Some("abc"), Some(true))
        );
        assert_eq!(body["spec"]["secretStoreRef"]["name"], "s");
        assert_eq!(body["spec"]["data"][0]["remoteRef"]["key"], "r");
        let first = hash_of(&body);
        ces.spec.external_secret_spec.refresh_interval = "5m".into();
        assert_ne!(hash_of(&desired(&ces, "db")), first, "a spec change is a new manifest");
    }
}

#[cfg(test)]
mod api_tests;
