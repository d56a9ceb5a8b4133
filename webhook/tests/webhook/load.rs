//! Memory under load: bursts of admission reviews near the body limit against the real
//! `keyward-webhook` binary, over TLS, 64 at once.
//!
//! The chart gives the webhook 256Mi; with `failurePolicy: Fail`, an OOM-killed webhook blocks
//! every write of a Keyward kind. The in-flight budget must keep the peak well under that limit,
//! and every review must still be answered: shed requests get `429` with `Retry-After`, which
//! the client (like the API server's webhook client, over HTTP/2 as the API server talks to
//! webhooks) retries.
//!
//! The same burst against a webhook whose budget is effectively unlimited is measured as well,
//! so the test shows the bound is the budget's doing.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::{TokioExecutor, TokioIo};
use keyward_certs::{CertificateAuthority, TlsFiles, Usage, write_tls_dir};
use keyward_e2e::{ChildProcess, control_plane, free_port, spawn_logged, workspace_binary};
use rustls::ClientConfig;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::common;

/// Concurrent reviews in a burst.
const BURST: usize = 64;
/// Peak resident memory the bounded webhook must stay under: half the chart's 256Mi limit.
const BOUNDED_PEAK: u64 = 128 << 20;

struct Webhook {
    process: ChildProcess,
    port: u16,
    health: SocketAddr,
}

async fn start(tls: &Path, extra: &[&str]) -> Webhook {
    let cp = control_plane().await;
    let (port, health_port) = (free_port(), free_port());
    let health: SocketAddr = ([127, 0, 0, 1], health_port).into();
    let mut cmd = Command::new(workspace_binary("keyward-webhook"));
    cmd.args(["--listen", &format!("127.0.0.1:{port}"), "--health-listen", &health.to_string()])
        .args(["--log-format", "text"])
        .arg("--tls-dir")
        .arg(tls)
        .args(extra)
        .env("KUBECONFIG", cp.kubeconfig());
    let mut process = spawn_logged("keyward-webhook", cmd);
    let start = Instant::now();
    while !curl_ok(&format!("http://{health}/readyz")) {
        assert!(process.is_running(), "keyward-webhook exited:\n{}", process.log());
        assert!(start.elapsed() < Duration::from_secs(60), "keyward-webhook not ready:\n{}", process.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Webhook { process, port, health }
}

fn curl_ok(url: &str) -> bool {
    Command::new("curl").args(["-sf", "-o", "/dev/null", url]).status().is_ok_and(|s| s.success())
}

/// Peak resident set of a process (VmHWM), in bytes.
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read /proc status");
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM");
    kib * 1024
}

/// An ExternalSecret review whose object carries a large annotation: `size` bytes in all.
fn near_limit_review(size: usize) -> Vec<u8> {
    let filler = "a".repeat(size.saturating_sub(2048));
    let review = serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "3f2a7c1e-0000-4000-8000-000000000064",
            "kind": {"group": "external-secrets.io", "version": "v1", "kind": "ExternalSecret"},
            "resource": {"group": "external-secrets.io", "version": "v1", "resource": "externalsecrets"},
            "operation": "CREATE",
            "namespace": "team-a",
            "name": "big",
            "object": {
                "apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
                "metadata": {"name": "big", "namespace": "team-a", "annotations": {"example.com/blob": filler}},
                "spec": {"secretStoreRef": {"name": "p", "kind": "Provider"},
                         "data": [{"secretKey": "k", "remoteRef": {"key": "k"}}]}
            }
        }
    });
    serde_json::to_vec(&review).expect("json")
}

/// How long a burst may go without any review being answered before the test calls the webhook
/// stuck. Not a speed figure: on a loaded machine one near-limit review can take seconds, and
/// the budget lets only one or two run at once, so the burst as a whole may take minutes; what
/// must hold is that the webhook keeps answering until every review is.
const STALL: Duration = Duration::from_secs(120);

/// When any review of the burst last got a final answer.
type Progress = Arc<std::sync::Mutex<Instant>>;

