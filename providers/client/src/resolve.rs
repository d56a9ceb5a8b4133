//! Pure store resolution: from a Provider, ClusterProvider, SecretStore or ClusterSecretStore
//! object and the manifest's namespace to the address, the ProviderReference sent on the wire,
//! the auth namespace, who owns the provider configuration, and the namespace of the TLS Secret.
//! The namespace conditions run here, before any client exists.
//!
//! A SecretStore or ClusterSecretStore carries its configuration inline: the reference sent to
//! the provider names the store itself (`external-secrets.io/v1`, kind `SecretStore` or
//! `ClusterSecretStore`, the store kind in `store_ref_kind`), and the provider reads the store
//! and translates its `spec.provider` with `keyward_crds::rules::store_backend`, as it reads a
//! configuration object otherwise. The wire contract is unchanged (no new field); the provider
//! process is the one `--store-provider` names for that provider.

use std::collections::BTreeMap;
use std::sync::Arc;

use keyward_crds::rules::{ConfigOwner, NamespaceView, StoreSpec};
use keyward_crds::rules::{StoreProviderError, store_backend};
use keyward_crds::rules::{
    auth_namespace, check_namespace_admitted, config_owner, parse_address, tls_secret_namespace,
};
use keyward_crds::secret_store::SECRET_STORE_API_VERSION;
use keyward_crds::{
    Capabilities, ClusterProvider, ClusterProviderCondition, ClusterSecretStore, Provider, ProviderConfig,
    ProviderStatus, SecretStore, SecretStoreProvider, StoreKind,
};
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
    /// A namespaced SecretStore.
    SecretStore(Arc<SecretStore>),
    /// A ClusterSecretStore.
    ClusterSecretStore(Arc<ClusterSecretStore>),
}

/// Where the provider processes that serve SecretStores and ClusterSecretStores listen, by the
/// provider's name under `spec.provider` (`kubernetes`, `fake`), and where the TLS Secret to
/// reach them is (the operator runs them; the tenant writes only the store).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreProviders {
    /// `host:port` by provider name.
    pub addresses: BTreeMap<String, String>,
    /// Namespace of the `keyward-provider-tls` Secret when the address is not a Service name.
    pub tls_namespace: String,
}

impl StoreObject {
    /// Kind of the store.
    pub fn kind(&self) -> StoreKind {
        match self {
            StoreObject::Provider(_) => StoreKind::Provider,
            StoreObject::ClusterProvider(_) => StoreKind::ClusterProvider,
            StoreObject::SecretStore(_) => StoreKind::SecretStore,
            StoreObject::ClusterSecretStore(_) => StoreKind::ClusterSecretStore,
        }
    }

    /// Name of the store.
    pub fn name(&self) -> String {
        match self {
            StoreObject::Provider(p) => p.name_any(),
            StoreObject::ClusterProvider(p) => p.name_any(),
            StoreObject::SecretStore(p) => p.name_any(),
            StoreObject::ClusterSecretStore(p) => p.name_any(),
        }
    }

    /// `metadata.generation`.
    pub fn generation(&self) -> Option<i64> {
        match self {
            StoreObject::Provider(p) => p.metadata.generation,
            StoreObject::ClusterProvider(p) => p.metadata.generation,
            StoreObject::SecretStore(p) => p.metadata.generation,
            StoreObject::ClusterSecretStore(p) => p.metadata.generation,
        }
    }

    /// `metadata.labels`.
    pub fn labels(&self) -> &std::collections::BTreeMap<String, String> {
        match self {
            StoreObject::Provider(p) => p.labels(),
            StoreObject::ClusterProvider(p) => p.labels(),
            StoreObject::SecretStore(p) => p.labels(),
            StoreObject::ClusterSecretStore(p) => p.labels(),
        }
    }

    /// `metadata.uid`.
    pub fn uid(&self) -> Option<String> {
        match self {
            StoreObject::Provider(p) => p.metadata.uid.clone(),
            StoreObject::ClusterProvider(p) => p.metadata.uid.clone(),
            StoreObject::SecretStore(p) => p.metadata.uid.clone(),
            StoreObject::ClusterSecretStore(p) => p.metadata.uid.clone(),
        }
    }

