//! Manager tests with an in-memory lookup and a connector that counts connections.

use std::collections::BTreeMap;
use std::sync::Mutex as StdMutex;
use std::sync::atomic::Ordering;

use futures::future::BoxFuture;
use keyward_crds::{AuthenticationScope, Capabilities, ClusterProvider, Provider, ProviderStatus};

use super::pool::tests::CountingConnector;
use super::resolve::tests::{cluster, only_label, provider};
use super::*;

#[derive(Default)]
struct FakeLookup {
    providers: StdMutex<Vec<Arc<Provider>>>,
    cluster_providers: StdMutex<Vec<Arc<ClusterProvider>>>,
    secret_stores: StdMutex<Vec<Arc<keyward_crds::SecretStore>>>,
    labels: StdMutex<BTreeMap<String, BTreeMap<String, String>>>,
    tls: StdMutex<BTreeMap<String, TlsMaterial>>,
}

impl Lookup for FakeLookup {
    fn provider<'a>(&'a self, ns: &'a str, name: &'a str) -> BoxFuture<'a, Result<Option<Arc<Provider>>, String>> {
        let found = self
            .providers
            .lock()
            .unwrap()
            .iter()
            .find(|p| p.metadata.namespace.as_deref() == Some(ns) && p.metadata.name.as_deref() == Some(name))
            .cloned();
        Box::pin(async move { Ok(found) })
    }
    fn cluster_provider<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<Arc<ClusterProvider>>, String>> {
        let found =
            self.cluster_providers.lock().unwrap().iter().find(|p| p.metadata.name.as_deref() == Some(name)).cloned();
        Box::pin(async move { Ok(found) })
    }
    fn secret_store<'a>(
        &'a self,
        ns: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Arc<keyward_crds::SecretStore>>, String>> {
        let found = self
            .secret_stores
            .lock()
            .unwrap()
            .iter()
            .find(|s| s.metadata.namespace.as_deref() == Some(ns) && s.metadata.name.as_deref() == Some(name))
            .cloned();
        Box::pin(async move { Ok(found) })
    }
    fn cluster_secret_store<'a>(
        &'a self,
        _: &'a str,
    ) -> BoxFuture<'a, Result<Option<Arc<keyward_crds::ClusterSecretStore>>, String>> {
        Box::pin(async move { Ok(None) })
    }
    fn namespace_labels<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<BTreeMap<String, String>>, String>> {
        let found = self.labels.lock().unwrap().get(name).cloned();
        Box::pin(async move { Ok(found) })
    }
    fn tls_material<'a>(&'a self, ns: &'a str) -> BoxFuture<'a, Result<Option<TlsMaterial>, String>> {
        let found = self.tls.lock().unwrap().get(ns).cloned();
        Box::pin(async move { Ok(found) })
    }
}

fn tls(tag: &str) -> TlsMaterial {
    TlsMaterial::new(b"ca".to_vec(), tag.as_bytes().to_vec(), b"key".to_vec())
}

fn manager(lookup: Arc<FakeLookup>, count: &CountingConnector) -> (ClientManager, Arc<ClientMetrics>) {
    let metrics = Arc::new(ClientMetrics::default());
    let m = ClientManager::new(lookup, Box::new(count.clone()), ManagerConfig::default(), metrics.clone());
    (m, metrics)
}

fn as_provider(s: StoreObject) -> Arc<Provider> {
    match s {
        StoreObject::Provider(p) => p,
        _ => unreachable!(),
    }
}

fn as_cluster(s: StoreObject) -> Arc<ClusterProvider> {
    match s {
        StoreObject::ClusterProvider(p) => p,
        _ => unreachable!(),
    }
}

fn hits(metrics: &ClientMetrics, kind: &str, name: &str) -> u64 {
    metrics.cache_hits.get_or_create(&StoreLabels { kind: kind.into(), name: name.into() }).get()
}

