//! The gRPC service: request checks, logging context, metrics, error mapping, and shared
//! store calls for identical reads ([`crate::read_cache`]) around a [`Provider`].

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use keyward_crds::rules::ProviderIdentityNamespaces;
use keyward_proto::ProviderError;
use keyward_proto::v1::generator_provider_server::GeneratorProvider;
use keyward_proto::v1::secret_store_provider_server::SecretStoreProvider;
use keyward_proto::v1::{
    CapabilitiesRequest, CapabilitiesResponse, DeleteSecretRequest, DeleteSecretResponse, GenerateRequest,
    GenerateResponse, GetAllSecretsRequest, GetAllSecretsResponse, GetSecretMapRequest, GetSecretMapResponse,
    GetSecretRequest, GetSecretResponse, PushSecretRequest, PushSecretResponse, SecretExistsRequest,
    SecretExistsResponse, ValidateRequest, ValidateResponse,
};
use tonic::{Request, Response, Status};
use tracing::Instrument;

use crate::context::{RequestContext, check_provider_ref};
use crate::metrics::{Metrics, code_name};
use crate::provider::Provider;
use crate::read_cache::{ReadCache, ReadKey};

/// Serves a [`Provider`] as `provider.v1.SecretStoreProvider`.
pub struct ProviderService<P> {
    provider: Arc<P>,
    metrics: Metrics,
    /// GetSecret answers shared between identical requests ([`crate::read_cache`]).
    reads: Arc<ReadCache<Vec<u8>>>,
    /// GetSecretMap answers, likewise.
    maps: Arc<ReadCache<HashMap<String, Vec<u8>>>>,
    /// Namespaces whose own configurations may use the provider's identity.
    identity: Arc<ProviderIdentityNamespaces>,
}

impl<P> Clone for ProviderService<P> {
    fn clone(&self) -> Self {
        ProviderService {
            provider: self.provider.clone(),
            metrics: self.metrics.clone(),
            reads: self.reads.clone(),
            maps: self.maps.clone(),
            identity: self.identity.clone(),
        }
    }
}

impl<P: Provider> ProviderService<P> {
    /// Wraps a provider; calls are recorded in `metrics`.
    pub fn new(provider: Arc<P>, metrics: Metrics) -> Self {
        ProviderService { provider, metrics, reads: Arc::default(), maps: Arc::default(), identity: Arc::default() }
    }

    /// Lets the configurations of these namespaces use the provider's identity (the operator's
    /// `--provider-identity-namespaces`).
    pub fn with_provider_identity(mut self, identity: ProviderIdentityNamespaces) -> Self {
        self.identity = Arc::new(identity);
        self
    }

    /// Runs one call: the span carries the method, ProviderReference and source namespace so
    /// every line logged inside has them; the outcome is logged (never values) and counted.
    async fn run<T, Fut>(
        &self,
        method: &'static str,
        target: &str,
        checked: Result<RequestContext, ProviderError>,
        op: impl FnOnce(Arc<P>, RequestContext) -> Fut,
    ) -> Result<Response<T>, Status>
    where
        Fut: Future<Output = Result<T, ProviderError>>,
    {
        let start = Instant::now();
        let checked = checked.map(|ctx| RequestContext { provider_identity: self.identity.clone(), ..ctx });
        let span = match &checked {
            Ok(ctx) => tracing::info_span!(
                "rpc",
                method,
                provider_kind = %ctx.kind,
                provider_name = %ctx.name,
                provider_namespace = %ctx.namespace,
                store_kind = ctx.store_ref_kind.as_str(),
                config_owner = ctx.owner().as_str(),
                source_namespace = %ctx.source_namespace,
            ),
            Err(_) => tracing::info_span!("rpc", method),
        };
        let result = match checked {
            Ok(ctx) => op(self.provider.clone(), ctx).instrument(span.clone()).await,
            Err(e) => Err(e),
        };
        let elapsed = start.elapsed();
        let code = match &result {
            Ok(_) => tonic::Code::Ok,
            Err(e) => e.code(),
        };
        self.metrics.observe(method, code, elapsed);
        let _entered = span.enter();
        let micros = elapsed.as_micros() as u64;
        match &result {
            Ok(_) => tracing::debug!(target_key = target, duration_us = micros, "ok"),
            Err(ProviderError::NoSecret(m)) => {
                tracing::info!(target_key = target, duration_us = micros, status = code_name(code), "{m}")
            }
            Err(e) => tracing::warn!(target_key = target, duration_us = micros, status = code_name(code), "{e}"),
        }
        result.map(Response::new).map_err(Status::from)
    }
}

fn require(method: &str, field: &str, value: &str) -> Result<(), ProviderError> {
    if value.is_empty() {
        Err(ProviderError::InvalidArgument(format!("{method}: {field} is required")))
    } else {
        Ok(())
    }
}

