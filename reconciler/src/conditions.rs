//! Status condition helpers shared by the controllers.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use keyward_crds::Condition;

/// Builds a `Ready` condition, keeping the previous transition time when the status did not
/// change (so `lastTransitionTime` means what it says).
pub fn ready(
    previous: &[Condition],
    status: bool,
    reason: &str,
    message: impl Into<String>,
    generation: Option<i64>,
) -> Condition {
    let status = if status { "True" } else { "False" }.to_string();
    let last_transition_time = previous
        .iter()
        .find(|c| c.type_ == keyward_crds::common::CONDITION_READY && c.status == status)
        .and_then(|c| c.last_transition_time.clone())
        .or_else(|| Some(Time(Timestamp::now())));
    Condition {
        type_: keyward_crds::common::CONDITION_READY.to_string(),
        status,
        reason: Some(reason.to_string()),
        message: Some(message.into()),
        last_transition_time,
        observed_generation: generation,
    }
}

/// Whether two condition lists say the same thing (ignoring transition times).
pub fn same(a: &[Condition], b: &[Condition]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x.type_ == y.type_
                && x.status == y.status
                && x.reason == y.reason
                && x.message == y.message
                && x.observed_generation == y.observed_generation
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transition_time_kept_while_status_holds() {
        let first = ready(&[], false, "SecretSyncedError", "down", Some(1));
        let again = ready(std::slice::from_ref(&first), false, "SecretSyncedError", "still down", Some(1));
        assert_eq!(first.last_transition_time, again.last_transition_time);
        assert!(!same(std::slice::from_ref(&first), std::slice::from_ref(&again)));
        let flipped = ready(std::slice::from_ref(&first), true, "SecretSynced", "ok", Some(1));
        assert_eq!(flipped.status, "True");
        assert!(same(std::slice::from_ref(&first), std::slice::from_ref(&first)));
    }
}
