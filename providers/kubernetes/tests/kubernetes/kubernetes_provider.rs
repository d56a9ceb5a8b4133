//! The Kubernetes provider as a process, over real mTLS, against the local control plane:
//! token, client-certificate and ServiceAccount (TokenRequest) credentials, reads, finds,
//! pushes, the tenant boundary (a tenant-owned config never names another namespace, and only an
//! operator-owned config that allows it redirects pushes), and kubeconfigs read as data only.

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine;
use k8s_openapi::ByteString;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use keyward_certs::{CertificateAuthority, Usage};
use keyward_e2e::switch::eventually;
use keyward_e2e::{control_plane, with_temp_namespace};
use keyward_proto::v1::{
    DeleteSecretRequest, ExternalSecretDataRemoteRef, ExternalSecretFind, FindName, GetAllSecretsRequest,
    GetSecretMapRequest, GetSecretRequest, ProviderReference, PushSecretData, PushSecretRemoteRef, PushSecretRequest,
    SecretExistsRequest, ValidateRequest,
};
use keyward_provider_kubernetes::api::Kubernetes;
use keyward_provider_runtime::testkit::{RunningProvider, launch, operator_ref, provider_ref};
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};

use crate::common;

const CERT_USER: &str = "keyward-cert-user";

async fn start_provider() -> RunningProvider {
    launch("keyward-provider-kubernetes", &[]).await.expect("start the provider")
}

fn meta(name: &str, ns: &str) -> ObjectMeta {
    ObjectMeta { name: Some(name.into()), namespace: Some(ns.into()), ..Default::default() }
}

fn secret(name: &str, ns: &str, data: &[(&str, &str)], labels: &[(&str, &str)]) -> Secret {
    let mut m = meta(name, ns);
    m.labels = Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
    Secret {
        metadata: m,
        data: Some(data.iter().map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec()))).collect()),
        ..Default::default()
    }
}

async fn create<K>(client: &Client, ns: &str, obj: &K)
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::Serialize
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    Api::<K>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), obj)
        .await
        .unwrap_or_else(|e| panic!("create {obj:?}: {e}"));
}

/// RBAC: the ServiceAccount `reader` (in `config_ns`) and the user `keyward-cert-user` may
/// read and write Secrets in `target_ns`.
async fn grant(client: &Client, config_ns: &str, target_ns: &str) {
    let role = Role {
        metadata: meta("secrets-rw", target_ns),
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["secrets".into()]),
            verbs: ["get", "list", "watch", "create", "update", "patch", "delete"].map(String::from).to_vec(),
            ..Default::default()
        }]),
    };
    create(client, target_ns, &role).await;
    let binding = RoleBinding {
        metadata: meta("secrets-rw", target_ns),
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "Role".into(),
            name: "secrets-rw".into(),
        },
        subjects: Some(vec![
            Subject {
                kind: "ServiceAccount".into(),
                name: "reader".into(),
                namespace: Some(config_ns.into()),
                ..Default::default()
            },
            Subject {
                kind: "User".into(),
                name: CERT_USER.into(),
                api_group: Some("rbac.authorization.k8s.io".into()),
                ..Default::default()
            },
        ]),
    };
    create(client, target_ns, &binding).await;
}

fn kubernetes_config(
    name: &str,
    ns: &str,
    remote: &str,
    auth: serde_json::Value,
    server: Option<(&str, &str)>,
) -> Kubernetes {
    let mut spec = serde_json::json!({ "remoteNamespace": remote, "auth": auth });
    if let Some((url, ca)) = server {
        spec["server"] = serde_json::json!({
            "url": url,
            "caBundle": base64::engine::general_purpose::STANDARD.encode(ca),
        });
    }
    serde_json::from_value(serde_json::json!({
        "apiVersion": "provider.external-secrets.io/v2alpha1",
        "kind": "Kubernetes",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    }))
    .expect("Kubernetes config")
}

/// The control plane's CA certificate and key (PEM).
async fn control_plane_ca() -> (String, String) {
    let (crt, key) = control_plane().await.ca_files();
    (std::fs::read_to_string(crt).expect("read ca.crt"), std::fs::read_to_string(key).expect("read ca.key"))
}

