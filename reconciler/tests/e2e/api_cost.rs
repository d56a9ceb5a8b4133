//! What the reconciler costs the API server, read from the API server's own metrics: one watch
//! per kind it caches, and refreshes that find nothing new write nothing and read nothing.
//! It runs alone (`exclusive`): the API server's counters are global to the control plane.

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use keyward_crds::{ExternalSecret, Provider};
use keyward_e2e::with_temp_namespace;
use keyward_provider_fake::api::Fake;
use kube::Api;
use kube::api::ListParams;
use kube::core::PartialObjectMeta;
use serde_json::json;

use crate::support::*;

const N: usize = 10;

#[tokio::test(flavor = "multi_thread")]
async fn one_watch_per_kind_and_no_change_refreshes_neither_write_nor_read() {
    // Alone: the API server's request and watch counters count every test's traffic.
    let _turn = exclusive().await;
    with_temp_namespace(&[], |client, ns| async move {
        let pki = Pki::new();
        pki.install(&client, &ns).await;
        let fake = ProviderProcess::start("keyward-provider-fake", pki.provider_dir(), None).await;
        apply(&Api::<Fake>::namespaced(client.clone(), &ns), fake_config("cfg", &[("k", "v")])).await;
        apply(&Api::<Provider>::namespaced(client.clone(), &ns), provider("fake", &ns, &fake.address(), "cfg")).await;
        let ess: Api<ExternalSecret> = Api::namespaced(client.clone(), &ns);
        for i in 0..N {
            apply(
                &ess,
                json!({"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
                       "metadata": {"name": format!("es-{i}"), "labels": {CLASS_LABEL: ns}},
                       "spec": {"refreshInterval": "2s", "secretStoreRef": {"name": "fake", "kind": "Provider"},
                                "data": [{"secretKey": "k", "remoteRef": {"key": "k"}}]}}),
            )
            .await;
        }

        // kube-controller-manager's garbage collector learns a custom kind at its next discovery
        // (every 30 s) and, until it watches the kind, GETs the owners of new dependents (the
        // managed Secrets' ExternalSecrets) itself, with backoff: such GETs would fall into the
        // window below and look like the reconciler's. No reconciler runs yet (`exclusive`), so
        // a watch of ExternalSecrets now is the collector's; wait (a minute at most) for it.
        let gc_watch = std::time::Instant::now();
        while api_watches(&client).await.get("externalsecrets").copied().unwrap_or(0.0) < 1.0
            && gc_watch.elapsed() < Duration::from_secs(60)
        {
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        // kube-controller-manager opens its own watches (of Deployments, DaemonSets, …) while a
        // control plane started moments ago settles; count from a moment when they stand still.
        let mut watches_before = api_watches(&client).await;
        for _ in 0..15 {
            tokio::time::sleep(Duration::from_secs(2)).await;
            let now = api_watches(&client).await;
            if now == watches_before {
                break;
            }
            watches_before = now;
        }
        let reconciler = Reconciler::start(&ns, &[]).await;
        let managed: Api<PartialObjectMeta<Secret>> = Api::namespaced(client.clone(), &ns);
        let synced = ListParams::default().labels("reconcile.external-secrets.io/managed=true");
        eventually("every target Secret", Duration::from_secs(120), || {
            let managed = managed.clone();
            let synced = synced.clone();
            async move { (managed.list_metadata(&synced).await.ok()?.items.len() == N).then_some(()) }
        })
        .await;

        // One watch per kind; Secrets twice: managed Secrets (metadata) and provider TLS Secrets.
        // (Watches of the Fake provider process are counted here too: one control plane.)
        let opened = delta(&watches_before, &api_watches(&client).await);
        let mut want: Vec<(&str, f64)> = vec![
            ("externalsecrets", 1.0),
            ("pushsecrets", 1.0),
            ("providers", 1.0),
            ("clusterproviders", 1.0),
            ("secretstores", 1.0),
            ("clustersecretstores", 1.0),
            ("secrets", 2.0),
            ("namespaces", 1.0),
            ("deployments", 1.0),
            ("statefulsets", 1.0),
            ("daemonsets", 1.0),
            // GeneratorStates, collected past their deadline.
            ("generatorstates", 1.0),
        ];
        // One metadata watch per provider configuration kind of the registry; the Fake provider
        // process watches its own kind too (its configuration, read by refreshes from the watch).
        want.extend(
            keyward_provider_registry::PROVIDER_KINDS
                .iter()
                .map(|k| (k.plural, if k.plural == "fakes" { 2.0 } else { 1.0 })),
        );
        for &(resource, n) in &want {
            assert_eq!(opened.get(resource).copied().unwrap_or(0.0), n, "watches of {resource}: {opened:?}");
        }
        assert_eq!(opened.len(), want.len(), "no other watch: {opened:?}");

        // Let the first sync's writes land, then watch several refresh intervals go by.
        let ready = ListParams::default();
        eventually("every ExternalSecret Ready", Duration::from_secs(60), || {
            let ess = ess.clone();
            let ready = ready.clone();
            async move {
                let list = ess.list(&ready).await.ok()?;
                list.items
                    .iter()
                    .all(|es| {
                        es.status
                            .as_ref()
                            .and_then(|s| ready_of(&s.conditions))
                            .is_some_and(|(status, _, _)| status == "True")
                    })
                    .then_some(())
            }
        })
        .await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        // A second guard against the garbage collector's owner GETs (above): the reconciler never
        // GETs an ExternalSecret, so wait (a minute at most) for a quiet 3 s first: a reconciler
        // that read on each 2 s refresh would never give one, and fails below.
        let es_gets = |m: &std::collections::BTreeMap<Vec<String>, f64>| {
            m.get(&vec!["GET".to_string(), "externalsecrets".to_string()]).copied().unwrap_or(0.0)
        };
        let settling = std::time::Instant::now();
        loop {
            let before = es_gets(&api_requests(&client).await);
            tokio::time::sleep(Duration::from_secs(3)).await;
            if es_gets(&api_requests(&client).await) == before || settling.elapsed() > Duration::from_secs(60) {
                break;
            }
        }
        let calls_before = metric_value(&reconciler.metrics().await, GET_SECRET_OK);
        let before = api_requests(&client).await;
        tokio::time::sleep(Duration::from_secs(7)).await;
        let after = api_requests(&client).await;
        let calls = metric_value(&reconciler.metrics().await, GET_SECRET_OK) - calls_before;
        assert!(calls >= (2 * N) as f64, "every ExternalSecret refreshed at least twice, {calls} provider calls");

        let served = delta(&before, &after);
        let cost: Vec<_> =
            served.iter().filter(|(k, _)| RECONCILER_RESOURCES.contains(&k[1].as_str()) && k[0] != "WATCH").collect();
        assert!(cost.is_empty(), "no-change refreshes cost API requests: {cost:?}");
    })
    .await;
}
