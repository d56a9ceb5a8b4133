//! The ClusterExternalSecret reconcile against the fake API server: the ExternalSecrets it
//! writes and deletes, the status it reports, and the cleanup on deletion.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Namespace;
use keyward_crds::cluster_external_secret::ClusterExternalSecretStatus;
use kube::core::PartialObjectMeta;
use kube::runtime::controller::Action;

use super::*;
use crate::caches::Packed;
use crate::context::Context;
use crate::fake_api;
use crate::fanout::FanContext;
use crate::fanout::reconcile::{Error, reconcile};

type CesContext = FanContext<ClusterExternalSecret>;

const ES_A: &str = "/apis/external-secrets.io/v1/namespaces/a/externalsecrets/db";
const CES: &str = "/apis/external-secrets.io/v1/clusterexternalsecrets/shared";
const APPLY: &str = "?&force=true&fieldManager=keyward-clusterexternalsecret";

/// The ClusterExternalSecret `shared` (uid `c1`, generation 3) writing ExternalSecret `db` in
/// the namespaces labelled `team=yes`; `metadata` is merged into its metadata.
fn ces(metadata: Value) -> Arc<ClusterExternalSecret> {
    let mut meta = json!({"name": "shared", "uid": "c1", "generation": 3, "resourceVersion": "5",
                          "finalizers": [CLUSTER_EXTERNAL_SECRET_FINALIZER]});
    meta.as_object_mut().unwrap().extend(metadata.as_object().cloned().unwrap_or_default());
    Arc::new(
        serde_json::from_value(json!({
            "apiVersion": "external-secrets.io/v1", "kind": "ClusterExternalSecret", "metadata": meta,
            "spec": {"externalSecretName": "db", "refreshTime": "1h",
                     "namespaceSelectors": [{"matchLabels": {"team": "yes"}}],
                     "externalSecretSpec": {"secretStoreRef": {"name": "vault", "kind": "SecretStore"},
                                            "data": [{"secretKey": "k", "remoteRef": {"key": "r"}}]}},
        }))
        .unwrap(),
    )
}

fn namespace(name: &str, labels: &[(&str, &str)]) -> PartialObjectMeta<Namespace> {
    let mut ns = PartialObjectMeta::<Namespace>::default();
    ns.metadata.name = Some(name.into());
    ns.metadata.labels = Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
    ns
}

/// ExternalSecret `db` in `ns` labelled for `shared`; controlled by it when `owned`.
fn external_secret(ns: &str, owned: bool) -> ExternalSecret {
    let owner = json!([{"apiVersion": "external-secrets.io/v1", "kind": "ClusterExternalSecret", "name": "shared",
                        "uid": "c1", "controller": true}]);
    serde_json::from_value(json!({
        "apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
        "metadata": {"name": "db", "namespace": ns, "uid": format!("es-{ns}"), "generation": 1,
                     "labels": {CLUSTER_EXTERNAL_SECRET_LABEL: "shared"},
                     "ownerReferences": if owned { owner } else { json!([]) }},
        "spec": {"secretStoreRef": {"name": "vault"}},
    }))
    .unwrap()
}

/// A controller context over `client`, with these namespaces and ExternalSecrets cached (and
/// indexed by their label, as the cache hook does).
fn context(client: kube::Client, namespaces: Vec<PartialObjectMeta<Namespace>>, es: Vec<ExternalSecret>) -> CesContext {
    context_with(client, namespaces, es, fake_api::store([]))
}

fn context_with(
    client: kube::Client,
    namespaces: Vec<PartialObjectMeta<Namespace>>,
    es: Vec<ExternalSecret>,
    cluster_secret_stores: Store<keyward_crds::ClusterSecretStore>,
) -> CesContext {
    let cx = FanContext::new(
        Arc::new(Context::for_tests(client)),
        fake_api::store(es.iter().map(Packed::pack)),
        fake_api::store(namespaces),
        fake_api::store([]),
        cluster_secret_stores,
        fake_api::store([]),
    );
    for e in &es {
        cx.index(ObjectRef::from_obj(e), e.labels().get(CLUSTER_EXTERNAL_SECRET_LABEL).cloned());
    }
    cx
}

/// Answers: no ExternalSecret `db` in namespace `a` until it is applied, then the applied one;
/// writes of the ClusterExternalSecret with it; deletes with success.
fn api(method: &http::Method, path: &str) -> (u16, Value) {
    match (method.as_str(), path.split('?').next().unwrap_or_default()) {
        ("GET", ES_A) => fake_api::not_found("externalsecrets.external-secrets.io \"db\" not found"),
        ("PATCH", ES_A) => (200, serde_json::to_value(external_secret("a", true)).unwrap()),
        ("DELETE", _) => fake_api::deleted(),
        (_, p) if p.starts_with(CES) => (200, serde_json::to_value(ces(json!({})).as_ref()).unwrap()),
        _ => (200, json!({})),
    }
}