/// One review over its own HTTP/2 connection (what the API server speaks to webhooks),
/// retried after `Retry-After` while it is answered 429, as the API server's webhook client
/// does. Returns the final status, or what failed.
async fn review(config: Arc<ClientConfig>, port: u16, body: Bytes, progress: Progress) -> String {
    loop {
        let attempt = async {
            let tcp = TcpStream::connect(("127.0.0.1", port)).await?;
            let tls = TlsConnector::from(config.clone()).connect(ServerName::try_from("localhost")?, tcp).await?;
            let (mut sender, conn) =
                hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls)).await?;
            tokio::spawn(conn);
            let request = http::Request::post(format!("https://127.0.0.1:{port}/validate"))
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(Full::new(body.clone()))?;
            let response = sender.send_request(request).await?;
            let status = response.status().as_u16();
            let retry_after =
                response.headers().get(http::header::RETRY_AFTER).and_then(|v| v.to_str().ok()?.parse().ok());
            response.into_body().collect().await?;
            Ok::<_, anyhow::Error>((status, retry_after))
        };
        let outcome = attempt.await;
        if !matches!(outcome, Ok((429, Some(_)))) {
            *progress.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
        }
        match outcome {
            Ok((429, Some(seconds))) => {
                let last = *progress.lock().unwrap_or_else(|e| e.into_inner());
                if last.elapsed() > STALL {
                    return format!("still shed, and no review of the burst answered for {STALL:?}");
                }
                tokio::time::sleep(Duration::from_secs(seconds)).await;
            }
            Ok((status, _)) => return status.to_string(),
            Err(e) => return format!("error: {e:#}"),
        }
    }
}

/// Sends `BURST` copies of the review at once; returns the final status of each.
async fn burst(w: &Webhook, ca_pem: &str, body: &[u8]) -> Vec<String> {
    burst_of(BURST, w, ca_pem, body).await
}

/// Sends `count` copies of the review at once; returns the final status of each.
async fn burst_of(count: usize, w: &Webhook, ca_pem: &str, body: &[u8]) -> Vec<String> {
    let mut config = (*keyward_webhook::client::client_config(ca_pem).expect("client config")).clone();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let config = Arc::new(config);
    let body = Bytes::copy_from_slice(body);
    let progress: Progress = Arc::new(std::sync::Mutex::new(Instant::now()));
    let tasks: Vec<_> =
        (0..count).map(|_| tokio::spawn(review(config.clone(), w.port, body.clone(), progress.clone()))).collect();
    let mut codes = Vec::new();
    for t in tasks {
        codes.push(t.await.expect("join"));
    }
    codes
}

