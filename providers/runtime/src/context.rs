//! What every call carries: the checked ProviderReference and the source namespace.

use keyward_proto::ProviderError;
use keyward_proto::v1::ProviderReference;

/// Kind of store a request came through.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StoreRefKind {
    /// A namespaced Provider. Also what an empty `store_ref_kind` (an older peer) means: the
    /// more restrictive choice.
    Provider,
    /// A cluster-scoped ClusterProvider.
    ClusterProvider,
}

impl StoreRefKind {
    /// The kind as written on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            StoreRefKind::Provider => "Provider",
            StoreRefKind::ClusterProvider => "ClusterProvider",
        }
    }
}

/// A checked request: which configuration object to read, and for which manifest namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestContext {
    /// API version of the configuration object.
    pub api_version: String,
    /// Kind of the configuration object.
    pub kind: String,
    /// Name of the configuration object.
    pub name: String,
    /// Namespace of the configuration object as sent; empty means the source namespace.
    pub namespace: String,
    /// Kind of store the request came through.
    pub store_ref_kind: StoreRefKind,
    /// Namespace of the ExternalSecret or PushSecret making the request (may be empty only for
    /// Validate with an explicit config namespace, and for Capabilities).
    pub source_namespace: String,
}

impl RequestContext {
    /// Namespace the configuration object is read from: the reference's namespace when set,
    /// else the source namespace.
    pub fn config_namespace(&self) -> &str {
        if self.namespace.is_empty() { &self.source_namespace } else { &self.namespace }
    }

    /// Whether the request came through a ClusterProvider.
    pub fn is_cluster_provider(&self) -> bool {
        self.store_ref_kind == StoreRefKind::ClusterProvider
    }

    /// The namespace a Secret reference inside the configuration resolves in: its own
    /// `namespace` only for ClusterProviders, else the configuration's namespace.
    pub fn ref_namespace<'a>(&'a self, own: Option<&'a str>) -> &'a str {
        match own.filter(|ns| !ns.is_empty()) {
            Some(ns) if self.is_cluster_provider() => ns,
            _ => self.config_namespace(),
        }
    }
}

/// Checks a request's ProviderReference and source namespace.
///
/// `require_source_namespace`: data RPCs need it always; Validate only when the reference has
/// no namespace of its own (the configuration must be found somewhere).
pub fn check_provider_ref(
    method: &str,
    provider_ref: Option<&ProviderReference>,
    source_namespace: &str,
    require_source_namespace: bool,
) -> Result<RequestContext, ProviderError> {
    let Some(r) = provider_ref else {
        return Err(ProviderError::InvalidArgument(format!(
            "{method}: provider_ref is required (apiVersion, kind and name of the provider configuration)"
        )));
    };
    if r.kind.is_empty() || r.name.is_empty() {
        return Err(ProviderError::InvalidArgument(format!(
            "{method}: provider_ref.kind and provider_ref.name are required (got kind {:?}, name {:?})",
            r.kind, r.name
        )));
    }
    let store_ref_kind = match r.store_ref_kind.as_str() {
        "" | "Provider" => StoreRefKind::Provider,
        "ClusterProvider" => StoreRefKind::ClusterProvider,
        other => {
            return Err(ProviderError::InvalidArgument(format!(
                "{method}: provider_ref.store_ref_kind {other:?} is not Provider or ClusterProvider"
            )));
        }
    };
    if source_namespace.is_empty() && (require_source_namespace || r.namespace.is_empty()) {
        return Err(ProviderError::InvalidArgument(format!(
            "{method}: source_namespace is required (the namespace of the ExternalSecret or PushSecret)"
        )));
    }
    Ok(RequestContext {
        api_version: r.api_version.clone(),
        kind: r.kind.clone(),
        name: r.name.clone(),
        namespace: r.namespace.clone(),
        store_ref_kind,
        source_namespace: source_namespace.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(ns: &str, kind: &str) -> ProviderReference {
        ProviderReference {
            api_version: "provider.external-secrets.io/v2alpha1".into(),
            kind: "Kubernetes".into(),
            name: "remote".into(),
            namespace: ns.into(),
            store_ref_kind: kind.into(),
        }
    }

    #[test]
    fn missing_reference_or_source_namespace_is_invalid_argument() {
        let e = check_provider_ref("GetSecret", None, "team-a", true).unwrap_err();
        assert!(matches!(&e, ProviderError::InvalidArgument(m) if m.contains("provider_ref is required")), "{e}");
        let e = check_provider_ref("GetSecret", Some(&r("", "Provider")), "", true).unwrap_err();
        assert!(matches!(&e, ProviderError::InvalidArgument(m) if m.contains("source_namespace is required")), "{e}");
        // With an explicit namespace, a data RPC still needs the source namespace...
        assert!(check_provider_ref("GetSecret", Some(&r("creds", "ClusterProvider")), "", true).is_err());
        // ...but Validate does not.
        let ctx = check_provider_ref("Validate", Some(&r("creds", "ClusterProvider")), "", false).expect("ok");
        assert_eq!(ctx.config_namespace(), "creds");
        assert!(check_provider_ref("Validate", Some(&r("", "ClusterProvider")), "", false).is_err());
        let mut nameless = r("", "Provider");
        nameless.name.clear();
        assert!(check_provider_ref("GetSecret", Some(&nameless), "a", true).is_err());
        let e = check_provider_ref("GetSecret", Some(&r("", "SecretStore")), "a", true).unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
    }

    #[test]
    fn config_namespace_and_ref_namespace() {
        let ctx = check_provider_ref("GetSecret", Some(&r("", "")), "team-a", true).expect("ok");
        assert_eq!(ctx.store_ref_kind, StoreRefKind::Provider, "empty kind is treated as Provider");
        assert_eq!(ctx.config_namespace(), "team-a");
        assert_eq!(ctx.ref_namespace(Some("elsewhere")), "team-a", "Provider ignores a ref's namespace");
        let ctx = check_provider_ref("GetSecret", Some(&r("creds", "ClusterProvider")), "team-a", true).expect("ok");
        assert_eq!(ctx.config_namespace(), "creds");
        assert_eq!(ctx.ref_namespace(Some("elsewhere")), "elsewhere");
        assert_eq!(ctx.ref_namespace(Some("")), "creds");
        assert_eq!(ctx.ref_namespace(None), "creds");
        let ctx = check_provider_ref("GetSecret", Some(&r("creds", "Provider")), "team-a", true).expect("ok");
        assert_eq!(ctx.ref_namespace(Some("elsewhere")), "creds");
    }
}
