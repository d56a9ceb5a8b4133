//! An External Secrets install as upstream's controller leaves it, and the checks that Keyward
//! took it over in place. Under upstream's CRDs (release 2.9.0's bundle,
//! `e2e/fixtures/upstream-crds-2.9.0.yaml.gz`) the install holds a Vault ClusterSecretStore and a
//! Parameter Store SecretStore with their statuses, ExternalSecrets with their statuses and
//! target Secrets (upstream's labels, owner references and data-hash annotation), a PushSecret
//! with the value it pushed, and a ClusterExternalSecret with the ExternalSecret it created.
//!
//! The reconciler's switch test runs Keyward over it as local processes; the installed tier with
//! `helm install` on the one-node cluster. Both then check the same things:
//!
//! - no target Secret is deleted, emptied or rewritten while its data is unchanged;
//! - every ExternalSecret becomes Ready through its unchanged store;
//! - a value rotated in Vault and in Parameter Store reaches its Secret;
//! - the PushSecret keeps owning what it pushed (it overwrites it when the source changes);
//! - the ClusterExternalSecret keeps its ExternalSecret (same object, not re-created).

use std::collections::BTreeMap;
use std::future::Future;
use std::io::Write;
use std::process::Stdio;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use crate::ControlPlane;
use crate::stores::{Moto, VaultDev};

/// The hash upstream's controller writes on a target Secret
/// (`reconcile.external-secrets.io/data-hash`); the caller passes the reconciler's own.
pub type DataHash = fn(&BTreeMap<String, Vec<u8>>) -> String;

/// The Parameter Store's region.
const REGION: &str = "eu-central-1";

/// Upstream's API CRDs (`external-secrets.io`, the six kinds), release 2.9.0's bundle.
///
/// # Panics
/// When the fixture cannot be read.
pub fn upstream_crds() -> Vec<u8> {
    gunzip_fixture("upstream-crds-2.9.0.yaml.gz")
}

/// Upstream's generator CRDs (`generators.external-secrets.io`), from the same bundle: the rest
/// of what upstream's chart installs with `installCRDs: true`.
///
/// # Panics
/// When the fixture cannot be read.
pub fn upstream_generator_crds() -> Vec<u8> {
    gunzip_fixture("upstream-generator-crds-2.9.0.yaml.gz")
}

fn gunzip_fixture(name: &str) -> Vec<u8> {
    let path = crate::repo_root().join("e2e/fixtures").join(name);
    let out = std::process::Command::new("gzip").arg("-dc").arg(&path).output().expect("run gzip");
    assert!(out.status.success(), "gzip -dc {}", path.display());
    out.stdout
}

