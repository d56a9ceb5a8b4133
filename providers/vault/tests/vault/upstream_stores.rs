//! The Vault provider serving upstream's SecretStores and ClusterSecretStores
//! (`spec.provider.vault`) against `vault server -dev` and the local control plane: userPass,
//! LDAP (a real slapd) and TLS certificate logins; the tenant boundary of a SecretStore; extra
//! headers, check-and-set writes; one login per token lifetime across many calls and client
//! rebuilds, counted in Vault's audit log; the AWS (IAM) login against moto's STS and IAM.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use keyward_crds::{ClusterSecretStore, SecretStore};
use keyward_e2e::stores::{Moto, Slapd, VaultDev};
use keyward_e2e::with_temp_namespace;
use keyward_proto::v1::secret_store_provider_client::SecretStoreProviderClient;
use keyward_proto::v1::{
    ExternalSecretDataRemoteRef, GetSecretRequest, ProviderReference, PushSecretData, PushSecretRequest,
    ValidateRequest,
};
use keyward_provider_runtime::netguard::DeniedNetworks;
use keyward_provider_runtime::{Provider, check_provider_ref};
use keyward_provider_vault::VaultProvider;
use kube::api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};

use crate::common::{start_provider, start_provider_with_env};
use tonic::transport::Channel;

const POLICY: &str = r#"
path "secret/*" { capabilities = ["create", "read", "update", "delete", "list"] }
path "cas/*" { capabilities = ["create", "read", "update", "delete", "list"] }
"#;

/// A dev server with the `keyward` policy, a userpass method with the user `app` (password
/// `pw-1`) and a KV v2 engine at `cas/` that requires check-and-set.
pub(crate) fn vault(v: VaultDev) -> VaultDev {
    v.policy("keyward", POLICY);
    v.cli(&["auth", "enable", "userpass"]);
    v.cli(&["write", "auth/userpass/users/app", "password=pw-1", "token_policies=keyward"]);
    v.cli(&["secrets", "enable", "-path=cas", "-version=2", "kv"]);
    v.cli(&["write", "cas/config", "cas_required=true"]);
    v
}

pub(crate) async fn secret(client: &Client, ns: &str, name: &str, data: &[(&str, &str)]) {
    let data = data.iter().map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec()))).collect();
    let s = Secret {
        metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
        data: Some(data),
        ..Default::default()
    };
    Api::<Secret>::namespaced(client.clone(), ns).create(&PostParams::default(), &s).await.unwrap();
}

/// A SecretStore as upstream writes it, with `vault` as its provider.
pub(crate) async fn secret_store(client: &Client, ns: &str, name: &str, vault: Value) {
    let obj: SecretStore = serde_json::from_value(json!({
        "apiVersion": "external-secrets.io/v1", "kind": "SecretStore",
        "metadata": {"name": name}, "spec": {"provider": {"vault": vault}}}))
    .unwrap();
    Api::<SecretStore>::namespaced(client.clone(), ns).create(&PostParams::default(), &obj).await.unwrap();
}

/// A ClusterSecretStore (deleted by the caller).
async fn cluster_store(client: &Client, name: &str, vault: Value) {
    let obj: ClusterSecretStore = serde_json::from_value(json!({
        "apiVersion": "external-secrets.io/v1", "kind": "ClusterSecretStore",
        "metadata": {"name": name}, "spec": {"provider": {"vault": vault}}}))
    .unwrap();
    let api = Api::<ClusterSecretStore>::all(client.clone());
    let _ = api.delete(name, &DeleteParams::default()).await;
    api.create(&PostParams::default(), &obj).await.unwrap();
}

async fn delete_cluster_store(client: &Client, name: &str) {
    let _ = Api::<ClusterSecretStore>::all(client.clone()).delete(name, &DeleteParams::default()).await;
}

/// The reference the reconciler sends for a SecretStore.
pub(crate) fn store_ref(name: &str, ns: &str) -> ProviderReference {
    ProviderReference {
        api_version: "external-secrets.io/v1".into(),
        kind: "SecretStore".into(),
        name: name.into(),
        namespace: ns.into(),
        store_ref_kind: "SecretStore".into(),
        authentication_scope: String::new(),
    }
}

/// The reference the reconciler sends for a ClusterSecretStore.
fn cluster_ref(name: &str) -> ProviderReference {
    ProviderReference {
        kind: "ClusterSecretStore".into(),
        store_ref_kind: "ClusterSecretStore".into(),
        ..store_ref(name, "")
    }
}

pub(crate) fn get(r: &ProviderReference, ns: &str, key: &str, property: &str) -> GetSecretRequest {
    GetSecretRequest {
        provider_ref: Some(r.clone()),
        source_namespace: ns.into(),
        remote_ref: Some(ExternalSecretDataRemoteRef {
            key: key.into(),
            property: property.into(),
            ..Default::default()
        }),
        max_age_millis: 0,
    }
}

