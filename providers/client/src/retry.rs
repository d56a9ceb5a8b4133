//! Retries for transient provider errors: exponential backoff with jitter, so many reconcilers
//! hitting a recovering provider do not retry in lockstep.

use std::time::Duration;

use rand::Rng;

/// How often and how patiently a transient failure is retried.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// Attempts in total, the first one included (1 disables retries).
    pub max_attempts: u32,
    /// Delay ceiling of the first retry.
    pub base: Duration,
    /// Upper bound of any delay.
    pub max: Duration,
    /// Every retry waits `base` exactly (a store's `retrySettings.retryInterval`), without
    /// backoff or jitter.
    pub fixed: bool,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy { max_attempts: 3, base: Duration::from_millis(100), max: Duration::from_secs(2), fixed: false }
    }
}

impl RetryPolicy {
    /// The policy of calls through a store with `spec.retrySettings`, which replace the
    /// defaults as upstream has them: `maxRetries` retries after the first attempt, each after
    /// `retryInterval`. A part the store does not set keeps this policy's. The store's numbers
    /// come capped (`keyward_crds::rules::store_retry`).
    pub fn for_store(self, store: keyward_crds::rules::StoreRetry) -> RetryPolicy {
        let mut p = self;
        if let Some(n) = store.max_retries {
            p.max_attempts = n.saturating_add(1);
        }
        if let Some(interval) = store.retry_interval {
            p = RetryPolicy { base: interval, max: interval, fixed: true, ..p };
        }
        p
    }

    /// The ceiling of the delay before retry number `retry` (0 for the first retry):
    /// `base * 2^retry`, capped at `max`.
    pub fn ceiling(&self, retry: u32) -> Duration {
        let factor = 2u32.saturating_pow(retry.min(16));
        self.base.saturating_mul(factor).min(self.max)
    }

    /// The delay before retry number `retry`: uniformly drawn from the upper half of the
    /// ceiling ("equal jitter"), which keeps some backoff while spreading callers apart.
    pub fn delay(&self, retry: u32, rng: &mut impl Rng) -> Duration {
        if self.fixed {
            return self.base;
        }
        let ceiling = self.ceiling(retry);
        let half = ceiling / 2;
        let spread = ceiling.saturating_sub(half).as_nanos() as u64;
        let extra = if spread == 0 { 0 } else { rng.random_range(0..=spread) };
        half + Duration::from_nanos(extra)
    }

    /// Whether another attempt follows attempt number `attempt` (1-based).
    pub fn should_retry(&self, attempt: u32, transient: bool) -> bool {
        transient && attempt < self.max_attempts
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn ceiling_doubles_then_caps() {
        let p = RetryPolicy {
            max_attempts: 5,
            base: Duration::from_millis(100),
            max: Duration::from_millis(500),
            fixed: false,
        };
        let got: Vec<u128> = (0..5).map(|r| p.ceiling(r).as_millis()).collect();
        assert_eq!(got, vec![100, 200, 400, 500, 500]);
        assert_eq!(p.ceiling(u32::MAX), Duration::from_millis(500));
    }

    #[test]
    fn delay_stays_in_upper_half_and_varies() {
        let p = RetryPolicy::default();
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..200 {
            let d = p.delay(2, &mut rng);
            assert!(d >= Duration::from_millis(200) && d <= Duration::from_millis(400), "{d:?}");
            seen.insert(d.as_micros());
        }
        assert!(seen.len() > 50, "jitter should spread delays, got {} distinct", seen.len());
    }

    #[test]
    fn a_store_s_retry_settings_replace_the_defaults() {
        use keyward_crds::rules::StoreRetry;
        let d = RetryPolicy::default();
        let p = d.for_store(StoreRetry { max_retries: Some(5), retry_interval: Some(Duration::from_secs(2)) });
        assert_eq!(p.max_attempts, 6, "five retries after the first attempt");
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        for retry in 0..5 {
            assert_eq!(p.delay(retry, &mut rng), Duration::from_secs(2), "a fixed interval, no backoff");
        }
        assert!(p.should_retry(5, true) && !p.should_retry(6, true));
        let none = d.for_store(StoreRetry { max_retries: Some(0), retry_interval: None });
        assert!(!none.should_retry(1, true), "maxRetries 0: one attempt");
        assert_eq!((none.base, none.fixed), (d.base, false), "the interval keeps the default backoff");
        let interval_only =
            d.for_store(StoreRetry { max_retries: None, retry_interval: Some(Duration::from_millis(10)) });
        assert_eq!(interval_only.max_attempts, d.max_attempts);
    }

    #[test]
    fn only_transient_errors_are_retried_and_only_up_to_the_limit() {
        let p = RetryPolicy::default();
        assert!(p.should_retry(1, true));
        assert!(p.should_retry(2, true));
        assert!(!p.should_retry(3, true));
        assert!(!p.should_retry(1, false));
    }
}
