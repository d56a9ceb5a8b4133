//! Why a client could not be handed out. Each message says what is wrong and names the
//! objects involved, because it ends up in a status condition and an event.

use keyward_crds::StoreKind;
use keyward_crds::rules::{AuthNamespaceError, NamespaceDenied, StoreProviderError};

use super::pool::PoolError;

/// A store reference that cannot be served.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// A SecretStore or ClusterSecretStore whose `spec.provider` cannot be served.
    #[error("{kind} {name:?}: {source}")]
    StoreProvider {
        /// Kind of the store.
        kind: StoreKind,
        /// Its name.
        name: String,
        /// What is wrong with its provider.
        source: StoreProviderError,
    },
    /// The store does not exist.
    #[error("{kind} {name:?} not found{}", .namespace.as_ref().map(|n| format!(" in namespace {n:?}")).unwrap_or_default())]
    StoreNotFound {
        /// Kind looked up.
        kind: StoreKind,
        /// Its name.
        name: String,
        /// Its namespace (Providers only).
        namespace: Option<String>,
    },
    /// The conditions of the ClusterProvider or ClusterSecretStore refuse the namespace.
    #[error(transparent)]
    NamespaceDenied(#[from] NamespaceDenied),
    /// The namespace of the manifest does not exist (any more).
    #[error("namespace {0:?} not found")]
    NamespaceNotFound(String),
    /// ProviderNamespace scope without a namespace.
    #[error(transparent)]
    AuthScope(#[from] AuthNamespaceError),
    /// The address does not parse.
    #[error("{kind} {name:?} has an invalid address: {message}")]
    Address {
        /// Kind of the store.
        kind: StoreKind,
        /// Its name.
        name: String,
        /// What is wrong.
        message: String,
    },
    /// The TLS Secret is missing or incomplete.
    #[error("provider TLS material: {0}")]
    Tls(String),
    /// The provider cannot do what is asked (a WriteOnly provider behind an ExternalSecret).
    #[error("{kind} {name:?} is {capabilities:?} and cannot be used to {need}")]
    Capability {
        /// Kind of the store.
        kind: StoreKind,
        /// Its name.
        name: String,
        /// What it reported.
        capabilities: keyward_crds::Capabilities,
        /// What was needed, e.g. "read secrets for an ExternalSecret".
        need: &'static str,
    },
    /// The pool refused (closed manager, unusable TLS material).
    #[error(transparent)]
    Pool(#[from] PoolError),
    /// The store names another controller instance in `spec.controller`: this one leaves it,
    /// and what uses it, alone (as upstream).
    #[error(
        "{kind} {name:?} is served by controller {controller:?} (spec.controller), not by this instance{}",
        .class.as_ref().map(|c| format!(" of class {c:?}")).unwrap_or_default()
    )]
    NotServed {
        /// Kind of the store.
        kind: StoreKind,
        /// Its name.
        name: String,
        /// Its `spec.controller`.
        controller: String,
        /// This instance's controller class.
        class: Option<String>,
    },
    /// Reading from the API server failed.
    #[error("reading {what}: {message}")]
    Api {
        /// What was being read.
        what: String,
        /// The error.
        message: String,
    },
}

impl ClientError {
    /// Whether trying again later without any change may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(self, ClientError::Api { .. })
    }

    /// The condition reason for this error where it has its own (a store naming a provider
    /// this controller does not serve: `ProviderNotSupported`).
    pub fn reason(&self) -> Option<&'static str> {
        match self {
            ClientError::StoreProvider { source, .. } => Some(source.reason()),
            _ => None,
        }
    }
}
