//! The Fake provider: serves the entries of `Fake` config objects
//! (`provider.external-secrets.io/v2alpha1`), keeps pushed values in memory. For tests and
//! demos; nothing it holds survives a restart.
//!
//! [`api`] (always built) is the `Fake` configuration kind, upstream's `spec.provider.fake` block
//! and the kind's registry row; the rest (feature `server`, default) is the provider process. Its
//! configuration is read like every provider crate's (`ClusterRefs::resolve_spec`: the Fake
//! object, or a store's `spec.provider.fake` translated by the row, checked by
//! [`api::validate_fake`]), and JSON values are read and written with the runtime's `json`
//! helpers, so a `property` resolves as in the other providers: a literal key first, then a
//! dotted path whose numeric parts index arrays.
//!
//! - GetSecret: the entry whose key matches (and whose version matches the requested one; no
//!   version asks for the entry without one). With `property`, that property of the value read
//!   as a JSON object (strings as-is, anything else as JSON).
//! - GetSecretMap: the value read as a JSON object, one map entry per property.
//! - GetAllSecrets: entries whose key matches `find.name.regexp` and starts with `find.path`;
//!   entries carry no tags, so a `find` with tags is refused as unsupported.
//! - PushSecret: stores the value in memory under the config object and `remote_key` (the whole
//!   source Secret as a JSON object when no secret key is given; into a JSON object when a
//!   property is given). Pushed values shadow static entries with the same key.
//! - DeleteSecret / SecretExists: on pushed values (and static entries, for SecretExists).

pub mod api;

#[cfg(feature = "server")]
mod provider;

#[cfg(feature = "server")]
pub use provider::{FakeProvider, static_entry};
