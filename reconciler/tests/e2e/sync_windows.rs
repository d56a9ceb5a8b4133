//! End to end: `spec.syncWindows` hold periodic refreshes (a deny window that is open now, an
//! allow window that is not) and let the rest through (an allow window open now, `force-sync`).

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use keyward_crds::external_secret::FORCE_SYNC_ANNOTATION;
use keyward_crds::{ExternalSecret, Provider};
use keyward_e2e::with_temp_namespace;
use keyward_provider_fake::api::Fake;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use crate::support::*;

const WAIT: Duration = Duration::from_secs(60);

fn external_secret(name: &str, ns: &str, kind: &str, schedule: &str) -> serde_json::Value {
    json!({
        "apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
        "metadata": {"name": name, "labels": {CLASS_LABEL: ns}},
        "spec": {"refreshInterval": "1s", "secretStoreRef": {"name": "fake", "kind": "Provider"},
                 "syncWindows": {"kind": kind, "windows": [{"schedule": schedule, "duration": "1h"}]},
                 "data": [{"secretKey": "password", "remoteRef": {"key": "db"}}]},
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn sync_windows_hold_periodic_refreshes_but_not_force_sync() {
    let _turn = shared().await;
    with_temp_namespace(&[], |client, ns| async move {
        let pki = Pki::new();
        pki.install(&client, &ns).await;
        let fake = ProviderProcess::start("keyward-provider-fake", pki.provider_dir(), None).await;
        let fakes: Api<Fake> = Api::namespaced(client.clone(), &ns);
        apply(&fakes, fake_config("data", &[("db", "v1")])).await;
        apply(&Api::<Provider>::namespaced(client.clone(), &ns), provider("fake", &ns, &fake.address(), "data")).await;
        let _reconciler = Reconciler::start(&ns, &[]).await;
        let ess: Api<ExternalSecret> = Api::namespaced(client.clone(), &ns);
        // Every minute, open for an hour: always open. New Year only: closed (but in its first hour).
        apply(&ess, external_secret("deny-open", &ns, "deny", "* * * * *")).await;
        apply(&ess, external_secret("allow-never", &ns, "allow", "0 0 1 1 *")).await;
        apply(&ess, external_secret("allow-open", &ns, "allow", "* * * * *")).await;
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
        // The first sync is not periodic: windows do not hold it.
        for name in ["deny-open", "allow-never", "allow-open"] {
            wait_for_value(&secrets, name, "password", "v1", WAIT).await;
        }

        apply(&fakes, fake_config("data", &[("db", "v2")])).await;
        wait_for_value(&secrets, "allow-open", "password", "v2", WAIT).await;
        // allow-open refreshes every second; give the held ones several intervals to (not) move.
        tokio::time::sleep(Duration::from_secs(5)).await;
        for name in ["deny-open", "allow-never"] {
            let s = secrets.get(name).await.unwrap();
            assert_eq!(value(&s, "password").as_deref(), Some("v1"), "{name}: the periodic refresh is held");
        }

        // force-sync goes through a closed window, as a spec change does.
        let annotate = json!({"metadata": {"annotations": {FORCE_SYNC_ANNOTATION: "1"}}});
        ess.patch("deny-open", &PatchParams::default(), &Patch::Merge(&annotate)).await.unwrap();
        wait_for_value(&secrets, "deny-open", "password", "v2", WAIT).await;
    })
    .await;
}
