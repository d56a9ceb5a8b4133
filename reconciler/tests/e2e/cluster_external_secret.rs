//! End to end: a ClusterExternalSecret over labelled namespaces, with the real kube-apiserver
//! and etcd, the webhook registered with the API server, a reconciler that watches every
//! namespace, and the Fake provider over mTLS behind a ClusterProvider whose conditions admit
//! some of the selected namespaces only.
//!
//! The ClusterExternalSecret's ExternalSecrets appear and sync in the selected namespaces, follow
//! a spec change, appear in a namespace labelled later and disappear from one unlabelled; an
//! ExternalSecret of the same name that it does not own is left alone and reported; a namespace
//! the ClusterProvider refuses is named in an admission warning and reported; deleting the
//! ClusterExternalSecret deletes its ExternalSecrets and nothing else.

use std::collections::BTreeSet;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use keyward_crds::cluster_external_secret::CLUSTER_EXTERNAL_SECRET_LABEL;
use keyward_crds::{ClusterExternalSecret, ClusterProvider, ExternalSecret};
use keyward_e2e::{E2E_LABEL, accepts, control_plane, kubectl};
use keyward_provider_fake::api::Fake;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};

use crate::support::*;

const WAIT: Duration = Duration::from_secs(90);
/// On every namespace of the run, so the webhook configurations select them.
const RUN_LABEL: &str = "keyward.dev/ces-e2e";
/// Namespaces the ClusterExternalSecret selects.
const SELECT_LABEL: &str = "keyward.dev/ces-e2e-select";
/// Namespaces the ClusterProvider admits.
const ADMIT_LABEL: &str = "keyward.dev/ces-e2e-admit";
/// The name of the ExternalSecrets.
const ES_NAME: &str = "shared-db";

/// Deletes what a run created outside its namespaces (and the namespaces), also when the test
/// fails; an object left behind loses its finalizers first, as nobody else would remove them.
pub(crate) struct Cleanup {
    pub run: String,
    /// The label (valued with the run id) on every namespace and cluster-scoped object of the run.
    pub label: &'static str,
    /// The cluster-scoped kinds the run creates, deleted by that label.
    pub kinds: &'static [&'static str],
    pub namespaces: Vec<String>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let selector = format!("{}={}", self.label, self.run);
        for kind in self.kinds {
            let left = kubectl().args(["get", kind, "-l", &selector, "-o", "name"]).output();
            for name in left.map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default().lines() {
                let unblock = r#"{"metadata":{"finalizers":null}}"#;
                let _ = kubectl().args(["patch", name, "--type=merge", "-p", unblock]).output();
            }
            let _ = kubectl().args(["delete", kind, "-l", &selector, "--ignore-not-found", "--wait=false"]).output();
        }
        if std::env::var("KEYWARD_E2E_KEEP").is_ok_and(|v| v == "1") {
            return;
        }
        for ns in &self.namespaces {
            let _ = kubectl().args(["delete", "namespace", ns, "--ignore-not-found", "--wait=false"]).output();
        }
    }
}

impl Cleanup {
    /// Creates a namespace of the run with `labels` (selection and admission labels take the
    /// run id as value).
    pub async fn namespace(&mut self, client: &Client, labels: &[&str]) -> String {
        let name = format!("kw-{:08x}", rand::random::<u32>());
        let mut all: std::collections::BTreeMap<String, String> =
            labels.iter().map(|l| (l.to_string(), self.run.clone())).collect();
        all.insert(self.label.into(), self.run.clone());
        all.insert(E2E_LABEL.into(), "true".into());
        let ns = Namespace {
            metadata: kube::api::ObjectMeta { name: Some(name.clone()), labels: Some(all), ..Default::default() },
            ..Default::default()
        };
        Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &ns).await.unwrap();
        self.namespaces.push(name.clone());
        name
    }
}

/// An admission rule for `resources` of `external-secrets.io/<version>`.
pub(crate) fn rule(version: &str, resources: &[&str], scope: &str) -> Value {
    json!({"apiGroups": ["external-secrets.io"], "apiVersions": [version],
           "operations": ["CREATE", "UPDATE"], "resources": resources, "scope": scope})
}

