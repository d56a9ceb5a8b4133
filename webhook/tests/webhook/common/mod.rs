//! What the tests of this binary share.

use tokio::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// The tests of this binary run side by side (the harness's threads). The load test measures:
/// it bursts near-limit reviews at webhook processes and checks their peak RSS and that every
/// review is answered in the end, so it runs alone ([`exclusive`]) and no other test competes
/// for the two cores. The end-to-end test and the garbage reviews take [`shared`] (the
/// garbage reviews, plain `#[test]`s, [`shared_blocking`]) and run beside each other. Tokio's lock
/// works across the tests' runtimes and outside any; a test that panics drops its guard.
static SERIAL: RwLock<()> = RwLock::const_new(());

/// Runs alone: no other test of this binary runs while the guard lives.
pub async fn exclusive() -> RwLockWriteGuard<'static, ()> {
    SERIAL.write().await
}

/// Runs beside the other [`shared`] tests, never beside an [`exclusive`] one.
pub async fn shared() -> RwLockReadGuard<'static, ()> {
    SERIAL.read().await
}

/// [`shared`] for a test outside any runtime (a plain `#[test]`).
pub fn shared_blocking() -> RwLockReadGuard<'static, ()> {
    SERIAL.blocking_read()
}
