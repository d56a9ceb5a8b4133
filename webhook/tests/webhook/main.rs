//! The webhook's integration tests, one binary: the end-to-end test (the real kube-apiserver of
//! the local control plane, one per process, calls the webhook process), the memory load test
//! and the garbage reviews (in this process, no control plane: `make check` runs only these,
//! `--test webhook garbage::`).

mod common;
mod e2e;
mod garbage;
mod load;