pub(crate) async fn get_text(
    c: &mut SecretStoreProviderClient<Channel>,
    req: GetSecretRequest,
) -> Result<String, tonic::Status> {
    c.get_secret(req).await.map(|r| String::from_utf8(r.into_inner().value).unwrap())
}

fn push(r: &ProviderReference, ns: &str, remote: &str, value: &str) -> PushSecretRequest {
    PushSecretRequest {
        provider_ref: Some(r.clone()),
        source_namespace: ns.into(),
        secret_data: [("v".to_string(), value.as_bytes().to_vec())].into(),
        push_secret_data: Some(PushSecretData {
            secret_key: "v".into(),
            remote_key: remote.into(),
            ..Default::default()
        }),
    }
}

/// userPass and LDAP logins through SecretStores and a ClusterSecretStore; a SecretStore naming
/// another namespace's Secret is refused; headers reach Vault; a mount that requires
/// check-and-set takes writes with `checkAndSet.required` and refuses, clearly, writes without.
#[tokio::test(flavor = "multi_thread")]
async fn secret_stores_with_userpass_and_ldap_headers_and_check_and_set() {
    let _guard = common::shared().await;
    let v = vault(VaultDev::start());
    let audit = v.audit(&["x-keyward-tenant"]);
    let ldap = Slapd::start();
    v.cli(&["auth", "enable", "ldap"]);
    v.cli(&[
        "write",
        "auth/ldap/config",
        &format!("url={}", ldap.url()),
        &format!("userdn={}", Slapd::USERS_DN),
        "userattr=uid",
        &format!("groupdn={}", Slapd::BASE_DN),
    ]);
    v.cli(&["write", &format!("auth/ldap/users/{}", Slapd::USER), "policies=keyward"]);
    let mut p = start_provider().await;
    with_temp_namespace(&[], |_client, other| async move {
        with_temp_namespace(&[], |client, ns| async move {
            let key = format!("{ns}/db");
            v.cli(&["kv", "put", &format!("secret/{key}"), "user=app"]);
            secret(&client, &ns, "userpass", &[("password", "pw-1")]).await;
            secret(&client, &other, "userpass", &[("password", "pw-1")]).await;
            secret(&client, &ns, "ldap", &[("password", Slapd::PASSWORD)]).await;
            secret(&client, &ns, "wrong", &[("password", "nope")]).await;
            let server = v.address();
            let userpass = |secret: Value| json!({"userPass": {"username": "app", "secretRef": secret}});
            let store = |auth: Value, extra: Value| {
                let mut spec = json!({"server": server, "path": "secret", "version": "v2", "auth": auth});
                spec.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
                spec
            };
            let headers = json!({"headers": {"X-Keyward-Tenant": ns}, "readYourWrites": true});
            secret_store(
                &client,
                &ns,
                "userpass",
                store(userpass(json!({"name": "userpass", "key": "password"})), headers),
            )
            .await;
            secret_store(
                &client,
                &ns,
                "ldap",
                store(
                    json!({"ldap": {"username": Slapd::USER,
                "secretRef": {"name": "ldap", "key": "password"}}}),
                    json!({}),
                ),
            )
            .await;
            secret_store(
                &client,
                &ns,
                "wrong",
                store(userpass(json!({"name": "wrong", "key": "password"})), json!({})),
            )
            .await;
            secret_store(
                &client,
                &ns,
                "foreign",
                store(
                    userpass(json!({"name": "userpass", "key": "password",
                "namespace": other})),
                    json!({}),
                ),
            )
            .await;
            // The open-source server refuses to forward (an Enterprise option): proof the header arrives.
            let forward = json!({"readYourWrites": true, "forwardInconsistent": true});
            secret_store(
                &client,
                &ns,
                "forward",
                store(userpass(json!({"name": "userpass", "key": "password"})), forward),
            )
            .await;
            secret_store(
                &client,
                &ns,
                "bad-header",
                store(
                    userpass(json!({"name": "userpass", "key": "password"})),
                    json!({"headers": {"X-Keyward-Tenant": "a\nInjected: yes"}}),
                ),
            )
            .await;
            secret_store(
                &client,
                &ns,
                "cas",
                store(
                    userpass(json!({"name": "userpass", "key": "password"})),
                    json!({"path": "cas", "checkAndSet": {"required": true}}),
                ),
            )
            .await;
            secret_store(
                &client,
                &ns,
                "no-cas",
                store(userpass(json!({"name": "userpass", "key": "password"})), json!({"path": "cas"})),
            )
            .await;
            // A ClusterSecretStore's reference without a namespace resolves in the manifest's
            // namespace; one naming a namespace reaches it (the operator's store).
            let cluster = format!("{ns}-userpass");
            let cluster_other = format!("{ns}-userpass-other");
            cluster_store(
                &client,
                &cluster,
                store(userpass(json!({"name": "userpass", "key": "password"})), json!({})),
            )
            .await;
            cluster_store(
                &client,
                &cluster_other,
                store(
                    userpass(json!({"name": "userpass", "key": "password",
                "namespace": other})),
                    json!({}),
                ),
            )
            .await;

            let c = &mut p.client;
            for r in
                [store_ref("userpass", &ns), store_ref("ldap", &ns), cluster_ref(&cluster), cluster_ref(&cluster_other)]
            {
                assert_eq!(get_text(c, get(&r, &ns, &key, "user")).await.unwrap(), "app", "{r:?}");
            }
            assert!(audit.count("auth/userpass/login/app") >= 1);
            assert_eq!(audit.count(&format!("auth/ldap/login/{}", Slapd::USER)), 1, "one LDAP login");

            // The headers arrived, on the login and on the read.
            let tagged: Vec<Value> =
                audit.requests().into_iter().filter(|r| r["headers"]["x-keyward-tenant"] == json!([ns])).collect();
            let paths: Vec<&str> = tagged.iter().filter_map(|r| r["path"].as_str()).collect();
            assert!(paths.contains(&"auth/userpass/login/app"), "{paths:?}");
            assert!(paths.contains(&format!("secret/data/{key}").as_str()), "{paths:?}");
            let e = get_text(c, get(&store_ref("forward", &ns), &ns, &key, "user")).await.unwrap_err();
            assert!(e.message().contains("X-Vault-Inconsistent=forward-active-node"), "{}", e.message());

            // Refusals: wrong password, another namespace's Secret, a header value with a line break.
            let e = get_text(c, get(&store_ref("wrong", &ns), &ns, &key, "user")).await.unwrap_err();
            assert_eq!(e.code(), tonic::Code::Unauthenticated, "{e:?}");
            assert!(e.message().contains("auth/userpass/login/app"), "{}", e.message());
            let e = get_text(c, get(&store_ref("foreign", &ns), &ns, &key, "user")).await.unwrap_err();
            assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e:?}");
            assert!(e.message().contains("spec.auth.userPass.secretRef.namespace"), "{}", e.message());
            assert!(e.message().contains(&format!("SecretStore {ns}/foreign")), "{}", e.message());
            let e = get_text(c, get(&store_ref("bad-header", &ns), &ns, &key, "user")).await.unwrap_err();
            assert_eq!(e.code(), tonic::Code::FailedPrecondition, "{e:?}");
            assert!(e.message().contains("spec.headers"), "{}", e.message());
            let valid = c
                .validate(ValidateRequest {
                    provider_ref: Some(store_ref("ldap", &ns)),
                    source_namespace: ns.clone(),
                    max_age_millis: 0,
                })
                .await
                .unwrap()
                .into_inner();
            assert!(valid.valid, "{valid:?}");

            // Check-and-set: create (cas 0), then update (cas 1); without it the mount refuses.
            let remote = format!("{ns}/pushed");
            c.push_secret(push(&store_ref("cas", &ns), &ns, &remote, "one")).await.unwrap();
            c.push_secret(push(&store_ref("cas", &ns), &ns, &remote, "two")).await.unwrap();
            let stored = v.json(&["kv", "get"], &[&format!("cas/{remote}")]);
            assert_eq!(stored["data"]["data"], json!({"v": "two"}));
            assert_eq!(stored["data"]["metadata"]["version"], 2);
            let e = c.push_secret(push(&store_ref("no-cas", &ns), &ns, &remote, "three")).await.unwrap_err();
            assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e:?}");
            assert!(e.message().contains("check-and-set"), "{}", e.message());
            assert!(e.message().contains("spec.checkAndSet.required"), "{}", e.message());
            let stored = v.json(&["kv", "get"], &[&format!("cas/{remote}")]);
            assert_eq!(stored["data"]["data"], json!({"v": "two"}), "nothing written without check-and-set");

            delete_cluster_store(&client, &cluster).await;
            delete_cluster_store(&client, &cluster_other).await;
        })
        .await
    })
    .await;
    drop(ldap);
    drop(p.child);
}

