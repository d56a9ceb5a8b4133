//! The tenant boundary: which objects a provider configuration may name, and where a push may
//! write.
//!
//! Whoever can write a namespace can write the provider configurations in it. So a
//! configuration is trusted only as far as its namespace: one that lives in a tenant namespace
//! names Secrets, ServiceAccounts and ConfigMaps of that namespace only, whatever store kind
//! reaches it. Only a configuration reached through a ClusterProvider with
//! `authenticationScope: ProviderNamespace` (the cluster operator chose that namespace and wrote
//! the ClusterProvider) — or through a ClusterSecretStore — is operator-owned and may reach
//! further.
//!
//! The webhook (at admission, where it knows the namespace), the reconciler (before calling a
//! provider) and the provider process itself (a separate trust domain, on every call) all apply
//! these functions.

use crate::common::StoreKind;
use crate::provider::AuthenticationScope;

use super::ValidationErrors;

/// Who owns a provider configuration, judged by the path a request reached it through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConfigOwner {
    /// The cluster operator: the configuration lives in the namespace a ClusterProvider with
    /// `authenticationScope: ProviderNamespace` names. It may name objects in other namespaces.
    Operator,
    /// A namespace owner: every other path. The configuration names objects of its own
    /// namespace only.
    Tenant,
}

impl ConfigOwner {
    /// The owner as written in messages.
    pub fn as_str(self) -> &'static str {
        match self {
            ConfigOwner::Operator => "operator-owned",
            ConfigOwner::Tenant => "tenant-owned",
        }
    }
}

/// Who owns the configuration a request reaches.
///
/// `store_kind` is the kind of store the request came through (`None`: unknown), `scope` the
/// ClusterProvider's authentication scope (`None`: unknown or not a ClusterProvider) and
/// `config_namespace` the namespace named by `spec.config.providerRef.namespace`. Anything
/// unknown counts as tenant-owned: a peer that does not say how it got here gets the narrow
/// rule.
pub fn config_owner(
    store_kind: Option<StoreKind>,
    scope: Option<AuthenticationScope>,
    config_namespace: Option<&str>,
) -> ConfigOwner {
    let named = config_namespace.is_some_and(|ns| !ns.is_empty());
    match (store_kind, scope) {
        (Some(StoreKind::ClusterProvider), Some(AuthenticationScope::ProviderNamespace)) if named => {
            ConfigOwner::Operator
        }
        (Some(StoreKind::ClusterSecretStore), _) => ConfigOwner::Operator,
        _ => ConfigOwner::Tenant,
    }
}

/// Whether a request may use the configuration in `config_namespace` on behalf of a manifest in
/// `source_namespace`. A Provider, and a ClusterProvider with `ManifestNamespace`, reach the
/// configuration of the manifest's own namespace: one in another namespace belongs to another
/// tenant, and serving it would hand that tenant's secrets to this one. The reconciler never
/// sends such a reference; the provider refuses one anyway, since it trusts no caller for the
/// boundary. A ClusterProvider that does not say its scope (an older peer) may be a
/// `ProviderNamespace` one, so it is left to the narrow rule of [`named_namespace`]. Empty
/// namespaces (a check not made for any manifest) are not judged.
pub fn check_config_namespace(
    store_kind: Option<StoreKind>,
    scope: Option<AuthenticationScope>,
    config_namespace: &str,
    source_namespace: &str,
) -> Result<(), String> {
    let own_namespace_only = match store_kind {
        Some(StoreKind::ClusterProvider) => scope == Some(AuthenticationScope::ManifestNamespace),
        Some(StoreKind::ClusterSecretStore) | None => false,
        Some(_) => true,
    };
    if !own_namespace_only || config_namespace.is_empty() || source_namespace.is_empty() {
        return Ok(());
    }
    if config_namespace == source_namespace {
        return Ok(());
    }
    let through = match store_kind {
        Some(StoreKind::ClusterProvider) => "a ClusterProvider with authenticationScope ManifestNamespace",
        _ => "a Provider",
    };
    Err(format!(
        "the configuration is in namespace {config_namespace:?}, but a request from namespace {source_namespace:?} \
         through {through} may only use a configuration of its own namespace"
    ))
}

