//! Pure store resolution: from a Provider or ClusterProvider object and the manifest's
//! namespace to the address, the ProviderReference sent on the wire, the auth namespace, who
//! owns the provider configuration, and the namespace of the TLS Secret. The ClusterProvider
//! rules run here, before any client exists.

use std::collections::BTreeMap;
use std::sync::Arc;

use keyward_crds::rules::{ConfigOwner, NamespaceView, StoreSpec};
use keyward_crds::rules::{
    auth_namespace, check_namespace_admitted, config_owner, parse_address, tls_secret_namespace,
};
use keyward_crds::{Capabilities, ClusterProvider, Provider, ProviderConfig, StoreKind};
use keyward_proto::v1::ProviderReference;
use kube::ResourceExt;

use super::error::ClientError;

/// A store object as found in the cluster.
#[derive(Debug, Clone)]
pub enum StoreObject {
    /// A namespaced Provider.
    Provider(Arc<Provider>),
    /// A ClusterProvider.
    ClusterProvider(Arc<ClusterProvider>),
}

impl StoreObject {
    /// Kind of the store.
    pub fn kind(&self) -> StoreKind {
        match self {
            StoreObject::Provider(_) => StoreKind::Provider,
            StoreObject::ClusterProvider(_) => StoreKind::ClusterProvider,
        }
    }

    /// Name of the store.
    pub fn name(&self) -> String {
        match self {
            StoreObject::Provider(p) => p.name_any(),
            StoreObject::ClusterProvider(p) => p.name_any(),
        }
    }

    /// `metadata.generation`.
    pub fn generation(&self) -> Option<i64> {
        match self {
            StoreObject::Provider(p) => p.metadata.generation,
            StoreObject::ClusterProvider(p) => p.metadata.generation,
        }
    }

    /// `metadata.uid`.
    pub fn uid(&self) -> Option<String> {
        match self {
            StoreObject::Provider(p) => p.metadata.uid.clone(),
            StoreObject::ClusterProvider(p) => p.metadata.uid.clone(),
        }
    }

    /// The ClusterProvider's authentication scope (`None` for a Provider).
    pub fn authentication_scope(&self) -> Option<keyward_crds::AuthenticationScope> {
        match self {
            StoreObject::Provider(_) => None,
            StoreObject::ClusterProvider(p) => Some(p.spec.authentication_scope),
        }
    }

    /// `spec.config`.
    pub fn config(&self) -> &ProviderConfig {
        match self {
            StoreObject::Provider(p) => &p.spec.config,
            StoreObject::ClusterProvider(p) => &p.spec.config,
        }
    }

    /// Capabilities the provider reported, if it has been checked.
    pub fn capabilities(&self) -> Option<Capabilities> {
        match self {
            StoreObject::Provider(p) => p.status.as_ref().and_then(|s| s.capabilities),
            StoreObject::ClusterProvider(p) => p.status.as_ref().and_then(|s| s.capabilities),
        }
    }

    /// Whether the namespace labels are needed to decide (a ClusterProvider with conditions).
    pub fn needs_namespace_labels(&self) -> bool {
        matches!(self, StoreObject::ClusterProvider(p) if !p.spec.conditions.is_empty())
    }
}

/// Everything needed to reach a store on behalf of one manifest namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// Provider or ClusterProvider.
    pub kind: StoreKind,
    /// Name of the store.
    pub name: String,
    /// `host:port` of the provider.
    pub address: String,
    /// Host name used to verify the provider's certificate.
    pub server_name: String,
    /// Namespace the provider authenticates in.
    pub auth_namespace: String,
    /// Namespace of the `keyward-provider-tls` Secret.
    pub tls_namespace: String,
    /// Who owns the provider configuration (the tenant boundary): what it may name, and
    /// whether pushes may leave its remote namespace.
    pub owner: ConfigOwner,
    /// The reference carried by every call.
    pub reference: ProviderReference,
}

