//! The shared runtime of Keyward's provider processes.
//!
//! A provider implements [`Provider`] (the eight operations of `provider.v1.SecretStoreProvider`)
//! and hands it to [`serve`], which runs:
//!
//! - the gRPC service over mutual TLS only (TLS 1.2+, client certificate required and verified
//!   against `ca.crt`), with the certificate material read from a Secret-style directory and
//!   reloaded without restart when it changes (including the kubelet's `..data` symlink swap);
//! - request checks before provider code runs (ProviderReference and source namespace required);
//! - gRPC health and reflection;
//! - a plain HTTP port with `/healthz`, `/readyz` and `/metrics`;
//! - graceful shutdown that lets in-flight calls finish.
//!
//! Binaries share their flags through [`RuntimeArgs`].

mod cli;
mod context;
pub mod json;
mod metrics;
mod provider;
#[cfg(feature = "refs")]
pub mod refs;
mod server;
mod service;
#[cfg(feature = "testkit")]
pub mod testkit;
pub mod tls;

pub use cli::{LogFormat, RuntimeArgs, install_crypto_provider, shutdown_signal};
pub use context::{RequestContext, StoreRefKind, check_provider_ref};
pub use keyward_proto::ProviderError;
pub use metrics::Metrics;
pub use provider::{Provider, SecretMap};
pub use server::{RuntimeError, ServerOptions, serve};
pub use service::ProviderService;
