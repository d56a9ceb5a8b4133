//! The ExternalSecret reconcile against the fake API server, on the paths that need no
//! provider: a store that is missing, refused or another controller's, a target written from a
//! Fake generator, and what is (not) written again.

use keyward_crds::workload::{DATA_HASH_ANNOTATION, MANAGED_LABEL};
use serde_json::Value;

use super::*;
use crate::fake_api::{self, Requests};

const STORE: &str = "/apis/external-secrets.io/v1/namespaces/team-a/secretstores/vault";
const ES: &str = "/apis/external-secrets.io/v1/namespaces/team-a/externalsecrets/db";
const EVENTS: &str = "POST /apis/events.k8s.io/v1/namespaces/team-a/events?";

/// ExternalSecret `db` of team-a (uid `e1`, generation 4) syncing `db-secret` hourly; `spec`
/// and `status` are merged into the spec and status.
fn external_secret(spec: Value, status: Value) -> Arc<ExternalSecret> {
    let mut full = json!({"refreshInterval": "1h", "target": {"name": "db-secret"}});
    full.as_object_mut().unwrap().extend(spec.as_object().cloned().unwrap_or_default());
    Arc::new(
        serde_json::from_value(json!({
            "apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
            "metadata": {"name": "db", "namespace": "team-a", "uid": "e1", "generation": 4},
            "spec": full, "status": status,
        }))
        .unwrap(),
    )
}

/// Reads from SecretStore `vault`.
fn from_vault() -> Value {
    json!({"secretStoreRef": {"name": "vault", "kind": "SecretStore"},
           "data": [{"secretKey": "password", "remoteRef": {"key": "db/pass"}}]})
}

/// SecretStore `vault` of team-a with `spec` and `status` (its provider is never reached here).
fn store(spec: Value, status: Value) -> Value {
    let mut full = json!({"provider": {"vault": {"server": "https://vault:8200", "path": "kv"}}});
    full.as_object_mut().unwrap().extend(spec.as_object().cloned().unwrap_or_default());
    json!({"apiVersion": "external-secrets.io/v1", "kind": "SecretStore",
           "metadata": {"name": "vault", "namespace": "team-a", "uid": "s1", "generation": 1},
           "spec": full, "status": status})
}

/// Runs one reconcile against `answer`, with everything else answered by the ExternalSecret.
async fn run(
    es: Arc<ExternalSecret>,
    answer: impl Fn(&http::Method, &str) -> Option<(u16, Value)> + Send + Sync + 'static,
) -> (Result<Action, Error>, Requests, Arc<Context>) {
    let (client, requests) = fake_api::client_or_object(es.as_ref(), answer);
    let ctx = Arc::new(Context::for_tests(client));
    (reconcile(es, ctx.clone()).await, requests, ctx)
}

fn no_store(_: &http::Method, path: &str) -> Option<(u16, Value)> {
    path.starts_with(STORE).then(|| fake_api::not_found("secretstores.external-secrets.io \"vault\" not found"))
}

#[tokio::test]
async fn a_missing_store_is_reported_the_binding_dropped_and_retried() {
    let last_good = json!({"refreshTime": "2026-01-01T00:00:00Z", "syncedResourceVersion": "4-x",
                           "syncedDataHash": "h", "binding": {"name": "db-secret"}});
    let (result, requests, ctx) = run(external_secret(from_vault(), last_good), no_store).await;
    let action = result.unwrap();
    assert!(ctx.is_first_retry(&action), "{action:?}");
    // Looked up once to see whose store it is, once to use it.
    assert_eq!(
        requests.all(),
        [format!("GET {STORE}"), format!("GET {STORE}"), format!("PATCH {ES}/status?"), EVENTS.into()]
    );
    let status = &requests.body(2)["status"];
    let ready = &status["conditions"][0];
    assert_eq!(
        (&ready["status"], &ready["reason"], &ready["observedGeneration"]),
        (&json!("False"), &json!(reason::SECRET_SYNCED_ERROR), &json!(4))
    );
    let message = ready["message"].as_str().unwrap();
    assert!(message.starts_with("cannot use store: "), "{message}");
    assert!(message.contains("vault") && message.ends_with("; the target Secret keeps its last data"), "{message}");
    // The target Secret is not there (not in the managed-Secret cache): no binding to it. The
    // rest still describes the last good sync.
    assert_eq!(status["binding"], Value::Null);
    assert_eq!(
        (&status["refreshTime"], &status["syncedResourceVersion"], &status["syncedDataHash"]),
        (&json!("2026-01-01T00:00:00Z"), &json!("4-x"), &json!("h"))
    );
    let event = requests.body(3);
    assert_eq!(
        (&event["type"], &event["reason"], &event["action"]),
        (&json!("Warning"), &json!(reason::SECRET_SYNCED_ERROR), &json!("Sync"))
    );
    assert_eq!(event["note"], message);
}

