//! GetSecret round trip over one pooled mTLS connection to a provider process (release build):
//! `keyward-provider-fake` serving a Fake object from the local control plane, and next to it
//! `keyward-provider-vault` against `vault server -dev` and `keyward-provider-aws` against moto's
//! server (both on loopback, so the figures are the provider's overhead plus one local store
//! round trip, not a cloud's latency). Prints p50 and p99 in microseconds, calls per second and
//! the provider's resident memory.
//!
//! `KEYWARD_BENCH_CALLS` changes the number of measured Fake calls (default 10,000),
//! `KEYWARD_BENCH_STORE_CALLS` those of the store providers (default 1,000), and
//! `KEYWARD_BENCH_STORES=0` skips the store providers.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use keyward_crds::Vault;
use keyward_e2e::bench::{Better, figure};
use keyward_e2e::stores::{Moto, VaultDev};
use keyward_e2e::{control_plane, free_port, repo_root, spawn_logged, with_temp_namespace};
use keyward_proto::v1::{ExternalSecretDataRemoteRef, GetSecretRequest, ProviderReference};
use keyward_provider_aws::api::SecretsManager;
use keyward_provider_fake::api::Fake;
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

/// Starts `binary` (release build) with `env` against the local control plane; returns the
/// process, an mTLS client and the PKI (kept alive with them).
async fn start(
    binary: &str,
    env: &[(&str, String)],
) -> (
    keyward_e2e::ChildProcess,
    keyward_proto::v1::secret_store_provider_client::SecretStoreProviderClient<tonic::transport::Channel>,
    TestPki,
) {
    let path = release_binary(binary);
    let cp = control_plane().await;
    let pki = TestPki::new().expect("pki");
    let grpc: SocketAddr = ([127, 0, 0, 1], free_port()).into();
    let health: SocketAddr = ([127, 0, 0, 1], free_port()).into();
    let mut cmd = Command::new(&path);
    cmd.arg("--listen")
        .arg(grpc.to_string())
        .arg("--health-listen")
        .arg(health.to_string())
        .arg("--tls-dir")
        .arg(pki.tls_dir())
        .arg("--log-level")
        .arg("warn")
        .env("KUBECONFIG", cp.kubeconfig())
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())));
    let child = spawn_logged(&format!("{binary}-bench"), cmd);
    wait_ready(health, Duration::from_secs(60)).await.expect("provider ready");
    let id = pki.client().expect("client cert");
    let c = connect(grpc, pki.ca.cert_pem(), Some(&id)).await.expect("connect");
    (child, c, pki)
}

