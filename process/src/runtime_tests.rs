//! The runtime's admin server over real HTTP, its drain bound and its start-up. The tests that
//! check readiness before shutdown give the admin routes a token of their own: another test of
//! this crate sends the process SIGTERM, which cancels every runtime's shutdown token.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

async fn fetch(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connecting");
    let request = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("sending");
    let mut response = String::new();
    stream.read_to_string(&mut response).await.expect("reading");
    let (head, body) = response.split_once("\r\n\r\n").expect("a head and a body");
    (head.split(' ').nth(1).and_then(|s| s.parse().ok()).expect("a status"), body.to_string())
}

#[tokio::test]
async fn readiness_is_starting_then_the_binarys_then_shutting_down() {
    let shutdown = CancellationToken::new();
    let admin = Admin::new(shutdown.clone());
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let task = admin.spawn(listener);

    assert_eq!(fetch(addr, "/healthz").await, (200, "ok".into()));
    assert_eq!(fetch(addr, "/readyz").await, (503, "starting".into()), "no readiness handed over yet");
    assert_eq!(fetch(addr, "/metrics").await.0, 503);

    let ready = Arc::new(AtomicBool::new(false));
    let flag = ready.clone();
    admin.serve(Health::new(
        move || std::future::ready(Readiness::when(flag.load(Ordering::SeqCst), "caches not synced")),
        || Ok("up 1\n".to_string()),
    ));
    assert_eq!(fetch(addr, "/readyz").await, (503, "caches not synced".into()), "the binary's own answer");
    ready.store(true, Ordering::SeqCst);
    assert_eq!(fetch(addr, "/readyz").await, (200, "ok".into()));
    assert_eq!(fetch(addr, "/metrics").await, (200, "up 1\n".into()));

    shutdown.cancel();
    assert_eq!(fetch(addr, "/readyz").await, (503, "shutting down".into()), "whatever the binary says");
    assert_eq!(fetch(addr, "/healthz").await, (200, "ok".into()), "alive while draining");
    task.stop.cancel();
    tokio::time::timeout(Duration::from_secs(5), task.task).await.expect("the admin server stops").expect("join");
    assert!(tokio::net::TcpStream::connect(addr).await.is_err(), "the listener is closed");
}

#[tokio::test]
async fn work_gets_the_drain_bound_after_shutdown_and_no_more() {
    let stop = CancellationToken::new();
    // Work that ends on the token: its result comes back.
    let quick = { drained(stop.clone().cancelled_owned(), &stop, Duration::from_secs(5)) };
    stop.cancel();
    assert_eq!(quick.await, Some(()));

    // Work that ignores the token is dropped once the drain bound has passed.
    let stop = CancellationToken::new();
    stop.cancel();
    let started = Instant::now();
    let out = drained(std::future::pending::<()>(), &stop, Duration::from_millis(200)).await;
    assert_eq!(out, None);
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(200) && took < Duration::from_secs(3), "{took:?}");

    // Work that ends by itself needs no signal.
    let stop = CancellationToken::new();
    assert_eq!(drained(async { 7 }, &stop, Duration::ZERO).await, Some(7));
}

#[tokio::test]
async fn a_built_runtime_serves_its_admin_until_the_work_has_drained() {
    let rt = Runtime::builder("test")
        .admin("127.0.0.1:0".parse().expect("addr"))
        .drain(Duration::from_secs(5))
        .build()
        .await
        .expect("builds");
    let addr = rt.admin().local_addr().expect("an admin address");
    rt.admin().serve(Health::new(|| std::future::ready(Readiness::ok()), || Ok(String::new())));
    let token = rt.shutdown_token();
    let (seen_tx, seen_rx) = tokio::sync::oneshot::channel();
    let run = tokio::spawn(rt.run(move |stop| async move {
        stop.cancelled().await;
        // Still draining: the probes answer, and say the process is going.
        let _ = seen_tx.send(fetch(addr, "/readyz").await);
        "drained"
    }));
    token.cancel();
    assert_eq!(seen_rx.await.expect("the work saw the probes"), (503, "shutting down".into()));
    assert_eq!(run.await.expect("join"), Some("drained"));
    assert!(tokio::net::TcpStream::connect(addr).await.is_err(), "the admin server stopped with the process");
    // The crypto provider is installed once; asking again is answered as the first time.
    assert!(install_crypto_provider().is_ok());
    assert!(rustls::crypto::CryptoProvider::get_default().is_some());
}

#[tokio::test]
async fn an_admin_address_in_use_is_a_start_error() {
    let taken = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = taken.local_addr().expect("addr");
    let e = Runtime::builder("test").admin(addr).build().await.expect_err("the port is taken");
    assert!(matches!(e, StartError::Bind { addr: a, .. } if a == addr), "{e}");
    assert!(e.to_string().contains(&addr.to_string()), "{e}");
}

#[cfg(feature = "lease")]
#[tokio::test]
async fn without_a_lease_the_work_runs_once_as_sole_leader() {
    let rt = Runtime::builder("test").build().await.expect("builds");
    let terms = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = terms.clone();
    // A term that ends by itself ends the process: there is no Lease to wait for again.
    tokio::time::timeout(
        Duration::from_secs(5),
        rt.run_leading(None, move |_stop| {
            counted.fetch_add(1, Ordering::SeqCst);
            async {}
        }),
    )
    .await
    .expect("returns");
    assert_eq!(terms.load(Ordering::SeqCst), 1);
}
