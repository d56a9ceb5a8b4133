//! The AWS provider as a process, over real mTLS, against moto's server (real Secrets Manager,
//! Parameter Store and STS APIs on loopback) and the local control plane: reads by version and
//! property, finds, pushes and deletes, assumed roles, web identity, SecretStores and
//! ClusterSecretStores with `spec.provider.aws`, and the tenant boundary.

use crate::common;

use aws_sdk_ssm::Client as Ssm;
use aws_sdk_ssm::types::ParameterType;
use k8s_openapi::api::core::v1::ServiceAccount;
use keyward_e2e::stores::Moto;
use keyward_e2e::with_temp_namespace;
use keyward_proto::v1::secret_store_provider_client::SecretStoreProviderClient;
use keyward_proto::v1::{
    DeleteSecretRequest, ExternalSecretDataRemoteRef, ExternalSecretFind, FindName, GetAllSecretsRequest,
    GetSecretMapRequest, GetSecretRequest, ProviderReference, PushSecretData, PushSecretRemoteRef, PushSecretRequest,
    SecretExistsRequest, ValidateRequest,
};
use keyward_provider_runtime::testkit::{launch, operator_ref, provider_ref};
use kube::api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ObjectMeta, PostParams};
use kube::{Api, Client};
use serde_json::json;
use tonic::transport::Channel;

use crate::common::{REGION, aws_store, config, keys, keys_secret, sm, ssm, start_provider, store, store_ref};

fn meta(name: &str) -> ObjectMeta {
    ObjectMeta { name: Some(name.into()), ..Default::default() }
}

fn get(r: &ProviderReference, ns: &str, key: &str, property: &str, version: &str) -> GetSecretRequest {
    GetSecretRequest {
        provider_ref: Some(r.clone()),
        source_namespace: ns.into(),
        remote_ref: Some(ExternalSecretDataRemoteRef {
            key: key.into(),
            property: property.into(),
            version: version.into(),
            ..Default::default()
        }),
        max_age_millis: 0,
    }
}

async fn get_text(c: &mut SecretStoreProviderClient<Channel>, req: GetSecretRequest) -> Result<String, tonic::Status> {
    c.get_secret(req).await.map(|r| String::from_utf8(r.into_inner().value).unwrap())
}

