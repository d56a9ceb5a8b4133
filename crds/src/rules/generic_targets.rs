//! Generic targets: an ExternalSecret whose `spec.target.manifest` names a kind other than
//! Secret (a ConfigMap, a custom resource) writes an object of that kind in its own namespace.
//!
//! Off by default, as upstream (where `--unsafe-allow-generic-targets` turns them on): the
//! operator turns them on with `--generic-targets` and lists the resources Keyward may write with
//! `--generic-target-resources` (chart values `genericTargets.enabled` and
//! `genericTargets.resources`, which also grant exactly those rights). The webhook warns with the
//! same messages the reconciler reports, and a template's path into such an object
//! (`templateFrom[].target: spec.database`) is parsed by the same function in both.

use std::fmt;

/// The reconciler's and the webhook's switch.
pub const GENERIC_TARGETS_FLAG: &str = "--generic-targets";
/// The list of resources generic targets may be written as.
pub const GENERIC_TARGET_RESOURCES_FLAG: &str = "--generic-target-resources";
/// Upstream's switch, which the reconciler also takes.
pub const UPSTREAM_GENERIC_TARGETS_FLAG: &str = "--unsafe-allow-generic-targets";

/// A resource of an API group, as `kubectl` names it: `configmaps`, `appconfigs.config.example.com`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GroupResource {
    /// The API group (`""` for the core group).
    pub group: String,
    /// The resource (plural, lower case).
    pub resource: String,
}

impl GroupResource {
    /// Reads `resource` or `resource.group`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        // Without a dot the group is the core group; with one it must be named.
        let (resource, group) = text.split_once('.').unwrap_or((text, ""));
        let name = |s: &str| {
            !s.is_empty()
                && !s.starts_with('.')
                && !s.ends_with('.')
                && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        };
        if !name(resource) || (text.contains('.') && !name(group)) {
            return Err(format!(
                "{text:?} is not a resource: write it as kubectl does, resource[.group] (configmaps, \
                 appconfigs.config.example.com)"
            ));
        }
        Ok(GroupResource { group: group.to_string(), resource: resource.to_string() })
    }
}

impl fmt::Display for GroupResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() { f.write_str(&self.resource) } else { write!(f, "{}.{}", self.resource, self.group) }
    }
}

/// The operator's switch and list. Off by default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GenericTargets {
    /// Whether generic targets are written at all.
    pub enabled: bool,
    /// The resources they may be written as.
    pub resources: Vec<GroupResource>,
}

impl GenericTargets {
    /// Off (the default).
    pub const OFF: GenericTargets = GenericTargets { enabled: false, resources: Vec::new() };

    /// The operator's switch and list, as the flags give them; a list naming no resource turns
    /// nothing on, and a badly written one is an error at start.
    pub fn from_flags(enabled: bool, resources: &str) -> Result<Self, String> {
        let resources =
            Self::parse_resources(resources).map_err(|e| format!("{GENERIC_TARGET_RESOURCES_FLAG}: {e}"))?;
        Ok(GenericTargets { enabled, resources })
    }

    /// Reads a comma-separated list of resources (`configmaps,appconfigs.config.example.com`).
    pub fn parse_resources(list: &str) -> Result<Vec<GroupResource>, String> {
        list.split(',').filter(|r| !r.trim().is_empty()).map(GroupResource::parse).collect()
    }

    /// Whether `resource` of `group` is listed.
    pub fn allows(&self, group: &str, resource: &str) -> bool {
        self.resources.iter().any(|r| r.group == group && r.resource == resource)
    }

    fn listed(&self) -> String {
        if self.resources.is_empty() {
            return "none".into();
        }
        self.resources.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
    }
}

/// The API group of an `apiVersion` (`""` for `v1`).
pub fn api_group(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(group, _)| group)
}

fn subject(api_version: &str, kind: &str) -> String {
    format!("spec.target.manifest ({api_version} {kind})")
}

/// Why nothing is written while generic targets are off (the reconciler's condition; the
/// webhook's warning begins with it).
pub fn generic_targets_off(api_version: &str, kind: &str) -> String {
    format!(
        "{}: non-Secret targets are not supported by this controller while generic targets are off: the \
         operator turns them on with {GENERIC_TARGETS_FLAG} (chart value genericTargets.enabled; upstream's \
         {UPSTREAM_GENERIC_TARGETS_FLAG}) and lists the resource in {GENERIC_TARGET_RESOURCES_FLAG} \
         (genericTargets.resources)",
        subject(api_version, kind)
    )
}

