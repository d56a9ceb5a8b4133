//! What needs rotating, and when: pure decisions over the state of the CA and the leaf Secrets.
//! The certificate loop ([`crate::manager`]) reads the cluster, asks these functions, and acts.
//!
//! The CA rotates in three steps so that trust never breaks:
//!
//! 1. **stage** — shortly before the active CA expires, a next CA is generated and added to the
//!    trust bundle (`ca.crt`, `caBundle`); leaves are still signed by the active CA;
//! 2. **promote** — after `ca_overlap` (time for every reader to load the bundle holding both),
//!    the next CA becomes the signing CA and every leaf is re-issued by it;
//! 3. **trim** — after another `ca_overlap` (time for every reader to load its new leaf), the old
//!    CA leaves the bundle.

use std::time::Duration;

use time::OffsetDateTime;

/// Validity and rotation thresholds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    /// Lifetime of a new CA.
    pub ca_validity: Duration,
    /// Stage the next CA when the active one has less than this left.
    pub ca_renew_before: Duration,
    /// How long both CAs are trusted before the switch, and before the old one is dropped.
    pub ca_overlap: Duration,
    /// Lifetime of a new leaf certificate (capped by the signing CA's own expiry).
    pub leaf_validity: Duration,
    /// Re-issue a leaf when it has less than this left.
    pub leaf_renew_before: Duration,
}

impl Default for Policy {
    fn default() -> Self {
        const DAY: u64 = 86_400;
        Policy {
            ca_validity: Duration::from_secs(5 * 365 * DAY),
            ca_renew_before: Duration::from_secs(180 * DAY),
            ca_overlap: Duration::from_secs(10 * 60),
            leaf_validity: Duration::from_secs(90 * DAY),
            leaf_renew_before: Duration::from_secs(30 * DAY),
        }
    }
}

/// Why a policy cannot work.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PolicyError {
    /// A leaf would be re-issued as soon as it is issued.
    #[error("leaf renew-before ({renew:?}) must be shorter than leaf validity ({validity:?})")]
    Leaf {
        /// `leaf_renew_before`
        renew: Duration,
        /// `leaf_validity`
        validity: Duration,
    },
    /// The CA would be replaced as soon as it is made, or the overlap cannot fit.
    #[error(
        "CA renew-before ({renew:?}) must be shorter than CA validity ({validity:?}) and longer than twice the overlap ({overlap:?})"
    )]
    Ca {
        /// `ca_renew_before`
        renew: Duration,
        /// `ca_validity`
        validity: Duration,
        /// `ca_overlap`
        overlap: Duration,
    },
}

impl Policy {
    /// Checks that the thresholds leave room for every step.
    pub fn validate(&self) -> Result<(), PolicyError> {
        if self.leaf_renew_before >= self.leaf_validity {
            return Err(PolicyError::Leaf { renew: self.leaf_renew_before, validity: self.leaf_validity });
        }
        if self.ca_renew_before >= self.ca_validity || self.ca_renew_before <= self.ca_overlap * 2 {
            return Err(PolicyError::Ca {
                renew: self.ca_renew_before,
                validity: self.ca_validity,
                overlap: self.ca_overlap,
            });
        }
        Ok(())
    }
}

/// What the loop knows about the CA Secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaState {
    /// Expiry of the signing CA.
    pub active_not_after: OffsetDateTime,
    /// A next CA is staged (in the bundle, not signing yet).
    pub has_next: bool,
    /// The bundle holds CAs other than the active and the staged one (a previous CA).
    pub bundle_has_previous: bool,
    /// When the last CA step (stage, promote) happened.
    pub phase_since: OffsetDateTime,
}

/// What to do with the CA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CaAction {
    /// Nothing.
    Keep,
    /// There is no usable CA: make one (the bundle starts over with it).
    Create,
    /// Generate the next CA and add it to the bundle.
    StageNext,
    /// Sign with the staged CA from now on (leaves follow).
    PromoteNext,
    /// Drop the previous CA from the bundle.
    TrimBundle,
}

