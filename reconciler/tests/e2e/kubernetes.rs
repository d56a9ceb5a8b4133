//! End to end with the Kubernetes provider: a namespaced Provider reads Secrets of another
//! namespace with ServiceAccount credentials; broken credentials keep everything Ready=False
//! with no target until they are fixed.

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use keyward_crds::{ExternalSecret, Provider};
use keyward_e2e::with_temp_namespace;
use kube::Api;
use serde_json::json;

use crate::support::*;

const WAIT: Duration = Duration::from_secs(90);

#[tokio::test(flavor = "multi_thread")]
async fn kubernetes_provider_syncs_follows_changes_and_recovers_from_broken_auth() {
    let _turn = shared().await;
    with_temp_namespace(&[], |_client, remote| async move {
        with_temp_namespace(&[], |client, ns| async move {
            let pki = Pki::new();
            pki.install(&client, &ns).await;
            let kube_provider = ProviderProcess::start("keyward-provider-kubernetes", pki.provider_dir(), None).await;
            kubernetes_good_and_broken(&client, &ns, &remote, &kube_provider.address()).await;
            let remote_secrets: Api<Secret> = Api::namespaced(client.clone(), &remote);
            let providers: Api<Provider> = Api::namespaced(client.clone(), &ns);
            let _reconciler = Reconciler::start(&ns, &[]).await;
            let ess: Api<ExternalSecret> = Api::namespaced(client.clone(), &ns);
            for name in ["good", "broken"] {
                apply(
                    &ess,
                    json!({"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
                           "metadata": {"name": name, "labels": {CLASS_LABEL: ns}},
                           "spec": {"refreshInterval": "1s", "secretStoreRef": {"name": name, "kind": "Provider"},
                                    "data": [{"secretKey": "user", "remoteRef": {"key": "db", "property": "user"}}]}}),
                )
                .await;
            }
            let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
            let synced = |want: &'static str, name: &'static str| wait_for_value(&secrets, name, "user", want, WAIT);
            synced("app", "good").await;
            apply(
                &remote_secrets,
                json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db"}, "stringData": {"user": "app2"}}),
            )
            .await;
            synced("app2", "good").await;

            // Broken credentials: Provider and ExternalSecret not ready, no target.
            eventually("broken Provider not ready", WAIT, || async {
                let p = providers.get("broken").await.ok()?;
                (ready_of(&p.status?.conditions)?.0 == "False").then_some(())
            })
            .await;
            eventually("broken ExternalSecret not ready", WAIT, || async {
                let es = ess.get("broken").await.ok()?;
                (ready_of(&es.status?.conditions)?.0 == "False").then_some(())
            })
            .await;
            assert!(secrets.get_opt("broken").await.unwrap().is_none());
            let good = providers.get("good").await.unwrap();
            assert_eq!(ready_of(&good.status.unwrap().conditions).unwrap().0, "True");

            // Fixed: both recover without restarting anything.
            grant_secrets(&client, &remote, &ns, "nobody", &["get", "list", "watch"]).await;
            synced("app2", "broken").await;
            eventually("broken Provider ready", WAIT, || async {
                let p = providers.get("broken").await.ok()?;
                (ready_of(&p.status?.conditions)?.0 == "True").then_some(())
            })
            .await;
        })
        .await
    })
    .await;
}
