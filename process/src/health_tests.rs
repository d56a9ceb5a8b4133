//! The operations server on an ephemeral port, answered over real HTTP/1.1.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use prometheus_client::metrics::counter::Counter;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

/// Sends `GET path` and returns the status code and the body.
async fn fetch(addr: std::net::SocketAddr, path: &str) -> (u16, String, String) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connecting");
    let request = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("sending");
    let mut response = String::new();
    stream.read_to_string(&mut response).await.expect("reading");
    let (head, body) = response.split_once("\r\n\r\n").expect("a head and a body");
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).expect("a status code");
    (status, head.to_ascii_lowercase(), body.to_string())
}

struct Server {
    addr: std::net::SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

async fn start(router: Router) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("binding an ephemeral port");
    let addr = listener.local_addr().expect("local address");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(serve(listener, router, async move {
        let _ = stopped.await;
    }));
    Server { addr, stop: Some(stop), task }
}

fn registry_with_counter() -> (Registry, Counter) {
    let mut registry = Registry::default();
    let counter = Counter::<u64>::default();
    registry.register("probes", "Probes answered", counter.clone());
    (registry, counter)
}

#[tokio::test]
async fn readyz_follows_the_readiness_flag() {
    let ready = Arc::new(AtomicBool::new(false));
    let flag = ready.clone();
    let health = Health::new(
        move || std::future::ready(Readiness::when(flag.load(Ordering::SeqCst), "starting")),
        || Ok(String::new()),
    );
    let mut server = start(health.router()).await;

    assert_eq!(fetch(server.addr, "/healthz").await.0, 200);
    let (status, _, body) = fetch(server.addr, "/readyz").await;
    assert_eq!((status, body.as_str()), (503, "starting"));
    ready.store(true, Ordering::SeqCst);
    let (status, _, body) = fetch(server.addr, "/readyz").await;
    assert_eq!((status, body.as_str()), (200, "ok"));
    ready.store(false, Ordering::SeqCst);
    assert_eq!(fetch(server.addr, "/readyz").await.0, 503, "readiness is checked on every request");
    assert_eq!(fetch(server.addr, "/nope").await.0, 404);

    if let Some(stop) = server.stop.take() {
        let _ = stop.send(());
    }
    let stopped = tokio::time::timeout(std::time::Duration::from_secs(5), &mut server.task).await;
    assert!(matches!(stopped, Ok(Ok(Ok(())))), "the server stops cleanly on shutdown: {stopped:?}");
}

#[tokio::test]
async fn readiness_may_say_why_and_be_async() {
    let health = Health::new(
        || async {
            tokio::task::yield_now().await;
            Readiness::Ready("ok; degraded".into())
        },
        || Ok(String::new()),
    );
    let server = start(health.router()).await;
    let (status, _, body) = fetch(server.addr, "/readyz").await;
    assert_eq!((status, body.as_str()), (200, "ok; degraded"));
}

#[tokio::test]
async fn metrics_are_encoded_on_every_scrape() {
    let (registry, counter) = registry_with_counter();
    let registry = Arc::new(registry);
    let health = Health::new(|| std::future::ready(Readiness::ok()), move || encode(&registry));
    let server = start(health.router()).await;
    counter.inc();
    let (status, head, body) = fetch(server.addr, "/metrics").await;
    assert_eq!(status, 200);
    assert!(head.contains(&format!("content-type: {METRICS_CONTENT_TYPE}")), "{head}");
    assert!(body.contains("probes_total 1"), "{body}");
    counter.inc();
    assert!(fetch(server.addr, "/metrics").await.2.contains("probes_total 2"));
}

#[tokio::test]
async fn a_failed_scrape_answers_500_and_callers_can_add_routes() {
    let health = Health::new(|| std::future::ready(Readiness::ok()), || Err(std::fmt::Error));
    let router = health.router().route("/debug", axum::routing::get(|| async { "extra" }));
    let server = start(router).await;
    assert_eq!(fetch(server.addr, "/metrics").await.0, 500);
    let (status, _, body) = fetch(server.addr, "/debug").await;
    assert_eq!((status, body.as_str()), (200, "extra"));
}
