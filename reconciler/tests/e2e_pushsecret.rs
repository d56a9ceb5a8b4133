//! End to end: PushSecret through a namespaced Provider to the Fake provider, read back through
//! an ExternalSecret, and removed by the Delete policy's finalizer.

#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use keyward_crds::{ExternalSecret, Fake, Provider, PushSecret};
use keyward_e2e::with_temp_namespace;
use kube::Api;
use kube::api::DeleteParams;
use serde_json::json;
use support::*;

const WAIT: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread")]
async fn push_secret_with_omitted_kind_pushes_and_delete_policy_removes_the_remote_copy() {
    with_temp_namespace(&[], |client, ns| async move {
        let pki = Pki::new();
        pki.install(&client, &ns).await;
        let fake = ProviderProcess::start("keyward-provider-fake", pki.provider_dir(), None).await;
        apply(&Api::<Fake>::namespaced(client.clone(), &ns), fake_config("cfg", &[("seed", "x")])).await;
        let providers: Api<Provider> = Api::namespaced(client.clone(), &ns);
        apply(
            &providers,
            json!({
                "apiVersion": "external-secrets.io/v1", "kind": "Provider",
                "metadata": {"name": "fake", "labels": {CLASS_LABEL: ns}},
                "spec": {"config": {"address": fake.address(), "providerRef": {
                    "apiVersion": "provider.external-secrets.io/v2alpha1", "kind": "Fake", "name": "cfg"}}},
            }),
        )
        .await;
        let _reconciler = Reconciler::start(&ns, &[]).await;
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
                    "refreshInterval": "1h",
                    "deletionPolicy": "Delete",
                    "secretStoreRefs": [{"name": "fake"}],
                    "selector": {"secret": {"name": "source"}},
                    "data": [{"match": {"secretKey": "password", "remoteRef": {"remoteKey": "remote-db"}},
                              "metadata": {"labels": {"a": "b"}}}],
                },
            }),
        )
        .await;
        let ps = eventually("PushSecret synced", WAIT, || async {
            let ps = pss.get("push").await.ok()?;
            let st = ps.status.clone()?;
            (ready_of(&st.conditions)?.0 == "True").then_some(ps)
        })
        .await;
        let status = ps.status.unwrap();
        let synced = status.synced_push_secrets.get("Provider/fake").expect("omitted kind resolved to the Provider");
        assert!(synced.contains_key("remote-db"));
        assert_eq!(synced["remote-db"].metadata, Some(json!({"labels": {"a": "b"}})));
        assert!(
            ps.metadata.finalizers.unwrap_or_default().iter().any(|f| f == "pushsecret.externalsecrets.io/finalizer")
        );

        // Read the pushed value back through an ExternalSecret on the same provider.
        let ess: Api<ExternalSecret> = Api::namespaced(client.clone(), &ns);
        apply(
            &ess,
            json!({
                "apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
                "metadata": {"name": "readback", "labels": {CLASS_LABEL: ns}},
                "spec": {"refreshInterval": "1s", "secretStoreRef": {"name": "fake"},
                         "data": [{"secretKey": "v", "remoteRef": {"key": "remote-db"}}]},
            }),
        )
        .await;
        eventually("pushed value read back", WAIT, || async {
            let s = secrets.get_opt("readback").await.ok()??;
            (value(&s, "v").as_deref() == Some("pushed-value")).then_some(())
        })
        .await;

        // Deleting the PushSecret deletes the remote copy before the finalizer is released.
        pss.delete("push", &DeleteParams::default()).await.unwrap();
        eventually("PushSecret gone", WAIT, || async { pss.get_opt("push").await.ok()?.is_none().then_some(()) }).await;
        eventually("remote copy gone", WAIT, || async {
            let es = ess.get("readback").await.ok()?;
            let (status, _, message) = ready_of(&es.status?.conditions)?;
            (status == "False" && message.contains("no secret")).then_some(())
        })
        .await;
    })
    .await;
}