#[tokio::test]
async fn denied_namespace_creates_no_client_and_no_connection() {
    let lookup = Arc::new(FakeLookup::default());
    lookup.cluster_providers.lock().unwrap().push(as_cluster(cluster(
        "shared",
        AuthenticationScope::ManifestNamespace,
        None,
        only_label("team", "a"),
    )));
    lookup.labels.lock().unwrap().insert("team-b".into(), [("team".to_string(), "b".to_string())].into());
    lookup.tls.lock().unwrap().insert("keyward".into(), tls("t"));
    let count = CountingConnector::default();
    let (m, _) = manager(lookup.clone(), &count);
    let err = m.client_for(StoreKind::ClusterProvider, "shared", "team-b", Need::Read).await.unwrap_err();
    assert!(matches!(err, ClientError::NamespaceDenied(_)), "{err}");
    assert!(err.to_string().contains("\"shared\"") && err.to_string().contains("\"team-b\""));
    assert_eq!(count.0.load(Ordering::SeqCst), 0);
    assert_eq!(m.pool_stats().open, 0);
}

#[tokio::test]
async fn labels_changed_after_a_client_was_cached_are_still_enforced() {
    let lookup = Arc::new(FakeLookup::default());
    lookup.cluster_providers.lock().unwrap().push(as_cluster(cluster(
        "shared",
        AuthenticationScope::ManifestNamespace,
        None,
        only_label("team", "a"),
    )));
    lookup.labels.lock().unwrap().insert("team-a".into(), [("team".to_string(), "a".to_string())].into());
    lookup.tls.lock().unwrap().insert("keyward".into(), tls("t"));
    let count = CountingConnector::default();
    let (m, _) = manager(lookup.clone(), &count);
    m.client_for(StoreKind::ClusterProvider, "shared", "team-a", Need::Read).await.unwrap();
    lookup.labels.lock().unwrap().insert("team-a".into(), [("team".to_string(), "x".to_string())].into());
    let err = m.client_for(StoreKind::ClusterProvider, "shared", "team-a", Need::Read).await.unwrap_err();
    assert!(matches!(err, ClientError::NamespaceDenied(_)), "{err}");
}

#[tokio::test]
async fn clients_are_cached_per_namespace_and_share_one_connection() {
    let lookup = Arc::new(FakeLookup::default());
    lookup.cluster_providers.lock().unwrap().push(as_cluster(cluster(
        "shared",
        AuthenticationScope::ManifestNamespace,
        None,
        vec![],
    )));
    lookup.tls.lock().unwrap().insert("keyward".into(), tls("t"));
    let count = CountingConnector::default();
    let (m, metrics) = manager(lookup.clone(), &count);
    for ns in ["a", "b", "c", "a", "b", "c"] {
        let (c, _) = m.client_for(StoreKind::ClusterProvider, "shared", ns, Need::Read).await.unwrap();
        assert_eq!(c.source_namespace(), ns);
        assert_eq!(c.reference().namespace, ns, "ManifestNamespace scope authenticates in the manifest ns");
        assert_eq!(c.reference().store_ref_kind, "ClusterProvider");
    }
    assert_eq!(hits(&metrics, "ClusterProvider", "shared"), 3);
    assert_eq!(count.0.load(Ordering::SeqCst), 1, "one pooled connection for one provider");
}

#[tokio::test]
async fn generation_change_rebuilds_and_tls_change_reconnects() {
    let lookup = Arc::new(FakeLookup::default());
    lookup.providers.lock().unwrap().push(as_provider(provider("team-a", "p", "127.0.0.1:9443", 1)));
    lookup.tls.lock().unwrap().insert("team-a".into(), tls("one"));
    let count = CountingConnector::default();
    let (m, metrics) = manager(lookup.clone(), &count);
    m.client_for(StoreKind::Provider, "p", "team-a", Need::Read).await.unwrap();
    m.client_for(StoreKind::Provider, "p", "team-a", Need::Read).await.unwrap();
    assert_eq!(hits(&metrics, "Provider", "p"), 1);

    *lookup.providers.lock().unwrap() = vec![as_provider(provider("team-a", "p", "127.0.0.1:9443", 2))];
    m.client_for(StoreKind::Provider, "p", "team-a", Need::Read).await.unwrap();
    assert_eq!(hits(&metrics, "Provider", "p"), 1, "new generation is a miss");
    assert_eq!(count.0.load(Ordering::SeqCst), 1, "same address and TLS keep the connection");

    lookup.tls.lock().unwrap().insert("team-a".into(), tls("two"));
    let (c, _) = m.client_for(StoreKind::Provider, "p", "team-a", Need::Read).await.unwrap();
    assert_eq!(hits(&metrics, "Provider", "p"), 1, "new TLS material is a miss");
    assert_eq!(count.0.load(Ordering::SeqCst), 2, "new TLS material needs a new connection");
    assert_eq!(c.pool_key().tls_fingerprint, tls("two").fingerprint);
}

