//! What Keyward costs a store, counted by the store itself (Vault's audit log): ExternalSecrets
//! that read one secret through one store share one read per refresh window, however many
//! `data` entries and properties they ask for; a `force-sync` reads anew and its Secret gets the
//! changed value; a store with other credentials reading the same key makes its own read; and
//! the provider reads the SecretStores it serves from a watch, not with a GET per call or per
//! periodic store check.

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use keyward_crds::{ExternalSecret, SecretStore};
use keyward_e2e::stores::VaultDev;
use keyward_e2e::with_temp_namespace;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use crate::support::*;

const WAIT: Duration = Duration::from_secs(90);
const COUNT: usize = 20;

fn vault_store(name: &str, ns: &str, server: &str, token_secret: &str) -> serde_json::Value {
    json!({"apiVersion": "external-secrets.io/v1", "kind": "SecretStore",
           "metadata": {"name": name, "labels": {CLASS_LABEL: ns}},
           "spec": {"provider": {"vault": {"server": server, "path": "secret", "version": "v2",
               "auth": {"tokenSecretRef": {"name": token_secret, "key": "token"}}}}}})
}

/// Three `data` entries, three properties of one secret, refreshed hourly.
fn external_secret(name: &str, ns: &str, store: &str, key: &str) -> serde_json::Value {
    let entry = |p: &str| json!({"secretKey": p, "remoteRef": {"key": key, "property": p}});
    json!({"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
           "metadata": {"name": name, "labels": {CLASS_LABEL: ns}},
           "spec": {"refreshInterval": "1h", "secretStoreRef": {"name": store, "kind": "SecretStore"},
                    "data": [entry("user"), entry("password"), entry("host")]}})
}

#[tokio::test(flavor = "multi_thread")]
async fn one_store_read_per_secret_per_refresh_window() {
    // Alone: it counts the API server's GETs of SecretStores.
    let _turn = exclusive().await;
    let vault = VaultDev::start();
    let audit = vault.audit(&[]);
    with_temp_namespace(&[], |client, ns| {
        let (vault, audit) = (&vault, &audit);
        async move {
            let pki = Pki::new();
            pki.install(&client, &ns).await;
            let provider = ProviderProcess::start("keyward-provider-vault", pki.provider_dir(), None).await;
            let key = format!("{ns}/shared");
            vault.cli(&["kv", "put", &format!("secret/{key}"), "user=app", "password=pw", "host=db"]);
            let reads = || audit.reads(&format!("secret/data/{key}"));

            let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
            let other = vault.json(&["token", "create"], &["-policy=root"]);
            let other = other["auth"]["client_token"].as_str().unwrap().to_string();
            for (name, token) in [("token-a", vault.root_token().to_string()), ("token-b", other)] {
                apply(
                    &secrets,
                    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
                           "stringData": {"token": token}}),
                )
                .await;
            }
            let stores: Api<SecretStore> = Api::namespaced(client.clone(), &ns);
            apply(&stores, vault_store("vault-a", &ns, &vault.address(), "token-a")).await;
            apply(&stores, vault_store("vault-b", &ns, &vault.address(), "token-b")).await;
            let _reconciler = Reconciler::start_with_stores(&ns, &[("vault", &provider)], &[]).await;

            // Twenty ExternalSecrets, sixty data entries, one secret: one read.
            let ess: Api<ExternalSecret> = Api::namespaced(client.clone(), &ns);
            for i in 0..COUNT {
                apply(&ess, external_secret(&format!("es-{i}"), &ns, "vault-a", &key)).await;
            }
            for i in 0..COUNT {
                wait_for_value(&secrets, &format!("es-{i}"), "host", "db", WAIT).await;
            }
            assert_eq!(reads(), 1, "{COUNT} ExternalSecrets × 3 entries reading one secret through one store");

            // GETs of SecretStores the API server served (the test runs alone, so its counters
            // are this test's).
            let store_gets = || async {
                let served = api_requests(&client).await;
                served.get(&vec!["GET".to_string(), "secretstores".to_string()]).copied().unwrap_or(0.0)
            };
            let gets_before = store_gets().await;

            // A changed value, and a force-sync of one ExternalSecret: it reads anew, its store's
            // configuration too.
            vault.cli(&["kv", "put", &format!("secret/{key}"), "user=app2", "password=pw", "host=db"]);
            let annotate = json!({"metadata": {"annotations": {"force-sync": "1"}}});
            ess.patch("es-0", &PatchParams::default(), &Patch::Merge(&annotate)).await.unwrap();
            wait_for_value(&secrets, "es-0", "user", "app2", WAIT).await;
            assert_eq!(reads(), 2, "a force-sync reads the store anew");
            // The one entry that reads anew makes one provider call, which reads the store twice
            // (for its read-sharing key and for its client); the other two entries accept that
            // answer, and the store checks in between (every 3 s here) read the SecretStore from
            // the provider's watch (Validate's max_age_millis). Nothing else GETs it.
            let gets = store_gets().await - gets_before;
            assert_eq!(gets, 2.0, "a force-sync reads its SecretStore anew, once per call: {gets} GETs");

            // Another store with its own credentials, the same key: its own read, never the
            // first store's answer.
            apply(&ess, external_secret("other-store", &ns, "vault-b", &key)).await;
            wait_for_value(&secrets, "other-store", "user", "app2", WAIT).await;
            assert_eq!(reads(), 3, "another identity reads for itself");

            // The provider keeps the stores it serves in a watch: ten more ExternalSecrets, each
            // reading a secret of its own, sync without one GET of their SecretStore.
            let gets_before = store_gets().await;
            for i in 0..10 {
                let own = format!("{ns}/own-{i}");
                vault.cli(&["kv", "put", &format!("secret/{own}"), "user=own", "password=pw", "host=db"]);
                apply(&ess, external_secret(&format!("own-{i}"), &ns, "vault-a", &own)).await;
            }
            for i in 0..10 {
                wait_for_value(&secrets, &format!("own-{i}"), "user", "own", WAIT).await;
            }
            // Two more check intervals, so each store is checked at least twice in the window.
            tokio::time::sleep(Duration::from_secs(7)).await;
            // Not one GET: neither the syncs nor the periodic checks of the two stores.
            let gets = store_gets().await - gets_before;
            assert_eq!(gets, 0.0, "first syncs and store checks read the store from the watch: {gets} GETs");
            drop(provider);
        }
    })
    .await;
}
