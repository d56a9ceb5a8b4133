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

/// ExternalSecrets by namespace, then name; and their data hashes by namespace and Secret.
#[derive(Debug, Default)]
pub struct InjectionIndex {
    targets: HashMap<String, BTreeMap<String, EsTarget>>,
    /// Namespace, then Secret name, then the names of the ExternalSecrets targeting that
    /// Secret that carry a data hash (sorted, so the answer is deterministic) and the hash.
    /// Kept with `targets`, so that a lookup by Secret costs no scan of the namespace.
    hashes: HashMap<String, HashMap<String, BTreeMap<String, String>>>,
}

impl InjectionIndex {
    /// The state of ExternalSecret `name` in `namespace`.
    pub fn target(&self, namespace: &str, name: &str) -> TargetState {
        self.targets.get(namespace).and_then(|m| m.get(name)).map_or(TargetState::Missing, |t| t.state.clone())
    }

    /// The data hash of Secret `secret` in `namespace`, as written by the ExternalSecret that
    /// creates it (the first by name when several target it).
    pub fn data_hash(&self, namespace: &str, secret: &str) -> Option<&str> {
        self.hashes.get(namespace)?.get(secret)?.values().next().map(String::as_str)
    }

    /// Records an ExternalSecret (as JSON).
    pub fn upsert_external_secret(&mut self, namespace: &str, name: &str, object: &Value) {
        let target = es_target(name, object);
        let hashed = target_secret(&target.state).zip(target.data_hash.as_deref());
        let hashed = hashed.map(|(secret, hash)| (secret.to_string(), hash.to_string()));
        let previous = self.targets.entry(namespace.to_string()).or_default().insert(name.to_string(), target);
        if let Some(previous) = previous {
            self.forget_hash(namespace, name, &previous);
        }
        if let Some((secret, hash)) = hashed {
            let by_secret = self.hashes.entry(namespace.to_string()).or_default();
            by_secret.entry(secret).or_default().insert(name.to_string(), hash);
        }
    }

    /// Forgets an ExternalSecret.
    pub fn remove_external_secret(&mut self, namespace: &str, name: &str) {
        if let Some(m) = self.targets.get_mut(namespace) {
            let removed = m.remove(name);
            if m.is_empty() {
                self.targets.remove(namespace);
            }
            if let Some(removed) = removed {
                self.forget_hash(namespace, name, &removed);
            }
        }
    }

    /// Drops every ExternalSecret before a relist.
    pub fn clear_external_secrets(&mut self) {
        self.targets.clear();
        self.hashes.clear();
    }

    /// Removes the data-hash entry `old` (ExternalSecret `name`'s earlier state) put in.
    fn forget_hash(&mut self, namespace: &str, name: &str, old: &EsTarget) {
        let Some(secret) = target_secret(&old.state) else {
            return;
        };
        let Some(by_secret) = self.hashes.get_mut(namespace) else {
            return;
        };
        if let Some(names) = by_secret.get_mut(secret) {
            names.remove(name);
            if names.is_empty() {
                by_secret.remove(secret);
            }
        }
        if by_secret.is_empty() {
            self.hashes.remove(namespace);
        }
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

    /// The answer `data_hash` gives, computed by scanning every ExternalSecret of the namespace.
    fn scanned<'a>(idx: &'a InjectionIndex, namespace: &str, secret: &str) -> Option<&'a str> {
        idx.targets
            .get(namespace)?
            .values()
            .filter(|t| target_secret(&t.state) == Some(secret))
            .find_map(|t| t.data_hash.as_deref())
    }

    #[test]
    fn the_secret_index_answers_as_a_scan_would_through_every_change() {
        let mut idx = InjectionIndex::default();
        let es = |target: &str, policy: &str, hash: Option<&str>| {
            json!({"spec": {"target": {"name": target, "creationPolicy": policy}},
                   "status": {"syncedDataHash": hash}})
        };
        let namespaces = ["a", "b"];
        let names = ["db", "api", "cache", "zz"];
        let secrets = ["s1", "s2", "db"];
        let policies = ["Owner", "Orphan", "Merge", "None"];
        let hashes = [Some("h1"), Some("h2"), None];
        let check = |idx: &InjectionIndex, step: usize| {
            for ns in namespaces.iter().chain(&["c"]) {
                for secret in secrets.iter().chain(&["api", "cache", "zz"]) {
                    assert_eq!(idx.data_hash(ns, secret), scanned(idx, ns, secret), "step {step}: {ns}/{secret}");
                }
            }
        };
        // A deterministic walk over upserts (moving targets, changing policies and hashes),
        // removals and a relist.
        let mut x: usize = 7;
        for step in 0..2000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let pick = |n: usize, shift: u32| (x >> shift) % n;
            let (ns, name) = (namespaces[pick(2, 11)], names[pick(4, 17)]);
            match pick(10, 23) {
                0 => idx.remove_external_secret(ns, name),
                1 if step % 500 == 0 => idx.clear_external_secrets(),
                2 => idx.upsert_external_secret(ns, name, &json!({"status": {"syncedDataHash": "h3"}})),
                _ => idx.upsert_external_secret(
                    ns,
                    name,
                    &es(secrets[pick(3, 29)], policies[pick(4, 37)], hashes[pick(3, 43)]),
                ),
            }
            check(&idx, step);
        }
        // Two ExternalSecrets creating one Secret: the first by name answers, as the scan did.
        idx.clear_external_secrets();
        idx.upsert_external_secret("a", "zz", &es("shared", "Owner", Some("h-zz")));
        idx.upsert_external_secret("a", "aa", &es("shared", "Owner", Some("h-aa")));
        assert_eq!(idx.data_hash("a", "shared"), Some("h-aa"));
        idx.remove_external_secret("a", "aa");
        assert_eq!(idx.data_hash("a", "shared"), Some("h-zz"));
        idx.remove_external_secret("a", "zz");
        assert!(idx.hashes.is_empty() && idx.targets.is_empty(), "nothing left behind: {:?}", idx.hashes);
    }

    #[test]
    fn data_hash_reads_the_secret_index_not_the_namespace() {
        let mut idx = InjectionIndex::default();
        for i in 0..5000 {
            let target =
                json!({"spec": {"target": {"name": format!("s-{i}")}}, "status": {"syncedDataHash": format!("h-{i}")}});
            idx.upsert_external_secret("a", &format!("es-{i}"), &target);
        }
        assert_eq!(idx.hashes["a"].len(), 5000);
        assert_eq!(idx.hashes["a"]["s-42"], BTreeMap::from([("es-42".to_string(), "h-42".to_string())]));
        // With the per-name entries gone, the answer still comes: it is looked up by Secret.
        idx.targets.clear();
        assert_eq!(idx.data_hash("a", "s-4999"), Some("h-4999"));
        assert_eq!(idx.data_hash("a", "s-5000"), None);
    }
}