/// `kubectl apply --server-side --force-conflicts` of CRDs (too large for client-side apply's
/// annotation), waiting until each is Established.
///
/// # Panics
/// When the API server refuses them or one does not become Established.
pub fn apply_crds(cluster: &ControlPlane, manifest: &[u8]) {
    let mut child = cluster
        .kubectl()
        .args(["apply", "--server-side", "--force-conflicts", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run kubectl");
    child.stdin.take().expect("stdin").write_all(manifest).expect("write CRDs");
    let out = child.wait_with_output().expect("kubectl finishes");
    assert!(out.status.success(), "applying CRDs: {}", String::from_utf8_lossy(&out.stderr));
    let names = String::from_utf8_lossy(&out.stdout).to_string();
    for crd in names.split_whitespace().filter(|w| w.starts_with("customresourcedefinition")) {
        let out = cluster
            .kubectl()
            .args(["wait", "--for", "condition=Established", "--timeout", "60s", crd])
            .output()
            .expect("run kubectl");
        assert!(out.status.success(), "{crd} established: {}", String::from_utf8_lossy(&out.stderr));
    }
}

/// What upstream's controller left in namespace `ns` (and the two cluster-scoped objects named
/// after it).
pub struct UpstreamInstall {
    client: Client,
    ns: String,
    /// The targets as upstream wrote them, to compare resource versions with.
    targets: Vec<Secret>,
    ces_made_uid: Option<String>,
}

/// The API resource of an `external-secrets.io` kind at `version`.
pub fn resource(kind: &str, version: &str) -> ApiResource {
    ApiResource {
        group: "external-secrets.io".into(),
        version: version.into(),
        api_version: format!("external-secrets.io/{version}"),
        kind: kind.into(),
        plural: format!("{}s", kind.to_lowercase()),
    }
}

/// Creates `body` and sets its status, as upstream's controller leaves both.
///
/// # Panics
/// When the API server refuses either.
pub async fn create_with_status(api: &Api<DynamicObject>, body: Value, status: Value) -> DynamicObject {
    let name = body["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let object: DynamicObject = serde_json::from_value(body).expect("object JSON");
    let created = api.create(&PostParams::default(), &object).await.unwrap_or_else(|e| panic!("create {name}: {e}"));
    api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&json!({"status": status})))
        .await
        .unwrap_or_else(|e| panic!("status of {name}: {e}"));
    created
}

fn synced_status(target: &str) -> Value {
    json!({"conditions": [{"type": "Ready", "status": "True", "reason": "SecretSynced",
                           "message": "secret synced", "lastTransitionTime": "2026-12-01T10:00:00Z"}],
           "refreshTime": "2026-12-01T10:00:00Z", "syncedResourceVersion": "1-0f3c2b",
           "binding": {"name": target}})
}

fn external_secret(name: &str, ns: &str, labels: &Value, store: (&str, &str), key: &str) -> Value {
    json!({"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
           "metadata": {"name": name, "namespace": ns, "labels": labels},
           "spec": {"refreshInterval": "15s", "secretStoreRef": {"kind": store.0, "name": store.1},
                    "target": {"name": name, "creationPolicy": "Owner"},
                    "data": [{"secretKey": "password", "remoteRef": {"key": key, "property": "password"}}]}})
}

/// A target Secret as upstream's controller writes it for ExternalSecret `es` (Owner policy).
fn upstream_target(name: &str, es: &DynamicObject, password: &str, hash: DataHash) -> Secret {
    let data = BTreeMap::from([("password".to_string(), password.as_bytes().to_vec())]);
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {
            "name": name,
            "labels": {"reconcile.external-secrets.io/managed": "true",
                       "reconcile.external-secrets.io/created-by": "4a5c0f0e6f3b6d2c"},
            "annotations": {"reconcile.external-secrets.io/data-hash": hash(&data)},
            "ownerReferences": [{"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
                                 "name": es.name_any(), "uid": es.uid().unwrap_or_default(),
                                 "controller": true, "blockOwnerDeletion": true}]},
        "stringData": {"password": password},
    }))
    .expect("Secret JSON")
}

fn ssm_put(moto: &Moto, value: &str) {
    let code = format!(
        "ssm.put_parameter(Name='/app/db', Value='{{\"password\": \"{value}\"}}', Type='SecureString', Overwrite=True)"
    );
    moto.boto3(REGION, &code).unwrap_or_else(|e| panic!("boto3: {e}\n{code}"));
}

async fn put_secret(secrets: &Api<Secret>, name: &str, data: Value) {
    let body: Secret = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Secret",
                                                      "metadata": {"name": name}, "stringData": data}))
    .expect("Secret JSON");
    secrets
        .patch(name, &PatchParams::apply("keyward-e2e").force(), &Patch::Apply(&body))
        .await
        .unwrap_or_else(|e| panic!("apply Secret {name}: {e}"));
}

/// Polls `check` every half second until it returns `Some`, or panics after `timeout`.
///
/// # Panics
/// When `check` has not returned `Some` within `timeout`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(start.elapsed() < timeout, "{what}: not within {timeout:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The Ready condition's status, reason and message.
pub fn ready(object: &DynamicObject) -> Option<(String, String, String)> {
    let conditions = object.data["status"]["conditions"].as_array()?;
    let ready = conditions.iter().find(|c| c["type"] == "Ready")?;
    let field = |k: &str| ready[k].as_str().unwrap_or_default().to_string();
    Some((field("status"), field("reason"), field("message")))
}

