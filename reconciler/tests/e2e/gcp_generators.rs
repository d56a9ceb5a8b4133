//! End to end: the GCRAccessToken generator through the reconciler. An ExternalSecret's
//! `dataFrom` generatorRef names a GCRAccessToken (directly, and through a ClusterGenerator);
//! the reconciler sends it to the GCP provider process, which exchanges the generator's
//! service-account key at the OAuth token endpoint of the GCP protocol test server, and the
//! target Secret holds upstream's registry login (`username`, `password`, `expiry`). Each
//! refresh generates again: a new token, still of the generator's service account, replaces the
//! old one in the Secret.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::Secret;
use keyward_certs::{CertificateAuthority, Usage};
use keyward_crds::ExternalSecret;
use keyward_e2e::stores::SecretManagerServer;
use keyward_e2e::with_temp_namespace;
use kube::Api;
use serde_json::{Value, json};

use crate::support::*;

const WAIT: Duration = Duration::from_secs(90);
const PROJECT: &str = "keyward-e2e";

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

#[tokio::test(flavor = "multi_thread")]
async fn gcr_access_token_generator_fills_and_refreshes_the_target_secret() {
    let _turn = shared().await;
    let ca = CertificateAuthority::generate("keyward-gcr-e2e-ca", Duration::from_secs(86_400)).unwrap();
    let leaf = ca.issue(&["127.0.0.1"], Usage::Server, Duration::from_secs(86_400)).unwrap();
    let google = SecretManagerServer::start((&leaf.cert_pem, &leaf.key_pem)).await;
    let ca_dir = tempfile::tempdir().unwrap();
    let ca_file = ca_dir.path().join("ca.pem");
    std::fs::write(&ca_file, ca.cert_pem()).unwrap();
    with_temp_namespace(&[], |client, ns| {
        let google = &google;
        let ca_file = ca_file.to_string_lossy().to_string();
        async move {
            let pki = Pki::new();
            pki.install(&client, &ns).await;
            let url = google.url.as_str();
            let oauth = format!("{url}/token");
            let env = [
                ("KEYWARD_GCP_OAUTH_TOKEN_ENDPOINT", oauth.as_str()),
                ("KEYWARD_GCP_STS_ENDPOINT", url),
                ("KEYWARD_GCP_IAM_CREDENTIALS_ENDPOINT", url),
                ("SSL_CERT_FILE", ca_file.as_str()),
            ];
            let gcp = ProviderProcess::start_with_env("keyward-provider-gcp", pki.provider_dir(), &env).await;

            // The generator's identity: a service-account key the token endpoint knows. The
            // account needs no Secret Manager grant: a registry token is all it is used for.
            let pusher = google.service_account("pusher@keyward-e2e.iam.gserviceaccount.com", false);
            kubectl_apply(
                &ns,
                &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "gcr-key"},
                        "stringData": {"secret-access-credentials": pusher.json}}),
            );
            let spec = json!({"projectID": PROJECT, "auth": {"secretRef": {"secretAccessKeySecretRef":
                              {"name": "gcr-key", "key": "secret-access-credentials"}}}});
            kubectl_apply(
                &ns,
                &json!({"apiVersion": "generators.external-secrets.io/v1alpha1", "kind": "GCRAccessToken",
                        "metadata": {"name": "gcr"}, "spec": spec}),
            );
            let cluster_generator = format!("{ns}-gcr");
            let _cleanup = ClusterGenerators(vec![cluster_generator.clone()]);
            kubectl_apply(
                &ns,
                &json!({"apiVersion": "generators.external-secrets.io/v1alpha1", "kind": "ClusterGenerator",
                        "metadata": {"name": cluster_generator},
                        "spec": {"kind": "GCRAccessToken", "generator": {"gcrAccessTokenSpec": spec},
                                 "conditions": [{"namespaces": [ns]}]}}),
            );

            let _reconciler = Reconciler::start_with_stores(&ns, &[("gcp", &gcp)], &[]).await;
            let ess: Api<ExternalSecret> = Api::namespaced(client.clone(), &ns);
            let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
            // Refreshed every 2 s: each refresh is a new generation.
            let mut refreshed: Value = generator_external_secret("gcr", &ns, "GCRAccessToken", "gcr");
            refreshed["spec"]["refreshInterval"] = json!("2s");
            apply(&ess, refreshed).await;
            apply(&ess, generator_external_secret("via-cluster", &ns, "ClusterGenerator", &cluster_generator)).await;

            // A registry login under upstream's keys, its password a token the server issued to
            // the generator's service account.
            let first = eventually("Secret gcr holds a registry login", WAIT, || async {
                value(&secrets.get_opt("gcr").await.ok()??, "password")
            })
            .await;
            let login = secrets.get("gcr").await.unwrap();
            let mut keys: Vec<String> = login.data.as_ref().map(|d| d.keys().cloned().collect()).unwrap_or_default();
            keys.sort();
            assert_eq!(keys, ["expiry", "password", "username"]);
            assert_eq!(value(&login, "username").as_deref(), Some("oauth2accesstoken"));
            assert_eq!(google.token_principal(&first).as_deref(), Some(pusher.email.as_str()), "{first}");
            let expiry: u64 = value(&login, "expiry").unwrap().parse().expect("Unix seconds");
            assert!((now() + 3000..=now() + 3600).contains(&expiry), "{expiry}");
            let via = eventually("Secret via-cluster holds a registry login", WAIT, || async {
                value(&secrets.get_opt("via-cluster").await.ok()??, "password")
            })
            .await;
            assert_eq!(google.token_principal(&via).as_deref(), Some(pusher.email.as_str()), "{via}");

            // The refresh: a later generation asks the token endpoint again (only the server
            // issues tokens it knows), and its new token replaces the first in the Secret.
            let second = eventually("a refresh writes a new token", WAIT, || async {
                let password = value(&secrets.get_opt("gcr").await.ok()??, "password")?;
                (password != first).then_some(password)
            })
            .await;
            assert_eq!(google.token_principal(&second).as_deref(), Some(pusher.email.as_str()), "{second}");
            assert!(google.requests().iter().any(|r| r == "POST /token"), "the JWT-bearer grant");
        }
    })
    .await;
}
