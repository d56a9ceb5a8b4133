//! The Azure provider through upstream's documented SecretStores and ClusterSecretStores
//! (`e2e/fixtures/upstream-guides/azkv-*.yaml`), against the Key Vault protocol test server:
//! each authentication mode, reads of secrets, keys, certificates and tags, finds by name and by
//! tags, pushes of secrets, keys and certificates with upstream's metadata, deletes, refused
//! credentials and the tenant boundary.

use crate::common::{self, CLIENT_ID, Grpc, apply, get, get_bytes, guide, remote};
use base64::Engine;
use keyward_e2e::stores::azure::TENANT;
use keyward_e2e::with_temp_namespace;
use keyward_proto::v1::{
    DeleteSecretRequest, ExternalSecretFind, FindName, GetAllSecretsRequest, ProviderReference, PushSecretData,
    PushSecretRemoteRef, PushSecretRequest,
};
use keyward_provider_runtime::testkit::provider_ref;
use serde_json::{Value, json};
use tonic::Code;

/// The guide's store with the test server's vault and tenant.
fn pointed(mut store: Value, server: &keyward_e2e::stores::AzureKeyVault) -> Value {
    store["spec"]["provider"]["azurekv"]["vaultUrl"] = json!(server.vault_url());
    if store["spec"]["provider"]["azurekv"].get("tenantId").is_some() {
        store["spec"]["provider"]["azurekv"]["tenantId"] = json!(TENANT);
    }
    store
}

/// A guide's ClusterSecretStore variant: the same block, cluster-scoped.
fn cluster(mut store: Value) -> Value {
    store["kind"] = json!("ClusterSecretStore");
    if let Some(m) = store["metadata"].as_object_mut() {
        m.remove("namespace");
    }
    store
}

async fn push(
    c: &Grpc,
    r: &ProviderReference,
    ns: &str,
    data: &[(&str, &[u8])],
    entry: PushSecretData,
) -> Result<(), tonic::Status> {
    let req = PushSecretRequest {
        provider_ref: Some(r.clone()),
        source_namespace: ns.into(),
        secret_data: data.iter().map(|(k, v)| (k.to_string(), v.to_vec())).collect(),
        push_secret_data: Some(entry),
    };
    c.clone().push_secret(req).await.map(|_| ())
}

async fn delete(c: &Grpc, r: &ProviderReference, ns: &str, key: &str) -> Result<(), tonic::Status> {
    let req = DeleteSecretRequest {
        provider_ref: Some(r.clone()),
        source_namespace: ns.into(),
        remote_ref: Some(PushSecretRemoteRef { remote_key: key.into(), ..Default::default() }),
    };
    c.clone().delete_secret(req).await.map(|_| ())
}

