//! End to end: what each `target.creationPolicy` does to the target Secret — who owns it, whether
//! it is created, re-created after a deletion, merged into, and kept when the ExternalSecret goes;
//! upstream's non-Secret target, accepted and reported; and what each `target.deletionPolicy`
//! does when remote values are deleted.

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use keyward_crds::external_secret::reason;
use keyward_crds::{ExternalSecret, Provider};
use keyward_e2e::with_temp_namespace;
use keyward_provider_fake::api::Fake;
use kube::api::{DeleteParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::support::*;

const WAIT: Duration = Duration::from_secs(60);

fn external_secret(name: &str, ns: &str, policy: &str) -> serde_json::Value {
    json!({
        "apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
        "metadata": {"name": name, "labels": {CLASS_LABEL: ns}},
        "spec": {"refreshInterval": "1h", "secretStoreRef": {"name": "fake", "kind": "Provider"},
                 "target": {"name": name, "creationPolicy": policy},
                 "data": [{"secretKey": "password", "remoteRef": {"key": "db"}}]},
    })
}

async fn wait_secret<F: Fn(&Secret) -> bool>(api: &Api<Secret>, name: &str, what: &str, f: F) -> Secret {
    eventually(what, WAIT, || async {
        let s = api.get_opt(name).await.ok()??;
        f(&s).then_some(s)
    })
    .await
}

/// A Secret written by someone else, with a key of its own.
async fn foreign_secret(api: &Api<Secret>, name: &str) {
    let s: Secret = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name}, "stringData": {"theirs": "kept"}}))
    .unwrap();
    api.create(&PostParams::default(), &s).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn creation_policies_own_create_merge_and_keep_the_target_as_upstream_documents() {
    let _turn = shared().await;
    with_temp_namespace(&[], |client, ns| async move {
        let pki = Pki::new();
        pki.install(&client, &ns).await;
        let fake = ProviderProcess::start("keyward-provider-fake", pki.provider_dir(), None).await;
        apply(&Api::<Fake>::namespaced(client.clone(), &ns), fake_config("data", &[("db", "s3cret")])).await;
        apply(&Api::<Provider>::namespaced(client.clone(), &ns), provider("fake", &ns, &fake.address(), "data")).await;
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
        foreign_secret(&secrets, "merge-existing").await;
        foreign_secret(&secrets, "create-or-merge-existing").await;
        let _reconciler = Reconciler::start(&ns, &[]).await;
        let ess: Api<ExternalSecret> = Api::namespaced(client.clone(), &ns);
        for (name, policy) in [
            ("owner", "Owner"),
            ("orphan", "Orphan"),
            ("merge-missing", "Merge"),
            ("merge-existing", "Merge"),
            ("create-or-merge", "CreateOrMerge"),
            ("create-or-merge-existing", "CreateOrMerge"),
        ] {
            apply(&ess, external_secret(name, &ns, policy)).await;
        }
        let synced = |name: &'static str| {
            let secrets = secrets.clone();
            async move {
                let what = format!("Secret {name} holds the value");
                wait_secret(&secrets, name, &what, |s| value(s, "password").as_deref() == Some("s3cret")).await
            }
        };

        // Owner: owned by the ExternalSecret. Orphan and CreateOrMerge: created, not owned.
        let owner = synced("owner").await;
        assert_eq!(owner.owner_references().first().map(|o| o.kind.as_str()), Some("ExternalSecret"));
        for name in ["orphan", "create-or-merge"] {
            let s = synced(name).await;
            assert!(s.owner_references().is_empty(), "{name}: no owner reference");
            assert_eq!(
                s.labels().get(keyward_crds::workload::MANAGED_LABEL).map(String::as_str),
                Some("true"),
                "{name}"
            );
        }
        // Merge and CreateOrMerge write into an existing Secret and keep its other keys.
        for name in ["merge-existing", "create-or-merge-existing"] {
            let s = synced(name).await;
            assert_eq!(value(&s, "theirs").as_deref(), Some("kept"), "{name}: keys others wrote stay");
            assert!(s.owner_references().is_empty(), "{name}");
        }
        // Merge never creates.
        let message = eventually("merge-missing reports the missing Secret", WAIT, || async {
            let es = ess.get("merge-missing").await.ok()?;
            let (status, reason, message) = ready_of(&es.status?.conditions)?;
            (status == "False" && reason == "SecretMissing").then_some(message)
        })
        .await;
        assert!(message.contains("creationPolicy Merge never creates it"), "{message}");
        assert!(secrets.get_opt("merge-missing").await.unwrap().is_none());

        // Upstream's non-Secret target applies, and is reported, not written.
        let mut to_config_map = external_secret("to-config-map", &ns, "Owner");
        to_config_map["spec"]["target"]["manifest"] = json!({"apiVersion": "v1", "kind": "ConfigMap"});
        apply(&ess, to_config_map).await;
        let message = eventually("the manifest target is reported", WAIT, || async {
            let es = ess.get("to-config-map").await.ok()?;
            let (status, _, message) = ready_of(&es.status?.conditions)?;
            (status == "False").then_some(message)
        })
        .await;
        assert!(message.contains("non-Secret targets are not supported by this controller"), "{message}");
        let config_maps: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), &ns);
        assert!(config_maps.get_opt("to-config-map").await.unwrap().is_none());
        assert!(secrets.get_opt("to-config-map").await.unwrap().is_none());

        // A deleted target is created again by CreateOrMerge, as by Owner.
        secrets.delete("create-or-merge", &DeleteParams::default()).await.unwrap();
        synced("create-or-merge").await;

        // Deleting the ExternalSecrets: Owner's Secret goes with it, the others stay.
        for name in ["owner", "orphan", "create-or-merge", "create-or-merge-existing"] {
            ess.delete(name, &DeleteParams::default()).await.unwrap();
        }
        eventually("the owned Secret is garbage collected", WAIT, || async {
            secrets.get_opt("owner").await.ok()?.is_none().then_some(())
        })
        .await;
        for name in ["orphan", "create-or-merge", "create-or-merge-existing"] {
            let s = secrets.get_opt(name).await.unwrap();
            assert!(s.is_some_and(|s| value(&s, "password").as_deref() == Some("s3cret")), "{name} is kept");
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn deletion_policies_drop_gone_keys_and_delete_or_keep_the_secret_as_upstream_documents() {
    let _turn = shared().await;
    with_temp_namespace(&[], |client, ns| async move {
        let pki = Pki::new();
        pki.install(&client, &ns).await;
        let fake = ProviderProcess::start("keyward-provider-fake", pki.provider_dir(), None).await;
        let fakes: Api<Fake> = Api::namespaced(client.clone(), &ns);
        apply(&fakes, fake_config("data", &[("db", "s3cret"), ("user", "admin")])).await;
        apply(&Api::<Provider>::namespaced(client.clone(), &ns), provider("fake", &ns, &fake.address(), "data")).await;
        let _reconciler = Reconciler::start(&ns, &[]).await;
        let ess: Api<ExternalSecret> = Api::namespaced(client.clone(), &ns);
        for policy in ["Delete", "Merge", "Retain"] {
            let name = policy.to_lowercase();
            let mut es = external_secret(&name, &ns, "Owner");
            es["spec"]["refreshInterval"] = json!("1s");
            es["spec"]["target"]["deletionPolicy"] = json!(policy);
            es["spec"]["data"] = json!([{"secretKey": "password", "remoteRef": {"key": "db"}},
                                        {"secretKey": "username", "remoteRef": {"key": "user"}}]);
            apply(&ess, es).await;
        }
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
        let keys = |s: &Secret| s.data.clone().unwrap_or_default().into_keys().collect::<Vec<_>>();
        for name in ["delete", "merge", "retain"] {
            wait_secret(&secrets, name, "both keys synced", |s| keys(s) == ["password", "username"]).await;
        }

        // One remote value deleted: Delete and Merge drop its key and stay Ready; Retain keeps the
        // Secret as it was and reports the missing value.
        apply(&fakes, fake_config("data", &[("db", "s3cret")])).await;
        for name in ["delete", "merge"] {
            let s = wait_secret(&secrets, name, "the gone key dropped", |s| keys(s) == ["password"]).await;
            assert_eq!(value(&s, "password").as_deref(), Some("s3cret"), "{name}");
            let es = ess.get(name).await.unwrap();
            assert_eq!(ready_of(&es.status.unwrap().conditions).unwrap().0, "True", "{name}");
        }
        eventually("Retain reports the missing value", WAIT, || async {
            let (status, _, _) = ready_of(&ess.get("retain").await.ok()?.status?.conditions)?;
            (status == "False").then_some(())
        })
        .await;
        assert_eq!(value(&secrets.get("retain").await.unwrap(), "username").as_deref(), Some("admin"));

        // Every remote value deleted: Delete deletes the Secret, Merge keeps it (without the
        // values), Retain keeps its last data.
        apply(&fakes, fake_config("data", &[("unrelated", "x")])).await;
        eventually("Delete deletes the Secret", WAIT, || async {
            secrets.get_opt("delete").await.ok()?.is_none().then_some(())
        })
        .await;
        let es = ess.get("delete").await.unwrap();
        assert_eq!(ready_of(&es.status.unwrap().conditions).unwrap().1, reason::SECRET_DELETED);
        wait_secret(&secrets, "merge", "Merge keeps the Secret without the values", |s| keys(s).is_empty()).await;
        let retained = secrets.get("retain").await.unwrap();
        assert_eq!(keys(&retained), ["password", "username"], "Retain keeps the last data");
    })
    .await;
}
