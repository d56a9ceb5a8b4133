//! End to end: a ClusterPushSecret over labelled namespaces, with the real kube-apiserver and
//! etcd (and its garbage collector), the webhook registered with the API server, a reconciler
//! that watches every namespace, and the Fake provider over mTLS behind a Provider in each
//! namespace.
//!
//! Admission denies an invalid embedded PushSecret spec, naming its field; the PushSecrets appear
//! in the two selected namespaces and push each namespace's Secret (read back through an
//! ExternalSecret); a namespace that stops matching loses its PushSecret (and, by its
//! `deletionPolicy: Delete`, the remote copy); deleting the ClusterPushSecret deletes the rest.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Secret};
use keyward_crds::{ClusterPushSecret, ExternalSecret, Provider, PushSecret};
use keyward_e2e::{accepts, control_plane, rejects};
use keyward_provider_fake::api::Fake;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};

use crate::cluster_external_secret::{Cleanup, rule, start_webhook};
use crate::pushsecret::read_back;
use crate::support::*;

const WAIT: Duration = Duration::from_secs(90);
/// On every namespace and cluster-scoped object of the run.
const RUN_LABEL: &str = "keyward.dev/cps-e2e";
/// Namespaces the ClusterPushSecret selects.
const SELECT_LABEL: &str = "keyward.dev/cps-e2e-select";
/// The name of the PushSecrets.
const PS_NAME: &str = "shared-push";

fn cluster_push_secret(name: &str, run: &str, push_spec: Value) -> Value {
    json!({
        "apiVersion": "external-secrets.io/v1alpha1", "kind": "ClusterPushSecret",
        "metadata": {"name": name, "labels": {CLASS_LABEL: run, RUN_LABEL: run}},
        "spec": {
            "pushSecretName": PS_NAME,
            "namespaceSelectors": [{"matchLabels": {SELECT_LABEL: run}}],
            "refreshTime": "1m",
            "pushSecretMetadata": {"labels": {CLASS_LABEL: run, "app": "db"}},
            "pushSecretSpec": push_spec,
        },
    })
}

/// A namespace of the run holding the provider client TLS Secret, a Fake configuration, the
/// Provider `fake` and the Secret `source` to push (`password: <value>`).
async fn tenant(client: &Client, cleanup: &mut Cleanup, labels: &[&str], pki: &Pki, fake: &str, value: &str) -> String {
    let ns = cleanup.namespace(client, labels).await;
    pki.install(client, &ns).await;
    apply(&Api::<Fake>::namespaced(client.clone(), &ns), fake_config("cfg", &[("seed", "x")])).await;
    apply(&Api::<Provider>::namespaced(client.clone(), &ns), provider("fake", &ns, fake, "cfg")).await;
    let source = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "source"},
                        "stringData": {"password": value}});
    apply(&Api::<Secret>::namespaced(client.clone(), &ns), source).await;
    ns
}

