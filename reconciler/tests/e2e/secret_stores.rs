//! End to end: upstream-style SecretStore and ClusterSecretStore manifests served by the
//! Kubernetes and Fake provider processes over mTLS (the reference names the store; the
//! provider reads and translates it), ExternalSecrets referencing them synced; a store naming a
//! provider Keyward lacks and a ClusterSecretStore that does not admit the namespace reported
//! Ready=False with the reason. The stores themselves report Ready and capabilities, as
//! upstream's do, from the reconciler's own check of the provider process, at their own
//! `refreshInterval` when they set one. A reference without a kind means a SecretStore, as
//! upstream, even where a Provider of that name exists.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use keyward_crds::{
    Capabilities, ClusterSecretStore, ExternalSecret, Provider, ProviderStatus, PushSecret, SecretStore,
};
use keyward_e2e::{control_plane, with_temp_namespace};
use keyward_provider_fake::api::Fake;
use kube::Api;
use kube::api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::json;

use base64::Engine;

use crate::support::*;

const WAIT: Duration = Duration::from_secs(90);

fn external_secret(name: &str, ns: &str, kind: &str, store: &str, data: serde_json::Value) -> serde_json::Value {
    json!({"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
           "metadata": {"name": name, "labels": {CLASS_LABEL: ns}},
           "spec": {"refreshInterval": "1h", "secretStoreRef": {"kind": kind, "name": store},
                    "target": {"name": name}, "data": data}})
}

async fn wait_condition(api: &Api<ExternalSecret>, name: &str) -> (String, String, String) {
    eventually(&format!("ExternalSecret {name} has a Ready condition"), WAIT, || async {
        let es = api.get(name).await.ok()?;
        ready_of(&es.status.as_ref()?.conditions)
    })
    .await
}