fn shed_total(w: &Webhook) -> u64 {
    let out = Command::new("curl").args(["-sf", &format!("http://{}/metrics", w.health)]).output().expect("curl");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("keyward_webhook_requests_shed_total "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_burst_of_near_limit_reviews_stays_well_under_the_memory_limit_and_is_answered() {
    let _guard = common::exclusive().await;
    let dir = tempfile::tempdir().expect("tmp");
    let tls = dir.path().join("tls");
    let day = Duration::from_secs(86_400);
    let ca = CertificateAuthority::generate("keyward-load-ca", day).expect("ca");
    let leaf = ca.issue(&["127.0.0.1", "localhost"], Usage::Server, day).expect("leaf");
    write_tls_dir(&tls, &TlsFiles { ca_pem: ca.cert_pem(), cert_pem: &leaf.cert_pem, key_pem: &leaf.key_pem })
        .expect("tls dir");
    // Just under the default 7 MiB body limit.
    let body = near_limit_review(7 * 1024 * 1024 - 64 * 1024);

    // The default budget.
    let mut bounded = start(&tls, &[]).await;
    let codes = burst(&bounded, ca.cert_pem(), &body).await;
    let peak = peak_rss(bounded.process.pid());
    let shed = shed_total(&bounded);
    assert!(codes.iter().all(|c| c == "200"), "every review answered in the end: {codes:?}\n{}", bounded.process.log());
    bounded.process.terminate(Duration::from_secs(10));

    // No budget to speak of: the same burst, for comparison (answers may time out: only the
    // memory is measured).
    let mut unbounded = start(&tls, &["--max-in-flight-bytes", "4000000000"]).await;
    burst(&unbounded, ca.cert_pem(), &body).await;
    let unbounded_peak = peak_rss(unbounded.process.pid());
    let unbounded_shed = shed_total(&unbounded);
    unbounded.process.terminate(Duration::from_secs(10));

    let figures = format!(
        "peak RSS {} MiB with the budget (shed {shed} times), {} MiB without (shed {unbounded_shed} times)",
        peak >> 20,
        unbounded_peak >> 20
    );
    println!("{figures}");
    assert!(peak < BOUNDED_PEAK, "{figures}");
    assert!(shed > 0, "a burst of {BURST} near-limit reviews never had to wait for the budget: {figures}");
    assert_eq!(unbounded_shed, 0, "{figures}");
    // Without the budget the same burst goes past the bound: the bound is the budget's doing.
    assert!(unbounded_peak > BOUNDED_PEAK, "the test no longer measures anything: {figures}");
}

/// A PushSecret review whose `data[0].metadata` is `{pad: [0, 0, …]}` of about `size` bytes: a
/// small body that decodes to a tree some hundred times its size.
fn dense_review(size: usize) -> Vec<u8> {
    let pad = format!("{{\"pad\":[{}0]}}", "0,".repeat(size / 2));
    let review = format!(
        r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{
            "uid":"3f2a7c1e-0000-4000-8000-000000000065",
            "kind":{{"group":"external-secrets.io","version":"v1alpha1","kind":"PushSecret"}},
            "resource":{{"group":"external-secrets.io","version":"v1alpha1","resource":"pushsecrets"}},
            "operation":"CREATE","namespace":"team-a","name":"dense",
            "object":{{"apiVersion":"external-secrets.io/v1alpha1","kind":"PushSecret",
                      "metadata":{{"name":"dense","namespace":"team-a"}},
                      "spec":{{"secretStoreRefs":[{{"name":"p","kind":"Provider"}}],"selector":{{"secret":{{"name":"s"}}}},
                              "data":[{{"match":{{"remoteRef":{{"remoteKey":"r"}}}},"metadata":{pad}}}]}}}}}}}}"#
    );
    review.into_bytes()
}

/// Reviews weigh what they decode to, not only their bytes: 1.4 MB of `[0,0,…]` is a tree of
/// some hundred MiB. Counted by bytes alone, eight of them fit the default 12 MiB budget at
/// once and took the webhook several times past its memory limit; weighed by their values, one
/// runs at a time and every one is answered (denied: the metadata is past the free-form limits).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_burst_of_reviews_that_decode_to_large_trees_stays_under_the_memory_limit() {
    let _guard = common::exclusive().await;
    let dir = tempfile::tempdir().expect("tmp");
    let tls = dir.path().join("tls");
    let day = Duration::from_secs(86_400);
    let ca = CertificateAuthority::generate("keyward-load-ca", day).expect("ca");
    let leaf = ca.issue(&["127.0.0.1", "localhost"], Usage::Server, day).expect("leaf");
    write_tls_dir(&tls, &TlsFiles { ca_pem: ca.cert_pem(), cert_pem: &leaf.cert_pem, key_pem: &leaf.key_pem })
        .expect("tls dir");
    let body = dense_review(1_400_000);
    let mut w = start(&tls, &[]).await;
    let started = Instant::now();
    let codes = burst_of(8, &w, ca.cert_pem(), &body).await;
    let peak = peak_rss(w.process.pid());
    let shed = shed_total(&w);
    w.process.terminate(Duration::from_secs(10));
    let figures = format!("peak RSS {} MiB, shed {shed} times, {:?}", peak >> 20, started.elapsed());
    println!("{figures}");
    assert!(codes.iter().all(|c| c == "200"), "every review answered: {codes:?}");
    assert!(peak < BOUNDED_PEAK, "{figures}");
    assert!(shed > 0, "the reviews never waited for each other: {figures}");
}
