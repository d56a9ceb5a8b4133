//! Vault's GCP auth method (`spec.auth.gcp`, an `iam` role) with upstream's SecretStores,
//! against `vault server -dev`: the provider has the account sign a JWT through IAM Credentials
//! `signJwt` at the GCP protocol test server, and Vault checks each login there itself (its
//! `custom_endpoint` `api` and `iam` are the test server, whose CA it trusts; Vault reads IAM
//! with a key of its own, as Application Default Credentials): the signature
//! against the account's public keys, then the account through IAM `serviceAccounts.get`, bound
//! to the role. A service-account key (`secretRef`) and GKE Workload Identity
//! (`workloadIdentity`: STS, impersonation, then `signJwt`); an unbound account, an account
//! without `signJwt` on itself and a key in another namespace are refused.

use std::time::Duration;

use k8s_openapi::api::core::v1::ServiceAccount;
use keyward_certs::{CertificateAuthority, Usage};
use keyward_e2e::stores::{SecretManagerServer, VaultDev};
use keyward_e2e::{control_plane, with_temp_namespace};
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use serde_json::json;

use crate::common::{self, start_provider_with_env};
use crate::upstream_stores::{get, get_text, secret, secret_store, store_ref, vault};

#[tokio::test(flavor = "multi_thread")]
async fn gcp_login_with_a_key_and_workload_identity() {
    let _guard = common::shared().await;
    let cp = control_plane().await;
    let ca = CertificateAuthority::generate("keyward-gcp-test-ca", Duration::from_secs(86_400)).unwrap();
    let leaf = ca.issue(&["127.0.0.1", "localhost"], Usage::Server, Duration::from_secs(86_400)).unwrap();
    let google = SecretManagerServer::start((&leaf.cert_pem, &leaf.key_pem)).await;
    let ca_file = std::env::temp_dir().join(format!("keyward-vault-gcp-ca-{}.pem", std::process::id()));
    std::fs::write(&ca_file, ca.cert_pem()).unwrap();
    google.trust_kubernetes(&cp.dir().join("pki/sa.pub"));
    // Vault's own account (it reads IAM with it), and the accounts that log in.
    let vault_sa = google.service_account("vault@keyward-test.iam.gserviceaccount.com", false);
    let app = google.service_account("app@keyward-test.iam.gserviceaccount.com", false);
    let stranger = google.service_account("stranger@keyward-test.iam.gserviceaccount.com", false);
    let mute = google.service_account("mute@keyward-test.iam.gserviceaccount.com", false);
    let gke = google.service_account("gke-app@keyward-test.iam.gserviceaccount.com", false);
    for sa in [&app, &stranger, &gke] {
        google.allow_sign_jwt(&sa.email, &sa.email);
    }
    // Vault's config keeps only a key's account fields, not its token_uri: the key is Vault's
    // Application Default Credentials instead, so its tokens come from the test server.
    let vault_key = std::env::temp_dir().join(format!("keyward-vault-gcp-key-{}.json", std::process::id()));
    std::fs::write(&vault_key, &vault_sa.json).unwrap();
    let v = vault(VaultDev::start_with_env(&[
        ("SSL_CERT_FILE", &ca_file.to_string_lossy()),
        ("GOOGLE_APPLICATION_CREDENTIALS", &vault_key.to_string_lossy()),
    ]));
    v.cli(&["auth", "enable", "gcp"]);
    let config = json!({"custom_endpoint": {"api": google.url, "iam": google.url}});
    v.try_cli_with_stdin(&["write", "auth/gcp/config", "-"], Some(&config.to_string())).unwrap();
    let bound = format!("bound_service_accounts={},{},{}", app.email, mute.email, gke.email);
    v.cli(&["write", "auth/gcp/role/app", "type=iam", &bound, "token_policies=keyward"]);
    let audit = v.audit(&[]);
    let ca_path = ca_file.to_string_lossy().to_string();
    let oauth = format!("{}/token", google.url);
    let env = [
        ("KEYWARD_GCP_STS_ENDPOINT", google.url.as_str()),
        ("KEYWARD_GCP_IAM_CREDENTIALS_ENDPOINT", google.url.as_str()),
        ("KEYWARD_GCP_OAUTH_TOKEN_ENDPOINT", oauth.as_str()),
        ("SSL_CERT_FILE", ca_path.as_str()),
    ];
    let mut p = start_provider_with_env(&env).await;
    let (google, v, audit) = (&google, &v, &audit);
    with_temp_namespace(&[], |_c, other| async move {
        with_temp_namespace(&[], |client, ns| async move {
            let key = format!("{ns}/db");
            v.cli(&["kv", "put", &format!("secret/{key}"), "user=app"]);
            for (name, sa) in [("gcp-app", &app), ("gcp-stranger", &stranger), ("gcp-mute", &mute)] {
                secret(&client, &ns, name, &[("key.json", &sa.json)]).await;
            }
            secret(&client, &other, "gcp-app", &[("key.json", &app.json)]).await;
            let annotated = ObjectMeta {
                name: Some("gke-app".into()),
                annotations: Some([("iam.gke.io/gcp-service-account".to_string(), gke.email.clone())].into()),
                ..Default::default()
            };
            let sa = ServiceAccount { metadata: annotated, ..Default::default() };
            Api::<ServiceAccount>::namespaced(client.clone(), &ns).create(&PostParams::default(), &sa).await.unwrap();
            let key_ref = |name: &str| json!({"secretAccessKeySecretRef": {"name": name, "key": "key.json"}});
            let store = |gcp: serde_json::Value| json!({"server": v.address(), "path": "secret", "auth": {"gcp": gcp}});
            let wi = json!({"serviceAccountRef": {"name": "gke-app"}, "clusterProjectID": "keyward-test",
                            "clusterLocation": "europe-west1", "clusterName": "keyward-e2e"});
            let stores = [
                ("gcp-key", json!({"role": "app", "projectID": "keyward-test", "secretRef": key_ref("gcp-app")})),
                ("gcp-stranger", json!({"role": "app", "secretRef": key_ref("gcp-stranger")})),
                ("gcp-mute", json!({"role": "app", "secretRef": key_ref("gcp-mute")})),
                (
                    "gcp-foreign",
                    json!({"role": "app", "secretRef": {"secretAccessKeySecretRef":
                        {"name": "gcp-app", "key": "key.json", "namespace": other}}}),
                ),
                ("gcp-wi", json!({"role": "app", "path": "gcp", "workloadIdentity": wi})),
            ];
            for (name, gcp) in stores {
                secret_store(&client, &ns, name, store(gcp)).await;
            }
            let c = &mut p.client;
            let read = |name: &str| get(&store_ref(name, &ns), &ns, &key, "user");

            // The key's account signs a JWT, Vault checks it at Google and binds the account:
            // one login for three reads.
            for _ in 0..3 {
                assert_eq!(get_text(c, read("gcp-key")).await.unwrap(), "app");
            }
            assert_eq!(audit.count("auth/gcp/login"), 1, "one login for three reads");
            let log = google.requests();
            for call in [
                "POST /v1/projects/-/serviceAccounts/app%40keyward-test.iam.gserviceaccount.com:signJwt",
                "GET /service_accounts/v1/metadata/x509/app@keyward-test.iam.gserviceaccount.com",
                "GET /v1/projects/-/serviceAccounts/app@keyward-test.iam.gserviceaccount.com",
            ] {
                assert!(log.iter().any(|l| l == call), "{call} not in {log:#?}");
            }

            // An account Vault did not bind to the role.
            let e = get_text(c, read("gcp-stranger")).await.unwrap_err();
            assert_eq!(e.code(), tonic::Code::Unauthenticated, "{e:?}");
            assert!(e.message().contains("logging in at auth/gcp/login"), "{}", e.message());
            assert!(e.message().contains("is not authorized for role"), "{}", e.message());
            // A bound account that may not sign for itself: IAM refuses before Vault is asked.
            let e = get_text(c, read("gcp-mute")).await.unwrap_err();
            assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e:?}");
            assert!(e.message().contains("SignJwt") && e.message().contains("iam.serviceAccounts.signJwt"), "{e:?}");
            // The tenant boundary: a key in another namespace is never read.
            let e = get_text(c, read("gcp-foreign")).await.unwrap_err();
            assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e:?}");
            assert!(e.message().contains("spec.auth.gcp.secretRef.secretAccessKeySecretRef"), "{}", e.message());

            // GKE Workload Identity: the ServiceAccount's token at STS, the annotated account
            // impersonated, which signs for itself.
            let subject = format!("subject/system:serviceaccount:{ns}:gke-app");
            let e = get_text(c, read("gcp-wi")).await.unwrap_err();
            assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e:?}");
            assert!(e.message().contains("GenerateAccessToken"), "{e:?}");
            google.allow_impersonation(&subject, &gke.email);
            assert_eq!(get_text(c, read("gcp-wi")).await.unwrap(), "app");
            assert_eq!(audit.count("auth/gcp/login"), 3, "the key's, the refused stranger's and Workload Identity's");
        })
        .await;
    })
    .await;
    let _ = std::fs::remove_file(&ca_file);
    let _ = std::fs::remove_file(&vault_key);
}
