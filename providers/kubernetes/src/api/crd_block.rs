//! Upstream's `spec.provider.crd` block: fields of objects of one kind, read through a
//! Kubernetes API as the `kubernetes` block reaches it. What it translates to ([`CrdReadSpec`]),
//! its field rules, and which objects and properties a read may reach; admission and the
//! provider both apply them.

use keyward_crds::SecretKeySelector;
use keyward_crds::registry::{AdmitSink, BlockError};
use keyward_crds::rules::ValidationErrors;
use regex::Regex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::rules::{check_kubernetes, kubernetes_reach};
use super::spec::{KubernetesAuth, KubernetesServer, KubernetesSpec};

/// Upstream's `spec.provider.crd`: fields of objects of one kind, custom resources and core ones
/// (ConfigMaps) alike, read through a Kubernetes API as the Kubernetes block reaches it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CrdStoreProvider {
    /// The cluster to read from; defaults to the cluster the provider runs in.
    #[serde(default)]
    pub server: KubernetesServer,
    /// Credentials: exactly one of `cert`, `token` or `serviceAccount`. Mutually exclusive with
    /// `authRef`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<KubernetesAuth>,
    /// A kubeconfig stored in a Secret key. Mutually exclusive with `auth`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_ref: Option<SecretKeySelector>,
    /// The kind of the objects read.
    #[serde(default)]
    pub resource: CrdResource,
    /// Which objects and properties may be read; everything the credentials can read when
    /// unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub whitelist: Option<CrdWhitelist>,
}

/// A kind by its API group, version and kind (`group: ""` for core kinds such as ConfigMap).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CrdResource {
    /// API group; empty for the core group.
    pub group: String,
    /// API version, for example `v1alpha1`.
    pub version: String,
    /// Kind, for example `Widget`.
    pub kind: String,
}

/// Allow rules: when any is set, a read must match at least one.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CrdWhitelist {
    /// The rules; a read matching none of them is refused.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<CrdWhitelistRule>,
}

/// One allow rule: every filter it sets must match.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CrdWhitelistRule {
    /// Regular expression matched against the object's name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Regular expression matched against the object's namespace (ClusterSecretStores only).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Regular expressions matched against the property read; a read without one matches only
    /// rules without properties.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub properties: Vec<String>,
}

/// What the Kubernetes provider serves a `crd` block with ([`crd_read_spec`]): the connection as
/// a Kubernetes configuration (its `remoteNamespace` unused), the kind and the allow rules. The
/// connection is flattened, so its fields keep the paths they have in the block as written (a
/// ClusterSecretStore's pinned references are found by those paths).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct CrdReadSpec {
    /// How the target cluster is reached.
    #[serde(flatten)]
    pub connection: KubernetesSpec,
    /// The kind read.
    pub resource: CrdResource,
    /// `whitelist.rules`.
    #[serde(default)]
    pub whitelist: Vec<CrdWhitelistRule>,
}

/// What the Kubernetes provider serves a `crd` block with: its connection as a Kubernetes
/// configuration, the kind it reads and its allow rules.
pub fn crd_read_spec(c: &CrdStoreProvider) -> CrdReadSpec {
    CrdReadSpec {
        connection: KubernetesSpec {
            server: c.server.clone(),
            auth: c.auth.clone(),
            auth_ref: c.auth_ref.clone(),
            // Unused: a read's namespace is the store's, or the key's for a ClusterSecretStore.
            remote_namespace: "default".into(),
            allow_remote_namespace_override: false,
        },
        resource: c.resource.clone(),
        whitelist: c.whitelist.as_ref().map(|w| w.rules.clone()).unwrap_or_default(),
    }
}

