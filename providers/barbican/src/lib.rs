//! The OpenStack Barbican provider: secrets from Barbican (OpenStack's key manager), as upstream
//! External Secrets' `barbican` provider.
//!
//! [`api`] (always built) is the `Barbican` configuration kind and its registry row; the rest
//! (feature `server`, default) is the provider process: each request names a `Barbican` object
//! or a SecretStore / ClusterSecretStore whose `spec.provider.barbican` is the same block. It
//! logs in to Keystone v3 with the configured user and password, scoped to the project, keeps
//! the token until shortly before it expires ([`keystone`]), finds Barbican in the token's
//! catalog and reads a secret's payload by its ID; `property` and GetSecretMap read the payload
//! as a JSON object ([`payload`]). Read-only, as
//! upstream. Secrets named by a configuration are read within its namespace unless the cluster
//! operator owns it.

pub mod api;

#[cfg(feature = "server")]
pub mod keystone;
#[cfg(feature = "server")]
pub mod payload;
#[cfg(feature = "server")]
mod provider;

#[cfg(feature = "server")]
pub use provider::{BarbicanProvider, secret_id};