async fn find(c: &Grpc, r: &ProviderReference, ns: &str, regexp: &str, tags: &[(&str, &str)]) -> Vec<String> {
    let find = ExternalSecretFind {
        name: (!regexp.is_empty()).then(|| FindName { regexp: regexp.into() }),
        tags: tags.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        ..Default::default()
    };
    let req = GetAllSecretsRequest { provider_ref: Some(r.clone()), source_namespace: ns.into(), find: Some(find) };
    let mut names: Vec<String> =
        c.clone().get_all_secrets(req).await.expect("find").into_inner().secrets.into_keys().collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread")]
async fn a_service_principal_store_reads_finds_pushes_and_deletes_secrets_keys_and_certificates() {
    let _guard = common::shared().await;
    let server = common::azure();
    let p = common::start_provider(&server).await;
    let c = p.client.clone();
    with_temp_namespace(&[], |client, ns| async move {
        // The guide's credentials Secret (its values replaced by the test's) and SecretStore.
        let mut secret = guide("azkv-credentials-secret.yaml", &ns).remove(0);
        secret.as_object_mut().expect("object").remove("data");
        secret["stringData"] = json!({"ClientID": CLIENT_ID, "ClientSecret": common::CLIENT_SECRET});
        apply(&client, &secret).await;
        let store = pointed(guide("azkv-secret-store-spn-secret.yaml", &ns).remove(0), &server);
        apply(&client, &store).await;
        let s = provider_ref("SecretStore", "azure-store-spn-secret", "", "SecretStore");

        // What upstream's ExternalSecret example reads.
        server.set_secret("database-username", "app", &[]);
        let v1 = server.set_secret("database-password", "old", &[]);
        server.set_secret("database-password", "s3cret", &[]);
        server.set_secret("database-credentials", r#"{"user":"app","db":{"host":"h"}}"#, &[("environment", "dev"), ("owner", r#"{"team":"a"}"#)]);
        assert_eq!(get(&c, &s, &ns, "database-username").await.expect("bare name"), "app");
        assert_eq!(get(&c, &s, &ns, "secret/database-password").await.expect("secret/"), "s3cret");
        let old = get_bytes(&c, &s, &ns, remote("database-password", "", &v1, "")).await.expect("a version");
        assert_eq!(old, b"old");
        let host = get_bytes(&c, &s, &ns, remote("database-credentials", "db.host", "", "")).await.expect("property");
        assert_eq!(host, b"h");
        let tags: Value = serde_json::from_slice(&get_bytes(&c, &s, &ns, remote("database-credentials", "", "", "Fetch")).await.expect("tags")).expect("JSON");
        assert_eq!((tags["environment"].as_str(), tags["owner"].as_str()), (Some("dev"), Some(r#"{"team":"a"}"#)));
        assert!(tags["attribute.created"].is_string(), "attributes as upstream: {tags}");
        let env = get_bytes(&c, &s, &ns, remote("database-credentials", "environment", "", "Fetch")).await.expect("one tag");
        assert_eq!(env, b"dev");
        for (key, code) in [("missing", Code::NotFound), ("blob/x", Code::InvalidArgument), ("../keys/x", Code::InvalidArgument)] {
            assert_eq!(get(&c, &s, &ns, key).await.expect_err(key).code(), code, "{key}");
        }

        // Finds, as upstream's dataFrom example: by name and by tags.
        server.set_secret("dev-a", "1", &[("environment", "dev")]);
        server.set_secret("dev-b", "2", &[]);
        assert_eq!(find(&c, &s, &ns, "^dev", &[]).await, ["dev-a", "dev-b"]);
        assert_eq!(find(&c, &s, &ns, "", &[("environment", "dev")]).await, ["database-credentials", "dev-a"]);

        // Pushes with upstream's metadata: a secret, a key (PEM → JWK), a certificate.
        let meta = json!({"apiVersion": "kubernetes.external-secrets.io/v1alpha1", "kind": "PushSecretMetadata",
            "spec": {"expirationDate": "2099-12-31T23:59:59Z", "contentType": "application/json", "tags": {"environment": "production"}}});
        let entry = |secret_key: &str, remote_key: &str, metadata: &Value| PushSecretData {
            secret_key: secret_key.into(),
            remote_key: remote_key.into(),
            metadata: if metadata.is_null() { Vec::new() } else { metadata.to_string().into_bytes() },
            ..Default::default()
        };
        push(&c, &s, &ns, &[("source-key", b"my-secret")], entry("source-key", "my-azkv-secret-name", &meta)).await.expect("push a secret");
        let (value, tags) = server.secret("my-azkv-secret-name").expect("pushed");
        assert_eq!(value, "my-secret");
        assert_eq!((tags["environment"].as_str(), tags["managed-by"].as_str()), ("production", "external-secrets"));
        let e = push(&c, &s, &ns, &[("k", b"v")], entry("k", "database-username", &Value::Null)).await.expect_err("unmanaged");
        assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");

        let key = rcgen::KeyPair::from_pem(&keyward_e2e::stores::azure::rsa_key_pem()).expect("RSA key");
        push(&c, &s, &ns, &[("tls.key", key.serialize_pem().as_bytes())], entry("tls.key", "key/my-azkv-key-name", &Value::Null)).await.expect("push a key");
        let jwk: Value = serde_json::from_slice(&get_bytes(&c, &s, &ns, remote("key/my-azkv-key-name", "", "", "")).await.expect("the key")).expect("JWK");
        assert_eq!(jwk["kty"], "RSA");
        assert_eq!(Some(jwk["n"].clone()), server.key("my-azkv-key-name").map(|k| k["n"].clone()), "the public key as Key Vault holds it");
        assert!(jwk.get("d").is_none(), "no private part comes back");

        let cert_key = rcgen::KeyPair::generate().expect("key");
        let cert = rcgen::CertificateParams::new(vec!["pushed.example".into()]).expect("params").self_signed(&cert_key).expect("cert");
        let pem = format!("{}{}", cert.pem(), cert_key.serialize_pem());
        push(&c, &s, &ns, &[("tls", pem.as_bytes())], entry("tls", "cert/my-azkv-cert-name", &Value::Null)).await.expect("push a certificate");
        let der = get_bytes(&c, &s, &ns, remote("cert/my-azkv-cert-name", "", "", "")).await.expect("the certificate");
        assert_eq!(der, cert.der().to_vec(), "upstream returns the certificate's DER");
        let pkcs12 = get(&c, &s, &ns, "secret/my-azkv-cert-name").await.expect("the certificate's secret");
        assert!(base64::engine::general_purpose::STANDARD.decode(pkcs12).is_ok());

        // Deletes: what was pushed goes, deleting again succeeds, what was not pushed stays.
        for k in ["my-azkv-secret-name", "key/my-azkv-key-name", "cert/my-azkv-cert-name"] {
            delete(&c, &s, &ns, k).await.unwrap_or_else(|e| panic!("delete {k}: {e:?}"));
            assert_eq!(get(&c, &s, &ns, k).await.expect_err(k).code(), Code::NotFound, "{k} after delete");
            delete(&c, &s, &ns, k).await.unwrap_or_else(|e| panic!("delete {k} again: {e:?}"));
        }
        assert!(server.is_deleted("my-azkv-secret-name"), "soft-deleted, as Key Vault does");
        assert_eq!(delete(&c, &s, &ns, "database-username").await.expect_err("unmanaged").code(), Code::PermissionDenied);

        // Refused credentials.
        common::apply_secret(&client, &ns, "wrong", &[("ClientID", CLIENT_ID), ("ClientSecret", "nope")]).await;
        common::install_crd(&client).await;
        common::apply_config(&client, &ns, "wrong", common::sp_spec(&server, "wrong")).await;
        let e = get(&c, &provider_ref("AzureKeyVault", "wrong", "", "Provider"), &ns, "database-username").await.expect_err("refused");
        assert_eq!(e.code(), Code::Unauthenticated, "{e:?}");
        assert!(e.message().contains("AADSTS7000215"), "Entra ID's answer: {e:?}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn certificate_workload_and_managed_identities_authenticate_as_upstream_documents() {
    let _guard = common::shared().await;
    let server = common::azure();
    server.set_secret("shared", "value", &[]);
    let p = common::start_provider(&server).await;
    let c = p.client.clone();
    with_temp_namespace(&[], |client, ns| async move {
        // A client certificate (PEM: certificate and key, as upstream's guide asks).
        let key = rcgen::KeyPair::from_pem(&keyward_e2e::stores::azure::rsa_key_pem()).expect("RSA key");
        let cert = rcgen::CertificateParams::new(vec!["sp".into()]).expect("params").self_signed(&key).expect("cert");
        server.add_client_certificate("cert-client", cert.der());
        let pem = format!("{}{}", cert.pem(), key.serialize_pem());
        common::apply_secret(
            &client,
            &ns,
            "azure-secret-sp",
            &[("ClientID", "cert-client"), ("ClientCertificate", &pem)],
        )
        .await;
        apply(&client, &pointed(guide("azkv-secret-store-spn-certificate.yaml", &ns).remove(0), &server)).await;
        let r = provider_ref("SecretStore", "azure-store-spn-certificate", "", "SecretStore");
        assert_eq!(get(&c, &r, &ns, "shared").await.expect("certificate"), "value");

        // Workload identity: the guide's ServiceAccount (annotations filled in) federated with
        // the control plane's issuer.
        let (issuer, jwks) = common::issuer(&client).await;
        server.set_issuer_keys(jwks);
        server.add_federated("wi-client", &issuer, &format!("system:serviceaccount:{ns}:workload-identity-sa"));
        let mut docs = guide("azkv-workload-identity.yaml", &ns);
        docs[0]["metadata"]["annotations"] =
            json!({"azure.workload.identity/client-id": "wi-client", "azure.workload.identity/tenant-id": TENANT});
        apply(&client, &docs[0]).await;
        apply(&client, &pointed(docs[1].clone(), &server)).await;
        let r = provider_ref("SecretStore", "azure-store", "", "SecretStore");
        assert_eq!(get(&c, &r, &ns, "shared").await.expect("workload identity"), "value");

        // Workload identity with the IDs from a Secret (the guide's secretRef variant).
        let docs = guide("azkv-workload-identity-secretref.yaml", &ns);
        apply(&client, &docs[0]).await;
        common::apply_secret(&client, &ns, "umi-secret", &[("clientId", "wi-client"), ("tenantId", TENANT)]).await;
        let mut store = pointed(docs[1].clone(), &server);
        store["metadata"]["name"] = json!("azure-store-secretref");
        apply(&client, &store).await;
        let r = provider_ref("SecretStore", "azure-store-secretref", "", "SecretStore");
        assert_eq!(get(&c, &r, &ns, "shared").await.expect("workload identity, IDs from a Secret"), "value");

        // A ServiceAccount no federated credential names is refused by Entra ID.
        common::apply_service_account(&client, &ns, "stranger", &[("azure.workload.identity/client-id", "wi-client")])
            .await;
        let mut stranger = pointed(guide("azkv-workload-identity.yaml", &ns)[1].clone(), &server);
        stranger["metadata"]["name"] = json!("stranger");
        stranger["spec"]["provider"]["azurekv"]["serviceAccountRef"]["name"] = json!("stranger");
        stranger["spec"]["provider"]["azurekv"]["tenantId"] = json!(TENANT);
        apply(&client, &stranger).await;
        let e = get(&c, &provider_ref("SecretStore", "stranger", "", "SecretStore"), &ns, "shared")
            .await
            .expect_err("not federated");
        assert_eq!(e.code(), Code::Unauthenticated, "{e:?}");
        assert!(e.message().contains("AADSTS70021"), "{e:?}");

        // Managed identity: the provider's own, for a ClusterSecretStore (the operator's) only.
        server.add_managed_identity("00000000-0000-0000-0000-000000000000");
        let mi = pointed(guide("azkv-secret-store-mi.yaml", &ns).remove(0), &server);
        let mut css = cluster(mi.clone());
        css["metadata"]["name"] = json!(format!("{ns}-mi"));
        apply(&client, &css).await;
        let r = provider_ref("ClusterSecretStore", &format!("{ns}-mi"), "", "ClusterSecretStore");
        assert_eq!(get(&c, &r, &ns, "shared").await.expect("managed identity"), "value");
        // The same block in a tenant's SecretStore, and a mounted workload identity there: refused.
        let mut tenant_mi = mi;
        tenant_mi["metadata"]["name"] = json!("tenant-mi");
        apply(&client, &tenant_mi).await;
        let mut mounted = pointed(guide("azkv-workload-identity-mounted.yaml", &ns)[1].clone(), &server);
        mounted["metadata"]["name"] = json!("tenant-mounted");
        apply(&client, &mounted).await;
        for name in ["tenant-mi", "tenant-mounted"] {
            let e =
                get(&c, &provider_ref("SecretStore", name, "", "SecretStore"), &ns, "shared").await.expect_err(name);
            assert_eq!(e.code(), Code::PermissionDenied, "{name}: {e:?}");
        }
        assert!(server.requests().iter().any(|r| r == "GET /msi/token"), "the managed-identity endpoint was asked");
    })
    .await;
}
