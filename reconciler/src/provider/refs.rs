//! Which Providers and ClusterProviders a changed configuration object concerns.

use keyward_crds::ProviderRef;

/// A configuration object that changed.
#[derive(Debug, Clone, Copy)]
pub struct ConfigObject<'a> {
    /// Its kind, e.g. `Kubernetes`.
    pub kind: &'a str,
    /// Its namespace.
    pub namespace: &'a str,
    /// Its name.
    pub name: &'a str,
}

/// Whether `reference` (of a store in `store_namespace`, `None` for a ClusterProvider) points
/// at `obj`. An empty or omitted namespace means "the namespace of the manifest": for a Provider
/// that is its own namespace; for a ClusterProvider it can be any namespace, so it matches.
pub fn references(reference: &ProviderRef, store_namespace: Option<&str>, obj: ConfigObject<'_>) -> bool {
    if reference.kind != obj.kind || reference.name != obj.name {
        return false;
    }
    match reference.namespace.as_deref().filter(|n| !n.is_empty()) {
        Some(ns) => ns == obj.namespace,
        None => store_namespace.is_none_or(|own| own == obj.namespace),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(ns: Option<&str>) -> ProviderRef {
        ProviderRef {
            api_version: "provider.external-secrets.io/v2alpha1".into(),
            kind: "Kubernetes".into(),
            name: "remote".into(),
            namespace: ns.map(str::to_string),
        }
    }

    #[test]
    fn reference_table() {
        let obj = ConfigObject { kind: "Kubernetes", namespace: "team-a", name: "remote" };
        let cases = [
            ("explicit namespace", r(Some("team-a")), Some("x"), true),
            ("explicit other namespace", r(Some("team-b")), None, false),
            ("provider, empty ns, own namespace", r(Some("")), Some("team-a"), true),
            ("provider, omitted ns, own namespace", r(None), Some("team-a"), true),
            ("provider, omitted ns, other namespace", r(None), Some("team-b"), false),
            ("cluster provider, omitted ns", r(None), None, true),
            ("cluster provider, empty ns", r(Some("")), None, true),
        ];
        for (name, reference, store_ns, want) in cases {
            assert_eq!(references(&reference, store_ns, obj), want, "{name}");
        }
        let other_kind = ConfigObject { kind: "Fake", ..obj };
        assert!(!references(&r(None), None, other_kind));
        let other_name = ConfigObject { name: "x", ..obj };
        assert!(!references(&r(None), None, other_name));
    }
}