    /// The ClusterProvider's authentication scope (`None` for a Provider).
    pub fn authentication_scope(&self) -> Option<keyward_crds::AuthenticationScope> {
        match self {
            StoreObject::ClusterProvider(p) => Some(p.spec.authentication_scope),
            _ => None,
        }
    }

    /// `spec.config` of a Provider or ClusterProvider (a store carries its configuration
    /// inline instead).
    pub fn config(&self) -> Option<&ProviderConfig> {
        match self {
            StoreObject::Provider(p) => Some(&p.spec.config),
            StoreObject::ClusterProvider(p) => Some(&p.spec.config),
            StoreObject::SecretStore(_) | StoreObject::ClusterSecretStore(_) => None,
        }
    }

    /// The status the store reported.
    pub fn status(&self) -> Option<&ProviderStatus> {
        match self {
            StoreObject::Provider(p) => p.status.as_ref(),
            StoreObject::ClusterProvider(p) => p.status.as_ref(),
            StoreObject::SecretStore(p) => p.status.as_ref(),
            StoreObject::ClusterSecretStore(p) => p.status.as_ref(),
        }
    }

    /// The spec of a SecretStore or ClusterSecretStore (none for a Provider or ClusterProvider).
    pub fn store_spec(&self) -> Option<&keyward_crds::SecretStoreSpec> {
        match self {
            StoreObject::SecretStore(s) => Some(&s.spec),
            StoreObject::ClusterSecretStore(s) => Some(&s.spec.store),
            StoreObject::Provider(_) | StoreObject::ClusterProvider(_) => None,
        }
    }

    /// Whether the controller instance of class `class` serves this store: a SecretStore or
    /// ClusterSecretStore that names a controller in `spec.controller` only by the instance of
    /// that class, as upstream (`rules::store_controller_matches`); every store otherwise.
    pub fn served_by(&self, class: Option<&str>) -> bool {
        self.store_spec()
            .is_none_or(|spec| keyward_crds::rules::store_controller_matches(spec, class.unwrap_or_default()))
    }

    /// The namespace conditions of a cluster-scoped store (none for namespaced ones).
    pub fn conditions(&self) -> &[ClusterProviderCondition] {
        match self {
            StoreObject::ClusterProvider(p) => &p.spec.conditions,
            StoreObject::ClusterSecretStore(p) => &p.spec.store.conditions,
            StoreObject::Provider(_) | StoreObject::SecretStore(_) => &[],
        }
    }

    /// Capabilities the provider reported, if it has been checked.
    pub fn capabilities(&self) -> Option<Capabilities> {
        self.status().and_then(|s| s.capabilities)
    }

