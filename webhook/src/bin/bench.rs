//! `keyward-webhook-bench`: admission throughput and latency over TLS with keep-alive, and the
//! memory the caches take at scale.
//!
//! 1. Fills the caches directly with N namespaces and M ClusterProviders (each with a selector,
//!    names and regex conditions) and reports resident memory before and after.
//! 2. Decodes, answers and encodes the same reviews in a loop on one thread, without TLS or
//!    HTTP, and prints the CPU time each step takes per review: what admission itself costs.
//! 3. Serves the admission endpoints over TLS in-process and drives ExternalSecret validation
//!    reviews from concurrent keep-alive connections for a fixed time; half the namespaces are
//!    admitted, half denied. Prints reviews/s and p50/p90/p99 latency as the client sees it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;
use keyward_certs::{CertificateAuthority, TlsFiles, Usage, write_tls_dir};
use keyward_webhook::cache::Caches;
use keyward_webhook::client::{Connection, client_config};
use keyward_webhook::fixtures::{external_secret_review, shared_cluster_provider};
use keyward_webhook::metrics::Metrics;
use keyward_webhook::review::{decode, encode};
use keyward_webhook::server::{AppState, Mode, admission_router, answer, serve_tls};
use keyward_webhook::tls::{ReloadingCert, server_config};
use serde_json::json;