/// Everything the tests need in three namespaces: `ns` holds the configs and credentials,
/// `remote` the remote Secrets, `third` is a second target for the remoteNamespace override.
async fn setup(client: &Client, ns: &str, remote: &str, third: &str) {
    for (name, value_ns) in [("reader", ns), ("nobody", ns)] {
        let sa = ServiceAccount { metadata: meta(name, value_ns), ..Default::default() };
        create(client, ns, &sa).await;
    }
    grant(client, ns, remote).await;
    grant(client, ns, third).await;

    // A token for `reader`, stored in a Secret (token auth).
    let issued = Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .create_token_request(
            "reader",
            &PostParams::default(),
            &TokenRequest {
                spec: Some(TokenRequestSpec { expiration_seconds: Some(3600), ..Default::default() }),
                ..Default::default()
            },
        )
        .await
        .expect("token request");
    let token = issued.status.and_then(|s| s.token).expect("token issued");
    create(client, ns, &secret("reader-token", ns, &[("token", &token)], &[])).await;

    // A client certificate signed by the control plane's CA (cert auth).
    let (ca_crt, ca_key) = control_plane_ca().await;
    let ca = CertificateAuthority::from_pem(&ca_crt, &ca_key).expect("load the control plane CA");
    let leaf = ca.issue(&[CERT_USER], Usage::Client, Duration::from_secs(3600)).expect("client certificate");
    create(client, ns, &secret("reader-cert", ns, &[("tls.crt", &leaf.cert_pem), ("tls.key", &leaf.key_pem)], &[]))
        .await;

    // Remote Secrets.
    let config = r#"{"host":"db.internal","port":5432}"#;
    for s in [
        secret("db", remote, &[("user", "app"), ("password", "s3cret"), ("config", config)], &[("team", "a")]),
        secret("db-replica", remote, &[("user", "ro")], &[("team", "b")]),
        secret("cache", remote, &[("url", "redis://cache")], &[("team", "a")]),
    ] {
        create(client, remote, &s).await;
    }

    // Provider configs.
    let url = control_plane().await.server_url();
    let server = Some((url.as_str(), ca_crt.as_str()));
    let token_auth = serde_json::json!({"token": {"bearerToken": {"name": "reader-token", "key": "token"}}});
    let configs = [
        kubernetes_config("via-token", ns, remote, token_auth.clone(), server),
        kubernetes_config("own-cluster", ns, remote, token_auth, None),
        kubernetes_config(
            "via-token-elsewhere",
            ns,
            remote,
            serde_json::json!({"token": {"bearerToken": {"name": "reader-token", "key": "token", "namespace": third}}}),
            server,
        ),
        kubernetes_config(
            "via-cert",
            ns,
            remote,
            serde_json::json!({"cert": {
                "clientCert": {"name": "reader-cert", "key": "tls.crt"},
                "clientKey": {"name": "reader-cert", "key": "tls.key"},
            }}),
            server,
        ),
        kubernetes_config("via-sa", ns, remote, serde_json::json!({"serviceAccount": {"name": "reader"}}), server),
        kubernetes_config(
            "via-sa-elsewhere",
            ns,
            remote,
            serde_json::json!({"serviceAccount": {"name": "reader", "namespace": third}}),
            server,
        ),
        kubernetes_config("via-nobody", ns, remote, serde_json::json!({"serviceAccount": {"name": "nobody"}}), server),
    ];
    for mut c in configs {
        if c.metadata.name.as_deref() == Some("via-token") {
            let mut overriding = c.clone();
            overriding.metadata.name = Some("via-token-override".into());
            overriding.spec.allow_remote_namespace_override = true;
            create(client, ns, &overriding).await;
        }
        c.spec.allow_remote_namespace_override = false;
        create(client, ns, &c).await;
    }
}

/// Runs `test` with three fresh namespaces, set up by [`setup`].
async fn with_env<F, Fut>(test: F)
where
    F: FnOnce(Client, String, String, String) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    control_plane().await;
    with_temp_namespace(&[], |client, ns| async move {
        with_temp_namespace(&[], |_, remote| async move {
            with_temp_namespace(&[], |_, third| async move {
                setup(&client, &ns, &remote, &third).await;
                test(client, ns, remote, third).await;
            })
            .await
        })
        .await
    })
    .await;
}

