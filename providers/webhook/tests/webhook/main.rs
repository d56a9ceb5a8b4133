//! The webhook provider's integration tests, one binary: the provider process over real mTLS
//! against HTTP(S) store servers in this process (each test starts its own) and the local
//! control plane (one per process, shared by every test).

#![allow(clippy::unwrap_used)]

mod common;
mod conformance;
mod generate;
mod webhook_provider;