#[tonic::async_trait]
impl<P: Provider> SecretStoreProvider for ProviderService<P> {
    async fn get_secret(&self, request: Request<GetSecretRequest>) -> Result<Response<GetSecretResponse>, Status> {
        const M: &str = "GetSecret";
        let req = request.into_inner();
        let remote_ref = req.remote_ref.unwrap_or_default();
        let checked = check_provider_ref(M, req.provider_ref.as_ref(), &req.source_namespace, true)
            .and_then(|ctx| require(M, "remote_ref.key", &remote_ref.key).map(|_| ctx));
        let key = remote_ref.key.clone();
        let (reads, max_age) = (self.reads.clone(), Duration::from_millis(u64::from(req.max_age_millis)));
        let checked = checked.map(|ctx| RequestContext { max_age, ..ctx });
        self.run(M, &key, checked, |p, ctx| async move {
            let read = ReadKey::new(M, &ctx, &p.object(&ctx).await, &remote_ref);
            let value = reads.get(read, max_age, p.get_secret(&ctx, &remote_ref)).await?;
            Ok(GetSecretResponse { value })
        })
        .await
    }

    async fn get_secret_map(
        &self,
        request: Request<GetSecretMapRequest>,
    ) -> Result<Response<GetSecretMapResponse>, Status> {
        const M: &str = "GetSecretMap";
        let req = request.into_inner();
        let remote_ref = req.remote_ref.unwrap_or_default();
        let checked = check_provider_ref(M, req.provider_ref.as_ref(), &req.source_namespace, true)
            .and_then(|ctx| require(M, "remote_ref.key", &remote_ref.key).map(|_| ctx));
        let key = remote_ref.key.clone();
        let (maps, max_age) = (self.maps.clone(), Duration::from_millis(u64::from(req.max_age_millis)));
        let checked = checked.map(|ctx| RequestContext { max_age, ..ctx });
        self.run(M, &key, checked, |p, ctx| async move {
            let read = ReadKey::new(M, &ctx, &p.object(&ctx).await, &remote_ref);
            let secrets = maps.get(read, max_age, p.get_secret_map(&ctx, &remote_ref)).await?;
            Ok(GetSecretMapResponse { secrets })
        })
        .await
    }

    async fn push_secret(&self, request: Request<PushSecretRequest>) -> Result<Response<PushSecretResponse>, Status> {
        const M: &str = "PushSecret";
        let req = request.into_inner();
        let data = req.push_secret_data.unwrap_or_default();
        let secret_data = req.secret_data;
        let checked = check_provider_ref(M, req.provider_ref.as_ref(), &req.source_namespace, true)
            .and_then(|ctx| require(M, "push_secret_data.remote_key", &data.remote_key).map(|_| ctx))
            .and_then(|ctx| {
                if !data.secret_key.is_empty() && !secret_data.contains_key(&data.secret_key) {
                    Err(ProviderError::InvalidArgument(format!(
                        "{M}: secret_data has no key {:?} (push_secret_data.secret_key)",
                        data.secret_key
                    )))
                } else {
                    Ok(ctx)
                }
            });
        let key = data.remote_key.clone();
        self.run(M, &key, checked, |p, ctx| async move {
            p.push_secret(&ctx, &secret_data, &data).await.map(|_| PushSecretResponse {})
        })
        .await
    }

    async fn delete_secret(
        &self,
        request: Request<DeleteSecretRequest>,
    ) -> Result<Response<DeleteSecretResponse>, Status> {
        const M: &str = "DeleteSecret";
        let req = request.into_inner();
        let remote_ref = req.remote_ref.unwrap_or_default();
        let checked = check_provider_ref(M, req.provider_ref.as_ref(), &req.source_namespace, true)
            .and_then(|ctx| require(M, "remote_ref.remote_key", &remote_ref.remote_key).map(|_| ctx));
        let key = remote_ref.remote_key.clone();
        self.run(M, &key, checked, |p, ctx| async move {
            p.delete_secret(&ctx, &remote_ref).await.map(|_| DeleteSecretResponse {})
        })
        .await
    }

    async fn secret_exists(
        &self,
        request: Request<SecretExistsRequest>,
    ) -> Result<Response<SecretExistsResponse>, Status> {
        const M: &str = "SecretExists";
        let req = request.into_inner();
        let remote_ref = req.remote_ref.unwrap_or_default();
        let checked = check_provider_ref(M, req.provider_ref.as_ref(), &req.source_namespace, true)
            .and_then(|ctx| require(M, "remote_ref.remote_key", &remote_ref.remote_key).map(|_| ctx));
        let key = remote_ref.remote_key.clone();
        self.run(M, &key, checked, |p, ctx| async move {
            p.secret_exists(&ctx, &remote_ref).await.map(|exists| SecretExistsResponse { exists })
        })
        .await
    }

