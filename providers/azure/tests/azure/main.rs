//! The Azure Key Vault provider's integration tests, one binary: the provider process over real
//! mTLS against the Key Vault protocol test server of the e2e harness (no emulator can be
//! installed) and the local control plane (one per process, shared by every test), the
//! ACRAccessToken generator among them; and Microsoft's own Python clients against that server.

mod common;
mod conformance;
mod generate;
mod python_client;
mod recreated;
mod upstream_stores;