fn get(pref: &ProviderReference, source_ns: &str, key: &str, property: &str) -> GetSecretRequest {
    GetSecretRequest {
        remote_ref: Some(ExternalSecretDataRemoteRef {
            key: key.into(),
            property: property.into(),
            ..Default::default()
        }),
        provider_ref: Some(pref.clone()),
        source_namespace: source_ns.into(),
        max_age_millis: 0,
    }
}

#[tokio::test]
async fn token_auth_reads_finds_and_validates() {
    let _guard = common::shared().await;
    with_env(|_client, ns, _remote, third| async move {
        let mut p = start_provider().await;
        let c = &mut p.client;
        let token = provider_ref("Kubernetes", "via-token", "", "Provider");

        // One property, the whole Secret as JSON, a JSON property as a map.
        assert_eq!(c.get_secret(get(&token, &ns, "db", "user")).await.expect("user").into_inner().value, b"app");
        let whole = c.get_secret(get(&token, &ns, "db", "")).await.expect("whole").into_inner().value;
        let json: serde_json::Value = serde_json::from_slice(&whole).expect("JSON");
        assert_eq!(json["password"], "s3cret");
        assert_eq!(json.as_object().map(|o| o.len()), Some(3));
        let map = c
            .get_secret_map(GetSecretMapRequest {
                remote_ref: Some(ExternalSecretDataRemoteRef {
                    key: "db".into(),
                    property: "config".into(),
                    ..Default::default()
                }),
                provider_ref: Some(token.clone()),
                source_namespace: ns.clone(),
                max_age_millis: 0,
            })
            .await
            .expect("map")
            .into_inner()
            .secrets;
        assert_eq!(map.get("host").map(Vec::as_slice), Some(&b"db.internal"[..]));
        assert_eq!(map.get("port").map(Vec::as_slice), Some(&b"5432"[..]));
        let mut fetch = get(&token, &ns, "db", "labels");
        if let Some(r) = fetch.remote_ref.as_mut() {
            r.metadata_policy = "Fetch".into();
        }
        assert_eq!(c.get_secret(fetch).await.expect("labels").into_inner().value, br#"{"team":"a"}"#);

        // Find by name regex, by labels (tags), and both.
        let find = |regexp: &str, tags: &[(&str, &str)]| GetAllSecretsRequest {
            provider_ref: Some(token.clone()),
            find: Some(ExternalSecretFind {
                name: Some(FindName { regexp: regexp.into() }),
                tags: tags.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
                ..Default::default()
            }),
            source_namespace: ns.clone(),
        };
        let keys = |m: std::collections::HashMap<String, Vec<u8>>| {
            let mut k: Vec<_> = m.into_keys().collect();
            k.sort();
            k
        };
        let found = c.get_all_secrets(find("^db", &[])).await.expect("regex").into_inner().secrets;
        assert_eq!(keys(found.clone()), ["db", "db-replica"]);
        let replica: serde_json::Value = serde_json::from_slice(&found["db-replica"]).expect("JSON");
        assert_eq!(replica, serde_json::json!({"user": "ro"}));
        let found = c.get_all_secrets(find("", &[("team", "a")])).await.expect("tags").into_inner().secrets;
        assert_eq!(keys(found), ["cache", "db"]);
        let found = c.get_all_secrets(find("^db", &[("team", "a")])).await.expect("both").into_inner().secrets;
        assert_eq!(keys(found), ["db"]);

        // The provider's own cluster when server.url is unset.
        let own = provider_ref("Kubernetes", "own-cluster", "", "Provider");
        assert_eq!(c.get_secret(get(&own, &ns, "db", "user")).await.expect("own cluster").into_inner().value, b"app");

        // The config is read from providerRef.namespace when set, whatever the source namespace.
        let cluster = provider_ref("Kubernetes", "via-token", &ns, "ClusterProvider");
        assert_eq!(
            c.get_secret(get(&cluster, "some-other-namespace", "db", "user"))
                .await
                .expect("cluster")
                .into_inner()
                .value,
            b"app"
        );
        // ...but a Provider, or a ManifestNamespace ClusterProvider, serves a manifest only the
        // configuration of the manifest's own namespace: another namespace's is another tenant's.
        for pref in [
            provider_ref("Kubernetes", "via-token", &ns, "Provider"),
            ProviderReference {
                authentication_scope: "ManifestNamespace".into(),
                ..provider_ref("Kubernetes", "via-token", &ns, "ClusterProvider")
            },
        ] {
            let e = c.get_secret(get(&pref, "some-other-namespace", "db", "user")).await.expect_err("another tenant");
            assert_eq!(e.code(), tonic::Code::PermissionDenied, "{pref:?}: {e:?}");
            assert!(e.message().contains("may only use a configuration of its own namespace"), "{}", e.message());
        }

        // The tenant boundary: a config in a tenant namespace that names a Secret or a
        // ServiceAccount of another namespace is refused, whatever store kind reaches it (a
        // Provider, a ClusterProvider with ManifestNamespace, a caller that sends no scope)...
        for name in ["via-token-elsewhere", "via-sa-elsewhere"] {
            for pref in [
                provider_ref("Kubernetes", name, "", "Provider"),
                provider_ref("Kubernetes", name, &ns, "ClusterProvider"),
                ProviderReference {
                    authentication_scope: "ManifestNamespace".into(),
                    ..provider_ref("Kubernetes", name, &ns, "ClusterProvider")
                },
            ] {
                let e = c.get_secret(get(&pref, &ns, "db", "user")).await.expect_err("outside the namespace");
                assert_eq!(e.code(), tonic::Code::PermissionDenied, "{name} {pref:?}: {e:?}");
                assert!(e.message().contains(&format!(".namespace: \"{third}\" names")), "{}", e.message());
                assert!(e.message().contains("may only name objects of its own namespace"), "{}", e.message());
            }
        }
        // ...while an operator-owned config (ClusterProvider with ProviderNamespace) may name
        // another namespace: it looks in `third`, where there is no such token Secret.
        let e = c
            .get_secret(get(&operator_ref("Kubernetes", "via-token-elsewhere", &ns), &ns, "db", "user"))
            .await
            .expect_err("no token");
        assert_eq!(e.code(), tonic::Code::FailedPrecondition, "{e:?}");
        assert!(e.message().contains(&format!("Secret {third}/reader-token not found")), "{}", e.message());

        // The client is built once per config generation, not per call.
        let log = p.child.log();
        let built = log.matches("built a client for the target cluster").count();
        assert!(built <= 5, "clients rebuilt per call ({built}):\n{log}");
        assert!(!log.contains("s3cret"), "a value leaked into the log");
    })
    .await;
}

/// A configuration deleted and created again under the same name starts at generation 1 again:
/// the next call that accepts no aged answer is served with the new object's credentials and
/// reach at once, never the client of the object before it; a call accepting an aged answer is
/// served from the configuration watch, which may trail the API server a moment, and then with
/// the new object too, never the answers kept for the object before it.
#[tokio::test]
async fn a_recreated_configuration_is_served_with_its_new_credentials_at_once() {
    /// Ten minutes: far longer than the test, so only a key that tells the objects apart ends
    /// the old answer.
    const AGED: u32 = 600_000;
    let _guard = common::shared().await;
    with_env(|client, ns, remote, third| async move {
        create(&client, &third, &secret("db", &third, &[("user", "third-app")], &[])).await;
        let p = start_provider().await;
        let swap = provider_ref("Kubernetes", "swap", "", "Provider");
        let url = control_plane().await.server_url();
        let (ca_crt, _) = control_plane_ca().await;
        let server = Some((url.as_str(), ca_crt.as_str()));
        let configs: Api<Kubernetes> = Api::namespaced(client.clone(), &ns);
        let read_aged = |p: &RunningProvider, max_age_millis: u32| {
            let mut req = get(&swap, &ns, "db", "user");
            req.max_age_millis = max_age_millis;
            let mut c = p.client.clone();
            async move { c.get_secret(req).await.map(|r| String::from_utf8_lossy(&r.into_inner().value).into_owned()) }
        };
        let first = kubernetes_config(
            "swap",
            &ns,
            &remote,
            serde_json::json!({"token": {"bearerToken": {"name": "reader-token", "key": "token"}}}),
            server,
        );
        create(&client, &ns, &first).await;
        assert_eq!(read_aged(&p, AGED).await.expect("first object"), "app");
        configs.delete("swap", &Default::default()).await.expect("delete");
        let second = kubernetes_config(
            "swap",
            &ns,
            &third,
            serde_json::json!({"cert": {
                "clientCert": {"name": "reader-cert", "key": "tls.crt"},
                "clientKey": {"name": "reader-cert", "key": "tls.key"},
            }}),
            server,
        );
        // Gone from the API before it is created again, so the name is free.
        for _ in 0..100 {
            if configs.get_opt("swap").await.expect("get").is_none() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        create(&client, &ns, &second).await;
        let created = configs.get("swap").await.expect("the second object");
        assert_eq!(created.metadata.generation, Some(1), "a new object starts at generation 1 again");
        let fresh = read_aged(&p, 0).await.expect("second object");
        assert_eq!(fresh, "third-app", "the new object's credentials and reach");
        // An answer kept for the object before it would be served for ten minutes.
        eventually("an aged read served with the new object", Duration::from_secs(10), || async {
            let aged = read_aged(&p, AGED).await.expect("second object, aged");
            (aged == "third-app").then_some(())
        })
        .await;
    })
    .await;
}

#[tokio::test]
async fn cert_and_service_account_auth() {
    let _guard = common::shared().await;
    with_env(|_client, ns, _remote, _third| async move {
        let mut p = start_provider().await;
        let c = &mut p.client;
        for name in ["via-cert", "via-sa"] {
            let pref = provider_ref("Kubernetes", name, "", "Provider");
            let got = c.get_secret(get(&pref, &ns, "db", "password")).await;
            let got = got.unwrap_or_else(|e| panic!("{name}: {e:?}\n{}", p.child.log()));
            assert_eq!(got.into_inner().value, b"s3cret", "{name}");
        }
        // A ServiceAccount without RBAC authenticates but may not read.
        let nobody = provider_ref("Kubernetes", "via-nobody", "", "Provider");
        let e = c.get_secret(get(&nobody, &ns, "db", "user")).await.expect_err("nobody");
        assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e:?}");
    })
    .await;
}

#[tokio::test]
async fn push_with_metadata_delete_exists_and_remote_namespace_override() {
    let _guard = common::shared().await;
    with_env(|client, ns, remote, third| async move {
        let mut p = start_provider().await;
        let c = &mut p.client;
        let token = provider_ref("Kubernetes", "via-token", "", "Provider");
        let source: std::collections::HashMap<String, Vec<u8>> =
            [("password".to_string(), b"pushed-pw".to_vec()), ("user".to_string(), b"svc".to_vec())].into();
        let push = |pref: &ProviderReference, remote_key: &str, secret_key: &str, property: &str, metadata: &str| {
            PushSecretRequest {
                provider_ref: Some(pref.clone()),
                secret_data: source.clone(),
                push_secret_data: Some(PushSecretData {
                    metadata: metadata.as_bytes().to_vec(),
                    secret_key: secret_key.into(),
                    remote_key: remote_key.into(),
                    property: property.into(),
                }),
                source_namespace: ns.clone(),
            }
        };
        let metadata = r#"{"apiVersion":"kubernetes.external-secrets.io/v1alpha1","kind":"PushSecretMetadata",
            "spec":{"labels":{"pushed-by":"keyward"},"annotations":{"keyward.dev/note":"hello"},
            "secretType":"kubernetes.io/basic-auth"}}"#;

        // Push one key with labels, annotations and a type; the remote Secret has them.
        c.push_secret(push(&token, "pushed", "password", "password", metadata)).await.expect("push");
        let secrets = |ns: &str| Api::<Secret>::namespaced(client.clone(), ns);
        let s = secrets(&remote).get("pushed").await.expect("pushed Secret");
        assert_eq!(s.type_.as_deref(), Some("kubernetes.io/basic-auth"));
        assert_eq!(s.data.as_ref().and_then(|d| d.get("password")).map(|v| v.0.as_slice()), Some(&b"pushed-pw"[..]));
        let labels = s.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels.get("pushed-by").map(String::as_str), Some("keyward"));
        let annotations: BTreeMap<String, String> = s.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(annotations.get("keyward.dev/note").map(String::as_str), Some("hello"));

        // A second push adds a key and keeps the first.
        c.push_secret(push(&token, "pushed", "user", "username", "")).await.expect("second push");
        let s = secrets(&remote).get("pushed").await.expect("pushed Secret");
        let data = s.data.unwrap_or_default();
        assert_eq!(data.get("username").map(|v| v.0.as_slice()), Some(&b"svc"[..]));
        assert!(data.contains_key("password"));

        // A type change is refused.
        let opaque = r#"{"spec":{"secretType":"Opaque"}}"#;
        let e = c.push_secret(push(&token, "pushed", "user", "", opaque)).await.expect_err("type change");
        assert_eq!(e.code(), tonic::Code::FailedPrecondition, "{e:?}");

        // Exists, delete one property, delete the Secret, exists again.
        let rref = |key: &str, property: &str| {
            Some(PushSecretRemoteRef { remote_key: key.into(), property: property.into(), ..Default::default() })
        };
        let exists = |key: &str, property: &str| SecretExistsRequest {
            provider_ref: Some(token.clone()),
            remote_ref: rref(key, property),
            source_namespace: ns.clone(),
        };
        let delete = |key: &str, property: &str| DeleteSecretRequest {
            provider_ref: Some(token.clone()),
            remote_ref: rref(key, property),
            source_namespace: ns.clone(),
        };
        assert!(c.secret_exists(exists("pushed", "username")).await.expect("exists").into_inner().exists);
        c.delete_secret(delete("pushed", "username")).await.expect("delete property");
        assert!(!c.secret_exists(exists("pushed", "username")).await.expect("exists").into_inner().exists);
        assert!(c.secret_exists(exists("pushed", "")).await.expect("exists").into_inner().exists);
        c.delete_secret(delete("pushed", "")).await.expect("delete");
        assert!(!c.secret_exists(exists("pushed", "")).await.expect("exists").into_inner().exists);
        c.delete_secret(delete("pushed", "")).await.expect("deleting what is gone succeeds");
        assert!(secrets(&remote).get_opt("pushed").await.expect("get").is_none());

        // remoteNamespace override: honoured for an operator-owned config that allows it. A
        // same-named Secret in the config's remoteNamespace belongs to someone else: SecretExists
        // and DeleteSecret of the pushed entry (which carry its metadata) must not touch it.
        create(&client, &remote, &secret("moved", &remote, &[("owner", "someone-else")], &[])).await;
        let over = format!(r#"{{"spec":{{"remoteNamespace":"{third}","labels":{{"via":"override"}}}}}}"#);
        let operator = operator_ref("Kubernetes", "via-token-override", &ns);
        c.push_secret(push(&operator, "moved", "password", "", &over)).await.expect("override push");
        let s = secrets(&third).get("moved").await.expect("Secret in the override namespace");
        assert_eq!(s.data.and_then(|d| d.get("password").cloned()).map(|v| v.0), Some(b"pushed-pw".to_vec()));
        let rref = PushSecretRemoteRef {
            remote_key: "moved".into(),
            metadata: over.as_bytes().to_vec(),
            ..Default::default()
        };
        let exists = SecretExistsRequest {
            provider_ref: Some(operator.clone()),
            remote_ref: Some(rref.clone()),
            source_namespace: ns.clone(),
        };
        assert!(c.secret_exists(exists).await.expect("exists").into_inner().exists);
        let delete =
            DeleteSecretRequest { provider_ref: Some(operator), remote_ref: Some(rref), source_namespace: ns.clone() };
        c.delete_secret(delete).await.expect("delete where the push wrote");
        assert!(secrets(&third).get_opt("moved").await.expect("get").is_none(), "the pushed copy is gone");
        let kept = secrets(&remote).get("moved").await.expect("the other Secret of that name is untouched");
        assert_eq!(kept.data.and_then(|d| d.get("owner").cloned()).map(|v| v.0), Some(b"someone-else".to_vec()));

        // Refused, with nothing written: an operator-owned config that does not allow it, and
        // every tenant-owned path (a Provider, a ClusterProvider without a scope or with
        // ManifestNamespace), even when the tenant's config claims to allow it.
        let refused = [
            operator_ref("Kubernetes", "via-token", &ns),
            provider_ref("Kubernetes", "via-token", "", "Provider"),
            provider_ref("Kubernetes", "via-token", &ns, "ClusterProvider"),
            ProviderReference {
                authentication_scope: "ManifestNamespace".into(),
                ..provider_ref("Kubernetes", "via-token", &ns, "ClusterProvider")
            },
        ];
        for pref in refused {
            let e = c.push_secret(push(&pref, "refused", "password", "", &over)).await.expect_err("override refused");
            assert_eq!(e.code(), tonic::Code::PermissionDenied, "{pref:?}: {e:?}");
            assert!(e.message().contains("allowRemoteNamespaceOverride: true"), "{}", e.message());
            assert!(secrets(&third).get_opt("refused").await.expect("get").is_none());
            assert!(secrets(&remote).get_opt("refused").await.expect("get").is_none());
        }
        let e = c
            .push_secret(push(
                &provider_ref("Kubernetes", "via-token-override", "", "Provider"),
                "refused",
                "password",
                "",
                "",
            ))
            .await
            .expect_err("a tenant config that allows overrides is refused as a whole");
        assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e:?}");
        assert!(e.message().contains("spec.allowRemoteNamespaceOverride"), "{}", e.message());
    })
    .await;
}

