//! The operations of the webhook provider (`keyward_provider_runtime::Provider`).

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;
use std::sync::Arc;
use std::time::Duration;

use keyward_crds::SecretKeySelector;
use keyward_proto::v1::{
    ExternalSecretDataRemoteRef, ExternalSecretFind, PushSecretData, PushSecretRemoteRef, SecretStoreCapabilities,
};
use keyward_provider_runtime::refs::{CacheKey, ClientCache, ClusterRefs, check_reach};
use keyward_provider_runtime::{Provider, ProviderError, RequestContext, SecretMap};
use keyward_provider_runtime::{body, keys};

use crate::api::{
    GENERATOR_KIND, KIND, SECRET_TYPE_LABEL, SECRET_TYPE_VALUE, Webhook, WebhookSpec, validate_webhook, webhook_reach,
};
use crate::client::{HttpClient, check_status, parse_url, server_of};
use crate::render::{RemoteRef, Rendered, SecretData, SecretKeys, add_secret, render};
use crate::result::{secret_map, secret_value};
use keyward_provider_runtime::netguard::{DeniedNetworks, denied_error};

/// A configuration's client and the Secrets its templates see, cached per configuration,
/// generation and owner until one of those Secrets changes ([`keyward_provider_runtime::client_cache`]).
/// Each call takes a copy of the cached target: the Secrets' data is shared, not copied.
#[derive(Clone)]
struct Target {
    http: HttpClient,
    secrets: Arc<SecretData>,
}

/// The webhook provider.
pub struct WebhookProvider {
    refs: ClusterRefs,
    clients: ClientCache<Target>,
    /// What a tenant's configuration may not reach.
    tenant_denied: DeniedNetworks,
}

impl WebhookProvider {
    /// A provider reading configurations and Secrets with `client`; tenants' requests may not
    /// reach `tenant_denied`.
    pub fn new(client: kube::Client, tenant_denied: DeniedNetworks) -> Self {
        WebhookProvider { refs: ClusterRefs::new(client), clients: ClientCache::default(), tenant_denied }
    }

    async fn target(&self, ctx: &RequestContext) -> Result<(WebhookSpec, Target), ProviderError> {
        // The configuration object or the store's spec.provider.webhook, its rules and its
        // tenant boundary checked.
        let config = self.refs.resolve_spec::<Webhook>(ctx, &KIND).await?;
        let key = CacheKey::of(ctx, config.generation);
        let spec = config.spec;
        let target = self.clients.get_or_build(&key, self.build_target(ctx, &spec)).await?;
        Ok((spec, target))
    }

    /// The HTTP client (with the denied networks of the request's owner) and the template
    /// Secrets of one configuration.
    async fn build_target(&self, ctx: &RequestContext, spec: &WebhookSpec) -> Result<Target, ProviderError> {
        let denied = self.tenant_denied.for_request(ctx);
        let http = HttpClient::build(&self.refs, ctx, spec, denied).await?;
        let secrets = self.template_secrets(ctx, spec).await?;
        Ok(Target { http, secrets: Arc::new(secrets) })
    }

    /// A `Webhook` generator's spec (upstream's generator of the same block), reached as a
    /// SecretStore's `spec.provider.webhook` of the generator's namespace: the same rules, the
    /// same tenant boundary and denied networks, checked before anything is read or requested.
    async fn generator_target(
        &self,
        ctx: &RequestContext,
        spec_json: &str,
    ) -> Result<(WebhookSpec, Target), ProviderError> {
        let what = format!("{} {}/{}", ctx.kind, ctx.source_namespace, ctx.name);
        let spec: WebhookSpec = serde_json::from_str(spec_json)
            .map_err(|e| ProviderError::InvalidArgument(format!("{what}: spec: {e}")))?;
        validate_webhook(&spec).map_err(|e| ProviderError::BadConfig(format!("{what}: {e}")))?;
        check_reach(ctx, &webhook_reach(&spec))?;
        let target = self.build_target(ctx, &spec).await?;
        Ok((spec, target))
    }

    /// Every key of each Secret of `secrets[]`, read in the namespace the tenant boundary
    /// allows; the Secret must carry `external-secrets.io/type: webhook`, as upstream. A Secret
    /// named by several entries is read once; all entries together hold at most
    /// [`crate::render::MAX_SECRET_DATA_BYTES`].
    async fn template_secrets(&self, ctx: &RequestContext, spec: &WebhookSpec) -> Result<SecretData, ProviderError> {
        let mut out = SecretData::new();
        let mut read: BTreeMap<(Option<&str>, &str), SecretKeys> = BTreeMap::new();
        for (i, s) in spec.secrets.iter().enumerate() {
            let field = format!("spec.secrets[{i}].secretRef");
            let named = (s.secret_ref.namespace.as_deref(), s.secret_ref.name.as_str());
            let data = match read.entry(named) {
                Entry::Occupied(e) => e.into_mut(),
                Entry::Vacant(e) => e.insert(self.template_secret(ctx, &field, &s.secret_ref).await?),
            };
            add_secret(&mut out, &field, &s.name, data)?;
        }
        Ok(out)
    }

