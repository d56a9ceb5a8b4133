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
pub mod store_calls;
pub mod store_tls;
#[cfg(feature = "testkit")]
pub mod testkit;
pub mod tls;

pub use cli::{RuntimeArgs, install_crypto_provider};
pub use context::{Generation, RequestContext, StoreRefKind, check_provider_ref};
pub use keyward_process::{LogFormat, shutdown_signal};
pub use keyward_proto::ProviderError;
pub use metrics::Metrics;
pub use provider::{Provider, SecretMap};
pub use server::{RuntimeError, ServerOptions, serve};
pub use service::ProviderService;

/// Runs a provider binary after its flags are parsed: reads the process's Kubernetes
/// configuration (a kubeconfig, else the in-cluster one), builds the provider from it with
/// `make`, and serves it with `args` until SIGTERM or SIGINT.
#[cfg(feature = "refs")]
pub async fn serve_in_cluster<P, E>(
    args: &RuntimeArgs,
    make: impl FnOnce(kube::Config) -> Result<P, E>,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>>
where
    P: Provider,
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let config = kube::Config::infer()
        .await
        .map_err(|e| format!("no Kubernetes configuration (kubeconfig or in-cluster): {e}"))?;
    client_cache::watch_referenced_objects(args.watch_referenced_objects);
    let provider = make(config).map_err(Into::into)?;
    serve(provider, args.server_options()?, shutdown_signal()).await?;
    Ok(())
}
