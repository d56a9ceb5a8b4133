//! Test support for Keyward: one real control plane (etcd, kube-apiserver,
//! kube-controller-manager on loopback) per test run, Keyward's CRDs installed, temporary
//! namespaces, `kubectl apply` helpers, and child processes whose logs are shown when a test
//! fails.
//!
//! The control plane is reused when `KEYWARD_TEST_KUBECONFIG` names a running one (`make test`
//! starts one for the whole run); otherwise the first test in a process starts its own, which
//! a watchdog tears down when the process exits, even after a crash.

pub mod bench;
pub mod hostile;
mod kubectl;
mod namespace;
mod outage;
mod plane;
mod process;
pub mod prometheus;
pub mod stores;
pub mod switch;
pub mod turns;

pub use kubectl::{accepts, accepts_in, kubectl, rejects, rejects_in};
pub use namespace::{E2E_LABEL, delete_and_wait, with_temp_namespace};
pub use outage::Stopped;
pub use plane::{ControlPlane, control_plane, node_cluster, node_ip, repo_root};
pub use process::{
    ChildProcess, LOCAL_DENIED_NETWORKS, TENANT_DENIED_NETWORKS_ENV, free_port, spawn_logged, spawn_provider,
    spawn_provider_with, workspace_binary,
};
