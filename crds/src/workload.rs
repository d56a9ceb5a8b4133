//! Pod injection and workload reload: the annotations users write, and the pure rules that
//! the webhook (at admission) and the reconciler (on rotation) both apply.
//!
//! Injection never copies a secret value into a Pod: it wires the synced Secret in by
//! reference (`envFrom.secretRef` or a Secret volume).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use k8s_openapi::api::core::v1::{
    Container, EnvFromSource, PodSpec, SecretEnvSource, SecretVolumeSource, Volume, VolumeMount,
};
use sha2::{Digest, Sha256};

/// Namespace label that opts a namespace into Pod injection (value `enabled`).
pub const INJECTION_NAMESPACE_LABEL: &str = "keyward.dev/injection";
/// Pod annotation naming the ExternalSecrets to inject, comma separated.
pub const INJECT_ANNOTATION: &str = "keyward.dev/inject";
/// Pod annotation restricting injection to these containers, comma separated.
pub const INJECT_CONTAINERS_ANNOTATION: &str = "keyward.dev/inject-containers";
/// Pod annotation choosing `env` (default) or `volume`.
pub const INJECT_MODE_ANNOTATION: &str = "keyward.dev/inject-mode";
/// Pod annotation: `optional` admits Pods whose Secrets are not synced yet.
pub const INJECT_POLICY_ANNOTATION: &str = "keyward.dev/inject-policy";
/// Annotation the webhook writes: what was injected, `externalsecret=secret` pairs.
pub const INJECTED_ANNOTATION: &str = "keyward.dev/injected";
/// Workload annotation opting into rollouts when its Secrets rotate (value `"true"`); effective
/// on a workload that carries [`RELOAD_LABEL`] too.
pub const RELOAD_ANNOTATION: &str = "keyward.dev/reload";
/// Workload label opting into rollouts when its Secrets rotate (value `"true"`). The workloads
/// webhook (`objectSelector`) and the reconciler's workload watch select by it, so writes of
/// every other Deployment, StatefulSet and DaemonSet in the cluster never reach Keyward.
pub const RELOAD_LABEL: &str = "keyward.dev/reload";

/// Whether a workload opted into rollouts on rotation: the label [`RELOAD_LABEL`] or the
/// annotation [`RELOAD_ANNOTATION`] is `"true"` (the selections by label leave unlabelled
/// workloads out before this is asked).
pub fn wants_reload(labels: Option<&BTreeMap<String, String>>, annotations: Option<&BTreeMap<String, String>>) -> bool {
    let is_true =
        |m: Option<&BTreeMap<String, String>>, key: &str| m.and_then(|m| m.get(key)).is_some_and(|v| v == "true");
    is_true(labels, RELOAD_LABEL) || is_true(annotations, RELOAD_ANNOTATION)
}
/// Pod template annotation holding the hash of the synced Secrets the workload uses.
pub const SECRETS_HASH_ANNOTATION: &str = "keyward.dev/secrets-hash";
/// Label on every Secret Keyward manages; watches select managed Secrets by it.
pub const MANAGED_LABEL: &str = "reconcile.external-secrets.io/managed";
/// Annotation the reconciler writes on every Secret it manages: a hash of its data.
pub const DATA_HASH_ANNOTATION: &str = "reconcile.external-secrets.io/data-hash";
/// Where volume-mode injection mounts each ExternalSecret's Secret.
pub const VOLUME_MOUNT_ROOT: &str = "/var/run/secrets/keyward";
/// Most ExternalSecrets one Pod may name in `keyward.dev/inject`. A Pod injects a handful;
/// the cap bounds the work of one admission, which every writer in the cluster waits on.
pub const MAX_INJECT_NAMES: usize = 64;
/// Longest `keyward.dev/inject` value, in bytes, checked before the value is split: room for
/// `MAX_INJECT_NAMES` names of the longest kind (253 characters) and their commas. Mutating
/// admission runs before the API server's own annotation-size check, so this is the first
/// bound on what a Pod may send here.
pub const MAX_INJECT_ANNOTATION_BYTES: usize = 16 * 1024;

/// How injected Secrets reach the containers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InjectMode {
    /// Every key becomes an environment variable (`envFrom.secretRef`).
    Env,
    /// The Secret is mounted read-only at `/var/run/secrets/keyward/<externalsecret>`.
    Volume,
}

/// What a Pod asked for in its annotations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InjectionRequest {
    /// ExternalSecrets in the Pod's namespace, in the order written.
    pub external_secrets: Vec<String>,
    /// Containers to inject into; `None` means all of them.
    pub containers: Option<Vec<String>>,
    /// Env or volume.
    pub mode: InjectMode,
    /// Admit the Pod even when a Secret is not synced, with the reference marked optional.
    pub optional: bool,
}

