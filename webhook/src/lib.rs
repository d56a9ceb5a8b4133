//! Keyward's admission webhook: validating and mutating admission for the Keyward kinds,
//! answered from watched caches, served over rustls with certificate hot-reload.
//!
//! The binary (`keyward-webhook`) wires these modules together; tests, the benchmark and the
//! fuzz target use them directly.

pub mod cache;
pub mod cli;
pub mod client;
pub mod cluster_external_secret;
#[doc(hidden)]
pub mod fixtures;
pub mod freshness;
pub mod inject;
pub mod layers;
pub mod metrics;
pub mod mutate;
pub mod offline;
pub mod review;
pub mod server;
pub mod shed;
pub mod tls;
pub mod validate;
pub mod watch;

#[cfg(test)]
mod tests;