/// Decides the CA step. `state` is `None` when the CA Secret is missing or unreadable.
pub fn ca_action(state: Option<&CaState>, policy: &Policy, now: OffsetDateTime) -> CaAction {
    let Some(state) = state else { return CaAction::Create };
    let remaining = state.active_not_after - now;
    let overlap_done = now - state.phase_since >= policy.ca_overlap;
    if state.has_next {
        // Promote after the overlap, or at once when the active CA is about to be useless.
        return if overlap_done || remaining <= policy.ca_overlap { CaAction::PromoteNext } else { CaAction::Keep };
    }
    if remaining <= time::Duration::ZERO {
        return CaAction::Create;
    }
    if remaining < policy.ca_renew_before {
        return CaAction::StageNext;
    }
    if state.bundle_has_previous && overlap_done {
        return CaAction::TrimBundle;
    }
    CaAction::Keep
}

/// What the loop knows about one leaf Secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeafState {
    /// Expiry of the leaf certificate.
    pub not_after: OffsetDateTime,
    /// The leaf is signed by the current signing CA.
    pub signed_by_active: bool,
    /// The leaf's names are exactly the wanted ones.
    pub names_match: bool,
    /// The Secret's `ca.crt` is the current bundle.
    pub bundle_current: bool,
}

/// Why a leaf is (re-)issued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IssueReason {
    /// The Secret is missing or holds no readable certificate.
    Missing,
    /// Signed by a CA that no longer signs.
    CaChanged,
    /// The wanted names changed (a service was renamed).
    NamesChanged,
    /// Less than `leaf_renew_before` left.
    Expiring,
}

/// What to do with a leaf.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeafAction {
    /// Nothing.
    Keep,
    /// Issue a new certificate and key.
    Issue(IssueReason),
    /// Keep the certificate, rewrite `ca.crt` with the current bundle.
    RefreshBundle,
}

/// Decides the step for one leaf. `state` is `None` when the Secret is missing or unreadable.
pub fn leaf_action(state: Option<&LeafState>, policy: &Policy, now: OffsetDateTime) -> LeafAction {
    let Some(state) = state else { return LeafAction::Issue(IssueReason::Missing) };
    if !state.signed_by_active {
        return LeafAction::Issue(IssueReason::CaChanged);
    }
    if !state.names_match {
        return LeafAction::Issue(IssueReason::NamesChanged);
    }
    if state.not_after - now < policy.leaf_renew_before {
        return LeafAction::Issue(IssueReason::Expiring);
    }
    if !state.bundle_current {
        return LeafAction::RefreshBundle;
    }
    LeafAction::Keep
}

