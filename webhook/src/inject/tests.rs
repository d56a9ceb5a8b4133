use serde_json::json;

use super::*;
use crate::cache::State;

fn request(kind: (&str, &str), operation: &str, object: Value) -> Request {
    let review = crate::fixtures::review(kind.0, "v1", kind.1, operation, Some("team-a"), object);
    match crate::review::decode(&review).expect("a review") {
        crate::review::Decoded::Request(r) => *r,
        other => panic!("{other:?}"),
    }
}

fn state() -> State {
    let mut s = State::default();
    let ready = json!({"spec": {"target": {"name": "db-secret"}}, "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "SecretSynced"}], "syncedDataHash": "h1"}});
    s.injection.upsert_external_secret("team-a", "db", &ready);
    s.injection.upsert_external_secret("team-a", "pending", &json!({"spec": {}}));
    s
}

/// The object after applying the decision's patch.
fn patched(object: &Value, decision: &Decision) -> Value {
    assert!(decision.allowed, "denied: {:?}", decision.message);
    let mut out = object.clone();
    if let Some(patch) = &decision.patch {
        json_patch::patch(&mut out, patch).expect("patch applies");
    }
    out
}

fn pod(annotations: Value) -> Value {
    json!({"metadata": {"name": "web", "annotations": annotations}, "spec": {"containers": [{"name": "app", "image": "app"}]}})
}

#[test]
fn pods_get_the_synced_secret_by_reference_and_an_annotation() {
    let object = pod(json!({"keyward.dev/inject": "db"}));
    let decision = mutate(&request(("", "Pod"), "CREATE", object.clone()), &state());
    let out = patched(&object, &decision);
    assert_eq!(out.pointer("/spec/containers/0/envFrom/0/secretRef/name"), Some(&json!("db-secret")));
    assert_eq!(out.pointer("/metadata/annotations/keyward.dev~1injected"), Some(&json!("db=db-secret")));
    // Reinvocation on the injected Pod changes nothing more.
    let again = mutate(&request(("", "Pod"), "CREATE", out.clone()), &state());
    assert_eq!(patched(&out, &again), out);
}

#[test]
fn pods_without_annotations_metadata_are_patched_safely() {
    let object = json!({"spec": {"containers": [{"name": "app"}]}});
    let decision = mutate(&request(("", "Pod"), "CREATE", object.clone()), &state());
    assert_eq!(patched(&object, &decision), object, "nothing asked, nothing changed");
}

#[test]
fn unsynced_or_missing_external_secrets_deny_the_pod() {
    for (name, want) in [("pending", "has not synced its Secret"), ("nope", "does not exist in namespace \"team-a\"")] {
        let decision = mutate(&request(("", "Pod"), "CREATE", pod(json!({"keyward.dev/inject": name}))), &state());
        assert!(!decision.allowed, "{name}");
        assert!(decision.message.as_deref().unwrap_or_default().contains(want), "{:?}", decision.message);
    }
    let bad_mode = pod(json!({"keyward.dev/inject": "db", "keyward.dev/inject-mode": "file"}));
    let decision = mutate(&request(("", "Pod"), "CREATE", bad_mode), &state());
    assert_eq!((decision.allowed, decision.code), (false, 400));
}

#[test]
fn pods_naming_too_many_external_secrets_are_denied_quickly() {
    let names = |n: usize| (0..n).map(|i| format!("es-{i}")).collect::<Vec<_>>().join(",");
    let too_long = format!("at most {} bytes are allowed", workload::MAX_INJECT_ANNOTATION_BYTES);
    let too_many = format!("at most {} are allowed", workload::MAX_INJECT_NAMES);
    for (value, want) in [(names(100_000), &too_long), (names(workload::MAX_INJECT_NAMES + 1), &too_many)] {
        let object = pod(json!({"keyward.dev/inject": value, "keyward.dev/inject-policy": "optional"}));
        let req = request(("", "Pod"), "CREATE", object);
        let started = std::time::Instant::now();
        let decision = mutate(&req, &state());
        let took = started.elapsed();
        assert!(took < std::time::Duration::from_secs(1), "{took:?}");
        assert_eq!((decision.allowed, decision.code, decision.patch.is_none()), (false, 400, true));
        let message = decision.message.unwrap_or_default();
        assert!(message.contains("annotation keyward.dev/inject ") && message.contains(want.as_str()), "{message}");
    }
    // At the limit, with the names optional and not there yet, the Pod is admitted.
    let object = pod(json!({"keyward.dev/inject": format!("db,{}", names(workload::MAX_INJECT_NAMES - 1)),
        "keyward.dev/inject-policy": "optional"}));
    let out = patched(&object, &mutate(&request(("", "Pod"), "CREATE", object.clone()), &state()));
    let env_from = out.pointer("/spec/containers/0/envFrom").and_then(Value::as_array).cloned().unwrap_or_default();
    assert_eq!(env_from.len(), workload::MAX_INJECT_NAMES);
    assert_eq!(env_from[0], json!({"secretRef": {"name": "db-secret"}}));
    assert_eq!(env_from[1], json!({"secretRef": {"name": "es-0", "optional": true}}));
}

fn deployment(reload: bool, template_annotations: Value) -> Value {
    let mut d = json!({
        "metadata": {"name": "web", "annotations": {}},
        "spec": {"template": {"metadata": {"annotations": template_annotations}, "spec": {"containers": [
            {"name": "app", "envFrom": [{"secretRef": {"name": "db-secret"}}]}
        ]}}}
    });
    if reload {
        d["metadata"]["annotations"] = json!({"keyward.dev/reload": "true"});
    }
    d
}

#[test]
fn reloadable_workloads_get_the_secrets_hash_on_create_only() {
    let object = deployment(true, json!({}));
    let decision = mutate(&request(("apps", "Deployment"), "CREATE", object.clone()), &state());
    let out = patched(&object, &decision);
    let hash = out.pointer("/spec/template/metadata/annotations/keyward.dev~1secrets-hash").cloned();
    assert_eq!(hash, workload::secrets_hash([("db-secret", "h1")]).map(Value::String));

    // An update that already carries a hash keeps it: the reconciler owns rotations.
    let decision = mutate(&request(("apps", "Deployment"), "UPDATE", out.clone()), &state());
    assert_eq!(patched(&out, &decision), out);
    // Without the opt-in annotation nothing is added.
    let plain = deployment(false, json!({}));
    let decision = mutate(&request(("apps", "Deployment"), "CREATE", plain.clone()), &state());
    assert_eq!(patched(&plain, &decision), plain);
}
