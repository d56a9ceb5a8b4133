//! The operations a provider implements.

use std::collections::HashMap;

use keyward_proto::ProviderError;
use keyward_proto::v1::{
    ExternalSecretDataRemoteRef, ExternalSecretFind, PushSecretData, PushSecretRemoteRef, SecretStoreCapabilities,
};

use crate::context::RequestContext;

/// Values by key, as sent on the wire.
pub type SecretMap = HashMap<String, Vec<u8>>;

/// One kind of external store. The runtime has already checked the ProviderReference, the
/// source namespace and the required fields of each request before these run.
///
/// Implementations never log secret values.
#[tonic::async_trait]
pub trait Provider: Send + Sync + 'static {
    /// One value, or one property of it. Missing → [`ProviderError::NoSecret`].
    async fn get_secret(
        &self,
        ctx: &RequestContext,
        remote_ref: &ExternalSecretDataRemoteRef,
    ) -> Result<Vec<u8>, ProviderError>;

    /// Every property of one value.
    async fn get_secret_map(
        &self,
        ctx: &RequestContext,
        remote_ref: &ExternalSecretDataRemoteRef,
    ) -> Result<SecretMap, ProviderError>;

    /// Every value matching `find` (name regex, tags, path).
    async fn get_all_secrets(
        &self,
        ctx: &RequestContext,
        find: &ExternalSecretFind,
    ) -> Result<SecretMap, ProviderError>;

    /// Writes one entry. `secret_data` is the source Secret's data.
    async fn push_secret(
        &self,
        ctx: &RequestContext,
        secret_data: &SecretMap,
        data: &PushSecretData,
    ) -> Result<(), ProviderError>;

    /// Deletes one value (or one property). Deleting what does not exist succeeds.
    async fn delete_secret(&self, ctx: &RequestContext, remote_ref: &PushSecretRemoteRef) -> Result<(), ProviderError>;

    /// Whether a value (or one property of it) exists.
    async fn secret_exists(
        &self,
        ctx: &RequestContext,
        remote_ref: &PushSecretRemoteRef,
    ) -> Result<bool, ProviderError>;

    /// Whether the configuration is usable and the store reachable; returns warnings.
    ///
    /// The runtime answers `valid: false` with the message for configuration, permission and
    /// authentication errors, and a gRPC error for the rest (store unreachable, internal).
    async fn validate(&self, ctx: &RequestContext) -> Result<Vec<String>, ProviderError>;

    /// What this provider can do.
    fn capabilities(&self) -> SecretStoreCapabilities;

    /// The values of one generator spec (`provider.v1.GeneratorProvider/Generate`), for the
    /// generator kinds that call this provider's store. `ctx.kind` and `ctx.name` are the
    /// generator's; `ctx` reaches the spec as a SecretStore of `ctx.source_namespace` would
    /// (tenant-owned: every reference stays in that namespace). `spec_json` is the spec as
    /// JSON, to be parsed and checked by the provider.
    ///
    /// Defaults to `UNIMPLEMENTED`: most providers generate nothing.
    async fn generate(&self, ctx: &RequestContext, spec_json: &str) -> Result<SecretMap, ProviderError> {
        let _ = spec_json;
        Err(ProviderError::Unsupported(format!("this provider does not generate {} values", ctx.kind)))
    }

    /// The UID and generation of the configuration object (or store) `ctx` names: the service
    /// keeps GetSecret and GetSecretMap answers per object, so a store deleted and re-created
    /// under the same name is never served the answers of the one before. Providers that read
    /// configuration objects return [`crate::refs::ClusterRefs::generation_of`]; the default
    /// (no object) keys by name alone.
    async fn object(&self, ctx: &RequestContext) -> crate::context::Generation {
        let _ = ctx;
        crate::context::Generation::default()
    }

    /// Whether the provider is ready to serve (for `/readyz`). Defaults to ready.
    async fn ready(&self) -> bool {
        true
    }
}
