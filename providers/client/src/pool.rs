//! Pooled gRPC connections, one per (provider address, TLS fingerprint). A tonic `Channel` is
//! one multiplexed HTTP/2 connection, so every client of the same provider shares it. Entries
//! are evicted when idle or too old (so DNS and certificates are picked up again), and all are
//! dropped when the manager closes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tonic::transport::Channel;

use super::tls::TlsMaterial;

/// Identifies a pooled connection.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PoolKey {
    /// `host:port` of the provider.
    pub address: String,
    /// Fingerprint of the TLS material the connection presents.
    pub tls_fingerprint: String,
}

/// Opens connections; the real one builds an mTLS tonic channel, tests count calls.
pub trait Connector: Send + Sync {
    /// A lazily connecting channel to `key.address` with `tls`.
    fn connect(&self, key: &PoolKey, tls: &TlsMaterial) -> Result<Channel, String>;
}

/// Pool settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PoolConfig {
    /// An entry unused this long is dropped.
    pub idle_timeout: Duration,
    /// An entry older than this is replaced at its next use.
    pub max_lifetime: Duration,
}

impl Default for PoolConfig {
    fn default() -> Self {
        PoolConfig { idle_timeout: Duration::from_secs(300), max_lifetime: Duration::from_secs(3600) }
    }
}

struct Entry {
    channel: Channel,
    created: Instant,
    last_used: Instant,
}

/// Pool failures.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PoolError {
    /// The manager is shutting down.
    #[error("the client manager is closed")]
    Closed,
    /// The connection could not be set up (bad TLS material or address).
    #[error("cannot set up a connection to {address}: {message}")]
    Connect {
        /// The provider address.
        address: String,
        /// Why.
        message: String,
    },
}

/// Counters the pool reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Connections currently pooled.
    pub open: usize,
    /// Connections created since start.
    pub created: u64,
    /// Connections evicted (idle, expired, or closed) since start.
    pub evicted: u64,
}

/// The pool.
pub struct Pool {
    config: PoolConfig,
    connector: Box<dyn Connector>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    entries: HashMap<PoolKey, Entry>,
    closed: bool,
    created: u64,
    evicted: u64,
}

impl Pool {
    /// An empty pool.
    pub fn new(config: PoolConfig, connector: Box<dyn Connector>) -> Arc<Self> {
        Arc::new(Pool { config, connector, state: Mutex::new(State::default()) })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // The state stays consistent between statements, so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The channel for `key`, created when missing or past its lifetime.
    pub fn channel(&self, key: &PoolKey, tls: &TlsMaterial, now: Instant) -> Result<Channel, PoolError> {
        let mut state = self.lock();
        if state.closed {
            return Err(PoolError::Closed);
        }
        if let Some(entry) = state.entries.get_mut(key) {
            if now.saturating_duration_since(entry.created) < self.config.max_lifetime {
                entry.last_used = now;
                return Ok(entry.channel.clone());
            }
            state.entries.remove(key);
            state.evicted += 1;
        }
        let channel = self
            .connector
            .connect(key, tls)
            .map_err(|message| PoolError::Connect { address: key.address.clone(), message })?;
        state.entries.insert(key.clone(), Entry { channel: channel.clone(), created: now, last_used: now });
        state.created += 1;
        Ok(channel)
    }

    /// Drops entries idle longer than the idle timeout or older than the lifetime; returns how
    /// many went. Connections close once in-flight calls holding a clone finish.
    pub fn evict(&self, now: Instant) -> usize {
        let mut state = self.lock();
        let before = state.entries.len();
        let cfg = self.config;
        state.entries.retain(|_, e| {
            now.saturating_duration_since(e.last_used) < cfg.idle_timeout
                && now.saturating_duration_since(e.created) < cfg.max_lifetime
        });
        let gone = before - state.entries.len();
        state.evicted += gone as u64;
        gone
    }

    /// Drops every connection and refuses new ones.
    pub fn close(&self) {
        let mut state = self.lock();
        state.closed = true;
        let gone = state.entries.len() as u64;
        state.entries.clear();
        state.evicted += gone;
    }

    /// Current counters.
    pub fn stats(&self) -> PoolStats {
        let state = self.lock();
        PoolStats { open: state.entries.len(), created: state.created, evicted: state.evicted }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Counts connects and hands out lazy channels that never dial.
    #[derive(Default, Clone)]
    pub(crate) struct CountingConnector(pub Arc<AtomicUsize>);

    impl Connector for CountingConnector {
        fn connect(&self, _key: &PoolKey, _tls: &TlsMaterial) -> Result<Channel, String> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Ok(tonic::transport::Endpoint::from_static("http://127.0.0.1:1").connect_lazy())
        }
    }

    fn key(addr: &str, fp: &str) -> PoolKey {
        PoolKey { address: addr.into(), tls_fingerprint: fp.into() }
    }

    fn tls() -> TlsMaterial {
        TlsMaterial::new(b"a".to_vec(), b"b".to_vec(), b"c".to_vec())
    }

    fn pool(count: &CountingConnector) -> Arc<Pool> {
        Pool::new(
            PoolConfig { idle_timeout: Duration::from_secs(10), max_lifetime: Duration::from_secs(100) },
            Box::new(count.clone()),
        )
    }

    #[tokio::test]
    async fn one_connection_per_address_and_fingerprint() {
        let count = CountingConnector::default();
        let p = pool(&count);
        let t = Instant::now();
        for _ in 0..6 {
            p.channel(&key("a:1", "f"), &tls(), t).unwrap();
        }
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        p.channel(&key("a:1", "g"), &tls(), t).unwrap();
        p.channel(&key("b:1", "f"), &tls(), t).unwrap();
        assert_eq!(count.0.load(Ordering::SeqCst), 3);
        assert_eq!(p.stats().open, 3);
    }

    #[tokio::test]
    async fn idle_entries_are_evicted_and_used_ones_kept() {
        let count = CountingConnector::default();
        let p = pool(&count);
        let t = Instant::now();
        p.channel(&key("a:1", "f"), &tls(), t).unwrap();
        p.channel(&key("b:1", "f"), &tls(), t).unwrap();
        p.channel(&key("b:1", "f"), &tls(), t + Duration::from_secs(8)).unwrap();
        assert_eq!(p.evict(t + Duration::from_secs(11)), 1);
        assert_eq!(p.stats().open, 1);
        p.channel(&key("a:1", "f"), &tls(), t + Duration::from_secs(12)).unwrap();
        assert_eq!(count.0.load(Ordering::SeqCst), 3, "evicted entry reconnects");
    }

    #[tokio::test]
    async fn max_lifetime_replaces_busy_entries() {
        let count = CountingConnector::default();
        let p = pool(&count);
        let t = Instant::now();
        for s in (0..=100).step_by(5) {
            p.channel(&key("a:1", "f"), &tls(), t + Duration::from_secs(s)).unwrap();
        }
        assert_eq!(count.0.load(Ordering::SeqCst), 2, "replaced once at 100s");
        assert_eq!(p.stats().evicted, 1);
    }

    #[tokio::test]
    async fn close_releases_everything_and_refuses_new_connections() {
        let count = CountingConnector::default();
        let p = pool(&count);
        let t = Instant::now();
        p.channel(&key("a:1", "f"), &tls(), t).unwrap();
        p.close();
        assert_eq!(p.stats().open, 0);
        assert!(matches!(p.channel(&key("a:1", "f"), &tls(), t), Err(PoolError::Closed)));
    }
}
