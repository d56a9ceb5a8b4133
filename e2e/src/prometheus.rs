//! A throwaway Prometheus on loopback (Debian's `prometheus` package, installed by
//! `e2e/scripts/install-prometheus.sh`) that scrapes fixed targets every second, and its HTTP
//! query API: what a dashboard's queries are checked against. Stops when dropped.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::stores::cached_tool;
use crate::{ChildProcess, free_port, spawn_logged};

/// How often Prometheus scrapes: short, so a test waits seconds for its samples.
pub const SCRAPE_INTERVAL: Duration = Duration::from_secs(1);

/// A Prometheus process with its configuration and data in a temporary directory.
pub struct Prometheus {
    process: ChildProcess,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    /// Installs Prometheus (first run, as root) and starts it scraping `/metrics` of every
    /// `(job, host:port)` target; returns once it answers `/-/ready`.
    ///
    /// # Panics
    /// When Prometheus cannot be installed, configured or started.
    pub fn start(targets: &[(&str, String)]) -> Prometheus {
        let bin = cached_tool("install-prometheus.sh").join("prometheus");
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("temp dir for prometheus: {e}"));
        let secs = SCRAPE_INTERVAL.as_secs();
        let mut config = format!(
            "global:\n  scrape_interval: {secs}s\n  scrape_timeout: {secs}s\n  evaluation_interval: {secs}s\nscrape_configs:\n"
        );
        for (job, target) in targets {
            config.push_str(&format!(
                "  - job_name: {job}\n    metrics_path: /metrics\n    static_configs:\n      - targets: ['{target}']\n"
            ));
        }
        let config_file = dir.path().join("prometheus.yml");
        std::fs::write(&config_file, config).unwrap_or_else(|e| panic!("write {}: {e}", config_file.display()));
        let port = free_port();
        let mut cmd = Command::new(bin);
        cmd.arg(format!("--config.file={}", config_file.display()))
            .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--log.level=warn");
        let mut process = spawn_logged("prometheus", cmd);
        let start = Instant::now();
        loop {
            if curl(&[&format!("http://127.0.0.1:{port}/-/ready")]).is_ok() {
                break;
            }
            assert!(process.is_running(), "prometheus exited:\n{}", process.log());
            assert!(start.elapsed() < Duration::from_secs(60), "prometheus not ready within 60s:\n{}", process.log());
            std::thread::sleep(Duration::from_millis(100));
        }
        Prometheus { process, port, _dir: dir }
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The result of an instant query (`/api/v1/query`): one element per series, or why the
    /// query failed (Prometheus' error for a query it cannot parse or evaluate).
    pub fn query(&self, expr: &str) -> Result<Vec<Value>, String> {
        let url = format!("{}/api/v1/query", self.url());
        // Without --fail: a query Prometheus refuses is answered 400 with the reason as JSON.
        let body = curl(&["--no-fail", "-G", "--data-urlencode", &format!("query={expr}"), &url])?;
        let answer: Value = serde_json::from_str(&body).map_err(|e| format!("not JSON ({e}): {body}"))?;
        if answer["status"] != "success" {
            return Err(format!("{}: {}", answer["errorType"], answer["error"]));
        }
        Ok(answer["data"]["result"].as_array().cloned().unwrap_or_default())
    }

    /// Waits until the last scrape of every target of `jobs` succeeded (`up == 1`).
    ///
    /// # Panics
    /// After `timeout`, naming the targets that are not up and their last scrape error.
    pub fn wait_for_targets(&mut self, jobs: &[&str], timeout: Duration) {
        let start = Instant::now();
        loop {
            let down: Vec<&str> = jobs
                .iter()
                .copied()
                .filter(|job| {
                    let up = self.query(&format!("up{{job=\"{job}\"}} == 1"));
                    !up.is_ok_and(|r| !r.is_empty())
                })
                .collect();
            if down.is_empty() {
                return;
            }
            assert!(self.process.is_running(), "prometheus exited:\n{}", self.process.log());
            if start.elapsed() > timeout {
                let targets = curl(&[&format!("{}/api/v1/targets", self.url())]).unwrap_or_default();
                panic!("targets {down:?} not scraped within {timeout:?}; Prometheus' targets: {targets}");
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// The process (for its log).
    pub fn process(&self) -> &ChildProcess {
        &self.process
    }
}

/// `curl -sSf ARGS` (`--no-fail` in ARGS keeps the body of an HTTP error): the body, or curl's
/// error.
fn curl(args: &[&str]) -> Result<String, String> {
    let out = Command::new("curl").args(["-sSf", "--max-time", "10"]).args(args).output();
    let out = out.map_err(|e| format!("run curl: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!("curl {args:?}: {}", String::from_utf8_lossy(&out.stderr).trim()))
    }
}