/// The kinds of object a configuration can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NamedKind {
    /// A Secret (credentials, a kubeconfig, a CA bundle).
    Secret,
    /// A ServiceAccount whose token the provider requests.
    ServiceAccount,
    /// A ConfigMap (a CA bundle).
    ConfigMap,
}

impl std::fmt::Display for NamedKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            NamedKind::Secret => "Secret",
            NamedKind::ServiceAccount => "ServiceAccount",
            NamedKind::ConfigMap => "ConfigMap",
        })
    }
}

/// One object a configuration names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NamedObject<'a> {
    /// JSON path of the reference, for example `spec.auth.token.bearerToken`.
    pub field: &'a str,
    /// Kind of the object.
    pub kind: NamedKind,
    /// Its name.
    pub name: &'a str,
    /// The namespace the reference names; `None` or empty means the configuration's own.
    pub namespace: Option<&'a str>,
}

/// A tenant-owned configuration that names an object in another namespace.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}.namespace: {}", self.reason())]
pub struct BoundaryViolation {
    /// JSON path of the reference.
    pub field: String,
    /// Kind of the object.
    pub kind: NamedKind,
    /// Its name.
    pub name: String,
    /// The namespace it names.
    pub namespace: String,
    /// The configuration's namespace.
    pub config_namespace: String,
}

impl BoundaryViolation {
    /// What is wrong and what to do, without the field.
    pub fn reason(&self) -> String {
        let (field, config_ns) = (&self.field, &self.config_namespace);
        format!(
            "{:?} names {} {:?} outside namespace {config_ns:?} where this configuration lives, and a \
             configuration in a tenant namespace may only name objects of its own namespace; remove \
             {field}.namespace to use namespace {config_ns:?}, or have the cluster operator serve this store \
             through a ClusterProvider with authenticationScope ProviderNamespace",
            self.namespace, self.kind, self.name
        )
    }
}

/// The namespace an object named by a configuration is read from: its own `namespace` when set
/// and the configuration is operator-owned; the configuration's namespace when it names none
/// (or names that one); otherwise a violation.
pub fn named_namespace<'a>(
    owner: ConfigOwner,
    config_namespace: &'a str,
    object: &NamedObject<'a>,
) -> Result<&'a str, BoundaryViolation> {
    match object.namespace.filter(|ns| !ns.is_empty()) {
        None => Ok(config_namespace),
        Some(ns) if ns == config_namespace || owner == ConfigOwner::Operator => Ok(ns),
        Some(ns) => Err(BoundaryViolation {
            field: object.field.to_string(),
            kind: object.kind,
            name: object.name.to_string(),
            namespace: ns.to_string(),
            config_namespace: config_namespace.to_string(),
        }),
    }
}

/// What a provider configuration reaches beyond itself: the objects it names, the places where
/// it would use the provider's own identity, and whether it lets pushes choose their namespace.
/// Each configuration kind lists its own ([`super::vault_reach`], a provider crate's
/// [`crate::registry::ProviderSpec::reach`]); [`check_boundary`] judges them all the same way.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reach<'a> {
    /// Every object the configuration names, in field order.
    pub named: Vec<NamedObject<'a>>,
    /// Settings that make the provider use its own credentials (ambient identity).
    pub ambient: Vec<Ambient>,
    /// `spec.allowRemoteNamespaceOverride` (Kubernetes only).
    pub allow_remote_namespace_override: bool,
}

/// A setting that makes the provider act with its own identity: its ServiceAccount token, its
/// cloud credentials chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ambient {
    /// JSON path of the setting.
    pub field: &'static str,
    /// What it is, for the message (for example `a SecretsManager config without spec.auth`).
    pub what: &'static str,
}

/// Whether a configuration may use the provider's own identity: an operator-owned one, or one
/// living in a namespace the operator lists in `identity` ([`super::ProviderIdentityNamespaces`]).
/// Any other tenant's would act as the provider, which can reach every namespace's credentials.
pub fn ambient_refusal(
    owner: ConfigOwner,
    config_namespace: &str,
    what: &str,
    identity: &super::ProviderIdentityNamespaces,
) -> Result<(), String> {
    if owner == ConfigOwner::Operator || identity.admits(config_namespace) {
        return Ok(());
    }
    Err(format!(
        "{what} uses the provider's own credentials, which only a configuration owned by the cluster operator \
         (reached through a ClusterProvider with authenticationScope ProviderNamespace) may do, or one in a namespace \
         the operator lets use them ({} {config_namespace}, chart value providerIdentityNamespaces); name \
         credentials in namespace {config_namespace:?} instead",
        super::PROVIDER_IDENTITY_FLAG
    ))
}

