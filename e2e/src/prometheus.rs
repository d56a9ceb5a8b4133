//! A throwaway Prometheus on loopback (Debian's `prometheus` package, installed by
//! `e2e/scripts/install-prometheus.sh`) that scrapes every second, and its HTTP query API: what
//! a dashboard's queries are checked against. Stops when dropped.
//!
//! It scrapes fixed targets ([`Prometheus::start`]), or what a ServiceMonitor selects, found
//! through the API server and labelled as the prometheus-operator's generated configuration
//! labels it ([`service_monitor_scrape_config`]).

use std::path::Path;
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
        let jobs: Vec<Value> = targets
            .iter()
            .map(|(job, target)| {
                serde_json::json!({"job_name": job, "metrics_path": "/metrics", "static_configs": [{"targets": [target]}]})
            })
            .collect();
        Prometheus::start_with(&jobs)
    }

    /// Installs Prometheus (first run, as root) and starts it with these `scrape_configs`
    /// (JSON is YAML); returns once it answers `/-/ready`.
    ///
    /// # Panics
    /// When Prometheus cannot be installed, configured or started.
    pub fn start_with(scrape_configs: &[Value]) -> Prometheus {
        let bin = cached_tool("install-prometheus.sh").join("prometheus");
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("temp dir for prometheus: {e}"));
        let secs = SCRAPE_INTERVAL.as_secs();
        let config = serde_json::json!({
            "global": {"scrape_interval": format!("{secs}s"), "scrape_timeout": format!("{secs}s"),
                       "evaluation_interval": format!("{secs}s")},
            "scrape_configs": scrape_configs,
        })
        .to_string();
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

/// The scrape configuration the prometheus-operator generates for endpoint `index` of
/// `service_monitor` (as the chart renders it): the same job name, `honor_labels`, Service
/// selection and port filter, and the same target labels (`namespace`, `service`, `pod`,
/// `container`, `job`, `endpoint`), then the monitor's own relabelings. Targets come from
/// `targets_file`, written by [`endpointslice_targets`] from the Services and EndpointSlices the
/// API server holds: Debian's Prometheus is built without Kubernetes discovery, so the test
/// discovers and hands Prometheus the labels its `endpointslice` role would. Two more things
/// differ, both outside the labels a query sees: every scrape happens each [`SCRAPE_INTERVAL`],
/// and `rewrite_address` (a regex and its replacement) is applied to `__address__` last — the
/// API server refuses loopback addresses in an EndpointSlice, while the processes under test
/// listen on loopback.
///
/// # Panics
/// When the ServiceMonitor has no such endpoint, or uses selectors beyond `matchLabels`.
pub fn service_monitor_scrape_config(
    service_monitor: &Value,
    index: usize,
    targets_file: &Path,
    rewrite_address: (&str, &str),
) -> Value {
    let (ns, name) = (&service_monitor["metadata"]["namespace"], &service_monitor["metadata"]["name"]);
    let spec = &service_monitor["spec"];
    let endpoint = &spec["endpoints"][index];
    assert!(endpoint.is_object(), "ServiceMonitor {name} has no endpoint {index}");
    assert!(spec["selector"].get("matchExpressions").is_none(), "matchExpressions are not translated here");
    let mut relabel = vec![serde_json::json!({"source_labels": ["job"], "target_label": "__tmp_prometheus_job_name"})];
    let mut selector: Vec<(&String, &Value)> =
        spec["selector"]["matchLabels"].as_object().into_iter().flatten().collect();
    selector.sort_by_key(|(k, _)| *k);
    for (k, v) in selector {
        relabel.push(serde_json::json!({"action": "keep",
            "source_labels": [format!("__meta_kubernetes_service_label_{}", label(k)),
                              format!("__meta_kubernetes_service_labelpresent_{}", label(k))],
            "regex": format!("({});true", v.as_str().unwrap_or_default())}));
    }
    let port = endpoint["port"].as_str().expect("the chart's endpoints name their port");
    relabel.push(serde_json::json!({"action": "keep", "source_labels": ["__meta_kubernetes_endpointslice_port_name"], "regex": port}));
    let target =
        ["__meta_kubernetes_endpointslice_address_target_kind", "__meta_kubernetes_endpointslice_address_target_name"];
    relabel.extend([
        serde_json::json!({"source_labels": target, "separator": ";", "regex": "Node;(.*)", "replacement": "${1}", "target_label": "node"}),
        serde_json::json!({"source_labels": target, "separator": ";", "regex": "Pod;(.*)", "replacement": "${1}", "target_label": "pod"}),
        serde_json::json!({"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"}),
        serde_json::json!({"source_labels": ["__meta_kubernetes_service_name"], "target_label": "service"}),
        serde_json::json!({"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"}),
        serde_json::json!({"source_labels": ["__meta_kubernetes_pod_container_name"], "target_label": "container"}),
        serde_json::json!({"action": "drop", "source_labels": ["__meta_kubernetes_pod_phase"], "regex": "(Failed|Succeeded)"}),
        serde_json::json!({"source_labels": ["__meta_kubernetes_service_name"], "target_label": "job", "replacement": "${1}"}),
        serde_json::json!({"target_label": "endpoint", "replacement": port}),
    ]);
    // The monitor's own relabelings, written in the CRD's camelCase.
    for r in endpoint["relabelings"].as_array().into_iter().flatten() {
        let mut out = serde_json::Map::new();
        for (k, v) in r.as_object().into_iter().flatten() {
            let snake: String = k
                .chars()
                .flat_map(|c| if c.is_ascii_uppercase() { vec!['_', c.to_ascii_lowercase()] } else { vec![c] })
                .collect();
            out.insert(snake, v.clone());
        }
        relabel.push(Value::Object(out));
    }
    relabel.push(serde_json::json!({"source_labels": ["__address__"], "regex": rewrite_address.0,
                                    "replacement": rewrite_address.1, "target_label": "__address__"}));
    serde_json::json!({
        "job_name": format!("serviceMonitor/{}/{}/{index}", ns.as_str().unwrap_or_default(), name.as_str().unwrap_or_default()),
        "honor_labels": endpoint["honorLabels"].as_bool().unwrap_or(false),
        "metrics_path": endpoint["path"].as_str().unwrap_or("/metrics"),
        "file_sd_configs": [{"files": [targets_file.display().to_string()]}],
        "relabel_configs": relabel,
    })
}

