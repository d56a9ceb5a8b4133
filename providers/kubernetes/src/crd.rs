//! Upstream's CRD store (`spec.provider.crd`): fields of objects of one kind, custom resources
//! and core kinds such as ConfigMap alike, read with the store's own credentials through the
//! same connection the Kubernetes block builds. Read-only.
//!
//! The kind is found by discovery and read with the dynamic client. A SecretStore reads objects
//! of its own namespace only, by bare name; a ClusterSecretStore names `namespace/name` (a bare
//! name for a cluster-scoped kind). The store's allow rules (`whitelist`) are checked before a
//! value leaves the provider. The rules are [`crate::api`]'s (`crd_object_ref`,
//! `crd_whitelist_allows`), which admission applies too.

use crate::api::{CrdReadSpec, crd_object_ref, crd_whitelist_allows};
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec};
use keyward_proto::v1::{ExternalSecretDataRemoteRef, ExternalSecretFind};
use keyward_provider_runtime::body::FindAnswer;
use keyward_provider_runtime::json::{find_regex, json_bytes, property, value_map};
use keyward_provider_runtime::{ProviderError, RequestContext, SecretMap, StoreRefKind};
use kube::api::{ApiResource, DynamicObject, ListParams, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::{ApiCapabilities, Scope, pinned_kind};
use kube::{Api, Client};

use crate::mapping::{map_kube_error, tags_selector};

/// Objects asked for per page when listing.
const LIST_PAGE: u32 = 100;

/// A CRD store read: the target client, what the store reads and where.
pub struct CrdRead<'a> {
    /// The client built from the store's connection.
    pub client: Client,
    /// The store's kind and allow rules.
    pub spec: &'a CrdReadSpec,
    /// The SecretStore's namespace; `None` for a ClusterSecretStore.
    pub store_namespace: Option<String>,
}

impl<'a> CrdRead<'a> {
    /// The read a request makes through the store it names.
    pub fn new(client: Client, spec: &'a CrdReadSpec, ctx: &RequestContext) -> Result<Self, ProviderError> {
        let store_namespace = match ctx.store_ref_kind {
            StoreRefKind::SecretStore => Some(ctx.config_namespace().to_string()),
            StoreRefKind::ClusterSecretStore => None,
            // store_backend hands a crd block only for stores.
            _ => return Err(ProviderError::BadConfig("a crd store is a SecretStore or ClusterSecretStore".into())),
        };
        Ok(CrdRead { client, spec, store_namespace })
    }

    fn cluster(&self) -> bool {
        self.store_namespace.is_none()
    }

    fn kind(&self) -> String {
        let r = &self.spec.resource;
        if r.group.is_empty() {
            format!("{}/{}", r.version, r.kind)
        } else {
            format!("{}/{}/{}", r.group, r.version, r.kind)
        }
    }

    /// The kind's resource and scope, by discovery.
    async fn resource(&self) -> Result<(ApiResource, ApiCapabilities), ProviderError> {
        let r = &self.spec.resource;
        let gvk = GroupVersionKind::gvk(&r.group, &r.version, &r.kind);
        pinned_kind(&self.client, &gvk).await.map_err(|e| match e {
            kube::Error::Discovery(_) => ProviderError::BadConfig(format!(
                "spec.provider.crd.resource: {} is not served by the cluster",
                self.kind()
            )),
            other => map_kube_error(other, &format!("discovering {}", self.kind())),
        })
    }

    /// The API for objects in `namespace` (all namespaces: `None` with a namespaced kind), refusing
    /// what the store may not reach: a SecretStore never reads a cluster-scoped kind.
    fn api(
        &self,
        ar: &ApiResource,
        caps: &ApiCapabilities,
        namespace: Option<&str>,
    ) -> Result<Api<DynamicObject>, ProviderError> {
        match (&caps.scope, namespace) {
            (Scope::Cluster, _) if !self.cluster() => Err(ProviderError::PermissionDenied(format!(
                "{} is cluster-scoped: a SecretStore's crd store reads objects of its own namespace only; use a \
                 ClusterSecretStore",
                self.kind()
            ))),
            (Scope::Cluster, None) => Ok(Api::all_with(self.client.clone(), ar)),
            (Scope::Cluster, Some(_)) => Err(ProviderError::InvalidArgument(format!(
                "{} is cluster-scoped: name its objects without a namespace",
                self.kind()
            ))),
            (Scope::Namespaced, Some(ns)) => Ok(Api::namespaced_with(self.client.clone(), ns, ar)),
            (Scope::Namespaced, None) if self.cluster() => Ok(Api::all_with(self.client.clone(), ar)),
            (Scope::Namespaced, None) => Err(ProviderError::InvalidArgument(format!(
                "{} is namespaced: name its objects as namespace/name",
                self.kind()
            ))),
        }
    }