/// Checks everything a configuration living in `config_namespace` reaches against the boundary:
/// every object it names, its use of the provider's own identity, and whether it may let pushes
/// choose their namespace. The errors list every offending field.
pub fn check_boundary(owner: ConfigOwner, config_namespace: &str, reach: &Reach<'_>) -> Result<(), ValidationErrors> {
    check_boundary_with(owner, config_namespace, reach, &super::ProviderIdentityNamespaces::NONE)
}

/// [`check_boundary`], with the namespaces whose configurations may use the provider's identity.
pub fn check_boundary_with(
    owner: ConfigOwner,
    config_namespace: &str,
    reach: &Reach<'_>,
    identity: &super::ProviderIdentityNamespaces,
) -> Result<(), ValidationErrors> {
    let mut errs = ValidationErrors::default();
    for object in &reach.named {
        if let Err(v) = named_namespace(owner, config_namespace, object) {
            errs.push(format!("{}.namespace", v.field), v.reason());
        }
    }
    for a in &reach.ambient {
        if let Err(m) = ambient_refusal(owner, config_namespace, a.what, identity) {
            errs.push(a.field, m);
        }
    }
    if reach.allow_remote_namespace_override && owner == ConfigOwner::Tenant {
        errs.push(
            "spec.allowRemoteNamespaceOverride",
            format!(
                "a configuration in a tenant namespace ({config_namespace:?}) cannot let pushes write outside its \
                 remoteNamespace; remove the field, or have the cluster operator serve this store through a \
                 ClusterProvider with authenticationScope ProviderNamespace"
            ),
        );
    }
    errs.into_result()
}

/// Whether a push entry may ask for its own `remoteNamespace` at all: only through an
/// operator-owned configuration. This is what the webhook and the reconciler can decide without
/// reading the configuration; the provider decides the rest with [`push_namespace`].
pub fn check_push_override(owner: ConfigOwner, requested: Option<&str>) -> Result<(), String> {
    match requested.filter(|ns| !ns.is_empty()) {
        Some(ns) if owner == ConfigOwner::Tenant => Err(format!(
            "push metadata asks for remoteNamespace {ns:?}, but the store's configuration is tenant-owned, so \
             pushes always go to its remoteNamespace: remove spec.remoteNamespace from the metadata, or push \
             through a ClusterProvider with authenticationScope ProviderNamespace whose configuration sets \
             allowRemoteNamespaceOverride: true"
        )),
        _ => Ok(()),
    }
}

/// The namespace a push (and the DeleteSecret and SecretExists calls for the same entry)
/// works in: the configuration's `remoteNamespace`, or the push metadata's `remoteNamespace`,
/// which only an operator-owned configuration that sets `allowRemoteNamespaceOverride`
/// honours.
pub fn push_namespace(
    owner: ConfigOwner,
    allow_override: bool,
    config_remote_namespace: &str,
    requested: Option<&str>,
) -> Result<String, String> {
    check_push_override(owner, requested)?;
    match requested.filter(|ns| !ns.is_empty()) {
        None => Ok(config_remote_namespace.to_string()),
        Some(ns) if ns == config_remote_namespace || allow_override => Ok(ns.to_string()),
        Some(ns) => Err(format!(
            "push metadata asks for remoteNamespace {ns:?}, but the store's configuration only writes into its \
             remoteNamespace {config_remote_namespace:?}: set allowRemoteNamespaceOverride: true in the \
             configuration to let pushes choose their namespace"
        )),
    }
}

