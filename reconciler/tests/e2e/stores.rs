//! End to end with the store providers against real servers: ExternalSecrets synced from
//! Vault (`vault server -dev`) and AWS Secrets Manager (moto's server) through a namespaced
//! Provider and a ClusterProvider, rotation picked up on refresh, a PushSecret round trip, a
//! generated Password pushed and read back, a missing remote secret keeping the target Secret
//! (and reporting Ready=False), and a tenant config that names another namespace's credentials
//! refused through a Provider and through a ManifestNamespace ClusterProvider.

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use keyward_crds::generators::Password;
use keyward_crds::{ClusterProvider, ExternalSecret, Provider, PushSecret};
use keyward_e2e::stores::{Moto, VaultDev};
use keyward_e2e::with_temp_namespace;
use kube::Api;
use serde_json::json;

use crate::support::*;

const WAIT: Duration = Duration::from_secs(90);

/// One store under test: how to reach it and how the test changes its contents.
trait Store {
    /// Provider binary.
    fn binary(&self) -> &'static str;
    /// Environment of the provider process.
    fn env(&self) -> Vec<(&'static str, String)>;
    /// Config kind.
    fn kind(&self) -> &'static str;
    /// Config spec using credentials from Secret `creds` (in `creds_ns`, when set).
    fn spec(&self, creds_ns: Option<&str>) -> serde_json::Value;
    /// Credential Secret data.
    fn creds(&self) -> Vec<(&'static str, String)>;
    /// Writes `{"user": user}` at `key`.
    fn put(&self, key: &str, user: &str);
    /// Deletes `key`.
    fn delete(&self, key: &str);
    /// The `pw` property at `key`, if any.
    fn read_pw(&self, key: &str) -> Option<String>;
}

struct VaultStore(VaultDev);

impl Store for VaultStore {
    fn binary(&self) -> &'static str {
        "keyward-provider-vault"
    }
    fn env(&self) -> Vec<(&'static str, String)> {
        vec![]
    }
    fn kind(&self) -> &'static str {
        "Vault"
    }
    fn spec(&self, creds_ns: Option<&str>) -> serde_json::Value {
        let mut sel = json!({"name": "creds", "key": "token"});
        if let Some(ns) = creds_ns {
            sel["namespace"] = json!(ns);
        }
        json!({"server": self.0.address(), "path": "secret", "auth": {"tokenSecretRef": sel}})
    }
    fn creds(&self) -> Vec<(&'static str, String)> {
        vec![("token", self.0.root_token().to_string())]
    }
    fn put(&self, key: &str, user: &str) {
        self.0.cli(&["kv", "put", &format!("secret/{key}"), &format!("user={user}")]);
    }
    fn delete(&self, key: &str) {
        self.0.cli(&["kv", "metadata", "delete", &format!("secret/{key}")]);
    }
    fn read_pw(&self, key: &str) -> Option<String> {
        let out = self.0.try_cli(&["kv", "get", "-format=json", &format!("secret/{key}")]).ok()?;
        let v: serde_json::Value = serde_json::from_str(&out).ok()?;
        v["data"]["data"]["pw"].as_str().map(str::to_string)
    }
}

struct AwsStore(Moto);

impl AwsStore {
    fn aws(&self, args: &[&str]) -> Result<String, String> {
        self.0.boto3("us-east-1", &args.join("\n"))
    }
}

