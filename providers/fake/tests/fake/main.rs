//! The Fake provider's integration tests, one binary: the provider process over real mTLS
//! against Fake objects on the local control plane (one per process, shared by every test).
//! Each test works in its own temporary namespace and starts its own provider process, so the
//! tests run side by side without a lock.

mod conformance;
mod fake_provider;
