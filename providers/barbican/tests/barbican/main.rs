//! The Barbican provider's integration tests, one binary: the provider process over real mTLS
//! against Keystone and Barbican (each test starts its own) and the local control plane (one per
//! process, shared by every test).

mod barbican_provider;
mod common;
mod conformance;
