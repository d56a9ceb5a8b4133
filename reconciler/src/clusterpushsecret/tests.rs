//! The PushSecret a ClusterPushSecret writes, which ones it counts as its own, and one
//! reconcile against the fake API server.

use k8s_openapi::api::core::v1::Namespace;
use kube::core::PartialObjectMeta;
use kube::runtime::controller::Action;

use super::*;
use crate::context::Context;
use crate::fake_api;
use crate::fanout::FanContext;
use crate::fanout::reconcile::{desired, reconcile};

const PS_A: &str = "/apis/external-secrets.io/v1alpha1/namespaces/a/pushsecrets/db";
const CPS: &str = "/apis/external-secrets.io/v1alpha1/clusterpushsecrets/shared";

fn cps() -> ClusterPushSecret {
    serde_yaml::from_str(
        "apiVersion: external-secrets.io/v1alpha1\nkind: ClusterPushSecret\n\
         metadata: {name: shared, uid: c1, generation: 2}\n\
         spec:\n  pushSecretName: db\n  refreshTime: 10m\n  namespaceSelectors: [{matchLabels: {team: yes}}]\n  \
         pushSecretMetadata: {labels: {app: x}, annotations: {note: y}}\n  \
         pushSecretSpec: {secretStoreRefs: [{name: s, kind: ClusterProvider}], selector: {secret: {name: src}}, \
         data: [{match: {secretKey: k, remoteRef: {remoteKey: r}}}]}\n",
    )
    .unwrap()
}

/// PushSecret `db` in `ns`, controlled by `shared` when `owned`.
fn push_secret(ns: &str, owned: bool) -> PushSecret {
    let owner = json!([{"apiVersion": "external-secrets.io/v1alpha1", "kind": "ClusterPushSecret", "name": "shared",
                        "uid": "c1", "controller": owned}]);
    serde_json::from_value(json!({
        "apiVersion": "external-secrets.io/v1alpha1", "kind": "PushSecret",
        "metadata": {"name": "db", "namespace": ns, "uid": format!("ps-{ns}"), "generation": 1,
                     "ownerReferences": owner},
        "spec": {"secretStoreRefs": [{"name": "s"}], "selector": {"secret": {"name": "src"}}},
    }))
    .unwrap()
}

#[test]
fn the_manifest_is_upstreams_and_only_a_controller_reference_makes_it_its_own() {
    let body = desired(&cps(), "db");
    assert_eq!(
        (body["apiVersion"].as_str(), body["kind"].as_str()),
        (Some("external-secrets.io/v1alpha1"), Some("PushSecret"))
    );
    assert_eq!(
        (&body["metadata"]["labels"], &body["metadata"]["annotations"]),
        (&json!({"app": "x"}), &json!({"note": "y"}))
    );
    let owner = &body["metadata"]["ownerReferences"][0];
    assert_eq!(owner["apiVersion"], "external-secrets.io/v1alpha1");
    assert_eq!(
        (owner["kind"].as_str(), owner["name"].as_str(), owner["uid"].as_str()),
        (Some("ClusterPushSecret"), Some("shared"), Some("c1"))
    );
    assert_eq!(owner["controller"], true);
    assert_eq!(body["spec"]["secretStoreRefs"][0]["name"], "s");
    assert_eq!(body["spec"]["data"][0]["match"]["remoteRef"]["remoteKey"], "r");

    assert_eq!(ClusterPushSecret::owner_of(&push_secret("a", true)).as_deref(), Some("shared"));
    assert_eq!(ClusterPushSecret::owner_of(&push_secret("a", false)), None, "not the controller");
    let mut other_kind = push_secret("a", true);
    other_kind.metadata.owner_references.as_mut().unwrap()[0].kind = "ClusterExternalSecret".into();
    assert_eq!(ClusterPushSecret::owner_of(&other_kind), None);
}

fn namespace(name: &str, team: &str) -> PartialObjectMeta<Namespace> {
    let mut ns = PartialObjectMeta::<Namespace>::default();
    ns.metadata.name = Some(name.into());
    ns.metadata.labels = Some([("team".to_string(), team.to_string())].into());
    ns
}

#[tokio::test]
async fn writes_where_selected_deletes_where_not_and_reports_the_push_secret_name() {
    let (client, requests) = fake_api::client(|method, path| match (method.as_str(), path.split('?').next()) {
        ("GET", Some(PS_A)) => fake_api::not_found("pushsecrets.external-secrets.io \"db\" not found"),
        ("PATCH", Some(PS_A)) => (200, serde_json::to_value(push_secret("a", true)).unwrap()),
        ("DELETE", _) => fake_api::deleted(),
        _ => (200, serde_json::to_value(cps()).unwrap()),
    });
    // b is no longer selected and holds its PushSecret.
    let owned_in_b = push_secret("b", true);
    let cx = FanContext::<ClusterPushSecret>::new(
        Arc::new(Context::for_tests(client)),
        fake_api::store([owned_in_b.clone()]),
        fake_api::store([namespace("a", "yes"), namespace("b", "no")]),
        fake_api::store([]),
        fake_api::store([]),
        fake_api::store([]),
    );
    cx.index(ObjectRef::from_obj(&owned_in_b), ClusterPushSecret::owner_of(&owned_in_b));
    let result = reconcile(Arc::new(cps()), Arc::new(cx)).await;
    assert_eq!(result.unwrap(), Action::requeue(std::time::Duration::from_secs(600)), "refreshTime");
    assert_eq!(
        requests.all(),
        [
            "DELETE /apis/external-secrets.io/v1alpha1/namespaces/b/pushsecrets/db?".to_string(),
            format!("GET {PS_A}"),
            format!("PATCH {PS_A}?&force=true&fieldManager=keyward-clusterpushsecret"),
            format!("PATCH {CPS}/status?"),
        ]
    );
    assert_eq!(requests.body(0)["preconditions"], json!({"uid": "ps-b"}));
    assert_eq!(requests.body(2)["metadata"]["namespace"], "a");
    let status = &requests.body(3)["status"];
    assert_eq!(status["pushSecretName"], "db");
    assert_eq!(status["provisionedNamespaces"], json!(["a"]));
    assert_eq!(status["failedNamespaces"], json!([]));
    let ready = &status["conditions"][0];
    assert_eq!((&ready["status"], &ready["reason"]), (&json!("True"), &json!(reason::PROVISIONED)));
    assert_eq!(ready["message"], "PushSecret \"db\" is current in 1 namespaces");
}
