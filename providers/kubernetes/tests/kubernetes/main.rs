//! The Kubernetes provider's integration tests, one binary: the provider process over real
//! mTLS against the local control plane (one per process, shared by every test).

mod common;
mod conformance;
mod kubernetes_provider;
