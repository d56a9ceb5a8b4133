//! Turns for the tests of one test binary. The harness runs a binary's tests at the same time
//! (one per test thread) against the same control plane: most keep to their own namespaces,
//! store servers and provider processes and run side by side ([`shared`]); a test that measures
//! (peak RSS, call or request counts, a time budget) or disturbs what every test sees runs alone
//! ([`exclusive`]). The first line of each test takes one and holds it to the end. Each test
//! binary is its own process, so each has its own turns. Tokio's lock is not tied to a runtime,
//! so it works across the tests' own runtimes (and outside any, [`shared_blocking`]); a test
//! that panics releases its turn as it unwinds.

use tokio::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

static TURNS: RwLock<()> = RwLock::const_new(());

/// A turn alongside the other [`shared`] tests, never beside an [`exclusive`] one.
pub async fn shared() -> RwLockReadGuard<'static, ()> {
    TURNS.read().await
}

/// [`shared`] for a test outside any runtime (a plain `#[test]`).
pub fn shared_blocking() -> RwLockReadGuard<'static, ()> {
    TURNS.blocking_read()
}

/// A turn alone: waits until no other test runs, and keeps every other test waiting until the
/// guard drops.
pub async fn exclusive() -> RwLockWriteGuard<'static, ()> {
    TURNS.write().await
}
