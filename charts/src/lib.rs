//! Support for the chart tests: the `helm` binary (built from its Go module by
//! `e2e/scripts/build-tools.sh`, cached), `helm` commands pointed at a cluster with a private
//! Helm home, the test values of an installed release, and real cert-manager
//! ([`cert_manager()`]: its CRDs, controller and CA injector).

mod cert_manager;

pub mod installed;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use keyward_e2e::repo_root;

pub use cert_manager::{CertManager, CertManagerOptions, cert_manager, cert_manager_crds, install_cert_manager_crds};

/// The directory holding `helm`, `cert-manager-crds/`, `cert-manager-controller` and
/// `cert-manager-cainjector`, built on first use.
///
/// # Panics
/// When the tools cannot be built: every chart test needs them.
pub fn tools_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let out = Command::new("bash")
            .arg(repo_root().join("e2e/scripts/build-tools.sh"))
            .output()
            .expect("run e2e/scripts/build-tools.sh");
        assert!(out.status.success(), "building the tools failed:\n{}", String::from_utf8_lossy(&out.stderr));
        PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
    })
}

/// The chart's directory.
pub fn chart_dir() -> PathBuf {
    repo_root().join("charts/keyward")
}

/// `helm` with `KUBECONFIG` set and its config, cache and data in a private directory.
pub fn helm(kubeconfig: &Path) -> Command {
    static HOME: OnceLock<PathBuf> = OnceLock::new();
    let home = HOME.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("keyward-helm-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("helm home");
        dir
    });
    let mut cmd = Command::new(tools_dir().join("helm"));
    cmd.env("KUBECONFIG", kubeconfig)
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_DATA_HOME", home.join("data"));
    cmd
}

/// Runs `cmd`, returns stdout; panics with stdout and stderr when it fails.
pub fn run(mut cmd: Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("run {cmd:?}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{cmd:?} failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    stdout
}

/// Runs `cmd` expecting failure; returns stdout and stderr.
pub fn run_fails(mut cmd: Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("run {cmd:?}: {e}"));
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!out.status.success(), "{cmd:?} should have failed:\n{text}");
    text
}

/// Values that keep an installed release from intercepting other tests' objects: no Pod of the
/// chart runs on the local control plane, so a `failurePolicy: Fail` webhook would refuse
/// everything it selects. The Kubernetes (default) and Fake providers are enabled. The shared control plane has Keyward's
/// CRDs already, owned by no release, so the chart does not install them.
pub fn test_values(fullname: &str, cert_manager: bool) -> String {
    format!(
        r#"fullnameOverride: {fullname}
crds:
  install: false
certManager:
  enabled: {cert_manager}
webhook:
  namespaceSelector:
    matchLabels: {{keyward.dev/chart-test: never}}
  objectSelector:
    matchLabels: {{keyward.dev/chart-test: never}}
providers:
  fake:
    enabled: true
"#
    )
}

/// Writes `text` to `dir/name`; returns the path.
pub fn write_values(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write values");
    path
}

/// `helm install release` of the chart into `ns` with a values file; asserts it deployed.
pub fn helm_install(kubeconfig: &Path, release: &str, ns: &str, values: &Path) {
    let mut cmd = helm(kubeconfig);
    cmd.args(["install", release]).arg(chart_dir()).args(["-n", ns, "-f"]).arg(values);
    let out = run(cmd);
    assert!(out.contains("STATUS: deployed"), "helm install output:\n{out}");
}

/// `helm uninstall release -n ns`.
pub fn helm_uninstall(kubeconfig: &Path, release: &str, ns: &str) {
    let mut cmd = helm(kubeconfig);
    cmd.args(["uninstall", release, "-n", ns]);
    run(cmd);
}
