//! End to end: upstream's Azure Key Vault guide (`e2e/fixtures/upstream-guides/azkv-*.yaml`,
//! release 2.9.0) applied to a real API server, admitted by Keyward's webhook and synced by the
//! reconciler through Keyward's Azure provider process, against the Key Vault and Entra ID
//! protocol test server of the e2e harness: the service-principal SecretStore, the same block as
//! a ClusterSecretStore, and the workload-identity SecretStore (a TokenRequest token exchanged at
//! Entra ID), read by the guide's ExternalSecrets; the guide's PushSecret writes a secret with
//! its metadata, and deleting the PushSecret deletes it. Upstream's ACRAccessToken example, read by
//! its ExternalSecret example, gets a registry token from the server's ACR token exchange; a wrong
//! secret is the ExternalSecret's Ready=False message. Only the namespace, the vault URL, the
//! registry, the tenant, the credentials and the test's controller-class label change.

use std::time::Duration;

use base64::Engine;
use k8s_openapi::api::core::v1::Secret;
use keyward_crds::{ExternalSecret, PushSecret};
use keyward_e2e::stores::AzureKeyVault;
use keyward_e2e::stores::azure::TENANT;
use keyward_e2e::{repo_root, with_temp_namespace};
use kube::{Api, Client};
use serde_json::{Value, json};

use crate::support::*;

const WAIT: Duration = Duration::from_secs(90);
/// The service principal of the test, and its secret.
const CLIENT_ID: &str = "5b2f6c1e-8d3a-4f7b-9c1d-2e4f6a8b0c3d";
const CLIENT_SECRET: &str = "kw~azure-guides-secret";
/// The label that sends the run's ClusterSecretStores through its webhook.
const RUN_LABEL: &str = "keyward.dev/azure-guides-e2e";

/// The documents of a guide file in `ns`, with the test's class label, vault and tenant.
fn guide(file: &str, ns: &str, server: &AzureKeyVault) -> Vec<Value> {
    let docs = yaml_documents(&repo_root().join("e2e/fixtures/upstream-guides").join(file));
    docs.into_iter()
        .map(|mut doc| {
            doc["metadata"]["namespace"] = json!(ns);
            doc["metadata"]["labels"][CLASS_LABEL] = json!(ns);
            if let Some(azure) = doc.pointer_mut("/spec/provider/azurekv") {
                azure["vaultUrl"] = json!(server.vault_url());
                if azure.get("tenantId").is_some() {
                    azure["tenantId"] = json!(TENANT);
                }
            }
            doc
        })
        .collect()
}

/// The validating webhook for the namespaced kinds of `ns` and the ClusterSecretStores labelled
/// for the run.
async fn start_webhook(client: &Client, pki: &Pki, ns: &str) -> Webhook {
    let mut webhook = Webhook::start(&pki.issue_server_dir("webhook")).await;
    let rule = |group: &str, version: &str, resources: &[&str]| {
        json!({"apiGroups": [group], "apiVersions": [version], "operations": ["CREATE", "UPDATE"],
               "resources": resources})
    };
    let hook = |name: &str, rules: Value, selector: (&str, Value)| {
        let mut h = json!({
            "name": format!("{name}.azure-guides.keyward.dev"),
            "clientConfig": {"url": format!("{}/validate", webhook.url()),
                             "caBundle": base64::engine::general_purpose::STANDARD.encode(&pki.ca)},
            "rules": rules, "failurePolicy": "Fail", "sideEffects": "None",
            "admissionReviewVersions": ["v1"], "timeoutSeconds": 10,
        });
        h[selector.0] = selector.1;
        h
    };
    let namespaced = json!([
        rule("external-secrets.io", "v1", &["externalsecrets", "secretstores"]),
        rule("external-secrets.io", "v1alpha1", &["pushsecrets"]),
        rule("generators.external-secrets.io", "v1alpha1", &["acraccesstokens"]),
    ]);
    let cluster = json!([rule("external-secrets.io", "v1", &["clustersecretstores"])]);
    let config = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": format!("keyward-azure-guides-e2e-{ns}")},
        "webhooks": [
            hook("namespaced", namespaced,
                 ("namespaceSelector", json!({"matchLabels": {"kubernetes.io/metadata.name": ns}}))),
            hook("cluster", cluster, ("objectSelector", json!({"matchLabels": {RUN_LABEL: ns}}))),
        ],
    });
    webhook.register(client, config).await;
    webhook
}

/// The control plane's ServiceAccount issuer and its signing keys, as Entra ID reads them.
async fn issuer(client: &Client) -> (String, Value) {
    let get = |path: &str| {
        let req = http::Request::get(path).body(Vec::new()).unwrap();
        let client = client.clone();
        async move { client.request::<Value>(req).await.unwrap() }
    };
    let config = get("/.well-known/openid-configuration").await;
    (config["issuer"].as_str().unwrap().to_string(), get("/openid/v1/jwks").await)
}