    /// Whether the namespace labels are needed to decide (a cluster-scoped store with
    /// conditions).
    pub fn needs_namespace_labels(&self) -> bool {
        !self.conditions().is_empty()
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
    stores: &StoreProviders,
) -> Result<Resolved, ClientError> {
    let name = store.name();
    if matches!(store, StoreObject::ClusterProvider(_) | StoreObject::ClusterSecretStore(_)) {
        let empty = BTreeMap::new();
        check_namespace_admitted(
            store.kind(),
            &name,
            store.conditions(),
            NamespaceView { name: manifest_ns, labels: namespace_labels.unwrap_or(&empty) },
        )
        .inspect_err(|denied| {
            // The namespace owner sees only that it is refused; the operator sees why.
            tracing::info!(store = %name, kind = %store.kind(), namespace = manifest_ns, detail = %denied.detail(), "namespace refused");
        })?;
    }
    let auth_ns = match store {
        StoreObject::ClusterProvider(cp) => {
            auth_namespace(StoreSpec::ClusterProvider { name: &name, spec: &cp.spec }, manifest_ns)?
        }
        // A Provider and a SecretStore serve their own namespace; a ClusterSecretStore's
        // references without a namespace resolve in the manifest's, as upstream.
        _ => auth_namespace(StoreSpec::Provider, manifest_ns)?,
    };
    finish(store, auth_ns, stores)
}

fn finish(store: &StoreObject, auth_ns: String, stores: &StoreProviders) -> Result<Resolved, ClientError> {
    let name = store.name();
    let kind = store.kind();
    let scope = store.authentication_scope();
    let (address, reference, tls_default) = match store {
        StoreObject::Provider(p) => config_reference(&p.spec.config, kind, scope, &auth_ns),
        StoreObject::ClusterProvider(p) => config_reference(&p.spec.config, kind, scope, &auth_ns),
        StoreObject::SecretStore(s) => {
            let (address, reference) = store_reference(store, &s.spec.provider, auth_ns.clone(), stores)?;
            (address, reference, stores.tls_namespace.clone())
        }
        StoreObject::ClusterSecretStore(s) => {
            let (address, reference) = store_reference(store, &s.spec.store.provider, String::new(), stores)?;
            (address, reference, stores.tls_namespace.clone())
        }
    };
    let parsed =
        parse_address(&address).map_err(|message| ClientError::Address { kind, name: name.clone(), message })?;
    Ok(Resolved {
        kind,
        name,
        server_name: parsed.host,
        tls_namespace: tls_secret_namespace(&address, &tls_default),
        owner: config_owner(Some(kind), scope, Some(&auth_ns)),
        address,
        reference,
        auth_namespace: auth_ns,
    })
}

/// The address, reference and default TLS namespace of a Provider or ClusterProvider.
fn config_reference(
    config: &ProviderConfig,
    kind: StoreKind,
    scope: Option<keyward_crds::AuthenticationScope>,
    auth_ns: &str,
) -> (String, ProviderReference, String) {
    let provider_ref = &config.provider_ref;
    let reference = ProviderReference {
        api_version: provider_ref.api_version.clone(),
        kind: provider_ref.kind.clone(),
        name: provider_ref.name.clone(),
        namespace: auth_ns.to_string(),
        store_ref_kind: kind.as_str().to_string(),
        // The provider decides who owns the configuration from this (and refuses what a
        // tenant-owned one may not do), so it travels as the ClusterProvider says it.
        authentication_scope: scope.map(|s| s.as_str().to_string()).unwrap_or_default(),
    };
    (config.address.clone(), reference, auth_ns.to_string())
}

/// The provider address and the reference for a SecretStore or ClusterSecretStore: the
/// reference names the store itself; a ClusterSecretStore's carries no namespace (`namespace`
/// empty: the provider resolves its references without one in the source namespace).
fn store_reference(
    store: &StoreObject,
    provider: &SecretStoreProvider,
    namespace: String,
    stores: &StoreProviders,
) -> Result<(String, ProviderReference), ClientError> {
    let unserved = |source| ClientError::StoreProvider { kind: store.kind(), name: store.name(), source };
    let backend = store_backend(provider, keyward_provider_registry::PROVIDER_KINDS).map_err(unserved)?;
    let address = stores
        .addresses
        .get(backend.provider_name())
        .cloned()
        .ok_or_else(|| unserved(StoreProviderError::NotEnabled(backend.provider_name().to_string())))?;
    let reference = ProviderReference {
        api_version: SECRET_STORE_API_VERSION.to_string(),
        kind: store.kind().as_str().to_string(),
        name: store.name(),
        namespace,
        store_ref_kind: store.kind().as_str().to_string(),
        authentication_scope: String::new(),
    };
    Ok((address, reference))
}

/// Resolves `store` for the store controllers' own checks (Validate, Capabilities), which
/// are not made on behalf of any manifest: the auth namespace is a namespaced store's own, or
/// the ClusterProvider's `providerRef.namespace` (empty when it has none, and for a
/// ClusterSecretStore).
pub fn resolve_for_check(store: &StoreObject, stores: &StoreProviders) -> Result<Resolved, ClientError> {
    let auth_ns = match store {
        StoreObject::Provider(p) => p.namespace().unwrap_or_default(),
        StoreObject::SecretStore(p) => p.namespace().unwrap_or_default(),
        StoreObject::ClusterProvider(cp) => cp.spec.config.provider_ref.namespace.clone().unwrap_or_default(),
        StoreObject::ClusterSecretStore(_) => String::new(),
    };
    finish(store, auth_ns, stores)
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
        let r =
            resolve(&provider("team-a", "p", "127.0.0.1:9443", 1), "team-a", None, &StoreProviders::default()).unwrap();
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
        let r = resolve(&pn, "team-a", None, &StoreProviders::default()).unwrap();
        assert_eq!(r.reference.namespace, "creds");
        assert_eq!(r.reference.store_ref_kind, "ClusterProvider");
        assert_eq!(r.reference.authentication_scope, "ProviderNamespace");
        assert_eq!(r.owner, ConfigOwner::Operator, "the operator named the namespace");
        assert_eq!(r.tls_namespace, "keyward", "service address namespace wins");
        // ManifestNamespace reaches a configuration the tenant wrote, even when the
        // ClusterProvider names a namespace.
        let mn = cluster("shared", AuthenticationScope::ManifestNamespace, Some("creds"), vec![]);
        let r = resolve(&mn, "team-a", None, &StoreProviders::default()).unwrap();
        assert_eq!(r.reference.namespace, "team-a");
        assert_eq!(r.reference.authentication_scope, "ManifestNamespace");
        assert_eq!(r.owner, ConfigOwner::Tenant);
    }