    async fn get_all_secrets(
        &self,
        request: Request<GetAllSecretsRequest>,
    ) -> Result<Response<GetAllSecretsResponse>, Status> {
        const M: &str = "GetAllSecrets";
        let req = request.into_inner();
        let find = req.find.unwrap_or_default();
        let checked = check_provider_ref(M, req.provider_ref.as_ref(), &req.source_namespace, true).and_then(|ctx| {
            let has_name = find.name.as_ref().is_some_and(|n| !n.regexp.is_empty());
            if !has_name && find.tags.is_empty() && find.path.is_empty() {
                Err(ProviderError::InvalidArgument(format!(
                    "{M}: find needs at least one of name.regexp, tags or path"
                )))
            } else {
                Ok(ctx)
            }
        });
        let target = find.name.as_ref().map(|n| n.regexp.clone()).unwrap_or_default();
        self.run(M, &target, checked, |p, ctx| async move {
            p.get_all_secrets(&ctx, &find).await.map(|secrets| GetAllSecretsResponse { secrets })
        })
        .await
    }

    async fn validate(&self, request: Request<ValidateRequest>) -> Result<Response<ValidateResponse>, Status> {
        const M: &str = "Validate";
        let req = request.into_inner();
        // A periodic check accepts the configuration the watches hold (`max_age_millis`); the
        // store itself is still called.
        let max_age = Duration::from_millis(u64::from(req.max_age_millis));
        let checked = check_provider_ref(M, req.provider_ref.as_ref(), &req.source_namespace, false)
            .map(|ctx| RequestContext { max_age, ..ctx });
        self.run(M, "", checked, |p, ctx| async move {
            match p.validate(&ctx).await {
                Ok(warnings) => Ok(ValidateResponse { valid: true, error: String::new(), warnings }),
                Err(
                    e @ (ProviderError::BadConfig(_)
                    | ProviderError::PermissionDenied(_)
                    | ProviderError::Unauthenticated(_)
                    | ProviderError::NoSecret(_)
                    | ProviderError::InvalidArgument(_)),
                ) => {
                    tracing::info!(error = %e, "configuration is not valid");
                    Ok(ValidateResponse { valid: false, error: e.to_string(), warnings: vec![] })
                }
                Err(e) => Err(e),
            }
        })
        .await
    }

    async fn capabilities(
        &self,
        request: Request<CapabilitiesRequest>,
    ) -> Result<Response<CapabilitiesResponse>, Status> {
        const M: &str = "Capabilities";
        let req = request.into_inner();
        // Capabilities describe the provider process, not one configuration: no reference is
        // required, but a complete one is logged.
        let checked = check_provider_ref(M, req.provider_ref.as_ref(), &req.source_namespace, false).or_else(|_| {
            Ok(RequestContext {
                api_version: String::new(),
                kind: String::new(),
                name: String::new(),
                namespace: String::new(),
                store_ref_kind: crate::context::StoreRefKind::Provider,
                authentication_scope: None,
                source_namespace: req.source_namespace.clone(),
                max_age: Duration::ZERO,
                provider_identity: Arc::default(),
            })
        });
        self.run(
            M,
            "",
            checked,
            |p, _ctx| async move { Ok(CapabilitiesResponse { capabilities: p.capabilities() as i32 }) },
        )
        .await
    }
}

/// The context of a Generate call, once its required fields are there.
fn check_generate(req: &GenerateRequest) -> Result<RequestContext, ProviderError> {
    const M: &str = "Generate";
    require(M, "kind", &req.kind)?;
    require(M, "name", &req.name)?;
    require(M, "namespace", &req.namespace)?;
    require(M, "spec_json", &req.spec_json)?;
    // The generator is the namespace's own, reached as a SecretStore of that namespace would
    // be: tenant-owned, so nothing it names leaves the namespace.
    Ok(RequestContext {
        api_version: keyward_crds::generators::GENERATOR_API_VERSION.to_string(),
        kind: req.kind.clone(),
        name: req.name.clone(),
        namespace: req.namespace.clone(),
        store_ref_kind: crate::context::StoreRefKind::SecretStore,
        authentication_scope: None,
        source_namespace: req.namespace.clone(),
        max_age: Duration::ZERO,
        provider_identity: Arc::default(),
    })
}

#[tonic::async_trait]
impl<P: Provider> GeneratorProvider for ProviderService<P> {
    async fn generate(&self, request: Request<GenerateRequest>) -> Result<Response<GenerateResponse>, Status> {
        const M: &str = "Generate";
        let req = request.into_inner();
        let checked = check_generate(&req);
        let spec_json = req.spec_json;
        self.run(M, &req.name, checked, |p, ctx| async move {
            let values = p.generate(&ctx, &spec_json).await?;
            Ok(GenerateResponse { values })
        })
        .await
    }
}