async fn run(cx: CesContext, ces: Arc<ClusterExternalSecret>) -> (Result<Action, Error>, Arc<CesContext>) {
    let cx = Arc::new(cx);
    (reconcile(ces, cx.clone()).await, cx)
}

#[tokio::test]
async fn writes_where_selected_deletes_where_not_and_reports_both() {
    let (client, requests) = fake_api::client(api);
    let namespaces =
        vec![namespace("a", &[("team", "yes")]), namespace("b", &[("team", "yes")]), namespace("c", &[("team", "no")])];
    // b holds someone else's ExternalSecret of the name; c one of its own it no longer selects.
    let cx = context(client, namespaces, vec![external_secret("b", false), external_secret("c", true)]);
    let (result, _) = run(cx, ces(json!({}))).await;

    // Not every namespace was written, by rule: retried on refreshTime.
    assert_eq!(result.unwrap(), Action::requeue(std::time::Duration::from_secs(3600)));
    assert_eq!(
        requests.all(),
        [
            "DELETE /apis/external-secrets.io/v1/namespaces/c/externalsecrets/db?".to_string(),
            format!("GET {ES_A}"),
            format!("PATCH {ES_A}{APPLY}"),
            format!("PATCH {CES}/status?"),
            "POST /apis/events.k8s.io/v1/namespaces/default/events?".to_string(),
        ]
    );
    // Deleted only if it is still the one it controls.
    assert_eq!(requests.body(0)["preconditions"], json!({"uid": "es-c"}));
    // The applied manifest: in a, labelled and controlled by the ClusterExternalSecret.
    let applied = requests.body(2);
    assert_eq!(applied["metadata"]["namespace"], "a");
    assert_eq!(applied["metadata"]["labels"][CLUSTER_EXTERNAL_SECRET_LABEL], "shared");
    assert_eq!(applied["metadata"]["ownerReferences"][0]["uid"], "c1");
    assert_eq!(applied["metadata"]["ownerReferences"][0]["controller"], true);
    assert_eq!(applied["spec"]["secretStoreRef"]["name"], "vault");

    let status = &requests.body(3)["status"];
    assert_eq!(status["externalSecretName"], "db");
    assert_eq!(status["provisionedNamespaces"], json!(["a"]));
    assert_eq!(status["failedNamespaces"][0]["namespace"], "b");
    let why = status["failedNamespaces"][0]["reason"].as_str().unwrap();
    assert!(
        why.starts_with("ExternalSecret b/db exists and is not managed by ClusterExternalSecret \"shared\""),
        "{why}"
    );
    assert_eq!(status["failedNamespaces"].as_array().unwrap().len(), 1);
    let ready = &status["conditions"][0];
    assert_eq!((&ready["status"], &ready["reason"]), (&json!("False"), &json!(reason::NAMESPACES_FAILED)));
    assert_eq!(ready["observedGeneration"], 3);
    assert_eq!(
        ready["message"],
        "ExternalSecret \"db\" could not be written in 1 of 2 selected namespaces (b); see status.failedNamespaces"
    );
    let event = requests.body(4);
    assert_eq!((&event["type"], &event["reason"]), (&json!("Warning"), &json!(reason::NAMESPACES_FAILED)));
    assert_eq!(event["regarding"]["name"], "shared");
}

#[tokio::test]
async fn a_namespace_its_store_refuses_gets_no_external_secret() {
    let (client, requests) = fake_api::client(api);
    let closed: keyward_crds::ClusterSecretStore = serde_json::from_value(json!({
        "apiVersion": "external-secrets.io/v1", "kind": "ClusterSecretStore", "metadata": {"name": "closed"},
        "spec": {"conditions": [{"namespaces": ["elsewhere"]}], "provider": {"fake": {"data": []}}},
    }))
    .unwrap();
    let cx = context_with(client, vec![namespace("a", &[("team", "yes")])], vec![], fake_api::store([closed]));
    let mut through_closed = Arc::unwrap_or_clone(ces(json!({})));
    through_closed.spec.external_secret_spec.secret_store_ref =
        serde_json::from_value(json!({"name": "closed", "kind": "ClusterSecretStore"})).unwrap();
    let (result, _) = run(cx, Arc::new(through_closed)).await;
    assert_eq!(result.unwrap(), Action::requeue(std::time::Duration::from_secs(3600)));
    // Decided from the cache: not even a look at namespace a.
    assert_eq!(
        requests.all(),
        [format!("PATCH {CES}/status?"), "POST /apis/events.k8s.io/v1/namespaces/default/events?".to_string()]
    );
    let status = &requests.body(0)["status"];
    assert_eq!(status["provisionedNamespaces"], json!([]));
    let why = status["failedNamespaces"][0]["reason"].as_str().unwrap();
    assert!(why.contains("ClusterSecretStore \"closed\" does not allow namespace \"a\""), "{why}");
    assert!(why.ends_with("; no ExternalSecret is written in this namespace"), "{why}");
}