    #[test]
    fn provider_namespace_scope_without_namespace_is_refused_at_runtime() {
        let bad = cluster("shared", AuthenticationScope::ProviderNamespace, None, vec![]);
        let err = resolve(&bad, "team-a", None, &StoreProviders::default()).unwrap_err();
        assert!(matches!(err, ClientError::AuthScope(_)), "{err}");
        assert!(err.to_string().contains("\"shared\""), "{err}");
    }

    #[test]
    fn conditions_use_current_labels_and_name_both_objects() {
        let cp = cluster("shared", AuthenticationScope::ManifestNamespace, None, only_label("team", "a"));
        let ok: BTreeMap<String, String> = [("team".to_string(), "a".to_string())].into();
        assert!(resolve(&cp, "team-a", Some(&ok), &StoreProviders::default()).is_ok());
        let changed: BTreeMap<String, String> = [("team".to_string(), "b".to_string())].into();
        let err = resolve(&cp, "team-a", Some(&changed), &StoreProviders::default()).unwrap_err().to_string();
        assert!(err.contains("ClusterProvider \"shared\"") && err.contains("namespace \"team-a\""), "{err}");
        assert!(resolve(&cp, "team-a", None, &StoreProviders::default()).is_err(), "unknown labels never admit");
    }

    #[test]
    fn a_tenant_address_that_only_contains_a_service_name_uses_the_tenants_tls_secret() {
        // `x.keyward.svc.evil.com` is not a Service of namespace keyward: using keyward's TLS
        // Secret would present the reconciler's client certificate to that host.
        let r = resolve(
            &provider("team-a", "p", "x.keyward.svc.evil.com:8443", 1),
            "team-a",
            None,
            &StoreProviders::default(),
        )
        .unwrap();
        assert_eq!(r.tls_namespace, "team-a");
        let r =
            resolve(&provider("team-a", "p", "kube.keyward.svc:8443", 1), "team-a", None, &StoreProviders::default())
                .unwrap();
        assert_eq!(r.tls_namespace, "keyward", "a real Service name still counts");
    }

    fn stores() -> StoreProviders {
        StoreProviders {
            addresses: [("kubernetes".to_string(), "kube.keyward.svc:8443".to_string())].into(),
            tls_namespace: "keyward".into(),
        }
    }