#[tokio::test(flavor = "multi_thread")]
async fn reads_versions_metadata_and_finds_by_tags() {
    let _guard = common::shared().await;
    let moto = Moto::start();
    let mut p = start_provider(&moto).await;
    let sm = sm(&moto).await;
    with_temp_namespace(&[], |client, ns| async move {
        let prefix = format!("{ns}/");
        keys_secret(&client, &ns).await.unwrap();
        config(&client, &ns, "aws", json!({"region": REGION, "auth": keys(None), "prefix": prefix})).await.unwrap();
        let first = sm
            .create_secret()
            .name(format!("{prefix}app/db"))
            .secret_string(r#"{"user":"app","password":"one","conn":{"host":"db"}}"#)
            .tags(aws_sdk_secretsmanager::types::Tag::builder().key("team").value("a").build())
            .send()
            .await
            .unwrap();
        let v1 = first.version_id().unwrap().to_string();
        sm.put_secret_value()
            .secret_id(format!("{prefix}app/db"))
            .secret_string(r#"{"user":"app","password":"two"}"#)
            .send()
            .await
            .unwrap();
        sm.create_secret().name(format!("{prefix}web/token")).secret_string("plain-token").send().await.unwrap();

        let r = provider_ref("SecretsManager", "aws", "", "Provider");
        let c = &mut p.client;
        assert_eq!(get_text(c, get(&r, &ns, "app/db", "password", "")).await.unwrap(), "two");
        assert_eq!(get_text(c, get(&r, &ns, "app/db", "password", "AWSPREVIOUS")).await.unwrap(), "one");
        assert_eq!(get_text(c, get(&r, &ns, "app/db", "conn.host", &format!("uuid/{v1}"))).await.unwrap(), "db");
        assert_eq!(get_text(c, get(&r, &ns, "web/token", "", "")).await.unwrap(), "plain-token");
        let mut fetch = get(&r, &ns, "app/db", "team", "");
        fetch.remote_ref.as_mut().unwrap().metadata_policy = "Fetch".into();
        assert_eq!(get_text(c, fetch).await.unwrap(), "a", "metadataPolicy Fetch reads tags");

        let find = |regexp: &str, path: &str, tags: &[(&str, &str)]| GetAllSecretsRequest {
            provider_ref: Some(r.clone()),
            source_namespace: ns.clone(),
            find: Some(ExternalSecretFind {
                name: (!regexp.is_empty()).then(|| FindName { regexp: regexp.into() }),
                path: path.into(),
                tags: tags.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
                ..Default::default()
            }),
        };
        let names = |m: std::collections::HashMap<String, Vec<u8>>| {
            let mut k: Vec<String> = m.into_keys().collect();
            k.sort();
            k
        };
        // By tags (names, paths, not-found, maps and Validate: the conformance suite).
        let all = c.get_all_secrets(find("", "", &[("team", "a")])).await.unwrap().into_inner().secrets;
        assert_eq!(names(all), ["app/db"]);
    })
    .await;
    drop(p.child);
}

#[tokio::test(flavor = "multi_thread")]
async fn pushes_deletes_and_assumes_roles() {
    let _guard = common::shared().await;
    let moto = Moto::start();
    let mut p = start_provider(&moto).await;
    let sm = sm(&moto).await;
    with_temp_namespace(&[], |client, ns| async move {
        let prefix = format!("{ns}/");
        keys_secret(&client, &ns).await.unwrap();
        // The role chain goes through moto's STS.
        config(
            &client,
            &ns,
            "aws",
            json!({"region": REGION, "auth": keys(None), "prefix": prefix,
                   "role": "arn:aws:iam::123456789012:role/keyward", "externalID": "x",
                   "sessionTags": [{"key": "team", "value": "a"}],
                   "secretsManager": {"forceDeleteWithoutRecovery": true}}),
        )
        .await
        .unwrap();
        let r = provider_ref("SecretsManager", "aws", "", "Provider");
        let c = &mut p.client;
        let source: std::collections::HashMap<String, Vec<u8>> =
            [("password".to_string(), b"p1".to_vec()), ("user".to_string(), b"app".to_vec())].into();
        let push = |key: &str, remote: &str, prop: &str, meta: serde_json::Value| PushSecretRequest {
            provider_ref: Some(r.clone()),
            source_namespace: ns.clone(),
            secret_data: source.clone(),
            push_secret_data: Some(PushSecretData {
                secret_key: key.into(),
                remote_key: remote.into(),
                property: prop.into(),
                metadata: if meta.is_null() { vec![] } else { meta.to_string().into_bytes() },
            }),
        };
        let meta = json!({"apiVersion": "kubernetes.external-secrets.io/v1alpha1", "kind": "PushSecretMetadata",
                          "spec": {"secretPushFormat": "string", "tags": {"owner": "team-a"}}});
        c.push_secret(push("password", "pushed/db", "pw", meta.clone())).await.unwrap();
        c.push_secret(push("user", "pushed/db", "user", meta)).await.unwrap();
        let stored = sm.get_secret_value().secret_id(format!("{prefix}pushed/db")).send().await.unwrap();
        let value: serde_json::Value = serde_json::from_str(stored.secret_string().unwrap()).unwrap();
        assert_eq!(value, json!({"pw": "p1", "user": "app"}), "properties merge into one JSON value");
        let described = sm.describe_secret().secret_id(format!("{prefix}pushed/db")).send().await.unwrap();
        let tags: Vec<(String, String)> =
            described.tags().iter().map(|t| (t.key().unwrap().to_string(), t.value().unwrap().to_string())).collect();
        assert!(tags.contains(&("managed-by".into(), "external-secrets".into())), "{tags:?}");
        assert!(tags.contains(&("owner".into(), "team-a".into())), "{tags:?}");

        // Binary (the default format): the whole source Secret as JSON.
        c.push_secret(push("", "pushed/all", "", serde_json::Value::Null)).await.unwrap();
        let stored = sm.get_secret_value().secret_id(format!("{prefix}pushed/all")).send().await.unwrap();
        let value: serde_json::Value = serde_json::from_slice(stored.secret_binary().unwrap().as_ref()).unwrap();
        assert_eq!(value, json!({"password": "p1", "user": "app"}));

        // A secret nobody pushed is left alone.
        sm.create_secret().name(format!("{prefix}foreign")).secret_string("mine").send().await.unwrap();
        let refused = c.push_secret(push("password", "foreign", "", serde_json::Value::Null)).await.unwrap_err();
        assert_eq!(refused.code(), tonic::Code::PermissionDenied, "{refused:?}");

        let exists = |remote: &str, prop: &str| SecretExistsRequest {
            provider_ref: Some(r.clone()),
            source_namespace: ns.clone(),
            remote_ref: Some(PushSecretRemoteRef {
                remote_key: remote.into(),
                property: prop.into(),
                ..Default::default()
            }),
        };
        let delete = |remote: &str, prop: &str| DeleteSecretRequest {
            provider_ref: Some(r.clone()),
            source_namespace: ns.clone(),
            remote_ref: Some(PushSecretRemoteRef {
                remote_key: remote.into(),
                property: prop.into(),
                ..Default::default()
            }),
        };
        assert!(c.secret_exists(exists("pushed/db", "pw")).await.unwrap().into_inner().exists);
        c.delete_secret(delete("pushed/db", "pw")).await.unwrap();
        assert!(!c.secret_exists(exists("pushed/db", "pw")).await.unwrap().into_inner().exists);
        assert!(c.secret_exists(exists("pushed/db", "")).await.unwrap().into_inner().exists);
        c.delete_secret(delete("pushed/db", "")).await.unwrap();
        assert!(!c.secret_exists(exists("pushed/db", "")).await.unwrap().into_inner().exists);
        c.delete_secret(delete("pushed/db", "")).await.expect("deleting what is gone succeeds");
        c.delete_secret(delete("foreign", "")).await.unwrap();
        assert!(sm.get_secret_value().secret_id(format!("{prefix}foreign")).send().await.is_ok(), "kept");

        // With a recovery window the secret is only scheduled for deletion: gone for reads,
        // existence checks and pushes, restorable in the store.
        config(
            &client,
            &ns,
            "windowed",
            json!({"region": REGION, "auth": keys(None), "prefix": prefix,
                   "secretsManager": {"recoveryWindowInDays": 7}}),
        )
        .await
        .unwrap();
        let w = provider_ref("SecretsManager", "windowed", "", "Provider");
        let mut wpush = push("password", "windowed", "", serde_json::Value::Null);
        wpush.provider_ref = Some(w.clone());
        c.push_secret(wpush.clone()).await.unwrap();
        let mut wdelete = delete("windowed", "");
        wdelete.provider_ref = Some(w.clone());
        c.delete_secret(wdelete.clone()).await.unwrap();
        let described = sm.describe_secret().secret_id(format!("{prefix}windowed")).send().await.unwrap();
        let deleted = described.deleted_date().expect("scheduled for deletion, not deleted");
        let in_days = (deleted.secs()
            - aws_sdk_secretsmanager::primitives::DateTime::from(std::time::SystemTime::now()).secs())
            / 86_400;
        assert!((6..=7).contains(&in_days), "deletion date in {in_days} days, want the 7-day window");
        let mut wexists = exists("windowed", "");
        wexists.provider_ref = Some(w.clone());
        assert!(!c.secret_exists(wexists).await.unwrap().into_inner().exists, "scheduled is gone");
        let read = get_text(c, get(&w, &ns, "windowed", "", "")).await.unwrap_err();
        assert_eq!(read.code(), tonic::Code::NotFound, "{read:?}");
        let again = c.push_secret(wpush).await.unwrap_err();
        assert_eq!(again.code(), tonic::Code::FailedPrecondition, "{again:?}");
        assert!(again.message().contains("scheduled for deletion"), "{}", again.message());
        c.delete_secret(wdelete).await.expect("deleting a scheduled secret again succeeds");
        sm.restore_secret().secret_id(format!("{prefix}windowed")).send().await.unwrap();
        assert_eq!(get_text(c, get(&w, &ns, "windowed", "", "")).await.unwrap(), "p1", "restored");
    })
    .await;
    drop(p.child);
}

#[tokio::test(flavor = "multi_thread")]
async fn web_identity_and_the_tenant_boundary() {
    let _guard = common::shared().await;
    let moto = Moto::start();
    let mut p = start_provider(&moto).await;
    let sm = sm(&moto).await;
    with_temp_namespace(&[], |client, other| async move {
        keys_secret(&client, &other).await.unwrap();
        with_temp_namespace(&[], |client, ns| async move {
            sm.create_secret().name(format!("{ns}-db")).secret_string("v").send().await.unwrap();
            // Web identity: a ServiceAccount token of this namespace exchanged through STS.
            let sa = ServiceAccount {
                metadata: ObjectMeta {
                    name: Some("app".into()),
                    annotations: Some(
                        [("eks.amazonaws.com/role-arn".to_string(), "arn:aws:iam::123456789012:role/app".to_string())]
                            .into(),
                    ),
                    ..Default::default()
                },
                ..Default::default()
            };
            Api::<ServiceAccount>::namespaced(client.clone(), &ns).create(&PostParams::default(), &sa).await.unwrap();
            config(
                &client,
                &ns,
                "irsa",
                json!({"region": REGION, "auth": {"jwt": {"serviceAccountRef": {"name": "app"}}}}),
            )
            .await
            .unwrap();
            // A tenant config naming another namespace's keys, one with no credentials at all.
            config(&client, &ns, "foreign-keys", json!({"region": REGION, "auth": keys(Some(&other))})).await.unwrap();
            config(&client, &ns, "ambient", json!({"region": REGION})).await.unwrap();
            let c = &mut p.client;
            let key = format!("{ns}-db");
            let r = provider_ref("SecretsManager", "irsa", "", "Provider");
            assert_eq!(get_text(c, get(&r, &ns, &key, "", "")).await.unwrap(), "v");

            // The reconciler names the manifest's namespace as the config namespace for a
            // Provider and for a ManifestNamespace ClusterProvider (and sends the scope): both
            // reach the tenant's config, as does a ClusterProvider request that does not say.
            let via = |name: &str, kind: &str, config_ns: &str| match kind {
                "ManifestNamespace" => ProviderReference {
                    authentication_scope: kind.into(),
                    ..provider_ref("SecretsManager", name, config_ns, "ClusterProvider")
                },
                _ => provider_ref("SecretsManager", name, config_ns, kind),
            };
            for (name, kind, config_ns, want) in [
                ("foreign-keys", "Provider", "", "spec.auth.secretRef.accessKeyIDSecretRef.namespace"),
                ("foreign-keys", "Provider", ns.as_str(), "spec.auth.secretRef.accessKeyIDSecretRef.namespace"),
                ("foreign-keys", "ClusterProvider", ns.as_str(), "spec.auth.secretRef.accessKeyIDSecretRef.namespace"),
                (
                    "foreign-keys",
                    "ManifestNamespace",
                    ns.as_str(),
                    "spec.auth.secretRef.accessKeyIDSecretRef.namespace",
                ),
                ("ambient", "Provider", "", "uses the provider's own credentials"),
                ("ambient", "Provider", ns.as_str(), "uses the provider's own credentials"),
                ("ambient", "ClusterProvider", "", "uses the provider's own credentials"),
                ("ambient", "ClusterProvider", ns.as_str(), "uses the provider's own credentials"),
                ("ambient", "ManifestNamespace", ns.as_str(), "uses the provider's own credentials"),
            ] {
                let r = via(name, kind, config_ns);
                let e = get_text(c, get(&r, &ns, &key, "", "")).await.unwrap_err();
                assert_eq!(e.code(), tonic::Code::PermissionDenied, "{name} via {kind} ({config_ns:?}): {e:?}");
                assert!(e.message().contains(want), "{name} via {kind} ({config_ns:?}): {}", e.message());
            }
            // The operator's config (a ClusterProvider with ProviderNamespace naming the config's
            // namespace) may use the provider's own credentials and name Secrets anywhere.
            let r = operator_ref("SecretsManager", "ambient", &ns);
            assert_eq!(get_text(c, get(&r, "elsewhere", &key, "", "")).await.unwrap(), "v");
            let r = operator_ref("SecretsManager", "foreign-keys", &ns);
            assert_eq!(get_text(c, get(&r, "elsewhere", &key, "", "")).await.unwrap(), "v");
        })
        .await
    })
    .await;
    drop(p.child);
}

/// The provider's own web identity (IRSA style: `AWS_ROLE_ARN` and `AWS_WEB_IDENTITY_TOKEN_FILE`
/// in its environment, no keys) through the SDK's default chain, for the operator's config.
#[tokio::test(flavor = "multi_thread")]
async fn default_chain_web_identity_serves_the_operator_config() {
    let _guard = common::shared().await;
    let moto = Moto::start();
    let sm = sm(&moto).await;
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    with_temp_namespace(&[], |client, ns| async move {
        // A real ServiceAccount token, as the kubelet would project it into the provider's Pod.
        let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), &ns);
        sas.create(&PostParams::default(), &ServiceAccount { metadata: meta("provider"), ..Default::default() })
            .await
            .unwrap();
        let request = k8s_openapi::api::authentication::v1::TokenRequest {
            spec: Some(k8s_openapi::api::authentication::v1::TokenRequestSpec {
                audiences: Some(vec!["sts.amazonaws.com".into()]),
                ..Default::default()
            }),
            ..Default::default()
        };
        let token = sas.create_token_request("provider", &PostParams::default(), &request).await.unwrap();
        std::fs::write(&token_file, token.status.unwrap().token.unwrap()).unwrap();

        let endpoint = moto.endpoint();
        let env = [
            ("AWS_ENDPOINT_URL", endpoint.as_str()),
            ("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/provider-irsa"),
            ("AWS_WEB_IDENTITY_TOKEN_FILE", token_file.to_str().unwrap()),
            ("AWS_ROLE_SESSION_NAME", "keyward"),
            ("AWS_EC2_METADATA_DISABLED", "true"),
        ];
        let p = launch("keyward-provider-aws", &env).await.unwrap();
        let (child, mut c) = (p.child, p.client);

        sm.create_secret().name(format!("{ns}-op")).secret_string("operator-value").send().await.unwrap();
        config(&client, &ns, "ambient", json!({"region": REGION})).await.unwrap();
        // The operator's config: a ClusterProvider with ProviderNamespace naming the config's
        // namespace, used elsewhere.
        let r = operator_ref("SecretsManager", "ambient", &ns);
        let v = c
            .validate(ValidateRequest {
                provider_ref: Some(r.clone()),
                source_namespace: "elsewhere".into(),
                max_age_millis: 0,
            })
            .await
            .unwrap()
            .into_inner();
        assert!(v.valid, "{v:?}\n{}", child.log());
        assert!(
            child.log().contains("assumed-role/provider-irsa"),
            "the default chain assumed the role of the web identity:\n{}",
            child.log()
        );
        assert_eq!(
            get_text(&mut c, get(&r, "elsewhere", &format!("{ns}-op"), "", "")).await.unwrap(),
            "operator-value"
        );
        // The same config reached as the tenant's is refused before any call.
        let tenant = provider_ref("SecretsManager", "ambient", &ns, "Provider");
        let e = get_text(&mut c, get(&tenant, &ns, &format!("{ns}-op"), "", "")).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e:?}");
        drop(child);
    })
    .await;
}