/// Resolves `store` for a manifest in `manifest_ns`. `namespace_labels` are the current labels
/// of that namespace, read at runtime (required when the ClusterProvider has conditions).
pub fn resolve(
    store: &StoreObject,
    manifest_ns: &str,
    namespace_labels: Option<&BTreeMap<String, String>>,
) -> Result<Resolved, ClientError> {
    let name = store.name();
    let auth_ns = match store {
        StoreObject::Provider(_) => auth_namespace(StoreSpec::Provider, manifest_ns)?,
        StoreObject::ClusterProvider(cp) => {
            let empty = BTreeMap::new();
            check_namespace_admitted(
                &name,
                &cp.spec.conditions,
                NamespaceView { name: manifest_ns, labels: namespace_labels.unwrap_or(&empty) },
            )
            .inspect_err(|denied| {
                // The namespace owner sees only that it is refused; the operator sees why.
                tracing::info!(cluster_provider = %name, namespace = manifest_ns, detail = %denied.detail(), "namespace refused");
            })?;
            auth_namespace(StoreSpec::ClusterProvider { name: &name, spec: &cp.spec }, manifest_ns)?
        }
    };
    finish(store, auth_ns)
}

fn finish(store: &StoreObject, auth_ns: String) -> Result<Resolved, ClientError> {
    let name = store.name();
    let config = store.config();
    let address = parse_address(&config.address).map_err(|message| ClientError::Address {
        kind: store.kind(),
        name: name.clone(),
        message,
    })?;
    let provider_ref = &config.provider_ref;
    let scope = store.authentication_scope();
    Ok(Resolved {
        kind: store.kind(),
        name,
        address: config.address.clone(),
        server_name: address.host,
        tls_namespace: tls_secret_namespace(&config.address, &auth_ns),
        owner: config_owner(Some(store.kind()), scope, Some(&auth_ns)),
        reference: ProviderReference {
            api_version: provider_ref.api_version.clone(),
            kind: provider_ref.kind.clone(),
            name: provider_ref.name.clone(),
            namespace: auth_ns.clone(),
            store_ref_kind: store.kind().as_str().to_string(),
            // The provider decides who owns the configuration from this (and refuses what a
            // tenant-owned one may not do), so it travels as the ClusterProvider says it.
            authentication_scope: scope.map(|s| s.as_str().to_string()).unwrap_or_default(),
        },
        auth_namespace: auth_ns,
    })
}