/// Vault's cert auth method over HTTPS: the client certificate from two Secret keys is
/// presented on the login, through a SecretStore and a ClusterSecretStore; a certificate of
/// another CA is refused.
#[tokio::test(flavor = "multi_thread")]
async fn cert_login_over_tls() {
    let _guard = common::shared().await;
    use base64::Engine;
    use keyward_certs::{CertificateAuthority, Usage};
    let v = vault(VaultDev::start_tls());
    let ca = CertificateAuthority::generate("vault clients", Duration::from_secs(3600)).unwrap();
    let leaf = ca.issue(&["keyward-client"], Usage::Client, Duration::from_secs(3600)).unwrap();
    let stranger = CertificateAuthority::generate("someone else", Duration::from_secs(3600))
        .unwrap()
        .issue(&["keyward-client"], Usage::Client, Duration::from_secs(3600))
        .unwrap();
    v.cli(&["auth", "enable", "cert"]);
    v.cli(&[
        "write",
        "auth/cert/certs/app",
        "display_name=app",
        "token_policies=keyward",
        &format!("certificate={}", ca.cert_pem()),
    ]);
    let server_ca = base64::engine::general_purpose::STANDARD.encode(v.ca_pem());
    let mut p = start_provider().await;
    with_temp_namespace(&[], |client, ns| async move {
        let key = format!("{ns}/db");
        v.cli(&["kv", "put", &format!("secret/{key}"), "user=cert"]);
        secret(&client, &ns, "client-cert", &[("tls.crt", &leaf.cert_pem), ("tls.key", &leaf.key_pem)]).await;
        secret(&client, &ns, "stranger", &[("tls.crt", &stranger.cert_pem), ("tls.key", &stranger.key_pem)]).await;
        let store = |secret: &str, role: Option<&str>| {
            let mut cert = json!({"clientCert": {"name": secret, "key": "tls.crt"},
                                  "secretRef": {"name": secret, "key": "tls.key"}});
            if let Some(role) = role {
                cert["vaultRole"] = json!(role);
            }
            json!({"server": v.address(), "path": "secret", "caBundle": server_ca, "auth": {"cert": cert}})
        };
        secret_store(&client, &ns, "cert", store("client-cert", Some("app"))).await;
        secret_store(&client, &ns, "stranger", store("stranger", None)).await;
        let cluster = format!("{ns}-cert");
        cluster_store(&client, &cluster, store("client-cert", None)).await;
        let c = &mut p.client;
        for r in [store_ref("cert", &ns), cluster_ref(&cluster)] {
            assert_eq!(get_text(c, get(&r, &ns, &key, "user")).await.unwrap(), "cert", "{r:?}");
        }
        let e = get_text(c, get(&store_ref("stranger", &ns), &ns, &key, "user")).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unauthenticated, "{e:?}");
        assert!(e.message().contains("auth/cert/login"), "{}", e.message());
        delete_cluster_store(&client, &cluster).await;
    })
    .await;
    drop(p.child);
}

