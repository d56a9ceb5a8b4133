//! Admission as the webhook decides it: `keyward_webhook::offline::validate` over a
//! `keyward_webhook::offline::State` filled from the cluster or from manifest files, so the CLI
//! and the webhook cannot disagree on a rule.

use keyward_webhook::offline::{
    Kind, Operation, Request, State, cluster_provider_spec, cluster_secret_store_conditions, mutate, request_for,
    validate,
};
use kube::api::DynamicObject;
use serde::Serialize;
use serde_json::Value;

/// The webhook's answer for one object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verdict {
    /// Whether the webhook admits it.
    pub allowed: bool,
    /// The denial (field paths and what to do), when refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Warnings kubectl would print.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// The webhook's kind of an object, if Keyward admits objects of that kind.
pub fn admitted_kind(object: &Value) -> Option<Kind> {
    let api_version = object.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or_default();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    Kind::from_gvk(group, version, kind)
}

fn request(object: &Value, namespace: Option<&str>, existing: bool) -> Result<Request, String> {
    let operation = if existing { Operation::Update } else { Operation::Create };
    request_for(operation, namespace, object, existing.then_some(object))
}

/// `object` with the defaults the mutating webhook adds on create (the API server mutates
/// before it validates); other kinds unchanged.
pub fn defaulted(object: &Value, namespace: Option<&str>, state: &State) -> Value {
    let mut out = object.clone();
    if admitted_kind(object).is_none() {
        return out;
    }
    if let Ok(req) = request(object, namespace, false)
        && let Some(patch) = mutate(&req, state).patch
        && json_patch::patch(&mut out, &patch).is_err()
    {
        // A patch that does not apply leaves the object as written; validation judges that.
        return object.clone();
    }
    out
}

/// What the webhook answers to creating `object` in `namespace` (or, for an object read from
/// the cluster, `existing`, to updating it in place, which the mutating webhook has seen
/// already); `None` for a kind Keyward does not admit.
pub fn review(object: &Value, namespace: Option<&str>, existing: bool, state: &State) -> Option<Verdict> {
    admitted_kind(object)?;
    let object = if existing { object.clone() } else { defaulted(object, namespace, state) };
    let decision = match request(&object, namespace, existing) {
        Ok(req) => validate(&req, state),
        Err(e) => return Some(Verdict { allowed: false, message: Some(e), warnings: Vec::new() }),
    };
    Some(Verdict { allowed: decision.allowed, message: decision.message, warnings: decision.warnings })
}

