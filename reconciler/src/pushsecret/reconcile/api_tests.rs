//! The PushSecret reconcile against the fake API server, on the paths that need no provider:
//! the finalizer of deletionPolicy Delete, cleanup on deletion, and failures before a push.

use serde_json::Value;

use super::*;
use crate::fake_api::{self, Requests};

const PS: &str = "/apis/external-secrets.io/v1alpha1/namespaces/team-a/pushsecrets/push";
const STORE: &str = "/apis/external-secrets.io/v1/namespaces/team-a/secretstores/vault";
const SOURCE: &str = "/api/v1/namespaces/team-a/secrets/src";
const EVENTS: &str = "POST /apis/events.k8s.io/v1/namespaces/team-a/events?";

/// PushSecret `push` of team-a (generation 2) pushing key `password` of Secret `src` to
/// SecretStore `vault` as `db`; `spec` is merged into the spec, `metadata` into the metadata.
fn push_secret(spec: Value, metadata: Value, status: Value) -> Arc<PushSecret> {
    let mut full = json!({
        "refreshInterval": "1h",
        "secretStoreRefs": [{"name": "vault", "kind": "SecretStore"}],
        "selector": {"secret": {"name": "src"}},
        "data": [{"match": {"secretKey": "password", "remoteRef": {"remoteKey": "db"}}}],
    });
    full.as_object_mut().unwrap().extend(spec.as_object().cloned().unwrap_or_default());
    let mut meta = json!({"name": "push", "namespace": "team-a", "uid": "p1", "generation": 2});
    meta.as_object_mut().unwrap().extend(metadata.as_object().cloned().unwrap_or_default());
    Arc::new(
        serde_json::from_value(json!({
            "apiVersion": "external-secrets.io/v1alpha1", "kind": "PushSecret",
            "metadata": meta, "spec": full, "status": status,
        }))
        .unwrap(),
    )
}

/// What a push to `vault` recorded in status.
fn pushed_to_vault() -> Value {
    json!({"syncedPushSecrets": {"SecretStore/vault": {
        "db": {"match": {"secretKey": "password", "remoteRef": {"remoteKey": "db"}}}}}})
}

/// Runs one reconcile against `answer`, with everything else answered by the PushSecret.
async fn run(
    ps: Arc<PushSecret>,
    answer: impl Fn(&http::Method, &str) -> Option<(u16, Value)> + Send + Sync + 'static,
) -> (Result<Action, Error>, Requests, Arc<Context>) {
    let (client, requests) = fake_api::client_or_object(ps.as_ref(), answer);
    let ctx = Arc::new(Context::for_tests(client));
    (reconcile(ps, ctx.clone()).await, requests, ctx)
}

fn no_store(_: &http::Method, path: &str) -> Option<(u16, Value)> {
    path.starts_with(STORE).then(|| fake_api::not_found("secretstores.external-secrets.io \"vault\" not found"))
}

fn deleting() -> Value {
    json!({"finalizers": [FINALIZER], "deletionTimestamp": "2026-01-01T00:00:00Z"})
}

#[tokio::test]
async fn a_delete_policy_adds_the_finalizer_before_anything_is_pushed() {
    let (result, requests, _) =
        run(push_secret(json!({"deletionPolicy": "Delete"}), json!({}), json!({})), no_store).await;
    assert_eq!(result.unwrap(), Action::await_change());
    assert_eq!(requests.all(), [format!("PATCH {PS}?")]);
    let patch = requests.body(0).to_string();
    assert!(patch.contains("\"add\"") && patch.contains(FINALIZER), "{patch}");
}

#[tokio::test]
async fn a_deleted_push_secret_without_the_finalizer_is_left_alone() {
    let gone = json!({"deletionTimestamp": "2026-01-01T00:00:00Z", "finalizers": ["example.com/other"]});
    let (result, requests, _) = run(push_secret(json!({}), gone, pushed_to_vault()), no_store).await;
    assert_eq!(result.unwrap(), Action::await_change());
    assert_eq!(requests.all(), Vec::<String>::new());
}

