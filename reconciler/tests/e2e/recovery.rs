//! Recovery after a provider outage follows the provider, not the clock: a few hundred
//! ExternalSecrets fail while the Fake provider process is down and wait out a long error
//! backoff (minutes); when the provider is back, every one of them is requeued because it
//! answered again (the reconciler's recovery metrics say so) and converges long before any
//! backoff would have run out. No Secret is emptied, no process exits. PushSecrets that fail
//! during the outage are requeued the same way. A Provider deleted while its check waits on a
//! provider that never answers leaves no metric series behind.

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use keyward_crds::{Provider, PushSecret};
use keyward_e2e::with_temp_namespace;
use keyward_provider_fake::api::Fake;
use kube::Api;
use serde_json::json;

use crate::support::*;

const N: usize = 300;

#[tokio::test(flavor = "multi_thread")]
async fn external_secrets_waiting_on_a_provider_are_requeued_when_it_answers_again() {
    // Alone: a provider outage under 300 ExternalSecrets, converging within set times.
    let _turn = exclusive().await;
    with_temp_namespace(&[], |client, ns| async move {
        let pki = Pki::new();
        pki.install(&client, &ns).await;
        let mut fake = ProviderProcess::start("keyward-provider-fake", pki.provider_dir(), None).await;
        let fakes: Api<Fake> = Api::namespaced(client.clone(), &ns);
        apply(&fakes, fake_config("cfg", &[("db", "v1")])).await;
        apply(&Api::<Provider>::namespaced(client.clone(), &ns), provider("fake", &ns, &fake.address(), "cfg")).await;
        // A failed sync waits 2.5 to 5 minutes before its own retry: only the provider's return
        // can bring these ExternalSecrets back within the waits below.
        let mut reconciler = Reconciler::start(&ns, &["--error-backoff", "5m", "--breaker-cooldown", "1s"]).await;
        create_external_secrets(&client, &ns, N, "fake", "db").await;
        eventually("every Secret holds v1", Duration::from_secs(120), || async {
            (managed_values(&client, &ns, "v1").await.0 == N).then_some(())
        })
        .await;

        // Outage: the provider process is gone while every ExternalSecret must sync again.
        fake.stop();
        apply(&fakes, fake_config("cfg", &[("db", "v2")])).await;
        force_sync(&client, &ns, N, "outage").await;
        eventually("every ExternalSecret Ready=False", Duration::from_secs(120), || async {
            (count_ready(&client, &ns, "False").await == N).then_some(())
        })
        .await;
        let metrics = reconciler.metrics().await;
        assert_eq!(metric_value(&metrics, "clientmanager_recovery_waiting"), N as f64, "{metrics}");
        assert_eq!(metric_value(&metrics, "clientmanager_recovery_requeues_total"), 0.0);
        assert_eq!(managed_values(&client, &ns, "v1").await, (N, 0), "an outage keeps every Secret's last data");

        // The provider is back: everything converges, because it answered.
        fake.restart().await;
        eventually("every Secret holds v2", Duration::from_secs(100), || async {
            let (v2, empty) = managed_values(&client, &ns, "v2").await;
            assert_eq!(empty, 0, "no Secret is ever emptied");
            (v2 == N).then_some(())
        })
        .await;
        eventually("every ExternalSecret Ready=True", Duration::from_secs(60), || async {
            (count_ready(&client, &ns, "True").await == N).then_some(())
        })
        .await;
        let metrics = reconciler.metrics().await;
        assert!(metric_value(&metrics, "clientmanager_provider_recoveries_total") >= 1.0, "{metrics}");
        assert!(
            metric_value(&metrics, "clientmanager_recovery_requeues_total") >= N as f64,
            "each waiting ExternalSecret was requeued by the provider's return: {metrics}"
        );
        assert_eq!(metric_value(&metrics, "clientmanager_recovery_waiting"), 0.0, "nothing left waiting");
        assert!(reconciler.process.is_running(), "the reconciler stayed up");
    })
    .await;
}

/// PushSecrets `ps-0` … whose Ready condition is `want`.
async fn push_secrets_ready(pss: &Api<PushSecret>, want: &str) -> usize {
    let Ok(list) = pss.list(&Default::default()).await else { return 0 };
    list.items
        .iter()
        .filter(|ps| ps.metadata.name.as_deref().is_some_and(|n| n.starts_with("ps-")))
        .filter(|ps| ps.status.as_ref().and_then(|s| ready_of(&s.conditions)).is_some_and(|(s, _, _)| s == want))
        .count()
}

/// A PushSecret `name` pushing `password` of the Secret `source` to `remote_key` on the
/// Provider `fake`.
fn push_secret(ns: &str, name: &str, remote_key: &str) -> serde_json::Value {
    json!({
        "apiVersion": "external-secrets.io/v1alpha1", "kind": "PushSecret",
        "metadata": {"name": name, "labels": {CLASS_LABEL: ns}},
        "spec": {
            "refreshInterval": "1h",
            "secretStoreRefs": [{"name": "fake", "kind": "Provider"}],
            "selector": {"secret": {"name": "source"}},
            "data": [{"match": {"secretKey": "password", "remoteRef": {"remoteKey": remote_key}}}],
        },
    })
}

const PUSHES: usize = 5;