impl UpstreamInstall {
    /// Writes the stores' data and creates, under upstream's CRDs, what upstream's controller
    /// leaves in `ns` (every object labelled with `labels`). The Vault ClusterSecretStore is
    /// `<ns>-vault`, served at `vault.address()`, so Keyward's Vault provider must reach that.
    pub async fn leave(
        client: &Client,
        ns: &str,
        vault: &VaultDev,
        moto: &Moto,
        labels: Value,
        hash: DataHash,
    ) -> UpstreamInstall {
        // The stores' data, and what upstream's PushSecret wrote (with its managed-by mark).
        vault.cli(&["kv", "put", "secret/app", "password=vault-one"]);
        vault.cli(&["kv", "put", "secret/pushed", "token=first"]);
        vault.cli(&["kv", "metadata", "put", "-custom-metadata=managed-by=external-secrets", "secret/pushed"]);
        ssm_put(moto, "ssm-one");

        let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
        put_secret(&secrets, "vault-token", json!({"token": vault.root_token()})).await;
        put_secret(&secrets, "awssm-secret", json!({"access-key": "AKIDSWITCH", "secret-access-key": "switch"})).await;
        put_secret(&secrets, "source", json!({"token": "first"})).await;

        let store_status = json!({"conditions": [{"type": "Ready", "status": "True", "reason": "Valid",
                                                  "message": "store validated", "lastTransitionTime": "2026-12-01T10:00:00Z"}],
                                  "capabilities": "ReadWrite"});
        let css_name = format!("{ns}-vault");
        let css = Api::all_with(client.clone(), &resource("ClusterSecretStore", "v1"));
        create_with_status(
            &css,
            json!({"apiVersion": "external-secrets.io/v1", "kind": "ClusterSecretStore",
            "metadata": {"name": css_name, "labels": labels},
            "spec": {"provider": {"vault": {"server": vault.address(), "path": "secret", "version": "v2",
                "auth": {"tokenSecretRef": {"name": "vault-token", "key": "token", "namespace": ns}}}}}}),
            store_status.clone(),
        )
        .await;
        let ss = Api::namespaced_with(client.clone(), ns, &resource("SecretStore", "v1"));
        create_with_status(&ss, json!({"apiVersion": "external-secrets.io/v1", "kind": "SecretStore",
            "metadata": {"name": "parameterstore", "labels": labels},
            "spec": {"provider": {"aws": {"service": "ParameterStore", "region": REGION,
                "auth": {"secretRef": {"accessKeyIDSecretRef": {"name": "awssm-secret", "key": "access-key"},
                                       "secretAccessKeySecretRef": {"name": "awssm-secret", "key": "secret-access-key"}}}}}}}),
            store_status).await;

        let ess = Api::namespaced_with(client.clone(), ns, &resource("ExternalSecret", "v1"));
        let mut targets = Vec::new();
        for (name, store, key, value) in [
            ("from-vault", ("ClusterSecretStore", css_name.as_str()), "app", "vault-one"),
            ("from-ssm", ("SecretStore", "parameterstore"), "/app/db", "ssm-one"),
        ] {
            let es =
                create_with_status(&ess, external_secret(name, ns, &labels, store, key), synced_status(name)).await;
            targets.push(
                secrets.create(&PostParams::default(), &upstream_target(name, &es, value, hash)).await.expect("target"),
            );
        }

        // A ClusterExternalSecret and the ExternalSecret it made (controller owner, label).
        let ces_name = format!("{ns}-ces");
        let cess = Api::all_with(client.clone(), &resource("ClusterExternalSecret", "v1"));
        let mut es_spec =
            external_secret("ces-made", ns, &labels, ("ClusterSecretStore", &css_name), "app")["spec"].clone();
        es_spec["refreshInterval"] = json!("1h");
        let ces = create_with_status(
            &cess,
            json!({"apiVersion": "external-secrets.io/v1", "kind": "ClusterExternalSecret",
            "metadata": {"name": ces_name, "labels": labels},
            "spec": {"namespaces": [ns], "externalSecretName": "ces-made", "refreshTime": "1m",
                     "externalSecretMetadata": {"labels": labels}, "externalSecretSpec": es_spec}}),
            json!({"externalSecretName": "ces-made", "provisionedNamespaces": [ns],
                   "conditions": [{"type": "Ready", "status": "True"}]}),
        )
        .await;
        let mut made = external_secret("ces-made", ns, &labels, ("ClusterSecretStore", &css_name), "app");
        made["metadata"]["labels"]["externalsecrets.external-secrets.io/cluster-external-secret-name"] =
            json!(ces_name);
        made["metadata"]["ownerReferences"] = json!([{"apiVersion": "external-secrets.io/v1", "kind": "ClusterExternalSecret",
            "name": ces_name, "uid": ces.uid(), "controller": true, "blockOwnerDeletion": true}]);
        made["spec"]["refreshInterval"] = json!("1h");
        let made = create_with_status(&ess, made, synced_status("ces-made")).await;
        targets.push(
            secrets
                .create(&PostParams::default(), &upstream_target("ces-made", &made, "vault-one", hash))
                .await
                .expect("target"),
        );

        // The PushSecret and what it pushed.
        let pushes = Api::namespaced_with(client.clone(), ns, &resource("PushSecret", "v1alpha1"));
        let push_ref =
            json!({"match": {"secretKey": "token", "remoteRef": {"remoteKey": "pushed", "property": "token"}}});
        create_with_status(&pushes, json!({"apiVersion": "external-secrets.io/v1alpha1", "kind": "PushSecret",
            "metadata": {"name": "push", "labels": labels},
            "spec": {"refreshInterval": "15s", "deletionPolicy": "Delete",
                     "secretStoreRefs": [{"name": css_name, "kind": "ClusterSecretStore"}],
                     "selector": {"secret": {"name": "source"}}, "data": [push_ref]}}),
            json!({"conditions": [{"type": "Ready", "status": "True", "reason": "Synced", "message": "PushSecret synced successfully"}],
                   "refreshTime": "2026-12-01T10:00:00Z", "syncedResourceVersion": "1-aa",
                   "syncedPushSecrets": {format!("ClusterSecretStore/{css_name}"): {"pushed/token": push_ref}}})).await;

        UpstreamInstall { client: client.clone(), ns: ns.to_string(), targets, ces_made_uid: made.uid() }
    }