async fn delete_cluster_store(client: &Client, name: &str) {
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("external-secrets.io", "v1", "ClusterSecretStore"));
    let _ = Api::<DynamicObject>::all_with(client.clone(), &ar).delete(name, &DeleteParams::default()).await;
}

fn find_req(r: &ProviderReference, ns: &str, regexp: &str, path: &str, tags: &[(&str, &str)]) -> GetAllSecretsRequest {
    GetAllSecretsRequest {
        provider_ref: Some(r.clone()),
        source_namespace: ns.into(),
        find: Some(ExternalSecretFind {
            name: (!regexp.is_empty()).then(|| FindName { regexp: regexp.into() }),
            path: path.into(),
            tags: tags.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            ..Default::default()
        }),
    }
}

async fn found(c: &mut SecretStoreProviderClient<Channel>, req: GetAllSecretsRequest) -> Vec<(String, String)> {
    let mut all: Vec<(String, String)> = c
        .get_all_secrets(req)
        .await
        .unwrap()
        .into_inner()
        .secrets
        .into_iter()
        .map(|(k, v)| (k, String::from_utf8(v).unwrap()))
        .collect();
    all.sort();
    all
}

#[tokio::test(flavor = "multi_thread")]
async fn secret_stores_serve_secrets_manager_and_parameter_store() {
    let _guard = common::shared().await;
    let moto = Moto::start();
    let mut p = start_provider(&moto).await;
    let sm = sm(&moto).await;
    let ssm = ssm(&moto).await;
    with_temp_namespace(&[], |client, other| async move {
        keys_secret(&client, &other).await.unwrap();
        with_temp_namespace(&[], |client, ns| async move {
            keys_secret(&client, &ns).await.unwrap();
            let pfx = format!("/{ns}/");
            store(&client, Some(&ns), "ps", aws_store("ParameterStore", &pfx, keys(None))).await.unwrap();
            store(&client, Some(&ns), "sm", aws_store("SecretsManager", &format!("{ns}/"), keys(None))).await.unwrap();
            // A tenant's store naming the keys of another namespace.
            store(&client, Some(&ns), "foreign", aws_store("ParameterStore", &pfx, keys(Some(&other)))).await.unwrap();
            let (cps, csm) = (format!("{ns}-ps"), format!("{ns}-sm"));
            // The operator's stores: credentials named without a namespace are the source
            // namespace's, as upstream.
            store(&client, None, &cps, aws_store("ParameterStore", &pfx, keys(None))).await.unwrap();
            store(&client, None, &csm, aws_store("SecretsManager", &format!("{ns}/"), keys(None))).await.unwrap();

            let put = |name: String, value: &str, kind: ParameterType| {
                ssm.put_parameter().name(name).value(value).r#type(kind)
            };
            let team_a = aws_sdk_ssm::types::Tag::builder().key("team").value("a").build().unwrap();
            put(format!("{pfx}app/db"), r#"{"user":"app","password":"one"}"#, ParameterType::String)
                .send()
                .await
                .unwrap();
            put(
                format!("{pfx}app/db"),
                r#"{"user":"app","password":"two","conn":{"host":"db"}}"#,
                ParameterType::String,
            )
            .overwrite(true)
            .send()
            .await
            .unwrap();
            put(format!("{pfx}app/token"), "s3cret", ParameterType::SecureString).send().await.unwrap();
            put(format!("{pfx}web/conf"), "plain", ParameterType::String).tags(team_a.clone()).send().await.unwrap();
            // Outside the store's prefix.
            put(format!("/{other}/web/conf"), "theirs", ParameterType::String).tags(team_a).send().await.unwrap();
            sm.create_secret().name(format!("{ns}/db")).secret_string("sm-value").send().await.unwrap();

            let c = &mut p.client;
            let ps = store_ref("SecretStore", "ps", &ns);
            assert_eq!(get_text(c, get(&ps, &ns, "app/db", "password", "")).await.unwrap(), "two");
            assert_eq!(get_text(c, get(&ps, &ns, "app/db", "password", "1")).await.unwrap(), "one", "name:version");
            assert_eq!(get_text(c, get(&ps, &ns, "app/db", "conn.host", "")).await.unwrap(), "db");
            assert_eq!(get_text(c, get(&ps, &ns, "app/token", "", "")).await.unwrap(), "s3cret", "decrypted");
            let mut fetch = get(&ps, &ns, "web/conf", "team", "");
            fetch.remote_ref.as_mut().unwrap().metadata_policy = "Fetch".into();
            assert_eq!(get_text(c, fetch).await.unwrap(), "a", "metadataPolicy Fetch reads tags");
            for (key, version) in [("app/nope", ""), ("app/db", "9")] {
                let e = get_text(c, get(&ps, &ns, key, "", version)).await.unwrap_err();
                assert_eq!(e.code(), tonic::Code::NotFound, "{key}:{version} {e:?}");
            }
            let e = get_text(c, get(&ps, &ns, "app/db", "nope", "")).await.unwrap_err();
            assert_eq!(e.code(), tonic::Code::NotFound, "{e:?}");
            for key in [format!("../{other}/web/conf"), "app/%2e%2e/x".into(), "app/db?x".into()] {
                let e = get_text(c, get(&ps, &ns, &key, "", "")).await.unwrap_err();
                assert_eq!(e.code(), tonic::Code::InvalidArgument, "{key}: {e:?}");
            }
            let map = c
                .get_secret_map(GetSecretMapRequest {
                    provider_ref: Some(ps.clone()),
                    source_namespace: ns.clone(),
                    remote_ref: get(&ps, &ns, "app/db", "", "").remote_ref,
                    max_age_millis: 0,
                })
                .await
                .unwrap()
                .into_inner()
                .secrets;
            assert_eq!(map.get("password").map(Vec::as_slice), Some(&b"two"[..]));

            let s = |k: &str, v: &str| (k.to_string(), v.to_string());
            let db = s("app/db", r#"{"user":"app","password":"two","conn":{"host":"db"}}"#);
            let by_path = found(c, find_req(&ps, &ns, "", "app", &[])).await;
            assert_eq!(by_path, [db.clone(), s("app/token", "s3cret")], "by path, decrypted");
            let by_name = found(c, find_req(&ps, &ns, "token$", "", &[])).await;
            assert_eq!(by_name, [s("app/token", "s3cret")]);
            let by_tags = found(c, find_req(&ps, &ns, "", "", &[("team", "a")])).await;
            assert_eq!(by_tags, [s("web/conf", "plain")], "tags, within the prefix only");
            assert!(found(c, find_req(&ps, &ns, "", "app", &[("team", "a")])).await.is_empty());

            let v = c
                .validate(ValidateRequest {
                    provider_ref: Some(ps.clone()),
                    source_namespace: ns.clone(),
                    max_age_millis: 0,
                })
                .await
                .unwrap()
                .into_inner();
            assert!(v.valid, "{v:?}");

            // The same through the ClusterSecretStore, and Secrets Manager through both kinds.
            let cps_ref = store_ref("ClusterSecretStore", &cps, "");
            assert_eq!(get_text(c, get(&cps_ref, &ns, "app/token", "", "")).await.unwrap(), "s3cret");
            let sm_ref = store_ref("SecretStore", "sm", &ns);
            assert_eq!(get_text(c, get(&sm_ref, &ns, "db", "", "")).await.unwrap(), "sm-value");
            let csm_ref = store_ref("ClusterSecretStore", &csm, "");
            assert_eq!(get_text(c, get(&csm_ref, &ns, "db", "", "")).await.unwrap(), "sm-value");

            // A tenant's SecretStore naming another namespace's Secret is refused before any
            // call, as is a SecretStore of another namespace.
            let e =
                get_text(c, get(&store_ref("SecretStore", "foreign", &ns), &ns, "app/db", "", "")).await.unwrap_err();
            assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e:?}");
            assert!(e.message().contains("accessKeyIDSecretRef.namespace"), "{}", e.message());
            let e = get_text(c, get(&store_ref("SecretStore", "ps", &other), &ns, "app/db", "", "")).await.unwrap_err();
            assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e:?}");

            delete_cluster_store(&client, &cps).await;
            delete_cluster_store(&client, &csm).await;
        })
        .await
    })
    .await;
    drop(p.child);
}

