//! How current the caches are. The webhook keeps answering from its caches while the API
//! server is unreachable (that is the point of having them), and says how long it has been
//! doing so: a source whose watch failed is "unconfirmed" from the first failure until an event
//! arrives or the watch has gone quiet for longer than its longest retry delay (the retry
//! reconnected: a failing retry reports a new failure within that delay).

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::cache::Source;

/// Longest delay between two attempts of a failing watch (see `watch.rs`).
pub const WATCH_RETRY_MAX: Duration = Duration::from_secs(5);

/// A watch that reported no failure for this long after its last one has reconnected.
const QUIET: Duration = Duration::from_secs(WATCH_RETRY_MAX.as_secs() * 2);

#[derive(Debug, Default, Clone, Copy)]
struct Watch {
    /// First failure since the source was last confirmed.
    failing_since: Option<Instant>,
    /// Latest failure.
    last_failure: Option<Instant>,
}

/// Per-source watch health.
#[derive(Debug, Default)]
pub struct Freshness(Mutex<[Watch; Source::ALL.len()]>);

impl Freshness {
    fn update(&self, source: Source, f: impl FnOnce(&mut Watch)) {
        // A poisoned lock holds plain timestamps; still usable.
        f(&mut self.0.lock().unwrap_or_else(PoisonError::into_inner)[source as usize]);
    }

    /// The watch of `source` failed at `now`.
    pub fn failed(&self, source: Source, now: Instant) {
        self.update(source, |w| {
            w.failing_since.get_or_insert(now);
            w.last_failure = Some(now);
        });
    }

    /// The watch of `source` delivered an event: the cache is current.
    pub fn delivered(&self, source: Source) {
        self.update(source, |w| *w = Watch::default());
    }

    /// The sources not confirmed current at `now`, with how long they have been unconfirmed.
    pub fn stale(&self, now: Instant) -> Vec<(Source, Duration)> {
        let mut watches = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let mut out = Vec::new();
        for source in Source::ALL {
            let w = &mut watches[source as usize];
            match (w.failing_since, w.last_failure) {
                (Some(since), Some(last)) if now.saturating_duration_since(last) < QUIET => {
                    out.push((source, now.saturating_duration_since(since)));
                }
                _ => *w = Watch::default(),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failing_watch_is_stale_until_an_event_or_a_quiet_reconnect() {
        let f = Freshness::default();
        let t = Instant::now();
        assert!(f.stale(t).is_empty());
        f.failed(Source::Namespaces, t);
        f.failed(Source::Providers, t);
        f.failed(Source::Namespaces, t + Duration::from_secs(4));
        assert_eq!(
            f.stale(t + Duration::from_secs(6)),
            [(Source::Namespaces, Duration::from_secs(6)), (Source::Providers, Duration::from_secs(6))]
        );
        f.delivered(Source::Providers);
        assert_eq!(f.stale(t + Duration::from_secs(7)), [(Source::Namespaces, Duration::from_secs(7))]);
        // No failure for longer than the longest retry delay: the retry reconnected.
        assert!(f.stale(t + Duration::from_secs(4) + QUIET).is_empty());
        f.failed(Source::Namespaces, t + Duration::from_secs(30));
        assert_eq!(f.stale(t + Duration::from_secs(31)), [(Source::Namespaces, Duration::from_secs(1))]);
    }
}