async fn read_user(
    provider: Arc<VaultProvider>,
    ctx: keyward_provider_runtime::RequestContext,
    remote: ExternalSecretDataRemoteRef,
) -> Result<String, keyward_provider_runtime::ProviderError> {
    provider.get_secret(&ctx, &remote).await.map(|v| String::from_utf8(v).unwrap())
}

/// A store used by many ExternalSecrets logs in once per token lifetime: many calls, and
/// clients rebuilt (as the client cache does every few minutes), share one token, counted in
/// Vault's audit log. Rotated credentials and a new store generation log in again; a revoked
/// token is replaced by one new login. The provider runs in process here, so the test can
/// rebuild its clients.
#[tokio::test(flavor = "multi_thread")]
async fn one_login_per_token_lifetime_across_client_rebuilds() {
    let _guard = common::shared().await;
    let v = vault(VaultDev::start());
    let audit = v.audit(&[]);
    with_temp_namespace(&[], |client, ns| async move {
        let key = format!("{ns}/db");
        v.cli(&["kv", "put", &format!("secret/{key}"), "user=app"]);
        secret(&client, &ns, "userpass", &[("password", "pw-1")]).await;
        let spec = json!({"server": v.address(), "path": "secret",
            "auth": {"userPass": {"username": "app", "secretRef": {"name": "userpass", "key": "password"}}}});
        secret_store(&client, &ns, "vault", spec).await;
        let denied = DeniedNetworks::parse(keyward_e2e::LOCAL_DENIED_NETWORKS).expect("the local list parses");
        let provider = Arc::new(VaultProvider::new(client.clone(), denied));
        let r = store_ref("vault", &ns);
        let ctx = check_provider_ref("GetSecret", Some(&r), &ns, true).unwrap();
        let remote = ExternalSecretDataRemoteRef { key: key.clone(), property: "user".into(), ..Default::default() };
        let logins = || audit.count("auth/userpass/login/app");
        let read = || read_user(provider.clone(), ctx.clone(), remote.clone());

        // Many ExternalSecrets at once, then one after another, then after rebuilds.
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..20 {
            tasks.spawn(read());
        }
        let all = tasks.join_all().await;
        assert!(all.iter().all(|a| a.as_deref() == Ok("app")), "{all:?}");
        for _ in 0..10 {
            assert_eq!(read().await.unwrap(), "app");
        }
        for _ in 0..3 {
            provider.forget_client(&ctx, Some(1));
            assert_eq!(read().await.unwrap(), "app");
        }
        assert_eq!(logins(), 1, "one login for 33 reads and 3 rebuilds");

        // A revoked token: one new login, reused again after a rebuild.
        v.cli(&["token", "revoke", "-mode=path", "auth/userpass"]);
        assert_eq!(read().await.unwrap(), "app");
        provider.forget_client(&ctx, Some(1));
        assert_eq!(read().await.unwrap(), "app");
        assert_eq!(logins(), 2, "a revoked token is replaced once");

        // Rotated credentials: the rebuilt client logs in with them.
        v.cli(&["write", "auth/userpass/users/app/password", "password=pw-2"]);
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
        let patch = json!({"stringData": {"password": "pw-2"}});
        secrets.patch("userpass", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
        provider.forget_client(&ctx, Some(1));
        assert_eq!(read().await.unwrap(), "app");
        assert_eq!(logins(), 3, "new credentials, a new login");

        // A new generation of the store: a new login too.
        let stores: Api<SecretStore> = Api::namespaced(client.clone(), &ns);
        let patch = json!({"spec": {"provider": {"vault": {"readYourWrites": true}}}});
        stores.patch("vault", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
        assert_eq!(read().await.unwrap(), "app");
        for _ in 0..5 {
            assert_eq!(read().await.unwrap(), "app");
        }
        assert_eq!(logins(), 4, "one login for the new generation");

        // A ClusterSecretStore used from several namespaces, with the same credentials: one
        // token for all of them.
        let cluster = format!("{ns}-shared");
        let spec = json!({"server": v.address(), "path": "secret",
            "auth": {"userPass": {"username": "app", "secretRef": {"name": "userpass", "key": "password", "namespace": ns}}}});
        cluster_store(&client, &cluster, spec).await;
        let r = cluster_ref(&cluster);
        for source in [ns.as_str(), "team-b", "team-c"] {
            let ctx = check_provider_ref("GetSecret", Some(&r), source, true).unwrap();
            for _ in 0..3 {
                assert_eq!(read_user(provider.clone(), ctx.clone(), remote.clone()).await.unwrap(), "app", "{source}");
            }
        }
        assert_eq!(logins(), 5, "one login for the ClusterSecretStore, whichever namespace asks");
        delete_cluster_store(&client, &cluster).await;
    })
    .await;
}

/// One Vault read per secret per refresh window: requests through one store that read the same
/// secret (every property of it, as several `data` entries do) share one KV read within the age
/// they accept, counted in Vault's audit log; a request that accepts no age reads again; another
/// tenant with its own credentials reading the same key name never gets the first tenant's
/// answer (its own read, its own token).
#[tokio::test(flavor = "multi_thread")]
async fn reads_of_one_secret_share_one_store_call_per_identity() {
    let _guard = common::shared().await;
    let v = vault(VaultDev::start());
    let audit = v.audit(&[]);
    with_temp_namespace(&[], |client, ns| async move {
        with_temp_namespace(&[], |_, other| async move {
            let key = format!("{ns}/shared");
            v.cli(&["kv", "put", &format!("secret/{key}"), "user=app", "password=pw", "host=db"]);
            secret(&client, &ns, "userpass", &[("password", "pw-1")]).await;
            let spec = json!({"server": v.address(), "path": "secret",
                "auth": {"userPass": {"username": "app", "secretRef": {"name": "userpass", "key": "password"}}}});
            secret_store(&client, &ns, "vault", spec.clone()).await;
            secret(&client, &other, "userpass", &[("password", "pw-1")]).await;
            secret_store(&client, &other, "vault", spec).await;
            let denied = DeniedNetworks::parse(keyward_e2e::LOCAL_DENIED_NETWORKS).expect("the local list parses");
            let provider = Arc::new(VaultProvider::new(client.clone(), denied));
            let minute = Duration::from_secs(60);
            let ctx_of = |source: &str, max_age: Duration| {
                let ctx = check_provider_ref("GetSecret", Some(&store_ref("vault", source)), source, true).unwrap();
                keyward_provider_runtime::RequestContext { max_age, ..ctx }
            };
            let remote = |property: &str| ExternalSecretDataRemoteRef {
                key: key.clone(),
                property: property.into(),
                ..Default::default()
            };
            let reads = || audit.reads(&format!("secret/data/{key}"));

            // Thirty requests at once, for three properties: one read.
            let mut tasks = tokio::task::JoinSet::new();
            for i in 0..30 {
                let (p, ctx, r) = (provider.clone(), ctx_of(&ns, minute), remote(["user", "password", "host"][i % 3]));
                tasks.spawn(async move { p.get_secret(&ctx, &r).await });
            }
            let answers: Vec<_> =
                tasks.join_all().await.into_iter().map(|a| String::from_utf8(a.unwrap()).unwrap()).collect();
            assert_eq!(answers.iter().filter(|a| *a == "app").count(), 10, "{answers:?}");
            assert_eq!(reads(), 1, "thirty requests for one secret, one KV read");

            // Later requests within the age they accept: still one read; GetSecretMap too.
            assert_eq!(provider.get_secret(&ctx_of(&ns, minute), &remote("host")).await.unwrap(), b"db");
            let map = provider.get_secret_map(&ctx_of(&ns, minute), &remote("")).await.unwrap();
            assert_eq!(map.get("password").map(Vec::as_slice), Some(b"pw".as_slice()));
            assert_eq!(reads(), 1);

            // A changed value reaches a request that accepts no age, at once.
            v.cli(&["kv", "put", &format!("secret/{key}"), "user=app2", "password=pw", "host=db"]);
            assert_eq!(provider.get_secret(&ctx_of(&ns, Duration::ZERO), &remote("user")).await.unwrap(), b"app2");
            assert_eq!(reads(), 2);

            // Another namespace's store, same key name: its own read.
            assert_eq!(provider.get_secret(&ctx_of(&other, minute), &remote("user")).await.unwrap(), b"app2");
            assert_eq!(reads(), 3, "another tenant never shares the first tenant's answer");
        })
        .await;
    })
    .await;
}

/// Moto's account: the ARNs its IAM users and assumed roles have.
const MOTO_ACCOUNT: &str = "123456789012";

/// Vault's AWS auth method, IAM type, verified by moto's STS: Vault forwards the signed
/// GetCallerIdentity request to moto and binds the identity moto answers with. Static keys of a
/// bound user read a secret (one login for many reads); another user's or unknown keys are
/// refused by Vault; with `role` the keys assume it first (the Vault role is bound to the role
/// only); the server ID header is sent when set and required when Vault asks for it; a
/// SecretStore may neither name another namespace's keys nor use the provider's own identity.
#[tokio::test(flavor = "multi_thread")]
async fn iam_login_against_moto() {
    let _guard = common::shared().await;
    let moto = Moto::start();
    // Two users with access keys; a role `app` may assume. Then moto checks every request's
    // signature and permissions, as STS does.
    let setup = format!(
        "import urllib.request\n\
         iam=boto3.client('iam',**kw)\nout={{}}\n\
         for u in ['app','stranger']:\n  iam.create_user(UserName=u)\n  \
         k=iam.create_access_key(UserName=u)['AccessKey']\n  out[u]=[k['AccessKeyId'],k['SecretAccessKey']]\n\
         trust={{'Version':'2012-10-17','Statement':[{{'Effect':'Allow','Action':'sts:AssumeRole',\
         'Principal':{{'AWS':'arn:aws:iam::{MOTO_ACCOUNT}:user/app'}}}}]}}\n\
         iam.create_role(RoleName='vault-reader',AssumeRolePolicyDocument=json.dumps(trust))\n\
         may={{'Version':'2012-10-17','Statement':[{{'Effect':'Allow','Action':'sts:AssumeRole',\
         'Resource':'arn:aws:iam::{MOTO_ACCOUNT}:role/vault-reader'}}]}}\n\
         iam.put_user_policy(UserName='app',PolicyName='assume',PolicyDocument=json.dumps(may))\n\
         urllib.request.urlopen(urllib.request.Request(kw['endpoint_url']+'/moto-api/reset-auth',data=b'0',\
         headers={{'Content-Type':'text/plain'}}))\n\
         print(json.dumps(out))"
    );
    let users = moto.boto3("us-east-1", &setup).unwrap();
    let users: Value = serde_json::from_str(users.trim()).unwrap();
    let v = vault(VaultDev::start());
    let audit = v.audit(&[]);
    let sts = moto.endpoint();
    for (mount, server_id) in [("aws", None), ("aws-sid", Some("vault.keyward.test"))] {
        v.cli(&["auth", "enable", &format!("-path={mount}"), "aws"]);
        let mut config = vec![
            format!("auth/{mount}/config/client"),
            "access_key=moto".into(),
            "secret_key=moto".into(),
            format!("sts_endpoint={sts}"),
            format!("iam_endpoint={sts}"),
            "sts_region=us-east-1".into(),
        ];
        config.extend(server_id.map(|id| format!("iam_server_id_header_value={id}")));
        v.cli(&[&["write"], config.iter().map(String::as_str).collect::<Vec<_>>().as_slice()].concat());
        for (role, principal) in [("app", "user/app"), ("reader", "role/vault-reader")] {
            v.cli(&[
                "write",
                &format!("auth/{mount}/role/{role}"),
                "auth_type=iam",
                &format!("bound_iam_principal_arn=arn:aws:iam::{MOTO_ACCOUNT}:{principal}"),
                "resolve_aws_unique_ids=false",
                "token_policies=keyward",
            ]);
        }
    }
    let env: Vec<(&str, String)> = moto.provider_env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut p = start_provider_with_env(&env).await;
    with_temp_namespace(&[], |_client, other| async move {
        with_temp_namespace(&[], |client, ns| async move {
            let key = format!("{ns}/db");
            v.cli(&["kv", "put", &format!("secret/{key}"), "user=app"]);
            for (name, [id, key_secret]) in [
                ("app", [&users["app"][0], &users["app"][1]]),
                ("stranger", [&users["stranger"][0], &users["stranger"][1]]),
                ("unknown", [&json!("AKIAKEYWARDUNKNOWN01"), &json!("not-a-key")]),
                ("forged", [&users["app"][0], &json!("not-the-secret")]),
            ] {
                let (id, key_secret) = (id.as_str().unwrap(), key_secret.as_str().unwrap());
                secret(&client, &ns, &format!("aws-{name}"), &[("id", id), ("secret", key_secret)]).await;
            }
            secret(&client, &other, "aws-app", &[("id", "x"), ("secret", "y")]).await;
            let keys = |name: &str| {
                json!({"accessKeyIDSecretRef": {"name": name, "key": "id"},
                       "secretAccessKeySecretRef": {"name": name, "key": "secret"}})
            };
            let store = |iam: Value| json!({"server": v.address(), "path": "secret", "auth": {"iam": iam}});
            let role = format!("arn:aws:iam::{MOTO_ACCOUNT}:role/vault-reader");
            let stores = [
                ("iam", json!({"vaultRole": "app", "secretRef": keys("aws-app")})),
                ("iam-stranger", json!({"vaultRole": "app", "secretRef": keys("aws-stranger")})),
                ("iam-unknown", json!({"vaultRole": "app", "secretRef": keys("aws-unknown")})),
                ("iam-forged", json!({"vaultRole": "app", "secretRef": keys("aws-forged")})),
                (
                    "iam-role",
                    json!({"vaultRole": "reader", "role": role, "externalID": "keyward", "secretRef": keys("aws-app")}),
                ),
                ("iam-no-role", json!({"vaultRole": "reader", "secretRef": keys("aws-app")})),
                (
                    "iam-server-id",
                    json!({"path": "aws-sid", "vaultRole": "app", "vaultAwsIamServerID": "vault.keyward.test",
                           "secretRef": keys("aws-app")}),
                ),
                ("iam-no-server-id", json!({"path": "aws-sid", "vaultRole": "app", "secretRef": keys("aws-app")})),
                (
                    "iam-foreign",
                    json!({"vaultRole": "app", "secretRef": {
                        "accessKeyIDSecretRef": {"name": "aws-app", "key": "id", "namespace": other},
                        "secretAccessKeySecretRef": {"name": "aws-app", "key": "secret"}}}),
                ),
                ("iam-own", json!({"vaultRole": "app"})),
            ];
            for (name, iam) in stores {
                secret_store(&client, &ns, name, store(iam)).await;
            }
            let c = &mut p.client;
            let read = |name: &str| get(&store_ref(name, &ns), &ns, &key, "user");

            // Bound keys log in once and read, again and again.
            for _ in 0..3 {
                assert_eq!(get_text(c, read("iam")).await.unwrap(), "app");
            }
            assert_eq!(audit.count("auth/aws/login"), 1, "one login for three reads");

            // With role, the keys assume it first: the Vault role bound to the role only takes it.
            assert_eq!(get_text(c, read("iam-role")).await.unwrap(), "app");
            let e = get_text(c, read("iam-no-role")).await.unwrap_err();
            assert_eq!(e.code(), tonic::Code::Unauthenticated, "{e:?}");
            assert!(e.message().contains("logging in at auth/aws/login"), "{}", e.message());
            assert!(e.message().contains(&format!("arn:aws:iam::{MOTO_ACCOUNT}:user/app")), "{}", e.message());

            // Another user's keys are someone Vault did not bind; keys STS does not know, or a
            // signature with the wrong secret, STS refuses before Vault binds anyone.
            let e = get_text(c, read("iam-stranger")).await.unwrap_err();
            assert_eq!(e.code(), tonic::Code::Unauthenticated, "{e:?}");
            assert!(e.message().contains("logging in at auth/aws/login"), "{}", e.message());
            assert!(e.message().contains("user/stranger\" does not belong to the role \"app\""), "{}", e.message());
            // Moto answers these refusals (InvalidClientTokenId, SignatureDoesNotMatch) with
            // `Content-Type: application/xml`; Vault reads only `text/xml` answers (as STS sends
            // them), so its message names no STS error code: moto's log shows the refusal.
            let refusals = || moto.process().log().lines().filter(|l| l.contains("\" 403 ")).count();
            for name in ["iam-unknown", "iam-forged"] {
                let before = refusals();
                let e = get_text(c, read(name)).await.unwrap_err();
                assert_eq!(e.code(), tonic::Code::Unauthenticated, "{name}: {e:?}");
                assert!(e.message().contains("logging in at auth/aws/login"), "{name}: {}", e.message());
                assert!(e.message().contains("GetCallerIdentity"), "{name}: {}", e.message());
                assert!(refusals() > before, "{name}: moto refused the request\n{}", moto.process().log());
            }

            // The server ID header is signed and sent; a mount that requires it refuses a login
            // without.
            assert_eq!(get_text(c, read("iam-server-id")).await.unwrap(), "app");
            let e = get_text(c, read("iam-no-server-id")).await.unwrap_err();
            assert_eq!(e.code(), tonic::Code::Unauthenticated, "{e:?}");
            assert!(e.message().contains("logging in at auth/aws-sid/login"), "{}", e.message());

            // The tenant boundary: no other namespace's keys, no provider identity.
            let e = get_text(c, read("iam-foreign")).await.unwrap_err();
            assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e:?}");
            assert!(e.message().contains("spec.auth.iam.secretRef.accessKeyIDSecretRef.namespace"), "{}", e.message());
            let e = get_text(c, read("iam-own")).await.unwrap_err();
            assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e:?}");
            assert!(e.message().contains("spec.auth.iam"), "{}", e.message());
        })
        .await;
    })
    .await;
}

