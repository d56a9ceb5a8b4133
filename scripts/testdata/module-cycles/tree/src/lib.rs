pub mod caches;
pub mod context;
pub mod keys;

// Re-exports: `crate::Labels` names keys.rs, not this file (else lib -> context -> caches -> lib).
pub use context::Context;
pub use keys::Labels;