    fn secret_store(ns: &str, provider: &str) -> StoreObject {
        StoreObject::SecretStore(Arc::new(SecretStore {
            metadata: ObjectMeta { name: Some("store".into()), namespace: Some(ns.into()), ..Default::default() },
            spec: serde_yaml::from_str(provider).unwrap(),
            status: None,
        }))
    }

    fn cluster_secret_store(spec: &str) -> StoreObject {
        StoreObject::ClusterSecretStore(Arc::new(ClusterSecretStore {
            metadata: ObjectMeta { name: Some("shared-store".into()), ..Default::default() },
            spec: serde_yaml::from_str(spec).unwrap(),
            status: None,
        }))
    }

    #[test]
    fn a_secret_store_is_reached_by_naming_itself_in_its_own_namespace() {
        let ss = secret_store("team-a", "provider: {kubernetes: {auth: {serviceAccount: {name: r}}}}");
        let r = resolve(&ss, "team-a", None, &stores()).unwrap();
        assert_eq!(r.address, "kube.keyward.svc:8443");
        assert_eq!(r.tls_namespace, "keyward", "the operator's provider process, the operator's TLS Secret");
        assert_eq!(r.owner, ConfigOwner::Tenant);
        assert_eq!(
            r.reference,
            ProviderReference {
                api_version: "external-secrets.io/v1".into(),
                kind: "SecretStore".into(),
                name: "store".into(),
                namespace: "team-a".into(),
                store_ref_kind: "SecretStore".into(),
                authentication_scope: String::new(),
            }
        );
        let local = StoreProviders { addresses: stores().addresses, tls_namespace: String::new() };
        let local =
            StoreProviders { addresses: [("kubernetes".to_string(), "127.0.0.1:9443".to_string())].into(), ..local };
        assert_eq!(resolve(&ss, "team-a", None, &local).unwrap().tls_namespace, "");
    }

    #[test]
    fn a_cluster_secret_store_names_no_namespace_and_applies_its_conditions() {
        let css = cluster_secret_store(
            "provider: {kubernetes: {auth: {serviceAccount: {name: r}}}}\nconditions: [{namespaces: [team-a]}]",
        );
        let r = resolve(&css, "team-a", None, &stores()).unwrap();
        assert_eq!(r.reference.namespace, "", "references without a namespace resolve in the manifest's");
        assert_eq!(r.reference.kind, "ClusterSecretStore");
        assert_eq!(r.owner, ConfigOwner::Operator);
        assert_eq!(r.auth_namespace, "team-a");
        let err = resolve(&css, "team-b", None, &stores()).unwrap_err();
        assert!(matches!(err, ClientError::NamespaceDenied(_)), "{err}");
        assert!(err.to_string().starts_with("ClusterSecretStore \"shared-store\" does not allow namespace \"team-b\""));
        assert!(css.needs_namespace_labels());
    }

    #[test]
    fn a_store_without_a_served_provider_says_so() {
        let alibaba = secret_store("a", "provider: {alibaba: {regionID: r}}");
        let err = resolve(&alibaba, "a", None, &stores()).unwrap_err();
        assert_eq!(err.reason(), Some("ProviderNotSupported"));
        assert!(err.to_string().starts_with("SecretStore \"store\": spec.provider.alibaba is not served"), "{err}");
        // Served by Keyward, but no process configured for it here.
        let vault =
            secret_store("a", "provider: {vault: {server: 'http://v', auth: {tokenSecretRef: {name: t, key: k}}}}");
        let err = resolve(&vault, "a", None, &stores()).unwrap_err();
        assert_eq!(err.reason(), Some("ProviderNotSupported"), "{err}");
        assert!(err.to_string().contains("which this installation does not run: enable it"), "{err}");
        let none = secret_store("a", "provider: {}");
        assert_eq!(resolve(&none, "a", None, &stores()).unwrap_err().reason(), Some("InvalidProviderConfig"));
    }

    #[test]
    fn bad_address_is_reported_with_the_store() {
        let err = resolve(&provider("a", "p", "https://x:1", 1), "a", None, &StoreProviders::default())
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("Provider \"p\" has an invalid address"), "{err}");
    }
}
