//! The AWS provider's integration tests, one binary: the provider process over real mTLS
//! against moto (each test starts its own) and the local control plane (one per process,
//! shared by every test).

#![allow(clippy::unwrap_used)]

mod aws_provider;
mod batch;
mod common;
mod conformance;
mod generate;
mod store_calls;
