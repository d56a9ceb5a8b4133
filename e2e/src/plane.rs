//! The control plane of a test run (etcd, kube-apiserver, kube-controller-manager on loopback)
//! and where the repository is: what the other modules start processes against.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

use crate::process;

/// A running local control plane.
#[derive(Debug)]
pub struct ControlPlane {
    // outage.rs stops and restarts its processes (its own impl block).
    pub(crate) dir: PathBuf,
    kubeconfig: PathBuf,
}

pub(crate) static CONTROL_PLANE: OnceLock<ControlPlane> = OnceLock::new();
static NODE_CLUSTER: OnceLock<ControlPlane> = OnceLock::new();
static START_LOCK: Mutex<()> = Mutex::new(());

/// The repository root: the nearest ancestor holding `Cargo.lock` of the running test's package
/// (cargo sets `CARGO_MANIFEST_DIR` when it runs one), else of the working directory, else of this
/// crate as built. Read at run time first because two checkouts sharing one target directory
/// reuse each other's unchanged test executables, and a path baked in at build time would point
/// into the other checkout.
pub fn repo_root() -> PathBuf {
    let candidates = [
        std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from),
        std::env::current_dir().ok(),
        Some(PathBuf::from(env!("CARGO_MANIFEST_DIR"))),
    ];
    candidates
        .into_iter()
        .flatten()
        .find_map(|start| start.ancestors().find(|dir| dir.join("Cargo.lock").is_file()).map(Path::to_path_buf))
        .unwrap_or_default()
}

/// The control plane of this test run, started on first use, with Keyward's CRDs installed
/// and Established.
///
/// # Panics
/// When the control plane cannot be started: every end-to-end test needs it.
pub async fn control_plane() -> &'static ControlPlane {
    if let Some(cp) = CONTROL_PLANE.get() {
        return cp;
    }
    // Starting runs processes and waits; keep it off the async workers.
    let started = tokio::task::spawn_blocking(|| {
        let _guard = START_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        if CONTROL_PLANE.get().is_none() {
            let cp = ControlPlane::start_or_reuse();
            cp.install_crds();
            let _ = CONTROL_PLANE.set(cp);
        }
    })
    .await;
    if let Err(e) = started {
        std::panic::resume_unwind(e.into_panic());
    }
    CONTROL_PLANE.get().expect("control plane was just started")
}

/// The one-node cluster of this test run (`cluster.sh up` with `NODE=1`: a kubelet on
/// containerd, kube-scheduler, kube-proxy, CoreDNS), started on first use. Nothing is installed
/// in it: the installed tier installs Keyward with Helm. One node runs per machine, so only one
/// test binary may use it at a time.
///
/// # Panics
/// When not running as root (the kubelet and containerd need it), or when the node does not
/// become Ready.
pub async fn node_cluster() -> &'static ControlPlane {
    if let Some(cp) = NODE_CLUSTER.get() {
        return cp;
    }
    let started = tokio::task::spawn_blocking(|| {
        let _guard = START_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        if NODE_CLUSTER.get().is_none() {
            let _ = NODE_CLUSTER.set(ControlPlane::start("node", true));
        }
    })
    .await;
    if let Err(e) = started {
        std::panic::resume_unwind(e.into_panic());
    }
    NODE_CLUSTER.get().expect("node cluster was just started")
}

/// The host's address on the one-node cluster's Pod bridge (`node_ip` in
/// `e2e/scripts/node.sh`, read from there): what Pods reach the host at, so a store server a
/// Pod must reach listens there.
///
/// # Panics
/// When `node.sh` no longer sets `node_ip`.
pub fn node_ip() -> String {
    let script = std::fs::read_to_string(repo_root().join("e2e/scripts/node.sh")).expect("read e2e/scripts/node.sh");
    script
        .lines()
        .find_map(|l| l.strip_prefix("node_ip="))
        .map(|ip| ip.trim().to_string())
        .expect("e2e/scripts/node.sh sets node_ip=")
}