/// Target groups (`file_sd` format) with the labels Prometheus' Kubernetes discovery gives an
/// `endpointslice` target: one per endpoint address and port of each EndpointSlice of `slices`
/// whose Service (`kubernetes.io/service-name`) is in `services`, in the namespaces the
/// operator's discovery for `service_monitor` watches (its `namespaceSelector.matchNames`).
pub fn endpointslice_targets(service_monitor: &Value, services: &[Value], slices: &[Value]) -> Value {
    let watched = &service_monitor["spec"]["namespaceSelector"]["matchNames"];
    let watched: Vec<&Value> = watched.as_array().into_iter().flatten().collect();
    let mut groups = Vec::new();
    for slice in slices.iter().filter(|s| watched.contains(&&s["metadata"]["namespace"])) {
        let service_name = &slice["metadata"]["labels"]["kubernetes.io/service-name"];
        let Some(service) = services.iter().find(|s| &s["metadata"]["name"] == service_name) else { continue };
        let mut common = serde_json::Map::new();
        let mut put = |k: String, v: &Value| {
            common.insert(k, Value::String(v.as_str().unwrap_or_default().to_string()));
        };
        put("__meta_kubernetes_namespace".into(), &slice["metadata"]["namespace"]);
        put("__meta_kubernetes_endpointslice_name".into(), &slice["metadata"]["name"]);
        put("__meta_kubernetes_endpointslice_address_type".into(), &slice["addressType"]);
        put("__meta_kubernetes_service_name".into(), &service["metadata"]["name"]);
        for (k, v) in service["metadata"]["labels"].as_object().into_iter().flatten() {
            put(format!("__meta_kubernetes_service_label_{}", label(k)), v);
            put(format!("__meta_kubernetes_service_labelpresent_{}", label(k)), &Value::from("true"));
        }
        for endpoint in slice["endpoints"].as_array().into_iter().flatten() {
            for port in slice["ports"].as_array().into_iter().flatten() {
                let mut labels = common.clone();
                let mut put = |k: &str, v: String| {
                    labels.insert(k.into(), Value::String(v));
                };
                put("__meta_kubernetes_endpointslice_port_name", port["name"].as_str().unwrap_or_default().into());
                put("__meta_kubernetes_endpointslice_port_protocol", port["protocol"].as_str().unwrap_or("TCP").into());
                let ready = endpoint["conditions"]["ready"].as_bool().unwrap_or(true);
                put("__meta_kubernetes_endpointslice_endpoint_conditions_ready", ready.to_string());
                let targets: Vec<String> = endpoint["addresses"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .map(|a| format!("{a}:{}", port["port"]))
                    .collect();
                groups.push(serde_json::json!({"targets": targets, "labels": labels}));
            }
        }
    }
    Value::Array(groups)
}

/// A Kubernetes label key as Prometheus' discovery writes it into a meta label's name.
fn label(key: &str) -> String {
    key.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect()
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