fn split_list(value: &str) -> Vec<String> {
    value.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect()
}

/// Reads the injection annotations; `Ok(None)` when the Pod asks for nothing.
pub fn parse_injection_request(annotations: &BTreeMap<String, String>) -> Result<Option<InjectionRequest>, String> {
    let Some(names) = annotations.get(INJECT_ANNOTATION) else {
        return Ok(None);
    };
    if names.len() > MAX_INJECT_ANNOTATION_BYTES {
        return Err(format!(
            "annotation {INJECT_ANNOTATION} is {} bytes long: at most {MAX_INJECT_ANNOTATION_BYTES} bytes are allowed",
            names.len()
        ));
    }
    let mut seen = HashSet::new();
    let mut external_secrets = Vec::new();
    for name in split_list(names) {
        if seen.insert(name.clone()) {
            if external_secrets.len() == MAX_INJECT_NAMES {
                return Err(format!(
                    "annotation {INJECT_ANNOTATION} names more than {MAX_INJECT_NAMES} ExternalSecrets: at most \
                     {MAX_INJECT_NAMES} are allowed"
                ));
            }
            external_secrets.push(name);
        }
    }
    if external_secrets.is_empty() {
        return Err(format!("annotation {INJECT_ANNOTATION} is empty: name one or more ExternalSecrets"));
    }
    let mode = match annotations.get(INJECT_MODE_ANNOTATION).map(|s| s.trim()) {
        None | Some("") | Some("env") => InjectMode::Env,
        Some("volume") => InjectMode::Volume,
        Some(other) => {
            return Err(format!("annotation {INJECT_MODE_ANNOTATION} is {other:?}: use \"env\" or \"volume\""));
        }
    };
    let optional = match annotations.get(INJECT_POLICY_ANNOTATION).map(|s| s.trim()) {
        None | Some("") | Some("required") => false,
        Some("optional") => true,
        Some(other) => {
            return Err(format!(
                "annotation {INJECT_POLICY_ANNOTATION} is {other:?}: use \"required\" or \"optional\""
            ));
        }
    };
    let containers = annotations.get(INJECT_CONTAINERS_ANNOTATION).map(|v| split_list(v)).filter(|v| !v.is_empty());
    Ok(Some(InjectionRequest { external_secrets, containers, mode, optional }))
}

/// What the webhook's caches know about one named ExternalSecret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetState {
    /// Synced: its Secret holds the current values.
    Synced {
        /// Name of the target Secret.
        secret: String,
    },
    /// Exists but its Secret is not synced (yet).
    NotSynced {
        /// Name of the target Secret.
        secret: String,
        /// The Ready condition's reason and message, for the denial.
        why: String,
    },
    /// Synced before, failing now (a provider outage, refused credentials): its Secret still
    /// holds the data of the last good sync, because a failed sync never touches it.
    Stale {
        /// Name of the target Secret.
        secret: String,
        /// The Ready condition's reason and message, for the warning.
        why: String,
    },
    /// No such ExternalSecret in the namespace.
    Missing,
}

/// What an ExternalSecret's status says about its Secret, for injection.
///
/// `ready` is the Ready condition as (status, reason, message); `bound` is `status.binding.name`.
/// The reconciler keeps `binding` only while the Secret exists: it is set by a sync that wrote
/// the Secret, kept by failures (which never touch the Secret) and cleared when a failure finds
/// the Secret gone. So `Ready=False` with reason `SecretSyncedError` and a binding to this Secret
/// means the Secret is there with its last good data, and a Pod may start with it: a provider
/// outage must not stop Pods from starting.
pub fn target_state(secret: String, ready: Option<(&str, &str, &str)>, bound: Option<&str>) -> TargetState {
    match ready {
        Some(("True", _, _)) => TargetState::Synced { secret },
        Some((_, reason, message)) => {
            let why = format!("Ready=False, reason {reason}: {message}");
            if reason == crate::external_secret::reason::SECRET_SYNCED_ERROR && bound == Some(secret.as_str()) {
                TargetState::Stale { secret, why }
            } else {
                TargetState::NotSynced { secret, why }
            }
        }
        None => TargetState::NotSynced {
            secret,
            why: "no Ready condition yet: the reconciler has not synced it".to_string(),
        },
    }
}

/// The Pod after injection.
#[derive(Debug, Clone, PartialEq)]
pub struct Injected {
    /// The new Pod spec.
    pub spec: PodSpec,
    /// Value of the `keyward.dev/injected` annotation.
    pub annotation: String,
    /// Warnings for the requester (Secrets injected with the data of an earlier sync).
    pub warnings: Vec<String>,
}

