//! Child processes for tests (Keyward binaries, providers): logs go to a file, a failing test
//! prints their tail, and dropping the handle stops the process.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::repo_root;

/// Test ports come from here: below the kernel's ephemeral range (32768–60999), where every
/// outgoing connection takes its local port, and below the NodePort range (30000–32767). A
/// port found free by binding port 0 lies in the ephemeral range, and any connection opened
/// before the test's server binds it can take it ("Address already in use").
const TEST_PORTS: std::ops::Range<u32> = 20_000..30_000;
static NEXT_PORT: AtomicU32 = AtomicU32::new(0);

/// A free TCP port on 127.0.0.1.
pub fn free_port() -> u16 {
    free_ports(1)
}

/// The first of `n` consecutive free TCP ports on 127.0.0.1. Tests of one binary take turns
/// through a counter; the process id spreads test binaries running at once apart.
pub fn free_ports(n: u16) -> u16 {
    for _ in TEST_PORTS {
        let first = test_port(NEXT_PORT.fetch_add(u32::from(n), Ordering::SeqCst));
        let ports = first..first + u32::from(n);
        if ports.end <= TEST_PORTS.end
            && ports.clone().all(|p| std::net::TcpListener::bind(("127.0.0.1", p as u16)).is_ok())
        {
            return first as u16;
        }
    }
    panic!("no {n} consecutive free loopback ports in {TEST_PORTS:?}");
}

/// The `step`th port of this process's walk through [`TEST_PORTS`].
fn test_port(step: u32) -> u32 {
    let span = TEST_PORTS.end - TEST_PORTS.start;
    TEST_PORTS.start + (std::process::id().wrapping_mul(7_919).wrapping_add(step)) % span
}

static BUILT: Mutex<Option<HashMap<String, PathBuf>>> = Mutex::new(None);

/// Path of a workspace binary (`keyward-provider-fake`, …). The first call builds every
/// binary of the workspace with the same feature set as `make test` (`--workspace
/// --all-features`), so nothing is rebuilt with other features and the call is a no-op when
/// `make test` built them already.
pub fn workspace_binary(name: &str) -> PathBuf {
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    let built = built.get_or_insert_with(HashMap::new);
    if let Some(path) = built.get(name) {
        return path.clone();
    }
    let mut build = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    build.current_dir(repo_root()).args(["build", "--quiet", "--workspace", "--bins", "--all-features"]);
    // Cargo gives a test process the variables of its own package (CARGO_MANIFEST_DIR, …). A
    // build script that reruns when one changes (ring's reads CARGO_MANIFEST_DIR) would then
    // see them change from the plain `cargo build`, and the first test binary of each package
    // would rebuild ring, rustls, kube and every binary (about a minute each).
    for (key, _) in std::env::vars_os() {
        if key.to_str().is_some_and(is_package_variable) {
            build.env_remove(&key);
        }
    }
    let status = build.status().expect("run cargo build");
    assert!(status.success(), "cargo build --workspace --bins failed");
    let target = std::env::var("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|_| repo_root().join("target"));
    let path = target.join("debug").join(name);
    assert!(path.exists(), "{} is not a binary of this workspace", path.display());
    built.insert(name.to_string(), path.clone());
    path
}

/// Whether cargo sets `key` for the package a test belongs to (not for the build as a whole,
/// as CARGO_TARGET_DIR or CARGO_HOME are).
fn is_package_variable(key: &str) -> bool {
    const PREFIXES: [&str; 3] = ["CARGO_PKG_", "CARGO_BIN_EXE_", "CARGO_CFG_"];
    const NAMES: [&str; 7] = [
        "CARGO_MANIFEST_DIR",
        "CARGO_MANIFEST_PATH",
        "CARGO_MANIFEST_LINKS",
        "CARGO_CRATE_NAME",
        "CARGO_BIN_NAME",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_TARGET_TMPDIR",
    ];
    NAMES.contains(&key) || key == "OUT_DIR" || PREFIXES.iter().any(|p| key.starts_with(p))
}

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A running child process whose output goes to a log file.
#[derive(Debug)]
pub struct ChildProcess {
    name: String,
    child: Child,
    log: PathBuf,
}

/// Starts `cmd` with stdout and stderr appended to a log file named after `name`.
pub fn spawn_logged(name: &str, mut cmd: Command) -> ChildProcess {
    let dir = std::env::temp_dir().join("keyward-test-logs");
    std::fs::create_dir_all(&dir).expect("create log dir");
    let n = COUNTER.fetch_add(1, Ordering::SeqCst);
    let log = dir.join(format!("{name}-{}-{n}.log", std::process::id()));
    // anyhow prints a backtrace after a fatal error when RUST_BACKTRACE is set (the test run
    // sets it); the log tail a failing test prints would then show frames instead of the error.
    if !cmd.get_envs().any(|(k, _)| k == "RUST_LIB_BACKTRACE") {
        cmd.env("RUST_LIB_BACKTRACE", "0");
    }
    let out = std::fs::File::create(&log).expect("create log file");
    let err = out.try_clone().expect("clone log file");
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(err))
        .spawn()
        .unwrap_or_else(|e| panic!("start {name}: {e}"));
    ChildProcess { name: name.to_string(), child, log }
}

