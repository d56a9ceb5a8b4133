//! The GCP Secret Manager provider's integration tests, one binary: the provider process over
//! real mTLS against the Secret Manager protocol test server of the e2e harness (no emulator can
//! be installed) and the local control plane (one per process, shared by every test); and Google's
//! own Python client against that server.

mod common;
mod conformance;
mod cred_config;
mod gcp_provider;
mod generate;
mod python_client;
