//! The AWS provider: Secrets Manager and Parameter Store.
//!
//! [`api`] (always built) is the `SecretsManager` configuration kind, its rules, upstream's
//! `spec.provider.aws` block and the kind's registry row; the rest (feature `server`, default)
//! is the provider process.
//!
//! Each request names a `SecretsManager` config object (`provider.external-secrets.io/v2alpha1`),
//! read from `providerRef.namespace` when set, else from the source namespace, or the
//! SecretStore / ClusterSecretStore whose `spec.provider.aws` it reaches (`service:
//! SecretsManager` or `ParameterStore`). Its credentials and roles give the AWS clients, cached
//! per config object, generation and owner for a few minutes. Secret references resolve in the
//! config's namespace; a tenant's config naming another namespace, or relying on the provider's
//! own credentials, is refused.

pub mod api;

#[cfg(feature = "server")]
mod batch;
#[cfg(feature = "server")]
mod capped;
#[cfg(feature = "server")]
pub mod client;
#[cfg(feature = "server")]
mod generate;
#[cfg(feature = "server")]
pub mod mapping;
#[cfg(feature = "server")]
pub mod parameter_store;
#[cfg(feature = "server")]
mod provider;

#[cfg(feature = "server")]
pub use provider::SecretsManagerProvider;
#[cfg(feature = "server")]
pub(crate) use provider::{FIND_LIMIT, NARROW_FIND, Target};
