//! The GCP Secret Manager provider: secrets of Google Cloud Secret Manager, as upstream External
//! Secrets' `gcpsm` provider.
//!
//! [`api`] (always built) is the `GCPSecretManager` configuration kind and its registry row; the
//! rest (feature `server`, default) is the provider process: each request names a
//! `GCPSecretManager` object or a SecretStore / ClusterSecretStore whose `spec.provider.gcpsm` is
//! the same block. Secret Manager is called through Google's Rust client
//! (`google-cloud-secretmanager-v1`, HTTP/JSON), with credentials from [`auth`] (resolved by
//! `keyward_gcp_identity`, shared with the Vault provider). Where Google's endpoints are is the
//! operator's setting ([`auth::Endpoints`]), never a configuration's.
//! The process also generates upstream's GCRAccessToken values ([`generate`]) with the same
//! identities.

pub mod api;

#[cfg(feature = "server")]
pub mod auth;
#[cfg(feature = "server")]
pub use keyward_gcp_identity::external_account;
#[cfg(feature = "server")]
pub mod generate;
#[cfg(feature = "server")]
mod identity;
#[cfg(feature = "server")]
mod provider;
#[cfg(feature = "server")]
pub mod value;

#[cfg(feature = "server")]
pub use provider::GcpProvider;
