//! The webhook provider as a process (real mTLS) against a real HTTP(S) server and the local
//! control plane: reads with a JSONPath and a property, maps, pushes, templated headers with a
//! Secret, a SecretStore written as upstream's docs write it, the tenant boundary, the address
//! check, the size cap and the time limit.

use crate::common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::common::{StoreServer, apply_config, apply_secret, install_crd, start_provider, store_url};
use base64::Engine;
use keyward_e2e::with_temp_namespace;
use keyward_proto::v1::secret_store_provider_client::SecretStoreProviderClient;
use keyward_proto::v1::{
    DeleteSecretRequest, ExternalSecretDataRemoteRef, ExternalSecretFind, FindName, GetAllSecretsRequest,
    GetSecretMapRequest, GetSecretRequest, ProviderReference, PushSecretData, PushSecretRemoteRef, PushSecretRequest,
    SecretExistsRequest, ValidateRequest,
};
use keyward_provider_runtime::testkit::{operator_ref, provider_ref};
use kube::Api;
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;
use tonic::transport::Channel;
use tonic::{Code, Status};

type Client = SecretStoreProviderClient<Channel>;

fn remote(key: &str, property: &str) -> Option<ExternalSecretDataRemoteRef> {
    Some(ExternalSecretDataRemoteRef { key: key.into(), property: property.into(), ..Default::default() })
}

async fn get(c: &mut Client, r: &ProviderReference, ns: &str, key: &str, property: &str) -> Result<String, Status> {
    let req = GetSecretRequest {
        provider_ref: Some(r.clone()),
        source_namespace: ns.into(),
        remote_ref: remote(key, property),
        max_age_millis: 0,
    };
    let v = c.get_secret(req).await?.into_inner().value;
    Ok(String::from_utf8(v).expect("utf-8"))
}

async fn get_map(
    c: &mut Client,
    r: &ProviderReference,
    ns: &str,
    key: &str,
) -> Result<HashMap<String, Vec<u8>>, Status> {
    let req = GetSecretMapRequest {
        provider_ref: Some(r.clone()),
        source_namespace: ns.into(),
        remote_ref: remote(key, ""),
        max_age_millis: 0,
    };
    Ok(c.get_secret_map(req).await?.into_inner().secrets)
}

fn webhook_ref(name: &str) -> ProviderReference {
    provider_ref("Webhook", name, "", "Provider")
}