impl ChildProcess {
    /// Process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Everything the process logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Path of the log file.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// Waits until the log contains `needle`; panics with the log tail after `timeout`.
    pub async fn wait_for_log(&mut self, needle: &str, timeout: Duration) {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if self.log().contains(needle) {
                return;
            }
            assert!(self.is_running(), "{} exited before logging {needle:?}:\n{}", self.name, tail(&self.log, 30));
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("{} did not log {needle:?} within {timeout:?}:\n{}", self.name, tail(&self.log, 30));
    }

    /// Sends SIGTERM without waiting.
    pub fn signal_terminate(&self) {
        let _ = Command::new("kill").arg("-TERM").arg(self.pid().to_string()).status();
    }

    /// Sends SIGTERM and waits up to `timeout` for a graceful exit; returns the exit status
    /// (`None` if it had to be killed).
    pub fn terminate(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        self.signal_terminate();
        let start = Instant::now();
        while start.elapsed() < timeout {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        None
    }
}

impl Drop for ChildProcess {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("--- last lines of {} ({}):\n{}", self.name, self.log.display(), tail(&self.log, 40));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The last `lines` lines of a file.
pub(crate) fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| format!("<cannot read {}: {e}>", path.display()));
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// The environment variable of every provider's `--tenant-denied-networks`.
pub const TENANT_DENIED_NETWORKS_ENV: &str = "KEYWARD_TENANT_DENIED_NETWORKS";

/// What providers started by local tests deny to tenants' configurations: the provider's default
/// list (`keyward_provider_runtime::netguard::DEFAULT_TENANT_DENIED_NETWORKS`, checked there) but
/// not loopback, where the local control plane and the store servers listen. Tests of the
/// loopback refusal set the provider's default list themselves.
pub const LOCAL_DENIED_NETWORKS: &str =
    "own-addresses,169.254.0.0/16,fe80::/10,fd00:ec2::/64,100.100.100.200/32,168.63.129.16/32";

/// A provider binary started as a process on free loopback ports with the TLS directory
/// `tls_dir`, the local control plane's kubeconfig and `env`; returns once it logged
/// `provider serving`, with its gRPC and health addresses.
pub async fn spawn_provider(
    binary: &str,
    tls_dir: &Path,
    env: &[(&str, &str)],
) -> (ChildProcess, std::net::SocketAddr, std::net::SocketAddr) {
    spawn_provider_with(binary, tls_dir, env, &[]).await
}

/// [`spawn_provider`] with extra command-line flags (`--log-format json` in place of the
/// default text logs, say).
pub async fn spawn_provider_with(
    binary: &str,
    tls_dir: &Path,
    env: &[(&str, &str)],
    args: &[&str],
) -> (ChildProcess, std::net::SocketAddr, std::net::SocketAddr) {
    let cp = crate::control_plane().await;
    let grpc: std::net::SocketAddr = ([127, 0, 0, 1], free_port()).into();
    let health: std::net::SocketAddr = ([127, 0, 0, 1], free_port()).into();
    let mut cmd = Command::new(workspace_binary(binary));
    cmd.arg("--listen")
        .arg(grpc.to_string())
        .arg("--health-listen")
        .arg(health.to_string())
        .arg("--tls-dir")
        .arg(tls_dir)
        .env("KUBECONFIG", cp.kubeconfig())
        // The stores of local tests listen on loopback; a caller's env may set another list.
        .env(TENANT_DENIED_NETWORKS_ENV, LOCAL_DENIED_NETWORKS);
    // A flag may be given once: text logs unless the caller chose a format.
    if !args.contains(&"--log-format") {
        cmd.args(["--log-format", "text"]);
    }
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = spawn_logged(binary, cmd);
    child.wait_for_log("provider serving", Duration::from_secs(60)).await;
    (child, grpc, health)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_ports_are_distinct_free_and_outside_the_ephemeral_range() {
        let a = free_ports(2);
        let b = free_port();
        assert!(TEST_PORTS.contains(&u32::from(a)) && TEST_PORTS.contains(&u32::from(b)), "{a} {b}");
        assert!(b != a && b != a + 1, "a port handed out twice: {a}, {a}+1, {b}");
        // Hold the port the counter hands out next: it must be skipped.
        let next = test_port(NEXT_PORT.load(Ordering::SeqCst)) as u16;
        let held = std::net::TcpListener::bind(("127.0.0.1", next)).expect("the next port is free");
        assert_ne!(free_port(), next, "a port in use is skipped");
        drop(held);
    }

    #[test]
    fn a_nested_build_drops_the_test_package_variables_only() {
        for key in
            ["CARGO_MANIFEST_DIR", "CARGO_PKG_NAME", "CARGO_BIN_EXE_keyward-webhook", "CARGO_CRATE_NAME", "OUT_DIR"]
        {
            assert!(is_package_variable(key), "{key}");
        }
        for key in ["CARGO", "CARGO_TARGET_DIR", "CARGO_HOME", "CARGO_INCREMENTAL", "CARGO_BUILD_JOBS", "PATH"] {
            assert!(!is_package_variable(key), "{key}");
        }
    }
}
