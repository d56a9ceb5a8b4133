//! What injection and reload decisions need, kept small: for each ExternalSecret its target
//! Secret name and Ready state, and for each Keyward-managed Secret its data hash (read from
//! an annotation, so Secrets are watched metadata-only and no secret value is ever cached).

use std::collections::{BTreeMap, HashMap};

use keyward_crds::workload::{DATA_HASH_ANNOTATION, TargetState};
use serde_json::Value;

/// An ExternalSecret as injection sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EsTarget {
    /// Name of the Secret it writes.
    pub secret: String,
    /// `None` when synced, else the Ready reason and message.
    pub not_synced: Option<String>,
}

/// (namespace, name) of an object.
type Key = (String, String);

/// ExternalSecret targets and managed Secret hashes.
#[derive(Debug, Default)]
pub struct InjectionIndex {
    targets: HashMap<Key, EsTarget>,
    data_hashes: HashMap<Key, String>,
}

fn key(namespace: &str, name: &str) -> Key {
    (namespace.to_string(), name.to_string())
}

impl InjectionIndex {
    /// The state of ExternalSecret `name` in `namespace`.
    pub fn target(&self, namespace: &str, name: &str) -> TargetState {
        match self.targets.get(&key(namespace, name)) {
            None => TargetState::Missing,
            Some(EsTarget { secret, not_synced: None }) => TargetState::Synced { secret: secret.clone() },
            Some(EsTarget { secret, not_synced: Some(why) }) => {
                TargetState::NotSynced { secret: secret.clone(), why: why.clone() }
            }
        }
    }

    /// The data hash of managed Secret `name` in `namespace`.
    pub fn data_hash(&self, namespace: &str, name: &str) -> Option<&str> {
        self.data_hashes.get(&key(namespace, name)).map(String::as_str)
    }

    /// Records an ExternalSecret (as JSON).
    pub fn upsert_external_secret(&mut self, namespace: &str, name: &str, object: &Value) {
        self.targets.insert(key(namespace, name), es_target(name, object));
    }

    /// Forgets an ExternalSecret.
    pub fn remove_external_secret(&mut self, namespace: &str, name: &str) {
        self.targets.remove(&key(namespace, name));
    }

    /// Drops every ExternalSecret before a relist.
    pub fn clear_external_secrets(&mut self) {
        self.targets.clear();
    }

    /// Records a managed Secret's annotations; one without a data hash is forgotten.
    pub fn upsert_secret(&mut self, namespace: &str, name: &str, annotations: &BTreeMap<String, String>) {
        match annotations.get(DATA_HASH_ANNOTATION) {
            Some(hash) => self.data_hashes.insert(key(namespace, name), hash.clone()),
            None => self.data_hashes.remove(&key(namespace, name)),
        };
    }

    /// Forgets a managed Secret.
    pub fn remove_secret(&mut self, namespace: &str, name: &str) {
        self.data_hashes.remove(&key(namespace, name));
    }

    /// Drops every managed Secret before a relist.
    pub fn clear_secrets(&mut self) {
        self.data_hashes.clear();
    }
}

/// The target and Ready state of an ExternalSecret. Lenient: a missing or odd status reads as
/// "not synced yet".
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
    let not_synced = match ready {
        Some(c) if c.get("status").and_then(Value::as_str) == Some("True") => None,
        Some(c) => {
            let field = |f: &str| c.get(f).and_then(Value::as_str).unwrap_or_default().to_string();
            Some(format!("Ready=False, reason {}: {}", field("reason"), field("message")))
        }
        None => Some("no Ready condition yet: the reconciler has not synced it".to_string()),
    };
    EsTarget { secret, not_synced }
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
        idx.remove_external_secret("a", "db");
        assert_eq!(idx.target("a", "db"), TargetState::Missing);
    }

    #[test]
    fn secrets_keep_only_their_data_hash() {
        let mut idx = InjectionIndex::default();
        let ann = |h: &str| [(DATA_HASH_ANNOTATION.to_string(), h.to_string())].into_iter().collect();
        idx.upsert_secret("a", "db", &ann("h1"));
        assert_eq!(idx.data_hash("a", "db"), Some("h1"));
        idx.upsert_secret("a", "db", &BTreeMap::new());
        assert_eq!(idx.data_hash("a", "db"), None);
        idx.upsert_secret("a", "db", &ann("h2"));
        idx.clear_secrets();
        assert_eq!(idx.data_hash("a", "db"), None);
    }
}
