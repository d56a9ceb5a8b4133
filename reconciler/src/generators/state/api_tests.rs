//! The GeneratorState reconcile against the fake API server: which requests it makes (deletes,
//! finalizer and status patches, events) and what it returns.

use super::*;
use crate::fake_api::{self, Requests};

const STATES: &str = "/apis/generators.external-secrets.io/v1alpha1/namespaces/team-a/generatorstates";

/// A GeneratorState `s1` of team-a (uid `u1`, resource version 7) recording a generator of
/// `kind`, with `deadline`; `metadata` is merged into its metadata (`finalizers`,
/// `deletionTimestamp`), `status` is its status.
fn state(kind: &str, deadline: &str, metadata: Value, status: Value) -> Arc<StateObject> {
    Arc::new(serde_json::from_value(state_json(kind, deadline, metadata, status)).unwrap())
}

/// The JSON of [`state`], as the API server sends it.
fn state_json(kind: &str, deadline: &str, metadata: Value, status: Value) -> Value {
    let mut meta = json!({"name": "s1", "namespace": "team-a", "uid": "u1", "resourceVersion": "7"});
    meta.as_object_mut().unwrap().extend(metadata.as_object().cloned().unwrap_or_default());
    json!({
        "apiVersion": "generators.external-secrets.io/v1alpha1", "kind": "GeneratorState", "metadata": meta,
        "spec": {"garbageCollectionDeadline": deadline, "state": {"token": "x"},
                 "resource": {"apiVersion": "generators.external-secrets.io/v1alpha1", "kind": kind}},
        "status": status,
    })
}

/// Runs one reconcile of `obj` against the fake API server answering with `answer`.
async fn run(
    obj: Arc<StateObject>,
    answer: impl Fn(&http::Method, &str) -> (u16, Value) + Send + Sync + 'static,
) -> (Result<Action, StateError>, Requests) {
    let (client, requests) = fake_api::client(answer);
    let ctx = Arc::new(Ctx { ctx: Arc::new(Context::for_tests(client)) });
    (reconcile(obj, ctx).await, requests)
}

/// The object the API server answers a patch with, at resource version `rv`.
fn patched(rv: &str) -> (u16, Value) {
    (200, state_json("Password", "2020-01-01T00:00:00Z", json!({"resourceVersion": rv}), json!({})))
}

#[tokio::test]
async fn a_served_state_past_its_deadline_is_deleted_if_unchanged() {
    let obj = state("Password", "2020-01-01T00:00:00Z", json!({}), json!({}));
    let (result, requests) = run(obj, |_, _| fake_api::deleted()).await;
    assert_eq!(result.unwrap(), Action::await_change());
    assert_eq!(requests.all(), [format!("DELETE {STATES}/s1?")]);
    // Only the version read is deleted: a state changed since comes back here instead.
    assert_eq!(requests.body(0)["preconditions"], json!({"uid": "u1", "resourceVersion": "7"}));
}

#[tokio::test]
async fn upstreams_finalizer_is_removed_before_the_delete() {
    let finalizers = json!({"finalizers": ["example.com/keep", GENERATOR_STATE_FINALIZER]});
    let obj = state("UUID", "2020-01-01T00:00:00Z", finalizers, json!({}));
    let (result, requests) = run(obj, |method, _| match *method {
        http::Method::PATCH => patched("8"),
        _ => fake_api::deleted(),
    })
    .await;
    assert_eq!(result.unwrap(), Action::await_change());
    assert_eq!(requests.all(), [format!("PATCH {STATES}/s1?"), format!("DELETE {STATES}/s1?")]);
    // Other finalizers stay; the patch applies to the version read only.
    assert_eq!(requests.body(0), json!({"metadata": {"resourceVersion": "7", "finalizers": ["example.com/keep"]}}));
    // The delete names the version the patch made.
    assert_eq!(requests.body(1)["preconditions"], json!({"uid": "u1", "resourceVersion": "8"}));
}

#[tokio::test]
async fn a_delete_that_lost_a_race_is_done_and_a_failed_one_is_retried() {
    let obj = state("Password", "2020-01-01T00:00:00Z", json!({}), json!({}));
    let (result, _) = run(obj.clone(), |_, _| fake_api::status(409, "Conflict", "precondition failed")).await;
    assert_eq!(result.unwrap(), Action::await_change());
    let (result, _) = run(obj, |_, _| fake_api::status(500, "InternalError", "etcd is down")).await;
    let err = result.unwrap_err();
    assert!(err.to_string().starts_with("deleting the GeneratorState: "), "{err}");
    assert!(err.to_string().contains("etcd is down"), "{err}");
}