/// Starts `binary` (release build) with `env`, then measures `calls` GetSecret calls of `key`
/// (property `password`) through the config `reference` in `ns`.
async fn measure(
    binary: &str,
    env: &[(&str, String)],
    reference: ProviderReference,
    ns: &str,
    key: &str,
    calls: usize,
) {
    let (mut child, mut c, _pki) = start(binary, env).await;
    let request = GetSecretRequest {
        remote_ref: Some(ExternalSecretDataRemoteRef {
            key: key.into(),
            property: "password".into(),
            ..Default::default()
        }),
        provider_ref: Some(reference),
        source_namespace: ns.to_string(),
        max_age_millis: 0,
    };
    let warmup = WARMUP.min(calls);
    for _ in 0..warmup {
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
    let (p50, p99, rate) = (percentile(&samples, 0.50), percentile(&samples, 0.99), calls as f64 / total.as_secs_f64());
    let rss = rss_after as f64 / 1024.0;
    println!("{binary} GetSecret over one pooled mTLS connection ({calls} calls after {warmup} warm-up):");
    println!("  p50 {p50:.0} µs   p99 {p99:.0} µs   max {:.0} µs   {rate:.0} calls/s", percentile(&samples, 1.0));
    println!("  provider RSS: {:.1} MiB after warm-up, {rss:.1} MiB after {calls} calls", rss_before as f64 / 1024.0);
    let name = |what: &str| format!("get_secret.{}.{what}", binary.trim_start_matches("keyward-provider-"));
    figure(&name("p50"), p50, "µs", Better::Lower);
    figure(&name("p99"), p99, "µs", Better::Lower);
    figure(&name("calls_per_s"), rate, "calls/s", Better::Higher);
    figure(&name("provider_rss"), rss, "MiB", Better::Lower);
    let _ = child.terminate(Duration::from_secs(10));
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[tokio::main]
async fn main() {
    keyward_provider_runtime::install_crypto_provider();
    let calls = env_usize("KEYWARD_BENCH_CALLS", 10_000);
    let store_calls = env_usize("KEYWARD_BENCH_STORE_CALLS", 1_000);
    let stores = std::env::var("KEYWARD_BENCH_STORES").map(|v| v != "0").unwrap_or(true);
    with_temp_namespace(&[], |client, ns| async move {
        let fake: Fake = serde_json::from_value(serde_json::json!({
            "apiVersion": "provider.external-secrets.io/v2alpha1",
            "kind": "Fake",
            "metadata": {"name": "bench", "namespace": ns},
            "spec": {"data": [{"key": "db", "value": "{\"user\":\"app\",\"password\":\"s3cret\"}"}]}
        }))
        .expect("Fake");
        Api::<Fake>::namespaced(client.clone(), &ns).create(&PostParams::default(), &fake).await.expect("create Fake");
        measure("keyward-provider-fake", &[], provider_ref("Fake", "bench", "", "Provider"), &ns, "db", calls).await;
        if !stores {
            return;
        }

        let vault = VaultDev::start();
        vault.cli(&["kv", "put", "secret/bench/db", "user=app", "password=s3cret"]);
        let token = serde_json::json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "vault-token"},
                                       "stringData": {"token": vault.root_token()}});
        let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), &ns);
        secrets.create(&PostParams::default(), &serde_json::from_value(token).expect("Secret")).await.expect("Secret");
        let config: Vault = serde_json::from_value(serde_json::json!({
            "apiVersion": "provider.external-secrets.io/v2alpha1", "kind": "Vault", "metadata": {"name": "bench"},
            "spec": {"server": vault.address(), "path": "secret",
                     "auth": {"tokenSecretRef": {"name": "vault-token", "key": "token"}}}}))
        .expect("Vault");
        Api::<Vault>::namespaced(client.clone(), &ns).create(&PostParams::default(), &config).await.expect("Vault");
        let reference = provider_ref("Vault", "bench", "", "Provider");
        measure("keyward-provider-vault", &[], reference, &ns, "bench/db", store_calls).await;
        drop(vault);

        let moto = Moto::start();
        let keys = serde_json::json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "aws-keys"},
                                      "stringData": {"id": "bench", "secret": "bench"}});
        secrets.create(&PostParams::default(), &serde_json::from_value(keys).expect("Secret")).await.expect("Secret");
        let config: SecretsManager = serde_json::from_value(serde_json::json!({
            "apiVersion": "provider.external-secrets.io/v2alpha1", "kind": "SecretsManager", "metadata": {"name": "bench"},
            "spec": {"region": "us-east-1", "auth": {"secretRef": {
                "accessKeyIDSecretRef": {"name": "aws-keys", "key": "id"},
                "secretAccessKeySecretRef": {"name": "aws-keys", "key": "secret"}}}}}))
        .expect("SecretsManager");
        Api::<SecretsManager>::namespaced(client.clone(), &ns)
            .create(&PostParams::default(), &config)
            .await
            .expect("SecretsManager");
        let env = [("AWS_ENDPOINT_URL", moto.endpoint()), ("AWS_EC2_METADATA_DISABLED", "true".to_string())];
        // The provider creates nothing on reads: seed the secret with a push.
        let reference = provider_ref("SecretsManager", "bench", "", "Provider");
        seed_aws(&env, reference.clone(), &ns).await;
        measure("keyward-provider-aws", &env, reference, &ns, "bench/db", store_calls).await;
    })
    .await;
}

/// Writes `bench/db` = `{"password": "s3cret"}` through the AWS provider's PushSecret.
async fn seed_aws(env: &[(&str, String)], reference: ProviderReference, ns: &str) {
    use keyward_proto::v1::{PushSecretData, PushSecretRequest};
    let (mut child, mut c, _pki) = start("keyward-provider-aws", env).await;
    c.push_secret(PushSecretRequest {
        provider_ref: Some(reference),
        source_namespace: ns.to_string(),
        secret_data: [("password".to_string(), b"s3cret".to_vec())].into(),
        push_secret_data: Some(PushSecretData {
            secret_key: String::new(),
            remote_key: "bench/db".into(),
            ..Default::default()
        }),
    })
    .await
    .expect("seed push");
    let _ = child.terminate(Duration::from_secs(10));
}
