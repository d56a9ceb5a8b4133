//! The provider process: each request's configuration, its target cluster client, and the
//! provider calls.

use k8s_openapi::api::authorization::v1::{ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec};
use k8s_openapi::api::core::v1::Secret;
use keyward_proto::v1::{
    ExternalSecretDataRemoteRef, ExternalSecretFind, PushSecretData, PushSecretRemoteRef, SecretStoreCapabilities,
};
use keyward_provider_runtime::{Generation, Provider, ProviderError, RequestContext, SecretMap};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, Client, Config};

use crate::api::{CrdReadSpec, KIND, Kubernetes, KubernetesConfig};
use crate::client::build_client;
use crate::crd::CrdRead;
use crate::mapping::{
    apply_push, check_remote_name, data_json, find_matches, map_kube_error, parse_push_metadata, push_namespace,
    secret_map, secret_value, tags_selector,
};
use keyward_provider_runtime::body::{BodyError, FindAnswer, limit_error};
use keyward_provider_runtime::json::find_regex;
use keyward_provider_runtime::netguard::DeniedNetworks;
use keyward_provider_runtime::refs::{CacheKey, ClientCache, ClusterRefs};

/// Secrets asked for per page when listing the target cluster.
const LIST_PAGE: u32 = 100;

/// The Kubernetes provider.
pub struct KubernetesProvider {
    /// Reads config objects and what they name, with the provider's own client.
    refs: ClusterRefs,
    own_config: Config,
    clients: ClientCache<Client>,
    /// What a tenant's configuration may not reach.
    tenant_denied: DeniedNetworks,
}

/// A resolved request: the target client, the remote namespace and the cache key (to evict
/// the client when its credentials are refused).
struct Target {
    client: Client,
    /// What a `spec.provider.crd` store reads (its connection is the rest of the target).
    crd: Option<CrdReadSpec>,
    remote_namespace: String,
    /// `spec.allowRemoteNamespaceOverride` of the config.
    allow_override: bool,
    key: CacheKey,
}

impl KubernetesProvider {
    /// A provider using `own_config` to read its config objects and credentials; tenants'
    /// configurations may not reach `tenant_denied`.
    pub fn new(own_config: Config, tenant_denied: DeniedNetworks) -> Result<Self, kube::Error> {
        let refs = ClusterRefs::new(Client::try_from(own_config.clone())?);
        Ok(KubernetesProvider { refs, own_config, clients: ClientCache::default(), tenant_denied })
    }

    /// Number of cached target clients.
    pub fn cached_clients(&self) -> usize {
        self.clients.len()
    }

    /// The configuration a request names: a `Kubernetes` object, or the `spec.provider.kubernetes`
    /// of a SecretStore or ClusterSecretStore, or a `spec.provider.crd` store's connection and
    /// what it reads; checked by its rules and the tenant boundary either way
    /// (`ClusterRefs::resolve_block`, shared by every provider).
    async fn config(&self, ctx: &RequestContext) -> Result<(KubernetesConfig, Generation), ProviderError> {
        let resolved = self
            .refs
            .resolve_block::<Kubernetes, _>(
                ctx,
                &KIND,
                |k| KubernetesConfig::Secrets(k.spec),
                KubernetesConfig::from_block,
            )
            .await?;
        Ok((resolved.spec, resolved.generation))
    }

    async fn target(&self, ctx: &RequestContext) -> Result<Target, ProviderError> {
        // The rules and the tenant boundary are checked by `resolve_block`.
        let (config, generation) = self.config(ctx).await?;
        let (spec, crd) = match config {
            KubernetesConfig::Secrets(spec) => (spec, None),
            KubernetesConfig::Crd(crd) => (crd.connection.clone(), Some(crd)),
        };
        let key = CacheKey::of(ctx, generation);
        let client = self
            .clients
            .get_or_build(&key, async {
                let denied = self.tenant_denied.for_request(ctx);
                let c = build_client(&self.refs, &self.own_config, ctx, &spec, &denied).await?;
                tracing::info!(generation = key.generation, "built a client for the target cluster");
                Ok(c)
            })
            .await?;
        Ok(Target {
            client,
            crd,
            remote_namespace: spec.remote_namespace.clone(),
            allow_override: spec.allow_remote_namespace_override,
            key,
        })
    }

    /// Maps a target-cluster error; refused credentials evict the cached client so the next
    /// call reads them again.
    fn fail(&self, target: &Target, e: kube::Error, what: &str) -> ProviderError {
        self.clients.evict_if_refused(&target.key, map_kube_error(e, what))
    }