    /// One Secret of `secrets[]` (every key), which must carry the webhook type label.
    async fn template_secret(
        &self,
        ctx: &RequestContext,
        field: &str,
        selector: &SecretKeySelector,
    ) -> Result<SecretKeys, ProviderError> {
        let secret = self.refs.selected_secret(ctx, field, selector).await?;
        let label = secret.metadata.labels.as_ref().and_then(|l| l.get(SECRET_TYPE_LABEL));
        if label.map(String::as_str) != Some(SECRET_TYPE_VALUE) {
            return Err(ProviderError::BadConfig(format!(
                "{field}: Secret {}/{} does not carry the label {SECRET_TYPE_LABEL}: {SECRET_TYPE_VALUE}, which a \
                 Secret must carry to be used by a webhook configuration",
                secret.metadata.namespace.as_deref().unwrap_or_default(),
                secret.metadata.name.as_deref().unwrap_or_default()
            )));
        }
        Ok(secret.data.unwrap_or_default().into_iter().map(|(k, v)| (k, v.0)).collect())
    }

    /// Renders and sends one request with `method` (the read method when `None`).
    async fn call(
        &self,
        ctx: &RequestContext,
        (spec, target): &(WebhookSpec, Target),
        method: Option<&str>,
        remote: RemoteRef,
        default_body: Option<Vec<u8>>,
    ) -> Result<(Rendered, u16, Vec<u8>), ProviderError> {
        let rendered = render(spec, &remote, &ctx.source_namespace, &target.secrets, default_body).await?;
        let method = method.map_or_else(|| spec.read_method(), str::to_string);
        let answer = target.http.send(&method, &rendered).await?;
        Ok((rendered, answer.status, answer.body))
    }

    fn what(rendered: &Rendered) -> String {
        parse_url(&rendered.url).map(|u| format!("the webhook at {}", server_of(&u))).unwrap_or("the webhook".into())
    }

    async fn read(
        &self,
        ctx: &RequestContext,
        r: &ExternalSecretDataRemoteRef,
    ) -> Result<(Rendered, Vec<u8>), ProviderError> {
        keys::check_key(&r.key)?;
        let remote = RemoteRef {
            key: r.key.clone(),
            version: r.version.clone(),
            property: r.property.clone(),
            ..RemoteRef::default()
        };
        let resolved = self.target(ctx).await?;
        let (rendered, status, body) = self.call(ctx, &resolved, None, remote, None).await?;
        check_status(status, &Self::what(&rendered))?;
        Ok((rendered, body))
    }
}

#[tonic::async_trait]
impl Provider for WebhookProvider {
    async fn get_secret(
        &self,
        ctx: &RequestContext,
        remote_ref: &ExternalSecretDataRemoteRef,
    ) -> Result<Vec<u8>, ProviderError> {
        let (rendered, body) = self.read(ctx, remote_ref).await?;
        body::off_thread(move || secret_value(&body, rendered.json_path.as_deref())).await
    }

    async fn get_secret_map(
        &self,
        ctx: &RequestContext,
        remote_ref: &ExternalSecretDataRemoteRef,
    ) -> Result<SecretMap, ProviderError> {
        let (rendered, body) = self.read(ctx, remote_ref).await?;
        body::off_thread(move || secret_map(&body, rendered.json_path.as_deref())).await
    }

    async fn get_all_secrets(&self, _: &RequestContext, _: &ExternalSecretFind) -> Result<SecretMap, ProviderError> {
        Err(ProviderError::Unsupported(
            "the webhook provider cannot list secrets (dataFrom.find), as upstream's; name each key".into(),
        ))
    }

    async fn push_secret(
        &self,
        ctx: &RequestContext,
        secret_data: &SecretMap,
        data: &PushSecretData,
    ) -> Result<(), ProviderError> {
        keys::check_key(&data.remote_key)?;
        crate::render::check_pushed_key(&data.remote_key)?;
        let value = if data.secret_key.is_empty() {
            // The whole Secret as a JSON object of strings, as upstream.
            let all: BTreeMap<&str, String> =
                secret_data.iter().map(|(k, v)| (k.as_str(), String::from_utf8_lossy(v).into_owned())).collect();
            serde_json::to_vec(&all).map_err(|e| ProviderError::Internal(e.to_string()))?
        } else {
            secret_data.get(&data.secret_key).cloned().ok_or_else(|| {
                ProviderError::InvalidArgument(format!("the source Secret has no key {:?}", data.secret_key))
            })?
        };
        let remote = RemoteRef {
            remote_key: data.remote_key.clone(),
            secret_key: data.secret_key.clone(),
            property: data.property.clone(),
            pushed: Some(value.clone()),
            ..RemoteRef::default()
        };
        let resolved = self.target(ctx).await?;
        let method = resolved.0.push_method();
        let (rendered, status, _) = self.call(ctx, &resolved, Some(&method), remote, Some(value)).await?;
        if !(200..300).contains(&status) {
            return Err(match check_status(status, &Self::what(&rendered)) {
                Err(ProviderError::NoSecret(m)) => ProviderError::Unavailable(m),
                Err(e) => e,
                Ok(()) => ProviderError::Internal(format!("status {status}")),
            });
        }
        Ok(())
    }