/// Wires each requested ExternalSecret's Secret into the Pod spec.
///
/// Idempotent: a spec that already holds the references gets nothing twice. What the user
/// wrote is never changed: a volume name that is taken gets a suffix, and a container that
/// already mounts something at the injection path keeps its own mount.
pub fn inject(
    namespace: &str,
    spec: &PodSpec,
    request: &InjectionRequest,
    lookup: impl Fn(&str) -> TargetState,
) -> Result<Injected, String> {
    let wanted: Option<HashSet<&str>> =
        request.containers.as_ref().map(|names| names.iter().map(String::as_str).collect());
    if let Some(names) = &request.containers {
        let present: HashSet<&str> = spec.containers.iter().map(|c| c.name.as_str()).collect();
        if let Some(name) = names.iter().find(|n| !present.contains(n.as_str())) {
            return Err(format!(
                "container {name:?} named in annotation {INJECT_CONTAINERS_ANNOTATION} does not exist in the Pod"
            ));
        }
    }
    let mut spec = spec.clone();
    let mut existing = Existing::of(&spec);
    let mut injected = Vec::new();
    let mut warnings = Vec::new();
    for es in &request.external_secrets {
        let (secret, optional) = match lookup(es) {
            TargetState::Synced { secret } => (secret, false),
            TargetState::Stale { secret, why } => {
                warnings.push(format!(
                    "ExternalSecret {es:?} is failing to sync ({why}); its Secret {secret:?} keeps the data of its \
                     last good sync, which the Pod gets"
                ));
                (secret, false)
            }
            TargetState::NotSynced { secret, .. } if request.optional => (secret, true),
            TargetState::Missing if request.optional => (es.clone(), true),
            TargetState::NotSynced { secret, why } => {
                return Err(format!(
                    "ExternalSecret {es:?} in namespace {namespace:?} has not synced its Secret {secret:?} yet \
                     ({why}); the Pod is admitted once it has, or set {INJECT_POLICY_ANNOTATION}: optional"
                ));
            }
            TargetState::Missing => {
                return Err(format!(
                    "ExternalSecret {es:?} named in annotation {INJECT_ANNOTATION} does not exist in namespace \
                     {namespace:?}; create it first, or set {INJECT_POLICY_ANNOTATION}: optional"
                ));
            }
        };
        let volume_name = match request.mode {
            InjectMode::Volume => Some(existing.ensure_volume(&mut spec, es, &secret, optional)),
            InjectMode::Env => None,
        };
        for (i, container) in spec.containers.iter_mut().enumerate() {
            if wanted.as_ref().is_some_and(|names| !names.contains(container.name.as_str())) {
                continue;
            }
            match &volume_name {
                None => existing.ensure_env_from(i, container, &secret, optional),
                Some(volume) => existing.ensure_mount(i, container, volume, es),
            }
        }
        injected.push(format!("{es}={secret}"));
    }
    Ok(Injected { spec, annotation: injected.join(","), warnings })
}

/// What the Pod spec already holds, kept in sets so that each injected reference is checked
/// in constant time however long the user's lists are. Updated as injection adds entries.
struct Existing {
    /// Every volume name.
    volume_names: HashSet<String>,
    /// The first `keyward-` volume holding each Secret, by Secret name.
    keyward_volumes: HashMap<String, String>,
    /// Per container (by index): the Secret names of its `envFrom.secretRef`s.
    env_from: Vec<HashSet<String>>,
    /// Per container (by index): its mount paths.
    mount_paths: Vec<HashSet<String>>,
}

impl Existing {
    fn of(spec: &PodSpec) -> Self {
        let volumes = spec.volumes.iter().flatten();
        let mut keyward_volumes = HashMap::new();
        for v in volumes.clone().filter(|v| v.name.starts_with("keyward-")) {
            if let Some(secret) = v.secret.as_ref().and_then(|s| s.secret_name.as_ref()) {
                keyward_volumes.entry(secret.clone()).or_insert_with(|| v.name.clone());
            }
        }
        Existing {
            volume_names: volumes.map(|v| v.name.clone()).collect(),
            keyward_volumes,
            env_from: spec
                .containers
                .iter()
                .map(|c| {
                    c.env_from.iter().flatten().filter_map(|e| e.secret_ref.as_ref()).map(|s| s.name.clone()).collect()
                })
                .collect(),
            mount_paths: spec
                .containers
                .iter()
                .map(|c| c.volume_mounts.iter().flatten().map(|m| m.mount_path.clone()).collect())
                .collect(),
        }
    }

    fn ensure_env_from(&mut self, index: usize, container: &mut Container, secret: &str, optional: bool) {
        let env_from = container.env_from.get_or_insert_with(Vec::new);
        if !self.env_from[index].insert(secret.to_string()) {
            return;
        }
        env_from.push(EnvFromSource {
            secret_ref: Some(SecretEnvSource { name: secret.to_string(), optional: optional.then_some(true) }),
            ..Default::default()
        });
    }

