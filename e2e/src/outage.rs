//! Outages of the control plane itself: stop a test's own kube-apiserver (or etcd) and start it
//! again with the same command line, data and port, as a restart in a real cluster would.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::ControlPlane;

/// A control plane process that was stopped; [`Stopped::start`] brings it back.
#[derive(Debug)]
pub struct Stopped {
    name: String,
    dir: PathBuf,
    cmdline: Vec<OsString>,
}

fn pid_of(dir: &std::path::Path, name: &str) -> u32 {
    let text = std::fs::read_to_string(dir.join(format!("{name}.pid")))
        .unwrap_or_else(|e| panic!("no pid file for {name} in {}: {e}", dir.display()));
    text.trim().parse().unwrap_or_else(|e| panic!("pid file of {name}: {e}"))
}

fn alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default().contains(") Z ")
}

impl ControlPlane {
    /// Stops `name` (`kube-apiserver` or `etcd`) of this test binary's own control plane:
    /// SIGTERM to its process group, SIGKILL after 10 s.
    ///
    /// # Panics
    /// When the control plane is shared (`KEYWARD_TEST_KUBECONFIG`): stopping it would break
    /// every other test using it, so an outage test needs its own.
    pub fn stop_process(&self, name: &str) -> Stopped {
        let owner = std::fs::read_to_string(self.dir.join("owner")).unwrap_or_default();
        assert_eq!(
            owner.trim(),
            std::process::id().to_string(),
            "stopping {name} needs this test binary's own control plane (unset KEYWARD_TEST_KUBECONFIG)"
        );
        let pid = pid_of(&self.dir, name);
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_else(|e| panic!("{name}: {e}"));
        let cmdline: Vec<OsString> =
            cmdline.split(|b| *b == 0).filter(|a| !a.is_empty()).map(|a| OsString::from_vec(a.to_vec())).collect();
        let _ = Command::new("kill").args(["-TERM", "--", &format!("-{pid}")]).status();
        let start = Instant::now();
        while alive(pid) && start.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(50));
        }
        if alive(pid) {
            let _ = Command::new("kill").args(["-KILL", "--", &format!("-{pid}")]).status();
        }
        Stopped { name: name.to_string(), dir: self.dir.clone(), cmdline }
    }
}

impl Stopped {
    /// Starts the process again (own session, log appended, pid file updated so `cluster.sh
    /// down` stops it); for the API server, waits until it answers `/readyz`.
    ///
    /// # Panics
    /// When it cannot be started or the API server is not ready within 60 s.
    pub fn start(self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(format!("{}.log", self.name)))
            .expect("open the process log");
        let err = log.try_clone().expect("clone log file");
        let child = Command::new("setsid")
            .args(&self.cmdline)
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(err))
            .spawn()
            .unwrap_or_else(|e| panic!("restart {}: {e}", self.name));
        std::fs::write(self.dir.join(format!("{}.pid", self.name)), child.id().to_string()).expect("write pid file");
        // Stopped by the watchdog's `cluster.sh down` through the pid file, like the first one.
        drop(child);
        if self.name != "kube-apiserver" {
            return;
        }
        let port = std::fs::read_to_string(self.dir.join("api.port")).unwrap_or_default();
        let pki = self.dir.join("pki");
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(60) {
            let ok = Command::new("curl")
                .arg("-fsS")
                .arg("--cacert")
                .arg(pki.join("ca.crt"))
                .arg("--cert")
                .arg(pki.join("admin.crt"))
                .arg("--key")
                .arg(pki.join("admin.key"))
                .arg(format!("https://127.0.0.1:{}/readyz", port.trim()))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if ok {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        panic!(
            "kube-apiserver did not become ready again:\n{}",
            crate::process::tail(&self.dir.join("kube-apiserver.log"), 30)
        );
    }
}