#[tokio::test(flavor = "multi_thread")]
async fn parameter_store_pushes_and_deletes() {
    let _guard = common::shared().await;
    let moto = Moto::start();
    let mut p = start_provider(&moto).await;
    let ssm = ssm(&moto).await;
    with_temp_namespace(&[], |client, ns| async move {
        let pfx = format!("/{ns}/");
        keys_secret(&client, &ns).await.unwrap();
        store(&client, Some(&ns), "ps", aws_store("ParameterStore", &pfx, keys(None))).await.unwrap();
        let r = store_ref("SecretStore", "ps", &ns);
        let c = &mut p.client;
        let source: std::collections::HashMap<String, Vec<u8>> =
            [("password".to_string(), b"p1".to_vec()), ("user".to_string(), b"app".to_vec())].into();
        let push = |key: &str, remote: &str, prop: &str, meta: serde_json::Value| PushSecretRequest {
            provider_ref: Some(r.clone()),
            source_namespace: ns.clone(),
            secret_data: source.clone(),
            push_secret_data: Some(PushSecretData {
                secret_key: key.into(),
                remote_key: remote.into(),
                property: prop.into(),
                metadata: if meta.is_null() { vec![] } else { meta.to_string().into_bytes() },
            }),
        };
        let remote = |ssm: &Ssm, name: String| {
            let ssm = ssm.clone();
            async move {
                let p = ssm.get_parameter().name(&name).with_decryption(true).send().await.unwrap();
                let p = p.parameter().unwrap().clone();
                let tags = ssm
                    .list_tags_for_resource()
                    .resource_type(aws_sdk_ssm::types::ResourceTypeForTagging::Parameter)
                    .resource_id(&name)
                    .send()
                    .await
                    .unwrap();
                let tags: std::collections::BTreeMap<String, String> =
                    tags.tag_list().iter().map(|t| (t.key().to_string(), t.value().to_string())).collect();
                (p.value().unwrap().to_string(), p.r#type().unwrap().clone(), p.version(), tags)
            }
        };

        // New: a String parameter tagged managed-by.
        c.push_secret(push("password", "pushed/pw", "", serde_json::Value::Null)).await.unwrap();
        let (value, kind, version, tags) = remote(&ssm, format!("{pfx}pushed/pw")).await;
        assert_eq!((value.as_str(), kind, version), ("p1", ParameterType::String, 1));
        assert_eq!(tags.get("managed-by").map(String::as_str), Some("external-secrets"), "{tags:?}");
        c.push_secret(push("password", "pushed/pw", "", serde_json::Value::Null)).await.unwrap();
        assert_eq!(remote(&ssm, format!("{pfx}pushed/pw")).await.2, 1, "an unchanged value is not written again");
        // A managed parameter is overwritten.
        c.push_secret(push("user", "pushed/pw", "", serde_json::Value::Null)).await.unwrap();
        let (value, _, version, _) = remote(&ssm, format!("{pfx}pushed/pw")).await;
        assert_eq!((value.as_str(), version), ("app", 2));

        // Properties merge into one JSON value.
        c.push_secret(push("password", "pushed/json", "pw", serde_json::Value::Null)).await.unwrap();
        c.push_secret(push("user", "pushed/json", "user", serde_json::Value::Null)).await.unwrap();
        let value: serde_json::Value =
            serde_json::from_str(&remote(&ssm, format!("{pfx}pushed/json")).await.0).unwrap();
        assert_eq!(value, json!({"pw": "p1", "user": "app"}));

        // The metadata's type and tags; a SecureString reads back decrypted.
        let meta = |owner: &str| {
            json!({"apiVersion": "kubernetes.external-secrets.io/v1alpha1", "kind": "PushSecretMetadata",
                   "spec": {"secretType": "SecureString", "tags": {"owner": owner}}})
        };
        c.push_secret(push("password", "pushed/secure", "", meta("team-a"))).await.unwrap();
        let (_, kind, _, tags) = remote(&ssm, format!("{pfx}pushed/secure")).await;
        assert_eq!(kind, ParameterType::SecureString);
        assert_eq!(tags.get("owner").map(String::as_str), Some("team-a"), "{tags:?}");
        assert_eq!(get_text(c, get(&r, &ns, "pushed/secure", "", "")).await.unwrap(), "p1");
        c.push_secret(push("password", "pushed/secure", "", meta("team-b"))).await.unwrap();
        let tags = remote(&ssm, format!("{pfx}pushed/secure")).await.3;
        assert_eq!(tags.get("owner").map(String::as_str), Some("team-b"), "tags follow the metadata");
        // Property pushes to a SecureString with its own KMS key; taking a property out keeps
        // the type and the key.
        let kms = json!({"apiVersion": "kubernetes.external-secrets.io/v1alpha1", "kind": "PushSecretMetadata",
                         "spec": {"secretType": "SecureString", "kmsKeyID": "alias/team-a"}});
        c.push_secret(push("password", "pushed/kms", "pw", kms.clone())).await.unwrap();
        c.push_secret(push("user", "pushed/kms", "user", kms)).await.unwrap();
        let delete_pw = DeleteSecretRequest {
            provider_ref: Some(r.clone()),
            source_namespace: ns.clone(),
            remote_ref: Some(PushSecretRemoteRef {
                remote_key: "pushed/kms".into(),
                property: "pw".into(),
                ..Default::default()
            }),
        };
        c.delete_secret(delete_pw).await.unwrap();
        let (value, kind, _, _) = remote(&ssm, format!("{pfx}pushed/kms")).await;
        assert_eq!((value.as_str(), kind), (r#"{"user":"app"}"#, ParameterType::SecureString));
        let described = ssm
            .describe_parameters()
            .parameter_filters(
                aws_sdk_ssm::types::ParameterStringFilter::builder()
                    .key("Name")
                    .option("Equals")
                    .values(format!("{pfx}pushed/kms"))
                    .build()
                    .unwrap(),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(described.parameters()[0].key_id(), Some("alias/team-a"), "the KMS key is kept");

        let bad = json!({"spec": {"tags": {"managed-by": "me"}}});
        let e = c.push_secret(push("password", "pushed/secure", "", bad)).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e:?}");

        // Without a secret key: the whole Secret as JSON, Base64 values as upstream.
        c.push_secret(push("", "pushed/all", "", serde_json::Value::Null)).await.unwrap();
        let value: serde_json::Value = serde_json::from_str(&remote(&ssm, format!("{pfx}pushed/all")).await.0).unwrap();
        assert_eq!(value, json!({"password": "cDE=", "user": "YXBw"}));

        // A parameter nobody pushed is left alone.
        ssm.put_parameter()
            .name(format!("{pfx}foreign"))
            .value("mine")
            .r#type(ParameterType::String)
            .send()
            .await
            .unwrap();
        let refused = c.push_secret(push("password", "foreign", "", serde_json::Value::Null)).await.unwrap_err();
        assert_eq!(refused.code(), tonic::Code::PermissionDenied, "{refused:?}");
        let e = c.push_secret(push("password", "../escape", "", serde_json::Value::Null)).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e:?}");

        let remote_ref = |remote: &str, prop: &str| {
            Some(PushSecretRemoteRef { remote_key: remote.into(), property: prop.into(), ..Default::default() })
        };
        let exists = |remote: &str, prop: &str| SecretExistsRequest {
            provider_ref: Some(r.clone()),
            source_namespace: ns.clone(),
            remote_ref: remote_ref(remote, prop),
        };
        let delete = |remote: &str, prop: &str| DeleteSecretRequest {
            provider_ref: Some(r.clone()),
            source_namespace: ns.clone(),
            remote_ref: remote_ref(remote, prop),
        };
        assert!(c.secret_exists(exists("pushed/json", "pw")).await.unwrap().into_inner().exists);
        c.delete_secret(delete("pushed/json", "pw")).await.unwrap();
        assert!(!c.secret_exists(exists("pushed/json", "pw")).await.unwrap().into_inner().exists);
        assert!(c.secret_exists(exists("pushed/json", "")).await.unwrap().into_inner().exists);
        c.delete_secret(delete("pushed/json", "")).await.unwrap();
        assert!(!c.secret_exists(exists("pushed/json", "")).await.unwrap().into_inner().exists);
        c.delete_secret(delete("pushed/json", "")).await.expect("deleting what is gone succeeds");
        let e = get_text(c, get(&r, &ns, "pushed/json", "", "")).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::NotFound, "{e:?}");
        c.delete_secret(delete("foreign", "")).await.unwrap();
        assert_eq!(get_text(c, get(&r, &ns, "foreign", "", "")).await.unwrap(), "mine", "kept");
    })
    .await;
    drop(p.child);
}
