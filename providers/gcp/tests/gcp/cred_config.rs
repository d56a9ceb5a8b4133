//! `workloadIdentityFederation.credConfig` through the GCP provider process, against the
//! protocol test server's STS and the local control plane: an `external_account` configuration
//! in a ConfigMap whose `credential_source.file` holds a ServiceAccount token (as a projected
//! token volume of the provider's Pod would), used by the operator's configuration; the same
//! configuration of a tenant refused before the ConfigMap or the file is read; a source Keyward
//! does not serve refused naming it.

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use keyward_e2e::{control_plane, with_temp_namespace};
use keyward_proto::v1::{ExternalSecretDataRemoteRef, GetSecretRequest, ProviderReference};
use keyward_provider_runtime::testkit::{operator_ref, provider_ref};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tonic::Code;

use crate::common::{self, PROJECT, apply_config, apply_service_account, install_crd, start_provider};

const AUDIENCE: &str = "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/pool/providers/k8s";

type Grpc = keyward_proto::v1::secret_store_provider_client::SecretStoreProviderClient<tonic::transport::Channel>;

async fn get(c: &Grpc, r: ProviderReference, ns: &str, key: &str) -> Result<String, tonic::Status> {
    let remote_ref = Some(ExternalSecretDataRemoteRef { key: key.into(), ..Default::default() });
    let req = GetSecretRequest { provider_ref: Some(r), source_namespace: ns.into(), remote_ref, max_age_millis: 0 };
    Ok(String::from_utf8_lossy(&c.clone().get_secret(req).await?.into_inner().value).into_owned())
}

async fn apply_config_map(client: &kube::Client, ns: &str, name: &str, key: &str, value: &str) {
    let obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}, "data": {key: value}});
    Api::<ConfigMap>::namespaced(client.clone(), ns)
        .patch(name, &PatchParams::apply("keyward-gcp-tests").force(), &Patch::Apply(&obj))
        .await
        .unwrap_or_else(|e| panic!("apply ConfigMap {ns}/{name}: {e}"));
}

fn cred_config(source: Value) -> String {
    json!({"type": "external_account", "audience": AUDIENCE, "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
           "token_url": "https://sts.googleapis.com/v1/token", "credential_source": source})
    .to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn cred_config_federates_for_the_operators_configurations_only() {
    let _guard = common::shared().await;
    let cp = control_plane().await;
    let g = common::google().await;
    g.server.trust_kubernetes(&cp.dir().join("pki/sa.pub"));
    let p = start_provider(&g).await;
    let c = p.client.clone();
    let dir = tempfile::tempdir().expect("temp dir");
    with_temp_namespace(&[], |client, ns| {
        let (g, dir) = (&g, &dir);
        async move {
            install_crd(&client).await;
            g.server.seed(PROJECT, "", "federated", b"f3d", &[]);
            apply_service_account(&client, &ns, "workload", &[]).await;
            let spec = TokenRequestSpec { audiences: Some(vec![AUDIENCE.into()]), ..Default::default() };
            let request = TokenRequest { spec: Some(spec), ..Default::default() };
            let issued = Api::<ServiceAccount>::namespaced(client.clone(), &ns)
                .create_token_request("workload", &PostParams::default(), &request)
                .await
                .expect("a ServiceAccount token");
            let file = dir.path().join("token");
            std::fs::write(&file, issued.status.and_then(|s| s.token).expect("a token")).expect("token file");
            let source = json!({"file": file, "format": {"type": "text"}});
            apply_config_map(&client, &ns, "cred", "config.json", &cred_config(source)).await;
            let spec = json!({"projectID": PROJECT, "auth": {"workloadIdentityFederation": {
                "credConfig": {"name": "cred", "key": "config.json"}}}});
            apply_config(&client, &ns, "cred", spec).await;
            g.server.grant(&format!("subject/system:serviceaccount:{ns}:workload"));

            // A tenant's configuration: refused before anything is read or asked.
            let before = g.server.requests().len();
            let e = get(&c, provider_ref("GCPSecretManager", "cred", "", "Provider"), &ns, "federated")
                .await
                .expect_err("a tenant's credConfig");
            assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
            assert!(e.message().contains("credConfig") && e.message().contains("provider's own"), "{e:?}");
            assert_eq!(g.server.requests().len(), before, "nothing was asked of Google");

            // The operator's: the file's token exchanged at STS for the configuration's audience.
            let got = get(&c, operator_ref("GCPSecretManager", "cred", &ns), &ns, "federated").await;
            assert_eq!(got.expect("the operator's credConfig"), "f3d");
            assert!(g.server.requests().iter().any(|r| r == "POST /v1/token"));

            // A source Keyward does not serve: refused naming it.
            let source = json!({"executable": {"command": "/usr/bin/get-token"}});
            apply_config_map(&client, &ns, "cred", "config.json", &cred_config(source)).await;
            let spec = json!({"projectID": PROJECT, "location": "", "auth": {"workloadIdentityFederation": {
                "credConfig": {"name": "cred", "key": "config.json"}, "audience": AUDIENCE}}});
            apply_config(&client, &ns, "cred", spec).await;
            let e =
                get(&c, operator_ref("GCPSecretManager", "cred", &ns), &ns, "federated").await.expect_err("executable");
            assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
            assert!(e.message().contains("credential_source.executable is not served"), "{e:?}");
        }
    })
    .await;
}
