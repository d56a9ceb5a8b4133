//! The shared runtime of Keyward's provider processes.
//!
//! A provider implements [`Provider`] (the eight operations of `provider.v1.SecretStoreProvider`)
//! and its binary's `main` is one call of [`main`], which starts the process through
//! `keyward_process::Runtime` (crypto provider, logging, admin server, shutdown drain) and
//! serves it ([`serve`] without the process runtime, for tests), running:
//!
//! - the gRPC service over mutual TLS only (TLS 1.2+, client certificate required and verified
//!   against `ca.crt`), with the certificate material read from a Secret-style directory and
//!   reloaded without restart when it changes (including the kubelet's `..data` symlink swap);
//! - request checks before provider code runs (ProviderReference and source namespace required);
//! - gRPC health and reflection;
//! - a plain HTTP port with `/healthz`, `/readyz` and `/metrics`;
//! - graceful shutdown that lets in-flight calls finish.
//!
//! Binaries share their flags through [`RuntimeArgs`]. Store clients take their TLS from
//! [`store_tls`], cap answers with [`body`], and keep tenants' configurations off the provider's
//! own loopback, link-local and metadata addresses with [`netguard`].

pub mod body;
mod cli;
#[cfg(feature = "refs")]
pub mod client_cache;
#[cfg(feature = "refs")]
pub mod config_watch;
mod context;
pub mod json;
pub mod keys;
mod metrics;
pub mod netguard;
mod provider;
pub mod read_cache;
#[cfg(feature = "refs")]
pub mod refs;
mod server;
mod service;
#[cfg(feature = "refs")]
mod start;
pub mod store_calls;
pub mod store_tls;
#[cfg(feature = "testkit")]
pub mod testkit;
pub mod tls;

pub use cli::RuntimeArgs;
pub use context::{Generation, RequestContext, StoreRefKind, check_provider_ref};
pub use keyward_process::{LogFormat, shutdown_signal};
pub use keyward_proto::ProviderError;
pub use metrics::Metrics;
pub use provider::{Provider, SecretMap};
pub use server::{RuntimeError, ServerOptions, serve};
pub use service::ProviderService;
#[cfg(feature = "refs")]
pub use start::main;
pub use tls::install_crypto_provider;