#[tokio::test]
async fn missing_stores_and_tls_are_clear_errors() {
    let lookup = Arc::new(FakeLookup::default());
    let count = CountingConnector::default();
    let (m, _) = manager(lookup.clone(), &count);
    let err = m.client_for(StoreKind::SecretStore, "s", "a", Need::Read).await.unwrap_err();
    assert_eq!(err.to_string(), "SecretStore \"s\" not found in namespace \"a\"");
    let err = m.client_for(StoreKind::ClusterSecretStore, "s", "a", Need::Read).await.unwrap_err();
    assert_eq!(err.to_string(), "ClusterSecretStore \"s\" not found");
    let err = m.client_for(StoreKind::Provider, "p", "a", Need::Read).await.unwrap_err();
    assert_eq!(err.to_string(), "Provider \"p\" not found in namespace \"a\"");
    lookup.providers.lock().unwrap().push(as_provider(provider("a", "p", "127.0.0.1:9443", 1)));
    let err = m.client_for(StoreKind::Provider, "p", "a", Need::Read).await.unwrap_err();
    assert!(err.to_string().contains("Secret a/keyward-provider-tls not found"), "{err}");
    assert_eq!(count.0.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_store_s_retry_settings_and_controller_apply_to_calls_through_it() {
    let lookup = Arc::new(FakeLookup::default());
    let store = |name: &str, extra: serde_json::Value| {
        let mut spec = serde_json::json!({"provider": {"fake": {"data": []}}});
        spec.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        let mut s = keyward_crds::SecretStore::new(name, serde_json::from_value(spec).unwrap());
        s.metadata.namespace = Some("a".into());
        Arc::new(s)
    };
    lookup.secret_stores.lock().unwrap().extend([
        store("retrying", serde_json::json!({"retrySettings": {"maxRetries": 4, "retryInterval": "1s"}})),
        store("plain", serde_json::json!({})),
        store("elsewhere", serde_json::json!({"controller": "other"})),
    ]);
    lookup.tls.lock().unwrap().insert("keyward".into(), tls("t"));
    let count = CountingConnector::default();
    let (m, _) = manager(lookup.clone(), &count);
    let m = m.with_store_providers(StoreProviders {
        addresses: [("fake".to_string(), "127.0.0.1:9443".to_string())].into(),
        tls_namespace: "keyward".into(),
    });
    let (c, _) = m.client_for(StoreKind::SecretStore, "retrying", "a", Need::Read).await.unwrap();
    assert_eq!(c.settings.retry.max_attempts, 5, "four retries after the first attempt");
    assert_eq!((c.settings.retry.base, c.settings.retry.fixed), (std::time::Duration::from_secs(1), true));
    let (c, _) = m.client_for(StoreKind::SecretStore, "plain", "a", Need::Read).await.unwrap();
    assert_eq!(c.settings.retry, RetryPolicy::default(), "no retrySettings: the defaults");

    // A store naming another controller is not served by this instance, nor what uses it.
    let err = m.client_for(StoreKind::SecretStore, "elsewhere", "a", Need::Read).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "SecretStore \"elsewhere\" is served by controller \"other\" (spec.controller), not by this instance"
    );
    assert!(!m.serves_stores(&[(None, "plain"), (None, "elsewhere")], "a").await);
    assert!(
        m.serves_stores(&[(None, "plain"), (Some(StoreKind::Provider), "elsewhere"), (None, "missing")], "a").await
    );
    let m = m.with_controller_class(Some("other".into()));
    assert!(m.client_for(StoreKind::SecretStore, "elsewhere", "a", Need::Read).await.is_ok());
    assert!(m.serves_stores(&[(None, "plain"), (None, "elsewhere")], "a").await, "no controller: every instance");
}

#[tokio::test]
async fn capabilities_are_enforced() {
    let lookup = Arc::new(FakeLookup::default());
    let mut p = (*as_provider(provider("a", "w", "127.0.0.1:9443", 1))).clone();
    p.status = Some(ProviderStatus { conditions: vec![], capabilities: Some(Capabilities::WriteOnly) });
    lookup.providers.lock().unwrap().push(Arc::new(p));
    lookup.tls.lock().unwrap().insert("a".into(), tls("t"));
    let count = CountingConnector::default();
    let (m, _) = manager(lookup.clone(), &count);
    let err = m.client_for(StoreKind::Provider, "w", "a", Need::Read).await.unwrap_err();
    assert!(err.to_string().contains("WriteOnly and cannot be used to read"), "{err}");
    assert!(m.client_for(StoreKind::Provider, "w", "a", Need::Write).await.is_ok());
}

#[tokio::test]
async fn close_releases_connections() {
    let lookup = Arc::new(FakeLookup::default());
    lookup.providers.lock().unwrap().push(as_provider(provider("a", "p", "127.0.0.1:9443", 1)));
    lookup.tls.lock().unwrap().insert("a".into(), tls("t"));
    let count = CountingConnector::default();
    let (m, _) = manager(lookup.clone(), &count);
    m.client_for(StoreKind::Provider, "p", "a", Need::Read).await.unwrap();
    assert_eq!(m.pool_stats().open, 1);
    m.close();
    assert_eq!(m.pool_stats().open, 0);
    let err = m.client_for(StoreKind::Provider, "p", "a", Need::Read).await.unwrap_err();
    assert!(matches!(err, ClientError::Pool(PoolError::Closed)), "{err}");
}

#[tokio::test]
async fn one_namespace_cannot_open_the_breaker_for_others_on_a_manifest_namespace_cluster_provider() {
    let lookup = Arc::new(FakeLookup::default());
    for (name, scope, ns) in [
        ("per-tenant", AuthenticationScope::ManifestNamespace, None),
        ("shared-identity", AuthenticationScope::ProviderNamespace, Some("creds")),
    ] {
        lookup.cluster_providers.lock().unwrap().push(as_cluster(cluster(name, scope, ns, vec![])));
    }
    lookup.tls.lock().unwrap().insert("keyward".into(), tls("t"));
    let count = CountingConnector::default();
    let (m, _) = manager(lookup.clone(), &count);
    let now = std::time::Instant::now();
    let open_for = |c: &ProviderClient| {
        for _ in 0..BreakerConfig::default().failure_threshold {
            c.core.breaker.record(true, now);
        }
    };

    // The attacker's own credentials fail over and over (for instance a config pointing at an
    // unreachable server): its breaker opens, the other tenant's stays closed.
    let (attacker, _) = m.client_for(StoreKind::ClusterProvider, "per-tenant", "attacker", Need::Read).await.unwrap();
    let (victim, _) = m.client_for(StoreKind::ClusterProvider, "per-tenant", "victim", Need::Read).await.unwrap();
    open_for(&attacker);
    assert!(attacker.core.breaker.is_open(now));
    assert!(!victim.core.breaker.is_open(now), "a tenant opened the breaker of another tenant");

    // With ProviderNamespace every namespace is the same identity: one breaker.
    let (a, _) = m.client_for(StoreKind::ClusterProvider, "shared-identity", "attacker", Need::Read).await.unwrap();
    let (b, _) = m.client_for(StoreKind::ClusterProvider, "shared-identity", "victim", Need::Read).await.unwrap();
    assert!(Arc::ptr_eq(&a.core.breaker, &b.core.breaker));
    assert_eq!(a.owner(), keyward_crds::rules::ConfigOwner::Operator);
    assert_eq!(attacker.owner(), keyward_crds::rules::ConfigOwner::Tenant);
}

#[tokio::test]
async fn a_store_created_again_under_its_name_starts_with_a_closed_breaker() {
    let lookup = Arc::new(FakeLookup::default());
    let with_uid = |uid: &str| {
        let mut p = (*as_provider(provider("team-a", "p", "127.0.0.1:9443", 1))).clone();
        p.metadata.uid = Some(uid.into());
        Arc::new(p)
    };
    lookup.providers.lock().unwrap().push(with_uid("first"));
    lookup.tls.lock().unwrap().insert("team-a".into(), tls("t"));
    let count = CountingConnector::default();
    let (m, _) = manager(lookup.clone(), &count);
    let now = std::time::Instant::now();
    let (old, _) = m.client_for(StoreKind::Provider, "p", "team-a", Need::Read).await.unwrap();
    fail_until_open(&old, now);
    assert!(old.core.breaker.is_open(now));

    // Deleted and created again (same name, generation 1, new credentials): its own breaker.
    *lookup.providers.lock().unwrap() = vec![with_uid("second")];
    let (new, _) = m.client_for(StoreKind::Provider, "p", "team-a", Need::Read).await.unwrap();
    assert!(!new.core.breaker.is_open(now), "the new store inherited the old one's open breaker");

    // A deleted store's breakers are forgotten with its clients.
    m.forget_store(StoreKind::Provider, "p");
    assert!(m.breakers.lock().unwrap().is_empty());
}

/// Opens `c`'s breaker, as a run of transient failures does.
fn fail_until_open(c: &ProviderClient, now: std::time::Instant) {
    for _ in 0..BreakerConfig::default().failure_threshold {
        c.core.breaker.record(true, now);
    }
}

/// What a call that got an answer does (see `client.rs`).
fn answer(c: &ProviderClient, now: std::time::Instant) {
    if c.core.breaker.record(false, now) {
        c.recovery.provider_answered(&c.core.provider);
    }
}

fn es(name: &str) -> crate::ObjectKey {
    crate::ObjectKey::external_secret("a", name)
}

/// A manager serving Providers `names` of namespace `a`, a client of each, and the receiver of
/// the objects recovery requeues.
async fn recovery_fixture(
    names: &[&str],
) -> (ClientManager, Arc<ClientMetrics>, futures::channel::mpsc::UnboundedReceiver<crate::ObjectKey>, Vec<ProviderClient>)
{
    let lookup = Arc::new(FakeLookup::default());
    for name in names {
        lookup.providers.lock().unwrap().push(as_provider(provider("a", name, "127.0.0.1:9443", 1)));
    }
    lookup.tls.lock().unwrap().insert("a".into(), tls("t"));
    let count = CountingConnector::default();
    let (m, metrics) = manager(lookup, &count);
    let requeued = m.recovery().subscribe("ExternalSecret");
    let mut clients = Vec::new();
    for name in names {
        clients.push(m.client_for(StoreKind::Provider, name, "a", Need::Read).await.unwrap().0);
    }
    (m, metrics, requeued, clients)
}

#[tokio::test]
async fn objects_waiting_on_a_provider_are_requeued_when_it_answers_again_and_only_then() {
    let (m, metrics, mut requeued, clients) = recovery_fixture(&["p", "q"]).await;
    let (p, q) = (&clients[0], &clients[1]);
    let now = std::time::Instant::now();
    fail_until_open(p, now);
    fail_until_open(q, now);
    for name in ["one", "two", "gone"] {
        m.recovery().wait(es(name), p.waitable());
    }
    m.recovery().wait(es("on-q"), q.waitable());
    // An object waits on one provider at a time: the last one it failed on.
    m.recovery().wait(es("moved"), q.waitable());
    m.recovery().wait(es("moved"), p.waitable());
    m.recovery().forget(&es("gone"));
    assert_eq!(m.recovery().waiting(), 4);
    assert_eq!(metrics.recovery_waiting.get(), 4);

    answer(p, now);
    m.recovery().send_released(100);
    let mut got = Vec::new();
    while let Ok(key) = requeued.try_recv() {
        got.push(key.name().to_string());
    }
    got.sort();
    assert_eq!(got, ["moved", "one", "two"], "p's waiters, not q's, not the one that is gone");
    assert_eq!(metrics.recovery_requeues.get(), 3);
    assert_eq!(metrics.provider_recoveries.get(), 1);
    assert_eq!(m.recovery().waiting(), 1, "on-q still waits");

    // q answers: its waiter goes; a second answer releases nothing more.
    answer(q, now);
    answer(q, now);
    m.recovery().send_released(100);
    assert_eq!(requeued.try_recv().ok().map(|k| k.name().to_string()).as_deref(), Some("on-q"));
    assert!(requeued.try_recv().is_err());
    // An answer from a provider whose breaker never opened is not a return.
    let (r, _) = m.client_for(StoreKind::Provider, "p", "a", Need::Read).await.unwrap();
    r.core.breaker.record(true, now);
    m.recovery().wait(es("flaky"), r.waitable());
    answer(&r, now);
    m.recovery().send_released(100);
    assert!(requeued.try_recv().is_err(), "nothing released: the breaker did not open");
    m.recovery().forget(&es("flaky"));
    assert_eq!(m.recovery().waiting(), 0, "bounded: nothing left once objects stop waiting");
}

#[tokio::test]
async fn a_provider_that_came_back_while_the_call_was_failing_releases_the_object_at_once() {
    let (m, _, mut requeued, clients) = recovery_fixture(&["p"]).await;
    let p = &clients[0];
    let now = std::time::Instant::now();
    fail_until_open(p, now);
    let seen_when_failing = p.waitable();
    answer(p, now);
    m.recovery().wait(es("late"), seen_when_failing);
    assert_eq!(m.recovery().waiting(), 0);
    m.recovery().send_released(1);
    assert_eq!(requeued.try_recv().ok().map(|k| k.name().to_string()).as_deref(), Some("late"));
}

#[tokio::test]
async fn released_objects_go_out_at_the_bounded_rate() {
    let (m, _, mut requeued, clients) = recovery_fixture(&["p"]).await;
    let p = &clients[0];
    let now = std::time::Instant::now();
    fail_until_open(p, now);
    for i in 0..120 {
        m.recovery().wait(es(&format!("es-{i}")), p.waitable());
    }
    answer(p, now);
    // The default rate (500/s) sends 50 per 100 ms tick, in the order they were released.
    let per_tick = ManagerConfig::default().recovery_rate.div_ceil(10) as usize;
    m.recovery().send_released(per_tick);
    let mut n = 0;
    while requeued.try_recv().is_ok() {
        n += 1;
    }
    assert_eq!(n, 50);
}

#[tokio::test]
async fn each_controller_is_sent_the_released_objects_of_its_own_kind() {
    use futures::StreamExt;
    use keyward_crds::{ExternalSecret, PushSecret};
    let (m, metrics, _, clients) = recovery_fixture(&["p"]).await;
    let p = &clients[0];
    let now = std::time::Instant::now();
    fail_until_open(p, now);
    let mut ess = Box::pin(m.recovery().requeues::<ExternalSecret>());
    let mut pss = Box::pin(m.recovery().requeues::<PushSecret>());
    m.recovery().wait(es("es"), p.waitable());
    m.recovery().wait(crate::ObjectKey::push_secret("a", "ps"), p.waitable());
    // A kind with no controller subscribed is released and dropped, not counted as a requeue.
    m.recovery().wait(crate::ObjectKey::cluster_external_secret("ces"), p.waitable());
    answer(p, now);
    m.recovery().send_released(100);
    let es_ref = ess.next().await.unwrap();
    assert_eq!((es_ref.name.as_str(), es_ref.namespace.as_deref()), ("es", Some("a")));
    let ps_ref = pss.next().await.unwrap();
    assert_eq!((ps_ref.name.as_str(), ps_ref.namespace.as_deref()), ("ps", Some("a")));
    assert!(futures::poll!(ess.next()).is_pending(), "the PushSecret did not go to the ExternalSecret controller");
    assert!(futures::poll!(pss.next()).is_pending());
    assert_eq!(metrics.recovery_requeues.get(), 2);
    assert_eq!(m.recovery().waiting(), 0);
}