/// The `remoteNamespace` a push entry's metadata asks for (`spec.remoteNamespace` of a
/// `PushSecretMetadata` object), if any. Used where the metadata is only inspected (admission,
/// the reconciler); the provider parses the metadata itself. Metadata past the free-form JSON
/// limits was not kept, so what it asks for is unknown: an error, never "nothing asked".
pub fn push_metadata_remote_namespace(
    metadata: &crate::free_json::FreeJson,
) -> Result<Option<String>, crate::free_json::FreeJsonError> {
    let value = metadata.value()?;
    let ns = value.pointer("/spec/remoteNamespace").and_then(serde_json::Value::as_str);
    Ok(ns.filter(|ns| !ns.is_empty()).map(str::to_string))
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn owner_table() {
        use AuthenticationScope::*;
        use ConfigOwner::*;
        let cases = [
            (Some(StoreKind::ClusterProvider), Some(ProviderNamespace), Some("keyward"), Operator),
            (Some(StoreKind::ClusterProvider), Some(ProviderNamespace), Some(""), Tenant),
            (Some(StoreKind::ClusterProvider), Some(ProviderNamespace), None, Tenant),
            (Some(StoreKind::ClusterProvider), Some(ManifestNamespace), Some("keyward"), Tenant),
            (Some(StoreKind::ClusterProvider), None, Some("keyward"), Tenant),
            (Some(StoreKind::Provider), Some(ProviderNamespace), Some("keyward"), Tenant),
            (Some(StoreKind::SecretStore), None, Some("team-a"), Tenant),
            (Some(StoreKind::ClusterSecretStore), None, Some("keyward"), Operator),
            (None, Some(ProviderNamespace), Some("keyward"), Tenant),
        ];
        for (kind, scope, ns, want) in cases {
            assert_eq!(config_owner(kind, scope, ns), want, "{kind:?} {scope:?} {ns:?}");
        }
    }

    #[test]
    fn tenant_paths_use_the_configuration_of_their_own_namespace() {
        use AuthenticationScope::*;
        let provider = Some(StoreKind::Provider);
        let cluster = Some(StoreKind::ClusterProvider);
        assert_eq!(check_config_namespace(provider, None, "team-a", "team-a"), Ok(()));
        assert_eq!(check_config_namespace(cluster, Some(ManifestNamespace), "team-a", "team-a"), Ok(()));
        // Operator-owned, or a peer that does not say: the configuration may live elsewhere.
        assert_eq!(check_config_namespace(cluster, Some(ProviderNamespace), "creds", "team-a"), Ok(()));
        assert_eq!(check_config_namespace(cluster, None, "creds", "team-a"), Ok(()));
        // Checks not made for a manifest.
        assert_eq!(check_config_namespace(provider, None, "team-a", ""), Ok(()));
        for (kind, scope, via) in [
            (provider, None, "through a Provider"),
            (cluster, Some(ManifestNamespace), "ManifestNamespace"),
            (Some(StoreKind::SecretStore), None, "through a Provider"),
        ] {
            let err = check_config_namespace(kind, scope, "team-b", "team-a").unwrap_err();
            assert!(err.contains("in namespace \"team-b\"") && err.contains("from namespace \"team-a\""), "{err}");
            assert!(err.contains(via), "{err}");
        }
    }

    #[test]
    fn named_namespace_keeps_tenants_at_home() {
        let obj = |ns| NamedObject {
            field: "spec.auth.token.bearerToken",
            kind: NamedKind::Secret,
            name: "tok",
            namespace: ns,
        };
        assert_eq!(named_namespace(ConfigOwner::Tenant, "team-a", &obj(None)), Ok("team-a"));
        assert_eq!(named_namespace(ConfigOwner::Tenant, "team-a", &obj(Some(""))), Ok("team-a"));
        assert_eq!(named_namespace(ConfigOwner::Tenant, "team-a", &obj(Some("team-a"))), Ok("team-a"));
        assert_eq!(named_namespace(ConfigOwner::Operator, "keyward", &obj(Some("creds"))), Ok("creds"));
        assert_eq!(named_namespace(ConfigOwner::Operator, "keyward", &obj(None)), Ok("keyward"));
        let err = named_namespace(ConfigOwner::Tenant, "team-a", &obj(Some("team-b"))).unwrap_err();
        assert_eq!(err.namespace, "team-b");
        let msg = err.to_string();
        assert!(
            msg.starts_with(
                "spec.auth.token.bearerToken.namespace: \"team-b\" names Secret \"tok\" outside namespace \"team-a\""
            ),
            "{msg}"
        );
        assert!(msg.contains("authenticationScope ProviderNamespace"), "{msg}");
    }

    #[test]
    fn ambient_identity_and_overrides_are_the_operators() {
        let reach = Reach {
            named: vec![NamedObject { field: "spec.a", kind: NamedKind::Secret, name: "s", namespace: Some("x") }],
            ambient: vec![Ambient { field: "spec.auth", what: "a config without spec.auth" }],
            allow_remote_namespace_override: true,
        };
        let errs = check_boundary(ConfigOwner::Tenant, "team-a", &reach).unwrap_err();
        let fields: Vec<&str> = errs.0.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["spec.a.namespace", "spec.auth", "spec.allowRemoteNamespaceOverride"]);
        assert!(errs.0[1].message.starts_with("a config without spec.auth uses the provider's own credentials"));
        assert!(errs.0[1].message.contains("in namespace \"team-a\""), "{}", errs.0[1].message);
        assert_eq!(check_boundary(ConfigOwner::Operator, "keyward", &reach), Ok(()));
        assert_eq!(check_boundary(ConfigOwner::Tenant, "team-a", &Reach::default()), Ok(()));
        assert!(errs.0[1].message.contains("--provider-identity-namespaces team-a"), "{}", errs.0[1].message);
        // The operator's switch lets a listed namespace use the provider's identity; references
        // to other namespaces and push overrides stay refused.
        let switch = super::super::ProviderIdentityNamespaces::parse("team-a").expect("list");
        let errs = check_boundary_with(ConfigOwner::Tenant, "team-a", &reach, &switch).unwrap_err();
        let fields: Vec<&str> = errs.0.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["spec.a.namespace", "spec.allowRemoteNamespaceOverride"]);
        let errs = check_boundary_with(ConfigOwner::Tenant, "team-b", &reach, &switch).unwrap_err();
        assert_eq!(errs.0.len(), 3, "another namespace is not listed");
    }

    #[test]
    fn push_namespace_override_needs_an_operator_config_that_allows_it() {
        use ConfigOwner::*;
        assert_eq!(push_namespace(Tenant, false, "remote", None).as_deref(), Ok("remote"));
        assert_eq!(push_namespace(Tenant, false, "remote", Some("")).as_deref(), Ok("remote"));
        assert_eq!(push_namespace(Operator, false, "remote", Some("remote")).as_deref(), Ok("remote"));
        assert_eq!(push_namespace(Operator, true, "remote", Some("other")).as_deref(), Ok("other"));
        for (owner, allow, requested) in
            [(Tenant, false, "other"), (Tenant, true, "other"), (Tenant, false, "remote"), (Operator, false, "other")]
        {
            let err = push_namespace(owner, allow, "remote", Some(requested)).unwrap_err();
            assert!(err.contains(&format!("remoteNamespace {requested:?}")), "{err}");
            assert!(err.contains("allowRemoteNamespaceOverride: true"), "{err}");
            assert_eq!(err.contains("tenant-owned"), owner == Tenant, "{err}");
        }
        assert_eq!(check_push_override(Tenant, None), Ok(()));
        assert_eq!(check_push_override(Operator, Some("other")), Ok(()));
        assert!(check_push_override(Tenant, Some("other")).is_err());
    }

    #[test]
    fn remote_namespace_in_push_metadata() {
        let asks = |v: serde_json::Value| push_metadata_remote_namespace(&v.into());
        let m = serde_json::json!({"apiVersion": "kubernetes.external-secrets.io/v1alpha1",
            "kind": "PushSecretMetadata", "spec": {"remoteNamespace": "other"}});
        assert_eq!(asks(m), Ok(Some("other".into())));
        assert_eq!(asks(serde_json::json!({"spec": {"remoteNamespace": ""}})), Ok(None));
        assert_eq!(asks(serde_json::json!({"spec": {}})), Ok(None));
        assert_eq!(asks(serde_json::json!([1])), Ok(None));
        let past_the_limits = serde_json::json!({"spec": {"remoteNamespace": "other"}, "pad": vec![0; 5000]});
        assert!(asks(past_the_limits).is_err(), "unknown: not read as no override");
    }
}