#[tokio::test(flavor = "multi_thread")]
async fn reads_maps_pushes_and_deletes_through_a_webhook_config() {
    let _guard = common::shared().await;
    let store = StoreServer::start().await;
    with_temp_namespace(&[], |client, ns| async move {
        install_crd(&client).await;
        let provider = start_provider(Some("")).await.unwrap_or_else(|e| panic!("{e}"));
        let mut c = provider.client.clone();
        store.seed("db", &[("user", "app"), ("password", "s3cret")]);
        apply_config(&client, &ns, "store", json!({"url": store_url(&store.http_url)})).await;
        // The same store answering JSON read with a JSONPath, over HTTPS with its CA.
        let ca = base64::engine::general_purpose::STANDARD.encode(&store.ca_pem);
        apply_config(
            &client,
            &ns,
            "path",
            json!({"url": format!("{}/secrets/{{{{ .remoteRef.key }}}}", store.https_url), "caBundle": ca,
                   "result": {"jsonPath": "$.{{ .remoteRef.property }}"}, "timeout": "5s"}),
        )
        .await;
        let r = webhook_ref("store");
        let whole: serde_json::Value = serde_json::from_str(&get(&mut c, &r, &ns, "db", "").await.expect("whole"))
            .expect("the whole value is the server's JSON");
        assert_eq!(whole, json!({"user": "app", "password": "s3cret"}));
        assert_eq!(get(&mut c, &r, &ns, "db", "password").await.expect("property in the URL"), "s3cret");
        let p = webhook_ref("path");
        assert_eq!(get(&mut c, &p, &ns, "db", "user").await.expect("jsonPath over HTTPS"), "app");
        let m = get_map(&mut c, &r, &ns, "db").await.expect("map");
        assert_eq!(m.get("user").map(Vec::as_slice), Some(&b"app"[..]));
        assert_eq!(m.len(), 2);
        let e = get(&mut c, &r, &ns, "missing", "").await.expect_err("404");
        assert_eq!(e.code(), Code::NotFound, "{e:?}");

        // Push: a property merged into the value, then the whole Secret as JSON (no secret key).
        let source = HashMap::from([("token".to_string(), b"t0k3n".to_vec()), ("user".to_string(), b"u".to_vec())]);
        let push = |secret_key: &str, remote_key: &str, property: &str| PushSecretRequest {
            provider_ref: Some(r.clone()),
            source_namespace: ns.clone(),
            secret_data: source.clone(),
            push_secret_data: Some(PushSecretData {
                secret_key: secret_key.into(),
                remote_key: remote_key.into(),
                property: property.into(),
                metadata: vec![],
            }),
        };
        c.push_secret(push("token", "db", "token")).await.expect("push a property");
        assert_eq!(store.value("db").expect("db").get("token").map(String::as_str), Some("t0k3n"));
        assert_eq!(store.value("db").expect("db").get("user").map(String::as_str), Some("app"), "merged");
        c.push_secret(push("", "all", "")).await.expect("push the whole Secret");
        assert_eq!(store.value("all").expect("all").get("token").map(String::as_str), Some("t0k3n"));

        let exists = |key: &str, property: &str| SecretExistsRequest {
            provider_ref: Some(r.clone()),
            source_namespace: ns.clone(),
            remote_ref: Some(PushSecretRemoteRef {
                remote_key: key.into(),
                property: property.into(),
                metadata: vec![],
            }),
        };
        assert!(c.secret_exists(exists("db", "token")).await.expect("exists").into_inner().exists);
        assert!(!c.secret_exists(exists("nope", "")).await.expect("exists").into_inner().exists);
        let del = |key: &str, property: &str| DeleteSecretRequest {
            provider_ref: Some(r.clone()),
            source_namespace: ns.clone(),
            remote_ref: Some(PushSecretRemoteRef {
                remote_key: key.into(),
                property: property.into(),
                metadata: vec![],
            }),
        };
        c.delete_secret(del("all", "")).await.expect("delete");
        assert!(store.value("all").is_none());
        c.delete_secret(del("all", "")).await.expect("deleting again succeeds (404 is gone)");

        let find = GetAllSecretsRequest {
            provider_ref: Some(r.clone()),
            source_namespace: ns.clone(),
            find: Some(ExternalSecretFind { name: Some(FindName { regexp: ".*".into() }), ..Default::default() }),
        };
        let e = c.get_all_secrets(find).await.expect_err("not supported");
        assert_eq!(e.code(), Code::Unimplemented, "{e:?}");
        let v = c
            .validate(ValidateRequest {
                provider_ref: Some(r.clone()),
                source_namespace: ns.clone(),
                max_age_millis: 0,
            })
            .await;
        assert!(v.expect("validate").into_inner().valid);
        drop(provider);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn templated_headers_see_a_labeled_secret_of_the_namespace() {
    let _guard = common::shared().await;
    let store = StoreServer::start().await;
    with_temp_namespace(&[], |client, ns| async move {
        install_crd(&client).await;
        let provider = start_provider(Some("")).await.unwrap_or_else(|e| panic!("{e}"));
        let mut c = provider.client.clone();
        apply_secret(&client, &ns, "webhook-credentials", &[("username", "test"), ("password", "test")], true).await;
        apply_secret(&client, &ns, "unlabeled", &[("username", "x")], false).await;
        let spec = |secret: &str| {
            json!({
                "url": format!("{}/get?parameter={{{{ .remoteRef.key }}}}", store.http_url),
                "result": {"jsonPath": "$.args.parameter"},
                "headers": {"Content-Type": "application/json",
                            "Authorization": "Basic {{ print .auth.username \":\" .auth.password | b64enc }}"},
                "secrets": [{"name": "auth", "secretRef": {"name": secret}}],
            })
        };
        apply_config(&client, &ns, "echo", spec("webhook-credentials")).await;
        apply_config(&client, &ns, "unlabeled", spec("unlabeled")).await;
        assert_eq!(get(&mut c, &webhook_ref("echo"), &ns, "secret", "").await.expect("echo"), "secret");
        assert_eq!(store.last_headers().get("authorization").map(String::as_str), Some("Basic dGVzdDp0ZXN0"));
        let e = get(&mut c, &webhook_ref("unlabeled"), &ns, "secret", "").await.expect_err("label missing");
        assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
        assert!(e.message().contains("external-secrets.io/type: webhook"), "{e:?}");
        assert!(!provider.child.log().contains("dGVzdDp0ZXN0"), "the rendered credentials are never logged");
    })
    .await;
}

fn store_resource(kind: &str) -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk("external-secrets.io", "v1", kind))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_secret_store_written_as_upstreams_docs_is_served() {
    let _guard = common::shared().await;
    let store = StoreServer::start().await;
    with_temp_namespace(&[], |client, ns| async move {
        install_crd(&client).await;
        let provider = start_provider(Some("")).await.unwrap_or_else(|e| panic!("{e}"));
        let mut c = provider.client.clone();
        // docs/provider/webhook.md, only the URL's host changed.
        let docs = format!(
            r#"
apiVersion: external-secrets.io/v1
kind: SecretStore
metadata:
  name: webhook-backend
spec:
  provider:
    webhook:
      url: "{}/get?parameter={{{{ .remoteRef.key }}}}"
      result:
        jsonPath: "$.args.parameter"
      headers:
        Content-Type: application/json
        Authorization: Basic {{{{ print .auth.username ":" .auth.password | b64enc }}}}
      secrets:
      - name: auth
        secretRef:
          name: webhook-credentials
"#,
            store.http_url
        );
        let mut obj: serde_json::Value = serde_yaml::from_str(&docs).expect("the docs' YAML");
        obj["metadata"]["namespace"] = json!(ns);
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &store_resource("SecretStore"));
        api.patch("webhook-backend", &PatchParams::apply("keyward-webhook-tests").force(), &Patch::Apply(&obj))
            .await
            .expect("SecretStore");
        apply_secret(&client, &ns, "webhook-credentials", &[("username", "test"), ("password", "test")], true).await;
        let r = provider_ref("SecretStore", "webhook-backend", "", "SecretStore");
        assert_eq!(get(&mut c, &r, &ns, "secret", "").await.expect("as the docs say"), "secret");
        assert_eq!(store.last_headers().get("authorization").map(String::as_str), Some("Basic dGVzdDp0ZXN0"));
        drop(provider);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tenant_config_stays_in_its_namespace_and_off_loopback() {
    let _guard = common::shared().await;
    let store = StoreServer::start().await;
    with_temp_namespace(&[], |client, ns| async move {
        install_crd(&client).await;
        // The default denied networks: loopback is refused for tenants.
        let provider = start_provider(None).await.unwrap_or_else(|e| panic!("{e}"));
        let mut c = provider.client.clone();
        store.seed("db", &[("user", "app")]);
        apply_config(&client, &ns, "loop", json!({"url": store_url(&store.http_url)})).await;
        let by_name = store.http_url.replace("127.0.0.1", "localhost");
        apply_config(&client, &ns, "byname", json!({"url": store_url(&by_name)})).await;
        for name in ["loop", "byname"] {
            let e = get(&mut c, &webhook_ref(name), &ns, "db", "").await.expect_err("loopback");
            assert_eq!(e.code(), Code::PermissionDenied, "{name}: {e:?}");
            assert!(e.message().contains("denied network 127.0.0.0/8"), "{name}: {e:?}");
            let v = c.validate(ValidateRequest {
                provider_ref: Some(webhook_ref(name)),
                source_namespace: ns.clone(),
                max_age_millis: 0,
            });
            let v = v.await.expect("validate").into_inner();
            assert!(!v.valid && v.error.contains("denied network"), "{v:?}");
        }
        // The operator's configuration (a ProviderNamespace ClusterProvider) may reach it.
        let op = operator_ref("Webhook", "loop", &ns);
        assert_eq!(get(&mut c, &op, "elsewhere", "db", "user").await.expect("operator"), "app");

        // A ClusterSecretStore is the operator's too, and may reach loopback; its Secret must
        // name its namespace (without one a tenant would supply it: refused).
        apply_secret(&client, &ns, "creds", &[("token", "t0k3n")], true).await;
        let css = format!("webhook-{ns}");
        let store_with = |secret_ref: serde_json::Value| {
            json!({
                "apiVersion": "external-secrets.io/v1", "kind": "ClusterSecretStore",
                "metadata": {"name": css},
                "spec": {"provider": {"webhook": {
                    "url": store_url(&store.http_url),
                    "headers": {"X-Token": "{{ .creds.token }}"},
                    "secrets": [{"name": "creds", "secretRef": secret_ref}],
                }}},
            })
        };
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &store_resource("ClusterSecretStore"));
        let r = provider_ref("ClusterSecretStore", &css, "", "ClusterSecretStore");
        let params = PatchParams::apply("keyward-webhook-tests").force();
        let without = store_with(json!({"name": "creds"}));
        api.patch(&css, &params, &Patch::Apply(&without)).await.expect("ClusterSecretStore");
        let refused = get(&mut c, &r, &ns, "db", "user").await;
        let named = store_with(json!({"name": "creds", "namespace": ns}));
        api.patch(&css, &params, &Patch::Apply(&named)).await.expect("ClusterSecretStore");
        let got = get(&mut c, &r, &ns, "db", "user").await;
        let _ = api.delete(&css, &Default::default()).await;
        let refused = refused.expect_err("a Secret reference without its namespace");
        assert!(refused.message().contains("secretRef.namespace: is required on a ClusterSecretStore"), "{refused:?}");
        assert_eq!(got.expect("a ClusterSecretStore on loopback"), "app");
        assert_eq!(store.last_headers().get("x-token").map(String::as_str), Some("t0k3n"));

        // Another namespace's Secret: refused before anything is read.
        apply_config(
            &client,
            &ns,
            "foreign",
            json!({"url": store_url(&store.http_url),
                   "secrets": [{"name": "auth", "secretRef": {"name": "creds", "namespace": "kube-system"}}]}),
        )
        .await;
        let e = get(&mut c, &webhook_ref("foreign"), &ns, "db", "").await.expect_err("another namespace");
        assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
        assert!(e.message().contains("spec.secrets[0].secretRef.namespace"), "{e:?}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn oversized_and_slow_answers_are_refused() {
    let _guard = common::shared().await;
    let store = StoreServer::start().await;
    with_temp_namespace(&[], |client, ns| async move {
        install_crd(&client).await;
        let provider = start_provider(Some("")).await.unwrap_or_else(|e| panic!("{e}"));
        let mut c = provider.client.clone();
        apply_config(&client, &ns, "big", json!({"url": format!("{}/big", store.http_url)})).await;
        apply_config(&client, &ns, "slow", json!({"url": format!("{}/slow", store.http_url), "timeout": "1s"})).await;
        let e = get(&mut c, &webhook_ref("big"), &ns, "k", "").await.expect_err("too big");
        assert_eq!(e.code(), Code::Unavailable, "{e:?}");
        assert!(e.message().contains("answered with more than 4 MiB"), "{e:?}");
        let started = Instant::now();
        let e = get(&mut c, &webhook_ref("slow"), &ns, "k", "").await.expect_err("too slow");
        assert_eq!(e.code(), Code::Unavailable, "{e:?}");
        assert!(e.message().contains("did not answer within 1s"), "{e:?}");
        assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_jsonpath_too_costly_over_the_answer_is_refused_and_the_provider_lives_on() {
    let _guard = common::shared().await;
    let store = StoreServer::start().await;
    with_temp_namespace(&[], |client, ns| async move {
        install_crd(&client).await;
        let mut provider = start_provider(Some("")).await.unwrap_or_else(|e| panic!("{e}"));
        let mut c = provider.client.clone();
        store.seed("db", &[("user", "app")]);
        let hostile = |path: &str| json!({"url": format!("{}/hostile", store.http_url), "result": {"jsonPath": path}});
        apply_config(&client, &ns, "wildcards", hostile("$.*[*]")).await;
        apply_config(&client, &ns, "descendants", hostile("$..x")).await;
        apply_config(
            &client,
            &ns,
            "normal",
            json!({"url": store_url(&store.http_url), "result": {"jsonPath": "$.user"}}),
        )
        .await;
        for name in ["wildcards", "descendants"] {
            let started = Instant::now();
            let e = get(&mut c, &webhook_ref(name), &ns, "k", "").await.expect_err("over the budget");
            assert_eq!(e.code(), Code::Unavailable, "{name}: {e:?}");
            assert!(e.message().contains("too large or too deep to evaluate the JSONPath"), "{name}: {e:?}");
            assert!(e.message().contains("32 MiB"), "{name}: {e:?}");
            assert!(started.elapsed() < Duration::from_secs(15), "{name}: {:?}", started.elapsed());
            assert!(provider.child.is_running(), "{name}: the provider process is still up");
            assert_eq!(get(&mut c, &webhook_ref("normal"), &ns, "db", "").await.expect("the next call"), "app");
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn redirects_are_checked_like_the_first_address() {
    let _guard = common::shared().await;
    let store = StoreServer::start().await;
    with_temp_namespace(&[], |client, ns| async move {
        install_crd(&client).await;
        // 127.0.0.1 (the store) is allowed; 127.0.0.2 stands for a denied address.
        let provider = start_provider(Some("127.0.0.2/32")).await.unwrap_or_else(|e| panic!("{e}"));
        let mut c = provider.client.clone();
        store.seed("db", &[("user", "app")]);
        let port = store.http_addr().port();
        let via =
            |to: &str| json!({"url": format!("{}/redirect?to={to}", store.http_url), "result": {"jsonPath": "$.user"}});
        apply_config(&client, &ns, "allowed", via(&format!("http://127.0.0.1:{port}/secrets/db"))).await;
        apply_config(&client, &ns, "denied", via(&format!("http://127.0.0.2:{port}/secrets/db"))).await;
        assert_eq!(get(&mut c, &webhook_ref("allowed"), &ns, "k", "").await.expect("followed"), "app");
        let e = get(&mut c, &webhook_ref("denied"), &ns, "k", "").await.expect_err("redirect to a denied address");
        assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
        assert!(e.message().contains("denied network 127.0.0.2/32"), "{e:?}");
    })
    .await;
}