/// What admission says of a generic target: while they are off, or no resource of its API group
/// is listed, that it will report `Ready=False` (the webhook knows kinds, not resources: the
/// reconciler decides on the resource); otherwise that such objects are not Secrets.
pub fn generic_target_warning(targets: &GenericTargets, api_version: &str, kind: &str) -> String {
    let accepted = "the ExternalSecret is accepted, reports Ready=False and writes nothing";
    let group = api_group(api_version);
    if !targets.enabled {
        return format!("{}; {accepted}", generic_targets_off(api_version, kind));
    }
    if !targets.resources.iter().any(|r| r.group == group) {
        return format!(
            "{}: no resource of API group {group:?} is listed in {GENERIC_TARGET_RESOURCES_FLAG} (chart value \
             genericTargets.resources: {}); {accepted}",
            subject(api_version, kind),
            targets.listed()
        );
    }
    format!(
        "{}: a generic target is not a Secret: its values are readable by whoever may read {kind} objects in this \
         namespace, and not encrypted at rest as Secrets can be",
        subject(api_version, kind)
    )
}

/// Why the reconciler refuses to write a generic target, once the API server said which
/// resource `kind` is and whether it is namespaced; `None` when it may write it.
pub fn generic_target_refusal(
    targets: &GenericTargets,
    api_version: &str,
    kind: &str,
    resource: &str,
    namespaced: bool,
) -> Option<String> {
    if !targets.enabled {
        return Some(generic_targets_off(api_version, kind));
    }
    let named = GroupResource { group: api_group(api_version).to_string(), resource: resource.to_string() };
    if !namespaced {
        return Some(format!(
            "{}: {named} is cluster-scoped; an ExternalSecret writes only into its own namespace",
            subject(api_version, kind)
        ));
    }
    if !targets.allows(&named.group, &named.resource) {
        return Some(format!(
            "{}: {named} is not listed in {GENERIC_TARGET_RESOURCES_FLAG} (chart value genericTargets.resources: \
             {}); the operator lists the resources Keyward may write",
            subject(api_version, kind),
            targets.listed()
        ));
    }
    None
}

/// One step of a template's path into a generic target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathStep {
    /// A map key.
    Key(String),
    /// A list index.
    Index(usize),
}

/// The highest list index a path may name (upstream's): a path is tenant input, and an index
/// grows the list to it.
pub const MAX_PATH_INDEX: usize = 10_000;

