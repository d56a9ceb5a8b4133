//! Where a provider authenticates (the "auth namespace").

use crate::provider::{AuthenticationScope, ClusterProviderSpec};

/// The store whose auth namespace is asked for.
#[derive(Debug, Clone, Copy)]
pub enum StoreSpec<'a> {
    /// A namespaced Provider.
    Provider,
    /// A ClusterProvider with its name and spec.
    ClusterProvider {
        /// Name of the ClusterProvider, for messages.
        name: &'a str,
        /// Its spec.
        spec: &'a ClusterProviderSpec,
    },
}

/// A ClusterProvider whose auth namespace cannot be determined.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "ClusterProvider {cluster_provider:?} uses authenticationScope ProviderNamespace but \
     spec.config.providerRef.namespace is not set: set it to the namespace that holds the \
     provider configuration and its credentials, or use authenticationScope: ManifestNamespace"
)]
pub struct AuthNamespaceError {
    /// The ClusterProvider.
    pub cluster_provider: String,
}

/// The namespace a provider authenticates in for a manifest in `manifest_namespace`.
///
/// - A namespaced Provider always uses the manifest's namespace, whatever its config says.
/// - A ClusterProvider with `ManifestNamespace` uses the manifest's namespace.
/// - A ClusterProvider with `ProviderNamespace` uses `spec.config.providerRef.namespace`, which
///   must be set (an empty string counts as unset).
pub fn auth_namespace(store: StoreSpec<'_>, manifest_namespace: &str) -> Result<String, AuthNamespaceError> {
    match store {
        StoreSpec::Provider => Ok(manifest_namespace.to_string()),
        StoreSpec::ClusterProvider { name, spec } => match spec.authentication_scope {
            AuthenticationScope::ManifestNamespace => Ok(manifest_namespace.to_string()),
            AuthenticationScope::ProviderNamespace => spec
                .config
                .provider_ref
                .namespace
                .clone()
                .filter(|ns| !ns.is_empty())
                .ok_or_else(|| AuthNamespaceError { cluster_provider: name.to_string() }),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::{ProviderConfig, ProviderRef};

    fn cluster(scope: AuthenticationScope, ns: Option<&str>) -> ClusterProviderSpec {
        ClusterProviderSpec {
            config: ProviderConfig {
                address: "p.keyward.svc:8443".into(),
                provider_ref: ProviderRef {
                    api_version: "provider.external-secrets.io/v2alpha1".into(),
                    kind: "Kubernetes".into(),
                    name: "remote".into(),
                    namespace: ns.map(str::to_string),
                },
            },
            authentication_scope: scope,
            conditions: vec![],
        }
    }

    #[test]
    fn auth_namespace_table() {
        use AuthenticationScope::*;
        let cases = [
            ("provider ignores everything but the manifest", None, "team-a", Some("team-a")),
            ("provider namespace scope", Some(cluster(ProviderNamespace, Some("creds"))), "team-a", Some("creds")),
            ("manifest scope", Some(cluster(ManifestNamespace, Some("creds"))), "team-a", Some("team-a")),
            ("manifest scope without ns", Some(cluster(ManifestNamespace, None)), "team-a", Some("team-a")),
            ("provider scope without ns", Some(cluster(ProviderNamespace, None)), "team-a", None),
            ("provider scope with empty ns", Some(cluster(ProviderNamespace, Some(""))), "team-a", None),
        ];
        for (name, spec, manifest_ns, want) in cases {
            let store = match &spec {
                None => StoreSpec::Provider,
                Some(spec) => StoreSpec::ClusterProvider { name: "shared", spec },
            };
            let got = auth_namespace(store, manifest_ns).ok();
            assert_eq!(got.as_deref(), want, "{name}");
        }
    }

    #[test]
    fn missing_namespace_error_says_what_to_do() {
        let spec = cluster(AuthenticationScope::ProviderNamespace, None);
        let err = auth_namespace(StoreSpec::ClusterProvider { name: "shared", spec: &spec }, "a").unwrap_err();
        let msg = err.to_string();
        assert!(msg.starts_with("ClusterProvider \"shared\" uses authenticationScope ProviderNamespace"), "{msg}");
        assert!(msg.contains("spec.config.providerRef.namespace is not set"), "{msg}");
        assert!(msg.contains("or use authenticationScope: ManifestNamespace"), "{msg}");
    }
}