impl Store for AwsStore {
    fn binary(&self) -> &'static str {
        "keyward-provider-aws"
    }
    fn env(&self) -> Vec<(&'static str, String)> {
        self.0.provider_env()
    }
    fn kind(&self) -> &'static str {
        "SecretsManager"
    }
    fn spec(&self, creds_ns: Option<&str>) -> serde_json::Value {
        let sel = |key: &str| match creds_ns {
            Some(ns) => json!({"name": "creds", "key": key, "namespace": ns}),
            None => json!({"name": "creds", "key": key}),
        };
        json!({"region": "us-east-1", "auth": {"secretRef": {
            "accessKeyIDSecretRef": sel("id"), "secretAccessKeySecretRef": sel("secret")}},
            "secretsManager": {"forceDeleteWithoutRecovery": true}})
    }
    fn creds(&self) -> Vec<(&'static str, String)> {
        vec![("id", "AKIDTEST".into()), ("secret", "s3cr3t".into())]
    }
    fn put(&self, key: &str, user: &str) {
        let value = json!({"user": user}).to_string();
        let create = format!("sm.create_secret(Name='{key}', SecretString='{value}')");
        if self.aws(&[&create]).is_err() {
            self.aws(&[&format!("sm.put_secret_value(SecretId='{key}', SecretString='{value}')")]).unwrap();
        }
    }
    fn delete(&self, key: &str) {
        self.aws(&[&format!("sm.delete_secret(SecretId='{key}', ForceDeleteWithoutRecovery=True)")]).unwrap();
    }
    fn read_pw(&self, key: &str) -> Option<String> {
        let out = self
            .aws(&[&format!(
                "v=sm.get_secret_value(SecretId='{key}')\nprint(v.get('SecretString') or v['SecretBinary'].decode())"
            )])
            .ok()?;
        let v: serde_json::Value = serde_json::from_str(out.trim()).ok()?;
        v["pw"].as_str().map(str::to_string)
    }
}

fn secret_manifest(name: &str, data: &[(&str, String)]) -> serde_json::Value {
    let data: serde_json::Map<String, serde_json::Value> =
        data.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "stringData": data})
}

fn store_provider(kind: &str, name: &str, ns: &str, address: &str) -> serde_json::Value {
    json!({"apiVersion": "external-secrets.io/v1", "kind": "Provider",
           "metadata": {"name": name, "labels": {CLASS_LABEL: ns}},
           "spec": {"config": {"address": address, "providerRef": {
               "apiVersion": "provider.external-secrets.io/v2alpha1", "kind": kind, "name": name}}}})
}

/// A ClusterProvider for the config `config`: in `config_ns` with `ProviderNamespace` scope,
/// else in each manifest's namespace (`ManifestNamespace`).
fn cluster_provider(
    name: &str,
    class: &str,
    address: &str,
    kind: &str,
    config: &str,
    config_ns: Option<&str>,
) -> serde_json::Value {
    let mut provider_ref = json!({"apiVersion": "provider.external-secrets.io/v2alpha1", "kind": kind, "name": config});
    let scope = match config_ns {
        Some(ns) => {
            provider_ref["namespace"] = json!(ns);
            "ProviderNamespace"
        }
        None => "ManifestNamespace",
    };
    json!({"apiVersion": "external-secrets.io/v1", "kind": "ClusterProvider",
           "metadata": {"name": name, "labels": {CLASS_LABEL: class}},
           "spec": {"authenticationScope": scope,
                    "config": {"address": address, "providerRef": provider_ref}}})
}

fn external_secret(name: &str, ns: &str, store: (&str, &str), key: &str) -> serde_json::Value {
    json!({"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
           "metadata": {"name": name, "labels": {CLASS_LABEL: ns}},
           "spec": {"refreshInterval": "1s", "secretStoreRef": {"name": store.0, "kind": store.1},
                    "data": [{"secretKey": "user", "remoteRef": {"key": key, "property": "user"}}]}})
}

