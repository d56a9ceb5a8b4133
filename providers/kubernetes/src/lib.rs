//! The Kubernetes provider: Secrets of a (possibly remote) cluster served as an external
//! store.
//!
//! Each request names a `Kubernetes` config object (`provider.external-secrets.io/v2alpha1`),
//! read from `providerRef.namespace` when set, else from the source namespace. Its `server`
//! (URL and CA) and its one auth method (`serviceAccount` via the TokenRequest API, `token` or
//! `cert` from Secrets, or a kubeconfig via `authRef`) give a client for the target cluster,
//! cached per config object, generation and owner. Objects the config names resolve in the
//! config's namespace; another namespace is honoured only for an operator-owned config (reached
//! through a ClusterProvider with `authenticationScope: ProviderNamespace`) and refused for any
//! other: the provider applies the tenant boundary of `keyward_crds::rules` itself, on every
//! call. Remote Secrets live in the config's `remoteNamespace`. A store's `spec.provider.crd`
//! reads other kinds through the same connection ([`crd`]).
//!
//! [`api`] (always built) is the `Kubernetes` configuration kind, upstream's `kubernetes` and
//! `crd` store blocks and the kind's registry row; the rest (feature `server`, default) is the
//! provider process.

pub mod api;

#[cfg(feature = "server")]
pub mod client;
#[cfg(feature = "server")]
pub mod crd;
#[cfg(feature = "server")]
pub mod kubeconfig;
#[cfg(feature = "server")]
pub mod mapping;
#[cfg(feature = "server")]
mod provider;

#[cfg(feature = "server")]
pub use provider::KubernetesProvider;