/// Reads a template's target path (`spec.database`, `spec.rules[0].from[0].source`), as
/// upstream: dot-separated keys, each optionally followed by `[n]` indexes, starting with a key.
/// `metadata`, `apiVersion` and `kind` are refused: a path there could rename or move the object
/// or give it other owners (labels and annotations have their targets, `Labels` and
/// `Annotations`).
pub fn parse_target_path(path: &str) -> Result<Vec<PathStep>, String> {
    let bad = |why: String| Err(format!("{path:?} is not a target path: {why}"));
    let mut steps = Vec::new();
    for segment in path.split('.') {
        let (name, mut rest) = segment.find('[').map_or((segment, ""), |i| segment.split_at(i));
        if name.is_empty() && (rest.is_empty() || steps.is_empty()) {
            return bad(if steps.is_empty() && !rest.is_empty() {
                "it must start with a key".into()
            } else {
                "empty segment".into()
            });
        }
        if !name.is_empty() {
            steps.push(PathStep::Key(name.to_string()));
        }
        while !rest.is_empty() {
            let Some(end) = rest.find(']').filter(|_| rest.starts_with('[')) else {
                return bad(format!("expected [index] at {rest:?}"));
            };
            let index: usize = match rest[1..end].parse() {
                Ok(i) if i <= MAX_PATH_INDEX => i,
                Ok(_) => return bad(format!("index {} is above {MAX_PATH_INDEX}", &rest[1..end])),
                Err(_) => return bad(format!("{:?} is not an index", &rest[1..end])),
            };
            steps.push(PathStep::Index(index));
            rest = &rest[end + 1..];
        }
    }
    if let Some(PathStep::Key(first)) = steps.first()
        && ["metadata", "apiVersion", "kind"].contains(&first.as_str())
    {
        return bad(format!(
            "a template may not write {first}; use the targets Labels or Annotations, or template.metadata"
        ));
    }
    Ok(steps)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resources_read_as_kubectl_names_them() {
        let list = GenericTargets::parse_resources("configmaps, appconfigs.config.example.com,").expect("list");
        assert_eq!(list[0], GroupResource { group: String::new(), resource: "configmaps".into() });
        assert_eq!(list[1].to_string(), "appconfigs.config.example.com");
        assert!(GenericTargets::parse_resources("").expect("empty").is_empty());
        for bad in ["ConfigMap", ".configmaps", "appconfigs.", "app configs"] {
            let e = GenericTargets::parse_resources(bad).unwrap_err();
            assert!(e.contains("is not a resource"), "{bad}: {e}");
        }
    }

    #[test]
    fn off_unlisted_cluster_scoped_and_allowed() {
        let off = GenericTargets::OFF;
        let m = generic_target_refusal(&off, "v1", "ConfigMap", "configmaps", true).expect("off");
        assert!(m.starts_with("spec.target.manifest (v1 ConfigMap): non-Secret targets are not supported"), "{m}");
        assert!(m.contains("--generic-targets") && m.contains("--unsafe-allow-generic-targets"), "{m}");
        let on = GenericTargets {
            enabled: true,
            resources: GenericTargets::parse_resources("configmaps,appconfigs.config.example.com").expect("list"),
        };
        assert_eq!(generic_target_refusal(&on, "v1", "ConfigMap", "configmaps", true), None);
        assert_eq!(generic_target_refusal(&on, "config.example.com/v1", "AppConfig", "appconfigs", true), None);
        let m = generic_target_refusal(&on, "v1", "ServiceAccount", "serviceaccounts", true).expect("unlisted");
        assert!(m.contains("serviceaccounts is not listed in --generic-target-resources"), "{m}");
        assert!(m.contains("configmaps, appconfigs.config.example.com"), "{m}");
        let m = generic_target_refusal(&on, "rbac.authorization.k8s.io/v1", "ClusterRole", "clusterroles", false);
        assert!(m.expect("cluster-scoped").contains("clusterroles.rbac.authorization.k8s.io is cluster-scoped"));
    }

    #[test]
    fn admission_warns_as_the_reconciler_reports() {
        let w = generic_target_warning(&GenericTargets::OFF, "v1", "ConfigMap");
        assert!(w.starts_with(&generic_targets_off("v1", "ConfigMap")) && w.ends_with("writes nothing"), "{w}");
        let on = GenericTargets { enabled: true, resources: GenericTargets::parse_resources("configmaps").unwrap() };
        let w = generic_target_warning(&on, "argoproj.io/v1alpha1", "Application");
        assert!(w.contains("no resource of API group \"argoproj.io\" is listed") && w.contains("configmaps"), "{w}");
        let w = generic_target_warning(&on, "v1", "ConfigMap");
        assert!(w.contains("not encrypted at rest"), "{w}");
    }

    #[test]
    fn paths_as_upstream_documents_them() {
        use PathStep::{Index, Key};
        let key = |k: &str| Key(k.to_string());
        assert_eq!(parse_target_path("spec.database").unwrap(), [key("spec"), key("database")]);
        assert_eq!(
            parse_target_path("spec.rules[0].from[0].source.notRemoteIpBlocks").unwrap(),
            [key("spec"), key("rules"), Index(0), key("from"), Index(0), key("source"), key("notRemoteIpBlocks")]
        );
        assert_eq!(parse_target_path("spec.m[1][2]").unwrap(), [key("spec"), key("m"), Index(1), Index(2)]);
        for (bad, why) in [
            ("[0].foo", "must start with a key"),
            ("spec..a", "empty segment"),
            ("spec.", "empty segment"),
            ("spec.a[x]", "\"x\" is not an index"),
            ("spec.a[-1]", "is not an index"),
            ("spec.a[10001]", "above 10000"),
            ("spec.a[1", "expected [index]"),
            ("spec.a[1]b", "expected [index]"),
            ("metadata.ownerReferences", "may not write metadata"),
            ("metadata", "may not write metadata"),
            ("kind", "may not write kind"),
        ] {
            let e = parse_target_path(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }
}
