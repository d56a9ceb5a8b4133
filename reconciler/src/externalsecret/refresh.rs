//! When an ExternalSecret is fetched again: the refresh policy, the interval, the `force-sync`
//! annotation (part of the hash), and a per-object jitter so objects synced together (after a
//! restart, or created in bulk) do not all come due at the same instant.

use std::time::Duration;

use keyward_crds::ExternalSecret;
use keyward_crds::external_secret::RefreshPolicy;
use keyward_crds::rules::WindowGate;
use kube::ResourceExt;
use sha2::{Digest, Sha256};

/// What to do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Fetch and write now.
    Sync,
    /// Nothing to do before this long.
    Wait(Duration),
    /// Nothing to do until the object changes.
    Never,
}

/// Inputs of the decision.
#[derive(Debug, Clone, Copy)]
pub struct RefreshState<'a> {
    /// `spec.refreshPolicy` (omitted means Periodic).
    pub policy: Option<RefreshPolicy>,
    /// `spec.refreshInterval`, parsed.
    pub interval: Duration,
    /// Seconds since the last successful fetch, if there was one.
    pub since_last_refresh: Option<Duration>,
    /// `status.syncedResourceVersion`.
    pub synced_hash: Option<&'a str>,
    /// The hash of the object now.
    pub current_hash: &'a str,
    /// Whether a target Secret is expected and missing.
    pub target_missing: bool,
    /// This object's share of the jitter window.
    pub jitter: Duration,
    /// What `spec.syncWindows` say of a periodic refresh now (`Open` without windows).
    pub window: WindowGate,
}

/// The refresh decision.
pub fn decide(s: RefreshState<'_>) -> Decision {
    if s.target_missing {
        return Decision::Sync;
    }
    let (Some(synced), Some(elapsed)) = (s.synced_hash, s.since_last_refresh) else {
        return Decision::Sync;
    };
    // CreatedOnce syncs once per ExternalSecret (its own status records that it did, as
    // upstream): neither a spec nor an annotation change syncs again, only a missing target.
    let policy = s.policy.unwrap_or(RefreshPolicy::Periodic);
    if policy == RefreshPolicy::CreatedOnce {
        return Decision::Never;
    }
    if synced != s.current_hash {
        return Decision::Sync;
    }
    match policy {
        RefreshPolicy::CreatedOnce | RefreshPolicy::OnChange => Decision::Never,
        RefreshPolicy::Periodic if s.interval.is_zero() => Decision::Never,
        RefreshPolicy::Periodic => {
            let due = s.interval + s.jitter;
            match s.window {
                _ if elapsed < due => Decision::Wait(due - elapsed),
                WindowGate::Open => Decision::Sync,
                WindowGate::Closed(reopens) => Decision::Wait(reopens),
            }
        }
    }
}

/// How old a store answer a sync accepts (its provider calls' `max_age_millis`): a quarter of
/// the refresh interval for a periodic refresh, a retry and a first sync; none for a sync the
/// object's own change asked for (a spec edit, `force-sync`), which reads the store anew.
///
/// ExternalSecrets reading one secret refresh spread over their jitter window (a tenth of the
/// interval) plus the spread of their first syncs (8 s for 1,000 at once, 41 s for 10,000), so a
/// tenth alone made two or more reads per secret per cycle; a quarter covers both for intervals of
/// a few minutes and more. A value changed in the store reaches the Secret within 1.35 refresh
/// intervals at most (the interval, its jitter and this age), and a `force-sync` at once.
pub fn read_max_age(s: &RefreshState<'_>) -> Duration {
    match s.synced_hash {
        Some(synced) if synced != s.current_hash => Duration::ZERO,
        _ => s.interval / 4,
    }
}

