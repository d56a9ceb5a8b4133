//! The GCP provider through upstream's documented SecretStores (each auth mode), against the
//! Secret Manager protocol test server: reads, properties, versions, `LatestOrFetch`, metadata,
//! finds by labels, pushes with upstream's metadata, deletes, refused credentials and the
//! tenant boundary.

use std::time::Duration;

use crate::common::{self, PROJECT, apply_config, apply_secret, apply_service_account, install_crd, start_provider};
use keyward_e2e::switch::eventually;
use keyward_e2e::{control_plane, with_temp_namespace};
use keyward_proto::v1::{
    DeleteSecretRequest, ExternalSecretDataRemoteRef, ExternalSecretFind, FindName, GetAllSecretsRequest,
    GetSecretRequest, ProviderReference, PushSecretData, PushSecretRemoteRef, PushSecretRequest,
};
use keyward_provider_runtime::testkit::provider_ref;
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};
use tonic::Code;

type Grpc = keyward_proto::v1::secret_store_provider_client::SecretStoreProviderClient<tonic::transport::Channel>;

fn remote(key: &str, property: &str, version: &str, policy: &str) -> Option<ExternalSecretDataRemoteRef> {
    Some(ExternalSecretDataRemoteRef {
        key: key.into(),
        property: property.into(),
        version: version.into(),
        metadata_policy: policy.into(),
        ..Default::default()
    })
}

async fn get(
    c: &Grpc,
    r: &ProviderReference,
    ns: &str,
    remote_ref: Option<ExternalSecretDataRemoteRef>,
) -> Result<String, tonic::Status> {
    let req =
        GetSecretRequest { provider_ref: Some(r.clone()), source_namespace: ns.into(), remote_ref, max_age_millis: 0 };
    Ok(String::from_utf8_lossy(&c.clone().get_secret(req).await?.into_inner().value).into_owned())
}

/// A guide's YAML with its placeholders filled in.
fn guide(file: &str, ns: &str, fill: &[(&str, &str)]) -> Value {
    let path = keyward_e2e::repo_root().join("e2e/fixtures/upstream-guides").join(file);
    let mut text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    for (from, to) in fill {
        text = text.replace(from, to);
    }
    let mut obj: Value = serde_yaml::from_str(&text).expect("the guide's YAML");
    obj["metadata"]["namespace"] = json!(ns);
    obj
}

async fn apply(client: &kube::Client, obj: &Value) {
    let kind = obj["kind"].as_str().expect("kind");
    let name = obj["metadata"]["name"].as_str().expect("name");
    let res = ApiResource::from_gvk(&GroupVersionKind::gvk("external-secrets.io", "v1", kind));
    let api: kube::Api<DynamicObject> = match obj["metadata"]["namespace"].as_str() {
        Some(ns) if kind != "ClusterSecretStore" => kube::Api::namespaced_with(client.clone(), ns, &res),
        _ => kube::Api::all_with(client.clone(), &res),
    };
    api.patch(name, &PatchParams::apply("keyward-gcp-tests").force(), &Patch::Apply(obj))
        .await
        .unwrap_or_else(|e| panic!("apply {kind} {name}: {e}"));
}