/// A kubeconfig for the control plane with `user` (YAML lines under `user:`, indented by 4).
fn kubeconfig(server: &str, ca_pem: &str, user: &str) -> String {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts:\n- name: c\n  context: {{cluster: k, user: u}}\n\
         clusters:\n- name: k\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\n\
         users:\n- name: u\n  user:\n{user}"
    )
}

#[tokio::test]
async fn auth_ref_kubeconfigs_are_data_never_code() {
    let _guard = common::shared().await;
    with_env(|client, ns, remote, _third| async move {
        let mut p = start_provider().await;
        let files = tempfile::tempdir().expect("dir");
        let marker = files.path().join("exec-ran");
        let secrets = Api::<Secret>::namespaced(client.clone(), &ns);
        let token_secret = secrets.get("reader-token").await.expect("token Secret");
        let token = String::from_utf8(token_secret.data.expect("data")["token"].0.clone()).expect("utf-8");
        let cert = secrets.get("reader-cert").await.expect("cert Secret").data.expect("data");
        // Files on the provider's host holding a working identity: what a path would hand out.
        let token_file = files.path().join("token");
        std::fs::write(&token_file, &token).expect("write token");
        let (cert_file, key_file) = (files.path().join("tls.crt"), files.path().join("tls.key"));
        std::fs::write(&cert_file, &cert["tls.crt"].0).expect("write cert");
        std::fs::write(&key_file, &cert["tls.key"].0).expect("write key");

        let url = control_plane().await.server_url();
        let (ca_pem, _) = control_plane_ca().await;
        let kubeconfigs = [
            ("kc-inline", format!("    token: {token}\n")),
            (
                "kc-exec",
                format!(
                    "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: touch\n      args: [{}]\n",
                    marker.display()
                ),
            ),
            ("kc-token-file", format!("    tokenFile: {}\n", token_file.display())),
            ("kc-cert-files", format!("    client-certificate: {}\n    client-key: {}\n", cert_file.display(), key_file.display())),
            ("kc-auth-provider", "    auth-provider:\n      name: oidc\n      config: {id-token: x}\n".to_string()),
        ];
        let mut kubeconfigs: Vec<(&str, String)> =
            kubeconfigs.iter().map(|(name, user)| (*name, kubeconfig(&url, &ca_pem, user))).collect();
        // A working token, but the cluster's CA read from a file of the provider's host.
        let ca_file = files.path().join("ca.crt");
        std::fs::write(&ca_file, &ca_pem).expect("write CA");
        let inline_ca = format!("certificate-authority-data: {}", base64::engine::general_purpose::STANDARD.encode(&ca_pem));
        let with_ca_file = kubeconfig(&url, &ca_pem, &format!("    token: {token}\n"))
            .replace(&inline_ca, &format!("certificate-authority: {}", ca_file.display()));
        assert!(with_ca_file.contains("certificate-authority: "), "{with_ca_file}");
        kubeconfigs.push(("kc-ca-file", with_ca_file));
        for (name, yaml) in &kubeconfigs {
            create(&client, &ns, &secret(name, &ns, &[("kubeconfig", yaml.as_str())], &[])).await;
            let config: Kubernetes = serde_json::from_value(serde_json::json!({
                "apiVersion": "provider.external-secrets.io/v2alpha1", "kind": "Kubernetes",
                "metadata": {"name": name, "namespace": ns},
                "spec": {"authRef": {"name": name, "key": "kubeconfig"}, "remoteNamespace": remote},
            }))
            .expect("config");
            create(&client, &ns, &config).await;
        }
        let c = &mut p.client;

        // Inline credentials work.
        let inline = provider_ref("Kubernetes", "kc-inline", "", "Provider");
        let got = c.get_secret(get(&inline, &ns, "db", "user")).await;
        assert_eq!(got.unwrap_or_else(|e| panic!("{e:?}\n{}", p.child.log())).into_inner().value, b"app");

        // A command, a token file and certificate files are refused by name, through reads and
        // through Validate (which a Provider's creation alone triggers), and nothing runs.
        for (name, field) in [
            ("kc-exec", "users[\"u\"].exec"),
            ("kc-token-file", "users[\"u\"].tokenFile"),
            ("kc-cert-files", "users[\"u\"].client-certificate, users[\"u\"].client-key"),
            ("kc-auth-provider", "users[\"u\"].auth-provider"),
            ("kc-ca-file", "clusters[\"k\"].certificate-authority"),
        ] {
            let pref = provider_ref("Kubernetes", name, "", "Provider");
            let e = c.get_secret(get(&pref, &ns, "db", "user")).await.expect_err(name);
            assert_eq!(e.code(), tonic::Code::FailedPrecondition, "{name}: {e:?}");
            assert!(e.message().contains(&format!("the kubeconfig sets {field}")), "{}", e.message());
            assert!(e.message().contains("data, never code"), "{}", e.message());
            let v = c
                .validate(ValidateRequest { provider_ref: Some(pref), source_namespace: ns.clone(), max_age_millis: 0 })
                .await
                .expect("validate answers")
                .into_inner();
            assert!(!v.valid && v.error.contains(field), "{name}: {v:?}");
        }
        assert!(!marker.exists(), "the exec plugin of a tenant kubeconfig ran inside the provider");
    })
    .await;
}

