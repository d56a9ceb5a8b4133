//! The Vault provider's integration tests, one binary: the provider (a process over real mTLS,
//! or in this process) against Vault dev servers, each test starting its own, and the local
//! control plane (one per process, shared by every test).

#![allow(clippy::unwrap_used)]

mod common;
mod conformance;
mod gcp_login;
mod generate;
mod upstream_stores;
mod vault_provider;
