//! A provider client bound to one store and one manifest namespace. Every call carries the
//! ProviderReference and the source namespace, runs under a deadline, is retried with jittered
//! backoff when the failure is transient, and goes through the provider's circuit breaker.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use keyward_proto::ProviderError;
use keyward_proto::v1::generator_provider_client::GeneratorProviderClient;
use keyward_proto::v1::secret_store_provider_client::SecretStoreProviderClient;
use keyward_proto::v1::{self as pb, ProviderReference};
use tonic::transport::Channel;

use super::breaker::Breaker;
use super::pool::{Pool, PoolKey};
use super::recovery::{ProviderId, Recovery, Waitable};
use super::retry::RetryPolicy;
use super::tls::TlsMaterial;
use crate::metrics::{ClientMetrics, GrpcLabels};

/// Per-call settings shared by every client.
#[derive(Debug, Clone, Copy)]
pub struct CallSettings {
    /// Retry policy for transient failures.
    pub retry: RetryPolicy,
    /// Deadline of one attempt.
    pub deadline: Duration,
}

impl Default for CallSettings {
    fn default() -> Self {
        CallSettings { retry: RetryPolicy::default(), deadline: Duration::from_secs(10) }
    }
}

/// What a cached client is made of (shared by clones).
#[derive(Debug)]
pub struct ClientCore {
    pub(crate) pool_key: PoolKey,
    pub(crate) tls: Arc<TlsMaterial>,
    pub(crate) reference: ProviderReference,
    pub(crate) source_namespace: String,
    /// Who owns the provider configuration behind this client.
    pub(crate) owner: keyward_crds::rules::ConfigOwner,
    pub(crate) breaker: Arc<Breaker>,
    /// The breaker's identity: what comes back after an outage.
    pub(crate) provider: ProviderId,
    /// `Kind/name` of the store, for messages.
    pub(crate) store: String,
}

/// A ready-to-use provider client.
#[derive(Clone)]
pub struct ProviderClient {
    pub(crate) core: Arc<ClientCore>,
    pub(crate) pool: Arc<Pool>,
    pub(crate) settings: CallSettings,
    pub(crate) metrics: Arc<ClientMetrics>,
    pub(crate) recovery: Arc<Recovery>,
}

impl std::fmt::Debug for ProviderClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderClient").field("core", &self.core).finish()
    }
}

fn code_name(code: tonic::Code) -> String {
    format!("{code:?}")
}

impl ProviderClient {
    /// The reference every call carries.
    pub fn reference(&self) -> &ProviderReference {
        &self.core.reference
    }

    /// Who owns the provider configuration the calls reach (the tenant boundary).
    pub fn owner(&self) -> keyward_crds::rules::ConfigOwner {
        self.core.owner
    }

    /// The namespace of the manifest the calls are made for.
    pub fn source_namespace(&self) -> &str {
        &self.core.source_namespace
    }

    /// The pooled connection this client uses.
    pub fn pool_key(&self) -> &PoolKey {
        &self.core.pool_key
    }

    /// This client's provider as it stands now, to wait on after a failed call.
    pub fn waitable(&self) -> Waitable {
        Waitable { client: self.clone(), recoveries: self.core.breaker.recoveries() }
    }

    fn provider_ref(&self) -> Option<ProviderReference> {
        Some(self.core.reference.clone())
    }