/// A `crd` block's field errors: the Kubernetes connection's rules with credentials required
/// (upstream requires `auth` or `authRef`), a kind, Secrets refused (the Kubernetes block reads
/// those), and allow rules that say something and compile.
pub fn validate_crd(c: &CrdReadSpec) -> Result<(), ValidationErrors> {
    let mut errs = check_kubernetes(&c.connection, true).err().unwrap_or_default();
    let r = &c.resource;
    if r.version.is_empty() {
        errs.push("spec.resource.version", "must not be empty: the API version of the kind, e.g. v1alpha1");
    }
    if r.kind.is_empty() {
        errs.push("spec.resource.kind", "must not be empty: the kind read, e.g. ConfigMap");
    }
    if r.group.is_empty() && r.kind == "Secret" {
        errs.push("spec.resource.kind", "Secrets are read through spec.provider.kubernetes, not crd");
    }
    for (i, rule) in c.whitelist.iter().enumerate() {
        let field = format!("spec.whitelist.rules[{i}]");
        if rule.name.is_empty() && rule.namespace.is_empty() && rule.properties.is_empty() {
            errs.push(field.clone(), "set name, namespace or properties: a rule without any allows nothing");
        }
        let patterns = [("name", &rule.name), ("namespace", &rule.namespace)].into_iter();
        let properties = rule.properties.iter().enumerate().map(|(j, p)| (format!("properties[{j}]"), p));
        for (at, pattern) in patterns.map(|(a, p)| (a.to_string(), p)).chain(properties) {
            if let Err(e) = Regex::new(pattern) {
                errs.push(format!("{field}.{at}"), format!("{pattern:?} is not a regular expression: {e}"));
            }
        }
    }
    errs.into_result()
}

/// Which object a `crd` store's remote key names, as (namespace, name). A SecretStore reads its
/// own namespace only, so its key is a bare name (`store_namespace` given); a ClusterSecretStore's
/// key is `namespace/name`, or a bare name for a cluster-scoped kind (`store_namespace` `None`).
pub fn crd_object_ref<'k>(
    key: &'k str,
    store_namespace: Option<&'k str>,
) -> Result<(Option<&'k str>, &'k str), String> {
    let (ns, name) = match (store_namespace, key.split_once('/')) {
        (Some(_), Some(_)) => {
            return Err(format!(
                "remote key {key:?} names a namespace: a SecretStore's crd store reads objects of its own namespace \
                 only, by name; use a ClusterSecretStore to read another namespace"
            ));
        }
        (Some(ns), None) => (Some(ns), key),
        (None, Some((ns, name))) => (Some(ns), name),
        (None, None) => (None, key),
    };
    let valid = |s: &str| !s.is_empty() && !s.contains('/') && s != "." && s != "..";
    if !valid(name) || ns.is_some_and(|n| !valid(n)) {
        return Err(format!("remote key {key:?} is not an object name (or namespace/name for a ClusterSecretStore)"));
    }
    Ok((ns, name))
}

/// Whether a `crd` store's allow rules let a read of object `name` (in `namespace`, matched only
/// for a ClusterSecretStore, `cluster`) and `property` (empty: the whole object) through: no
/// rules allow everything; otherwise one rule must match every filter it sets. A rule whose
/// pattern does not compile (refused at admission) matches nothing.
pub fn crd_whitelist_allows(
    rules: &[CrdWhitelistRule],
    cluster: bool,
    namespace: Option<&str>,
    name: &str,
    property: &str,
) -> bool {
    let matches = |pattern: &str, value: &str| Regex::new(pattern).is_ok_and(|r| r.is_match(value));
    rules.is_empty()
        || rules.iter().any(|rule| {
            let name_ok = rule.name.is_empty() || matches(&rule.name, name);
            let ns_ok = !cluster || rule.namespace.is_empty() || namespace.is_some_and(|n| matches(&rule.namespace, n));
            let props_ok = rule.properties.is_empty()
                || (!property.is_empty() && rule.properties.iter().any(|p| matches(p, property)));
            let says_something = !(rule.name.is_empty() && rule.namespace.is_empty() && rule.properties.is_empty());
            says_something && name_ok && ns_ok && props_ok
        })
}

/// The row's translation of a `crd` block: its [`CrdReadSpec`].
pub(super) fn translate(block: &serde_json::Value) -> Result<serde_json::Value, BlockError> {
    let unreadable = |e: serde_json::Error| BlockError::Unreadable(e.to_string());
    let block = CrdStoreProvider::deserialize(block).map_err(unreadable)?;
    serde_json::to_value(crd_read_spec(&block)).map_err(unreadable)
}

/// A `crd` block's admission: its own rules ([`validate_crd`]), not the kind's, and the reach of
/// its connection.
pub(super) fn admit(block: &serde_json::Value, out: &mut AdmitSink<'_>) -> Result<(), serde_json::Error> {
    let spec = crd_read_spec(&CrdStoreProvider::deserialize(block)?);
    out(validate_crd(&spec), &kubernetes_reach(&spec.connection));
    Ok(())
}

#[cfg(test)]
#[path = "crd_block_tests.rs"]
mod tests;
