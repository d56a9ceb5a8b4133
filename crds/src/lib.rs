//! Keyward's API: the External Secrets compatible resource types, the pure rules that the
//! webhook and the reconciler both apply, and the CRD generator.

pub mod aws_auth;
pub mod cluster_external_secret;
pub mod cluster_push_secret;
pub mod common;
pub mod external_secret;
pub mod free_json;
pub mod gcp;
pub mod generate;
pub mod generators;
pub mod provider;
pub mod provider_config;
pub mod push_secret;
pub mod registry;
pub mod rules;
mod schema;
pub mod secret_store;
pub mod store_blocks;
pub mod store_schema;
pub mod vault;
pub mod workload;

pub use cluster_external_secret::{ClusterExternalSecret, ClusterExternalSecretSpec, ClusterExternalSecretStatus};
pub use cluster_push_secret::{ClusterPushSecret, ClusterPushSecretSpec, ClusterPushSecretStatus};
pub use common::{Condition, LocalObjectReference, SecretKeySelector, SecretStoreRef, StoreKind};
pub use external_secret::{ExternalSecret, ExternalSecretSpec, ExternalSecretStatus};
pub use provider::{
    AuthenticationScope, Capabilities, ClusterProvider, ClusterProviderCondition, ClusterProviderSpec, Provider,
    ProviderConfig, ProviderRef, ProviderSpec, ProviderStatus,
};
pub use push_secret::{PushSecret, PushSecretSpec, PushSecretStatus};
pub use secret_store::{ClusterSecretStore, ClusterSecretStoreSpec, SecretStore, SecretStoreProvider, SecretStoreSpec};
pub use vault::{Vault, VaultSpec};
