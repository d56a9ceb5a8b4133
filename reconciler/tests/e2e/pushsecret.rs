//! End to end: PushSecret through a namespaced Provider to the Fake provider, read back through
//! an ExternalSecret, and removed by the Delete policy's finalizer.

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use keyward_crds::{ExternalSecret, Provider, PushSecret};
use keyward_e2e::with_temp_namespace;
use keyward_provider_fake::api::Fake;
use kube::api::DeleteParams;
use kube::{Api, Client};
use serde_json::{Value, json};

use crate::support::*;

const WAIT: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread")]
async fn push_secret_through_a_provider_pushes_and_delete_policy_removes_the_remote_copy() {
    let _turn = shared().await;
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
                    "secretStoreRefs": [{"name": "fake", "kind": "Provider"}],
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
        let synced = status.synced_push_secrets.get("Provider/fake").expect("pushed through the Provider");
        assert!(synced.contains_key("remote-db"));
        assert_eq!(synced["remote-db"].metadata, Some(json!({"labels": {"a": "b"}}).into()));
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
                "spec": {"refreshInterval": "1s", "secretStoreRef": {"name": "fake", "kind": "Provider"},
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

#[tokio::test(flavor = "multi_thread")]
async fn data_to_pushes_bundles_and_per_key_values_read_back_through_an_external_secret() {
    let _turn = shared().await;
    with_temp_namespace(&[], |client, ns| async move {
        let pki = Pki::new();
        pki.install(&client, &ns).await;
        let fake = ProviderProcess::start("keyward-provider-fake", pki.provider_dir(), None).await;
        apply(&Api::<Fake>::namespaced(client.clone(), &ns), fake_config("cfg", &[("seed", "x")])).await;
        apply(
            &Api::<Provider>::namespaced(client.clone(), &ns),
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
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "app-secrets"},
                   "stringData": {"DB_HOST": "db.local", "DB_USER": "admin", "API_TOKEN": "t0k",
                                  "API_URL": "https://api", "OTHER": "not pushed"}}),
        )
        .await;
        // As upstream's guide writes it: a bundle of the DB_ keys (one of them rendered by the
        // template), each API_ key on its own (renamed), and an explicit entry that takes API_URL
        // elsewhere.
        let pss: Api<PushSecret> = Api::namespaced(client.clone(), &ns);
        apply(
            &pss,
            json!({
                "apiVersion": "external-secrets.io/v1alpha1", "kind": "PushSecret",
                "metadata": {"name": "bulk", "labels": {CLASS_LABEL: ns}},
                "spec": {
                    "secretStoreRefs": [{"name": "fake", "kind": "Provider"}],
                    "selector": {"secret": {"name": "app-secrets"}},
                    "dataTo": [
                        {"storeRef": {"name": "fake", "kind": "Provider"}, "remoteKey": "app-config", "match": {"regexp": "^DB_"}},
                        {"storeRef": {"name": "fake", "kind": "Provider"}, "match": {"regexp": "^API_"},
                         "rewrite": [{"regexp": {"source": "^API_", "target": "api-"}},
                                     {"transform": {"template": "{{ .value | lower }}"}}]},
                    ],
                    "data": [{"match": {"secretKey": "API_URL", "remoteRef": {"remoteKey": "endpoints", "property": "api"}}}],
                    "template": {"data": {"DB_URL": "postgres://{{ .DB_USER }}@{{ .DB_HOST }}/app"}},
                },
            }),
        )
        .await;
        let ps = eventually("dataTo PushSecret synced", WAIT, || async {
            let ps = pss.get("bulk").await.ok()?;
            (ready_of(&ps.status.clone()?.conditions)?.0 == "True").then_some(ps)
        })
        .await;
        let synced = ps.status.unwrap().synced_push_secrets.remove("Provider/fake").unwrap();
        assert_eq!(
            synced.keys().map(String::as_str).collect::<Vec<_>>(),
            vec!["api-token", "app-config", "endpoints/api"],
            "one bundle, one per-key push (API_URL went to the explicit entry instead)"
        );

        let ess: Api<ExternalSecret> = Api::namespaced(client.clone(), &ns);
        apply(
            &ess,
            json!({
                "apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
                "metadata": {"name": "readback", "labels": {CLASS_LABEL: ns}},
                "spec": {"refreshInterval": "1s", "secretStoreRef": {"name": "fake", "kind": "Provider"},
                         "data": [{"secretKey": "token", "remoteRef": {"key": "api-token"}},
                                  {"secretKey": "url", "remoteRef": {"key": "endpoints", "property": "api"}}],
                         "dataFrom": [{"extract": {"key": "app-config"}}]},
            }),
        )
        .await;
        let back = eventually("pushed values read back", WAIT, || async { secrets.get_opt("readback").await.ok()? }).await;
        assert_eq!(value(&back, "DB_HOST").as_deref(), Some("db.local"), "the bundle is one JSON map");
        assert_eq!(value(&back, "DB_USER").as_deref(), Some("admin"));
        assert_eq!(value(&back, "DB_URL").as_deref(), Some("postgres://admin@db.local/app"), "rendered by the template");
        assert_eq!(value(&back, "token").as_deref(), Some("t0k"));
        assert_eq!(value(&back, "url").as_deref(), Some("https://api"));
        let keys: Vec<String> = back.data.clone().unwrap_or_default().into_keys().collect();
        assert_eq!(keys, vec!["DB_HOST", "DB_URL", "DB_USER", "token", "url"], "nothing else was bundled");
        assert!(
            !secrets.get("app-secrets").await.unwrap().data.unwrap_or_default().contains_key("DB_URL"),
            "the source Secret is not changed"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_label_selector_pushes_every_matching_secret_and_refuses_two_writing_one_remote_key() {
    let _turn = shared().await;
    with_temp_namespace(&[], |client, ns| async move {
        let pki = Pki::new();
        pki.install(&client, &ns).await;
        let fake = ProviderProcess::start("keyward-provider-fake", pki.provider_dir(), None).await;
        apply(&Api::<Fake>::namespaced(client.clone(), &ns), fake_config("cfg", &[("seed", "x")])).await;
        apply(&Api::<Provider>::namespaced(client.clone(), &ns), provider("fake", &ns, &fake.address(), "cfg")).await;
        let _reconciler = Reconciler::start(&ns, &[]).await;
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
        let labelled = |name: &str, key: &str, value: &str, push: &str| {
            json!({"apiVersion": "v1", "kind": "Secret",
                   "metadata": {"name": name, "labels": {"push": push}}, "stringData": {key: value}})
        };
        apply(&secrets, labelled("first", "alpha", "one", "yes")).await;
        apply(&secrets, labelled("second", "beta", "two", "yes")).await;
        apply(&secrets, labelled("left-out", "gamma", "three", "no")).await;
        // Each key of each selected Secret goes to the remote key of its own name.
        let pss: Api<PushSecret> = Api::namespaced(client.clone(), &ns);
        let push_secret = json!({
            "apiVersion": "external-secrets.io/v1alpha1", "kind": "PushSecret",
            "metadata": {"name": "by-label", "labels": {CLASS_LABEL: ns}},
            "spec": {"refreshInterval": "1s", "secretStoreRefs": [{"name": "fake", "kind": "Provider"}],
                     "selector": {"secret": {"selector": {"matchLabels": {"push": "yes"}}}},
                     "dataTo": [{"storeRef": {"name": "fake", "kind": "Provider"}}]},
        });
        apply(&pss, push_secret).await;
        let synced = eventually("both selected Secrets pushed", WAIT, || async {
            let st = pss.get("by-label").await.ok()?.status?;
            (ready_of(&st.conditions)?.0 == "True").then_some(st.synced_push_secrets)
        })
        .await;
        assert_eq!(synced["Provider/fake"].keys().collect::<Vec<_>>(), ["alpha", "beta"], "not the unlabelled one");
        read_back(&client, &ns, &ns, &[("a", "alpha"), ("b", "beta")]).await;
        wait_for_value(&secrets, "readback", "a", "one", WAIT).await;
        wait_for_value(&secrets, "readback", "b", "two", WAIT).await;

        // A third selected Secret with a key another one pushes: refused before any push.
        apply(&secrets, labelled("clash", "alpha", "other", "yes")).await;
        let message = eventually("the clash is reported", WAIT, || async {
            let st = pss.get("by-label").await.ok()?.status?;
            let (status, _, message) = ready_of(&st.conditions)?;
            (status == "False").then_some(message)
        })
        .await;
        assert!(message.contains("both push remote key \"alpha\"; nothing was pushed"), "{message}");
        assert!(message.contains("\"clash\"") && message.contains("\"first\""), "{message}");
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(value(&secrets.get("readback").await.unwrap(), "a").as_deref(), Some("one"), "not overwritten");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn update_policy_if_not_exists_pushes_only_remote_values_that_do_not_exist() {
    let _turn = shared().await;
    with_temp_namespace(&[], |client, ns| async move {
        let pki = Pki::new();
        pki.install(&client, &ns).await;
        let fake = ProviderProcess::start("keyward-provider-fake", pki.provider_dir(), None).await;
        apply(&Api::<Fake>::namespaced(client.clone(), &ns), fake_config("cfg", &[("existing", "from-store")])).await;
        apply(&Api::<Provider>::namespaced(client.clone(), &ns), provider("fake", &ns, &fake.address(), "cfg")).await;
        let _reconciler = Reconciler::start(&ns, &[]).await;
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
        let source = |fresh: &str| {
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "source"},
                   "stringData": {"a": "pushed-a", "b": fresh}})
        };
        apply(&secrets, source("pushed-b")).await;
        let pss: Api<PushSecret> = Api::namespaced(client.clone(), &ns);
        apply(
            &pss,
            json!({
                "apiVersion": "external-secrets.io/v1alpha1", "kind": "PushSecret",
                "metadata": {"name": "once", "labels": {CLASS_LABEL: ns}},
                "spec": {
                    "refreshInterval": "1s",
                    "updatePolicy": "IfNotExists",
                    "secretStoreRefs": [{"name": "fake", "kind": "Provider"}],
                    "selector": {"secret": {"name": "source"}},
                    "data": [{"match": {"secretKey": "a", "remoteRef": {"remoteKey": "existing"}}},
                             {"match": {"secretKey": "b", "remoteRef": {"remoteKey": "fresh"}}}],
                },
            }),
        )
        .await;
        eventually("PushSecret synced", WAIT, || async {
            let st = pss.get("once").await.ok()?.status?;
            (ready_of(&st.conditions)?.0 == "True").then_some(())
        })
        .await;
        read_back(&client, &ns, &ns, &[("existing", "existing"), ("fresh", "fresh")]).await;
        // The value that was missing is pushed; the one the store had is not overwritten.
        wait_for_value(&secrets, "readback", "fresh", "pushed-b", WAIT).await;
        assert_eq!(value(&secrets.get("readback").await.unwrap(), "existing").as_deref(), Some("from-store"));

        // A new source value is not pushed over the value that exists now, refresh after refresh.
        apply(&secrets, source("changed-b")).await;
        let before = pss.get("once").await.unwrap().status.unwrap().refresh_time;
        eventually("pushed again since the change", WAIT, || async {
            let st = pss.get("once").await.ok()?.status?;
            (st.refresh_time != before && ready_of(&st.conditions)?.0 == "True").then_some(())
        })
        .await;
        tokio::time::sleep(Duration::from_secs(3)).await;
        let back = secrets.get("readback").await.unwrap();
        assert_eq!(value(&back, "fresh").as_deref(), Some("pushed-b"), "not replaced");
        assert_eq!(value(&back, "existing").as_deref(), Some("from-store"), "not replaced");
    })
    .await;
}

/// An ExternalSecret `readback` in `ns` (of controller class `class`) that reads each remote key
/// of `keys` (secret key, remote key) back through the Provider `fake`, every second.
pub(crate) async fn read_back(client: &Client, ns: &str, class: &str, keys: &[(&str, &str)]) -> Api<ExternalSecret> {
    let ess: Api<ExternalSecret> = Api::namespaced(client.clone(), ns);
    let data: Vec<Value> = keys.iter().map(|(k, r)| json!({"secretKey": k, "remoteRef": {"key": r}})).collect();
    apply(
        &ess,
        json!({"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
               "metadata": {"name": "readback", "labels": {CLASS_LABEL: class}},
               "spec": {"refreshInterval": "1s", "secretStoreRef": {"name": "fake", "kind": "Provider"},
                        "data": data}}),
    )
    .await;
    ess
}
