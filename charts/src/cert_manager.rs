//! Real cert-manager for the cert-manager mode tests: its CRDs, and its controller and CA
//! injector as local processes against any kubeconfig (the local control plane, or a cluster).
//!
//! Both binaries are built by `e2e/scripts/build-tools.sh` from the cert-manager Go module
//! pinned in `e2e/tools/cert-manager` (our small mains wire its exported packages): the
//! controller runs the SelfSigned and CA issuers and the Certificate → Secret controllers, the
//! injector fills `caBundle` from `cert-manager.io/inject-ca-from`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use keyward_e2e::{ChildProcess, spawn_logged};

use crate::{run, tools_dir};

/// How long a process may take to log that it runs (it may wait for a Lease first).
const START_TIMEOUT: Duration = Duration::from_secs(90);

/// cert-manager's CRDs (from its Go module).
pub fn cert_manager_crds() -> PathBuf {
    tools_dir().join("cert-manager-crds")
}

/// Applies cert-manager's CRDs to the cluster of `kubeconfig` and waits until they are
/// Established.
///
/// # Panics
/// When kubectl fails.
pub fn install_cert_manager_crds(kubeconfig: &Path) {
    let dir = cert_manager_crds();
    let kubectl = || {
        let mut cmd = Command::new("kubectl");
        cmd.env("KUBECONFIG", kubeconfig);
        cmd
    };
    let mut apply = kubectl();
    apply.args(["apply", "--server-side", "--force-conflicts", "-f"]).arg(&dir);
    run(apply);
    let mut wait = kubectl();
    wait.args(["wait", "--for", "condition=Established", "--timeout", "60s", "-f"]).arg(&dir);
    run(wait);
}

/// Where the cert-manager processes act.
#[derive(Debug, Clone, Default)]
pub struct CertManagerOptions {
    /// Only Issuers, Certificates and CA sources in this namespace (webhook configurations
    /// are cluster-scoped and still injected). `None`: every namespace. Tests that share a
    /// control plane pass their own namespace, so their cert-managers never meet.
    pub namespace: Option<String>,
    /// Act only while holding a Lease in this namespace. `None`: no leader election.
    pub leader_election_namespace: Option<String>,
    /// Namespace of the Secrets ClusterIssuers refer to. `None`: `kube-system`, as upstream.
    pub cluster_resource_namespace: Option<String>,
}

/// cert-manager's controller and CA injector, running. Dropping it stops both (SIGTERM, so a
/// held Lease is released).
#[derive(Debug)]
pub struct CertManager {
    /// The controller (issuers, Certificates, CertificateRequests).
    pub controller: ChildProcess,
    /// The CA injector.
    pub cainjector: ChildProcess,
}

/// Installs cert-manager's CRDs into the cluster of `kubeconfig`, starts the controller and
/// the CA injector against it, and returns once both run.
///
/// # Panics
/// When the CRDs cannot be installed or a process exits or does not start in time.
pub async fn cert_manager(kubeconfig: &Path, options: &CertManagerOptions) -> CertManager {
    install_cert_manager_crds(kubeconfig);
    let command = |binary: &str| {
        let mut cmd = Command::new(tools_dir().join(binary));
        // -v=2 is cert-manager's info level: issuance steps show in a failing test's log.
        cmd.arg("--kubeconfig").arg(kubeconfig).arg("-v=2");
        if let Some(ns) = &options.namespace {
            cmd.args(["--namespace", ns]);
        }
        if let Some(ns) = &options.leader_election_namespace {
            cmd.args(["--leader-election-namespace", ns]);
        }
        cmd
    };
    let mut controller = command("cert-manager-controller");
    if let Some(ns) = &options.cluster_resource_namespace {
        controller.args(["--cluster-resource-namespace", ns]);
    }
    let mut controller = spawn_logged("cert-manager-controller", controller);
    let mut cainjector = spawn_logged("cert-manager-cainjector", command("cert-manager-cainjector"));
    controller.wait_for_log("cert-manager controller running", START_TIMEOUT).await;
    cainjector.wait_for_log("cert-manager cainjector running", START_TIMEOUT).await;
    CertManager { controller, cainjector }
}

impl CertManager {
    /// Panics when either process has exited (its log tail is printed as the panic unwinds).
    pub fn assert_running(&mut self) {
        for p in [&mut self.controller, &mut self.cainjector] {
            assert!(p.is_running(), "cert-manager exited, log {}", p.log_path().display());
        }
    }
}

impl Drop for CertManager {
    fn drop(&mut self) {
        self.controller.terminate(Duration::from_secs(5));
        self.cainjector.terminate(Duration::from_secs(5));
    }
}