/// Lifetime of a leaf issued now: the policy's, but never past the signing CA's own expiry.
pub fn leaf_validity(policy: &Policy, ca_not_after: OffsetDateTime, now: OffsetDateTime) -> Duration {
    let ca_left = Duration::try_from(ca_not_after - now).unwrap_or(Duration::ZERO);
    policy.leaf_validity.min(ca_left)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: Duration = Duration::from_secs(60);
    const DAY: Duration = Duration::from_secs(86_400);

    fn policy() -> Policy {
        Policy {
            ca_validity: 365 * DAY,
            ca_renew_before: 30 * DAY,
            ca_overlap: 10 * MIN,
            leaf_validity: 90 * DAY,
            leaf_renew_before: 30 * DAY,
        }
    }

    fn now() -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp(1_800_000_000).expect("timestamp")
    }

    fn ca(left: Duration, has_next: bool, previous: bool, since_ago: Duration) -> CaState {
        CaState {
            active_not_after: now() + left,
            has_next,
            bundle_has_previous: previous,
            phase_since: now() - since_ago,
        }
    }

    fn leaf(left: Duration) -> LeafState {
        LeafState { not_after: now() + left, signed_by_active: true, names_match: true, bundle_current: true }
    }

    #[test]
    fn default_policy_is_valid() {
        Policy::default().validate().expect("default policy");
        policy().validate().expect("test policy");
    }

    #[test]
    fn policies_without_room_are_refused() {
        let p = Policy { leaf_renew_before: 90 * DAY, ..policy() };
        assert!(matches!(p.validate(), Err(PolicyError::Leaf { .. })));
        let p = Policy { ca_renew_before: 365 * DAY, ..policy() };
        assert!(matches!(p.validate(), Err(PolicyError::Ca { .. })));
        let p = Policy { ca_overlap: 15 * DAY, ..policy() };
        assert!(matches!(p.validate(), Err(PolicyError::Ca { .. })));
    }

    #[test]
    fn a_missing_or_expired_ca_is_created() {
        assert_eq!(ca_action(None, &policy(), now()), CaAction::Create);
        let expired = CaState { active_not_after: now() - MIN, ..ca(DAY, false, false, DAY) };
        assert_eq!(ca_action(Some(&expired), &policy(), now()), CaAction::Create);
    }

    #[test]
    fn a_healthy_ca_is_kept() {
        assert_eq!(ca_action(Some(&ca(200 * DAY, false, false, DAY)), &policy(), now()), CaAction::Keep);
    }

    #[test]
    fn the_ca_walks_stage_promote_trim_with_an_overlap_between_steps() {
        let p = policy();
        // Inside renew-before: stage the next CA.
        assert_eq!(ca_action(Some(&ca(29 * DAY, false, false, 100 * DAY)), &p, now()), CaAction::StageNext);
        // Staged a minute ago: wait for the overlap.
        assert_eq!(ca_action(Some(&ca(29 * DAY, true, false, MIN)), &p, now()), CaAction::Keep);
        // Overlap over: promote.
        assert_eq!(ca_action(Some(&ca(29 * DAY, true, false, 10 * MIN)), &p, now()), CaAction::PromoteNext);
        // Promoted a minute ago (the old CA is now "previous"): keep both trusted.
        assert_eq!(ca_action(Some(&ca(365 * DAY, false, true, MIN)), &p, now()), CaAction::Keep);
        // Second overlap over: trim.
        assert_eq!(ca_action(Some(&ca(365 * DAY, false, true, 11 * MIN)), &p, now()), CaAction::TrimBundle);
    }

    #[test]
    fn a_staged_ca_is_promoted_early_when_the_active_one_is_about_to_expire() {
        assert_eq!(ca_action(Some(&ca(5 * MIN, true, false, MIN)), &policy(), now()), CaAction::PromoteNext);
    }

    #[test]
    fn leaves_are_issued_when_missing_expiring_renamed_or_signed_by_an_old_ca() {
        let p = policy();
        assert_eq!(leaf_action(None, &p, now()), LeafAction::Issue(IssueReason::Missing));
        assert_eq!(leaf_action(Some(&leaf(60 * DAY)), &p, now()), LeafAction::Keep);
        assert_eq!(leaf_action(Some(&leaf(29 * DAY)), &p, now()), LeafAction::Issue(IssueReason::Expiring));
        let expired = LeafState { not_after: now() - DAY, ..leaf(DAY) };
        assert_eq!(leaf_action(Some(&expired), &p, now()), LeafAction::Issue(IssueReason::Expiring));
        let old_ca = LeafState { signed_by_active: false, ..leaf(60 * DAY) };
        assert_eq!(leaf_action(Some(&old_ca), &p, now()), LeafAction::Issue(IssueReason::CaChanged));
        let renamed = LeafState { names_match: false, ..leaf(60 * DAY) };
        assert_eq!(leaf_action(Some(&renamed), &p, now()), LeafAction::Issue(IssueReason::NamesChanged));
    }

    #[test]
    fn a_stale_bundle_is_rewritten_without_a_new_key() {
        let stale = LeafState { bundle_current: false, ..leaf(60 * DAY) };
        assert_eq!(leaf_action(Some(&stale), &policy(), now()), LeafAction::RefreshBundle);
    }

    #[test]
    fn leaves_never_outlive_their_ca() {
        let p = policy();
        assert_eq!(leaf_validity(&p, now() + 365 * DAY, now()), 90 * DAY);
        assert_eq!(leaf_validity(&p, now() + 10 * DAY, now()), 10 * DAY);
        assert_eq!(leaf_validity(&p, now() - DAY, now()), Duration::ZERO);
    }
}
