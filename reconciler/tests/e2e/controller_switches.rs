//! End to end: upstream's controller switches (`--process-*`, the chart's `process*` values).
//! With PushSecrets, ClusterSecretStores and ClusterGenerators switched off, an ExternalSecret
//! through a Provider still syncs while a PushSecret is left untouched (no push, status or
//! finalizer), an ExternalSecret naming a ClusterSecretStore gets no status at all, and one
//! naming a ClusterGenerator reports the switch.

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use keyward_crds::generators::ClusterGenerator;
use keyward_crds::{ExternalSecret, Provider, PushSecret};
use keyward_e2e::with_temp_namespace;
use keyward_provider_fake::api::Fake;
use kube::Api;
use serde_json::json;

use crate::support::*;

const WAIT: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread")]
async fn switched_off_kinds_are_left_alone_while_external_secrets_sync() {
    let _turn = shared().await;
    with_temp_namespace(&[], |client, ns| async move {
        let pki = Pki::new();
        pki.install(&client, &ns).await;
        let fake = ProviderProcess::start("keyward-provider-fake", pki.provider_dir(), None).await;
        apply(&Api::<Fake>::namespaced(client.clone(), &ns), fake_config("cfg", &[("db", "from-store")])).await;
        apply(&Api::<Provider>::namespaced(client.clone(), &ns), provider("fake", &ns, &fake.address(), "cfg")).await;
        // Exists, so only the switch can refuse it.
        let generator = format!("{ns}-uuid");
        let _cleanup = ClusterGenerators(vec![generator.clone()]);
        apply(
            &Api::<ClusterGenerator>::all(client.clone()),
            json!({"apiVersion": "generators.external-secrets.io/v1alpha1", "kind": "ClusterGenerator",
                   "metadata": {"name": generator},
                   "spec": {"kind": "UUID", "generator": {"uuidSpec": {}}}}),
        )
        .await;
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
        apply(
            &secrets,
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "source"},
                   "stringData": {"password": "pushed-value"}}),
        )
        .await;
        let pss: Api<PushSecret> = Api::namespaced(client.clone(), &ns);
        apply(
            &pss,
            json!({
                "apiVersion": "external-secrets.io/v1alpha1", "kind": "PushSecret",
                "metadata": {"name": "push", "labels": {CLASS_LABEL: ns}},
                "spec": {
                    "refreshInterval": "1s", "deletionPolicy": "Delete",
                    "secretStoreRefs": [{"name": "fake", "kind": "Provider"}],
                    "selector": {"secret": {"name": "source"}},
                    "data": [{"match": {"secretKey": "password", "remoteRef": {"remoteKey": "remote-db"}}}],
                },
            }),
        )
        .await;
        let reconciler = Reconciler::start(
            &ns,
            &["--process-push-secret=false", "--process-cluster-store=false", "--process-cluster-generator=false"],
        )
        .await;

        let ess: Api<ExternalSecret> = Api::namespaced(client.clone(), &ns);
        let es = |name: &str, kind: &str, store: &str| {
            json!({
                "apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
                "metadata": {"name": name, "labels": {CLASS_LABEL: ns}},
                "spec": {"refreshInterval": "1s", "secretStoreRef": {"name": store, "kind": kind},
                         "data": [{"secretKey": "v", "remoteRef": {"key": "db"}}]},
            })
        };
        apply(&ess, es("synced", "Provider", "fake")).await;
        apply(&ess, es("cluster-store", "ClusterSecretStore", &format!("{ns}-absent"))).await;
        apply(&ess, generator_external_secret("generated", &ns, "ClusterGenerator", &generator)).await;
        wait_for_value(&secrets, "synced", "v", "from-store", WAIT).await;
        let message = wait_refused(&ess, "generated", "--process-cluster-generator=false", WAIT).await;
        assert!(message.contains(&format!("ClusterGenerator {generator:?}")), "{message}");
        assert!(secrets.get_opt("generated").await.unwrap().is_none());

        // Several of the PushSecret's and the ExternalSecret's 1s refreshes later: both untouched.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let ps = pss.get("push").await.unwrap();
        assert!(ps.status.is_none(), "a PushSecret is left alone: {:?}", ps.status);
        assert!(ps.metadata.finalizers.unwrap_or_default().is_empty(), "no finalizer on a PushSecret left alone");
        let cluster_store = ess.get("cluster-store").await.unwrap();
        assert!(cluster_store.status.is_none(), "an ExternalSecret naming a ClusterSecretStore is left alone");
        assert!(secrets.get_opt("cluster-store").await.unwrap().is_none());
        // Only the switched-off controllers are missing from controller-runtime's series.
        let metrics = reconciler.metrics().await;
        assert!(metrics.contains(r#"controller="externalsecret""#), "externalsecret controller runs");
        assert!(!metrics.contains(r#"controller="pushsecret""#), "no pushsecret controller");
        assert!(!metrics.contains(r#"controller="clustersecretstore""#), "no clustersecretstore controller");
        assert!(metrics.contains(r#"controller="secretstore""#), "secretstore controller runs");
    })
    .await;
}