#[tokio::test]
async fn finds_page_through_a_namespace_larger_than_one_answer() {
    let _guard = common::shared().await;
    with_env(|client, ns, remote, _third| async move {
        let mut p = start_provider().await;
        let c = &mut p.client;
        // Six Secrets of 900 kB: 5.4 MB in the namespace (7.2 MB as Base64 in a list answer),
        // above the 4 MiB one answer may carry.
        let big = "x".repeat(900 * 1000);
        for i in 0..6 {
            create(&client, &remote, &secret(&format!("big-{i}"), &remote, &[("blob", &big)], &[])).await;
        }
        let token = provider_ref("Kubernetes", "via-token", "", "Provider");
        let find = |regexp: &str| GetAllSecretsRequest {
            provider_ref: Some(token.clone()),
            find: Some(ExternalSecretFind { name: Some(FindName { regexp: regexp.into() }), ..Default::default() }),
            source_namespace: ns.clone(),
        };
        let found = c.get_all_secrets(find("^db")).await.expect("a small selection").into_inner().secrets;
        let mut names: Vec<_> = found.into_keys().collect();
        names.sort();
        assert_eq!(names, ["db", "db-replica"]);
        let found = c.get_all_secrets(find("^big-[0-3]$")).await.expect("3.6 MB of values").into_inner().secrets;
        assert_eq!(found.len(), 4);
        // A selection larger than one reply can carry says so.
        let e = c.get_all_secrets(find("^big-")).await.expect_err("5.4 MB selected");
        assert_eq!(e.code(), tonic::Code::Unavailable, "{e:?}");
        assert!(e.message().contains("hold more than 4 MiB, more than one answer can carry"), "{e:?}");
    })
    .await;
}