    /// The object a remote key names, as JSON, after the allow rules passed `property`.
    async fn object(&self, key: &str, property: &str) -> Result<serde_json::Value, ProviderError> {
        let (ns, name) =
            crd_object_ref(key, self.store_namespace.as_deref()).map_err(ProviderError::PermissionDenied)?;
        if !crd_whitelist_allows(&self.spec.whitelist, self.cluster(), ns, name, property) {
            return Err(self.not_allowed(key, property));
        }
        let (ar, caps) = self.resource().await?;
        let what = format!("{} {key}", self.kind());
        let obj = self
            .api(&ar, &caps, ns)?
            .get_opt(name)
            .await
            .map_err(|e| map_kube_error(e, &what))?
            .ok_or_else(|| ProviderError::NoSecret(format!("{what} not found")))?;
        Ok(object_json(obj))
    }

    fn not_allowed(&self, key: &str, property: &str) -> ProviderError {
        let what = if property.is_empty() { String::new() } else { format!(" property {property:?}") };
        ProviderError::PermissionDenied(format!("{key:?}{what}: no rule of the store's whitelist allows this read"))
    }

    /// GetSecret: the property's value (a string as it is, anything else as JSON), or the
    /// whole object as JSON.
    pub async fn get_secret(&self, remote_ref: &ExternalSecretDataRemoteRef) -> Result<Vec<u8>, ProviderError> {
        let obj = self.object(&remote_ref.key, &remote_ref.property).await?;
        if remote_ref.property.is_empty() {
            return Ok(obj.to_string().into_bytes());
        }
        property(&obj, &remote_ref.property).map(json_bytes).ok_or_else(|| {
            ProviderError::NoSecret(format!(
                "{} {}: property {:?} not found",
                self.kind(),
                remote_ref.key,
                remote_ref.property
            ))
        })
    }

    /// GetSecretMap: the top-level keys of the object (or of the property's object value).
    pub async fn get_secret_map(&self, remote_ref: &ExternalSecretDataRemoteRef) -> Result<SecretMap, ProviderError> {
        let obj = self.object(&remote_ref.key, &remote_ref.property).await?;
        value_map(obj.to_string().as_bytes(), &remote_ref.key, &remote_ref.property)
    }

    /// GetAllSecrets: every object `find` selects that the allow rules let through, as JSON,
    /// keyed by name (SecretStore) or `namespace/name` (ClusterSecretStore, namespaced kind).
    pub async fn get_all_secrets(&self, find: &ExternalSecretFind) -> Result<SecretMap, ProviderError> {
        let regex = find_regex(find)?;
        let (ar, caps) = self.resource().await?;
        let api = self.api(&ar, &caps, self.store_namespace.as_deref())?;
        let mut base = ListParams::default();
        if let Some(sel) = tags_selector(&find.tags) {
            base = base.labels(&sel);
        }
        let mut found = FindAnswer::new(format!("the {} objects find selects", self.kind()), "select fewer");
        let mut next: Option<String> = None;
        loop {
            let mut params = base.clone().limit(LIST_PAGE);
            if let Some(token) = &next {
                params = params.continue_token(token);
            }
            let list = api.list(&params).await.map_err(|e| map_kube_error(e, &format!("listing {}", self.kind())))?;
            for obj in list.items {
                let name = obj.metadata.name.clone().unwrap_or_default();
                let ns = obj.metadata.namespace.clone();
                let selected = regex.as_ref().is_none_or(|r| r.is_match(&name));
                if !selected || !crd_whitelist_allows(&self.spec.whitelist, self.cluster(), ns.as_deref(), &name, "") {
                    continue;
                }
                let key = match (&ns, self.cluster()) {
                    (Some(ns), true) => format!("{ns}/{name}"),
                    _ => name,
                };
                found.keep(key, object_json(obj).to_string().into_bytes())?;
            }
            match list.metadata.continue_.filter(|t| !t.is_empty()) {
                Some(token) => next = Some(token),
                None => return Ok(found.into_secrets()),
            }
        }
    }

    /// Validate: the kind is served, and the store's credentials may get it where the store
    /// reads it (`list` only matters to `find`, as upstream).
    pub async fn validate(&self) -> Result<Vec<String>, ProviderError> {
        let (ar, caps) = self.resource().await?;
        self.api(&ar, &caps, self.store_namespace.as_deref())?;
        let review = SelfSubjectAccessReview {
            spec: SelfSubjectAccessReviewSpec {
                resource_attributes: Some(ResourceAttributes {
                    namespace: self.store_namespace.clone(),
                    verb: Some("get".into()),
                    group: Some(ar.group.clone()),
                    resource: Some(ar.plural.clone()),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let answer = Api::<SelfSubjectAccessReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| map_kube_error(e, "SelfSubjectAccessReview"))?;
        let status = answer.status.unwrap_or_default();
        if status.allowed {
            return Ok(vec![]);
        }
        let where_ = self.store_namespace.as_deref().map(|n| format!(" in namespace {n:?}")).unwrap_or_default();
        Err(ProviderError::PermissionDenied(format!("the credentials cannot get {}{where_}", self.kind())))
    }
}

/// An object as the store returns it: as the API server answers, without its managed fields.
fn object_json(mut obj: DynamicObject) -> serde_json::Value {
    obj.metadata.managed_fields = None;
    serde_json::to_value(&obj).unwrap_or_default()
}

/// What a write through a crd store answers: the store is read-only, as upstream's.
pub fn read_only() -> ProviderError {
    ProviderError::Unsupported("spec.provider.crd is read-only: push to another store".into())
}
