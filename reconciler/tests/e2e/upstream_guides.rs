//! End to end: the SecretStore, ExternalSecret and PushSecret examples of upstream's Vault,
//! Secrets Manager and Parameter Store guides (release 2.9.0, kept as printed in
//! `e2e/fixtures/upstream-guides/`) applied to a real API server and synced by the reconciler
//! through Keyward's Vault and AWS provider processes, against the Vault dev server and moto.
//! Only the namespace, server addresses, credentials and the test's controller-class label
//! change. A value rotated in Vault and in Parameter Store reaches its Secret; the PushSecrets
//! write what the guides say they write.

use std::time::Duration;

use base64::Engine;
use k8s_openapi::api::core::v1::Secret;
use keyward_crds::{ExternalSecret, PushSecret};
use keyward_e2e::stores::{Moto, VaultDev};
use keyward_e2e::{repo_root, with_temp_namespace};
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

use crate::support::*;

const WAIT: Duration = Duration::from_secs(90);

/// The documents of one guide example, as JSON.
fn guide(file: &str) -> Vec<Value> {
    let path = repo_root().join("e2e/fixtures/upstream-guides").join(file);
    yaml_documents(&path)
}

/// What the test changes in a guide's manifest: its namespace, the test's class label, the Vault
/// address (`vault_server`) and the root token in place of the guide's `root`.
fn adapt(mut doc: Value, ns: &str, vault: &VaultDev) -> Value {
    doc["metadata"]["namespace"] = json!(ns);
    doc["metadata"]["labels"][CLASS_LABEL] = json!(ns);
    if let Some(server) = doc.pointer_mut("/spec/provider/vault/server") {
        *server = json!(vault.address());
    }
    if doc["kind"] == "Secret" && doc["metadata"]["name"] == "vault-token" {
        doc["data"]["token"] = json!(base64::engine::general_purpose::STANDARD.encode(vault.root_token()));
    }
    doc
}

/// Applies a manifest with `kubectl apply`, the way a user applies the guide.
fn kubectl_apply(ns: &str, doc: &Value) {
    keyward_e2e::accepts_in(ns, &serde_json::to_string(doc).unwrap());
}

/// Runs boto3 `code` against moto in `eu-central-1` (the guides' region); returns stdout.
fn boto3(moto: &Moto, code: &str) -> String {
    moto.boto3("eu-central-1", code).unwrap_or_else(|e| panic!("boto3: {e}\n{code}"))
}

/// Waits until Secret `name` has every `(key, value)`.
async fn wait_for_values(secrets: &Api<Secret>, name: &str, want: &[(&str, &str)]) {
    for (key, value) in want {
        wait_for_value(secrets, name, key, value, WAIT).await;
    }
}

/// Asks for a sync now, as a user does (`force-sync` annotation).
async fn force_sync(ess: &Api<ExternalSecret>, name: &str, stamp: &str) {
    let patch = json!({"metadata": {"annotations": {"force-sync": stamp}}});
    ess.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
}