/// Records in `state` what the webhook's caches would hold of `object` (a Namespace, a store, a
/// ClusterGenerator);
/// other kinds are ignored. `namespace` is the object's namespace, defaulted.
pub fn record(state: &mut State, object: &Value, namespace: &str) {
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or_default();
    let group = object.get("apiVersion").and_then(Value::as_str).unwrap_or_default().split('/').next();
    let name = object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    let dynamic = || serde_json::from_value::<DynamicObject>(object.clone()).map_err(|e| e.to_string());
    match (group, kind) {
        (Some("v1"), "Namespace") => {
            let labels = object.pointer("/metadata/labels").cloned().unwrap_or(Value::Null);
            state.namespaces.insert(name.to_string(), serde_json::from_value(labels).unwrap_or_default());
        }
        (Some("external-secrets.io"), "ClusterProvider") => {
            let spec = dynamic().and_then(|o| cluster_provider_spec(&o));
            state.cluster_providers.insert(name.to_string(), spec);
        }
        (Some("external-secrets.io"), "ClusterSecretStore") => {
            let conditions = dynamic().and_then(|o| cluster_secret_store_conditions(&o));
            state.cluster_secret_stores.insert(name.to_string(), conditions);
        }
        // As the webhook's watch reads them: their namespace conditions only.
        (Some("generators.external-secrets.io"), "ClusterGenerator") => {
            let conditions = dynamic().and_then(|o| cluster_secret_store_conditions(&o));
            state.cluster_generators.insert(name.to_string(), conditions);
        }
        (Some("external-secrets.io"), "Provider") => state.add_provider(namespace, name),
        (Some("external-secrets.io"), "SecretStore") => state.add_secret_store(namespace, name),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn yaml(s: &str) -> Value {
        serde_yaml::from_str(s).unwrap()
    }

    const ES: &str = "apiVersion: external-secrets.io/v1\nkind: ExternalSecret\nmetadata: {name: db, namespace: team-b}\n\
                      spec:\n  secretStoreRef: {name: shared, kind: ClusterProvider}\n  \
                      data: [{secretKey: p, remoteRef: {key: db}}]\n";

    #[test]
    fn a_cluster_provider_among_the_inputs_decides_the_namespace() {
        let mut state = State::default();
        let es = yaml(ES);
        let alone = review(&es, Some("team-b"), false, &state).unwrap();
        assert!(alone.allowed, "a store not known is a warning: {alone:?}");
        assert!(alone.warnings.iter().any(|w| w.contains("does not exist")), "{alone:?}");

        record(&mut state, &yaml("apiVersion: v1\nkind: Namespace\nmetadata: {name: team-b}\n"), "");
        let cp = "apiVersion: external-secrets.io/v1\nkind: ClusterProvider\nmetadata: {name: shared}\nspec:\n  \
                  config: {address: 'p.keyward.svc:8443', providerRef: {kind: Fake, name: f}}\n  \
                  conditions: [{namespaceSelector: {matchLabels: {access: allowed}}}]\n";
        let cp = defaulted(&yaml(cp), None, &state);
        record(&mut state, &cp, "");
        let refused = review(&es, Some("team-b"), false, &state).unwrap();
        assert!(!refused.allowed, "{refused:?}");
        let message = refused.message.unwrap();
        assert!(message.contains("spec.secretStoreRef") && message.contains("team-b"), "{message}");
    }

    #[test]
    fn cluster_generator_conditions_are_recorded_as_the_webhook_caches_them() {
        let mut state = State::default();
        record(&mut state, &yaml("apiVersion: v1\nkind: Namespace\nmetadata: {name: team-b}\n"), "");
        let generator = "apiVersion: generators.external-secrets.io/v1alpha1\nkind: ClusterGenerator\n\
                         metadata: {name: pw}\nspec:\n  kind: Password\n  generator: {passwordSpec: {length: 12}}\n  \
                         conditions: [{namespaces: [team-a]}]\n";
        record(&mut state, &yaml(generator), "");
        let es = yaml(
            "apiVersion: external-secrets.io/v1\nkind: ExternalSecret\nmetadata: {name: pw, namespace: team-b}\n\
             spec:\n  dataFrom: [{sourceRef: {generatorRef: {apiVersion: generators.external-secrets.io/v1alpha1, \
             kind: ClusterGenerator, name: pw}}}]\n",
        );
        let v = review(&es, Some("team-b"), false, &state).unwrap();
        assert!(!v.allowed, "{v:?}");
        assert!(v.message.unwrap().contains("ClusterGenerator \"pw\" does not allow namespace \"team-b\""));
    }

    #[test]
    fn field_errors_name_their_paths_and_other_kinds_are_not_reviewed() {
        let bad = yaml(
            "apiVersion: external-secrets.io/v1\nkind: ExternalSecret\nmetadata: {name: x}\n\
             spec:\n  refreshInterval: often\n  secretStoreRef: {name: s, kind: SecretStore}\n",
        );
        let v = review(&bad, Some("default"), false, &State::default()).unwrap();
        assert!(!v.allowed);
        assert!(v.message.unwrap().contains("spec.refreshInterval"));
        assert!(
            review(&yaml("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n"), None, false, &State::default())
                .is_none()
        );
    }
}