async fn run(store: &dyn Store) {
    with_temp_namespace(&[], |_client, operator| async move {
        with_temp_namespace(&[], |client, ns| async move {
            let pki = Pki::new();
            pki.install(&client, &ns).await;
            pki.install(&client, &operator).await;
            let env: Vec<(&str, String)> = store.env();
            let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let provider = ProviderProcess::start_with_env(store.binary(), pki.provider_dir(), &env).await;
            let kind = store.kind();
            let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
            let op_secrets: Api<Secret> = Api::namespaced(client.clone(), &operator);
            apply(&secrets, secret_manifest("creds", &store.creds())).await;
            apply(&op_secrets, secret_manifest("creds", &store.creds())).await;
            let configs = kube::api::ApiResource {
                group: "provider.external-secrets.io".into(),
                version: "v2alpha1".into(),
                api_version: "provider.external-secrets.io/v2alpha1".into(),
                kind: kind.into(),
                plural: format!("{}s", kind.to_lowercase()),
            };
            let config = |name: &str, spec: serde_json::Value| {
                json!({"apiVersion": "provider.external-secrets.io/v2alpha1", "kind": kind,
                       "metadata": {"name": name}, "spec": spec})
            };
            let tenant_configs: Api<kube::api::DynamicObject> = Api::namespaced_with(client.clone(), &ns, &configs);
            let op_configs: Api<kube::api::DynamicObject> = Api::namespaced_with(client.clone(), &operator, &configs);
            apply(&tenant_configs, config("tenant", store.spec(None))).await;
            // A tenant config naming the operator namespace's credentials.
            apply(&tenant_configs, config("stolen", store.spec(Some(&operator)))).await;
            apply(&op_configs, config("shared", store.spec(None))).await;
            let providers: Api<Provider> = Api::namespaced(client.clone(), &ns);
            for name in ["tenant", "stolen"] {
                apply(&providers, store_provider(kind, name, &ns, &provider.address())).await;
            }
            let cp_name = format!("{ns}-shared");
            let cps: Api<ClusterProvider> = Api::all(client.clone());
            let address = provider.address();
            apply(&cps, cluster_provider(&cp_name, &ns, &address, kind, "shared", Some(&operator))).await;
            // A ManifestNamespace ClusterProvider reaches the config of the manifest's namespace:
            // the tenant's, so its reference to the operator's credentials is refused too.
            let cp_manifest = format!("{ns}-per-namespace");
            apply(&cps, cluster_provider(&cp_manifest, &ns, &address, kind, "stolen", None)).await;

            let db = format!("{ns}/db");
            store.put(&db, "app");
            let _reconciler = Reconciler::start(&ns, &[]).await;
            let ess: Api<ExternalSecret> = Api::namespaced(client.clone(), &ns);
            apply(&ess, external_secret("via-provider", &ns, ("tenant", "Provider"), &db)).await;
            apply(&ess, external_secret("via-cluster", &ns, (&cp_name, "ClusterProvider"), &db)).await;
            apply(&ess, external_secret("stolen", &ns, ("stolen", "Provider"), &db)).await;
            apply(&ess, external_secret("stolen-cluster", &ns, (&cp_manifest, "ClusterProvider"), &db)).await;
            let synced = |name: &'static str, want: &'static str| wait_for_value(&secrets, name, "user", want, WAIT);
            synced("via-provider", "app").await;
            synced("via-cluster", "app").await;
            // The provider answered Capabilities: both stores read and write. The status check
            // runs next to the first syncs, so its write may come a moment after them.
            let caps = eventually("Provider tenant reports its capabilities", WAIT, || async {
                providers.get("tenant").await.ok()?.status?.capabilities
            })
            .await;
            assert_eq!(caps, keyward_crds::Capabilities::ReadWrite, "Provider tenant");
            let caps = eventually("the ClusterProvider reports its capabilities", WAIT, || async {
                cps.get(&cp_name).await.ok()?.status?.capabilities
            })
            .await;
            assert_eq!(caps, keyward_crds::Capabilities::ReadWrite, "the ClusterProvider");

            // Rotation in the store reaches both on refresh.
            store.put(&db, "app2");
            synced("via-provider", "app2").await;
            synced("via-cluster", "app2").await;

            // The tenant config that names the operator's credentials never syncs, whichever kind
            // of store reaches it.
            for name in ["stolen", "stolen-cluster"] {
                let (_, _, message) = eventually(&format!("{name} ExternalSecret refused"), WAIT, || async {
                    let es = ess.get(name).await.ok()?;
                    let ready = ready_of(&es.status?.conditions)?;
                    (ready.0 == "False").then_some(ready)
                })
                .await;
                assert!(message.contains("namespace") && message.contains(&operator), "{name}: {message}");
                assert!(secrets.get_opt(name).await.unwrap().is_none(), "{name}");
            }

            // PushSecret round trip: a Secret of the namespace pushed to the store, read back.
            apply(&secrets, secret_manifest("source", &[("password", "pushed-1".into())])).await;
            let pushed = format!("{ns}/pushed");
            let pss: Api<PushSecret> = Api::namespaced(client.clone(), &ns);
            apply(
                &pss,
                json!({"apiVersion": "external-secrets.io/v1alpha1", "kind": "PushSecret",
                       "metadata": {"name": "push", "labels": {CLASS_LABEL: ns}},
                       "spec": {"refreshInterval": "1s", "deletionPolicy": "Delete",
                                "secretStoreRefs": [{"name": "tenant", "kind": "Provider"}],
                                "selector": {"secret": {"name": "source"}},
                                "data": [{"match": {"secretKey": "password",
                                                    "remoteRef": {"remoteKey": pushed, "property": "pw"}}}]}}),
            )
            .await;
            eventually("pushed value in the store", WAIT, || async {
                (store.read_pw(&pushed).as_deref() == Some("pushed-1")).then_some(())
            })
            .await;
            // Round trip: an ExternalSecret reads the pushed value back through the same store.
            let mut back = external_secret("pushed-back", &ns, ("tenant", "Provider"), &pushed);
            back["spec"]["data"][0]["remoteRef"]["property"] = json!("pw");
            apply(&ess, back).await;
            synced("pushed-back", "pushed-1").await;
            apply(&secrets, secret_manifest("source", &[("password", "pushed-2".into())])).await;
            eventually("updated push in the store", WAIT, || async {
                (store.read_pw(&pushed).as_deref() == Some("pushed-2")).then_some(())
            })
            .await;
            synced("pushed-back", "pushed-2").await;

            // A generated password pushed to the store by a PushSecret is the value an
            // ExternalSecret reads back, and the one the PushSecret keeps.
            let passwords: Api<Password> = Api::namespaced(client.clone(), &ns);
            apply(
                &passwords,
                json!({"apiVersion": "generators.external-secrets.io/v1alpha1", "kind": "Password",
                       "metadata": {"name": "pw"}, "spec": {"length": 32}}),
            )
            .await;
            let generated = format!("{ns}/generated");
            apply(
                &pss,
                json!({"apiVersion": "external-secrets.io/v1alpha1", "kind": "PushSecret",
                       "metadata": {"name": "push-generated", "labels": {CLASS_LABEL: ns}},
                       "spec": {"refreshInterval": "1h",
                                "secretStoreRefs": [{"name": "tenant", "kind": "Provider"}],
                                "selector": {"generatorRef": {"apiVersion": "generators.external-secrets.io/v1alpha1",
                                                              "kind": "Password", "name": "pw"}},
                                "data": [{"match": {"secretKey": "password",
                                                    "remoteRef": {"remoteKey": generated, "property": "pw"}}}]}}),
            )
            .await;
            let mut back = external_secret("generated-back", &ns, ("tenant", "Provider"), &generated);
            back["spec"]["data"][0]["remoteRef"]["property"] = json!("pw");
            apply(&ess, back).await;
            let read_back = eventually("the generated password read back", WAIT, || async {
                value(&secrets.get_opt("generated-back").await.ok()??, "user")
            })
            .await;
            assert_eq!(read_back.chars().count(), 32, "{read_back:?}");
            assert_eq!(store.read_pw(&generated), Some(read_back.clone()), "the store holds it");
            let kept = secrets.get("push-generated-generated").await.unwrap();
            assert_eq!(value(&kept, "password"), Some(read_back), "the PushSecret keeps the value it pushed");

            pss.delete("push", &Default::default()).await.unwrap();
            eventually("push deleted from the store", WAIT, || async {
                store.read_pw(&pushed).is_none().then_some(())
            })
            .await;

            // Not found: the target keeps its last good data, Ready=False says why.
            store.delete(&db);
            eventually("via-provider not ready after the secret went away", WAIT, || async {
                let es = ess.get("via-provider").await.ok()?;
                (ready_of(&es.status?.conditions)?.0 == "False").then_some(())
            })
            .await;
            let kept = secrets.get("via-provider").await.unwrap();
            assert_eq!(value(&kept, "user").as_deref(), Some("app2"), "the target Secret keeps its data");
            for name in [&cp_name, &cp_manifest] {
                let _ = cps.delete(name, &Default::default()).await;
            }
        })
        .await
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn vault_end_to_end() {
    // Alone: ClusterProviders, which every reconciler watches.
    let _turn = exclusive().await;
    run(&VaultStore(VaultDev::start())).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn aws_secrets_manager_end_to_end() {
    // Alone: ClusterProviders, which every reconciler watches.
    let _turn = exclusive().await;
    run(&AwsStore(Moto::start())).await;
}
