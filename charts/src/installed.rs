//! Support for the installed tier: Keyward's image built and imported into the one-node
//! cluster, `helm` against it, `kubectl` with manifests on stdin, polling, and a stream of
//! admission requests that counts every failed review.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use keyward_e2e::{ControlPlane, repo_root};

/// Builds the image (`image/build.sh`, release binaries, cached by Cargo) once per test process
/// and imports it into the node of `cluster`; returns the image reference.
///
/// # Panics
/// When the build or the import fails.
pub fn image(cluster: &ControlPlane) -> &'static str {
    static IMAGE: OnceLock<String> = OnceLock::new();
    IMAGE.get_or_init(|| {
        // With the environment a shell has, not the one `cargo test` gives its tests: Cargo's
        // variables in it would make the nested release build start over.
        let keep = ["PATH", "HOME", "CARGO_HOME", "RUSTUP_HOME", "CARGO_TARGET_DIR", "KEYWARD_CACHE_DIR"];
        let out = Command::new("bash")
            .arg(repo_root().join("image/build.sh"))
            .env_clear()
            .envs(std::env::vars().filter(|(k, _)| keep.contains(&k.as_str())))
            .env("KEYWARD_CLUSTER_DIR", cluster.dir())
            .stderr(Stdio::inherit())
            .output()
            .expect("run image/build.sh");
        assert!(out.status.success(), "building the image failed");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    })
}

/// `kubectl` against `kubeconfig`.
pub fn kubectl(kubeconfig: &Path) -> Command {
    let mut cmd = Command::new("kubectl");
    cmd.env("KUBECONFIG", kubeconfig);
    cmd
}

/// Runs `kubectl args…` with `input` on stdin; success and combined output.
pub fn kubectl_input(kubeconfig: &Path, args: &[&str], input: &str) -> (bool, String) {
    let mut child = kubectl(kubeconfig)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run kubectl");
    child.stdin.take().expect("stdin").write_all(input.as_bytes()).expect("write manifest");
    let out = child.wait_with_output().expect("kubectl finishes");
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

/// `kubectl apply -f -`, which must succeed; returns the output. Right after an install the API
/// server can reach the webhook's Service before the node routes it to the Ready Pods
/// ("connection refused"): that, and only that, is retried for up to a minute, as a user would.
pub fn apply(kubeconfig: &Path, manifest: &str) -> String {
    let mut tries = 30;
    loop {
        let (ok, out) = kubectl_input(kubeconfig, &["apply", "-f", "-"], manifest);
        if ok {
            return out;
        }
        tries -= 1;
        let unrouted = out.contains("failed calling webhook") && out.contains("connection refused");
        assert!(unrouted && tries > 0, "kubectl apply failed:\n{out}\n---\n{manifest}");
        std::thread::sleep(std::time::Duration::from_secs(2));
    }
}

/// Polls `check` every half second until it returns `Some`, or panics after `timeout` with
/// `what` and the last thing `describe` says about the state.
pub async fn eventually<T>(
    what: &str,
    timeout: Duration,
    mut check: impl FnMut() -> Option<T>,
    describe: impl Fn() -> String,
) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(start.elapsed() < timeout, "{what}: not within {timeout:?}\n{}", describe());
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// A background stream of server-side dry-run applies of one manifest that Keyward's webhook
/// admits: every one must pass through the webhook and be allowed.
pub struct AdmissionStream {
    stop: Arc<AtomicBool>,
    failures: Arc<Mutex<Vec<String>>>,
    thread: Option<JoinHandle<usize>>,
}

impl AdmissionStream {
    /// Starts applying `manifest` back to back.
    pub fn start(kubeconfig: &Path, manifest: &str) -> AdmissionStream {
        let stop = Arc::new(AtomicBool::new(false));
        let failures = Arc::new(Mutex::new(Vec::new()));
        let (kubeconfig, manifest): (PathBuf, String) = (kubeconfig.to_path_buf(), manifest.to_string());
        let thread = {
            let (stop, failures) = (stop.clone(), failures.clone());
            std::thread::spawn(move || {
                let mut sent = 0;
                while !stop.load(Ordering::SeqCst) {
                    let (ok, out) = kubectl_input(
                        &kubeconfig,
                        &["apply", "--dry-run=server", "-f", "-", "--request-timeout=30s"],
                        &manifest,
                    );
                    sent += 1;
                    if !ok {
                        failures.lock().unwrap_or_else(|e| e.into_inner()).push(out);
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
                sent
            })
        };
        AdmissionStream { stop, failures, thread: Some(thread) }
    }

    /// Stops the stream; returns how many requests were sent and the failed ones' output.
    pub fn finish(mut self) -> (usize, Vec<String>) {
        self.stop.store(true, Ordering::SeqCst);
        let sent = self.thread.take().map(|t| t.join().unwrap_or(0)).unwrap_or(0);
        let failures = std::mem::take(&mut *self.failures.lock().unwrap_or_else(|e| e.into_inner()));
        (sent, failures)
    }
}

impl Drop for AdmissionStream {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// SHA-256 of `value`, hex: what the probe workload logs instead of a value.
pub fn sha256_hex(value: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(value.as_bytes()))
}