/// The IAM login with web identity: a ServiceAccount's token exchanged with moto's STS
/// (AssumeRoleWithWebIdentity) for the role its `eks.amazonaws.com/role-arn` annotation names,
/// which Vault binds; a ServiceAccount without the annotation is refused naming the field.
#[tokio::test(flavor = "multi_thread")]
async fn iam_login_with_web_identity() {
    let _guard = common::shared().await;
    let moto = Moto::start();
    let v = vault(VaultDev::start());
    let sts = moto.endpoint();
    v.cli(&["auth", "enable", "aws"]);
    v.cli(&[
        "write",
        "auth/aws/config/client",
        "access_key=moto",
        "secret_key=moto",
        &format!("sts_endpoint={sts}"),
        &format!("iam_endpoint={sts}"),
        "sts_region=us-east-1",
    ]);
    v.cli(&[
        "write",
        "auth/aws/role/web",
        "auth_type=iam",
        &format!("bound_iam_principal_arn=arn:aws:iam::{MOTO_ACCOUNT}:role/vault-web"),
        "resolve_aws_unique_ids=false",
        "token_policies=keyward",
    ]);
    let env: Vec<(&str, String)> = moto.provider_env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut p = start_provider_with_env(&env).await;
    with_temp_namespace(&[], |client, ns| async move {
        let key = format!("{ns}/db");
        v.cli(&["kv", "put", &format!("secret/{key}"), "user=app"]);
        let accounts = Api::<ServiceAccount>::namespaced(client.clone(), &ns);
        let role = format!("arn:aws:iam::{MOTO_ACCOUNT}:role/vault-web");
        for (name, annotations) in
            [("web", Some([("eks.amazonaws.com/role-arn".to_string(), role)].into())), ("plain", None)]
        {
            let sa = ServiceAccount {
                metadata: ObjectMeta { name: Some(name.into()), annotations, ..Default::default() },
                ..Default::default()
            };
            accounts.create(&PostParams::default(), &sa).await.unwrap();
            let iam = json!({"vaultRole": "web", "jwt": {"serviceAccountRef": {"name": name}}});
            secret_store(&client, &ns, name, json!({"server": v.address(), "path": "secret", "auth": {"iam": iam}}))
                .await;
        }
        let c = &mut p.client;
        assert_eq!(get_text(c, get(&store_ref("web", &ns), &ns, &key, "user")).await.unwrap(), "app");
        let e = get_text(c, get(&store_ref("plain", &ns), &ns, &key, "user")).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::FailedPrecondition, "{e:?}");
        assert!(e.message().contains("spec.auth.iam.jwt.serviceAccountRef"), "{}", e.message());
        assert!(e.message().contains("eks.amazonaws.com/role-arn"), "{}", e.message());
    })
    .await;
}
