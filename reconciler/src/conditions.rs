//! Status condition helpers shared by the controllers.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use keyward_crds::Condition;

/// Longest condition message written, in bytes. Messages quote what tenants and their servers
/// chose (keys, merge conflicts, server errors); a status patch past etcd's limit would fail on
/// every retry, logging the whole message each time.
pub const MAX_CONDITION_MESSAGE: usize = 4096;

/// `s` cut to at most `max` bytes, on a character boundary.
pub fn truncate(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut cut = max;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
    }
    s
}

/// A condition message within [`MAX_CONDITION_MESSAGE`], saying so when it was cut.
fn condition_message(message: String) -> String {
    if message.len() <= MAX_CONDITION_MESSAGE {
        return message;
    }
    let total = message.len();
    let suffix = format!(" … (cut from {total} bytes)");
    let mut cut = truncate(message, MAX_CONDITION_MESSAGE - suffix.len());
    cut.push_str(&suffix);
    cut
}

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
        message: Some(condition_message(message.into())),
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

    #[test]
    fn long_messages_are_cut_on_a_character_boundary_and_say_so() {
        let key = "é".repeat(3 * 1024 * 1024);
        let c = ready(&[], false, "SecretSyncedError", format!("key {key:?} is invalid"), None);
        let message = c.message.unwrap();
        assert!(message.len() <= MAX_CONDITION_MESSAGE, "{}", message.len());
        assert!(message.starts_with("key \"éé") && message.ends_with(&format!("(cut from {} bytes)", key.len() + 17)));
        assert_eq!(ready(&[], true, "SecretSynced", "ok", None).message.as_deref(), Some("ok"));
        assert_eq!(truncate("aé".to_string(), 2), "a", "never inside a character");
    }
}
