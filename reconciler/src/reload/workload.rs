//! The workload kinds that can reload, and what of them is cached: only what the reload rule
//! reads (the reload annotation, and in the pod template the injection and hash annotations
//! and the Secret references). A workload that does not ask for reloads keeps its name only.

use std::collections::BTreeMap;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetSpec, Deployment, DeploymentSpec, StatefulSet, StatefulSetSpec};
use k8s_openapi::api::core::v1::{
    Container, EnvFromSource, EnvVar, PodSpec, PodTemplateSpec, ProjectedVolumeSource, Volume, VolumeProjection,
};
use keyward_crds::workload::{INJECT_ANNOTATION, RELOAD_ANNOTATION, RELOAD_LABEL, SECRETS_HASH_ANNOTATION};
use kube::Resource;
use kube::api::ObjectMeta;

use crate::caches::Cached;

/// Which workload kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// apps/v1 Deployment.
    Deployment,
    /// apps/v1 StatefulSet.
    StatefulSet,
    /// apps/v1 DaemonSet.
    DaemonSet,
}

/// A workload kind with a pod template.
pub trait Workload: Cached + Resource<Scope = NamespaceResourceScope> {
    /// Which kind.
    const KIND: Kind;
    /// The pod template.
    fn template(&self) -> Option<&PodTemplateSpec>;
    /// Replaces spec and status by a spec holding only `template`.
    fn keep_only(&mut self, template: PodTemplateSpec);
}

macro_rules! workload {
    ($t:ty, $spec:ident, $kind:ident) => {
        impl Workload for $t {
            const KIND: Kind = Kind::$kind;
            fn template(&self) -> Option<&PodTemplateSpec> {
                self.spec.as_ref().map(|s| &s.template)
            }
            fn keep_only(&mut self, template: PodTemplateSpec) {
                self.status = None;
                self.spec = Some($spec { template, ..Default::default() });
            }
        }
    };
}
workload!(Deployment, DeploymentSpec, Deployment);
workload!(StatefulSet, StatefulSetSpec, StatefulSet);
workload!(DaemonSet, DaemonSetSpec, DaemonSet);

/// Whether the workload asks to be rolled when its Secrets rotate.
pub fn wants_reload(meta: &ObjectMeta) -> bool {
    keyward_crds::workload::wants_reload(meta.labels.as_ref(), meta.annotations.as_ref())
}

/// The pod template's annotations.
pub fn template_annotations(w: &impl Workload) -> BTreeMap<String, String> {
    w.template().and_then(|t| t.metadata.as_ref()).and_then(|m| m.annotations.clone()).unwrap_or_default()
}

fn only(annotations: &Option<BTreeMap<String, String>>, keys: &[&str]) -> Option<BTreeMap<String, String>> {
    let kept: BTreeMap<String, String> = annotations
        .iter()
        .flatten()
        .filter(|(k, _)| keys.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    (!kept.is_empty()).then_some(kept)
}

fn container(c: &Container) -> Container {
    let env: Vec<EnvVar> = c
        .env
        .iter()
        .flatten()
        .filter(|e| e.value_from.as_ref().is_some_and(|v| v.secret_key_ref.is_some()))
        .map(|e| EnvVar { name: e.name.clone(), value_from: e.value_from.clone(), ..Default::default() })
        .collect();
    let env_from: Vec<EnvFromSource> = c
        .env_from
        .iter()
        .flatten()
        .filter(|e| e.secret_ref.is_some())
        .map(|e| EnvFromSource { secret_ref: e.secret_ref.clone(), ..Default::default() })
        .collect();
    Container {
        name: c.name.clone(),
        env: (!env.is_empty()).then_some(env),
        env_from: (!env_from.is_empty()).then_some(env_from),
        ..Default::default()
    }
}

fn volume(v: &Volume) -> Option<Volume> {
    if v.secret.is_some() {
        return Some(Volume { name: v.name.clone(), secret: v.secret.clone(), ..Default::default() });
    }
    let sources: Vec<VolumeProjection> = v
        .projected
        .iter()
        .flat_map(|p| p.sources.iter().flatten())
        .filter(|s| s.secret.is_some())
        .map(|s| VolumeProjection { secret: s.secret.clone(), ..Default::default() })
        .collect();
    (!sources.is_empty()).then(|| Volume {
        name: v.name.clone(),
        projected: Some(ProjectedVolumeSource { sources: Some(sources), ..Default::default() }),
        ..Default::default()
    })
}

/// Strips a workload to what the reload rule reads.
pub fn strip<W: Workload>(w: &mut W) {
    let reload = wants_reload(w.meta());
    let meta = w.meta_mut();
    meta.managed_fields = None;
    meta.labels = only(&meta.labels, &[RELOAD_LABEL]);
    meta.annotations = only(&meta.annotations, &[RELOAD_ANNOTATION]);
    let template = match (reload, w.template()) {
        (true, Some(t)) => {
            let spec = t.spec.as_ref();
            let containers = |list: Option<&Vec<Container>>| list.map(|l| l.iter().map(container).collect::<Vec<_>>());
            let volumes: Vec<Volume> =
                spec.and_then(|s| s.volumes.as_ref()).into_iter().flatten().filter_map(volume).collect();
            PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    annotations: only(
                        &t.metadata.as_ref().and_then(|m| m.annotations.clone()),
                        &[INJECT_ANNOTATION, SECRETS_HASH_ANNOTATION],
                    ),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    containers: containers(spec.map(|s| &s.containers)).unwrap_or_default(),
                    init_containers: containers(spec.and_then(|s| s.init_containers.as_ref())),
                    volumes: (!volumes.is_empty()).then_some(volumes),
                    ..Default::default()
                }),
            }
        }
        _ => PodTemplateSpec::default(),
    };
    w.keep_only(template);
}

