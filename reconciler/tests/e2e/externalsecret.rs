//! End to end: the reconciler and the Fake provider as real processes over mTLS, against the
//! local control plane.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::api::events::v1::Event;
use keyward_crds::{ClusterProvider, ExternalSecret, Provider};
use keyward_e2e::with_temp_namespace;
use keyward_provider_fake::api::Fake;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::support::*;

const WAIT: Duration = Duration::from_secs(60);

fn external_secret(name: &str, ns: &str, store: serde_json::Value, spec: serde_json::Value) -> serde_json::Value {
    let mut body = json!({
        "apiVersion": "external-secrets.io/v1",
        "kind": "ExternalSecret",
        "metadata": {"name": name, "labels": {CLASS_LABEL: ns}},
        "spec": spec,
    });
    body["spec"]["secretStoreRef"] = store;
    body
}

async fn wait_ready(api: &Api<ExternalSecret>, name: &str, want: &str) -> ExternalSecret {
    eventually(&format!("ExternalSecret {name} Ready={want}"), WAIT, || async {
        let es = api.get(name).await.ok()?;
        let (status, _, _) = ready_of(&es.status.as_ref()?.conditions)?;
        (status == want).then_some(es)
    })
    .await
}

async fn wait_secret<F: Fn(&Secret) -> bool>(api: &Api<Secret>, name: &str, what: &str, f: F) -> Secret {
    eventually(what, WAIT, || async {
        let s = api.get_opt(name).await.ok()??;
        f(&s).then_some(s)
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn namespaced_provider_syncs_follows_changes_and_reports_status_and_metrics() {
    let _turn = shared().await;
    with_temp_namespace(&[], |client, ns| async move {
        let pki = Pki::new();
        pki.install(&client, &ns).await;
        let fake = ProviderProcess::start("keyward-provider-fake", pki.provider_dir(), None).await;
        let fakes: Api<Fake> = Api::namespaced(client.clone(), &ns);
        apply(
            &fakes,
            fake_config(
                "fake-config",
                &[
                    ("db", r#"{"user":"admin","password":"s3cret"}"#),
                    ("api-token", "dG9rZW4="),
                    ("app-one", "1"),
                    ("app-two", "2"),
                    ("other", "x"),
                ],
            ),
        )
        .await;
        let providers: Api<Provider> = Api::namespaced(client.clone(), &ns);
        apply(&providers, provider("fake", &ns, &fake.address(), "fake-config")).await;
        let reconciler = Reconciler::start(&ns, &[]).await;

        let ess: Api<ExternalSecret> = Api::namespaced(client.clone(), &ns);
        apply(
            &ess,
            external_secret(
                "app",
                &ns,
                json!({"name": "fake", "kind": "Provider"}),
                json!({
                    "refreshInterval": "1s",
                    "target": {"name": "app-secret"},
                    "data": [
                        {"secretKey": "password", "remoteRef": {"key": "db", "property": "password"}},
                        {"secretKey": "token", "remoteRef": {"key": "api-token", "decodingStrategy": "Base64"}},
                    ],
                    "dataFrom": [
                        {"find": {"name": {"regexp": "^app-"}}, "rewrite": [{"regexp": {"source": "^app-", "target": "APP_"}}]},
                    ],
                }),
            ),
        )
        .await;

        let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
        let secret = wait_secret(&secrets, "app-secret", "target Secret", |_| true).await;
        assert_eq!(value(&secret, "password").as_deref(), Some("s3cret"));
        assert_eq!(value(&secret, "token").as_deref(), Some("token"), "Base64 decoded");
        assert_eq!(value(&secret, "APP_one").as_deref(), Some("1"));
        assert_eq!(value(&secret, "APP_two").as_deref(), Some("2"));
        assert!(value(&secret, "other").is_none(), "find picks only matching keys");
        assert_eq!(secret.labels().get("reconcile.external-secrets.io/managed").map(String::as_str), Some("true"));
        let owner = &secret.owner_references()[0];
        assert_eq!((owner.kind.as_str(), owner.name.as_str()), ("ExternalSecret", "app"));
        assert!(
            secret.metadata.managed_fields.iter().flatten().any(|m| m.manager.as_deref() == Some("keyward-reconciler")
                && m.operation.as_deref() == Some("Apply")),
            "written with server-side apply by keyward-reconciler"
        );

        let es = wait_ready(&ess, "app", "True").await;
        let status = es.status.unwrap();
        let (_, reason, _) = ready_of(&status.conditions).unwrap();
        assert_eq!(reason, "SecretSynced");
        assert_eq!(status.binding.unwrap().name, "app-secret");
        assert!(status.refresh_time.is_some() && status.synced_resource_version.is_some());

        // Capabilities and Ready come from the provider's answer.
        let p = eventually("Provider Ready", WAIT, || async {
            let p = providers.get("fake").await.ok()?;
            let s = p.status.clone()?;
            (ready_of(&s.conditions)?.0 == "True").then_some(p)
        })
        .await;
        assert_eq!(p.status.unwrap().capabilities, Some(keyward_crds::Capabilities::ReadWrite));

        // CreatedOnce: synced once, before the remote value changes below.
        apply(
            &ess,
            external_secret(
                "once",
                &ns,
                json!({"name": "fake", "kind": "Provider"}),
                json!({
                    "refreshInterval": "1s",
                    "refreshPolicy": "CreatedOnce",
                    "target": {"name": "once-secret"},
                    "data": [{"secretKey": "password", "remoteRef": {"key": "db", "property": "password"}}],
                }),
            ),
        )
        .await;
        wait_ready(&ess, "once", "True").await;
        let once = wait_secret(&secrets, "once-secret", "CreatedOnce target", |_| true).await;
        assert_eq!(value(&once, "password").as_deref(), Some("s3cret"));

        // The remote value changes: the target follows within its refresh interval.
        apply(
            &fakes,
            fake_config(
                "fake-config",
                &[
                    ("db", r#"{"user":"admin","password":"rotated"}"#),
                    ("api-token", "dG9rZW4="),
                    ("app-one", "1"),
                    ("app-two", "2"),
                ],
            ),
        )
        .await;
        wait_secret(&secrets, "app-secret", "rotated password", |s| {
            value(s, "password").as_deref() == Some("rotated")
        })
        .await;

        // CreatedOnce does not follow the remote change (the Periodic one above already did, at
        // a 1s interval) nor a spec change; a deleted target is written again, with today's value.
        tokio::time::sleep(Duration::from_secs(3)).await;
        ess.patch("once", &PatchParams::default(), &Patch::Merge(json!({"spec": {"refreshInterval": "2s"}})))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_secs(3)).await;
        let once = secrets.get("once-secret").await.unwrap();
        assert_eq!(value(&once, "password").as_deref(), Some("s3cret"), "CreatedOnce never refreshes");
        secrets.delete("once-secret", &DeleteParams::default()).await.unwrap();
        wait_secret(&secrets, "once-secret", "CreatedOnce target written again", |s| {
            value(s, "password").as_deref() == Some("rotated")
        })
        .await;

        // Metrics after a sync.
        let text = reconciler.metrics().await;
        let needles: [String; 6] = [
            format!("externalsecret_sync_calls_total{{name=\"app\",namespace=\"{ns}\"}}"),
            format!(
                "externalsecret_status_condition{{name=\"app\",namespace=\"{ns}\",condition=\"Ready\",status=\"True\"}} 1"
            ),
            "grpc_client_requests_total{method=\"GetSecret\",code=\"OK\"}".into(),
            "clientmanager_cache_hits_total{kind=\"Provider\",name=\"fake\"}".into(),
            "provider_status_condition{kind=\"Provider\",name=\"fake\"".into(),
            "grpc_client_pool_connections 1".into(),
        ];
        for needle in &needles {
            assert!(text.contains(needle), "metrics miss {needle}:\n{text}");
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn provider_outage_keeps_the_secret_and_recovery_needs_no_restart() {
    let _turn = shared().await;
    with_temp_namespace(&[], |client, ns| async move {
        let pki = Pki::new();
        pki.install(&client, &ns).await;
        let mut fake = ProviderProcess::start("keyward-provider-fake", pki.provider_dir(), None).await;
        let fakes: Api<Fake> = Api::namespaced(client.clone(), &ns);
        apply(&fakes, fake_config("cfg", &[("db", "v1")])).await;
        let providers: Api<Provider> = Api::namespaced(client.clone(), &ns);
        apply(&providers, provider("fake", &ns, &fake.address(), "cfg")).await;
        let _reconciler = Reconciler::start(&ns, &[]).await;
        let ess: Api<ExternalSecret> = Api::namespaced(client.clone(), &ns);
        apply(
            &ess,
            external_secret(
                "db",
                &ns,
                json!({"name": "fake", "kind": "Provider"}),
                json!({"refreshInterval": "1s", "data": [{"secretKey": "value", "remoteRef": {"key": "db"}}]}),
            ),
        )
        .await;
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
        wait_secret(&secrets, "db", "synced", |s| value(s, "value").as_deref() == Some("v1")).await;
        wait_ready(&ess, "db", "True").await;

        fake.stop();
        let es = wait_ready(&ess, "db", "False").await;
        let (_, reason, message) = ready_of(&es.status.unwrap().conditions).unwrap();
        assert_eq!(reason, "SecretSyncedError");
        assert!(message.contains("keeps its last data"), "{message}");
        // Several refresh intervals later the Secret still holds its data.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let s = secrets.get("db").await.unwrap();
        assert_eq!(value(&s, "value").as_deref(), Some("v1"), "an outage never empties the Secret");

        apply(&fakes, fake_config("cfg", &[("db", "v2")])).await;
        fake.restart().await;
        wait_secret(&secrets, "db", "recovered", |s| value(s, "value").as_deref() == Some("v2")).await;
        wait_ready(&ess, "db", "True").await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn six_external_secrets_share_one_connection() {
    let _turn = shared().await;
    with_temp_namespace(&[], |client, ns| async move {
        let pki = Pki::new();
        pki.install(&client, &ns).await;
        let fake = ProviderProcess::start("keyward-provider-fake", pki.provider_dir(), None).await;
        let fakes: Api<Fake> = Api::namespaced(client.clone(), &ns);
        apply(&fakes, fake_config("cfg", &[("k", "v")])).await;
        let providers: Api<Provider> = Api::namespaced(client.clone(), &ns);
        apply(&providers, provider("fake", &ns, &fake.address(), "cfg")).await;
        let _reconciler = Reconciler::start(&ns, &[]).await;
        let ess: Api<ExternalSecret> = Api::namespaced(client.clone(), &ns);
        for i in 0..6 {
            apply(
                &ess,
                external_secret(
                    &format!("es-{i}"),
                    &ns,
                    json!({"name": "fake", "kind": "Provider"}),
                    json!({"refreshInterval": "1s", "data": [{"secretKey": "k", "remoteRef": {"key": "k"}}]}),
                ),
            )
            .await;
        }
        for i in 0..6 {
            wait_ready(&ess, &format!("es-{i}"), "True").await;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        let n = fake.established_connections();
        assert!((1..=2).contains(&n), "six ExternalSecrets use {n} connections");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn entries_whose_answers_pass_the_fetch_budget_fail_the_sync_and_the_secret_stays() {
    let _turn = shared().await;
    with_temp_namespace(&[], |client, ns| async move {
        let pki = Pki::new();
        pki.install(&client, &ns).await;
        let fake = ProviderProcess::start("keyward-provider-fake", pki.provider_dir(), None).await;
        let fakes: Api<Fake> = Api::namespaced(client.clone(), &ns);
        // 800 KB, read by 12 entries of a manifest of a few hundred bytes: 9.6 MB of answers.
        let big = "b".repeat(800 * 1000);
        apply(&fakes, fake_config("cfg", &[("big", big.as_str()), ("small", "s")])).await;
        let providers: Api<Provider> = Api::namespaced(client.clone(), &ns);
        apply(&providers, provider("fake", &ns, &fake.address(), "cfg")).await;
        let _reconciler = Reconciler::start(&ns, &[]).await;
        let ess: Api<ExternalSecret> = Api::namespaced(client.clone(), &ns);
        let store = json!({"name": "fake", "kind": "Provider"});
        let one = json!({"refreshInterval": "1s", "data": [{"secretKey": "big", "remoteRef": {"key": "big"}}]});
        apply(&ess, external_secret("one", &ns, store.clone(), one)).await;
        wait_ready(&ess, "one", "True").await;

        let many: Vec<serde_json::Value> =
            (0..12).map(|i| json!({"secretKey": format!("k{i}"), "remoteRef": {"key": "big"}})).collect();
        let mut spec = json!({"refreshInterval": "1s", "data": many});
        spec["data"].as_array_mut().unwrap().insert(0, json!({"secretKey": "small", "remoteRef": {"key": "small"}}));
        apply(
            &ess,
            external_secret(
                "many",
                &ns,
                store.clone(),
                json!({"refreshInterval": "1s", "data": [
            {"secretKey": "small", "remoteRef": {"key": "small"}}]}),
            ),
        )
        .await;
        wait_ready(&ess, "many", "True").await;
        apply(&ess, external_secret("many", &ns, store, spec)).await;
        let es = eventually("ExternalSecret many refused for its answers' size", WAIT, || async {
            let es = ess.get("many").await.ok()?;
            let (status, _, message) = ready_of(&es.status.as_ref()?.conditions)?;
            (status == "False" && message.contains("passed 8 MiB together")).then_some(es)
        })
        .await;
        let (_, _, message) = ready_of(&es.status.unwrap().conditions).unwrap();
        assert!(message.contains("data["), "the message names the entry: {message}");
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
        let kept = secrets.get("many").await.unwrap();
        assert_eq!(kept.data.unwrap().keys().cloned().collect::<Vec<_>>(), vec!["small"], "the Secret keeps its data");
        assert_eq!(ready_of(&ess.get("one").await.unwrap().status.unwrap().conditions).unwrap().0, "True");
    })
    .await;
}

fn cluster_provider(name: &str, class: &str, address: &str, spec_extra: serde_json::Value) -> serde_json::Value {
    let mut body = json!({
        "apiVersion": "external-secrets.io/v1",
        "kind": "ClusterProvider",
        "metadata": {"name": name, "labels": {CLASS_LABEL: class}},
        "spec": {"config": {"address": address, "providerRef": {
            "apiVersion": "provider.external-secrets.io/v2alpha1", "kind": "Fake", "name": "cfg"}}},
    });
    if let (Some(spec), Some(extra)) = (body["spec"].as_object_mut(), spec_extra.as_object()) {
        for (k, v) in extra {
            if k == "providerNamespace" {
                spec["config"]["providerRef"]["namespace"] = v.clone();
            } else {
                spec.insert(k.clone(), v.clone());
            }
        }
    }
    body
}

#[tokio::test(flavor = "multi_thread")]
async fn cluster_providers_scopes_conditions_and_label_changes() {
    // Alone: ClusterProviders, which every reconciler watches.
    let _turn = exclusive().await;
    with_temp_namespace(&[], |_client, creds| async move {
        with_temp_namespace(&[("team", "a")], |client, ns| async move {
            let pki = Pki::new();
            pki.install(&client, &ns).await;
            pki.install(&client, &creds).await;
            let fake = ProviderProcess::start("keyward-provider-fake", pki.provider_dir(), None).await;
            // The manifest namespace and the provider namespace hold different values, so the
            // Secret shows where the provider authenticated.
            apply(&Api::<Fake>::namespaced(client.clone(), &ns), fake_config("cfg", &[("k", "from-manifest-ns")]))
                .await;
            apply(&Api::<Fake>::namespaced(client.clone(), &creds), fake_config("cfg", &[("k", "from-provider-ns")]))
                .await;
            let cps: Api<ClusterProvider> = Api::all(client.clone());
            let names = [format!("{ns}-manifest"), format!("{ns}-provider"), format!("{ns}-deny")];
            apply(
                &cps,
                cluster_provider(&names[0], &ns, &fake.address(), json!({"authenticationScope": "ManifestNamespace"})),
            )
            .await;
            apply(
                &cps,
                cluster_provider(
                    &names[1],
                    &ns,
                    &fake.address(),
                    json!({"authenticationScope": "ProviderNamespace", "providerNamespace": creds}),
                ),
            )
            .await;
            apply(
                &cps,
                cluster_provider(
                    &names[2],
                    &ns,
                    &fake.address(),
                    json!({"authenticationScope": "ManifestNamespace",
                           "conditions": [{"namespaceSelector": {"matchLabels": {"team": "b"}}}]}),
                ),
            )
            .await;
            let _reconciler = Reconciler::start(&ns, &[]).await;
            let ess: Api<ExternalSecret> = Api::namespaced(client.clone(), &ns);
            let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
            for (es, cp) in [("by-manifest", &names[0]), ("by-provider", &names[1]), ("denied", &names[2])] {
                apply(
                    &ess,
                    external_secret(
                        es,
                        &ns,
                        json!({"name": cp, "kind": "ClusterProvider"}),
                        json!({"refreshInterval": "1s", "data": [{"secretKey": "k", "remoteRef": {"key": "k"}}]}),
                    ),
                )
                .await;
            }
            wait_secret(&secrets, "by-manifest", "ManifestNamespace sync", |s| {
                value(s, "k").as_deref() == Some("from-manifest-ns")
            })
            .await;
            wait_secret(&secrets, "by-provider", "ProviderNamespace sync", |s| {
                value(s, "k").as_deref() == Some("from-provider-ns")
            })
            .await;

            let es = wait_ready(&ess, "denied", "False").await;
            let (_, _, message) = ready_of(&es.status.unwrap().conditions).unwrap();
            assert!(
                message.contains(&format!("ClusterProvider \"{}\"", names[2]))
                    && message.contains(&format!("namespace \"{ns}\"")),
                "{message}"
            );
            assert!(secrets.get_opt("denied").await.unwrap().is_none(), "no Secret for a refused namespace");
            let events: Api<Event> = Api::namespaced(client.clone(), &ns);
            eventually("denial event", WAIT, || async {
                let list = events.list(&ListParams::default()).await.ok()?;
                list.items
                    .iter()
                    .any(|e| {
                        e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("denied")
                            && e.note.as_deref().is_some_and(|n| n.contains(&names[2]) && n.contains(&ns))
                    })
                    .then_some(())
            })
            .await;

            // Labels change after admission: the namespace now matches, then stops matching.
            let namespaces: Api<Namespace> = Api::all(client.clone());
            let relabel = |team: &'static str| {
                let namespaces = namespaces.clone();
                let ns = ns.clone();
                async move {
                    namespaces
                        .patch(
                            &ns,
                            &PatchParams::default(),
                            &Patch::Merge(json!({"metadata": {"labels": {"team": team}}})),
                        )
                        .await
                        .unwrap();
                }
            };
            let force = |n: u32| {
                let ess = ess.clone();
                async move {
                    ess.patch(
                        "denied",
                        &PatchParams::default(),
                        &Patch::Merge(json!({"metadata": {"annotations": {"force-sync": n.to_string()}}})),
                    )
                    .await
                    .unwrap();
                }
            };
            relabel("b").await;
            force(1).await;
            wait_secret(&secrets, "denied", "admitted after relabel", |s| value(s, "k").is_some()).await;
            relabel("c").await;
            force(2).await;
            let es = wait_ready(&ess, "denied", "False").await;
            let (_, _, message) = ready_of(&es.status.unwrap().conditions).unwrap();
            assert!(message.contains("does not allow namespace"), "{message}");
            assert!(value(&secrets.get("denied").await.unwrap(), "k").is_some(), "refusal keeps the last data");

            for n in &names {
                let _ = cps.delete(n, &DeleteParams::default()).await;
            }
        })
        .await
    })
    .await;
}
