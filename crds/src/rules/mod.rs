//! Pure rules shared by the webhook (at admission) and the reconciler (at runtime).
//!
//! Nothing here does I/O: callers pass in what they looked up, so one rule lives in one place
//! and both components reach the same decision.

mod acr;
mod address;
mod auth;
mod boundary;
mod cluster_external_secret;
mod cluster_push_secret;
mod cluster_store;
mod duration;
mod gcp;
mod generator_specs;
mod generators;
mod generic_targets;
mod identity;
mod keys;
mod lenient;
mod mfa;
mod namespace;
mod password;
mod patterns;
mod reach;
mod secret_store;
mod selector;
mod server_url;
mod store_blocks;
mod stores;
mod sync_window;
#[cfg(test)]
pub(crate) mod test_spec;
mod validate;

pub use acr::{AcrIdentity, acr_identity, validate_acr_access_token};
pub use address::{Address, parse_address, tls_secret_namespace};
pub use auth::{AuthNamespaceError, StoreSpec, auth_namespace};
pub use boundary::{
    Ambient, BoundaryViolation, ConfigOwner, NamedKind, NamedObject, Reach, ambient_refusal, check_boundary,
    check_boundary_with, check_config_namespace, check_push_override, config_owner, named_namespace,
    push_metadata_remote_namespace, push_namespace,
};
pub use cluster_external_secret::{refused_store, selects_namespace, validate_cluster_external_secret};
pub use cluster_push_secret::{push_refused_store, push_selects_namespace, validate_cluster_push_secret};
pub use cluster_store::cluster_secret_store_references;
pub use duration::{DurationError, parse_duration_with_days, parse_go_duration};
pub use gcp::{
    CRED_CONFIG_IDENTITY, GCP_KEY_FIELD, GCP_WI_FIELD, GCP_WIF_AWS_FIELD, GCP_WIF_CONFIG_FIELD, GCP_WIF_SA_FIELD,
    check_gcp_name_part, gcp_auth_reach, looks_like_email, validate_gcp_auth, validate_gcr_access_token,
};
pub use generator_specs::{
    ECDSA_BITS, MAX_GENERATED_BYTES, MAX_SSH_COMMENT, RSA_BITS, encoded_len, generator_spec_field,
    validate_generator_spec, validate_generator_state,
};
pub use generators::{
    AnyGeneratorSpec, CLUSTER_GENERATOR_KIND, GeneratorNamespaceDenied, GeneratorTarget,
    check_generator_namespace_admitted, cluster_generator_spec, generator_target, is_unserved_generator_kind,
    not_served, read_generator_spec, spec_of_kind, unserved_generator_warning,
};
pub use generic_targets::{
    GENERIC_TARGET_RESOURCES_FLAG, GENERIC_TARGETS_FLAG, GenericTargets, GroupResource, MAX_PATH_INDEX, PathStep,
    UPSTREAM_GENERIC_TARGETS_FLAG, api_group, generic_target_refusal, generic_target_warning, generic_targets_off,
    parse_target_path,
};
pub use identity::{PROVIDER_IDENTITY_FLAG, ProviderIdentityNamespaces};
pub use keys::{KeyError, SegmentRefusal, check_segment, key_segments};
pub use lenient::{external_secret_warnings, push_secret_warnings};
pub use mfa::{DEFAULT_MFA_LENGTH, DEFAULT_MFA_TIME_PERIOD, MfaAlgorithm, MfaPlan, mfa_plan, mfa_secret_namespace};
pub use namespace::{NamespaceDenied, NamespaceView, check_namespace_admitted, conditions_admit};
pub use password::{
    DEFAULT_SYMBOLS, DIGITS, LOWER, MAX_PASSWORD_LENGTH, MAX_PASSWORD_SECRET_KEYS, MAX_SYMBOL_CHARACTERS,
    MAX_SYMBOL_CHARACTERS_BYTES, PasswordPlan, UPPER, password_keys, password_plan,
};
pub use reach::{
    VAULT_GCP_KEY_FIELD, VAULT_GCP_WI_FIELD, VAULT_NO_LOGIN, VAULT_OWN_AWS_IDENTITY, VAULT_OWN_GCP_IDENTITY,
    VAULT_OWN_TOKEN, ca_provider as named_ca_provider, secret as named_secret,
    service_account as named_service_account, vault_reach,
};
pub use secret_store::{
    MAX_STORE_RETRIES, MAX_STORE_RETRY_INTERVAL, Plugins, SERVED_STORE_PROVIDERS, StoreBackend, StoreProviderError,
    StoreRetry, secret_store_boundary, secret_store_warnings, store_backend, store_controller_matches, store_ref_kind,
    store_refresh_interval, store_retry, validate_secret_store,
};
pub use selector::{SelectorError, label_selector_matches, parse_label_selector, validate_label_selector};
pub use server_url::{check_key_selector, check_server_url};
pub use store_blocks::{SHARED_STORE_KEYS, open_bao_vault, validate_open_bao};
pub use stores::{
    check_access_keys as check_aws_access_keys, check_ca, check_region as check_aws_region,
    check_role as check_aws_role, validate_vault, vault_warnings,
};
pub use sync_window::{WindowGate, validate_sync_windows, window_gate};
pub use validate::{
    check_secret_key, is_dns_label, is_dns_subdomain, push_secret_free_json, validate_cluster_provider,
    validate_external_secret, validate_provider, validate_push_secret,
};

/// A rule violation at one field, with what to do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// JSON path of the field, for example `spec.dataFrom[0].find.name.regexp`.
    pub field: String,
    /// What is wrong and how to fix it.
    pub message: String,
}

impl FieldError {
    /// An error at `field`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError { field: field.into(), message: message.into() }
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// Every violation found in one object, in field order.
#[derive(Debug, Clone, PartialEq, Eq, Default, thiserror::Error)]
#[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
pub struct ValidationErrors(pub Vec<FieldError>);

impl ValidationErrors {
    /// `Ok` when nothing was found.
    pub fn into_result(self) -> Result<(), ValidationErrors> {
        if self.0.is_empty() { Ok(()) } else { Err(self) }
    }

    /// Adds one violation.
    pub fn push(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.0.push(FieldError::new(field, message));
    }
}