#[tokio::test]
async fn deletion_keeps_the_finalizer_while_remote_copies_cannot_be_deleted() {
    let ps = push_secret(json!({"deletionPolicy": "Delete"}), deleting(), pushed_to_vault());
    let (result, requests, _) = run(ps, no_store).await;
    let err = result.unwrap_err().to_string();
    assert!(err.contains("deleting remote copies: SecretStore/vault: "), "{err}");
    // No finalizer patch: only the store lookup and the report.
    assert_eq!(requests.all(), [format!("GET {STORE}"), format!("PATCH {PS}/status?"), EVENTS.into()]);
    let status = &requests.body(1)["status"];
    let ready = &status["conditions"][0];
    assert_eq!((&ready["status"], &ready["reason"]), (&json!("False"), &json!("Errored")));
    assert!(err.ends_with(ready["message"].as_str().unwrap()), "{err} / {ready}");
    // The remote copies are still recorded: they are still there.
    assert_eq!(status["syncedPushSecrets"], pushed_to_vault()["syncedPushSecrets"]);
    let event = requests.body(2);
    assert_eq!(
        (&event["type"], &event["reason"], &event["action"]),
        (&json!("Warning"), &json!("Errored"), &json!("Push"))
    );
}

#[tokio::test]
async fn deletion_with_nothing_to_delete_releases_the_finalizer_at_once() {
    let cases = [
        // Nothing was pushed.
        ("Delete", json!({})),
        // The policy changed away from Delete: the remote copies stay, the finalizer goes.
        ("None", pushed_to_vault()),
    ];
    for (policy, status) in cases {
        let ps = push_secret(json!({"deletionPolicy": policy}), deleting(), status);
        let (result, requests, _) = run(ps, no_store).await;
        assert_eq!(result.unwrap(), Action::await_change(), "{policy}");
        assert_eq!(requests.all(), [format!("PATCH {PS}?")], "{policy}");
        let patch = requests.body(0).to_string();
        assert!(patch.contains("\"remove\"") && patch.contains("/metadata/finalizers/0"), "{policy}: {patch}");
    }
}

#[tokio::test]
async fn a_missing_source_secret_is_reported_and_retried() {
    let (result, requests, ctx) = run(push_secret(json!({}), json!({}), json!({})), |_, path| {
        path.starts_with(SOURCE).then(|| fake_api::not_found("secrets \"src\" not found"))
    })
    .await;
    assert!(ctx.is_first_retry(&result.unwrap()));
    assert_eq!(requests.all(), [format!("GET {SOURCE}"), format!("PATCH {PS}/status?"), EVENTS.into()]);
    let ready = &requests.body(1)["status"]["conditions"][0];
    assert_eq!(
        (&ready["status"], &ready["reason"], &ready["message"], &ready["observedGeneration"]),
        (&json!("False"), &json!("Errored"), &json!("source Secret \"src\" not found"), &json!(2))
    );
    assert_eq!(requests.body(2)["note"], "source Secret \"src\" not found");
}

#[tokio::test]
async fn no_matching_store_is_an_error_and_nothing_is_pushed() {
    let refs = json!({"secretStoreRefs": [{"kind": "SecretStore", "labelSelector": {"matchLabels": {"push": "yes"}}}]});
    let (result, requests, ctx) = run(push_secret(refs, json!({}), json!({})), |_, path| {
        let items = vec![];
        match path.split('?').next() {
            Some(SOURCE) => Some((
                200,
                json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "src"},
                                              "data": {"password": "czNjcmV0"}}),
            )),
            Some("/apis/external-secrets.io/v1/namespaces/team-a/secretstores") => {
                Some((200, fake_api::list("external-secrets.io/v1", "SecretStoreList", items)))
            }
            _ => None,
        }
    })
    .await;
    assert!(ctx.is_first_retry(&result.unwrap()));
    assert_eq!(
        requests.all(),
        [
            format!("GET {SOURCE}"),
            "GET /apis/external-secrets.io/v1/namespaces/team-a/secretstores?&labelSelector=push%3Dyes".into(),
            format!("PATCH {PS}/status?"),
            EVENTS.into(),
        ]
    );
    assert_eq!(requests.body(2)["status"]["conditions"][0]["message"], "no store matches secretStoreRefs");
}