#[tokio::test(flavor = "multi_thread")]
async fn upstream_service_account_key_stores_read_push_and_delete() {
    let _guard = common::shared().await;
    let g = common::google().await;
    let sa = g.server.service_account("eso@keyward-test.iam.gserviceaccount.com", true);
    let stranger = g.server.service_account("nobody@keyward-test.iam.gserviceaccount.com", false);
    let p = start_provider(&g).await;
    let c = p.client.clone();
    with_temp_namespace(&[], |client, ns| async move {
        install_crd(&client).await;
        // The guide's key Secret (its key file replaced by a real one) and SecretStore.
        let mut secret = guide("gcpsm-sa-credentials-secret.yaml", &ns, &[]);
        secret["stringData"]["secret-access-credentials"] = json!(sa.json);
        let api: kube::Api<k8s_openapi::api::core::v1::Secret> = kube::Api::namespaced(client.clone(), &ns);
        api.patch("gcp-sa-secret", &PatchParams::apply("keyward-gcp-tests").force(), &Patch::Apply(&secret)).await.expect("Secret");
        apply(&client, &guide("gcpsm-sa-secret-store.yaml", &ns, &[("[PROJECT_ID]", PROJECT)])).await;
        let store = provider_ref("SecretStore", "demo-store", "", "SecretStore");

        g.server.seed(PROJECT, "", "database_password", b"v1", &[]);
        g.server.seed(PROJECT, "", "database_password", br#"{"user":"app","db":{"host":"h"}}"#, &[("env", "prod")]);
        assert_eq!(get(&c, &store, &ns, remote("database_password", "", "", "")).await.expect("latest"), r#"{"user":"app","db":{"host":"h"}}"#);
        assert_eq!(get(&c, &store, &ns, remote("database_password", "", "1", "")).await.expect("version 1"), "v1");
        assert_eq!(get(&c, &store, &ns, remote("database_password", "db.host", "", "")).await.expect("path"), "h");
        assert_eq!(get(&c, &store, &ns, remote("database_password", "labels.env", "", "Fetch")).await.expect("label"), "prod");
        let e = get(&c, &store, &ns, remote("missing", "", "", "")).await.expect_err("missing");
        assert_eq!(e.code(), Code::NotFound, "{e:?}");
        let e = get(&c, &store, &ns, remote("database_password", "", "9", "")).await.expect_err("no version 9");
        assert_eq!(e.code(), Code::NotFound, "{e:?}");

        // LatestOrFetch: a disabled latest falls back to the newest enabled version.
        g.server.set_state(PROJECT, "", "database_password", 2, "DISABLED");
        let e = get(&c, &store, &ns, remote("database_password", "", "", "")).await.expect_err("LatestOrFail");
        assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
        apply_config(&client, &ns, "fetch", json!({"projectID": PROJECT, "secretVersionSelectionPolicy": "LatestOrFetch",
            "auth": {"secretRef": {"secretAccessKeySecretRef": {"name": "gcp-sa-secret", "key": "secret-access-credentials"}}}})).await;
        let fetch = provider_ref("GCPSecretManager", "fetch", "", "Provider");
        assert_eq!(get(&c, &fetch, &ns, remote("database_password", "", "", "")).await.expect("LatestOrFetch"), "v1");
        g.server.set_state(PROJECT, "", "database_password", 2, "ENABLED");

        // A find by labels.
        g.server.seed(PROJECT, "", "other", b"o", &[("env", "dev")]);
        let find = ExternalSecretFind { tags: [("env".to_string(), "prod".to_string())].into(), ..Default::default() };
        let req = GetAllSecretsRequest { provider_ref: Some(store.clone()), source_namespace: ns.clone(), find: Some(find) };
        let found = c.clone().get_all_secrets(req).await.expect("find").into_inner().secrets;
        assert_eq!(found.keys().collect::<Vec<_>>(), ["database_password"]);
        // find.path narrows a find by name to the IDs it starts; alone it is refused, as upstream.
        let by_name = |path: &str, regexp: Option<&str>| GetAllSecretsRequest {
            provider_ref: Some(store.clone()),
            source_namespace: ns.clone(),
            find: Some(ExternalSecretFind {
                path: path.into(),
                name: regexp.map(|r| FindName { regexp: r.into() }),
                ..Default::default()
            }),
        };
        let found = c.clone().get_all_secrets(by_name("data", Some(".*"))).await.expect("path").into_inner().secrets;
        assert_eq!(found.keys().collect::<Vec<_>>(), ["database_password"]);
        let e = c.clone().get_all_secrets(by_name("data", None)).await.expect_err("path alone");
        assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");

        // A push with upstream's metadata creates the secret with them; a delete removes it.
        let metadata = json!({"apiVersion": "kubernetes.external-secrets.io/v1alpha1", "kind": "PushSecretMetadata",
            "spec": {"labels": {"team": "a"}, "annotations": {"owner": "me"}, "replicationLocations": ["us-east1"]}});
        let push = PushSecretRequest {
            provider_ref: Some(store.clone()),
            source_namespace: ns.clone(),
            secret_data: [("k".to_string(), b"pushed".to_vec())].into(),
            push_secret_data: Some(PushSecretData {
                secret_key: "k".into(),
                remote_key: "pushed".into(),
                metadata: serde_json::to_vec(&metadata).expect("json"),
                ..Default::default()
            }),
        };
        c.clone().push_secret(push.clone()).await.expect("push");
        assert_eq!(g.server.latest(PROJECT, "", "pushed").as_deref(), Some(&b"pushed"[..]));
        assert_eq!(g.server.labels(PROJECT, "", "pushed"), Some(json!({"team": "a", "managed-by": "external-secrets"})));
        assert_eq!(get(&c, &store, &ns, remote("pushed", "annotations.owner", "", "Fetch")).await.expect("annotation"), "me");
        let before = g.server.requests().iter().filter(|r| r.ends_with(":addVersion")).count();
        c.clone().push_secret(push).await.expect("push again");
        let after = g.server.requests().iter().filter(|r| r.ends_with(":addVersion")).count();
        assert_eq!(before, after, "an unchanged value adds no version");
        // A secret Keyward does not manage is neither overwritten nor deleted.
        let foreign = PushSecretRequest {
            provider_ref: Some(store.clone()),
            source_namespace: ns.clone(),
            secret_data: [("k".to_string(), b"x".to_vec())].into(),
            push_secret_data: Some(PushSecretData { secret_key: "k".into(), remote_key: "other".into(), ..Default::default() }),
        };
        assert_eq!(c.clone().push_secret(foreign).await.expect_err("foreign").code(), Code::PermissionDenied);
        for key in ["pushed", "other"] {
            let del = DeleteSecretRequest {
                provider_ref: Some(store.clone()),
                source_namespace: ns.clone(),
                remote_ref: Some(PushSecretRemoteRef { remote_key: key.into(), ..Default::default() }),
            };
            c.clone().delete_secret(del).await.expect("delete");
        }
        assert_eq!(g.server.latest(PROJECT, "", "pushed"), None);
        assert_eq!(g.server.latest(PROJECT, "", "other").as_deref(), Some(&b"o"[..]), "not Keyward's: left alone");

        // The guide's ClusterSecretStore: the same block, the Secret's namespace named.
        let css = format!("gcp-{ns}");
        let mut cluster = guide("gcpsm-sa-secret-store.yaml", &ns, &[("[PROJECT_ID]", PROJECT)]);
        cluster["kind"] = json!("ClusterSecretStore");
        cluster["metadata"] = json!({"name": css});
        cluster["spec"]["provider"]["gcpsm"]["auth"]["secretRef"]["secretAccessKeySecretRef"]["namespace"] = json!(ns);
        apply(&client, &cluster).await;
        let r = provider_ref("ClusterSecretStore", &css, "", "ClusterSecretStore");
        let got = get(&c, &r, &ns, remote("database_password", "user", "", "")).await;
        let res = ApiResource::from_gvk(&GroupVersionKind::gvk("external-secrets.io", "v1", "ClusterSecretStore"));
        let _ = kube::Api::<DynamicObject>::all_with(client.clone(), &res).delete(&css, &Default::default()).await;
        assert_eq!(got.expect("a ClusterSecretStore"), "app");

        // A key Google does not know, and one not granted: refused as Secret Manager refuses.
        let mut unknown: Value = serde_json::from_str(&stranger.json).expect("key");
        unknown["client_email"] = json!("ghost@keyward-test.iam.gserviceaccount.com");
        for (name, key, code) in [("unknown", unknown.to_string(), Code::Unauthenticated), ("stranger", stranger.json.clone(), Code::PermissionDenied)] {
            apply_secret(&client, &ns, name, &[("key.json", &key)]).await;
            apply_config(&client, &ns, name, common::key_spec(name)).await;
            let e = get(&c, &provider_ref("GCPSecretManager", name, "", "Provider"), &ns, remote("database_password", "", "", "")).await;
            assert_eq!(e.expect_err(name).code(), code, "{name}");
        }

        // A configuration deleted and created again under the same name, now with a key that is
        // not granted: the next read that accepts no aged answer uses the new key at once; one
        // accepting an aged answer is served from the configuration watch, which may trail the
        // API server a moment, and then uses it too (answers are kept per object UID, not per
        // name and generation).
        let swap = provider_ref("GCPSecretManager", "swap", "", "Provider");
        let aged = |c: &Grpc, max_age_millis: u32| {
            let req = GetSecretRequest {
                provider_ref: Some(swap.clone()),
                source_namespace: ns.clone(),
                remote_ref: remote("database_password", "user", "", ""),
                max_age_millis,
            };
            let mut c = c.clone();
            async move { c.get_secret(req).await.map(|r| String::from_utf8_lossy(&r.into_inner().value).into_owned()) }
        };
        apply_secret(&client, &ns, "swap-granted", &[("key.json", &sa.json)]).await;
        apply_secret(&client, &ns, "swap-stranger", &[("key.json", &stranger.json)]).await;
        apply_config(&client, &ns, "swap", common::key_spec("swap-granted")).await;
        assert_eq!(aged(&c, 600_000).await.expect("the first object"), "app");
        common::recreate_config(&client, &ns, "swap", common::key_spec("swap-stranger")).await;
        let e = aged(&c, 0).await.expect_err("the second object's key is not granted");
        assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
        let e = eventually("an aged read served with the new object", Duration::from_secs(10), || async {
            aged(&c, 600_000).await.err()
        })
        .await;
        assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");

        // A tenant's store without auth would use the provider's own identity: refused.
        apply(&client, &guide("gcpsm-wif-core-controller-secret-store.yaml", &ns, &[("[PROJECT_ID]", PROJECT)])).await;
        let own = provider_ref("SecretStore", "demo-store", "", "SecretStore");
        let e = get(&c, &own, &ns, remote("database_password", "", "", "")).await.expect_err("own identity");
        assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
        assert!(e.message().contains("provider's own credentials"), "{e:?}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn upstream_workload_identity_stores_exchange_service_account_tokens() {
    let _guard = common::shared().await;
    let cp = control_plane().await;
    let g = common::google().await;
    g.server.trust_kubernetes(&cp.dir().join("pki/sa.pub"));
    let gsa = g.server.service_account("secrets@keyward-test.iam.gserviceaccount.com", true);
    let p = start_provider(&g).await;
    let c = p.client.clone();
    with_temp_namespace(&[], |client, ns| async move {
        install_crd(&client).await;
        g.server.seed(PROJECT, "", "demo-secret", b"s3cret", &[]);
        let subject = format!("subject/system:serviceaccount:{ns}:demo-secrets-sa");
        let fill = [
            ("[PROJECT_ID]", PROJECT),
            ("[CLUSTER_PROJECT_ID]", PROJECT),
            ("[CLUSTER_LOCATION]", "europe-west1"),
            ("[CLUSTER_NAME]", "keyward-e2e"),
            ("[WORKLOAD_IDENTITY_POOL]", "pool"),
            ("[WORKLOAD_IDENTITY_PROVIDER]", "k8s"),
        ];
        let store = provider_ref("SecretStore", "demo-store", "", "SecretStore");

        // The Kubernetes ServiceAccount as the IAM principal: STS's federated token reads.
        apply_service_account(&client, &ns, "demo-secrets-sa", &[]).await;
        apply(&client, &guide("gcpsm-wif-iam-secret-store.yaml", &ns, &fill)).await;
        let e = get(&c, &store, &ns, remote("demo-secret", "", "", "")).await.expect_err("not granted yet");
        assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
        g.server.grant(&subject);
        // A new store generation builds a new client with a new exchange.
        apply(&client, &guide("gcpsm-wif-sa-secret-store-with-explicit-name-and-location.yaml", &ns, &fill)).await;
        assert_eq!(get(&c, &store, &ns, remote("demo-secret", "", "", "")).await.expect("WI principal"), "s3cret");
        g.server.revoke(&subject);

        // Linked to a Google service account: STS, then generateAccessToken as that account.
        apply_service_account(&client, &ns, "demo-secrets-sa", &[("iam.gke.io/gcp-service-account", &gsa.email)]).await;
        apply(&client, &guide("gcpsm-wif-sa-secret-store.yaml", &ns, &fill)).await;
        let e = get(&c, &store, &ns, remote("demo-secret", "", "", "")).await.expect_err("no impersonation grant");
        assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
        assert!(e.message().contains("GenerateAccessToken"), "{e:?}");
        g.server.allow_impersonation(&subject, &gsa.email);
        let mut bumped = guide("gcpsm-wif-sa-secret-store.yaml", &ns, &fill);
        bumped["spec"]["provider"]["gcpsm"]["auth"]["workloadIdentity"]["clusterName"] = json!("keyward-e2e");
        apply(&client, &bumped).await;
        assert_eq!(get(&c, &store, &ns, remote("demo-secret", "", "", "")).await.expect("impersonated"), "s3cret");

        // Workload Identity Federation with the ServiceAccount's token and the provider's audience.
        apply_service_account(&client, &ns, "demo-secrets-sa", &[]).await;
        g.server.grant(&subject);
        // As printed, the store names the guide's namespace `demo`: another namespace than the
        // tenant's own, which the boundary refuses before any token is asked for.
        let mut federated = guide("gcpsm-wif-non-native-iam-secret-store.yaml", &ns, &fill);
        apply(&client, &federated).await;
        let e = get(&c, &store, &ns, remote("demo-secret", "", "", "")).await.expect_err("another namespace");
        assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
        assert!(e.message().contains("outside namespace"), "{e:?}");
        federated["spec"]["provider"]["gcpsm"]["auth"]["workloadIdentityFederation"]["serviceAccountRef"]["namespace"] =
            json!(ns);
        apply(&client, &federated).await;
        assert_eq!(get(&c, &store, &ns, remote("demo-secret", "", "", "")).await.expect("federated"), "s3cret");
        let log = g.server.requests();
        assert!(log.iter().any(|r| r == "POST /v1/token"), "{log:?}");
        assert!(log.iter().any(|r| r.ends_with(":generateAccessToken")), "{log:?}");

        // Workload Identity Federation with AWS keys: a signed GetCallerIdentity request is the
        // subject token, checked by STS (signature, target resource); a wrong key is refused.
        let arn = "arn:aws:sts::123456789012:assumed-role/eso/keyward";
        g.server.trust_aws_key("AKIDKEYWARDGCP", "aws-s3cret", arn);
        apply_secret(&client, &ns, "aws-creds", &[("aws_access_key_id", "AKIDKEYWARDGCP"), ("aws_secret_access_key", "wrong")])
            .await;
        let aws = json!({"apiVersion": "external-secrets.io/v1", "kind": "SecretStore",
            "metadata": {"name": "aws-store", "namespace": ns},
            "spec": {"provider": {"gcpsm": {"projectID": PROJECT, "auth": {"workloadIdentityFederation": {
                "audience": "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/pool/providers/aws",
                "awsSecurityCredentials": {"region": "eu-west-1", "awsCredentialsSecretRef": {"name": "aws-creds"}}}}}}}});
        apply(&client, &aws).await;
        let aws_store = provider_ref("SecretStore", "aws-store", "", "SecretStore");
        let e = get(&c, &aws_store, &ns, remote("demo-secret", "", "", "")).await.expect_err("wrong AWS key");
        assert!(e.message().contains("signature does not match"), "{e:?}");
        apply_secret(&client, &ns, "aws-creds", &[("aws_access_key_id", "AKIDKEYWARDGCP"), ("aws_secret_access_key", "aws-s3cret")])
            .await;
        g.server.grant(&format!("subject/{arn}"));
        assert_eq!(get(&c, &aws_store, &ns, remote("demo-secret", "", "", "")).await.expect("AWS federated"), "s3cret");
    })
    .await;
}