#[tokio::test]
async fn an_unserved_kind_past_its_deadline_is_kept_reported_and_announced() {
    let obj = state("Grafana", "2020-01-01T00:00:00Z", json!({}), json!({}));
    let (result, requests) = run(obj, |_, _| (200, json!({}))).await;
    assert_eq!(result.unwrap(), Action::await_change());
    assert_eq!(
        requests.all(),
        [format!("PATCH {STATES}/s1/status?"), "POST /apis/events.k8s.io/v1/namespaces/team-a/events?".to_string()]
    );
    let conditions = &requests.body(0)["status"]["conditions"];
    assert_eq!(conditions.as_array().unwrap().len(), 1, "{conditions}");
    let ready = &conditions[0];
    assert_eq!(
        (&ready["type"], &ready["status"], &ready["reason"]),
        (&json!("Ready"), &json!("False"), &json!(REASON_NOT_SERVED))
    );
    let message = ready["message"].as_str().unwrap();
    assert!(message.starts_with("cleanup of generator kind \"Grafana\" is not served by Keyward"), "{message}");
    let event = requests.body(1);
    assert_eq!(
        (&event["type"], &event["reason"], &event["action"]),
        (&json!("Warning"), &json!(REASON_NOT_SERVED), &json!("GarbageCollect"))
    );
    assert_eq!((&event["regarding"]["kind"], &event["regarding"]["name"]), (&json!("GeneratorState"), &json!("s1")));
    assert_eq!(event["note"], message);
}

#[tokio::test]
async fn a_report_already_written_is_not_written_again() {
    let first = state("Grafana", "2020-01-01T00:00:00Z", json!({}), json!({}));
    let (_, requests) = run(first, |_, _| (200, json!({}))).await;
    let status = requests.body(0)["status"].clone();
    let again = state("Grafana", "2020-01-01T00:00:00Z", json!({}), status);
    let (result, requests) = run(again, |_, _| (200, json!({}))).await;
    assert_eq!(result.unwrap(), Action::await_change());
    assert_eq!(requests.all(), Vec::<String>::new());
}

#[tokio::test]
async fn a_state_not_due_is_left_alone_and_looked_at_again() {
    let obj = state("Grafana", "2126-01-01T00:00:00Z", json!({}), json!({}));
    let (result, requests) = run(obj, |_, _| (200, json!({}))).await;
    assert_eq!(result.unwrap(), Action::requeue(MAX_WAIT));
    assert_eq!(requests.all(), Vec::<String>::new());
}

#[tokio::test]
async fn a_fixed_state_gets_its_ready_condition_back() {
    // Reported before (the deadline was not a time); now it waits for a valid one.
    let old = json!({"conditions": [
        {"type": "Other", "status": "True"},
        {"type": "Ready", "status": "False", "reason": REASON_INVALID_DEADLINE, "message": "m",
         "lastTransitionTime": "2020-01-01T00:00:00Z"},
    ]});
    let obj = state("Password", "2126-01-01T00:00:00Z", json!({}), old);
    let (result, requests) = run(obj, |_, _| (200, json!({}))).await;
    assert_eq!(result.unwrap(), Action::requeue(MAX_WAIT));
    assert_eq!(requests.all(), [format!("PATCH {STATES}/s1/status?")]);
    let conditions = &requests.body(0)["status"]["conditions"];
    assert_eq!(conditions[0], json!({"type": "Other", "status": "True"}));
    let ready = &conditions[1];
    assert_eq!(
        (&ready["status"], &ready["reason"], &ready["message"]),
        (&json!("True"), &json!(REASON_CREATED), &json!("kept until its garbage collection deadline"))
    );
    assert_ne!(ready["lastTransitionTime"], "2020-01-01T00:00:00Z");
}

#[tokio::test]
async fn a_deleted_state_of_a_served_kind_is_released() {
    let deleting = json!({"finalizers": [GENERATOR_STATE_FINALIZER], "deletionTimestamp": "2026-01-01T00:00:00Z"});
    let obj = state("Password", "2126-01-01T00:00:00Z", deleting, json!({}));
    let (result, requests) = run(obj, |_, _| patched("8")).await;
    assert_eq!(result.unwrap(), Action::await_change());
    assert_eq!(requests.all(), [format!("PATCH {STATES}/s1?")]);
    assert_eq!(requests.body(0), json!({"metadata": {"resourceVersion": "7", "finalizers": []}}));
}
