//! `generators.external-secrets.io/v1alpha1`: objects that make values instead of fetching them.
//!
//! Keyward serves the kinds that generate in the reconciler itself, with no store and no
//! credentials: Password, UUID, SSHKey and Fake; VaultDynamicSecret, which calls Vault and so
//! runs in the Vault provider process; ECRAuthorizationToken and STSSessionToken, which call AWS
//! and so run in the AWS provider process; Webhook, which sends an HTTP request and so runs in
//! the webhook provider process; each namespaced, and the cluster-scoped
//! ClusterGenerator that holds the spec of one of them. Field names and defaults are upstream's,
//! so upstream manifests apply unchanged. GeneratorState, upstream's record of generated values
//! to clean up later, is served so records brought from an External Secrets install are
//! collected; Keyward itself creates none.

pub mod acr;
pub mod aws;
pub mod cluster;
pub mod fake;
pub mod password;
pub mod sshkey;
pub mod state;
pub mod uuid;
pub mod vault;
pub mod webhook;

pub use acr::{
    AcrAccessToken, AcrAccessTokenSpec, AcrAuth, AcrManagedIdentityAuth, AcrServicePrincipalAuth,
    AcrServicePrincipalSecretRef, AcrWorkloadIdentityAuth, AzureEnvironmentType,
};
pub use aws::{
    EcrAuthorizationToken, EcrAuthorizationTokenSpec, StsRequestParameters, StsSessionToken, StsSessionTokenSpec,
};
pub use cluster::{ClusterGenerator, ClusterGeneratorSpec, GeneratorKind, GeneratorSpec};
pub use fake::{Fake, FakeSpec};
pub use password::{Password, PasswordEncoding, PasswordSpec};
pub use sshkey::{SshKey, SshKeySpec, SshKeyType};
pub use state::{GeneratorState, GeneratorStateCondition, GeneratorStateSpec, GeneratorStateStatus};
pub use uuid::{Uuid, UuidSpec};
pub use vault::{VaultDynamicSecret, VaultDynamicSecretResultType, VaultDynamicSecretSpec};
pub use webhook::{WebhookGenerator, WebhookGeneratorSpec};

/// API group of the generator kinds.
pub const GENERATOR_GROUP: &str = "generators.external-secrets.io";
/// API version of the generator kinds, as a `generatorRef.apiVersion` names it.
pub const GENERATOR_API_VERSION: &str = "generators.external-secrets.io/v1alpha1";
/// The category upstream lists its generators under, besides `external-secrets`.
pub const GENERATOR_CATEGORY: &str = "external-secrets-generators";
