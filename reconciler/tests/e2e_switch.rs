//! End to end: switching a running External Secrets install to Keyward in place. The API server
//! first serves upstream's CRDs (release 2.9.0's bundle, `e2e/fixtures/upstream-crds-2.9.0.yaml.gz`)
//! and holds what upstream's controller leaves behind: a Vault ClusterSecretStore and a Parameter
//! Store SecretStore with their statuses, ExternalSecrets with their statuses and target Secrets
//! (upstream's labels, owner references and data-hash annotation), a PushSecret with the value it
//! pushed, and a ClusterExternalSecret with the ExternalSecret it created. Then Keyward's CRDs
//! are applied over them and Keyward's reconciler and providers start:
//!
//! - no target Secret is deleted, emptied or rewritten while its data is unchanged;
//! - every ExternalSecret becomes Ready through its unchanged store;
//! - a value rotated in Vault and in Parameter Store reaches its Secret;
//! - the PushSecret keeps owning what it pushed (it overwrites it when the source changes);
//! - the ClusterExternalSecret keeps its ExternalSecret (same object, not re-created).

#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeMap;
use std::io::Write;
use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use keyward_crds::{ClusterExternalSecret, ExternalSecret, PushSecret};
use keyward_e2e::stores::{Moto, VaultDev};
use keyward_e2e::{control_plane, repo_root, with_temp_namespace};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};
use support::*;

const WAIT: Duration = Duration::from_secs(90);

/// `kubectl apply --server-side --force-conflicts` of `manifest` (CRDs are too large for
/// client-side apply's annotation).
async fn apply_crds(manifest: &[u8]) {
    let mut child = control_plane()
        .await
        .kubectl()
        .args(["apply", "--server-side", "--force-conflicts", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(manifest).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "applying CRDs: {}", String::from_utf8_lossy(&out.stderr));
    let names = String::from_utf8_lossy(&out.stdout).to_string();
    for crd in names.split_whitespace().filter(|w| w.starts_with("customresourcedefinition")) {
        let out = control_plane()
            .await
            .kubectl()
            .args(["wait", "--for", "condition=Established", "--timeout", "60s", crd])
            .output()
            .unwrap();
        assert!(out.status.success(), "{crd} established: {}", String::from_utf8_lossy(&out.stderr));
    }
}

fn upstream_crds() -> Vec<u8> {
    let path = repo_root().join("e2e/fixtures/upstream-crds-2.9.0.yaml.gz");
    let out = std::process::Command::new("gzip").arg("-dc").arg(&path).output().unwrap();
    assert!(out.status.success(), "gzip -dc {}", path.display());
    out.stdout
}

fn keyward_crds() -> Vec<u8> {
    let dir = repo_root().join("crds/yaml");
    let mut all = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    for f in files.iter().filter(|f| f.extension().is_some_and(|e| e == "yaml")) {
        all.extend_from_slice(b"\n---\n");
        all.extend(std::fs::read(f).unwrap());
    }
    all
}

/// The hash upstream's controller writes on a target Secret (checked against Go's own output
/// in the reconciler's unit tests).
fn upstream_hash(data: &BTreeMap<&str, &str>) -> String {
    let data = data.iter().map(|(k, v)| (k.to_string(), v.as_bytes().to_vec())).collect();
    keyward_reconciler::externalsecret::target::upstream_data_hash(&data)
}

/// Creates `body` and sets its status, as upstream's controller leaves both.
async fn create_with_status<K>(api: &Api<K>, body: Value, status: Value) -> K
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let name = body["metadata"]["name"].as_str().unwrap().to_string();
    let created: K = api.create(&PostParams::default(), &serde_json::from_value(body).unwrap()).await.unwrap();
    api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&json!({"status": status}))).await.unwrap();
    created
}

/// A target Secret as upstream's controller writes it for ExternalSecret `es` (Owner policy).
fn upstream_target(name: &str, es: &ExternalSecret, data: &BTreeMap<&str, &str>) -> Secret {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {
            "name": name,
            "labels": {"reconcile.external-secrets.io/managed": "true",
                       "reconcile.external-secrets.io/created-by": "4a5c0f0e6f3b6d2c"},
            "annotations": {"reconcile.external-secrets.io/data-hash": upstream_hash(data)},
            "ownerReferences": [{"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
                                 "name": es.name_any(), "uid": es.uid().unwrap(),
                                 "controller": true, "blockOwnerDeletion": true}]},
        "stringData": data,
    }))
    .unwrap()
}

fn synced_status(target: &str) -> Value {
    json!({"conditions": [{"type": "Ready", "status": "True", "reason": "SecretSynced",
                           "message": "secret synced", "lastTransitionTime": "2026-12-01T10:00:00Z"}],
           "refreshTime": "2026-12-01T10:00:00Z", "syncedResourceVersion": "1-0f3c2b",
           "binding": {"name": target}})
}

