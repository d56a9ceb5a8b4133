//! What every call carries: the checked ProviderReference and the source namespace, and who
//! owns the configuration it names (the tenant boundary of `keyward_crds::rules`).

use keyward_crds::rules::{ConfigOwner, NamedObject, check_config_namespace, config_owner, named_namespace};
use keyward_crds::{AuthenticationScope, StoreKind};
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
    /// A namespaced SecretStore: the reference names the store itself, whose `spec.provider`
    /// is the configuration (tenant-owned, like a Provider's).
    SecretStore,
    /// A ClusterSecretStore: the reference names the store itself (no namespace); its
    /// configuration is the operator's, and references without a namespace resolve in the
    /// source namespace, as upstream.
    ClusterSecretStore,
}

impl StoreRefKind {
    /// The kind as written on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            StoreRefKind::Provider => "Provider",
            StoreRefKind::ClusterProvider => "ClusterProvider",
            StoreRefKind::SecretStore => "SecretStore",
            StoreRefKind::ClusterSecretStore => "ClusterSecretStore",
        }
    }

    fn store_kind(self) -> StoreKind {
        match self {
            StoreRefKind::Provider => StoreKind::Provider,
            StoreRefKind::ClusterProvider => StoreKind::ClusterProvider,
            StoreRefKind::SecretStore => StoreKind::SecretStore,
            StoreRefKind::ClusterSecretStore => StoreKind::ClusterSecretStore,
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
    /// The ClusterProvider's authentication scope, when the caller sent it.
    pub authentication_scope: Option<AuthenticationScope>,
    /// Namespace of the ExternalSecret or PushSecret making the request (may be empty only for
    /// Validate with an explicit config namespace, and for Capabilities).
    pub source_namespace: String,
    /// How old an answer the caller accepts (GetSecret's, GetSecretMap's and Validate's
    /// `max_age_millis`; zero for every other call): what [`crate::read_cache`] may serve, and
    /// whether configuration objects may come from the watches ([`crate::config_watch`]).
    pub max_age: std::time::Duration,
    /// The namespaces whose own configurations may use the provider's identity (the process's
    /// `--provider-identity-namespaces`; none unless the operator lists some).
    pub provider_identity: std::sync::Arc<keyward_crds::rules::ProviderIdentityNamespaces>,
}

impl RequestContext {
    /// Namespace the configuration object is read from: the reference's namespace when set,
    /// else the source namespace.
    pub fn config_namespace(&self) -> &str {
        if self.namespace.is_empty() { &self.source_namespace } else { &self.namespace }
    }

    /// Who owns the configuration: the operator only when the request came through a
    /// ClusterProvider with `authenticationScope: ProviderNamespace` naming the config's
    /// namespace; a tenant otherwise (also when the caller did not say).
    pub fn owner(&self) -> ConfigOwner {
        config_owner(Some(self.store_ref_kind.store_kind()), self.authentication_scope, Some(&self.namespace))
    }

    /// The namespace an object named by the configuration is read from. A tenant-owned
    /// configuration naming another namespace is refused with `PERMISSION_DENIED`.
    pub fn named_namespace<'a>(&'a self, object: &NamedObject<'a>) -> Result<&'a str, ProviderError> {
        named_namespace(self.owner(), self.config_namespace(), object).map_err(|v| {
            let config = format!("{} {}/{}", self.kind, self.config_namespace(), self.name);
            ProviderError::PermissionDenied(format!("{config}: {v}"))
        })
    }
}

/// An object's `metadata.generation` with its `metadata.uid`. A deleted and re-created object
/// (a store of the same name with new credentials, a namespace name another team reuses) starts
/// at generation 1 again: without the UID it would be served the clients and answers of the
/// object before it.
#[derive(Clone, Debug, Default, Hash, PartialEq, Eq)]
pub struct Generation {
    /// `metadata.uid` (empty when unknown).
    pub uid: String,
    /// `metadata.generation` (0 when unknown).
    pub number: i64,
}

impl Generation {
    /// The generation of an object's metadata.
    #[cfg(feature = "refs")]
    pub fn of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Self {
        Generation { uid: meta.uid.clone().unwrap_or_default(), number: meta.generation.unwrap_or_default() }
    }
}

/// A generation that stands for no object (a hash of a spec a request carries, say).
impl From<Option<i64>> for Generation {
    fn from(number: Option<i64>) -> Self {
        Generation { uid: String::new(), number: number.unwrap_or_default() }
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
        "SecretStore" => StoreRefKind::SecretStore,
        "ClusterSecretStore" => StoreRefKind::ClusterSecretStore,
        other => {
            return Err(ProviderError::InvalidArgument(format!(
                "{method}: provider_ref.store_ref_kind {other:?} is not Provider, ClusterProvider, SecretStore or \
                 ClusterSecretStore"
            )));
        }
    };
    let authentication_scope = match r.authentication_scope.as_str() {
        "" => None,
        "ProviderNamespace" => Some(AuthenticationScope::ProviderNamespace),
        "ManifestNamespace" => Some(AuthenticationScope::ManifestNamespace),
        other => {
            return Err(ProviderError::InvalidArgument(format!(
                "{method}: provider_ref.authentication_scope {other:?} is not ProviderNamespace or ManifestNamespace"
            )));
        }
    };
    if store_ref_kind == StoreRefKind::ClusterSecretStore && !r.namespace.is_empty() {
        return Err(ProviderError::InvalidArgument(format!(
            "{method}: provider_ref.namespace must be empty for a ClusterSecretStore (cluster-scoped; its \
             references without a namespace resolve in the source namespace), got {:?}",
            r.namespace
        )));
    }
    if source_namespace.is_empty() && (require_source_namespace || r.namespace.is_empty()) {
        return Err(ProviderError::InvalidArgument(format!(
            "{method}: source_namespace is required (the namespace of the ExternalSecret or PushSecret)"
        )));
    }
    // A tenant path (a Provider, a ManifestNamespace ClusterProvider) naming a configuration of
    // another namespace would serve that namespace's secrets to this one.
    check_config_namespace(Some(store_ref_kind.store_kind()), authentication_scope, &r.namespace, source_namespace)
        .map_err(|m| {
            ProviderError::PermissionDenied(format!("{method}: {} {}/{}: {m}", r.kind, r.namespace, r.name))
        })?;
    Ok(RequestContext {
        api_version: r.api_version.clone(),
        kind: r.kind.clone(),
        name: r.name.clone(),
        namespace: r.namespace.clone(),
        store_ref_kind,
        authentication_scope,
        source_namespace: source_namespace.to_string(),
        max_age: std::time::Duration::ZERO,
        provider_identity: Default::default(),
    })
}

/// The context of `method` on the Vault configuration `v` a request from namespace `team-a`
/// names with `namespace`, `store_ref_kind` and `authentication_scope`: for the tests of what
/// depends on who owns a configuration.
#[cfg(test)]
pub(crate) fn vault_request(method: &str, namespace: &str, store_ref_kind: &str, scope: &str) -> RequestContext {
    let r = ProviderReference {
        api_version: "provider.external-secrets.io/v2alpha1".into(),
        kind: "Vault".into(),
        name: "v".into(),
        namespace: namespace.into(),
        store_ref_kind: store_ref_kind.into(),
        authentication_scope: scope.into(),
    };
    check_provider_ref(method, Some(&r), "team-a", true).expect("valid")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(ns: &str, kind: &str) -> ProviderReference {
        scoped(ns, kind, "")
    }

    fn scoped(ns: &str, kind: &str, scope: &str) -> ProviderReference {
        ProviderReference {
            api_version: "provider.external-secrets.io/v2alpha1".into(),
            kind: "Kubernetes".into(),
            name: "remote".into(),
            namespace: ns.into(),
            store_ref_kind: kind.into(),
            authentication_scope: scope.into(),
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
        let e = check_provider_ref("GetSecret", Some(&r("", "SecretStorage")), "a", true).unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
    }

    #[test]
    fn secret_stores_are_tenant_owned_and_cluster_secret_stores_the_operators() {
        let store = |ns: &str, kind: &str| ProviderReference {
            api_version: "external-secrets.io/v1".into(),
            kind: kind.into(),
            name: "store".into(),
            namespace: ns.into(),
            store_ref_kind: kind.into(),
            authentication_scope: String::new(),
        };
        let ctx = check_provider_ref("GetSecret", Some(&store("team-a", "SecretStore")), "team-a", true).expect("ok");
        assert_eq!(ctx.store_ref_kind, StoreRefKind::SecretStore);
        assert_eq!(ctx.owner(), ConfigOwner::Tenant);
        let e = check_provider_ref("GetSecret", Some(&store("team-b", "SecretStore")), "team-a", true)
            .expect_err("another namespace's SecretStore");
        assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e}");
        let ctx = check_provider_ref("GetSecret", Some(&store("", "ClusterSecretStore")), "team-a", true).expect("ok");
        assert_eq!(ctx.owner(), ConfigOwner::Operator);
        assert_eq!(ctx.config_namespace(), "team-a", "references without a namespace resolve in the source namespace");
        let e = check_provider_ref("GetSecret", Some(&store("creds", "ClusterSecretStore")), "team-a", true)
            .expect_err("cluster-scoped");
        assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e}");
    }

    #[test]
    fn config_namespace_owner_and_named_namespaces() {
        use keyward_crds::rules::NamedKind;
        let sa = |ns| NamedObject {
            field: "spec.auth.serviceAccount",
            kind: NamedKind::ServiceAccount,
            name: "sa",
            namespace: ns,
        };
        let ctx = check_provider_ref("GetSecret", Some(&r("", "")), "team-a", true).expect("ok");
        assert_eq!(ctx.store_ref_kind, StoreRefKind::Provider, "empty kind is treated as Provider");
        assert_eq!(ctx.config_namespace(), "team-a");
        assert_eq!(ctx.owner(), ConfigOwner::Tenant);
        assert_eq!(ctx.named_namespace(&sa(None)).expect("own"), "team-a");
        let e = ctx.named_namespace(&sa(Some("elsewhere"))).expect_err("a Provider cannot leave its namespace");
        assert_eq!(e.code(), tonic::Code::PermissionDenied);
        assert!(e.to_string().contains("Kubernetes team-a/remote: spec.auth.serviceAccount.namespace"), "{e}");

        // A ClusterProvider without a scope (an older peer), or with ManifestNamespace, reaches a
        // tenant-owned configuration.
        for scope in ["", "ManifestNamespace"] {
            let ctx =
                check_provider_ref("GetSecret", Some(&scoped("team-a", "ClusterProvider", scope)), "team-a", true)
                    .expect("ok");
            assert_eq!(ctx.owner(), ConfigOwner::Tenant, "{scope:?}");
            assert!(ctx.named_namespace(&sa(Some("keyward"))).is_err(), "{scope:?}");
        }
        let ctx = check_provider_ref(
            "GetSecret",
            Some(&scoped("creds", "ClusterProvider", "ProviderNamespace")),
            "team-a",
            true,
        )
        .expect("ok");
        assert_eq!(ctx.config_namespace(), "creds");
        assert_eq!(ctx.owner(), ConfigOwner::Operator);
        assert_eq!(ctx.named_namespace(&sa(Some("elsewhere"))).expect("operator"), "elsewhere");
        assert_eq!(ctx.named_namespace(&sa(None)).expect("own"), "creds");
        // A Provider claiming a scope is still a Provider.
        let ctx = check_provider_ref("GetSecret", Some(&scoped("a", "Provider", "ProviderNamespace")), "a", true)
            .expect("ok");
        assert_eq!(ctx.owner(), ConfigOwner::Tenant);
        // A tenant path naming another namespace's configuration is refused before anything is
        // read; an operator path, or a peer that does not say its scope, may name one.
        for (kind, scope) in [("Provider", ""), ("", ""), ("ClusterProvider", "ManifestNamespace")] {
            let e = check_provider_ref("GetSecret", Some(&scoped("team-b", kind, scope)), "team-a", true)
                .expect_err("another tenant's configuration");
            assert_eq!(e.code(), tonic::Code::PermissionDenied, "{kind} {scope}: {e}");
            assert!(e.to_string().contains("Kubernetes team-b/remote"), "{e}");
        }
        assert!(check_provider_ref("GetSecret", Some(&scoped("creds", "ClusterProvider", "")), "a", true).is_ok());
        let e = check_provider_ref("GetSecret", Some(&scoped("creds", "ClusterProvider", "Everywhere")), "a", true)
            .expect_err("unknown scope");
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
    }
}