    /// Returns the name of the volume holding `secret`, adding one when none does.
    fn ensure_volume(&mut self, spec: &mut PodSpec, es: &str, secret: &str, optional: bool) -> String {
        let volumes = spec.volumes.get_or_insert_with(Vec::new);
        if let Some(existing) = self.keyward_volumes.get(secret) {
            return existing.clone();
        }
        let base = format!("keyward-{es}");
        let mut name = base.clone();
        let mut n = 1;
        while self.volume_names.contains(&name) {
            name = format!("{base}-{n}");
            n += 1;
        }
        volumes.push(Volume {
            name: name.clone(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(secret.to_string()),
                optional: optional.then_some(true),
                ..Default::default()
            }),
            ..Default::default()
        });
        self.volume_names.insert(name.clone());
        self.keyward_volumes.insert(secret.to_string(), name.clone());
        name
    }

    fn ensure_mount(&mut self, index: usize, container: &mut Container, volume: &str, es: &str) {
        let path = format!("{VOLUME_MOUNT_ROOT}/{es}");
        let mounts = container.volume_mounts.get_or_insert_with(Vec::new);
        if !self.mount_paths[index].insert(path.clone()) {
            return;
        }
        mounts.push(VolumeMount {
            name: volume.to_string(),
            mount_path: path,
            read_only: Some(true),
            ..Default::default()
        });
    }
}

/// Names of the Secrets a pod template uses: `envFrom`, `env.valueFrom.secretKeyRef`, Secret
/// and projected volumes, and the ExternalSecrets named for injection (through `resolve`,
/// which maps an ExternalSecret name to its target Secret).
pub fn secrets_used(
    spec: &PodSpec,
    annotations: &BTreeMap<String, String>,
    resolve: impl Fn(&str) -> Option<String>,
) -> BTreeSet<String> {
    let mut used = BTreeSet::new();
    let containers = spec.containers.iter().chain(spec.init_containers.iter().flatten());
    for c in containers {
        for e in c.env_from.iter().flatten() {
            if let Some(s) = &e.secret_ref {
                used.insert(s.name.clone());
            }
        }
        for e in c.env.iter().flatten() {
            if let Some(s) = e.value_from.as_ref().and_then(|v| v.secret_key_ref.as_ref()) {
                used.insert(s.name.clone());
            }
        }
    }
    for v in spec.volumes.iter().flatten() {
        if let Some(name) = v.secret.as_ref().and_then(|s| s.secret_name.clone()) {
            used.insert(name);
        }
        for source in v.projected.iter().flat_map(|p| p.sources.iter().flatten()) {
            if let Some(s) = &source.secret {
                used.insert(s.name.clone());
            }
        }
    }
    if let Some(names) = annotations.get(INJECT_ANNOTATION) {
        used.extend(split_list(names).iter().filter_map(|es| resolve(es)));
    }
    used
}

/// The pod-template hash of the Keyward-managed Secrets a workload uses, from each Secret's
/// data-hash annotation; `None` when it uses none (then no annotation is written).
pub fn secrets_hash<'a>(managed: impl IntoIterator<Item = (&'a str, &'a str)>) -> Option<String> {
    let entries: BTreeMap<&str, &str> = managed.into_iter().collect();
    if entries.is_empty() {
        return None;
    }
    let mut h = Sha256::new();
    for (name, data_hash) in entries {
        h.update(name.as_bytes());
        h.update(b"=");
        h.update(data_hash.as_bytes());
        h.update(b"\n");
    }
    Some(hex::encode(&h.finalize()[..16]))
}

/// The hash a reloadable workload's pod template should carry: over the data hashes of the
/// Keyward-managed Secrets it uses. `target_of` maps an ExternalSecret named for injection to
/// its Secret; `data_hash_of` gives a managed Secret's data hash (`None` for other Secrets).
/// The webhook (at creation) and the reconciler (on rotation) both call this, so they agree.
pub fn template_secrets_hash(
    spec: &PodSpec,
    annotations: &BTreeMap<String, String>,
    target_of: impl Fn(&str) -> Option<String>,
    data_hash_of: impl Fn(&str) -> Option<String>,
) -> Option<String> {
    let hashes: Vec<(String, String)> = secrets_used(spec, annotations, target_of)
        .into_iter()
        .filter_map(|secret| data_hash_of(&secret).map(|h| (secret, h)))
        .collect();
    secrets_hash(hashes.iter().map(|(s, h)| (s.as_str(), h.as_str())))
}

#[cfg(test)]
#[path = "workload_tests.rs"]
mod tests;