#[tokio::test(flavor = "multi_thread")]
async fn cluster_push_secret_pushes_in_selected_namespaces_and_cleans_up() {
    // Alone: a reconciler of every namespace and a cluster-scoped object.
    let _turn = exclusive().await;
    let client = control_plane().await.client().await;
    let run = format!("{:08x}", rand::random::<u32>());
    let kinds = &["clusterpushsecrets"];
    let mut cleanup = Cleanup { run: run.clone(), label: RUN_LABEL, kinds, namespaces: Vec::new() };
    let operator = cleanup.namespace(&client, &[]).await;
    let pki = Pki::new();
    let fake = ProviderProcess::start("keyward-provider-fake", pki.provider_dir(), None).await;
    let ns_a = tenant(&client, &mut cleanup, &[SELECT_LABEL], &pki, &fake.address(), "value-a").await;
    let ns_b = tenant(&client, &mut cleanup, &[SELECT_LABEL], &pki, &fake.address(), "value-b").await;
    let ns_other = tenant(&client, &mut cleanup, &[], &pki, &fake.address(), "value-other").await;
    let webhook = start_webhook(
        &client,
        &pki,
        &cleanup,
        json!([rule("v1alpha1", &["pushsecrets"], "Namespaced")]),
        json!([rule("v1alpha1", &["clusterpushsecrets"], "Cluster")]),
    )
    .await;
    let reconciler = Reconciler::start_cluster_wide(&run, &operator, &[]).await;
    let name = format!("cps-{run}");
    let push_spec = json!({
        "refreshInterval": "1h",
        "deletionPolicy": "Delete",
        "secretStoreRefs": [{"name": "fake", "kind": "Provider"}],
        "selector": {"secret": {"name": "source"}},
        "data": [{"match": {"secretKey": "password", "remoteRef": {"remoteKey": "pushed-db"}}}],
    });

    // Admission: the embedded spec gets the PushSecret rules, named under spec.pushSecretSpec.
    let mut invalid = push_spec.clone();
    invalid["selector"]["secret"]["name"] = json!("");
    let out = rejects(
        &serde_yaml::to_string(&cluster_push_secret(&name, &run, invalid)).unwrap(),
        "spec.pushSecretSpec.selector.secret.name: must not be empty",
    );
    assert!(out.contains(&format!("ClusterPushSecret \"{name}\" is invalid")), "{out}");

    // The PushSecrets appear in the selected namespaces and push each namespace's own value.
    accepts(&serde_yaml::to_string(&cluster_push_secret(&name, &run, push_spec)).unwrap());
    let cpss: Api<ClusterPushSecret> = Api::all(client.clone());
    let provisioned = |want: &[&String]| {
        let want: BTreeSet<String> = want.iter().map(|s| s.to_string()).collect();
        let cpss = cpss.clone();
        let name = name.clone();
        async move {
            eventually("the ClusterPushSecret reports its namespaces", WAIT, || async {
                let status = cpss.get(&name).await.ok()?.status?;
                let got: BTreeSet<String> = status.provisioned_namespaces.iter().cloned().collect();
                (got == want && status.failed_namespaces.is_empty()).then_some(status)
            })
            .await
        }
    };
    let status = provisioned(&[&ns_a, &ns_b]).await;
    assert_eq!(status.push_secret_name.as_deref(), Some(PS_NAME));
    let (ready, reason, _) = ready_of(&status.conditions).unwrap();
    assert_eq!((ready.as_str(), reason.as_str()), ("True", "PushSecretsProvisioned"));
    for (ns, value) in [(&ns_a, "value-a"), (&ns_b, "value-b")] {
        let pss: Api<PushSecret> = Api::namespaced(client.clone(), ns);
        let ps = eventually("the PushSecret pushed", WAIT, || async {
            let ps = pss.get(PS_NAME).await.ok()?;
            (ready_of(&ps.status.clone()?.conditions)?.0 == "True").then_some(ps)
        })
        .await;
        let owner = &ps.owner_references()[0];
        assert_eq!(
            (owner.api_version.as_str(), owner.kind.as_str(), owner.name.as_str(), owner.controller),
            ("external-secrets.io/v1alpha1", "ClusterPushSecret", name.as_str(), Some(true))
        );
        assert_eq!(ps.labels().get("app").map(String::as_str), Some("db"));
        read_back(&client, ns, &run, &[("v", "pushed-db")]).await;
        wait_for_value(&Api::namespaced(client.clone(), ns), "readback", "v", value, WAIT).await;
    }
    assert!(Api::<PushSecret>::namespaced(client.clone(), &ns_other).get_opt(PS_NAME).await.unwrap().is_none());
    let text = reconciler.metrics().await;
    for needle in [
        format!(
            "clusterpushsecret_status_condition{{name=\"{name}\",namespace=\"\",condition=\"Ready\",status=\"True\"}} 1"
        ),
        format!("clusterpushsecret_reconcile_duration{{name=\"{name}\",namespace=\"\"}} "),
    ] {
        assert!(text.contains(&needle), "metrics miss {needle}:\n{text}");
    }

    // A namespace that stops matching loses its PushSecret, and so its remote copy.
    let unlabel = json!({"metadata": {"labels": {SELECT_LABEL: null}}});
    Api::<Namespace>::all(client.clone()).patch(&ns_b, &PatchParams::default(), &Patch::Merge(unlabel)).await.unwrap();
    let pss_b: Api<PushSecret> = Api::namespaced(client.clone(), &ns_b);
    eventually("the unselected namespace's PushSecret is deleted", WAIT, || async {
        pss_b.get_opt(PS_NAME).await.ok()?.is_none().then_some(())
    })
    .await;
    let ess_b: Api<ExternalSecret> = Api::namespaced(client.clone(), &ns_b);
    eventually("its remote copy is deleted", WAIT, || async {
        let (status, _, message) = ready_of(&ess_b.get("readback").await.ok()?.status?.conditions)?;
        (status == "False" && message.contains("no secret")).then_some(())
    })
    .await;
    provisioned(&[&ns_a]).await;

    // Deleting the ClusterPushSecret: the garbage collector deletes its PushSecrets.
    cpss.delete(&name, &Default::default()).await.unwrap();
    let pss_a: Api<PushSecret> = Api::namespaced(client.clone(), &ns_a);
    eventually("the PushSecrets are deleted with their owner", WAIT, || async {
        pss_a.get_opt(PS_NAME).await.ok()?.is_none().then_some(())
    })
    .await;
    eventually("the deleted ClusterPushSecret's series are dropped", WAIT, || async {
        (!reconciler.metrics().await.contains(&format!("name=\"{name}\""))).then_some(())
    })
    .await;
    drop(webhook);
}
