//! End to end: two reconcilers share one Lease. Only the holder reconciles; when it shuts
//! down it releases the Lease, and the standby takes over at once (well before the Lease
//! would expire) and keeps syncing.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Secret;
use keyward_crds::{ExternalSecret, Provider};
use keyward_e2e::with_temp_namespace;
use keyward_provider_fake::api::Fake;
use kube::Api;
use serde_json::json;

use crate::support::*;

const WAIT: Duration = Duration::from_secs(60);

fn external_secret(name: &str, ns: &str) -> serde_json::Value {
    json!({
        "apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
        "metadata": {"name": name, "labels": {CLASS_LABEL: ns}},
        "spec": {"refreshInterval": "1s", "secretStoreRef": {"name": "fake", "kind": "Provider"},
                 "data": [{"secretKey": "v", "remoteRef": {"key": "k"}}]},
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn one_leader_reconciles_and_a_standby_takes_over_when_it_leaves() {
    // Alone: leader election: the failover is timed (under 10 s).
    let _turn = exclusive().await;
    with_temp_namespace(&[], |client, ns| async move {
        let pki = Pki::new();
        pki.install(&client, &ns).await;
        let fake = ProviderProcess::start("keyward-provider-fake", pki.provider_dir(), None).await;
        apply(&Api::<Fake>::namespaced(client.clone(), &ns), fake_config("cfg", &[("k", "v1")])).await;
        apply(&Api::<Provider>::namespaced(client.clone(), &ns), provider("fake", &ns, &fake.address(), "cfg")).await;
        let lease_args = ["--lease-duration", "15s", "--shutdown-grace", "3s"];
        let mut first = Reconciler::start(&ns, &[&["--identity", "first"][..], &lease_args].concat()).await;
        let mut standby = Reconciler::spawn(&ns, &[&["--identity", "standby"][..], &lease_args].concat()).await;
        standby.process.wait_for_log("waiting for leadership", WAIT).await;

        let ess: Api<ExternalSecret> = Api::namespaced(client.clone(), &ns);
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
        apply(&ess, external_secret("before", &ns)).await;
        eventually("first leader syncs", WAIT, || async { secrets.get_opt("before").await.ok()? }).await;
        let leases: Api<Lease> = Api::namespaced(client.clone(), &ns);
        let holder = leases.get("keyward-reconciler").await.unwrap().spec.unwrap().holder_identity;
        assert_eq!(holder.as_deref(), Some("first"));
        assert!(!standby.process.log().contains("controllers running"), "the standby must not reconcile");

        // A graceful shutdown releases the Lease: the standby leads long before 15 s pass.
        let stopped = Instant::now();
        assert!(first.process.terminate(Duration::from_secs(20)).is_some(), "the leader exits on SIGTERM");
        standby.process.wait_for_log("controllers running", Duration::from_secs(10)).await;
        assert!(stopped.elapsed() < Duration::from_secs(10), "failover took {:?}", stopped.elapsed());
        let holder = leases.get("keyward-reconciler").await.unwrap().spec.unwrap().holder_identity;
        assert_eq!(holder.as_deref(), Some("standby"));

        apply(&ess, external_secret("after", &ns)).await;
        let s = eventually("the new leader syncs", WAIT, || async { secrets.get_opt("after").await.ok()? }).await;
        assert_eq!(value(&s, "v").as_deref(), Some("v1"));
    })
    .await;
}