/// Registers the webhook for the namespaces of run `cleanup` (the `namespaced` rules) and its
/// cluster-scoped objects (the `cluster` rules), validating and mutating, as the chart does.
pub(crate) async fn start_webhook(
    client: &Client,
    pki: &Pki,
    cleanup: &Cleanup,
    namespaced: Value,
    cluster: Value,
) -> Webhook {
    let mut webhook = Webhook::start(&pki.issue_server_dir("webhook")).await;
    let selector = json!({"matchLabels": {cleanup.label: cleanup.run}});
    for (kind, path) in [("ValidatingWebhookConfiguration", "/validate"), ("MutatingWebhookConfiguration", "/mutate")] {
        let hook = |name: &str, rules: &Value, namespaced: bool| {
            let mut h = json!({
                "name": format!("{name}.run-e2e.keyward.dev"),
                "clientConfig": {"url": format!("{}{path}", webhook.url()), "caBundle": BASE64.encode(&pki.ca)},
                "rules": rules, "failurePolicy": "Fail", "sideEffects": "None",
                "admissionReviewVersions": ["v1"], "timeoutSeconds": 10,
            });
            h[if namespaced { "namespaceSelector" } else { "objectSelector" }] = selector.clone();
            h
        };
        let config = json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
            "metadata": {"name": format!("keyward-run-e2e-{}", cleanup.run)},
            "webhooks": [hook("namespaced", &namespaced, true), hook("cluster", &cluster, false)],
        });
        webhook.register(client, config).await;
    }
    webhook
}

fn cluster_external_secret(name: &str, run: &str, cp: &str, data: Value) -> Value {
    json!({
        "apiVersion": "external-secrets.io/v1", "kind": "ClusterExternalSecret",
        "metadata": {"name": name, "labels": {CLASS_LABEL: run, RUN_LABEL: run}},
        "spec": {
            "externalSecretName": ES_NAME,
            "namespaceSelectors": [{"matchLabels": {SELECT_LABEL: run}}],
            "refreshTime": "1m",
            "externalSecretMetadata": {"labels": {CLASS_LABEL: run, "app": "db"}, "annotations": {"team": "platform"}},
            "externalSecretSpec": {
                "refreshInterval": "1h",
                "secretStoreRef": {"name": cp, "kind": "ClusterProvider"},
                "data": data,
            },
        },
    })
}

/// The status as (provisioned, failed namespace → reason), once `done` holds for it.
async fn wait_status<F>(api: &Api<ClusterExternalSecret>, name: &str, what: &str, done: F) -> ClusterExternalSecret
where
    F: Fn(&BTreeSet<String>, &BTreeSet<String>) -> bool,
{
    eventually(what, WAIT, || async {
        let ces = api.get(name).await.ok()?;
        let status = ces.status.clone()?;
        let provisioned: BTreeSet<String> = status.provisioned_namespaces.iter().cloned().collect();
        let failed: BTreeSet<String> = status.failed_namespaces.iter().map(|f| f.namespace.clone()).collect();
        done(&provisioned, &failed).then_some(ces)
    })
    .await
}

