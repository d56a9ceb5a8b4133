//! The key of an object that syncs through a provider (ExternalSecret, PushSecret,
//! ClusterExternalSecret): the reconciler keeps per-object state by it and [`crate::Recovery`]
//! requeues waiting objects by it.

/// Which object per-object state belongs to. Namespace and name are kept as one string,
/// `namespace/name` (neither may hold a `/`): there is one key per ExternalSecret in several maps.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ObjectKey {
    /// `ExternalSecret`, `PushSecret` or `ClusterExternalSecret`.
    pub kind: &'static str,
    path: Box<str>,
}

impl ObjectKey {
    /// The key of an object of `kind` (an empty namespace for a cluster-scoped one).
    pub fn new(kind: &'static str, namespace: &str, name: &str) -> Self {
        ObjectKey { kind, path: format!("{namespace}/{name}").into_boxed_str() }
    }

    /// The key of an ExternalSecret.
    pub fn external_secret(namespace: &str, name: &str) -> Self {
        ObjectKey::new("ExternalSecret", namespace, name)
    }

    /// The key of a (cluster-scoped) ClusterExternalSecret.
    pub fn cluster_external_secret(name: &str) -> Self {
        ObjectKey::new("ClusterExternalSecret", "", name)
    }

    /// The key of a PushSecret.
    pub fn push_secret(namespace: &str, name: &str) -> Self {
        ObjectKey::new("PushSecret", namespace, name)
    }

    /// Its namespace (empty for a cluster-scoped object).
    pub fn namespace(&self) -> &str {
        self.path.split_once('/').map_or("", |(ns, _)| ns)
    }

    /// Its name.
    pub fn name(&self) -> &str {
        self.path.split_once('/').map_or(&self.path, |(_, name)| name)
    }
}

impl std::fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.kind, self.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_keys_give_back_their_namespace_and_name() {
        let es = ObjectKey::external_secret("team-a", "db");
        assert_eq!((es.kind, es.namespace(), es.name()), ("ExternalSecret", "team-a", "db"));
        assert_eq!(es.to_string(), "ExternalSecret/team-a/db");
        assert_ne!(es, ObjectKey::push_secret("team-a", "db"));
        assert_ne!(es, ObjectKey::external_secret("team", "a-db"));
        let ces = ObjectKey::cluster_external_secret("shared");
        assert_eq!((ces.namespace(), ces.name()), ("", "shared"));
    }
}
