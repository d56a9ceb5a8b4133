//! What injection and reload decisions need, kept small: for each ExternalSecret its target
//! Secret name, its Ready state and the data hash its last sync wrote. All of it comes from the
//! ExternalSecret itself, so the webhook never watches or reads a Secret.

use std::collections::{BTreeMap, HashMap};

use keyward_crds::external_secret::CreationPolicy;
use keyward_crds::workload::{TargetState, target_state};
use serde_json::Value;

/// An ExternalSecret as injection sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EsTarget {
    /// Name of the Secret it writes, and what its status says about it.
    pub state: TargetState,
    /// The data hash of the Secret it created (`status.syncedDataHash`); `None` when it does not
    /// create its Secret (creationPolicy Merge or None) or has not written it yet.
    pub data_hash: Option<String>,
}

/// ExternalSecrets by namespace, then name (sorted, so a lookup by Secret is deterministic).
#[derive(Debug, Default)]
pub struct InjectionIndex {
    targets: HashMap<String, BTreeMap<String, EsTarget>>,
}

impl InjectionIndex {
    /// The state of ExternalSecret `name` in `namespace`.
    pub fn target(&self, namespace: &str, name: &str) -> TargetState {
        self.targets.get(namespace).and_then(|m| m.get(name)).map_or(TargetState::Missing, |t| t.state.clone())
    }

    /// The data hash of Secret `secret` in `namespace`, as written by the ExternalSecret that
    /// creates it.
    pub fn data_hash(&self, namespace: &str, secret: &str) -> Option<&str> {
        self.targets
            .get(namespace)?
            .values()
            .filter(|t| target_secret(&t.state) == Some(secret))
            .find_map(|t| t.data_hash.as_deref())
    }

    /// Records an ExternalSecret (as JSON).
    pub fn upsert_external_secret(&mut self, namespace: &str, name: &str, object: &Value) {
        self.targets.entry(namespace.to_string()).or_default().insert(name.to_string(), es_target(name, object));
    }

    /// Forgets an ExternalSecret.
    pub fn remove_external_secret(&mut self, namespace: &str, name: &str) {
        if let Some(m) = self.targets.get_mut(namespace) {
            m.remove(name);
            if m.is_empty() {
                self.targets.remove(namespace);
            }
        }
    }

    /// Drops every ExternalSecret before a relist.
    pub fn clear_external_secrets(&mut self) {
        self.targets.clear();
    }
}

fn target_secret(state: &TargetState) -> Option<&str> {
    match state {
        TargetState::Synced { secret } | TargetState::NotSynced { secret, .. } | TargetState::Stale { secret, .. } => {
            Some(secret)
        }
        TargetState::Missing => None,
    }
}

/// The target, Ready state and data hash of an ExternalSecret. Lenient: a missing or odd
/// status reads as "not synced yet".
fn es_target(name: &str, object: &Value) -> EsTarget {
    let secret = object
        .pointer("/spec/target/name")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .unwrap_or(name)
        .to_string();
    let ready = object
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c.get("type").and_then(Value::as_str) == Some("Ready")));
    let field = |c: &'_ Value, f: &str| c.get(f).and_then(Value::as_str).unwrap_or_default().to_string();
    let ready = ready.map(|c| (field(c, "status"), field(c, "reason"), field(c, "message")));
    let bound = object.pointer("/status/binding/name").and_then(Value::as_str);
    let state = target_state(secret, ready.as_ref().map(|(s, r, m)| (s.as_str(), r.as_str(), m.as_str())), bound);
    let policy: CreationPolicy = object
        .pointer("/spec/target/creationPolicy")
        .and_then(|p| serde_json::from_value(p.clone()).ok())
        .unwrap_or_default();
    let data_hash = policy
        .manages_target()
        .then(|| object.pointer("/status/syncedDataHash").and_then(Value::as_str))
        .flatten()
        .map(str::to_string);
    EsTarget { state, data_hash }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn target_states_follow_the_ready_condition() {
        let mut idx = InjectionIndex::default();
        assert_eq!(idx.target("a", "db"), TargetState::Missing);
        idx.upsert_external_secret("a", "db", &json!({"spec": {"target": {"name": "db-secret"}}}));
        assert!(matches!(idx.target("a", "db"), TargetState::NotSynced { ref secret, ref why }
            if secret == "db-secret" && why.contains("has not synced")));
        idx.upsert_external_secret(
            "a",
            "db",
            &json!({"spec": {}, "status": {"conditions": [{"type": "Ready", "status": "False",
                "reason": "SecretSyncedError", "message": "provider unavailable"}]}}),
        );
        assert_eq!(
            idx.target("a", "db"),
            TargetState::NotSynced {
                secret: "db".into(),
                why: "Ready=False, reason SecretSyncedError: provider unavailable".into()
            }
        );
        idx.upsert_external_secret(
            "a",
            "db",
            &json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
        );
        assert_eq!(idx.target("a", "db"), TargetState::Synced { secret: "db".into() });
        assert_eq!(idx.target("b", "db"), TargetState::Missing, "namespaced");
        // Failing after a good sync, its Secret still bound: stale, not missing.
        idx.upsert_external_secret(
            "a",
            "db",
            &json!({"status": {"binding": {"name": "db"}, "conditions": [{"type": "Ready", "status": "False",
                "reason": "SecretSyncedError", "message": "provider unavailable"}]}}),
        );
        assert!(matches!(idx.target("a", "db"), TargetState::Stale { ref secret, .. } if secret == "db"));
        idx.remove_external_secret("a", "db");
        assert_eq!(idx.target("a", "db"), TargetState::Missing);
    }

    #[test]
    fn data_hashes_come_from_the_external_secret_that_creates_the_secret() {
        let mut idx = InjectionIndex::default();
        let es = |policy: &str, hash: &str| {
            json!({"spec": {"target": {"name": "db-secret", "creationPolicy": policy}},
                   "status": {"syncedDataHash": hash}})
        };
        idx.upsert_external_secret("a", "db", &es("Owner", "h1"));
        assert_eq!(idx.data_hash("a", "db-secret"), Some("h1"));
        assert_eq!(idx.data_hash("a", "db"), None, "looked up by Secret name, not ExternalSecret name");
        assert_eq!(idx.data_hash("b", "db-secret"), None, "namespaced");
        idx.upsert_external_secret("a", "db", &es("Orphan", "h2"));
        assert_eq!(idx.data_hash("a", "db-secret"), Some("h2"));
        // A Secret merged into belongs to someone else: it does not count for rollouts.
        idx.upsert_external_secret("a", "db", &es("Merge", "h3"));
        assert_eq!(idx.data_hash("a", "db-secret"), None);
        // The default policy is Owner.
        idx.upsert_external_secret("a", "db", &json!({"status": {"syncedDataHash": "h4"}}));
        assert_eq!(idx.data_hash("a", "db"), Some("h4"));
        idx.remove_external_secret("a", "db");
        assert_eq!(idx.data_hash("a", "db"), None);
        idx.upsert_external_secret("a", "db", &es("Owner", "h1"));
        idx.clear_external_secrets();
        assert_eq!(idx.data_hash("a", "db-secret"), None);
    }
}