/// What upstream's ExternalSecret examples read, in the vault.
fn seed(server: &AzureKeyVault) -> Vec<u8> {
    server.set_secret("database-username", "app", &[]);
    server.set_secret("database-password", "s3cret", &[]);
    server.set_secret("database-credentials", r#"{"user":"app","host":"db"}"#, &[("environment", "dev")]);
    server.set_secret("dev-token", "t0ken", &[]);
    server.set_key("encryption-pubkey", json!({"kty": "RSA", "n": "AQAB", "e": "AQAB"}));
    let ca = keyward_certs::CertificateAuthority::generate("db.example", Duration::from_secs(3600)).unwrap();
    let body: String = ca.cert_pem().lines().filter(|l| !l.starts_with("-----")).collect();
    let der = base64::engine::general_purpose::STANDARD.decode(body).unwrap();
    server.set_certificate("db-client-cert", &der);
    der
}

#[tokio::test(flavor = "multi_thread")]
async fn upstream_azure_stores_sync_and_push_through_the_azure_provider() {
    // Alone: a ClusterSecretStore, which every reconciler watches.
    let _turn = exclusive().await;
    let server = AzureKeyVault::start();
    server.add_client_secret(CLIENT_ID, CLIENT_SECRET);
    let der = seed(&server);
    with_temp_namespace(&[], |client, ns| {
        let server = &server;
        let der = der.clone();
        async move {
            let pki = Pki::new();
            pki.install(&client, &ns).await;
            let _webhook = start_webhook(&client, &pki, &ns).await;
            let env = server.provider_env();
            let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            let azure = ProviderProcess::start_with_env("keyward-provider-azure", pki.provider_dir(), &env).await;

            // The service principal: the guide's Secret with the test's credentials, its store.
            let mut secret = guide("azkv-credentials-secret.yaml", &ns, server).remove(0);
            let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
            secret["data"] = json!({"ClientID": b64(CLIENT_ID), "ClientSecret": b64(CLIENT_SECRET)});
            kubectl_apply(&ns, &secret);
            kubectl_apply(&ns, &guide("azkv-secret-store-spn-secret.yaml", &ns, server).remove(0));
            // The webhook is on the path: a store the rules refuse is denied, naming the field.
            let mut plain = guide("azkv-secret-store-spn-secret.yaml", &ns, server).remove(0);
            plain["metadata"]["name"] = json!("plain-http");
            plain["spec"]["provider"]["azurekv"]["vaultUrl"] = json!("http://keyward-e2e.vault.azure.net");
            keyward_e2e::rejects_in(&ns, &plain.to_string(), "spec.provider.azurekv.vaultUrl");

            // The same block as a ClusterSecretStore, its Secret references naming the namespace.
            let css = format!("{ns}-azure");
            let mut cluster = guide("azkv-secret-store-spn-secret.yaml", &ns, server).remove(0);
            cluster["kind"] = json!("ClusterSecretStore");
            cluster["metadata"]["name"] = json!(css);
            cluster["metadata"]["labels"][RUN_LABEL] = json!(ns);
            cluster["metadata"].as_object_mut().unwrap().remove("namespace");
            for key in ["clientId", "clientSecret"] {
                cluster["spec"]["provider"]["azurekv"]["authSecretRef"][key]["namespace"] = json!(ns);
            }
            kubectl_apply(&ns, &cluster);

            // Workload identity: the guide's ServiceAccount, federated with the control plane's
            // issuer, and its store `azure-store`, which the guide's ExternalSecrets read.
            let (issuer, jwks) = issuer(&client).await;
            server.set_issuer_keys(jwks);
            server.add_federated("wi-client", &issuer, &format!("system:serviceaccount:{ns}:workload-identity-sa"));
            let mut wi = guide("azkv-workload-identity.yaml", &ns, server);
            wi[0]["metadata"]["annotations"] =
                json!({"azure.workload.identity/client-id": "wi-client", "azure.workload.identity/tenant-id": TENANT});
            for doc in &wi {
                kubectl_apply(&ns, doc);
            }

            // The guide's ExternalSecrets, through the workload identity store as printed, and the
            // first through the service principal's SecretStore and ClusterSecretStore.
            let es = guide("azkv-external-secret.yaml", &ns, server).remove(0);
            kubectl_apply(&ns, &es);
            kubectl_apply(&ns, &guide("azkv-datafrom-external-secret.yaml", &ns, server).remove(0));
            for (name, store) in [
                ("by-sp", json!({"name": "azure-store-spn-secret", "kind": "SecretStore"})),
                ("by-cluster", json!({"name": css, "kind": "ClusterSecretStore"})),
            ] {
                let mut copy = es.clone();
                copy["metadata"]["name"] = json!(name);
                copy["spec"]["secretStoreRef"] = store;
                copy["spec"]["target"]["name"] = json!(name);
                kubectl_apply(&ns, &copy);
            }

            // The ACRAccessToken generator: upstream's example with the test's tenant and registry
            // (it sets all three auth methods: the service principal is used, as upstream), read
            // by upstream's ExternalSecret example into a .dockerconfigjson; one with a wrong
            // secret; one the rules refuse, denied by the webhook naming the field.
            for (name, secret) in [("az-secret", CLIENT_SECRET), ("az-wrong", "nope")] {
                kubectl_apply(
                    &ns,
                    &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
                                           "stringData": {"clientid": CLIENT_ID, "clientsecret": secret}}),
                );
            }
            let mut acr = upstream_generator_example("generator-acr.yaml").remove(0);
            acr["spec"]["tenantId"] = json!(TENANT);
            acr["spec"]["registry"] = json!(server.registry());
            kubectl_apply(&ns, &acr);
            for mut doc in upstream_generator_example("generator-acr-example.yaml") {
                doc["metadata"]["labels"] = json!({CLASS_LABEL: ns});
                kubectl_apply(&ns, &doc);
            }
            let mut wrong = acr.clone();
            wrong["metadata"]["name"] = json!("acr-wrong");
            for key in ["clientId", "clientSecret"] {
                wrong["spec"]["auth"]["servicePrincipal"]["secretRef"][key]["name"] = json!("az-wrong");
            }
            kubectl_apply(&ns, &wrong);
            kubectl_apply(&ns, &generator_external_secret("acr-wrong", &ns, "ACRAccessToken", "acr-wrong"));
            let mut bad = acr.clone();
            bad["metadata"]["name"] = json!("acr-bad");
            bad["spec"]["registry"] = json!("https://example.azurecr.io");
            keyward_e2e::rejects_in(&ns, &bad.to_string(), "spec.registry");

            let _reconciler = Reconciler::start_with_stores(&ns, &[("azure", &azure)], &[]).await;
            let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
            for target in ["database-credentials", "by-sp", "by-cluster"] {
                wait_for_value(&secrets, target, "database-username", "app", WAIT).await;
                wait_for_value(&secrets, target, "database-password", "s3cret", WAIT).await;
                wait_for_value(&secrets, target, "database-credentials", "dev", WAIT).await;
            }
            let synced = secrets.get("database-credentials").await.unwrap();
            let tags: Value = serde_json::from_str(&value(&synced, "database-credentials-metadata").unwrap()).unwrap();
            assert_eq!(tags["environment"], "dev", "{tags}");
            assert_eq!(synced.data.as_ref().unwrap()["db-client-cert"].0, der, "the certificate's DER, as upstream");
            let jwk: Value = serde_json::from_str(&value(&synced, "encryption-pubkey").unwrap()).unwrap();
            assert_eq!(jwk["kty"], "RSA", "{jwk}");
            // The dataFrom example: a find by name, by tags, a JSON extract and the tags (under
            // `<secret>_<tag>`, as upstream).
            for (key, want) in
                [("dev-token", "t0ken"), ("user", "app"), ("host", "db"), ("database-credentials_environment", "dev")]
            {
                wait_for_value(&secrets, "all-secrets", key, want, WAIT).await;
            }
            let log = server.requests();
            assert!(log.iter().any(|r| r.ends_with("/oauth2/v2.0/token")), "{log:?}");

            // The registry login: a token of the example's scope, issued to the service principal.
            let login = eventually("the registry login", WAIT, || async {
                let docker = secrets.get_opt("azurecr-credentials").await.ok()??;
                assert_eq!(docker.type_.as_deref(), Some("kubernetes.io/dockerconfigjson"));
                let config: Value = serde_json::from_str(&value(&docker, ".dockerconfigjson")?).unwrap();
                Some(config["auths"]["myregistry.azurecr.io"].clone())
            })
            .await;
            assert_eq!(login["username"], "00000000-0000-0000-0000-000000000000");
            let issued = server.registry_token(login["password"].as_str().unwrap());
            let scope = format!("acr:{}:repository:foo:pull,push", server.registry());
            assert_eq!(issued, Some((scope, CLIENT_ID.to_string())), "{login}");
            let ess: Api<ExternalSecret> = Api::namespaced(client.clone(), &ns);
            let message = wait_refused(&ess, "acr-wrong", "AADSTS7000215", WAIT).await;
            assert!(message.contains("ACRAccessToken"), "{message}");

            // The guide's PushSecret (its namespace the test's): the secret with its metadata, and
            // gone from the vault with the PushSecret (deletionPolicy Delete).
            for doc in guide("azkv-pushsecret-secret.yaml", &ns, server) {
                kubectl_apply(&ns, &doc);
            }
            let pushed = eventually("the PushSecret's secret in the vault", WAIT, || async {
                server.secret("my-azkv-secret-name")
            })
            .await;
            assert_eq!(pushed.0, "my-secret");
            assert_eq!(pushed.1.get("environment").map(String::as_str), Some("production"), "{pushed:?}");
            let pushes: Api<PushSecret> = Api::namespaced(client.clone(), &ns);
            pushes.delete("pushsecret-example", &Default::default()).await.unwrap();
            eventually("the pushed secret deleted", WAIT, || async {
                server.is_deleted("my-azkv-secret-name").then_some(())
            })
            .await;

            let _ = keyward_e2e::kubectl().args(["delete", "clustersecretstore", &css, "--ignore-not-found"]).output();
        }
    })
    .await;
}
