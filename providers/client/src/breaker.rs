//! A circuit breaker per provider: after a run of transient failures, calls fail fast for a
//! cooldown instead of piling up on a provider that is down; then one probe call decides.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Breaker settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BreakerConfig {
    /// Consecutive transient failures that open the breaker.
    pub failure_threshold: u32,
    /// How long an open breaker refuses calls before letting one probe through.
    pub cooldown: Duration,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        BreakerConfig { failure_threshold: 5, cooldown: Duration::from_secs(5) }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Closed {
        failures: u32,
    },
    Open {
        until: Instant,
    },
    /// One probe is in flight; others are refused until it reports.
    HalfOpen,
}

/// The state of one provider's breaker. Time is passed in so the logic is testable.
#[derive(Debug)]
pub struct Breaker {
    config: BreakerConfig,
    state: Mutex<State>,
    /// How many times the breaker closed after being open: a provider that was down answered.
    recoveries: AtomicU64,
}

/// A call was refused because the breaker is open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Open {
    /// How long until a probe is allowed.
    pub retry_in: Duration,
}

impl Breaker {
    /// A closed breaker.
    pub fn new(config: BreakerConfig) -> Self {
        Breaker { config, state: Mutex::new(State::Closed { failures: 0 }), recoveries: AtomicU64::new(0) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A poisoned lock only means another thread panicked mid-update of a plain enum; the
        // value is still usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Asks to make a call at `now`.
    pub fn try_acquire(&self, now: Instant) -> Result<(), Open> {
        let mut state = self.lock();
        match *state {
            State::Closed { .. } => Ok(()),
            State::Open { until } if now >= until => {
                *state = State::HalfOpen;
                Ok(())
            }
            State::Open { until } => Err(Open { retry_in: until - now }),
            State::HalfOpen => Err(Open { retry_in: Duration::ZERO }),
        }
    }

    /// Reports the outcome of an acquired call. Only transient failures count against the
    /// provider: a NOT_FOUND or a permission error proves it is up. Returns whether this answer
    /// closed an open breaker (the provider came back); a provider that fails now and then
    /// without ever opening the breaker never "comes back", so its callers keep their backoff.
    pub fn record(&self, transient_failure: bool, now: Instant) -> bool {
        let mut state = self.lock();
        let recovered = !transient_failure && matches!(*state, State::Open { .. } | State::HalfOpen);
        if recovered {
            self.recoveries.fetch_add(1, Ordering::SeqCst);
        }
        *state = match (*state, transient_failure) {
            (_, false) => State::Closed { failures: 0 },
            (State::HalfOpen, true) => State::Open { until: now + self.config.cooldown },
            (State::Closed { failures }, true) if failures + 1 >= self.config.failure_threshold => {
                State::Open { until: now + self.config.cooldown }
            }
            (State::Closed { failures }, true) => State::Closed { failures: failures + 1 },
            (open @ State::Open { .. }, true) => open,
        };
        recovered
    }

    /// How many times the breaker closed after being open. A caller that failed while the
    /// count was N and finds it above N later knows the provider came back in between.
    pub fn recoveries(&self) -> u64 {
        self.recoveries.load(Ordering::SeqCst)
    }

    /// Whether the breaker is open and its cooldown is over: the next call is the probe.
    pub fn probe_due(&self, now: Instant) -> bool {
        matches!(*self.lock(), State::Open { until } if now >= until)
    }

    /// Whether calls are currently refused.
    pub fn is_open(&self, now: Instant) -> bool {
        match *self.lock() {
            State::Open { until } => now < until,
            State::HalfOpen => true,
            State::Closed { .. } => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn breaker() -> Breaker {
        Breaker::new(BreakerConfig { failure_threshold: 3, cooldown: Duration::from_secs(10) })
    }

    #[test]
    fn opens_after_threshold_of_consecutive_transient_failures() {
        let b = breaker();
        let t = Instant::now();
        for _ in 0..2 {
            assert!(b.try_acquire(t).is_ok());
            b.record(true, t);
        }
        assert!(!b.is_open(t));
        b.record(true, t);
        assert!(b.is_open(t));
        let err = b.try_acquire(t + Duration::from_secs(4)).unwrap_err();
        assert_eq!(err.retry_in, Duration::from_secs(6));
    }

    #[test]
    fn success_resets_the_count() {
        let b = breaker();
        let t = Instant::now();
        b.record(true, t);
        b.record(true, t);
        b.record(false, t);
        b.record(true, t);
        b.record(true, t);
        assert!(!b.is_open(t), "failures are counted consecutively");
    }

    #[test]
    fn half_open_lets_one_probe_through_and_decides() {
        let b = breaker();
        let t = Instant::now();
        for _ in 0..3 {
            b.record(true, t);
        }
        let later = t + Duration::from_secs(10);
        assert!(b.try_acquire(later).is_ok(), "probe after cooldown");
        assert!(b.try_acquire(later).is_err(), "only one probe at a time");
        b.record(true, later);
        assert!(b.try_acquire(later + Duration::from_secs(1)).is_err(), "failed probe reopens");
        let again = later + Duration::from_secs(10);
        assert!(b.try_acquire(again).is_ok());
        assert!(b.record(false, again), "a good probe closes the breaker: the provider came back");
        assert_eq!(b.recoveries(), 1);
        assert!(b.try_acquire(again).is_ok());
        assert!(b.try_acquire(again).is_ok(), "closed again after a good probe");
    }

    #[test]
    fn only_closing_an_open_breaker_is_a_recovery() {
        let b = breaker();
        let t = Instant::now();
        b.record(true, t);
        b.record(true, t);
        assert!(!b.record(false, t), "a flaky provider that never opened the breaker did not come back");
        assert_eq!(b.recoveries(), 0);
        for _ in 0..3 {
            b.record(true, t);
        }
        assert!(!b.probe_due(t + Duration::from_secs(9)));
        assert!(b.probe_due(t + Duration::from_secs(10)), "cooldown over: a probe is due");
        assert!(b.record(false, t + Duration::from_secs(10)), "an answer while open closes it");
        assert!(!b.probe_due(t + Duration::from_secs(20)));
        assert_eq!(b.recoveries(), 1);
    }
}