#[derive(Parser, Debug)]
#[command(name = "keyward-webhook-bench")]
struct Args {
    /// Concurrent keep-alive connections.
    #[arg(long, default_value_t = 16)]
    connections: usize,
    /// How long to send reviews, in seconds.
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    /// Namespaces in the cache.
    #[arg(long, default_value_t = 10_000)]
    namespaces: usize,
    /// ClusterProviders in the cache.
    #[arg(long, default_value_t = 1_000)]
    cluster_providers: usize,
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

fn fill(caches: &Caches, namespaces: usize, cluster_providers: usize) -> anyhow::Result<()> {
    let mut s = caches.write();
    for i in 0..namespaces {
        let env = if i % 2 == 0 { "prod" } else { "dev" };
        let labels: BTreeMap<String, String> = [
            ("kubernetes.io/metadata.name".to_string(), format!("ns-{i:05}")),
            ("env".to_string(), env.to_string()),
            ("team".to_string(), format!("team-{}", i % 97)),
            ("tier".to_string(), if i % 3 == 0 { "backend" } else { "frontend" }.to_string()),
        ]
        .into();
        s.namespaces.insert(format!("ns-{i:05}"), labels);
    }
    for i in 0..cluster_providers {
        let mut spec = shared_cluster_provider();
        spec["conditions"][1]["namespaces"] = json!((0..20).map(|j| format!("billing-{i}-{j}")).collect::<Vec<_>>());
        spec["conditions"][2]["namespaceRegexes"] = json!(["^ops-", format!("-tools-{i}$"), "^platform-[a-z]+$"]);
        let parsed = serde_json::from_value(spec).context("ClusterProvider spec")?;
        s.cluster_providers.insert(if i == 0 { "shared".to_string() } else { format!("cp-{i:04}") }, Ok(parsed));
    }
    drop(s);
    caches.mark_all_synced();
    Ok(())
}

fn percentile(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    f64::from(sorted[idx.min(sorted.len() - 1)]) / 1000.0
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let _ = keyward_process::install_crypto_provider();
    let args = Args::parse();

    let before = rss_kib();
    let caches = Arc::new(Caches::new());
    fill(&caches, args.namespaces, args.cluster_providers)?;
    let after = rss_kib();
    let caches_mib = after.saturating_sub(before) as f64 / 1024.0;
    println!(
        "caches: {} namespaces, {} ClusterProviders: RSS {:.1} MiB -> {:.1} MiB (+{caches_mib:.1} MiB)",
        args.namespaces,
        args.cluster_providers,
        before as f64 / 1024.0,
        after as f64 / 1024.0,
    );
    figure("webhook.caches_rss", caches_mib, "MiB", "lower");

    // Bodies for a spread of namespaces: even ones admitted by the selector, odd ones denied
    // after every condition was evaluated.
    let bodies: Arc<Vec<Vec<u8>>> = Arc::new(
        (0..64).map(|i| external_secret_review(&format!("ns-{:05}", (i * 157) % args.namespaces.max(1)))).collect(),
    );
    in_process(&caches, &bodies)?;

    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let day = Duration::from_secs(86_400);
    let ca = CertificateAuthority::generate("keyward-bench-ca", day)?;
    let leaf = ca.issue(&["127.0.0.1"], Usage::Server, day)?;
    let dir = tempfile_dir()?;
    write_tls_dir(&dir, &TlsFiles { ca_pem: ca.cert_pem(), cert_pem: &leaf.cert_pem, key_pem: &leaf.key_pem })?;
    let cert = ReloadingCert::load(&dir, provider.clone())?;
    let tls = Arc::new(server_config(provider, cert)?);
    let state = AppState::new(caches.clone(), Arc::new(Metrics::new()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve_tls(
        listener,
        tls,
        admission_router(state),
        Duration::from_secs(5),
        async {
            let _ = stopped.await;
        },
        Duration::from_secs(5),
    ));

    let config = client_config(ca.cert_pem())?;
    let deadline = Instant::now() + Duration::from_secs(args.seconds);
    let started = Instant::now();
    let mut clients = Vec::new();
    for c in 0..args.connections {
        let config = config.clone();
        let bodies = bodies.clone();
        clients.push(tokio::spawn(async move {
            let mut conn = Connection::connect(config, addr, "127.0.0.1").await?;
            let mut latencies: Vec<u32> = Vec::with_capacity(1 << 16);
            let (mut allowed, mut denied) = (0u64, 0u64);
            let mut i = c;
            while Instant::now() < deadline {
                let body = bodies[i % bodies.len()].clone();
                i += 1;
                let t = Instant::now();
                let (status, out) = conn.post("/validate", body).await?;
                latencies.push(t.elapsed().as_micros().min(u128::from(u32::MAX)) as u32);
                anyhow::ensure!(status == 200, "status {status}");
                let review: serde_json::Value = serde_json::from_slice(&out)?;
                if review["response"]["allowed"] == true {
                    allowed += 1;
                } else {
                    denied += 1;
                }
            }
            anyhow::Ok((latencies, allowed, denied))
        }));
    }
    let mut all = Vec::new();
    let (mut allowed, mut denied) = (0u64, 0u64);
    for c in clients {
        let (l, a, d) = c.await??;
        all.extend(l);
        allowed += a;
        denied += d;
    }
    let elapsed = started.elapsed().as_secs_f64();
    all.sort_unstable();
    println!(
        "ExternalSecret validation over TLS keep-alive, {} connections, {:.1}s: {} reviews ({} allowed, {} denied), {:.0} reviews/s",
        args.connections,
        elapsed,
        all.len(),
        allowed,
        denied,
        all.len() as f64 / elapsed
    );
    let (p50, p99) = (percentile(&all, 0.50), percentile(&all, 0.99));
    println!(
        "latency: p50 {p50:.3} ms, p90 {:.3} ms, p99 {p99:.3} ms, max {:.3} ms",
        percentile(&all, 0.90),
        percentile(&all, 1.0)
    );
    let rss = rss_kib() as f64 / 1024.0;
    println!("RSS after the run: {rss:.1} MiB");
    figure("webhook.tls.reviews_per_s", all.len() as f64 / elapsed, "reviews/s", "higher");
    figure("webhook.tls.p50", p50, "ms", "lower");
    figure("webhook.tls.p99", p99, "ms", "lower");
    figure("webhook.rss", rss, "MiB", "lower");
    let _ = stop.send(());
    let _ = server.await;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// Admission's own cost: decode, answer from the caches and encode, on this thread, for about
/// two seconds.
fn in_process(caches: &Caches, bodies: &[Vec<u8>]) -> anyhow::Result<()> {
    let (mut decoding, mut answering, mut encoding) = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    let mut reviews = 0u32;
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(2) {
        for body in bodies {
            let t = Instant::now();
            let decoded = decode(body).map_err(|e| anyhow::anyhow!("{e}"))?;
            let t1 = Instant::now();
            let (uid, decision) = answer(Mode::Validate, &decoded, caches);
            let t2 = Instant::now();
            std::hint::black_box(encode(&uid, &decision));
            encoding += t2.elapsed();
            answering += t2 - t1;
            decoding += t1 - t;
            reviews += 1;
        }
    }
    let per = |d: Duration| d.as_secs_f64() * 1e6 / f64::from(reviews);
    let rate = f64::from(reviews) / (decoding + answering + encoding).as_secs_f64();
    println!(
        "ExternalSecret validation in-process, one thread: {rate:.0} reviews/s; per review: decode {:.1} µs, answer {:.1} µs, encode {:.1} µs",
        per(decoding),
        per(answering),
        per(encoding)
    );
    figure("webhook.in_process.reviews_per_s", rate, "reviews/s", "higher");
    Ok(())
}

/// One figure in the line format `scripts/bench-compare.py` reads (as `keyward_e2e::bench`
/// writes it for the other benchmarks; this binary does not link the test support crate):
/// `figure <name> <value> <unit> <lower|higher>`.
fn figure(name: &str, value: f64, unit: &str, better: &str) {
    println!("figure {name} {value:.3} {unit} {better}");
}

fn tempfile_dir() -> anyhow::Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!("keyward-webhook-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