    async fn delete_secret(&self, ctx: &RequestContext, remote_ref: &PushSecretRemoteRef) -> Result<(), ProviderError> {
        keys::check_key(&remote_ref.remote_key)?;
        let remote = RemoteRef {
            remote_key: remote_ref.remote_key.clone(),
            property: remote_ref.property.clone(),
            ..RemoteRef::default()
        };
        // As upstream: DELETE on the URL with the configured headers and no body; a 404 is gone.
        let (spec, target) = self.target(ctx).await?;
        let resolved = (WebhookSpec { body: Some(String::new()), ..spec }, target);
        let (rendered, status, _) = self.call(ctx, &resolved, Some("DELETE"), remote, None).await?;
        match status {
            404 => Ok(()),
            s => check_status(s, &Self::what(&rendered)),
        }
    }

    async fn secret_exists(
        &self,
        ctx: &RequestContext,
        remote_ref: &PushSecretRemoteRef,
    ) -> Result<bool, ProviderError> {
        // As upstream: a read of the remote key; 404 is absent.
        let read = ExternalSecretDataRemoteRef {
            key: remote_ref.remote_key.clone(),
            property: remote_ref.property.clone(),
            ..ExternalSecretDataRemoteRef::default()
        };
        match self.read(ctx, &read).await {
            Ok(_) => Ok(true),
            Err(ProviderError::NoSecret(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn validate(&self, ctx: &RequestContext) -> Result<Vec<String>, ProviderError> {
        // The configuration and its Secrets, then a connection to the URL's host (rendered with
        // an empty remote reference), as upstream's reachability check.
        let (spec, target) = self.target(ctx).await?;
        let rendered = render(&spec, &RemoteRef::default(), &ctx.source_namespace, &target.secrets, None).await?;
        let url = parse_url(&rendered.url)?;
        let server = server_of(&url);
        let host = url.host_str().unwrap_or_default();
        let port = url.port_or_known_default().unwrap_or(80);
        target.http.denied().check_url(&url).map_err(|d| ProviderError::PermissionDenied(d.to_string()))?;
        let addrs = target.http.denied().resolve(host, port).await.map_err(|e| {
            denied_error(e.as_ref()).unwrap_or_else(|| ProviderError::Unavailable(format!("resolving {host}: {e}")))
        })?;
        let limit = target.http.timeout().min(Duration::from_secs(5));
        match tokio::time::timeout(limit, tokio::net::TcpStream::connect(&addrs[..])).await {
            Ok(Ok(_)) => Ok(Vec::new()),
            Ok(Err(e)) => Err(ProviderError::Unavailable(format!("connecting to the webhook at {server}: {e}"))),
            Err(_) => Err(ProviderError::Unavailable(format!("connecting to the webhook at {server} timed out"))),
        }
    }

    async fn object(&self, ctx: &RequestContext) -> keyward_provider_runtime::Generation {
        self.refs.generation_of::<Webhook>(ctx).await
    }

    fn capabilities(&self) -> SecretStoreCapabilities {
        SecretStoreCapabilities::ReadWrite
    }

    async fn generate(&self, ctx: &RequestContext, spec_json: &str) -> Result<SecretMap, ProviderError> {
        if ctx.kind != GENERATOR_KIND {
            return Err(ProviderError::Unsupported(format!(
                "the webhook provider generates {GENERATOR_KIND} values, not {}",
                ctx.kind
            )));
        }
        // As upstream's generator: one request rendered with no remote reference, and the
        // answer read as a map (the JSON object at result.jsonPath, one key per member).
        let resolved = self.generator_target(ctx, spec_json).await?;
        let (rendered, status, body) = self.call(ctx, &resolved, None, RemoteRef::default(), None).await?;
        check_status(status, &Self::what(&rendered)).map_err(|e| match e {
            ProviderError::NoSecret(m) => ProviderError::Unavailable(m),
            e => e,
        })?;
        body::off_thread(move || secret_map(&body, rendered.json_path.as_deref())).await
    }
}