#[tokio::test(flavor = "multi_thread")]
async fn push_secrets_waiting_on_a_provider_are_requeued_when_it_answers_again() {
    // Alone: a provider outage, its recovery counted and timed.
    let _turn = exclusive().await;
    with_temp_namespace(&[], |client, ns| async move {
        let pki = Pki::new();
        pki.install(&client, &ns).await;
        let mut fake = ProviderProcess::start("keyward-provider-fake", pki.provider_dir(), None).await;
        apply(&Api::<Fake>::namespaced(client.clone(), &ns), fake_config("cfg", &[("seed", "x")])).await;
        apply(&Api::<Provider>::namespaced(client.clone(), &ns), provider("fake", &ns, &fake.address(), "cfg")).await;
        // A failed push waits 2.5 to 5 minutes before its own retry.
        let reconciler = Reconciler::start(&ns, &["--error-backoff", "5m", "--breaker-cooldown", "1s"]).await;
        apply(
            &Api::<Secret>::namespaced(client.clone(), &ns),
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "source"},
                   "stringData": {"password": "pushed-value"}}),
        )
        .await;
        let pss: Api<PushSecret> = Api::namespaced(client.clone(), &ns);
        apply(&pss, push_secret(&ns, "first", "remote-first")).await;
        eventually("the first PushSecret pushed", Duration::from_secs(60), || async {
            let ps = pss.get("first").await.ok()?;
            (ready_of(&ps.status?.conditions)?.0 == "True").then_some(())
        })
        .await;

        // Outage: PushSecrets created now fail because the provider does not answer. They are
        // created once the reconciler's own check has seen the provider gone, so every push
        // meets the outage rather than the closing of the connection the first push used.
        fake.stop();
        let providers: Api<Provider> = Api::namespaced(client.clone(), &ns);
        eventually("the Provider reported unreachable", Duration::from_secs(60), || async {
            let status = providers.get("fake").await.ok()?.status?;
            (ready_of(&status.conditions)?.0 == "False").then_some(())
        })
        .await;
        for i in 0..PUSHES {
            apply(&pss, push_secret(&ns, &format!("ps-{i}"), &format!("remote-{i}"))).await;
        }
        eventually("every new PushSecret Ready=False", Duration::from_secs(120), || async {
            (push_secrets_ready(&pss, "False").await == PUSHES).then_some(())
        })
        .await;
        let metrics = reconciler.metrics().await;
        let statuses: Vec<_> =
            pss.list(&Default::default()).await.unwrap().items.into_iter().map(|ps| ps.status).collect();
        // Each failed PushSecret waits on the provider (the first one too, should it have
        // been pushed again meanwhile).
        assert!(metric_value(&metrics, "clientmanager_recovery_waiting") >= PUSHES as f64, "{statuses:?}\n{metrics}");
        assert_eq!(metric_value(&metrics, "clientmanager_recovery_requeues_total"), 0.0, "{statuses:?}\n{metrics}");

        // The provider is back: every PushSecret pushes, because it answered.
        fake.restart().await;
        eventually("every PushSecret Ready=True", Duration::from_secs(100), || async {
            (push_secrets_ready(&pss, "True").await == PUSHES).then_some(())
        })
        .await;
        for i in 0..PUSHES {
            let status = pss.get(&format!("ps-{i}")).await.unwrap().status.unwrap();
            assert!(status.synced_push_secrets["Provider/fake"].contains_key(&format!("remote-{i}")), "{status:?}");
        }
        let metrics = reconciler.metrics().await;
        assert!(metric_value(&metrics, "clientmanager_provider_recoveries_total") >= 1.0, "{metrics}");
        assert!(
            metric_value(&metrics, "clientmanager_recovery_requeues_total") >= PUSHES as f64,
            "each waiting PushSecret was requeued by the provider's return: {metrics}"
        );
        assert_eq!(metric_value(&metrics, "clientmanager_recovery_waiting"), 0.0, "nothing left waiting");
    })
    .await;
}

/// A Provider deleted (its namespace going away, say) while its check waits on a provider that
/// accepts connections and never answers: when the check gives up, after the deletion dropped
/// the Provider's series, what it then records is dropped too. Otherwise the series would name
/// the deleted Provider for the life of the process.
#[tokio::test(flavor = "multi_thread")]
async fn a_provider_deleted_during_its_check_leaves_no_series() {
    let _turn = shared().await;
    with_temp_namespace(&[], |client, ns| async move {
        let pki = Pki::new();
        pki.install(&client, &ns).await;
        let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = silent.local_addr().unwrap().to_string();
        let (accepted_tx, mut accepted) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok((conn, _)) = silent.accept().await {
                let _ = accepted_tx.send(conn);
            }
        });
        let mut reconciler = Reconciler::start(&ns, &["--call-timeout", "4s", "--call-attempts", "1"]).await;
        let providers: Api<Provider> = Api::namespaced(client.clone(), &ns);
        apply(&providers, provider("silent", &ns, &address, "cfg")).await;

        // The check is in flight once it connected; the Provider goes while it waits.
        let _conn = tokio::time::timeout(Duration::from_secs(60), accepted.recv())
            .await
            .expect("the check connects to the provider")
            .unwrap();
        providers.delete("silent", &Default::default()).await.unwrap();
        eventually("the Provider gone", Duration::from_secs(30), || async {
            providers.get_opt("silent").await.unwrap().is_none().then_some(())
        })
        .await;
        // The check gives up at its deadline and finds the Provider gone when it writes the status.
        reconciler.process.wait_for_log("provider reconcile failed", Duration::from_secs(60)).await;
        let series = format!("name=\"silent\",namespace=\"{ns}\"");
        let metrics = reconciler.metrics().await;
        let left: Vec<&str> = metrics.lines().filter(|l| l.contains(&series)).collect();
        assert!(left.is_empty(), "series of the deleted Provider: {left:#?}");
        assert!(metrics.contains("# TYPE controller_runtime"), "the scrape answered:\n{metrics}");
    })
    .await;
}
