//! End to end: generic targets (`spec.target.manifest`). While they are off (the default) an
//! ExternalSecret naming a ConfigMap reports why and writes nothing; once the operator turns
//! them on for the listed resources, the same ExternalSecret writes its ConfigMap (owned, and
//! corrected after a hand edit), a template writes a ConfigMap's data and labels and a path of
//! another kind (a LimitRange's `spec.limits[0]`), and a kind that is not listed is refused.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, LimitRange, ServiceAccount};
use keyward_crds::{ExternalSecret, Provider};
use keyward_e2e::with_temp_namespace;
use keyward_provider_fake::api::Fake;
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::support::*;

const WAIT: Duration = Duration::from_secs(60);
/// Restarts take no Lease turn: one reconciler at a time, without leader election.
const NO_LEASE: [&str; 2] = ["--leader-elect", "false"];

fn external_secret(name: &str, ns: &str, target: serde_json::Value) -> serde_json::Value {
    json!({
        "apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
        "metadata": {"name": name, "labels": {CLASS_LABEL: ns}},
        "spec": {"refreshInterval": "2s", "secretStoreRef": {"name": "fake", "kind": "Provider"},
                 "target": target,
                 "data": [{"secretKey": "password", "remoteRef": {"key": "db"}},
                          {"secretKey": "memory", "remoteRef": {"key": "mem"}}]},
    })
}

/// The Ready condition of `name` once it has status `want`: (reason, message).
async fn ready(ess: &Api<ExternalSecret>, name: &str, want: &str) -> (String, String) {
    eventually(&format!("{name} is Ready={want}"), WAIT, || async {
        let (status, reason, message) = ready_of(&ess.get(name).await.ok()?.status?.conditions)?;
        (status == want).then_some((reason, message))
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn generic_targets_are_refused_while_off_and_written_as_upstream_documents_when_on() {
    let _turn = shared().await;
    with_temp_namespace(&[], |client, ns| async move {
        let pki = Pki::new();
        pki.install(&client, &ns).await;
        let fake = ProviderProcess::start("keyward-provider-fake", pki.provider_dir(), None).await;
        apply(
            &Api::<Fake>::namespaced(client.clone(), &ns),
            fake_config("data", &[("db", "s3cret"), ("mem", "256Mi")]),
        )
        .await;
        apply(&Api::<Provider>::namespaced(client.clone(), &ns), provider("fake", &ns, &fake.address(), "data")).await;
        let ess: Api<ExternalSecret> = Api::namespaced(client.clone(), &ns);
        let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
        let config_map = json!({"apiVersion": "v1", "kind": "ConfigMap"});
        apply(&ess, external_secret("plain", &ns, json!({"name": "app-config", "manifest": config_map}))).await;

        // Off (the default): reported, with the flag and the chart value, and nothing written.
        let off = Reconciler::start(&ns, &NO_LEASE).await;
        let (_, message) = ready(&ess, "plain", "False").await;
        assert!(
            message.contains("--generic-targets") && message.contains("genericTargets.enabled"),
            "the refusal names the flag and the chart value: {message}"
        );
        assert!(message.contains("--unsafe-allow-generic-targets"), "{message}");
        assert!(config_maps.get_opt("app-config").await.unwrap().is_none(), "nothing is written while off");
        drop(off);

        // On, for ConfigMaps and LimitRanges (upstream's flag name).
        let mut flags = NO_LEASE.to_vec();
        flags.extend(["--unsafe-allow-generic-targets", "--generic-target-resources=configmaps,limitranges"]);
        let _on = Reconciler::start(&ns, &flags).await;
        let cm = eventually("the ConfigMap is written", WAIT, || async {
            let cm = config_maps.get_opt("app-config").await.ok()??;
            (cm.data.as_ref()?.get("password")? == "s3cret").then_some(cm)
        })
        .await;
        assert_eq!(cm.data.as_ref().unwrap().get("memory").map(String::as_str), Some("256Mi"));
        let owner = cm.owner_references().first().cloned().expect("owned");
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str(), owner.controller),
            ("ExternalSecret", "plain", Some(true))
        );
        assert_eq!(cm.labels().get(keyward_crds::workload::MANAGED_LABEL).map(String::as_str), Some("true"));
        let managers: Vec<_> = cm.metadata.managed_fields.iter().flatten().filter_map(|f| f.manager.clone()).collect();
        assert!(managers.contains(&"keyward-reconciler".to_string()), "server-side apply: {managers:?}");
        let (reason, message) = ready(&ess, "plain", "True").await;
        assert_eq!((reason.as_str(), message.as_str()), ("SecretSynced", "ConfigMap was synced"));

        // A hand edit is corrected at the next refresh.
        let edit = json!({"data": {"password": "edited"}});
        config_maps.patch("app-config", &PatchParams::default(), &Patch::Merge(edit)).await.unwrap();
        eventually("the edit is corrected", WAIT, || async {
            let cm = config_maps.get_opt("app-config").await.ok()??;
            (cm.data?.get("password")? == "s3cret").then_some(())
        })
        .await;

        // Templates: a ConfigMap's data and labels (upstream's manifest-templated-configmap), and
        // a literal placed at a path of another kind.
        let templated = json!({"manifest": config_map, "template": {
            "metadata": {"labels": {"app": "shop"}},
            "data": {"database.yaml": "password: {{ .password }}\n"}}});
        apply(&ess, external_secret("templated", &ns, templated)).await;
        let limits = json!({"name": "limits", "manifest": {"apiVersion": "v1", "kind": "LimitRange"},
            "template": {"templateFrom": [{
                "literal": "type: Container\ndefault:\n  memory: '{{ .memory }}'\n",
                "target": "spec.limits[0]"}]}});
        apply(&ess, external_secret("limits", &ns, limits)).await;
        let cm = eventually("the templated ConfigMap is written", WAIT, || async {
            config_maps.get_opt("templated").await.ok()?.filter(|cm| cm.data.is_some())
        })
        .await;
        let data = cm.data.unwrap();
        assert_eq!(data.get("database.yaml").map(String::as_str), Some("password: s3cret\n"));
        assert_eq!(data.len(), 1, "only what the template writes: {data:?}");
        assert_eq!(cm.metadata.labels.unwrap().get("app").map(String::as_str), Some("shop"));
        let limit_ranges: Api<LimitRange> = Api::namespaced(client.clone(), &ns);
        let lr = eventually("the LimitRange is written", WAIT, || async { limit_ranges.get_opt("limits").await.ok()? })
            .await;
        let limit = &lr.spec.unwrap().limits[0];
        assert_eq!(limit.type_, "Container");
        assert_eq!(limit.default.as_ref().unwrap()["memory"].0, "256Mi");

        // A kind that is not listed: refused by the operator's rule, nothing written.
        let sa = json!({"name": "robot", "manifest": {"apiVersion": "v1", "kind": "ServiceAccount"}});
        apply(&ess, external_secret("unlisted", &ns, sa)).await;
        let (_, message) = ready(&ess, "unlisted", "False").await;
        assert!(message.contains("serviceaccounts is not listed in --generic-target-resources"), "{message}");
        assert!(message.contains("configmaps, limitranges"), "{message}");
        let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &ns);
        assert!(accounts.get_opt("robot").await.unwrap().is_none());
    })
    .await;
}