/// Resolves `store` for the Provider controller's own checks (Validate, Capabilities), which
/// are not made on behalf of any manifest: the auth namespace is the Provider's namespace, or
/// the ClusterProvider's `providerRef.namespace` (empty when it has none).
pub fn resolve_for_check(store: &StoreObject) -> Result<Resolved, ClientError> {
    let auth_ns = match store {
        StoreObject::Provider(p) => p.namespace().unwrap_or_default(),
        StoreObject::ClusterProvider(cp) => cp.spec.config.provider_ref.namespace.clone().unwrap_or_default(),
    };
    finish(store, auth_ns)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
    use keyward_crds::{AuthenticationScope, ClusterProviderCondition, ClusterProviderSpec, ProviderRef, ProviderSpec};
    use kube::api::ObjectMeta;

    pub(crate) fn config(address: &str, ns: Option<&str>) -> ProviderConfig {
        ProviderConfig {
            address: address.into(),
            provider_ref: ProviderRef {
                api_version: "provider.external-secrets.io/v2alpha1".into(),
                kind: "Kubernetes".into(),
                name: "remote".into(),
                namespace: ns.map(str::to_string),
            },
        }
    }

    pub(crate) fn provider(ns: &str, name: &str, address: &str, generation: i64) -> StoreObject {
        StoreObject::Provider(Arc::new(Provider {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(ns.into()),
                generation: Some(generation),
                ..Default::default()
            },
            spec: ProviderSpec { config: config(address, Some("elsewhere")) },
            status: None,
        }))
    }

    pub(crate) fn cluster(
        name: &str,
        scope: AuthenticationScope,
        ref_ns: Option<&str>,
        conditions: Vec<ClusterProviderCondition>,
    ) -> StoreObject {
        StoreObject::ClusterProvider(Arc::new(ClusterProvider {
            metadata: ObjectMeta { name: Some(name.into()), generation: Some(1), ..Default::default() },
            spec: ClusterProviderSpec {
                config: config("kube.keyward.svc:8443", ref_ns),
                authentication_scope: scope,
                conditions,
            },
            status: None,
        }))
    }

    pub(crate) fn only_label(k: &str, v: &str) -> Vec<ClusterProviderCondition> {
        vec![ClusterProviderCondition {
            namespace_selector: Some(LabelSelector {
                match_labels: Some([(k.to_string(), v.to_string())].into()),
                match_expressions: None,
            }),
            ..Default::default()
        }]
    }

    #[test]
    fn provider_always_authenticates_in_the_manifest_namespace() {
        let r = resolve(&provider("team-a", "p", "127.0.0.1:9443", 1), "team-a", None).unwrap();
        assert_eq!(r.auth_namespace, "team-a");
        assert_eq!(r.reference.namespace, "team-a", "providerRef.namespace of a Provider is ignored");
        assert_eq!(r.reference.store_ref_kind, "Provider");
        assert_eq!(r.reference.authentication_scope, "");
        assert_eq!(r.owner, ConfigOwner::Tenant);
        assert_eq!(r.tls_namespace, "team-a");
        assert_eq!(r.server_name, "127.0.0.1");
    }

    #[test]
    fn cluster_provider_scopes() {
        let pn = cluster("shared", AuthenticationScope::ProviderNamespace, Some("creds"), vec![]);
        let r = resolve(&pn, "team-a", None).unwrap();
        assert_eq!(r.reference.namespace, "creds");
        assert_eq!(r.reference.store_ref_kind, "ClusterProvider");
        assert_eq!(r.reference.authentication_scope, "ProviderNamespace");
        assert_eq!(r.owner, ConfigOwner::Operator, "the operator named the namespace");
        assert_eq!(r.tls_namespace, "keyward", "service address namespace wins");
        // ManifestNamespace reaches a configuration the tenant wrote, even when the
        // ClusterProvider names a namespace.
        let mn = cluster("shared", AuthenticationScope::ManifestNamespace, Some("creds"), vec![]);
        let r = resolve(&mn, "team-a", None).unwrap();
        assert_eq!(r.reference.namespace, "team-a");
        assert_eq!(r.reference.authentication_scope, "ManifestNamespace");
        assert_eq!(r.owner, ConfigOwner::Tenant);
    }

    #[test]
    fn provider_namespace_scope_without_namespace_is_refused_at_runtime() {
        let bad = cluster("shared", AuthenticationScope::ProviderNamespace, None, vec![]);
        let err = resolve(&bad, "team-a", None).unwrap_err();
        assert!(matches!(err, ClientError::AuthScope(_)), "{err}");
        assert!(err.to_string().contains("\"shared\""), "{err}");
    }

    #[test]
    fn conditions_use_current_labels_and_name_both_objects() {
        let cp = cluster("shared", AuthenticationScope::ManifestNamespace, None, only_label("team", "a"));
        let ok: BTreeMap<String, String> = [("team".to_string(), "a".to_string())].into();
        assert!(resolve(&cp, "team-a", Some(&ok)).is_ok());
        let changed: BTreeMap<String, String> = [("team".to_string(), "b".to_string())].into();
        let err = resolve(&cp, "team-a", Some(&changed)).unwrap_err().to_string();
        assert!(err.contains("ClusterProvider \"shared\"") && err.contains("namespace \"team-a\""), "{err}");
        assert!(resolve(&cp, "team-a", None).is_err(), "unknown labels never admit");
    }

    #[test]
    fn a_tenant_address_that_only_contains_a_service_name_uses_the_tenants_tls_secret() {
        // `x.keyward.svc.evil.com` is not a Service of namespace keyward: using keyward's TLS
        // Secret would present the reconciler's client certificate to that host.
        let r = resolve(&provider("team-a", "p", "x.keyward.svc.evil.com:8443", 1), "team-a", None).unwrap();
        assert_eq!(r.tls_namespace, "team-a");
        let r = resolve(&provider("team-a", "p", "kube.keyward.svc:8443", 1), "team-a", None).unwrap();
        assert_eq!(r.tls_namespace, "keyward", "a real Service name still counts");
    }

    #[test]
    fn bad_address_is_reported_with_the_store() {
        let err = resolve(&provider("a", "p", "https://x:1", 1), "a", None).unwrap_err().to_string();
        assert!(err.starts_with("Provider \"p\" has an invalid address"), "{err}");
    }
}
