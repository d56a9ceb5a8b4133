//! GetSecret round trip over one pooled mTLS connection to a `keyward-provider-fake` process
//! (release build) serving a Fake object from the local control plane: p50 and p99 in
//! microseconds, and the provider's resident memory after the calls.
//!
//! `KEYWARD_BENCH_CALLS` changes the number of measured calls (default 10,000).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use keyward_crds::Fake;
use keyward_e2e::{control_plane, free_port, repo_root, spawn_logged, with_temp_namespace};
use keyward_proto::v1::{ExternalSecretDataRemoteRef, GetSecretRequest};
use keyward_provider_runtime::testkit::{TestPki, connect, provider_ref, wait_ready};
use kube::Api;
use kube::api::PostParams;

const WARMUP: usize = 500;

fn release_binary(name: &str) -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(repo_root())
        .args(["build", "--release", "--quiet", "--bin", name])
        .status()
        .expect("run cargo build");
    assert!(status.success(), "cargo build --release --bin {name} failed");
    let target = std::env::var("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|_| repo_root().join("target"));
    target.join("release").join(name)
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx].as_secs_f64() * 1e6
}

#[tokio::main]
async fn main() {
    keyward_provider_runtime::install_crypto_provider();
    let calls: usize = std::env::var("KEYWARD_BENCH_CALLS").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000);
    let binary = release_binary("keyward-provider-fake");
    let cp = control_plane().await;
    with_temp_namespace(&[], |client, ns| async move {
        let fake: Fake = serde_json::from_value(serde_json::json!({
            "apiVersion": "provider.external-secrets.io/v2alpha1",
            "kind": "Fake",
            "metadata": {"name": "bench", "namespace": ns},
            "spec": {"data": [{"key": "db", "value": "{\"user\":\"app\",\"password\":\"s3cret\"}"}]}
        }))
        .expect("Fake");
        Api::<Fake>::namespaced(client, &ns).create(&PostParams::default(), &fake).await.expect("create Fake");

        let pki = TestPki::new().expect("pki");
        let grpc: SocketAddr = ([127, 0, 0, 1], free_port()).into();
        let health: SocketAddr = ([127, 0, 0, 1], free_port()).into();
        let mut cmd = Command::new(&binary);
        cmd.arg("--listen")
            .arg(grpc.to_string())
            .arg("--health-listen")
            .arg(health.to_string())
            .arg("--tls-dir")
            .arg(pki.tls_dir())
            .arg("--log-level")
            .arg("warn")
            .env("KUBECONFIG", cp.kubeconfig());
        let mut child = spawn_logged("keyward-provider-fake-bench", cmd);
        wait_ready(health, Duration::from_secs(60)).await.expect("provider ready");
        let id = pki.client().expect("client cert");
        let mut c = connect(grpc, pki.ca.cert_pem(), Some(&id)).await.expect("connect");
        let request = GetSecretRequest {
            remote_ref: Some(ExternalSecretDataRemoteRef {
                key: "db".into(),
                property: "password".into(),
                ..Default::default()
            }),
            provider_ref: Some(provider_ref("Fake", "bench", "", "Provider")),
            source_namespace: ns.clone(),
        };
        for _ in 0..WARMUP {
            c.get_secret(request.clone()).await.expect("warm-up call");
        }
        let rss_before = rss_kib(child.pid());
        let mut samples = Vec::with_capacity(calls);
        let start = Instant::now();
        for _ in 0..calls {
            let t = Instant::now();
            let v = c.get_secret(request.clone()).await.expect("GetSecret");
            samples.push(t.elapsed());
            assert_eq!(v.into_inner().value, b"s3cret");
        }
        let total = start.elapsed();
        let rss_after = rss_kib(child.pid());
        samples.sort();
        println!(
            "keyward-provider-fake GetSecret over one pooled mTLS connection ({calls} calls after {WARMUP} warm-up):"
        );
        println!(
            "  p50 {:.0} µs   p99 {:.0} µs   max {:.0} µs   {:.0} calls/s",
            percentile(&samples, 0.50),
            percentile(&samples, 0.99),
            percentile(&samples, 1.0),
            calls as f64 / total.as_secs_f64()
        );
        println!(
            "  provider RSS: {:.1} MiB after warm-up, {:.1} MiB after {calls} calls",
            rss_before as f64 / 1024.0,
            rss_after as f64 / 1024.0
        );
        let _ = child.terminate(Duration::from_secs(10));
    })
    .await;
}