    /// Runs one `SecretStoreProvider` RPC with deadline, retries and the breaker.
    async fn call<T, F, Fut>(&self, method: &'static str, rpc: F) -> Result<T, ProviderError>
    where
        F: Fn(SecretStoreProviderClient<Channel>) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    {
        self.call_on(method, SecretStoreProviderClient::new, rpc).await
    }

    /// Runs one RPC of any of the contract's services (`client_of` makes its client on the
    /// pooled channel) with deadline, retries and the breaker.
    async fn call_on<C, T, F, Fut>(
        &self,
        method: &'static str,
        client_of: fn(Channel) -> C,
        rpc: F,
    ) -> Result<T, ProviderError>
    where
        F: Fn(C) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    {
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            if let Err(open) = self.core.breaker.try_acquire(Instant::now()) {
                self.count(method, "CircuitOpen");
                return Err(ProviderError::Unavailable(format!(
                    "circuit breaker for {} is open after repeated failures; next attempt in {}s",
                    self.core.store,
                    open.retry_in.as_secs().max(1)
                )));
            }
            let channel = self
                .pool
                .channel(&self.core.pool_key, &self.core.tls, Instant::now())
                .map_err(|e| ProviderError::Unavailable(e.to_string()))?;
            let client = client_of(channel);
            let result = match tokio::time::timeout(self.settings.deadline, rpc(client)).await {
                Ok(Ok(response)) => Ok(response.into_inner()),
                Ok(Err(status)) => Err(status),
                Err(_) => Err(tonic::Status::deadline_exceeded(format!(
                    "{method} to {} took longer than {:?}",
                    self.core.pool_key.address, self.settings.deadline
                ))),
            };
            match result {
                Ok(value) => {
                    if self.core.breaker.record(false, Instant::now()) {
                        self.recovery.provider_answered(&self.core.provider);
                    }
                    self.count(method, "OK");
                    return Ok(value);
                }
                Err(status) => {
                    self.count(method, &code_name(status.code()));
                    let err = ProviderError::from(status);
                    let transient = err.is_transient();
                    // A non-transient answer (NOT_FOUND, denied) proves the provider is up.
                    if self.core.breaker.record(transient, Instant::now()) {
                        self.recovery.provider_answered(&self.core.provider);
                    }
                    if !self.settings.retry.should_retry(attempt, transient) {
                        return Err(err);
                    }
                    let delay = self.settings.retry.delay(attempt - 1, &mut rand::rng());
                    tracing::debug!(method, store = %self.core.store, attempt, ?delay, error = %err, "retrying provider call");
                    tokio::time::sleep(delay).await;
                }
            }
        }
    }

    fn count(&self, method: &str, code: &str) {
        self.metrics
            .grpc_requests
            .get_or_create(&GrpcLabels { method: method.to_string(), code: code.to_string() })
            .inc();
    }

    /// `GetSecret`, accepting an answer up to `max_age` old (the provider may share one store
    /// call between identical requests within it).
    pub async fn get_secret(
        &self,
        remote_ref: pb::ExternalSecretDataRemoteRef,
        max_age: Duration,
    ) -> Result<Vec<u8>, ProviderError> {
        let req = pb::GetSecretRequest {
            remote_ref: Some(remote_ref),
            provider_ref: self.provider_ref(),
            source_namespace: self.core.source_namespace.clone(),
            max_age_millis: max_age_millis(max_age),
        };
        self.call("GetSecret", |mut c| {
            let req = req.clone();
            async move { c.get_secret(req).await }
        })
        .await
        .map(|r| r.value)
    }

    /// `GetSecretMap`, accepting an answer up to `max_age` old.
    pub async fn get_secret_map(
        &self,
        remote_ref: pb::ExternalSecretDataRemoteRef,
        max_age: Duration,
    ) -> Result<HashMap<String, Vec<u8>>, ProviderError> {
        let req = pb::GetSecretMapRequest {
            remote_ref: Some(remote_ref),
            provider_ref: self.provider_ref(),
            source_namespace: self.core.source_namespace.clone(),
            max_age_millis: max_age_millis(max_age),
        };
        self.call("GetSecretMap", |mut c| {
            let req = req.clone();
            async move { c.get_secret_map(req).await }
        })
        .await
        .map(|r| r.secrets)
    }

    /// `GetAllSecrets`.
    pub async fn get_all_secrets(
        &self,
        find: pb::ExternalSecretFind,
    ) -> Result<HashMap<String, Vec<u8>>, ProviderError> {
        let req = pb::GetAllSecretsRequest {
            provider_ref: self.provider_ref(),
            find: Some(find),
            source_namespace: self.core.source_namespace.clone(),
        };
        self.call("GetAllSecrets", |mut c| {
            let req = req.clone();
            async move { c.get_all_secrets(req).await }
        })
        .await
        .map(|r| r.secrets)
    }