impl ControlPlane {
    fn start_or_reuse() -> ControlPlane {
        if let Ok(kubeconfig) = std::env::var("KEYWARD_TEST_KUBECONFIG") {
            let kubeconfig = PathBuf::from(kubeconfig);
            let dir = kubeconfig.parent().map(Path::to_path_buf).unwrap_or_default();
            return ControlPlane { dir, kubeconfig };
        }
        ControlPlane::start("test", false)
    }

    /// Runs `cluster.sh up` in a directory of its own; a watchdog stops it (and, for a node,
    /// restores the host) when this process exits.
    fn start(kind: &str, node: bool) -> ControlPlane {
        let base = std::env::var("KEYWARD_CACHE_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|_| std::env::temp_dir().join("keyward"));
        let dir = base.join("clusters").join(format!("{kind}-{}", std::process::id()));
        let mut cmd = Command::new("bash");
        cmd.arg(repo_root().join("e2e/scripts/cluster.sh"))
            .arg("up")
            .env("KEYWARD_CLUSTER_DIR", &dir)
            .env("KEYWARD_CLUSTER_OWNER", std::process::id().to_string());
        if node {
            cmd.env("NODE", "1");
        } else {
            cmd.env_remove("NODE");
        }
        let output = cmd.output().expect("run e2e/scripts/cluster.sh");
        assert!(
            output.status.success(),
            "starting the local {} failed:\n{}{}",
            if node { "one-node cluster" } else { "control plane" },
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        ControlPlane { kubeconfig: dir.join("kubeconfig"), dir }
    }

    fn install_crds(&self) {
        let crds = repo_root().join("crds/yaml");
        let out = self.kubectl().args(["apply", "--server-side", "--force-conflicts", "-f"]).arg(&crds).output();
        let out = out.expect("run kubectl");
        assert!(out.status.success(), "installing CRDs failed: {}", String::from_utf8_lossy(&out.stderr));
        let out = self
            .kubectl()
            .args(["wait", "--for", "condition=Established", "--timeout", "60s", "-f"])
            .arg(&crds)
            .output()
            .expect("run kubectl");
        assert!(out.status.success(), "CRDs did not become Established: {}", String::from_utf8_lossy(&out.stderr));
    }

    /// A new client for this control plane, as the admin user. Each call builds its own
    /// client, so it belongs to the calling test's runtime.
    pub async fn client(&self) -> kube::Client {
        let kubeconfig = kube::config::Kubeconfig::read_from(&self.kubeconfig).expect("read kubeconfig");
        let config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await.expect("kubeconfig is usable");
        kube::Client::try_from(config).expect("build client")
    }

    /// The admin kubeconfig.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// The data directory: `pki/` holds `ca.crt` and `ca.key` (the cluster CA, which also
    /// signs client certificates the API server accepts) and the process logs.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The cluster CA certificate and key (PEM paths).
    pub fn ca_files(&self) -> (PathBuf, PathBuf) {
        (self.dir.join("pki/ca.crt"), self.dir.join("pki/ca.key"))
    }

    /// The API server URL, `https://127.0.0.1:<port>`.
    pub fn server_url(&self) -> String {
        let port = std::fs::read_to_string(self.dir.join("api.port")).unwrap_or_default();
        format!("https://127.0.0.1:{}", port.trim())
    }

    /// `kubectl` pointed at this control plane.
    pub fn kubectl(&self) -> Command {
        let mut cmd = Command::new("kubectl");
        cmd.env("KUBECONFIG", &self.kubeconfig);
        cmd
    }

    /// The last `lines` lines of a control plane log (`kube-apiserver`, `etcd`, …).
    pub fn log_tail(&self, process: &str, lines: usize) -> String {
        process::tail(&self.dir.join(format!("{process}.log")), lines)
    }
}