    /// Every operation reads the remote Secret through here first (a push and a delete write
    /// only what they read), so the name is checked here once for all of them.
    async fn get(&self, target: &Target, ns: &str, name: &str) -> Result<Option<Secret>, ProviderError> {
        check_remote_name(name)?;
        let api: Api<Secret> = Api::namespaced(target.client.clone(), ns);
        api.get_opt(name).await.map_err(|e| self.fail(target, e, &format!("Secret {ns}/{name}")))
    }

    /// The CRD store read of `target`, when it is one.
    fn crd<'t>(&self, target: &'t Target, ctx: &RequestContext) -> Result<Option<CrdRead<'t>>, ProviderError> {
        target.crd.as_ref().map(|spec| CrdRead::new(target.client.clone(), spec, ctx)).transpose()
    }

    /// A write's target: refused for a CRD store, which is read-only.
    async fn write_target(&self, ctx: &RequestContext) -> Result<Target, ProviderError> {
        let target = self.target(ctx).await?;
        if target.crd.is_some() {
            return Err(crate::crd::read_only());
        }
        Ok(target)
    }

    async fn get_required(&self, target: &Target, name: &str) -> Result<Secret, ProviderError> {
        let ns = &target.remote_namespace;
        self.get(target, ns, name)
            .await?
            .ok_or_else(|| ProviderError::NoSecret(format!("Secret {ns}/{name} not found")))
    }

    async fn can(&self, target: &Target, verb: &str) -> Result<(bool, String), ProviderError> {
        let api: Api<SelfSubjectAccessReview> = Api::all(target.client.clone());
        let review = SelfSubjectAccessReview {
            spec: SelfSubjectAccessReviewSpec {
                resource_attributes: Some(ResourceAttributes {
                    namespace: Some(target.remote_namespace.clone()),
                    verb: Some(verb.to_string()),
                    resource: Some("secrets".to_string()),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let answer = api
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| self.fail(target, e, "SelfSubjectAccessReview"))?;
        let status = answer.status.unwrap_or_default();
        Ok((status.allowed, status.reason.unwrap_or_default()))
    }
}

#[tonic::async_trait]
impl Provider for KubernetesProvider {
    async fn get_secret(
        &self,
        ctx: &RequestContext,
        remote_ref: &ExternalSecretDataRemoteRef,
    ) -> Result<Vec<u8>, ProviderError> {
        let target = self.target(ctx).await?;
        if let Some(crd) = self.crd(&target, ctx)? {
            return crd.get_secret(remote_ref).await;
        }
        let secret = self.get_required(&target, &remote_ref.key).await?;
        secret_value(&secret, remote_ref)
    }

    async fn get_secret_map(
        &self,
        ctx: &RequestContext,
        remote_ref: &ExternalSecretDataRemoteRef,
    ) -> Result<SecretMap, ProviderError> {
        let target = self.target(ctx).await?;
        if let Some(crd) = self.crd(&target, ctx)? {
            return crd.get_secret_map(remote_ref).await;
        }
        let secret = self.get_required(&target, &remote_ref.key).await?;
        secret_map(&secret, remote_ref)
    }

    async fn get_all_secrets(
        &self,
        ctx: &RequestContext,
        find: &ExternalSecretFind,
    ) -> Result<SecretMap, ProviderError> {
        let target = self.target(ctx).await?;
        if let Some(crd) = self.crd(&target, ctx)? {
            return crd.get_all_secrets(find).await;
        }
        let regex = find_regex(find)?;
        let ns = target.remote_namespace.clone();
        let api: Api<Secret> = Api::namespaced(target.client.clone(), &ns);
        let mut base = ListParams::default();
        if let Some(sel) = tags_selector(&find.tags) {
            base = base.labels(&sel);
        }
        // Paged, so a namespace of many Secrets never comes as one answer above the runtime's
        // cap; what is kept is capped the same way, as the reply could not carry more.
        let mut found = FindAnswer::new(format!("the Secrets in {ns} that find selects"), "select fewer");
        let mut page = LIST_PAGE;
        let mut next: Option<String> = None;
        loop {
            let mut params = base.clone().limit(page);
            if let Some(token) = &next {
                params = params.continue_token(token);
            }
            let list = match api.list(&params).await {
                Ok(list) => list,
                // A page of large Secrets can pass the cap: the same page again, fewer per answer.
                Err(e) if page > 1 && matches!(limit_error(&e), Some(BodyError::TooLarge(_))) => {
                    page = (page / 4).max(1);
                    continue;
                }
                Err(e) => return Err(self.fail(&target, e, &format!("listing Secrets in {ns}"))),
            };
            for s in list.items {
                let name = s.metadata.name.clone().unwrap_or_default();
                if find_matches(&name, regex.as_ref(), &find.path) {
                    found.keep(name, data_json(&s)?)?;
                }
            }
            match list.metadata.continue_.filter(|t| !t.is_empty()) {
                Some(token) => next = Some(token),
                None => return Ok(found.into_secrets()),
            }
        }
    }

    async fn push_secret(
        &self,
        ctx: &RequestContext,
        secret_data: &SecretMap,
        data: &PushSecretData,
    ) -> Result<(), ProviderError> {
        let meta = parse_push_metadata(&data.metadata)?;
        let target = self.write_target(ctx).await?;
        let ns = push_namespace(ctx, &target.remote_namespace, target.allow_override, &meta)?;
        let name = &data.remote_key;
        let api: Api<Secret> = Api::namespaced(target.client.clone(), &ns);
        // Optimistic concurrency: replace with the resourceVersion read; retry on conflict.
        for attempt in 0..5 {
            let existing = self.get(&target, &ns, name).await?;
            let creating = existing.is_none();
            let secret = apply_push(existing, name, &ns, secret_data, data, &meta)?;
            let result = if creating {
                api.create(&PostParams::default(), &secret).await
            } else {
                api.replace(name, &PostParams::default(), &secret).await
            };
            match result {
                Ok(_) => {
                    tracing::info!(remote_namespace = %ns, remote_key = %name, created = creating, "pushed");
                    return Ok(());
                }
                Err(kube::Error::Api(s)) if s.code == 409 && attempt < 4 => {
                    tracing::debug!(attempt, "conflict writing Secret {ns}/{name}; retrying");
                }
                Err(e) => return Err(self.fail(&target, e, &format!("writing Secret {ns}/{name}"))),
            }
        }
        Err(ProviderError::Unavailable(format!("Secret {ns}/{name} kept changing; try again")))
    }

    async fn delete_secret(&self, ctx: &RequestContext, remote_ref: &PushSecretRemoteRef) -> Result<(), ProviderError> {
        let meta = parse_push_metadata(&remote_ref.metadata)?;
        let target = self.write_target(ctx).await?;
        // Where the push wrote, not the config's default: a delete must never reach a
        // same-named Secret in another namespace.
        let ns = push_namespace(ctx, &target.remote_namespace, target.allow_override, &meta)?;
        let name = &remote_ref.remote_key;
        let api: Api<Secret> = Api::namespaced(target.client.clone(), &ns);
        let Some(mut secret) = self.get(&target, &ns, name).await? else {
            return Ok(());
        };
        if !remote_ref.property.is_empty() {
            let data = secret.data.get_or_insert_with(Default::default);
            if data.remove(&remote_ref.property).is_none() {
                return Ok(());
            }
            if !data.is_empty() {
                return api
                    .replace(name, &PostParams::default(), &secret)
                    .await
                    .map(|_| ())
                    .map_err(|e| self.fail(&target, e, &format!("writing Secret {ns}/{name}")));
            }
        }
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(self.fail(&target, e, &format!("deleting Secret {ns}/{name}"))),
        }
    }

    async fn secret_exists(
        &self,
        ctx: &RequestContext,
        remote_ref: &PushSecretRemoteRef,
    ) -> Result<bool, ProviderError> {
        let meta = parse_push_metadata(&remote_ref.metadata)?;
        let target = self.write_target(ctx).await?;
        let ns = push_namespace(ctx, &target.remote_namespace, target.allow_override, &meta)?;
        let found = self.get(&target, &ns, &remote_ref.remote_key).await?;
        Ok(match found {
            None => false,
            Some(_) if remote_ref.property.is_empty() => true,
            Some(s) => s.data.as_ref().is_some_and(|d| d.contains_key(&remote_ref.property)),
        })
    }

    async fn validate(&self, ctx: &RequestContext) -> Result<Vec<String>, ProviderError> {
        let target = self.target(ctx).await?;
        if let Some(crd) = self.crd(&target, ctx)? {
            return crd.validate().await;
        }
        let mut denied = Vec::new();
        for verb in ["get", "list"] {
            let (allowed, reason) = self.can(&target, verb).await?;
            if !allowed {
                denied.push(if reason.is_empty() { verb.to_string() } else { format!("{verb} ({reason})") });
            }
        }
        if denied.is_empty() {
            Ok(vec![])
        } else {
            Err(ProviderError::PermissionDenied(format!(
                "the credentials cannot {} Secrets in namespace {:?}",
                denied.join(" or "),
                target.remote_namespace
            )))
        }
    }

    async fn object(&self, ctx: &RequestContext) -> keyward_provider_runtime::Generation {
        self.refs.generation_of::<Kubernetes>(ctx).await
    }

    fn capabilities(&self) -> SecretStoreCapabilities {
        SecretStoreCapabilities::ReadWrite
    }
}
