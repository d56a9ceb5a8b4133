//! The ClusterExternalSecret controller: keeps one ExternalSecret in every namespace a
//! ClusterExternalSecret selects, and none where it no longer does (the shared machinery of
//! `crate::fanout`).
//!
//! Its ExternalSecrets are found again through their
//! `externalsecrets.external-secrets.io/cluster-external-secret-name` label; on deletion, the
//! finalizer `externalsecrets.external-secrets.io/clusterexternalsecret-cleanup` (upstream's)
//! holds it until they are deleted.

use keyward_crds::cluster_external_secret::{CLUSTER_EXTERNAL_SECRET_FINALIZER, CLUSTER_EXTERNAL_SECRET_LABEL, reason};
use keyward_crds::external_secret::FORCE_SYNC_ANNOTATION;
use keyward_crds::rules::{
    NamespaceDenied, NamespaceView, ValidationErrors, refused_store, selects_namespace,
    validate_cluster_external_secret,
};
use keyward_crds::{ClusterExternalSecret, ExternalSecret};
use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};
use serde_json::{Value, json};

use crate::caches::{Caches, Packed};
use crate::fanout::{FanOut, FanStatus, StoreConditions, Watches};
use crate::metrics::Metrics;
use crate::object_metrics::ObjectSeries;

/// Field manager of the ExternalSecrets this controller writes.
pub const FIELD_MANAGER: &str = "keyward-clusterexternalsecret";

impl FanOut for ClusterExternalSecret {
    type Child = ExternalSecret;
    type Stored = Packed<ExternalSecret>;

    const KIND: &'static str = "ClusterExternalSecret";
    const CONTROLLER: &'static str = "clusterexternalsecret";
    const FIELD_MANAGER: &'static str = FIELD_MANAGER;
    const NAME_FIELD: &'static str = "externalSecretName";
    const FINALIZER: Option<&'static str> = Some(CLUSTER_EXTERNAL_SECRET_FINALIZER);
    const PROVISIONED: &'static str = reason::PROVISIONED;

    fn child_name(&self) -> String {
        self.external_secret_name()
    }

    fn selects(&self, ns: NamespaceView<'_>) -> bool {
        selects_namespace(&self.spec, ns)
    }

    fn validate(&self) -> Result<(), ValidationErrors> {
        validate_cluster_external_secret(&self.spec)
    }

    fn refused(&self, ns: NamespaceView<'_>, conditions: StoreConditions<'_>) -> Option<NamespaceDenied> {
        refused_store(&self.spec.external_secret_spec, ns, conditions)
    }

    /// Labelled with its name, with `externalSecretMetadata` and its `force-sync` annotation
    /// (as upstream).
    fn desired(&self, _: &str) -> Value {
        let meta = self.spec.external_secret_metadata.clone().unwrap_or_default();
        let mut labels = meta.labels;
        labels.insert(CLUSTER_EXTERNAL_SECRET_LABEL.to_string(), self.name_any());
        let mut annotations = meta.annotations;
        if let Some(v) = self.annotations().get(FORCE_SYNC_ANNOTATION) {
            annotations.insert(FORCE_SYNC_ANNOTATION.to_string(), v.clone());
        }
        json!({
            "apiVersion": "external-secrets.io/v1",
            "kind": "ExternalSecret",
            "metadata": {"labels": labels, "annotations": annotations},
            "spec": self.spec.external_secret_spec,
        })
    }

    fn refresh_time(&self) -> &str {
        &self.spec.refresh_time
    }

    fn owner_of(child: &ExternalSecret) -> Option<String> {
        child.labels().get(CLUSTER_EXTERNAL_SECRET_LABEL).cloned()
    }

    fn cached(store: &Store<Packed<ExternalSecret>>, r: &ObjectRef<ExternalSecret>) -> Option<ExternalSecret> {
        crate::caches::packed::get(store, r)
    }

    fn status(&self) -> FanStatus {
        let s = self.status.clone().unwrap_or_default();
        FanStatus {
            child_name: s.external_secret_name,
            failed_namespaces: s.failed_namespaces,
            provisioned_namespaces: s.provisioned_namespaces,
            conditions: s.conditions,
        }
    }

    fn series(metrics: &Metrics) -> &ObjectSeries {
        &metrics.cluster_external_secrets
    }

    fn watched(caches: &mut Caches) -> Watches<'_, Self> {
        (&mut caches.cluster_external_secrets, &mut caches.external_secrets, &mut caches.namespaces)
    }
}

#[cfg(test)]
mod tests;