#[tokio::test]
async fn a_current_namespace_is_not_written_again() {
    let (client, requests) = fake_api::client(api);
    let cx = context(client, vec![namespace("a", &[("team", "yes")])], vec![]);
    let (result, cx) = run(cx, ces(json!({}))).await;
    assert_eq!(result.unwrap(), Action::requeue(std::time::Duration::from_secs(3600)));
    assert_eq!(requests.all()[..2], [format!("GET {ES_A}"), format!("PATCH {ES_A}{APPLY}")]);
    let status = requests.body(2)["status"].clone();
    assert_eq!(status["conditions"][0]["reason"], reason::PROVISIONED);
    assert_eq!(status["conditions"][0]["message"], "ExternalSecret \"db\" is current in 1 namespaces");

    // The next reconcile sees what it applied in the cache and its own status: nothing to do.
    let applied = cx.last_applied(&ObjectRef::new("db").within("a")).unwrap();
    let (client, requests) = fake_api::client(api);
    let cx = context(client, vec![namespace("a", &[("team", "yes")])], vec![external_secret("a", true)]);
    cx.record_applied(ObjectRef::new("db").within("a"), applied);
    let mut again = Arc::unwrap_or_clone(ces(json!({})));
    again.status = Some(serde_json::from_value::<ClusterExternalSecretStatus>(status).unwrap());
    let (result, _) = run(cx, Arc::new(again)).await;
    assert_eq!(result.unwrap(), Action::requeue(std::time::Duration::from_secs(3600)));
    assert_eq!(requests.all(), Vec::<String>::new());
}

#[tokio::test]
async fn an_invalid_spec_changes_nothing_but_its_status() {
    let (client, requests) = fake_api::client(api);
    let cx = context(client, vec![namespace("a", &[("team", "yes")])], vec![external_secret("a", true)]);
    let mut bad = Arc::unwrap_or_clone(ces(json!({})));
    bad.spec.external_secret_name = Some("Not_A_Name".into());
    let (result, _) = run(cx, Arc::new(bad)).await;
    assert_eq!(result.unwrap(), Action::await_change());
    assert_eq!(requests.all(), [format!("PATCH {CES}/status?")]);
    let ready = &requests.body(0)["status"]["conditions"][0];
    assert_eq!((&ready["status"], &ready["reason"]), (&json!("False"), &json!(reason::INVALID_SPEC)));
    let message = ready["message"].as_str().unwrap();
    assert!(message.starts_with("spec is invalid, nothing was changed: spec.externalSecretName"), "{message}");
}

#[tokio::test]
async fn the_finalizer_is_added_before_anything_is_written() {
    let (client, requests) = fake_api::client(api);
    let cx = context(client, vec![namespace("a", &[("team", "yes")])], vec![]);
    let (result, _) = run(cx, ces(json!({"finalizers": []}))).await;
    assert_eq!(result.unwrap(), Action::await_change());
    assert_eq!(requests.all(), [format!("PATCH {CES}?")]);
    let patch = requests.body(0).to_string();
    assert!(patch.contains(CLUSTER_EXTERNAL_SECRET_FINALIZER), "{patch}");
}

#[tokio::test]
async fn deletion_removes_its_external_secrets_then_the_finalizer() {
    let deleting = json!({"deletionTimestamp": "2026-01-01T00:00:00Z"});
    let es = vec![external_secret("a", true), external_secret("b", false)];

    // A failed delete keeps the finalizer: the deletion is retried.
    let (client, requests) = fake_api::client(|method, path| match *method {
        http::Method::DELETE if path.starts_with(ES_A) => fake_api::status(500, "InternalError", "etcd is down"),
        _ => api(method, path),
    });
    let (result, _) = run(context(client, vec![], es.clone()), ces(deleting.clone())).await;
    let err = result.unwrap_err().to_string();
    assert!(err.contains("deleting ExternalSecret a/db") && err.contains("etcd is down"), "{err}");
    assert_eq!(requests.all(), [format!("DELETE {ES_A}?")]);

    // Deleted (b's is not its own: left alone), the finalizer goes.
    let (client, requests) = fake_api::client(api);
    let (result, _) = run(context(client, vec![], es), ces(deleting)).await;
    assert_eq!(result.unwrap(), Action::await_change());
    assert_eq!(requests.all(), [format!("DELETE {ES_A}?"), format!("PATCH {CES}?")]);
    assert_eq!(requests.body(0)["preconditions"], json!({"uid": "es-a"}));
    let release = requests.body(1).to_string();
    assert!(release.contains("\"remove\"") && release.contains("/metadata/finalizers/0"), "{release}");
}
