//! The Azure Key Vault provider: secrets, keys and certificates of a Key Vault, as upstream
//! External Secrets' `azurekv` provider serves them, through Microsoft's Rust SDK
//! (`azure_security_keyvault_secrets`, `_keys`, `_certificates`, `azure_identity`).
//!
//! [`api`] (always built) is the `AzureKeyVault` configuration kind and its registry row; the
//! rest (feature `server`, default) is the provider process: each request names an
//! `AzureKeyVault` object or a SecretStore / ClusterSecretStore whose `spec.provider.azurekv` is
//! the same block. The identity is built by [`auth`], requests leave through the runtime's rules
//! in [`transport`], remote keys and answers are read as upstream's in [`objects`] and [`push`].
//! The process also generates upstream's ACRAccessToken values ([`generate`]).

pub mod api;

#[cfg(feature = "server")]
pub mod auth;
#[cfg(feature = "server")]
pub mod generate;
#[cfg(feature = "server")]
pub mod objects;
#[cfg(feature = "server")]
mod provider;
#[cfg(feature = "server")]
pub mod push;
#[cfg(feature = "server")]
pub mod transport;

#[cfg(feature = "server")]
pub use provider::{AzureProvider, map_error};
