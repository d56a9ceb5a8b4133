//! The ClusterPushSecret controller: keeps one PushSecret in every namespace a
//! ClusterPushSecret selects, and none where it no longer does (the shared machinery of
//! `crate::fanout`); the PushSecret controller pushes each of them.
//!
//! As upstream, its PushSecrets carry the labels and annotations of `pushSecretMetadata` and a
//! controller reference to it, and are found again by that reference; there is no finalizer:
//! deleting the ClusterPushSecret lets Kubernetes' garbage collector delete its PushSecrets
//! (each with `deletionPolicy: Delete` removes its remote copies through its own finalizer).

use std::sync::Arc;

use keyward_crds::cluster_push_secret::reason;
use keyward_crds::rules::{
    NamespaceDenied, NamespaceView, ValidationErrors, push_refused_store, push_selects_namespace,
    validate_cluster_push_secret,
};
use keyward_crds::{ClusterPushSecret, PushSecret};
use kube::Resource;
use kube::runtime::reflector::{ObjectRef, Store};
use serde_json::{Value, json};

use crate::caches::Caches;
use crate::fanout::{FanOut, FanStatus, StoreConditions, Watches};
use crate::metrics::Metrics;
use crate::object_metrics::ObjectSeries;

/// Field manager of the PushSecrets this controller writes.
pub const FIELD_MANAGER: &str = "keyward-clusterpushsecret";

impl FanOut for ClusterPushSecret {
    type Child = PushSecret;
    type Stored = PushSecret;

    const KIND: &'static str = "ClusterPushSecret";
    const CONTROLLER: &'static str = "clusterpushsecret";
    const FIELD_MANAGER: &'static str = FIELD_MANAGER;
    const NAME_FIELD: &'static str = "pushSecretName";
    const FINALIZER: Option<&'static str> = None;
    const PROVISIONED: &'static str = reason::PROVISIONED;

    fn child_name(&self) -> String {
        self.push_secret_name()
    }

    fn selects(&self, ns: NamespaceView<'_>) -> bool {
        push_selects_namespace(&self.spec, ns)
    }

    fn validate(&self) -> Result<(), ValidationErrors> {
        validate_cluster_push_secret(&self.spec)
    }

    fn refused(&self, ns: NamespaceView<'_>, conditions: StoreConditions<'_>) -> Option<NamespaceDenied> {
        push_refused_store(&self.spec, ns, conditions)
    }

    fn desired(&self, _: &str) -> Value {
        let meta = self.spec.push_secret_metadata.clone().unwrap_or_default();
        json!({
            "apiVersion": PushSecret::api_version(&()),
            "kind": PushSecret::kind(&()),
            "metadata": {"labels": meta.labels, "annotations": meta.annotations},
            "spec": self.spec.push_secret_spec,
        })
    }

    fn refresh_time(&self) -> &str {
        ClusterPushSecret::refresh_time(self)
    }

    /// The ClusterPushSecret of its controller reference (a label would be anyone's to set).
    fn owner_of(child: &PushSecret) -> Option<String> {
        let owner = child.meta().owner_references.iter().flatten().find(|o| o.controller == Some(true))?;
        (owner.kind == Self::KIND && owner.api_version.starts_with("external-secrets.io/")).then(|| owner.name.clone())
    }

    fn cached(store: &Store<PushSecret>, r: &ObjectRef<PushSecret>) -> Option<PushSecret> {
        store.get(r).map(Arc::unwrap_or_clone)
    }

    fn status(&self) -> FanStatus {
        let s = self.status.clone().unwrap_or_default();
        FanStatus {
            child_name: s.push_secret_name,
            failed_namespaces: s.failed_namespaces,
            provisioned_namespaces: s.provisioned_namespaces,
            conditions: s.conditions,
        }
    }

    fn series(metrics: &Metrics) -> &ObjectSeries {
        &metrics.cluster_push_secrets
    }

    fn watched(caches: &mut Caches) -> Watches<'_, Self> {
        (&mut caches.cluster_push_secrets, &mut caches.push_secrets, &mut caches.namespaces)
    }
}

#[cfg(test)]
mod tests;