#[tokio::test]
async fn a_failure_already_reported_is_not_written_again() {
    let (_, requests, _) = run(external_secret(from_vault(), json!({})), no_store).await;
    let status = requests.body(2)["status"].clone();
    let (result, requests, ctx) = run(external_secret(from_vault(), status), no_store).await;
    assert!(ctx.is_first_retry(&result.unwrap()));
    assert_eq!(requests.all(), [format!("GET {STORE}"), format!("GET {STORE}")]);
}

#[tokio::test]
async fn a_store_that_cannot_read_is_refused_before_any_call() {
    let write_only = store(json!({}), json!({"capabilities": "WriteOnly"}));
    let (result, requests, ctx) = run(external_secret(from_vault(), json!({})), move |_, path| {
        path.starts_with(STORE).then(|| (200, write_only.clone()))
    })
    .await;
    assert!(ctx.is_first_retry(&result.unwrap()));
    assert_eq!(
        requests.all(),
        [format!("GET {STORE}"), format!("GET {STORE}"), format!("PATCH {ES}/status?"), EVENTS.into()]
    );
    let message = requests.body(2)["status"]["conditions"][0]["message"].as_str().unwrap().to_string();
    assert!(message.contains("read secrets for an ExternalSecret"), "{message}");
}

#[tokio::test]
async fn a_store_of_another_controller_leaves_the_external_secret_alone() {
    let theirs = store(json!({"controller": "other"}), json!({}));
    let (result, requests, _) = run(external_secret(from_vault(), json!({})), move |_, path| {
        path.starts_with(STORE).then(|| (200, theirs.clone()))
    })
    .await;
    assert_eq!(result.unwrap(), Action::await_change());
    // Nothing written, not even status.
    assert_eq!(requests.all(), [format!("GET {STORE}")]);
}

#[tokio::test]
async fn a_deleted_or_unsupported_external_secret_writes_no_secret() {
    let mut deleted = Arc::unwrap_or_clone(external_secret(from_vault(), json!({})));
    deleted.metadata.deletion_timestamp = Some(Time(Timestamp::now()));
    let (result, requests, _) = run(Arc::new(deleted), no_store).await;
    assert_eq!(result.unwrap(), Action::await_change());
    assert_eq!(requests.all(), Vec::<String>::new());

    // A non-Secret target is said once, not retried until the ExternalSecret changes.
    let mut spec = from_vault();
    spec["target"] = json!({"name": "db-secret", "manifest": {"apiVersion": "v1", "kind": "ConfigMap"}});
    let (result, requests, _) = run(external_secret(spec, json!({})), no_store).await;
    assert_eq!(result.unwrap(), Action::await_change());
    assert_eq!(requests.all(), [format!("GET {STORE}"), format!("PATCH {ES}/status?"), EVENTS.into()]);
    let message = requests.body(1)["status"]["conditions"][0]["message"].as_str().unwrap().to_string();
    assert!(
        message.starts_with("spec.target.manifest (v1 ConfigMap): non-Secret targets are not supported"),
        "{message}"
    );
}

const FAKE: &str = "/apis/generators.external-secrets.io/v1alpha1/namespaces/team-a/fakes/gen";
const SECRET: &str = "/api/v1/namespaces/team-a/secrets/db-secret";

/// Values of the Fake generator `gen`, written to `db-secret` with `creation_policy`.
fn generated(creation_policy: &str) -> Value {
    json!({"target": {"name": "db-secret", "creationPolicy": creation_policy},
           "dataFrom": [{"sourceRef": {"generatorRef": {
               "apiVersion": "generators.external-secrets.io/v1alpha1", "kind": "Fake", "name": "gen"}}}]})
}

