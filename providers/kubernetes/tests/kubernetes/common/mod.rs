//! What the tests of this binary share.

use tokio::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// The tests of this binary run side by side (the harness's threads) against one control plane.
/// The conformance suite measures: its oversized-response case floods the provider with 300 MB
/// answers from servers in this process and checks the provider's peak RSS, so it runs alone
/// ([`exclusive`]); every other test takes [`shared`] and runs beside the others. Tokio's lock
/// works across the tests' runtimes; a test that panics drops its guard.
static SERIAL: RwLock<()> = RwLock::const_new(());

/// Runs alone: no other test of this binary runs while the guard lives.
pub async fn exclusive() -> RwLockWriteGuard<'static, ()> {
    SERIAL.write().await
}

/// Runs beside the other [`shared`] tests, never beside an [`exclusive`] one.
pub async fn shared() -> RwLockReadGuard<'static, ()> {
    SERIAL.read().await
}