fn set(items: &[&String]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

async fn wait_gone(api: &Api<ExternalSecret>, what: &str) {
    eventually(what, WAIT, || async { api.get_opt(ES_NAME).await.ok()?.is_none().then_some(()) }).await
}

#[tokio::test(flavor = "multi_thread")]
async fn cluster_external_secret_follows_namespaces_and_leaves_foreign_objects_alone() {
    // Alone: a reconciler of every namespace, a ClusterProvider and a ClusterExternalSecret.
    let _turn = exclusive().await;
    let cp_plane = control_plane().await;
    let client = cp_plane.client().await;
    let run = format!("{:08x}", rand::random::<u32>());
    let kinds = &["clusterexternalsecrets", "clusterproviders"];
    let mut cleanup = Cleanup { run: run.clone(), label: RUN_LABEL, kinds, namespaces: Vec::new() };
    let operator = cleanup.namespace(&client, &[]).await;
    let ns_a = cleanup.namespace(&client, &[SELECT_LABEL, ADMIT_LABEL]).await;
    let ns_b = cleanup.namespace(&client, &[SELECT_LABEL, ADMIT_LABEL]).await;
    let ns_later = cleanup.namespace(&client, &[ADMIT_LABEL]).await;
    let ns_foreign = cleanup.namespace(&client, &[SELECT_LABEL, ADMIT_LABEL]).await;
    let ns_refused = cleanup.namespace(&client, &[SELECT_LABEL]).await;

    // The operator's Fake configuration, reached through a ProviderNamespace ClusterProvider that
    // admits the namespaces carrying the admission label.
    let pki = Pki::new();
    pki.install(&client, &operator).await;
    let fake = ProviderProcess::start("keyward-provider-fake", pki.provider_dir(), None).await;
    apply(
        &Api::<Fake>::namespaced(client.clone(), &operator),
        fake_config("cfg", &[("db", "s3cret"), ("user", "admin")]),
    )
    .await;
    let webhook = start_webhook(
        &client,
        &pki,
        &cleanup,
        json!([rule("v1", &["externalsecrets"], "Namespaced")]),
        json!([rule("v1", &["clusterproviders", "clusterexternalsecrets"], "Cluster")]),
    )
    .await;
    let cp = format!("fake-{run}");
    apply(
        &Api::<ClusterProvider>::all(client.clone()),
        json!({
            "apiVersion": "external-secrets.io/v1", "kind": "ClusterProvider",
            "metadata": {"name": cp, "labels": {CLASS_LABEL: run, RUN_LABEL: run}},
            "spec": {"authenticationScope": "ProviderNamespace",
                     "config": {"address": fake.address(), "providerRef": {
                         "apiVersion": "provider.external-secrets.io/v2alpha1", "kind": "Fake", "name": "cfg",
                         "namespace": operator}},
                     "conditions": [{"namespaceSelector": {"matchLabels": {ADMIT_LABEL: run}}}]},
        }),
    )
    .await;
    let reconciler = Reconciler::start_cluster_wide(&run, &operator, &[]).await;

    // Someone else's ExternalSecret of the same name, in a selected namespace.
    let foreign_api: Api<ExternalSecret> = Api::namespaced(client.clone(), &ns_foreign);
    apply(
        &foreign_api,
        json!({"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
               "metadata": {"name": ES_NAME, "labels": {"owner": "someone-else"}},
               "spec": {"refreshInterval": "1h", "secretStoreRef": {"name": cp, "kind": "ClusterProvider"},
                        "data": [{"secretKey": "theirs", "remoteRef": {"key": "user"}}]}}),
    )
    .await;
    let foreign_before = foreign_api.get(ES_NAME).await.unwrap();

    // Admission: allowed, with a warning that names the refused namespace only.
    let ces_name = format!("ces-{run}");
    let manifest =
        cluster_external_secret(&ces_name, &run, &cp, json!([{"secretKey": "password", "remoteRef": {"key": "db"}}]));
    let out = accepts(&serde_yaml::to_string(&manifest).unwrap());
    assert!(
        out.contains(&format!("ClusterProvider \"{cp}\" does not allow namespace \"{ns_refused}\"")),
        "kubectl apply shows the warning: {out}"
    );
    for admitted in [&ns_a, &ns_b, &ns_foreign] {
        assert!(!out.contains(admitted.as_str()), "{admitted} is admitted and must not be named: {out}");
    }

    // Synced in the selected, admitted namespaces; the other two are reported.
    for ns in [&ns_a, &ns_b] {
        wait_for_value(&Api::<Secret>::namespaced(client.clone(), ns), ES_NAME, "password", "s3cret", WAIT).await;
    }
    let cess: Api<ClusterExternalSecret> = Api::all(client.clone());
    let ces = wait_status(&cess, &ces_name, "provisioned a, b; failed foreign, refused", |p, f| {
        *p == set(&[&ns_a, &ns_b]) && *f == set(&[&ns_foreign, &ns_refused])
    })
    .await;
    let status = ces.status.unwrap();
    let reason_of = |ns: &str| {
        status.failed_namespaces.iter().find(|f| f.namespace == ns).and_then(|f| f.reason.clone()).unwrap_or_default()
    };
    assert!(
        reason_of(&ns_foreign).contains(&format!("ExternalSecret {ns_foreign}/{ES_NAME} exists and is not managed by")),
        "{status:?}"
    );
    assert!(reason_of(&ns_refused).contains(&format!("does not allow namespace \"{ns_refused}\"")), "{status:?}");
    assert_eq!(status.external_secret_name.as_deref(), Some(ES_NAME));
    let (ready, reason, _) = ready_of(&status.conditions).unwrap();
    assert_eq!((ready.as_str(), reason.as_str()), ("False", "NamespacesFailed"));
    let es_a = Api::<ExternalSecret>::namespaced(client.clone(), &ns_a).get(ES_NAME).await.unwrap();
    assert_eq!(es_a.labels().get(CLUSTER_EXTERNAL_SECRET_LABEL), Some(&ces_name));
    assert_eq!(es_a.labels().get("app").map(String::as_str), Some("db"));
    assert_eq!(es_a.annotations().get("team").map(String::as_str), Some("platform"));
    let owner = &es_a.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.controller),
        ("ClusterExternalSecret", ces_name.as_str(), Some(true))
    );
    assert!(Api::<ExternalSecret>::namespaced(client.clone(), &ns_refused).get_opt(ES_NAME).await.unwrap().is_none());
    // Upstream's metrics: the Ready pair (False now) and the reconcile duration, namespace "".
    let series = |status: &str, value: u8| {
        format!(
            "clusterexternalsecret_status_condition{{name=\"{ces_name}\",namespace=\"\",condition=\"Ready\",status=\"{status}\"}} {value}"
        )
    };
    let text = reconciler.metrics().await;
    for needle in [
        series("False", 1),
        series("True", 0),
        format!("clusterexternalsecret_reconcile_duration{{name=\"{ces_name}\",namespace=\"\"}} "),
    ] {
        assert!(text.contains(&needle), "metrics miss {needle}:\n{text}");
    }
    let foreign_now = foreign_api.get(ES_NAME).await.unwrap();
    assert_eq!(foreign_now.metadata.generation, foreign_before.metadata.generation, "the foreign spec is untouched");
    assert!(
        foreign_now.owner_references().is_empty() && foreign_now.labels().get(CLUSTER_EXTERNAL_SECRET_LABEL).is_none()
    );

    // A spec change reaches every ExternalSecret.
    let changed = cluster_external_secret(
        &ces_name,
        &run,
        &cp,
        json!([{"secretKey": "password", "remoteRef": {"key": "db"}}, {"secretKey": "username", "remoteRef": {"key": "user"}}]),
    );
    accepts(&serde_yaml::to_string(&changed).unwrap());
    for ns in [&ns_a, &ns_b] {
        wait_for_value(&Api::<Secret>::namespaced(client.clone(), ns), ES_NAME, "username", "admin", WAIT).await;
    }

    // A namespace labelled later gets one; an unlabelled one loses its own.
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let label = |value: Value| json!({"metadata": {"labels": {SELECT_LABEL: value}}});
    namespaces.patch(&ns_later, &PatchParams::default(), &Patch::Merge(label(json!(run)))).await.unwrap();
    namespaces.patch(&ns_b, &PatchParams::default(), &Patch::Merge(label(Value::Null))).await.unwrap();
    wait_for_value(&Api::<Secret>::namespaced(client.clone(), &ns_later), ES_NAME, "username", "admin", WAIT).await;
    wait_gone(&Api::namespaced(client.clone(), &ns_b), "the ExternalSecret of the unlabelled namespace is deleted")
        .await;
    wait_status(&cess, &ces_name, "provisioned a, later", |p, f| {
        *p == set(&[&ns_a, &ns_later]) && *f == set(&[&ns_foreign, &ns_refused])
    })
    .await;

    // The foreign ExternalSecret gone, its namespace is served on the next look.
    foreign_api.delete(ES_NAME, &Default::default()).await.unwrap();
    wait_status(&cess, &ces_name, "foreign namespace provisioned", |p, _| p.contains(&ns_foreign)).await;

    // Deleting the ClusterExternalSecret deletes its ExternalSecrets, and nothing else.
    let bystander: Api<ExternalSecret> = Api::namespaced(client.clone(), &ns_b);
    apply(
        &bystander,
        json!({"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret", "metadata": {"name": "bystander"},
               "spec": {"refreshInterval": "1h", "secretStoreRef": {"name": cp, "kind": "ClusterProvider"},
                        "data": [{"secretKey": "x", "remoteRef": {"key": "user"}}]}}),
    )
    .await;
    cess.delete(&ces_name, &Default::default()).await.unwrap();
    eventually("the ClusterExternalSecret is gone", WAIT, || async {
        cess.get_opt(&ces_name).await.ok()?.is_none().then_some(())
    })
    .await;
    for ns in [&ns_a, &ns_later, &ns_foreign] {
        let api: Api<ExternalSecret> = Api::namespaced(client.clone(), ns);
        assert!(api.get_opt(ES_NAME).await.unwrap().is_none(), "the ExternalSecret in {ns} is deleted with its owner");
    }
    assert!(bystander.get_opt("bystander").await.unwrap().is_some(), "other ExternalSecrets stay");
    eventually("the deleted ClusterExternalSecret's series are dropped", WAIT, || async {
        (!reconciler.metrics().await.contains(&format!("name=\"{ces_name}\""))).then_some(())
    })
    .await;
    drop(webhook);
}
