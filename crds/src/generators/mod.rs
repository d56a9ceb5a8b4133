//! `generators.external-secrets.io/v1alpha1`: objects that make values instead of fetching them.
//!
//! Keyward serves the kinds that generate in the reconciler itself, with no store and no
//! credentials: Password, UUID, SSHKey and Fake; VaultDynamicSecret, which calls Vault and so
//! runs in the Vault provider process; ECRAuthorizationToken and STSSessionToken, which call AWS
//! and so run in the AWS provider process; Webhook, which sends an HTTP request and so runs in
//! the webhook provider process; MFA, a TOTP code of a seed in a Secret, computed in the
//! reconciler; each namespaced, and the cluster-scoped ClusterGenerator that holds the spec of
//! one of them. Upstream's other kinds (GitHub, GitLab, Quay, Cloudsmith, Grafana, BeyondTrust)
//! have their CRDs installed, so upstream's manifests apply, and are reported as not served.
//! Field names and defaults are upstream's, so upstream manifests apply unchanged. GeneratorState, upstream's record of generated values
//! to clean up later, is served so records brought from an External Secrets install are
//! collected; Keyward itself creates none.

pub mod acr;
pub mod aws;
pub mod beyondtrust;
pub mod cluster;
pub mod fake;
pub mod gcr;
pub mod git;
pub mod grafana;
pub mod mfa;
pub mod password;
pub mod registries;
pub mod served;
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
pub use beyondtrust::{BeyondtrustWorkloadCredentialsDynamicSecret, BeyondtrustWorkloadCredentialsDynamicSecretSpec};
pub use cluster::{ClusterGenerator, ClusterGeneratorSpec, GeneratorKind, GeneratorSpec};
pub use fake::{Fake, FakeSpec};
pub use gcr::{GcrAccessToken, GcrAccessTokenSpec};
pub use git::{GithubAccessToken, GithubAccessTokenSpec, GitlabDeployToken, GitlabDeployTokenSpec};
pub use grafana::{Grafana, GrafanaSpec};
pub use mfa::{Mfa, MfaSpec};
pub use password::{Password, PasswordEncoding, PasswordSpec};
pub use registries::{CloudsmithAccessToken, CloudsmithAccessTokenSpec, QuayAccessToken, QuayAccessTokenSpec};
pub use served::{GENERATOR_KINDS, GeneratedBy, GeneratorRow, generator_row};
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