/// Waits until a store's status has a Ready condition with `want` status (and, when Ready,
/// its capabilities); returns (reason, message, capabilities).
async fn wait_store_status<K>(api: &Api<K>, name: &str, want: &str) -> (String, String, Option<Capabilities>)
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    K: kube::core::object::HasStatus<Status = ProviderStatus>,
{
    eventually(&format!("{} {name} reports Ready={want}", K::kind(&())), WAIT, || async {
        let store = api.get(name).await.ok()?;
        let status = store.status()?;
        let (s, reason, message) = ready_of(&status.conditions)?;
        (s == want && (want == "False" || status.capabilities.is_some())).then_some((
            reason,
            message,
            status.capabilities,
        ))
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn upstream_secret_stores_sync_through_the_provider_processes() {
    // Alone: ClusterSecretStores, which every reconciler watches.
    let _turn = exclusive().await;
    with_temp_namespace(&[], |_client, remote| async move {
        with_temp_namespace(&[], |client, ns| async move {
            let pki = Pki::new();
            pki.install(&client, &ns).await;
            let kube_provider = ProviderProcess::start("keyward-provider-kubernetes", pki.provider_dir(), None).await;
            let fake = ProviderProcess::start("keyward-provider-fake", pki.provider_dir(), None).await;
            let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), &ns);
            let sa = ServiceAccount { metadata: ObjectMeta { name: Some("reader".into()), ..Default::default() }, ..Default::default() };
            sas.create(&PostParams::default(), &sa).await.unwrap();
            // Reads for the ExternalSecrets, writes and the delete for the PushSecret that selects
            // the store.
            grant_secrets(&client, &remote, &ns, "reader", &["get", "list", "watch", "create", "update", "patch", "delete"]).await;
            let remote_secrets: Api<Secret> = Api::namespaced(client.clone(), &remote);
            apply(
                &remote_secrets,
                json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db"}, "stringData": {"user": "app"}}),
            )
            .await;

            // The manifests as upstream documents them.
            let ca = std::fs::read(control_plane().await.ca_files().0).unwrap();
            let stores: Api<SecretStore> = Api::namespaced(client.clone(), &ns);
            apply(
                &stores,
                json!({"apiVersion": "external-secrets.io/v1", "kind": "SecretStore",
                       "metadata": {"name": "k8s-store", "labels": {CLASS_LABEL: ns, "push": "here"}},
                       "spec": {"provider": {"kubernetes": {
                           "remoteNamespace": remote,
                           "server": {"url": control_plane().await.server_url(),
                                      "caBundle": base64::engine::general_purpose::STANDARD.encode(ca)},
                           "auth": {"serviceAccount": {"name": "reader"}}}}}}),
            )
            .await;
            apply(
                &stores,
                json!({"apiVersion": "external-secrets.io/v1", "kind": "SecretStore",
                       "metadata": {"name": "vault-backend", "labels": {CLASS_LABEL: ns}},
                       "spec": {"provider": {"vault": {"server": "http://my.vault.server:8200", "path": "secret",
                                                       "auth": {"tokenSecretRef": {"name": "t", "key": "token"}}}}}}),
            )
            .await;
            let cluster_stores: Api<ClusterSecretStore> = Api::all(client.clone());
            let (fake_store, closed_store) = (format!("{ns}-fake"), format!("{ns}-closed"));
            for (name, admitted) in [(&fake_store, &ns), (&closed_store, &"somewhere-else".to_string())] {
                apply(
                    &cluster_stores,
                    json!({"apiVersion": "external-secrets.io/v1", "kind": "ClusterSecretStore",
                           "metadata": {"name": name, "labels": {CLASS_LABEL: ns}},
                           "spec": {"conditions": [{"namespaces": [admitted]}],
                                    "provider": {"fake": {"data": [
                                        {"key": "/foo/bar", "value": "HELLO1", "version": "v1"},
                                        {"key": "/foo/baz", "value": "{\"john\": \"doe\"}", "version": "v1"},
                                        {"key": "/foo/map", "valueMap": {"jane": "roe"}}]}}}}),
                )
                .await;
            }

            let served = [("kubernetes", &kube_provider), ("fake", &fake)];
            let reconciler = Reconciler::start_with_stores(&ns, &served, &[]).await;

            let ess: Api<ExternalSecret> = Api::namespaced(client.clone(), &ns);
            apply(
                &ess,
                external_secret("from-kubernetes", &ns, "SecretStore", "k8s-store",
                                json!([{"secretKey": "user", "remoteRef": {"key": "db", "property": "user"}}])),
            )
            .await;
            apply(
                &ess,
                external_secret("from-fake", &ns, "ClusterSecretStore", &fake_store, json!([
                    {"secretKey": "hello", "remoteRef": {"key": "/foo/bar", "version": "v1"}},
                    {"secretKey": "john", "remoteRef": {"key": "/foo/baz", "version": "v1", "property": "john"}},
                    {"secretKey": "jane", "remoteRef": {"key": "/foo/map", "property": "jane"}},
                ])),
            )
            .await;
            apply(
                &ess,
                external_secret("from-vault", &ns, "SecretStore", "vault-backend",
                                json!([{"secretKey": "x", "remoteRef": {"key": "x"}}])),
            )
            .await;
            apply(
                &ess,
                external_secret("from-closed", &ns, "ClusterSecretStore", &closed_store,
                                json!([{"secretKey": "x", "remoteRef": {"key": "/foo/bar", "version": "v1"}}])),
            )
            .await;

            // An omitted kind reaches the reconciler as written and means the SecretStore, as
            // upstream.
            let mut omitted = external_secret("omitted-kind", &ns, "SecretStore", "k8s-store",
                                              json!([{"secretKey": "user", "remoteRef": {"key": "db", "property": "user"}}]));
            omitted["spec"]["secretStoreRef"].as_object_mut().unwrap().remove("kind");
            apply(&ess, omitted).await;

            let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
            wait_for_value(&secrets, "from-kubernetes", "user", "app", WAIT).await;
            wait_for_value(&secrets, "omitted-kind", "user", "app", WAIT).await;
            wait_for_value(&secrets, "from-fake", "hello", "HELLO1", WAIT).await;
            let synced = secrets.get("from-fake").await.unwrap();
            assert_eq!(value(&synced, "john").as_deref(), Some("doe"), "a property of a JSON value");
            assert_eq!(value(&synced, "jane").as_deref(), Some("roe"), "a deprecated valueMap, read by property");

            let (status, reason, message) = wait_condition(&ess, "from-vault").await;
            assert_eq!((status.as_str(), reason.as_str()), ("False", "ProviderNotSupported"), "{message}");
            assert!(message.contains("spec.provider.vault is served by Keyward's vault provider, which this installation does not run"), "{message}");
            let (status, _, message) = wait_condition(&ess, "from-closed").await;
            assert_eq!(status, "False", "{message}");
            assert!(
                message.contains(&format!("ClusterSecretStore \"{closed_store}\" does not allow namespace \"{ns}\"")),
                "{message}"
            );
            assert!(secrets.get_opt("from-closed").await.unwrap().is_none(), "nothing written for a refused namespace");

            // The stores' own status, as upstream reports it.
            let (reason, message, caps) = wait_store_status(&stores, "k8s-store", "True").await;
            assert_eq!((reason.as_str(), caps), ("Valid", Some(Capabilities::ReadWrite)), "{message}");
            let (reason, message, caps) = wait_store_status(&cluster_stores, &fake_store, "True").await;
            assert_eq!((reason.as_str(), caps), ("Valid", Some(Capabilities::ReadWrite)), "{message}");
            let (reason, message, caps) = wait_store_status(&stores, "vault-backend", "False").await;
            assert_eq!(reason, "ProviderNotSupported", "{message}");
            assert!(message.contains("spec.provider.vault is served by Keyward's vault provider, which this installation does not run"), "{message}");
            assert_eq!(caps, None, "no provider answered");
            // And in upstream's metrics, with upstream's names and labels.
            let text = reconciler.metrics().await;
            for needle in [
                format!("secretstore_status_condition{{name=\"k8s-store\",namespace=\"{ns}\",condition=\"Ready\",status=\"True\"}} 1"),
                format!("secretstore_status_condition{{name=\"vault-backend\",namespace=\"{ns}\",condition=\"Ready\",status=\"False\"}} 1"),
                format!("secretstore_reconcile_duration{{name=\"k8s-store\",namespace=\"{ns}\"}} "),
                format!("clustersecretstore_status_condition{{name=\"{fake_store}\",namespace=\"\",condition=\"Ready\",status=\"True\"}} 1"),
            ] {
                assert!(text.contains(&needle), "metrics miss {needle}:\n{text}");
            }
            // kubectl shows it in upstream's printer columns.
            let printed = keyward_e2e::kubectl()
                .args(["get", "secretstore", "-n", &ns, "k8s-store", "--no-headers"])
                .output()
                .unwrap();
            let printed = String::from_utf8_lossy(&printed.stdout).to_string();
            assert!(printed.contains("Valid") && printed.contains("ReadWrite") && printed.contains("True"), "{printed}");
            // A PushSecret selects SecretStores by label, as upstream: the labelled Kubernetes
            // store gets the value, written into its remote namespace; the other stores do not.
            apply(
                &Api::<Secret>::namespaced(client.clone(), &ns),
                json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "to-push"},
                       "stringData": {"token": "pushed-by-label"}}),
            )
            .await;
            let pss: Api<PushSecret> = Api::namespaced(client.clone(), &ns);
            apply(
                &pss,
                json!({"apiVersion": "external-secrets.io/v1alpha1", "kind": "PushSecret",
                       "metadata": {"name": "by-label", "labels": {CLASS_LABEL: ns}},
                       "spec": {"refreshInterval": "1h",
                                "secretStoreRefs": [{"kind": "SecretStore", "labelSelector": {"matchLabels": {"push": "here"}}}],
                                "selector": {"secret": {"name": "to-push"}},
                                "data": [{"match": {"secretKey": "token", "remoteRef": {"remoteKey": "pushed", "property": "token"}}}]}}),
            )
            .await;
            wait_for_value(&remote_secrets, "pushed", "token", "pushed-by-label", WAIT).await;
            let pushed = eventually("the PushSecret records the selected store", WAIT, || async {
                let st = pss.get("by-label").await.ok()?.status?;
                (ready_of(&st.conditions)?.0 == "True").then_some(st.synced_push_secrets)
            })
            .await;
            assert_eq!(pushed.keys().collect::<Vec<_>>(), ["SecretStore/k8s-store"], "only the labelled store");

            // Deleting it with deletionPolicy Delete removes what it pushed through the SecretStore
            // and releases the finalizer, so the PushSecret (and its namespace) can go.
            pss.patch("by-label", &PatchParams::default(), &Patch::Merge(json!({"spec": {"deletionPolicy": "Delete"}})))
                .await
                .unwrap();
            eventually("the PushSecret holds its finalizer", WAIT, || async {
                let ps = pss.get("by-label").await.ok()?;
                ps.metadata.finalizers.unwrap_or_default().iter().any(|f| f == "pushsecret.externalsecrets.io/finalizer").then_some(())
            })
            .await;
            pss.delete("by-label", &DeleteParams::default()).await.unwrap();
            eventually("the PushSecret is gone once its remote copy is deleted", WAIT, || async {
                pss.get_opt("by-label").await.ok()?.is_none().then_some(())
            })
            .await;
            let remote = remote_secrets.get_opt("pushed").await.unwrap();
            assert!(
                remote.as_ref().is_none_or(|s| value(s, "token").is_none()),
                "the pushed property is deleted in the remote namespace: {remote:?}"
            );

            // A store changed to a provider Keyward serves is checked again at once (its watch
            // triggers the check) and turns Ready.
            apply(
                &stores,
                json!({"apiVersion": "external-secrets.io/v1", "kind": "SecretStore",
                       "metadata": {"name": "vault-backend", "labels": {CLASS_LABEL: ns}},
                       "spec": {"provider": {"fake": {"data": [{"key": "x", "value": "y"}]}}}}),
            )
            .await;
            let (reason, message, caps) = wait_store_status(&stores, "vault-backend", "True").await;
            assert_eq!((reason.as_str(), caps), ("Valid", Some(Capabilities::ReadWrite)), "{message}");

            for name in [&fake_store, &closed_store] {
                cluster_stores.delete(name, &DeleteParams::default()).await.unwrap();
            }
        })
        .await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_omitted_kind_means_the_secret_store_and_a_store_is_checked_at_its_refresh_interval() {
    let _turn = shared().await;
    with_temp_namespace(&[], |client, ns| async move {
        let pki = Pki::new();
        pki.install(&client, &ns).await;
        let mut fake = ProviderProcess::start("keyward-provider-fake", pki.provider_dir(), None).await;
        // A Provider and a SecretStore of one name, serving different values.
        apply(&Api::<Fake>::namespaced(client.clone(), &ns), fake_config("cfg", &[("greeting", "from-provider")])).await;
        apply(&Api::<Provider>::namespaced(client.clone(), &ns), provider("twin", &ns, &fake.address(), "cfg")).await;
        let stores: Api<SecretStore> = Api::namespaced(client.clone(), &ns);
        let store = |name: &str, extra: serde_json::Value| {
            let mut s = json!({"apiVersion": "external-secrets.io/v1", "kind": "SecretStore",
                               "metadata": {"name": name, "labels": {CLASS_LABEL: ns}},
                               "spec": {"provider": {"fake": {"data": [{"key": "greeting", "value": "from-secretstore"}]}}}});
            s["spec"].as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            s
        };
        // Upstream's int-or-string: a Go duration, kept as written.
        apply(&stores, store("twin", json!({"refreshInterval": "1h"}))).await;
        apply(&stores, store("every-check", json!({}))).await;
        // A store for another controller instance: neither it nor what uses it is touched here.
        apply(&stores, store("elsewhere", json!({"controller": "another-instance"}))).await;
        let raw: kube::api::DynamicObject = Api::namespaced_with(
            client.clone(),
            &ns,
            &kube::api::ApiResource::erase::<SecretStore>(&()),
        )
        .get("twin")
        .await
        .unwrap();
        assert_eq!(raw.data["spec"]["refreshInterval"], "1h", "stored as written");

        // The reconciler's own check interval is 3s (the test default).
        let _reconciler = Reconciler::start_with_stores(&ns, &[("fake", &fake)], &[]).await;

        let ess: Api<ExternalSecret> = Api::namespaced(client.clone(), &ns);
        let data = json!([{"secretKey": "greeting", "remoteRef": {"key": "greeting"}}]);
        let mut omitted = external_secret("omitted", &ns, "SecretStore", "twin", data.clone());
        omitted["spec"]["secretStoreRef"].as_object_mut().unwrap().remove("kind");
        apply(&ess, omitted).await;
        apply(&ess, external_secret("explicit-provider", &ns, "Provider", "twin", data.clone())).await;
        let per_entry = external_secret("per-entry", &ns, "Provider", "twin", json!([
            {"secretKey": "greeting", "remoteRef": {"key": "greeting"}, "sourceRef": {"storeRef": {"name": "twin"}}}]));
        apply(&ess, per_entry).await;
        apply(&ess, external_secret("unserved", &ns, "SecretStore", "elsewhere", data)).await;
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
        wait_for_value(&secrets, "omitted", "greeting", "from-secretstore", WAIT).await;
        wait_for_value(&secrets, "per-entry", "greeting", "from-secretstore", WAIT).await;
        wait_for_value(&secrets, "explicit-provider", "greeting", "from-provider", WAIT).await;

        // A PushSecret reference without a kind reaches the SecretStore too.
        apply(
            &secrets,
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "to-push"}, "stringData": {"token": "t"}}),
        )
        .await;
        let pss: Api<PushSecret> = Api::namespaced(client.clone(), &ns);
        apply(
            &pss,
            json!({"apiVersion": "external-secrets.io/v1alpha1", "kind": "PushSecret",
                   "metadata": {"name": "no-kind", "labels": {CLASS_LABEL: ns}},
                   "spec": {"refreshInterval": "1h", "secretStoreRefs": [{"name": "twin"}],
                            "selector": {"secret": {"name": "to-push"}},
                            "data": [{"match": {"secretKey": "token", "remoteRef": {"remoteKey": "pushed"}}}]}}),
        )
        .await;
        let pushed = eventually("the PushSecret without kind pushed", WAIT, || async {
            let st = pss.get("no-kind").await.ok()?.status?;
            (ready_of(&st.conditions)?.0 == "True").then_some(st.synced_push_secrets)
        })
        .await;
        assert_eq!(pushed.keys().collect::<Vec<_>>(), ["SecretStore/twin"]);
        let stored = pss.get("no-kind").await.unwrap();
        assert_eq!(stored.spec.secret_store_refs[0].kind, None, "the kind stays omitted");

        // Both stores are Ready; once the provider is gone, the store checked at the
        // reconciler's interval notices, the one with refreshInterval 1h is not checked again.
        wait_store_status(&stores, "twin", "True").await;
        wait_store_status(&stores, "every-check", "True").await;
        fake.stop();
        let (reason, message, _) = wait_store_status(&stores, "every-check", "False").await;
        assert!(!reason.is_empty(), "{message}");
        tokio::time::sleep(Duration::from_secs(8)).await;
        let twin = stores.get("twin").await.unwrap();
        let (status, _, _) = ready_of(&twin.status.unwrap().conditions).unwrap();
        assert_eq!(status, "True", "a store with refreshInterval 1h is not checked at the 3s default");

        // The store of another controller, and the ExternalSecret using it, were left alone.
        assert!(stores.get("elsewhere").await.unwrap().status.is_none(), "no status on another controller's store");
        assert!(ess.get("unserved").await.unwrap().status.is_none(), "no status on an ExternalSecret using it");
        assert!(secrets.get_opt("unserved").await.unwrap().is_none());
    })
    .await;
}
