//! The generic webhook provider: secrets from HTTP APIs, as upstream External Secrets'
//! `webhook` provider.
//!
//! [`api`] (always built) is the `Webhook` configuration kind and its registry row; the rest
//! (feature `server`, default) is the provider process: each request names a `Webhook` object
//! or a SecretStore / ClusterSecretStore whose `spec.provider.webhook` is the same block. Its
//! templates are rendered with Keyward's Go-template engine under a budget ([`render`]), the
//! request is sent by a client that keeps a tenant's configuration off the provider pod's own
//! loopback and link-local addresses (the runtime's `netguard`, [`client`]), and the answer,
//! capped in size and time, is read with the configured JSONPath ([`result`]), whose cost over
//! the answer is bounded before it is evaluated ([`cost`]). Secrets named by a configuration
//! are read within its namespace unless the cluster operator owns it.

pub mod api;
pub mod rules;

#[cfg(feature = "server")]
pub mod client;
#[cfg(feature = "server")]
pub mod cost;
#[cfg(feature = "server")]
mod provider;
#[cfg(feature = "server")]
pub mod render;
#[cfg(feature = "server")]
pub mod result;

#[cfg(feature = "server")]
pub use provider::WebhookProvider;
