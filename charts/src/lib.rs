//! Support for the chart tests: the `helm` binary (built from its Go module by
//! `e2e/scripts/build-tools.sh`, cached), cert-manager's CRDs, and `helm` commands pointed at
//! the local control plane with a private Helm home.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use keyward_e2e::repo_root;

/// The directory holding `helm` and `cert-manager-crds/`, built on first use.
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
        assert!(out.status.success(), "building helm failed:\n{}", String::from_utf8_lossy(&out.stderr));
        PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
    })
}

/// The chart's directory.
pub fn chart_dir() -> PathBuf {
    repo_root().join("charts/keyward")
}

/// cert-manager's CRDs (from its Go module).
pub fn cert_manager_crds() -> PathBuf {
    tools_dir().join("cert-manager-crds")
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