/// A stable per-object jitter in `[0, interval / 10)`, derived from the object's UID so every
/// reconcile of the same object agrees on it.
pub fn jitter(uid: &str, interval: Duration) -> Duration {
    let digest = Sha256::digest(uid.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    let fraction = u64::from_be_bytes(first) as f64 / u64::MAX as f64;
    interval.mul_f64(0.1 * fraction)
}

/// The hash recorded as `status.syncedResourceVersion`: the generation plus labels and
/// annotations, so a changed `force-sync` annotation forces a refresh.
pub fn object_hash(es: &ExternalSecret) -> String {
    let mut h = Sha256::new();
    h.update(es.metadata.generation.unwrap_or_default().to_be_bytes());
    for (k, v) in es.labels().iter().chain(es.annotations().iter()) {
        // The last-applied annotation mirrors the spec, which the generation already covers.
        if k == "kubectl.kubernetes.io/last-applied-configuration" {
            continue;
        }
        h.update(k.as_bytes());
        h.update([0]);
        h.update(v.as_bytes());
        h.update([0]);
    }
    format!("{}-{}", es.metadata.generation.unwrap_or_default(), &hex::encode(h.finalize())[..16])
}

#[cfg(test)]
mod tests {
    use super::*;
    use keyward_crds::external_secret::FORCE_SYNC_ANNOTATION;

    fn state(policy: Option<RefreshPolicy>) -> RefreshState<'static> {
        RefreshState {
            policy,
            interval: Duration::from_secs(60),
            since_last_refresh: Some(Duration::from_secs(10)),
            synced_hash: Some("h"),
            current_hash: "h",
            target_missing: false,
            jitter: Duration::from_secs(3),
            window: WindowGate::Open,
        }
    }

    #[test]
    fn a_periodic_refresh_accepts_a_quarter_of_its_interval_and_a_change_nothing() {
        let s = state(None);
        assert_eq!(read_max_age(&s), s.interval / 4);
        assert_eq!(read_max_age(&RefreshState { synced_hash: None, ..s }), s.interval / 4, "first sync");
        assert_eq!(read_max_age(&RefreshState { current_hash: "new", ..s }), Duration::ZERO, "spec or force-sync");
        assert_eq!(read_max_age(&RefreshState { interval: Duration::ZERO, ..s }), Duration::ZERO);
    }

    #[test]
    fn decision_table() {
        use RefreshPolicy::*;
        let s = state(None);
        assert_eq!(decide(s), Decision::Wait(Duration::from_secs(53)));
        assert_eq!(decide(RefreshState { since_last_refresh: Some(Duration::from_secs(63)), ..s }), Decision::Sync);
        assert_eq!(decide(RefreshState { current_hash: "new", ..s }), Decision::Sync, "spec or force-sync change");
        assert_eq!(decide(RefreshState { target_missing: true, ..s }), Decision::Sync);
        assert_eq!(decide(RefreshState { synced_hash: None, ..s }), Decision::Sync);
        assert_eq!(decide(RefreshState { interval: Duration::ZERO, ..s }), Decision::Never);
        for p in [OnChange, CreatedOnce] {
            let s = state(Some(p));
            assert_eq!(
                decide(RefreshState { since_last_refresh: Some(Duration::from_secs(1000)), ..s }),
                Decision::Never
            );
            assert_eq!(decide(RefreshState { target_missing: true, ..s }), Decision::Sync);
            assert_eq!(decide(RefreshState { synced_hash: None, ..s }), Decision::Sync, "never synced");
            assert_eq!(decide(RefreshState { since_last_refresh: None, ..s }), Decision::Sync, "no refresh time");
        }
        assert_eq!(decide(RefreshState { current_hash: "x", ..state(Some(OnChange)) }), Decision::Sync);
        assert_eq!(
            decide(RefreshState { current_hash: "x", ..state(Some(CreatedOnce)) }),
            Decision::Never,
            "CreatedOnce ignores spec and force-sync changes once synced"
        );
    }

    #[test]
    fn a_closed_sync_window_holds_only_the_periodic_refresh() {
        let closed = RefreshState { window: WindowGate::Closed(Duration::from_secs(90)), ..state(None) };
        assert_eq!(decide(closed), Decision::Wait(Duration::from_secs(53)), "not due yet: the interval decides");
        let due = RefreshState { since_last_refresh: Some(Duration::from_secs(63)), ..closed };
        assert_eq!(decide(due), Decision::Wait(Duration::from_secs(90)), "due, held until the window changes");
        assert_eq!(decide(RefreshState { current_hash: "new", ..due }), Decision::Sync, "a spec change goes through");
        assert_eq!(decide(RefreshState { target_missing: true, ..due }), Decision::Sync, "a missing target too");
    }

    #[test]
    fn jitter_is_stable_bounded_and_spread() {
        let i = Duration::from_secs(3600);
        assert_eq!(jitter("a", i), jitter("a", i));
        let all: Vec<Duration> = (0..1000).map(|n| jitter(&format!("uid-{n}"), i)).collect();
        assert!(all.iter().all(|j| *j < Duration::from_secs(360)));
        let early = all.iter().filter(|j| **j < Duration::from_secs(180)).count();
        assert!((350..650).contains(&early), "jitter should be spread, {early} of 1000 in the first half");
    }

    #[test]
    fn force_sync_annotation_changes_the_hash() {
        let mut es = ExternalSecret::new("a", Default::default());
        es.metadata.generation = Some(3);
        let before = object_hash(&es);
        assert!(before.starts_with("3-"));
        es.annotations_mut().insert(FORCE_SYNC_ANNOTATION.into(), "1".into());
        assert_ne!(object_hash(&es), before);
    }
}
