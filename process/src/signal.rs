//! Shutdown signals: SIGTERM (the kubelet stopping a Pod) and SIGINT (Ctrl-C).

use std::future::Future;

use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

/// A future that resolves when the process receives SIGTERM or SIGINT. The handlers are
/// installed when this is called, not when the future is first polled, so a signal that
/// arrives in between is not missed. Call it inside the Tokio runtime.
pub fn shutdown_signal() -> impl Future<Output = ()> + Send + 'static {
    let handlers = (signal(SignalKind::terminate()), signal(SignalKind::interrupt()));
    async move {
        match handlers {
            (Ok(mut term), Ok(mut int)) => {
                tokio::select! {
                    _ = term.recv() => tracing::info!("SIGTERM received, shutting down"),
                    _ = int.recv() => tracing::info!("SIGINT received, shutting down"),
                }
            }
            (Err(e), _) | (_, Err(e)) => {
                tracing::warn!(error = %e, "cannot install signal handlers; falling back to ctrl-c");
                let _ = tokio::signal::ctrl_c().await;
                tracing::info!("ctrl-c received, shutting down");
            }
        }
    }
}

/// A token cancelled when the process receives SIGTERM or SIGINT, for processes that hand one
/// cancellation to many tasks. Call it inside the Tokio runtime.
pub fn shutdown_token() -> CancellationToken {
    let token = CancellationToken::new();
    let signalled = shutdown_signal();
    let cancel = token.clone();
    tokio::spawn(async move {
        signalled.await;
        cancel.cancel();
    });
    token
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn sigterm_cancels_the_token() {
        let token = shutdown_token();
        assert!(!token.is_cancelled());
        let status = std::process::Command::new("sh")
            .args(["-c", &format!("kill -TERM {}", std::process::id())])
            .status()
            .expect("running kill");
        assert!(status.success());
        tokio::time::timeout(Duration::from_secs(5), token.cancelled())
            .await
            .expect("the token is cancelled after SIGTERM");
    }
}