/// Answers the Fake generator `gen` (`password: s3cret`) and the target Secret: `404` when
/// `exists` is false.
fn generator_and_target(exists: bool) -> impl Fn(&http::Method, &str) -> Option<(u16, Value)> + Send + Sync + 'static {
    move |_, path| match path.split('?').next() {
        Some(FAKE) => Some((
            200,
            json!({"apiVersion": "generators.external-secrets.io/v1alpha1", "kind": "Fake",
                   "metadata": {"name": "gen", "namespace": "team-a"}, "spec": {"data": {"password": "s3cret"}}}),
        )),
        Some(SECRET) if exists => {
            Some((200, json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db-secret"}})))
        }
        Some(SECRET) => Some(fake_api::not_found("secrets \"db-secret\" not found")),
        _ => None,
    }
}

#[tokio::test]
async fn merge_never_creates_the_secret_and_none_writes_none() {
    let (result, requests, ctx) =
        run(external_secret(generated("Merge"), json!({})), generator_and_target(false)).await;
    assert!(ctx.is_first_retry(&result.unwrap()));
    // Merge reads the Secret it writes into (not labelled, so not cached); it is not there.
    assert_eq!(
        requests.all(),
        [format!("GET {SECRET}"), format!("GET {FAKE}"), format!("PATCH {ES}/status?"), EVENTS.into()]
    );
    let ready = &requests.body(2)["status"]["conditions"][0];
    assert_eq!((&ready["status"], &ready["reason"]), (&json!("False"), &json!(reason::SECRET_MISSING)));
    let message = ready["message"].as_str().unwrap();
    assert!(message.contains("creationPolicy Merge never creates it"), "{message}");

    let es = external_secret(generated("None"), json!({}));
    let (result, requests, _) = run(es, generator_and_target(false)).await;
    let interval = Duration::from_secs(3600);
    assert_eq!(result.unwrap(), Action::requeue(interval + jitter("e1", interval)));
    // Fetched, reported Ready, no Secret read or written and nothing to announce.
    assert_eq!(requests.all(), [format!("GET {FAKE}"), format!("PATCH {ES}/status?")]);
    let status = &requests.body(1)["status"];
    assert_eq!(
        (&status["conditions"][0]["status"], &status["conditions"][0]["message"]),
        (&json!("True"), &json!("1 values fetched; creationPolicy None writes no Secret"))
    );
    assert_eq!((&status["binding"], &status["syncedDataHash"]), (&Value::Null, &Value::Null));
}

#[tokio::test]
async fn generated_values_are_applied_to_an_owned_secret_and_reported() {
    let es = external_secret(generated("Owner"), json!({}));
    let (result, requests, _) = run(es.clone(), generator_and_target(true)).await;
    // Next at the interval, plus this object's own jitter.
    let interval = Duration::from_secs(3600);
    assert_eq!(result.unwrap(), Action::requeue(interval + jitter("e1", interval)));
    assert_eq!(
        requests.all(),
        [
            format!("GET {FAKE}"),
            format!("PATCH {SECRET}?&force=true&fieldManager=keyward-reconciler"),
            format!("PATCH {ES}/status?"),
            EVENTS.into(),
        ]
    );
    let secret = requests.body(1);
    assert_eq!(secret["data"], json!({"password": "czNjcmV0"}));
    assert_eq!(secret["metadata"]["labels"][MANAGED_LABEL], "true");
    let owner = &secret["metadata"]["ownerReferences"][0];
    assert_eq!(
        (&owner["kind"], &owner["uid"], &owner["controller"]),
        (&json!("ExternalSecret"), &json!("e1"), &json!(true))
    );
    let hash = secret["metadata"]["annotations"][DATA_HASH_ANNOTATION].clone();
    assert!(hash.is_string(), "{secret}");

    let status = &requests.body(2)["status"];
    let ready = &status["conditions"][0];
    assert_eq!(
        (&ready["status"], &ready["reason"], &ready["message"]),
        (&json!("True"), &json!(reason::SECRET_SYNCED), &json!("Secret was synced"))
    );
    assert_eq!(status["binding"], json!({"name": "db-secret"}));
    assert_eq!(status["syncedDataHash"], hash);
    assert_eq!(status["syncedResourceVersion"], object_hash(&es));
    assert!(status["refreshTime"].is_string());
    let event = requests.body(3);
    assert_eq!(
        (&event["type"], &event["reason"], &event["note"]),
        (&json!("Normal"), &json!("Created"), &json!("Secret \"db-secret\" created with 1 keys"))
    );
}