#[cfg(test)]
mod tests {
    use super::*;
    use keyward_crds::workload::secrets_used;

    fn deployment(reload: bool) -> Deployment {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "namespace": "team-a", "labels": {"app": "web"},
                "annotations": {RELOAD_ANNOTATION: reload.to_string(), "other": "x"},
                "managedFields": [{"manager": "kubectl"}]},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"},
                    "annotations": {INJECT_ANNOTATION: "db", SECRETS_HASH_ANNOTATION: "h", "other": "x"}},
                  "spec": {"containers": [{"name": "app", "image": "nginx", "args": ["a"],
                      "env": [{"name": "PLAIN", "value": "v"},
                              {"name": "PW", "valueFrom": {"secretKeyRef": {"name": "pw", "key": "k"}}}],
                      "envFrom": [{"secretRef": {"name": "env"}}, {"configMapRef": {"name": "cm"}}]}],
                    "initContainers": [{"name": "init", "image": "busybox", "envFrom": [{"secretRef": {"name": "init"}}]}],
                    "volumes": [{"name": "s", "secret": {"secretName": "vol"}}, {"name": "e", "emptyDir": {}},
                      {"name": "p", "projected": {"sources": [{"secret": {"name": "proj"}}, {"configMap": {"name": "c"}}]}}]}}},
            "status": {"replicas": 3}
        }))
        .unwrap()
    }

    #[test]
    fn a_reloadable_workload_keeps_what_the_rule_reads() {
        let full = deployment(true);
        let tpl = full.template().unwrap();
        let before =
            secrets_used(tpl.spec.as_ref().unwrap(), &template_annotations(&full), |es| Some(format!("{es}-s")));
        let mut w = full.clone();
        strip(&mut w);
        let after = secrets_used(w.template().unwrap().spec.as_ref().unwrap(), &template_annotations(&w), |es| {
            Some(format!("{es}-s"))
        });
        assert_eq!(before, after, "the rule sees the same Secrets");
        assert_eq!(after.len(), 6, "{after:?}");
        assert!(wants_reload(&w.metadata));
        assert!(w.status.is_none() && w.metadata.labels.is_none() && w.metadata.managed_fields.is_none());
        assert_eq!(w.metadata.annotations.as_ref().unwrap().len(), 1);
        let annotations = template_annotations(&w);
        assert_eq!(annotations.keys().collect::<Vec<_>>(), [INJECT_ANNOTATION, SECRETS_HASH_ANNOTATION]);
        let c = &w.template().unwrap().spec.as_ref().unwrap().containers[0];
        assert!(c.image.is_none() && c.args.is_none());
        assert_eq!(c.env.as_ref().unwrap().len(), 1);
        assert_eq!(w.spec.as_ref().unwrap().replicas, None);
        let volumes = w.template().unwrap().spec.as_ref().unwrap().volumes.clone().unwrap();
        assert_eq!(volumes.len(), 2, "the emptyDir is dropped");
        assert_eq!(volumes[1].projected.as_ref().unwrap().sources.as_ref().unwrap().len(), 1);
    }

    #[test]
    fn the_label_opts_in_and_is_kept() {
        let mut w = deployment(false);
        w.metadata.labels = Some([(RELOAD_LABEL.to_string(), "true".to_string())].into());
        strip(&mut w);
        assert!(wants_reload(&w.metadata), "the label alone opts in");
        assert!(w.template().unwrap().spec.is_some());
    }

    #[test]
    fn other_workloads_keep_their_name_only() {
        let mut w = deployment(false);
        strip(&mut w);
        assert!(!wants_reload(&w.metadata));
        assert_eq!(w.metadata.name.as_deref(), Some("web"));
        assert_eq!(w.template(), Some(&PodTemplateSpec::default()));
    }
}