fn external_secret(name: &str, ns: &str, store: (&str, &str), key: &str) -> Value {
    json!({"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
           "metadata": {"name": name, "namespace": ns, "labels": {CLASS_LABEL: ns}},
           "spec": {"refreshInterval": "15s", "secretStoreRef": {"kind": store.0, "name": store.1},
                    "target": {"name": name, "creationPolicy": "Owner"},
                    "data": [{"secretKey": "password", "remoteRef": {"key": key, "property": "password"}}]}})
}

fn boto3_ssm(moto: &Moto, code: &str) -> String {
    moto.boto3("eu-central-1", code).unwrap_or_else(|e| panic!("boto3: {e}\n{code}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn an_upstream_install_switches_in_place() {
    let vault = VaultDev::start();
    let moto = Moto::start();
    control_plane().await;
    apply_crds(&upstream_crds()).await;
    with_temp_namespace(&[], |client, ns| {
        let (vault, moto) = (&vault, &moto);
        async move {
            // The stores' data, and what upstream's PushSecret wrote (with its managed-by mark).
            vault.cli(&["kv", "put", "secret/app", "password=vault-one"]);
            vault.cli(&["kv", "put", "secret/pushed", "token=first"]);
            vault.cli(&["kv", "metadata", "put", "-custom-metadata=managed-by=external-secrets", "secret/pushed"]);
            let put = |v: &str| format!("ssm.put_parameter(Name='/app/db', Value='{{\"password\": \"{v}\"}}', Type='SecureString', Overwrite=True)");
            boto3_ssm(moto, &put("ssm-one"));

            let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
            apply(&secrets, json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "vault-token"},
                                   "stringData": {"token": vault.root_token()}}))
            .await;
            apply(&secrets, json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "awssm-secret"},
                                   "stringData": {"access-key": "AKIDSWITCH", "secret-access-key": "switch"}}))
            .await;
            apply(&secrets, json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "source"},
                                   "stringData": {"token": "first"}}))
            .await;

            // What upstream's controller left, under upstream's CRDs.
            let store_status = json!({"conditions": [{"type": "Ready", "status": "True", "reason": "Valid",
                                                      "message": "store validated", "lastTransitionTime": "2026-12-01T10:00:00Z"}],
                                      "capabilities": "ReadWrite"});
            let css_name = format!("{ns}-vault");
            let css: Api<keyward_crds::ClusterSecretStore> = Api::all(client.clone());
            create_with_status(&css, json!({"apiVersion": "external-secrets.io/v1", "kind": "ClusterSecretStore",
                "metadata": {"name": css_name, "labels": {CLASS_LABEL: ns}},
                "spec": {"provider": {"vault": {"server": vault.address(), "path": "secret", "version": "v2",
                    "auth": {"tokenSecretRef": {"name": "vault-token", "key": "token", "namespace": ns}}}}}}),
                store_status.clone()).await;
            let ss: Api<keyward_crds::SecretStore> = Api::namespaced(client.clone(), &ns);
            create_with_status(&ss, json!({"apiVersion": "external-secrets.io/v1", "kind": "SecretStore",
                "metadata": {"name": "parameterstore", "labels": {CLASS_LABEL: ns}},
                "spec": {"provider": {"aws": {"service": "ParameterStore", "region": "eu-central-1",
                    "auth": {"secretRef": {"accessKeyIDSecretRef": {"name": "awssm-secret", "key": "access-key"},
                                           "secretAccessKeySecretRef": {"name": "awssm-secret", "key": "secret-access-key"}}}}}}}),
                store_status).await;

            let ess: Api<ExternalSecret> = Api::namespaced(client.clone(), &ns);
            let mut targets = Vec::new();
            for (name, store, key, value) in [
                ("from-vault", ("ClusterSecretStore", css_name.as_str()), "app", "vault-one"),
                ("from-ssm", ("SecretStore", "parameterstore"), "/app/db", "ssm-one"),
            ] {
                let es = create_with_status(&ess, external_secret(name, &ns, store, key), synced_status(name)).await;
                let data = BTreeMap::from([("password", value)]);
                targets.push(secrets.create(&PostParams::default(), &upstream_target(name, &es, &data)).await.unwrap());
            }

            // A ClusterExternalSecret and the ExternalSecret it made (controller owner, label).
            let ces_name = format!("{ns}-ces");
            let cess: Api<ClusterExternalSecret> = Api::all(client.clone());
            let mut es_spec = external_secret("ces-made", &ns, ("ClusterSecretStore", &css_name), "app")["spec"].clone();
            es_spec["refreshInterval"] = json!("1h");
            let ces = create_with_status(&cess, json!({"apiVersion": "external-secrets.io/v1", "kind": "ClusterExternalSecret",
                "metadata": {"name": ces_name, "labels": {CLASS_LABEL: ns}},
                "spec": {"namespaces": [ns], "externalSecretName": "ces-made", "refreshTime": "1m",
                         "externalSecretMetadata": {"labels": {CLASS_LABEL: ns}}, "externalSecretSpec": es_spec}}),
                json!({"externalSecretName": "ces-made", "provisionedNamespaces": [ns],
                       "conditions": [{"type": "Ready", "status": "True"}]})).await;
            let mut made = external_secret("ces-made", &ns, ("ClusterSecretStore", &css_name), "app");
            made["metadata"]["labels"]["externalsecrets.external-secrets.io/cluster-external-secret-name"] = json!(ces_name);
            made["metadata"]["ownerReferences"] = json!([{"apiVersion": "external-secrets.io/v1", "kind": "ClusterExternalSecret",
                "name": ces_name, "uid": ces.uid().unwrap(), "controller": true, "blockOwnerDeletion": true}]);
            made["spec"]["refreshInterval"] = json!("1h");
            let made = create_with_status(&ess, made, synced_status("ces-made")).await;
            targets.push(
                secrets.create(&PostParams::default(), &upstream_target("ces-made", &made, &BTreeMap::from([("password", "vault-one")])))
                    .await
                    .unwrap(),
            );

            // The PushSecret and what it pushed.
            let pushes: Api<PushSecret> = Api::namespaced(client.clone(), &ns);
            let push_ref = json!({"match": {"secretKey": "token", "remoteRef": {"remoteKey": "pushed", "property": "token"}}});
            create_with_status(&pushes, json!({"apiVersion": "external-secrets.io/v1alpha1", "kind": "PushSecret",
                "metadata": {"name": "push", "labels": {CLASS_LABEL: ns}},
                "spec": {"refreshInterval": "15s", "deletionPolicy": "Delete",
                         "secretStoreRefs": [{"name": css_name, "kind": "ClusterSecretStore"}],
                         "selector": {"secret": {"name": "source"}}, "data": [push_ref]}}),
                json!({"conditions": [{"type": "Ready", "status": "True", "reason": "Synced", "message": "PushSecret synced successfully"}],
                       "refreshTime": "2026-12-01T10:00:00Z", "syncedResourceVersion": "1-aa",
                       "syncedPushSecrets": {format!("ClusterSecretStore/{css_name}"): {"pushed/token": push_ref}}})).await;

            // The switch: Keyward's CRDs over the same objects, then Keyward itself.
            apply_crds(&keyward_crds()).await;
            let pki = Pki::new();
            pki.install(&client, &ns).await;
            let vault_provider = ProviderProcess::start("keyward-provider-vault", pki.provider_dir(), None).await;
            let aws_env = moto.provider_env();
            let aws_env: Vec<(&str, &str)> = aws_env.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let aws_provider = ProviderProcess::start_with_env("keyward-provider-aws", pki.provider_dir(), &aws_env).await;
            let stores = [("vault", &vault_provider), ("aws", &aws_provider)];
            let reconciler = Reconciler::start_with_stores(&ns, &stores, &[]).await;

            // Every ExternalSecret is synced by Keyward (its own message), through its store.
            for name in ["from-vault", "from-ssm", "ces-made"] {
                eventually(&format!("ExternalSecret {name} synced by Keyward"), WAIT, || async {
                    let es = ess.get(name).await.ok()?;
                    let (status, reason, message) = ready_of(&es.status.as_ref()?.conditions)?;
                    (status == "True" && reason == "SecretSynced" && message == "Secret was synced").then_some(())
                })
                .await;
            }
            // Nothing was written: the Secrets are the objects upstream left, at the same version.
            for before in &targets {
                let now = secrets.get(&before.name_any()).await.unwrap();
                assert_eq!(now.resource_version(), before.resource_version(), "{} rewritten: {now:?}", before.name_any());
                assert_eq!(now.uid(), before.uid());
            }
            assert_eq!(ess.get("ces-made").await.unwrap().uid(), made.uid(), "the ClusterExternalSecret's ExternalSecret stays");
            eventually("the PushSecret is Ready under Keyward", WAIT, || async {
                let ps = pushes.get("push").await.ok()?;
                let (status, _, message) = ready_of(&ps.status.as_ref()?.conditions)?;
                (status == "True" && message != "PushSecret synced successfully").then_some(())
            })
            .await;

            // Rotation reaches the Secrets; the PushSecret overwrites what it owns.
            vault.cli(&["kv", "put", "secret/app", "password=vault-two"]);
            boto3_ssm(moto, &put("ssm-two"));
            wait_for_value(&secrets, "from-vault", "password", "vault-two", WAIT).await;
            wait_for_value(&secrets, "from-ssm", "password", "ssm-two", WAIT).await;
            apply(&secrets, json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "source"},
                                   "stringData": {"token": "second"}}))
            .await;
            eventually("the pushed value follows the source", WAIT, || async {
                let v = vault.json(&["kv", "get"], &["secret/pushed"]);
                (v["data"]["data"]["token"] == "second").then_some(())
            })
            .await;
            drop(reconciler);
        }
    })
    .await;
}
