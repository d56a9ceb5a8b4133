//! Servers a hostile tenant names in its configuration, for the tests that prove a provider
//! survives them.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// What the flood is: 300 MB, more than any provider's memory limit.
const FLOOD_BYTES: usize = 300 * 1024 * 1024;

/// An HTTP(S) server on 127.0.0.1 that answers every request with 300 MB of spaces, declared
/// in `Content-Length` (then streamed) or chunked, as fast as the client reads.
pub struct FloodingServer {
    /// `http://127.0.0.1:port` or `https://…`.
    pub url: String,
    sent: Arc<AtomicU64>,
}

impl FloodingServer {
    /// Starts one. `tls` is the server's certificate chain and key (PEM) for HTTPS; the
    /// certificate must name `127.0.0.1`.
    pub async fn start(declared: bool, tls: Option<(&str, &str)>) -> FloodingServer {
        let acceptor = tls.map(|(chain, key)| {
            let chain = CertificateDer::pem_slice_iter(chain.as_bytes()).collect::<Result<Vec<_>, _>>().expect("PEM");
            let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).expect("key");
            let config =
                rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                    .with_safe_default_protocol_versions()
                    .expect("versions")
                    .with_no_client_auth()
                    .with_single_cert(chain, key)
                    .expect("server TLS");
            tokio_rustls::TlsAcceptor::from(Arc::new(config))
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let scheme = if acceptor.is_some() { "https" } else { "http" };
        let url = format!("{scheme}://{}", listener.local_addr().expect("addr"));
        let sent = Arc::new(AtomicU64::new(0));
        let total = sent.clone();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, total) = (acceptor.clone(), total.clone());
                tokio::spawn(async move {
                    match acceptor {
                        Some(a) => {
                            if let Ok(conn) = a.accept(tcp).await {
                                flood(conn, declared, &total).await;
                            }
                        }
                        None => flood(tcp, declared, &total).await,
                    }
                });
            }
        });
        FloodingServer { url, sent }
    }

    /// Bytes of body the server got out so far (what clients read, plus socket buffers).
    pub fn sent(&self) -> u64 {
        self.sent.load(Ordering::SeqCst)
    }
}

/// Reads one request head, then answers with the flood until the client stops reading.
async fn flood<S: AsyncRead + AsyncWrite + Unpin>(mut conn: S, declared: bool, total: &AtomicU64) {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match conn.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let answer = if declared {
        format!("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {FLOOD_BYTES}\r\n\r\n")
    } else {
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n".to_string()
    };
    if conn.write_all(answer.as_bytes()).await.is_err() {
        return;
    }
    let chunk = vec![b' '; 64 * 1024];
    let piece = if declared {
        chunk
    } else {
        [format!("{:x}\r\n", chunk.len()).into_bytes(), chunk, b"\r\n".to_vec()].concat()
    };
    for _ in 0..(FLOOD_BYTES / piece.len()) {
        if conn.write_all(&piece).await.is_err() {
            return;
        }
        total.fetch_add(piece.len() as u64, Ordering::SeqCst);
    }
}

/// Peak resident memory of a process (`VmHWM`), in KiB.
pub fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc/<pid>/status");
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).expect("VmHWM");
    line.split_whitespace().nth(1).and_then(|n| n.parse().ok()).expect("a number")
}