async fn wait_pushed(pushes: &Api<PushSecret>, name: &str) {
    eventually(&format!("PushSecret {name} is Ready"), WAIT, || async {
        let ps = pushes.get(name).await.ok()?;
        let (status, _, _) = ready_of(&ps.status.as_ref()?.conditions)?;
        (status == "True").then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn upstream_guides_sync_unchanged_through_vault_and_aws() {
    // Alone: a ClusterSecretStore, which every reconciler watches.
    let _turn = exclusive().await;
    let vault = VaultDev::start();
    let moto = Moto::start();
    with_temp_namespace(&[], |client, ns| {
        let vault = &vault;
        let moto = &moto;
        async move {
            let pki = Pki::new();
            pki.install(&client, &ns).await;
            let vault_provider = ProviderProcess::start("keyward-provider-vault", pki.provider_dir(), None).await;
            let aws_env = moto.provider_env();
            let aws_env: Vec<(&str, &str)> = aws_env.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let aws_provider = ProviderProcess::start_with_env("keyward-provider-aws", pki.provider_dir(), &aws_env).await;

            // The remote data the guides assume.
            vault.cli(&["kv", "put", "secret/foo", "my-value=s3cr3t"]);
            vault.cli(&["kv", "metadata", "put", "-custom-metadata=dev=alice", "secret/foo"]);
            let friends = json!({"name": {"first": "Tom", "last": "Anderson"},
                                 "friends": [{"first": "Dale", "last": "Murphy"}, {"first": "Roger", "last": "Craig"}]});
            boto3(
                moto,
                &format!(
                    "sm.create_secret(Name='friendslist', SecretString={friends:?})\n\
                     sm.create_secret(Name='database-credentials', SecretString='x', Tags=[{{'Key':'dev','Value':'alice'}}])\n\
                     ssm.put_parameter(Name='friendslist', Value={friends:?}, Type='String')\n\
                     ssm.put_parameter(Name='database-credentials', Value='x', Type='SecureString', \
                     Tags=[{{'Key':'dev','Value':'bob'}}])",
                    friends = friends.to_string()
                ),
            );
            // The credentials Secret the AWS guides tell the reader to create (moto takes any keys).
            let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
            apply(
                &secrets,
                json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "awssm-secret"},
                       "stringData": {"access-key": "AKIDGUIDE", "secret-access-key": "guide"}}),
            )
            .await;

            for file in [
                "vault-secretstore.yaml",
                "vault-externalsecret.yaml",
                "aws-sm-store.yaml",
                "aws-sm-external-secret.yaml",
                "aws-parameter-store.yaml",
                "aws-parameter-store-externalsecret.yaml",
            ] {
                for doc in guide(file) {
                    kubectl_apply(&ns, &adapt(doc, &ns, vault));
                }
            }
            // The userPass login of the Vault guide: its store (renamed: the token store above
            // has its name) with the user and password Secret it names, read by the same example.
            vault.policy("read-secret", "path \"secret/*\" { capabilities = [\"read\"] }");
            vault.cli(&["auth", "enable", "userpass"]);
            vault.cli(&["write", "auth/userpass/users/username", "password=guide-password", "token_policies=read-secret"]);
            apply(
                &secrets,
                json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "my-secret"},
                       "stringData": {"password": "guide-password"}}),
            )
            .await;
            let mut userpass_store = adapt(guide("vault-userpass-store.yaml").remove(0), &ns, vault);
            userpass_store["metadata"]["name"] = json!("vault-userpass");
            kubectl_apply(&ns, &userpass_store);
            let mut via_userpass = adapt(guide("vault-externalsecret.yaml").remove(0), &ns, vault);
            via_userpass["metadata"]["name"] = json!("vault-userpass-example");
            via_userpass["spec"]["secretStoreRef"]["name"] = json!("vault-userpass");
            via_userpass["spec"]["target"]["name"] = json!("example-userpass-sync");
            kubectl_apply(&ns, &via_userpass);

            // The guide's note for a ClusterSecretStore: the same store, its token reference
            // naming the Secret's namespace.
            let mut cluster_store = adapt(guide("vault-secretstore.yaml").remove(0), &ns, vault);
            cluster_store["kind"] = json!("ClusterSecretStore");
            cluster_store["metadata"]["name"] = json!(format!("{ns}-vault"));
            cluster_store["metadata"].as_object_mut().unwrap().remove("namespace");
            cluster_store["spec"]["provider"]["vault"]["auth"]["tokenSecretRef"]["namespace"] = json!(ns);
            kubectl_apply(&ns, &cluster_store);
            let mut via_cluster = adapt(guide("vault-externalsecret.yaml").remove(0), &ns, vault);
            via_cluster["metadata"]["name"] = json!("vault-cluster-example");
            via_cluster["spec"]["secretStoreRef"] = json!({"kind": "ClusterSecretStore", "name": format!("{ns}-vault")});
            via_cluster["spec"]["target"]["name"] = json!("example-cluster-sync");
            kubectl_apply(&ns, &via_cluster);

            let stores = [("vault", &vault_provider), ("aws", &aws_provider)];
            let _reconciler = Reconciler::start_with_stores(&ns, &stores, &[]).await;

            // `version`: the system metadata the guide reads with metadataPolicy Fetch.
            let vault_values = [("foobar", "s3cr3t"), ("developer", "alice"), ("version", "1")];
            wait_for_values(&secrets, "example-sync", &vault_values).await;
            wait_for_values(&secrets, "example-cluster-sync", &vault_values).await;
            wait_for_values(&secrets, "example-userpass-sync", &vault_values).await;
            let tags = value(&secrets.get("example-sync").await.unwrap(), "tags").unwrap();
            let tags: Value = serde_json::from_str(&tags).unwrap();
            assert_eq!(tags["dev"], "alice", "{tags}");
            // Upstream's Fetch writes the system metadata too.
            assert_eq!(tags["current_version"], "1", "{tags}");
            assert!(tags["created_time"].is_string() && tags["delete_version_after"] == "0s", "{tags}");
            wait_for_values(&secrets, "friends", &[("my_name", "Tom"), ("first_friend", "Roger"), ("developer", "alice")])
                .await;
            wait_for_values(
                &secrets,
                "extract-data",
                &[("my_name", "Tom"), ("first_friend", "Roger"), ("developer", "bob")],
            )
            .await;

            // Rotation: the Vault example refreshes every 15 s by itself; the Parameter Store
            // one (1 h by default) when asked.
            vault.cli(&["kv", "put", "secret/foo", "my-value=rotated"]);
            let rotated = json!({"name": {"first": "Tim"}, "friends": [{}, {"first": "Rita"}]}).to_string();
            boto3(moto, &format!("ssm.put_parameter(Name='friendslist', Value={rotated:?}, Type='String', Overwrite=True)"));
            let ess: Api<ExternalSecret> = Api::namespaced(client.clone(), &ns);
            force_sync(&ess, "extract-data", "rotated").await;
            wait_for_values(&secrets, "example-sync", &[("foobar", "rotated"), ("version", "2")]).await;
            wait_for_value(&secrets, "example-userpass-sync", "foobar", "rotated", WAIT).await;
            wait_for_values(&secrets, "extract-data", &[("my_name", "Tim"), ("first_friend", "Rita")]).await;

            // PushSecrets: the Vault guide's into a store of the name it uses, the Parameter
            // Store guide's (SecureString, tags, advanced tier) likewise.
            let pushes: Api<PushSecret> = Api::namespaced(client.clone(), &ns);
            let mut vault_push_store = adapt(guide("vault-secretstore.yaml").remove(0), &ns, vault);
            vault_push_store["metadata"]["name"] = json!("vault-secretstore");
            kubectl_apply(&ns, &vault_push_store);
            // Both guides name their PushSecret `pushsecret-example`; this one is renamed.
            for mut doc in guide("vault-pushsecret.yaml") {
                if doc["kind"] == "PushSecret" {
                    doc["metadata"]["name"] = json!("vault-pushsecret-example");
                }
                kubectl_apply(&ns, &adapt(doc, &ns, vault));
            }
            let mut ps_store = adapt(guide("aws-parameter-store.yaml").remove(0), &ns, vault);
            ps_store["metadata"]["name"] = json!("aws-parameterstore");
            kubectl_apply(&ns, &ps_store);
            apply(
                &secrets,
                json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "pokedex-credentials"},
                       "stringData": {"username": "ash", "password": "pikachu"}}),
            )
            .await;
            for doc in guide("aws-pm-push-secret-with-metadata.yaml") {
                kubectl_apply(&ns, &adapt(doc, &ns, vault));
            }
            wait_pushed(&pushes, "vault-pushsecret-example").await;
            wait_pushed(&pushes, "pushsecret-example").await;
            let secret1 = vault.json(&["kv", "get"], &["secret/vault/secret1"]);
            assert_eq!(secret1["data"]["data"]["foo"], "bar", "{secret1}");
            let secret2 = vault.json(&["kv", "get"], &["secret/vault/secret2"]);
            assert_eq!(secret2["data"]["data"]["foo"], "bar", "{secret2}");
            let parameter = boto3(
                moto,
                "p=ssm.get_parameter(Name='my-first-parameter', WithDecryption=True)['Parameter']\n\
                 t=ssm.list_tags_for_resource(ResourceType='Parameter', ResourceId='my-first-parameter')['TagList']\n\
                 print(json.dumps({'type': p['Type'], 'value': p['Value'], 'tags': {x['Key']: x['Value'] for x in t}}))",
            );
            let parameter: Value = serde_json::from_str(parameter.trim()).unwrap();
            assert_eq!(parameter["type"], "SecureString", "{parameter}");
            // The whole Secret, its values Base64-encoded as upstream writes them unless the
            // metadata says `encodeAsDecoded: true`.
            let pushed: Value = serde_json::from_str(parameter["value"].as_str().unwrap()).unwrap();
            assert_eq!((pushed["username"].as_str(), pushed["password"].as_str()), (Some("YXNo"), Some("cGlrYWNodQ==")));
            assert_eq!(parameter["tags"]["team"], "pokedex", "{parameter}");
        }
    })
    .await;
}