    /// `PushSecret`.
    pub async fn push_secret(
        &self,
        secret_data: HashMap<String, Vec<u8>>,
        data: pb::PushSecretData,
    ) -> Result<(), ProviderError> {
        let req = pb::PushSecretRequest {
            provider_ref: self.provider_ref(),
            secret_data,
            push_secret_data: Some(data),
            source_namespace: self.core.source_namespace.clone(),
        };
        self.call("PushSecret", |mut c| {
            let req = req.clone();
            async move { c.push_secret(req).await }
        })
        .await
        .map(|_| ())
    }

    /// `DeleteSecret`.
    pub async fn delete_secret(&self, remote_ref: pb::PushSecretRemoteRef) -> Result<(), ProviderError> {
        let req = pb::DeleteSecretRequest {
            provider_ref: self.provider_ref(),
            remote_ref: Some(remote_ref),
            source_namespace: self.core.source_namespace.clone(),
        };
        self.call("DeleteSecret", |mut c| {
            let req = req.clone();
            async move { c.delete_secret(req).await }
        })
        .await
        .map(|_| ())
    }

    /// `SecretExists`.
    pub async fn secret_exists(&self, remote_ref: pb::PushSecretRemoteRef) -> Result<bool, ProviderError> {
        let req = pb::SecretExistsRequest {
            provider_ref: self.provider_ref(),
            remote_ref: Some(remote_ref),
            source_namespace: self.core.source_namespace.clone(),
        };
        self.call("SecretExists", |mut c| {
            let req = req.clone();
            async move { c.secret_exists(req).await }
        })
        .await
        .map(|r| r.exists)
    }

    /// `Validate`, letting the provider read the configuration objects from what it already
    /// holds when they are at most `max_age` old (zero: read them anew).
    pub async fn validate(&self, max_age: Duration) -> Result<pb::ValidateResponse, ProviderError> {
        let req = pb::ValidateRequest {
            provider_ref: self.provider_ref(),
            source_namespace: self.core.source_namespace.clone(),
            max_age_millis: max_age_millis(max_age),
        };
        self.call("Validate", |mut c| {
            let req = req.clone();
            async move { c.validate(req).await }
        })
        .await
    }

    /// `GeneratorProvider/Generate`: the values of one generator spec of `kind` named `name`,
    /// generated for this client's source namespace (the tenant boundary the provider applies).
    /// A provider that does not generate answers `UNIMPLEMENTED` ([`ProviderError::Unsupported`]).
    pub async fn generate(
        &self,
        kind: &str,
        name: &str,
        spec_json: String,
    ) -> Result<HashMap<String, Vec<u8>>, ProviderError> {
        let req = pb::GenerateRequest {
            kind: kind.to_string(),
            spec_json,
            namespace: self.core.source_namespace.clone(),
            name: name.to_string(),
        };
        self.call_on("Generate", GeneratorProviderClient::new, |mut c| {
            let req = req.clone();
            async move { c.generate(req).await }
        })
        .await
        .map(|r| r.values)
    }

    /// `Capabilities`.
    pub async fn capabilities(&self) -> Result<keyward_crds::Capabilities, ProviderError> {
        let req = pb::CapabilitiesRequest {
            provider_ref: self.provider_ref(),
            source_namespace: self.core.source_namespace.clone(),
        };
        let resp = self
            .call("Capabilities", |mut c| {
                let req = req.clone();
                async move { c.capabilities(req).await }
            })
            .await?;
        Ok(
            match pb::SecretStoreCapabilities::try_from(resp.capabilities)
                .unwrap_or(pb::SecretStoreCapabilities::ReadOnly)
            {
                pb::SecretStoreCapabilities::ReadOnly => keyward_crds::Capabilities::ReadOnly,
                pb::SecretStoreCapabilities::WriteOnly => keyward_crds::Capabilities::WriteOnly,
                pb::SecretStoreCapabilities::ReadWrite => keyward_crds::Capabilities::ReadWrite,
            },
        )
    }
}

/// `max_age` in whole milliseconds, rounded down (an answer is never older than the caller allows).
fn max_age_millis(max_age: Duration) -> u32 {
    u32::try_from(max_age.as_millis()).unwrap_or(u32::MAX)
}