    /// Checks, once Keyward runs, everything the module promises, waiting up to `wait` for each
    /// step.
    pub async fn assert_taken_over(&self, vault: &VaultDev, moto: &Moto, wait: Duration) {
        let ns = self.ns.as_str();
        let ess: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), ns, &resource("ExternalSecret", "v1"));
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), ns);
        // Every ExternalSecret is synced by Keyward (its own message), through its store.
        for name in ["from-vault", "from-ssm", "ces-made"] {
            eventually(&format!("ExternalSecret {name} synced by Keyward"), wait, || async {
                let (status, reason, message) = ready(&ess.get(name).await.ok()?)?;
                (status == "True" && reason == "SecretSynced" && message == "Secret was synced").then_some(())
            })
            .await;
        }
        // Nothing was written: the Secrets are the objects upstream left, at the same version.
        for before in &self.targets {
            let now = secrets.get(&before.name_any()).await.expect("target Secret");
            assert_eq!(now.resource_version(), before.resource_version(), "{} rewritten: {now:?}", before.name_any());
            assert_eq!(now.uid(), before.uid());
        }
        let made = ess.get("ces-made").await.expect("the ClusterExternalSecret's ExternalSecret");
        assert_eq!(made.uid(), self.ces_made_uid, "the ClusterExternalSecret's ExternalSecret stays");
        let pushes: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), ns, &resource("PushSecret", "v1alpha1"));
        eventually("the PushSecret is Ready under Keyward", wait, || async {
            let (status, _, message) = ready(&pushes.get("push").await.ok()?)?;
            (status == "True" && message != "PushSecret synced successfully").then_some(())
        })
        .await;

        // Rotation reaches the Secrets; the PushSecret overwrites what it owns.
        vault.cli(&["kv", "put", "secret/app", "password=vault-two"]);
        ssm_put(moto, "ssm-two");
        for (name, want) in [("from-vault", "vault-two"), ("from-ssm", "ssm-two")] {
            eventually(&format!("{name} holds {want}"), wait, || async {
                let secret = secrets.get(name).await.ok()?;
                (secret.data?.get("password")?.0 == want.as_bytes()).then_some(())
            })
            .await;
        }
        put_secret(&secrets, "source", json!({"token": "second"})).await;
        eventually("the pushed value follows the source", wait, || async {
            let v = vault.json(&["kv", "get"], &["secret/pushed"]);
            (v["data"]["data"]["token"] == "second").then_some(())
        })
        .await;
    }
}
