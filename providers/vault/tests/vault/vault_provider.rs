//! The Vault provider as a process, over real mTLS, against `vault server -dev` (built from
//! Vault's Go module) and the local control plane: KV v2 and v1 reads, versions, finds, pushes
//! and deletes; token, AppRole, Kubernetes and JWT logins; token renewal and re-login; the
//! tenant boundary.

use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use keyward_crds::Vault;
use keyward_e2e::stores::VaultDev;
use keyward_e2e::{control_plane, with_temp_namespace};
use keyward_proto::v1::secret_store_provider_client::SecretStoreProviderClient;
use keyward_proto::v1::{
    DeleteSecretRequest, ExternalSecretDataRemoteRef, ExternalSecretFind, FindName, GetAllSecretsRequest,
    GetSecretMapRequest, GetSecretRequest, ProviderReference, PushSecretData, PushSecretRemoteRef, PushSecretRequest,
    SecretExistsRequest, ValidateRequest,
};
use keyward_provider_runtime::testkit::{RunningProvider, launch, operator_ref, provider_ref};
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};
use serde_json::json;

use tonic::transport::Channel;

use crate::common;

const POLICY: &str = r#"
path "secret/*" { capabilities = ["create", "read", "update", "delete", "list"] }
path "kv1/*" { capabilities = ["create", "read", "update", "delete", "list"] }
"#;

/// A dev server with the `keyward` policy and a KV v1 engine at `kv1/`.
fn vault() -> VaultDev {
    let v = VaultDev::start();
    v.policy("keyward", POLICY);
    v.cli(&["secrets", "enable", "-path=kv1", "-version=1", "kv"]);
    v
}

async fn start_provider() -> RunningProvider {
    launch("keyward-provider-vault", &[]).await.unwrap()
}

fn token(v: &VaultDev, args: &[&str]) -> String {
    let mut all = vec!["-policy=keyward"];
    all.extend(args);
    v.json(&["token", "create"], &all)["auth"]["client_token"].as_str().unwrap().to_string()
}

async fn secret(client: &Client, ns: &str, name: &str, data: &[(&str, &str)]) {
    let data = data.iter().map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec()))).collect();
    let s = Secret {
        metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
        data: Some(data),
        ..Default::default()
    };
    Api::<Secret>::namespaced(client.clone(), ns).create(&PostParams::default(), &s).await.unwrap();
}

async fn config(client: &Client, ns: &str, name: &str, spec: serde_json::Value) {
    let obj: Vault = serde_json::from_value(json!({
        "apiVersion": "provider.external-secrets.io/v2alpha1", "kind": "Vault",
        "metadata": {"name": name}, "spec": spec}))
    .unwrap();
    Api::<Vault>::namespaced(client.clone(), ns).create(&PostParams::default(), &obj).await.unwrap();
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

fn names(m: HashMap<String, Vec<u8>>) -> Vec<String> {
    let mut k: Vec<String> = m.into_keys().collect();
    k.sort();
    k
}

#[tokio::test(flavor = "multi_thread")]
async fn reads_kv2_and_kv1_versions_metadata_and_finds() {
    let _guard = common::shared().await;
    let v = vault();
    let mut p = start_provider().await;
    with_temp_namespace(&[], |client, ns| async move {
        v.cli(&["kv", "put", &format!("secret/{ns}/app/db"), "user=app", "password=one"]);
        v.cli(&["kv", "put", &format!("secret/{ns}/app/db"), "user=app", "password=two"]);
        v.cli(&["kv", "metadata", "put", "-custom-metadata=team=a", &format!("secret/{ns}/app/db")]);
        v.cli(&["kv", "put", &format!("secret/{ns}/web/token"), "token=t0k"]);
        v.cli(&["kv", "put", &format!("kv1/{ns}/legacy"), "user=old"]);
        secret(&client, &ns, "vault-token", &[("token", &token(&v, &[]))]).await;
        let auth = json!({"tokenSecretRef": {"name": "vault-token", "key": "token"}});
        config(&client, &ns, "kv2", json!({"server": v.address(), "path": "secret", "auth": auth})).await;
        config(&client, &ns, "kv1", json!({"server": v.address(), "path": "kv1", "version": "v1", "auth": auth})).await;
        config(&client, &ns, "nomount", json!({"server": v.address(), "auth": auth})).await;

        let r = provider_ref("Vault", "kv2", "", "Provider");
        let c = &mut p.client;
        let key = format!("{ns}/app/db");
        assert_eq!(get_text(c, get(&r, &ns, &key, "password", "")).await.unwrap(), "two");
        assert_eq!(get_text(c, get(&r, &ns, &key, "password", "1")).await.unwrap(), "one", "version 1");
        let whole: serde_json::Value =
            serde_json::from_str(&get_text(c, get(&r, &ns, &key, "", "")).await.unwrap()).unwrap();
        assert_eq!(whole, json!({"user": "app", "password": "two"}));
        let mut fetch = get(&r, &ns, &key, "team", "");
        fetch.remote_ref.as_mut().unwrap().metadata_policy = "Fetch".into();
        assert_eq!(get_text(c, fetch).await.unwrap(), "a", "metadataPolicy Fetch reads custom metadata");
        // And the system metadata, as upstream (its Vault guide reads current_version).
        let mut fetch = get(&r, &ns, &key, "current_version", "");
        fetch.remote_ref.as_mut().unwrap().metadata_policy = "Fetch".into();
        assert_eq!(get_text(c, fetch).await.unwrap(), "2", "two versions written");
        let mut fetch_all = get(&r, &ns, &key, "", "");
        fetch_all.remote_ref.as_mut().unwrap().metadata_policy = "Fetch".into();
        let all: serde_json::Value = serde_json::from_str(&get_text(c, fetch_all.clone()).await.unwrap()).unwrap();
        assert_eq!(all["team"], "a");
        assert_eq!(all["current_version"], "2");
        assert_eq!(all["delete_version_after"], "0s");
        assert!(all["created_time"].as_str().is_some_and(|t| t.ends_with('Z')), "{all}");
        let map = c.get_secret_map(GetSecretMapRequest {
            provider_ref: fetch_all.provider_ref.clone(),
            source_namespace: ns.clone(),
            remote_ref: fetch_all.remote_ref.clone(),
            max_age_millis: 0,
        });
        let map = map.await.unwrap().into_inner().secrets;
        assert_eq!(names(map.clone()), ["created_time", "current_version", "delete_version_after", "team"]);
        assert_eq!(map["current_version"], b"2", "extract with Fetch is the metadata map, as upstream");
        let nomount = provider_ref("Vault", "nomount", "", "Provider");
        assert_eq!(get_text(c, get(&nomount, &ns, &format!("secret/{key}"), "user", "")).await.unwrap(), "app");
        let kv1 = provider_ref("Vault", "kv1", "", "Provider");
        assert_eq!(get_text(c, get(&kv1, &ns, &format!("{ns}/legacy"), "user", "")).await.unwrap(), "old");

        // KV v1 (KV v2's not-found, maps and Validate: the conformance suite).
        let e = get_text(c, get(&kv1, &ns, &format!("{ns}/missing"), "", "")).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::NotFound, "missing KV v1 secret: {e:?}");

        let find = |r: &ProviderReference, regexp: &str, path: &str, tags: &[(&str, &str)]| GetAllSecretsRequest {
            provider_ref: Some(r.clone()),
            source_namespace: ns.clone(),
            find: Some(ExternalSecretFind {
                name: (!regexp.is_empty()).then(|| FindName { regexp: regexp.into() }),
                path: path.into(),
                tags: tags.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
                ..Default::default()
            }),
        };
        let found = c.get_all_secrets(find(&r, "token$", &ns, &[])).await.unwrap().into_inner().secrets;
        assert_eq!(names(found.clone()), [format!("{ns}/web/token")]);
        assert_eq!(found[&format!("{ns}/web/token")], br#"{"token":"t0k"}"#);
        let found = c.get_all_secrets(find(&r, "", &ns, &[("team", "a")])).await.unwrap().into_inner().secrets;
        assert_eq!(names(found), vec![key.to_string()]);
        // Tags match the system metadata too: only app/db has two versions.
        let found =
            c.get_all_secrets(find(&r, "", &ns, &[("current_version", "2")])).await.unwrap().into_inner().secrets;
        assert_eq!(names(found), vec![key.to_string()]);
        let found = c.get_all_secrets(find(&r, "", &format!("{ns}/app"), &[])).await.unwrap().into_inner().secrets;
        assert_eq!(names(found), vec![key.to_string()]);
        let found = c.get_all_secrets(find(&kv1, ".", &ns, &[])).await.unwrap().into_inner().secrets;
        assert_eq!(names(found), [format!("{ns}/legacy")]);
    })
    .await;
    drop(p.child);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_find_holding_more_than_one_answer_is_refused() {
    let _guard = common::shared().await;
    let v = vault();
    let mut p = start_provider().await;
    with_temp_namespace(&[], |client, ns| async move {
        // Three secrets of 1.5 MiB each (three 512 KiB values: Vault refuses longer JSON
        // strings): every read is within the cap, all three are not.
        let part = "x".repeat(512 * 1024);
        let file = std::env::temp_dir().join(format!("{ns}-part"));
        std::fs::write(&file, &part).unwrap();
        let value = |k: &str| format!("{k}=@{}", file.display());
        for name in ["one", "two", "three"] {
            v.cli(&["kv", "put", &format!("secret/{ns}/big/{name}"), &value("a"), &value("b"), &value("c")]);
        }
        std::fs::remove_file(&file).unwrap();
        v.cli(&["kv", "put", &format!("secret/{ns}/small/s"), "value=tiny"]);
        secret(&client, &ns, "vault-token", &[("token", &token(&v, &[]))]).await;
        let auth = json!({"tokenSecretRef": {"name": "vault-token", "key": "token"}});
        config(&client, &ns, "kv2", json!({"server": v.address(), "path": "secret", "auth": auth})).await;
        let r = provider_ref("Vault", "kv2", "", "Provider");
        let c = &mut p.client;
        let find = |path: String, regexp: &str| GetAllSecretsRequest {
            provider_ref: Some(r.clone()),
            source_namespace: ns.clone(),
            find: Some(ExternalSecretFind {
                path,
                name: (!regexp.is_empty()).then(|| FindName { regexp: regexp.into() }),
                ..Default::default()
            }),
        };

        let e = c.get_all_secrets(find(format!("{ns}/big"), "")).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unavailable, "{e:?}");
        assert!(e.message().contains("more than 4 MiB, more than one answer can carry"), "{e:?}");
        // Two of them fit.
        let found = c.get_all_secrets(find(format!("{ns}/big"), "/(one|two)$")).await.unwrap().into_inner().secrets;
        assert_eq!(names(found.clone()), [format!("{ns}/big/one"), format!("{ns}/big/two")]);
        assert_eq!(found[&format!("{ns}/big/one")].len(), 3 * part.len() + r#"{"a":"","b":"","c":""}"#.len());
        let found = c.get_all_secrets(find(format!("{ns}/small"), "")).await.unwrap().into_inner().secrets;
        assert_eq!(found[&format!("{ns}/small/s")], br#"{"value":"tiny"}"#);
    })
    .await;
    drop(p.child);
}

#[tokio::test(flavor = "multi_thread")]
async fn pushes_with_custom_metadata_and_deletes() {
    let _guard = common::shared().await;
    let v = vault();
    let mut p = start_provider().await;
    with_temp_namespace(&[], |client, ns| async move {
        secret(&client, &ns, "vault-token", &[("token", &token(&v, &[]))]).await;
        let auth = json!({"tokenSecretRef": {"name": "vault-token", "key": "token"}});
        config(&client, &ns, "kv2", json!({"server": v.address(), "path": "secret", "auth": auth})).await;
        let r = provider_ref("Vault", "kv2", "", "Provider");
        let c = &mut p.client;
        let source: HashMap<String, Vec<u8>> =
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
        let remote = format!("{ns}/pushed");
        let meta = json!({"apiVersion": "kubernetes.external-secrets.io/v1alpha1", "kind": "PushSecretMetadata",
                          "spec": {"customMetadata": {"owner": "team-a"}}});
        c.push_secret(push("password", &remote, "pw", meta)).await.unwrap();
        c.push_secret(push("user", &remote, "user", serde_json::Value::Null)).await.unwrap();
        let stored = v.json(&["kv", "get"], &[&format!("secret/{remote}")]);
        assert_eq!(stored["data"]["data"], json!({"pw": "p1", "user": "app"}), "properties merge");
        assert_eq!(stored["data"]["metadata"]["version"], 2);
        let m = v.json(&["kv", "metadata", "get"], &[&format!("secret/{remote}")]);
        assert_eq!(m["data"]["custom_metadata"]["managed-by"], "external-secrets");
        assert_eq!(m["data"]["custom_metadata"]["owner"], "team-a");
        c.push_secret(push("", &format!("{ns}/all"), "", serde_json::Value::Null)).await.unwrap();
        let stored = v.json(&["kv", "get"], &[&format!("secret/{ns}/all")]);
        assert_eq!(stored["data"]["data"], json!({"password": "p1", "user": "app"}));

        v.cli(&["kv", "put", &format!("secret/{ns}/foreign"), "mine=yes"]);
        let refused = c.push_secret(push("password", &format!("{ns}/foreign"), "", serde_json::Value::Null)).await;
        assert_eq!(refused.unwrap_err().code(), tonic::Code::PermissionDenied, "unmarked secrets are left alone");

        let rr = |remote: &str, prop: &str| {
            Some(PushSecretRemoteRef { remote_key: remote.into(), property: prop.into(), ..Default::default() })
        };
        let exists = |remote: &str, prop: &str| SecretExistsRequest {
            provider_ref: Some(r.clone()),
            source_namespace: ns.clone(),
            remote_ref: rr(remote, prop),
        };
        let delete = |remote: &str, prop: &str| DeleteSecretRequest {
            provider_ref: Some(r.clone()),
            source_namespace: ns.clone(),
            remote_ref: rr(remote, prop),
        };
        assert!(c.secret_exists(exists(&remote, "pw")).await.unwrap().into_inner().exists);
        c.delete_secret(delete(&remote, "pw")).await.unwrap();
        assert!(!c.secret_exists(exists(&remote, "pw")).await.unwrap().into_inner().exists);
        assert!(c.secret_exists(exists(&remote, "")).await.unwrap().into_inner().exists);
        c.delete_secret(delete(&remote, "")).await.unwrap();
        assert!(!c.secret_exists(exists(&remote, "")).await.unwrap().into_inner().exists);
        assert!(v.try_cli(&["kv", "metadata", "get", &format!("secret/{remote}")]).is_err(), "every version is gone");
        c.delete_secret(delete(&remote, "")).await.expect("deleting what is gone succeeds");
        c.delete_secret(delete(&format!("{ns}/foreign"), "")).await.unwrap();
        v.cli(&["kv", "get", &format!("secret/{ns}/foreign")]);
    })
    .await;
    drop(p.child);
}

#[tokio::test(flavor = "multi_thread")]
async fn logins_renewal_relogin_and_the_tenant_boundary() {
    let _guard = common::shared().await;
    let v = vault();
    let cp = control_plane().await;
    let mut p = start_provider().await;
    with_temp_namespace(&[], |_client, other| async move {
        with_temp_namespace(&[], |client, ns| async move {
            let key = format!("{ns}/db");
            v.cli(&["kv", "put", &format!("secret/{key}"), "user=app"]);
            secret(&client, &other, "vault-token", &[("token", &token(&v, &[]))]).await;

            // AppRole, with a short token that must be renewed, then re-issued after revocation.
            let (role_id, secret_id) = v.approle("keyward", "keyward");
            v.cli(&["write", "auth/approle/role/keyward", "token_policies=keyward", "token_ttl=6s", "token_max_ttl=1h"]);
            secret(&client, &ns, "approle", &[("secret-id", &secret_id)]).await;
            config(&client, &ns, "approle", json!({"server": v.address(), "path": "secret",
                "auth": {"appRole": {"roleId": role_id, "secretRef": {"name": "approle", "key": "secret-id"}}}}))
            .await;
            let c = &mut p.client;
            let r = provider_ref("Vault", "approle", "", "Provider");
            assert_eq!(get_text(c, get(&r, &ns, &key, "user", "")).await.unwrap(), "app");
            tokio::time::sleep(Duration::from_secs(5)).await;
            assert_eq!(get_text(c, get(&r, &ns, &key, "user", "")).await.unwrap(), "app", "renewed at 5s");
            tokio::time::sleep(Duration::from_secs(5)).await;
            assert_eq!(get_text(c, get(&r, &ns, &key, "user", "")).await.unwrap(), "app", "past the first 6s");
            v.cli(&["token", "revoke", "-mode=path", "auth/approle"]);
            assert_eq!(get_text(c, get(&r, &ns, &key, "user", "")).await.unwrap(), "app", "logged in again");
            let logins = p.child.log().matches("logged in to Vault").count();
            assert!(logins >= 2, "a new login after revocation ({logins} logins)");

            // Kubernetes auth: a token of this namespace's ServiceAccount, reviewed by the API server.
            let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), &ns);
            for sa in ["app", "reviewer"] {
                let obj = ServiceAccount { metadata: ObjectMeta { name: Some(sa.into()), ..Default::default() }, ..Default::default() };
                sas.create(&PostParams::default(), &obj).await.unwrap();
            }
            let binding = format!("{ns}-vault-reviewer");
            let out = cp
                .kubectl()
                .args(["create", "clusterrolebinding", &binding, "--clusterrole=system:auth-delegator"])
                .arg(format!("--serviceaccount={ns}:reviewer"))
                .output()
                .unwrap();
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            let reviewer = cp.kubectl().args(["create", "token", "reviewer", "-n", &ns, "--duration=1h"]).output().unwrap();
            let reviewer = String::from_utf8(reviewer.stdout).unwrap();
            let ca = std::fs::read_to_string(cp.ca_files().0).unwrap();
            v.cli(&["auth", "enable", "kubernetes"]);
            v.cli(&[
                "write",
                "auth/kubernetes/config",
                &format!("kubernetes_host={}", cp.server_url()),
                &format!("kubernetes_ca_cert={ca}"),
                &format!("token_reviewer_jwt={}", reviewer.trim()),
            ]);
            v.cli(&[
                "write",
                "auth/kubernetes/role/app",
                "bound_service_account_names=app",
                &format!("bound_service_account_namespaces={ns}"),
                "token_policies=keyward",
            ]);
            config(&client, &ns, "k8s", json!({"server": v.address(), "path": "secret",
                "auth": {"kubernetes": {"role": "app", "serviceAccountRef": {"name": "app"}}}}))
            .await;
            let r = provider_ref("Vault", "k8s", "", "Provider");
            assert_eq!(get_text(c, get(&r, &ns, &key, "user", "")).await.unwrap(), "app");

            // JWT auth: the same kind of token, checked against the control plane's signing key.
            let sa_pub = std::fs::read_to_string(cp.dir().join("pki/sa.pub")).unwrap();
            v.cli(&["auth", "enable", "jwt"]);
            v.cli(&["write", "auth/jwt/config", &format!("jwt_validation_pubkeys={sa_pub}")]);
            v.cli(&[
                "write",
                "auth/jwt/role/app",
                "role_type=jwt",
                "bound_audiences=vault",
                "user_claim=sub",
                &format!("bound_subject=system:serviceaccount:{ns}:app"),
                "token_policies=keyward",
            ]);
            config(&client, &ns, "jwt", json!({"server": v.address(), "path": "secret",
                "auth": {"jwt": {"role": "app", "kubernetesServiceAccountToken": {"serviceAccountRef": {"name": "app"}}}}}))
            .await;
            let r = provider_ref("Vault", "jwt", "", "Provider");
            assert_eq!(get_text(c, get(&r, &ns, &key, "user", "")).await.unwrap(), "app");

            // Wrong credentials: Validate says so.
            secret(&client, &ns, "bad-token", &[("token", "hvs.not-a-token")]).await;
            config(&client, &ns, "bad", json!({"server": v.address(), "path": "secret",
                "auth": {"tokenSecretRef": {"name": "bad-token", "key": "token"}}}))
            .await;
            let valid = c
                .validate(ValidateRequest { provider_ref: Some(provider_ref("Vault", "bad", "", "Provider")), source_namespace: ns.clone(), max_age_millis: 0 })
                .await
                .unwrap()
                .into_inner();
            assert!(!valid.valid, "{valid:?}");

            // The tenant boundary: another namespace's token, or the provider's own identity.
            config(&client, &ns, "foreign", json!({"server": v.address(), "path": "secret",
                "auth": {"tokenSecretRef": {"name": "vault-token", "key": "token", "namespace": other}}}))
            .await;
            config(&client, &ns, "ambient", json!({"server": v.address(), "path": "secret",
                "auth": {"kubernetes": {"role": "app"}}}))
            .await;
            config(&client, &ns, "foreign-sa", json!({"server": v.address(), "path": "secret",
                "auth": {"kubernetes": {"role": "app", "serviceAccountRef": {"name": "default", "namespace": other}}}}))
            .await;
            // A Provider, a ManifestNamespace ClusterProvider (the reconciler names the manifest's
            // namespace as the config namespace and sends the scope), and a ClusterProvider
            // request that does not say its scope reach a tenant-owned config.
            let via = |name: &str, kind: &str, config_ns: &str| match kind {
                "ManifestNamespace" => ProviderReference {
                    authentication_scope: kind.into(),
                    ..provider_ref("Vault", name, config_ns, "ClusterProvider")
                },
                _ => provider_ref("Vault", name, config_ns, kind),
            };
            for (name, kind, config_ns, want) in [
                ("foreign", "Provider", "", "spec.auth.tokenSecretRef.namespace"),
                ("foreign", "Provider", ns.as_str(), "spec.auth.tokenSecretRef.namespace"),
                ("foreign", "ClusterProvider", ns.as_str(), "spec.auth.tokenSecretRef.namespace"),
                ("foreign", "ManifestNamespace", ns.as_str(), "spec.auth.tokenSecretRef.namespace"),
                ("foreign-sa", "Provider", "", "spec.auth.kubernetes.serviceAccountRef.namespace"),
                ("foreign-sa", "ManifestNamespace", ns.as_str(), "spec.auth.kubernetes.serviceAccountRef.namespace"),
                ("ambient", "Provider", "", "uses the provider's own credentials"),
                ("ambient", "ClusterProvider", ns.as_str(), "uses the provider's own credentials"),
                ("ambient", "ManifestNamespace", ns.as_str(), "uses the provider's own credentials"),
            ] {
                let r = via(name, kind, config_ns);
                let e = get_text(c, get(&r, &ns, &key, "user", "")).await.unwrap_err();
                assert_eq!(e.code(), tonic::Code::PermissionDenied, "{name} via {kind} ({config_ns:?}): {e:?}");
                assert!(e.message().contains(want), "{name} via {kind} ({config_ns:?}): {}", e.message());
            }
            // The operator's config (a ClusterProvider with ProviderNamespace naming it) may
            // name Secrets of other namespaces; the client built for it does not serve a
            // tenant-owned request for the same config afterwards.
            let r = operator_ref("Vault", "foreign", &ns);
            assert_eq!(get_text(c, get(&r, "elsewhere", &key, "user", "")).await.unwrap(), "app");
            let tenant = via("foreign", "ManifestNamespace", &ns);
            let e = get_text(c, get(&tenant, &ns, &key, "user", "")).await.unwrap_err();
            assert_eq!(e.code(), tonic::Code::PermissionDenied, "the operator's client is not reused: {e:?}");
            let _ = cp.kubectl().args(["delete", "clusterrolebinding", &binding]).output();
        })
        .await
    })
    .await;
}

/// A Vault server on HTTPS with its own CA: reached with the CA inline (`caBundle`), from a
/// ConfigMap or a Secret (`caProvider`); refused without it; a tenant's `caProvider` naming
/// another namespace is refused before any request.
#[tokio::test(flavor = "multi_thread")]
async fn tls_with_ca_bundle_and_ca_provider() {
    let _guard = common::shared().await;
    use base64::Engine;
    use k8s_openapi::api::core::v1::ConfigMap;
    let v = VaultDev::start_tls();
    let mut p = start_provider().await;
    let ca = v.ca_pem();
    with_temp_namespace(&[], |client, ns| async move {
        let key = format!("{ns}/db");
        v.cli(&["kv", "put", &format!("secret/{key}"), "user=tls"]);
        v.policy("keyward", POLICY);
        secret(&client, &ns, "vault-token", &[("token", &token(&v, &[])), ("ca.crt", &ca)]).await;
        let cm = ConfigMap {
            metadata: ObjectMeta { name: Some("vault-ca".into()), ..Default::default() },
            data: Some([("ca.crt".to_string(), ca.clone())].into()),
            ..Default::default()
        };
        Api::<ConfigMap>::namespaced(client.clone(), &ns).create(&PostParams::default(), &cm).await.unwrap();
        let auth = json!({"tokenSecretRef": {"name": "vault-token", "key": "token"}});
        let b64 = base64::engine::general_purpose::STANDARD.encode(&ca);
        let base = |extra: serde_json::Value| {
            let mut spec = json!({"server": v.address(), "path": "secret", "auth": auth});
            spec.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            spec
        };
        config(&client, &ns, "inline", base(json!({"caBundle": b64}))).await;
        config(&client, &ns, "configmap", base(json!({"caProvider": {"type": "ConfigMap", "name": "vault-ca", "key": "ca.crt"}}))).await;
        config(&client, &ns, "secret", base(json!({"caProvider": {"type": "Secret", "name": "vault-token", "key": "ca.crt"}}))).await;
        config(&client, &ns, "system-roots", base(json!({}))).await;
        config(&client, &ns, "foreign-ca", base(json!({"caProvider": {"type": "ConfigMap", "name": "vault-ca", "key": "ca.crt", "namespace": "kube-system"}}))).await;
        let c = &mut p.client;
        for name in ["inline", "configmap", "secret"] {
            let r = provider_ref("Vault", name, "", "Provider");
            assert_eq!(get_text(c, get(&r, &ns, &key, "user", "")).await.unwrap(), "tls", "{name}");
        }
        let r = provider_ref("Vault", "system-roots", "", "Provider");
        let e = get_text(c, get(&r, &ns, &key, "user", "")).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unavailable, "an unknown CA: {e:?}");
        assert!(e.message().contains("certificate"), "{}", e.message());
        let r = provider_ref("Vault", "foreign-ca", "", "Provider");
        let e = get_text(c, get(&r, &ns, &key, "user", "")).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e:?}");
        assert!(e.message().contains("spec.caProvider.namespace"), "{}", e.message());
    })
    .await;
    drop(p.child);
}

/// Keys never leave the mount. An operator's ClusterProvider (ProviderNamespace) reaches KV v1
/// and v2 configs with and without `spec.path`; a tenant's keys that walk out of the mount
/// (`..` raw, encoded, double-encoded; a mount taken from the key that is Vault's own `auth`,
/// `sys`, `cubbyhole` or a non-KV engine; `?` and `#`) are refused as INVALID_ARGUMENT by every
/// operation, and the operator's token appears in no answer. A key inside the mount still works.
#[tokio::test(flavor = "multi_thread")]
async fn keys_never_leave_the_mount() {
    let _guard = common::shared().await;
    let v = vault();
    v.policy("transit", r#"path "transit/*" { capabilities = ["create", "read", "update", "list"] }"#);
    v.cli(&["secrets", "enable", "transit"]);
    v.cli(&["write", "-f", "transit/keys/k"]);
    let mut p = start_provider().await;
    with_temp_namespace(&[], |_client, tenant| async move {
        with_temp_namespace(&[], |client, op| async move {
            let operator_token = token(&v, &["-policy=transit"]);
            secret(&client, &op, "vault-token", &[("token", &operator_token)]).await;
            let auth = json!({"tokenSecretRef": {"name": "vault-token", "key": "token"}});
            let server = v.address();
            for (name, spec) in [
                ("kv1", json!({"server": server, "path": "kv1", "version": "v1", "auth": auth})),
                ("kv2", json!({"server": server, "path": "secret", "auth": auth})),
                ("any1", json!({"server": server, "version": "v1", "auth": auth})),
                ("any2", json!({"server": server, "auth": auth})),
            ] {
                config(&client, &op, name, spec).await;
            }
            v.cli(&["kv", "put", &format!("kv1/{tenant}/ok"), "id=fine"]);
            v.cli(&["kv", "put", &format!("secret/{tenant}/ok"), "id=fine"]);
            let escapes = [
                "../auth/token/lookup-self",
                "%2e%2e/auth/token/lookup-self",
                "%2E%2e/auth/token/lookup-self",
                "%2e%2E%2fauth%2ftoken%2flookup-self",
                "%252e%252e/auth/token/lookup-self",
                "x/../../auth/token/lookup-self",
                "x/%2e%2e/%2e%2e/auth/token/lookup-self",
                "kv1/../auth/token/lookup-self",
                "secret/../auth/token/lookup-self",
                "..\\auth\\token\\lookup-self",
                "x?/../../auth/token/lookup-self",
                "x#/../../auth/token/lookup-self",
                "auth/token/lookup-self?",
            ];
            // Without spec.path the first segment is the mount: Vault's own paths, another
            // engine, or a KV mount of the other version are not KV mounts of this config.
            let mount_escapes = ["auth/token/lookup-self", "sys/mounts", "cubbyhole/x", "identity/entity/name/x"];
            let mut cases: Vec<(&str, String)> = Vec::new();
            for name in ["kv1", "kv2", "any1", "any2"] {
                cases.extend(escapes.iter().map(|k| (name, k.to_string())));
            }
            for name in ["any1", "any2"] {
                cases.extend(mount_escapes.iter().map(|k| (name, k.to_string())));
                cases.push((name, "transit/keys/k".into()));
                cases.push((name, "transit/encrypt/k".into()));
            }
            cases.push(("any1", format!("secret/{tenant}/ok")));
            cases.push(("any2", format!("kv1/{tenant}/ok")));

            let c = &mut p.client;
            let mut wrong = Vec::new();
            for (name, key) in &cases {
                let r = operator_ref("Vault", name, &op);
                let mut outcomes = vec![];
                for property in ["id", ""] {
                    outcomes.push((
                        "get",
                        c.get_secret(get(&r, &tenant, key, property, ""))
                            .await
                            .map(|a| String::from_utf8_lossy(&a.into_inner().value).into_owned()),
                    ));
                }
                let map = GetSecretMapRequest {
                    provider_ref: Some(r.clone()),
                    source_namespace: tenant.clone(),
                    remote_ref: get(&r, &tenant, key, "", "").remote_ref,
                    max_age_millis: 0,
                };
                outcomes
                    .push(("get-map", c.get_secret_map(map).await.map(|a| format!("{:?}", a.into_inner().secrets))));
                let push = PushSecretRequest {
                    provider_ref: Some(r.clone()),
                    source_namespace: tenant.clone(),
                    secret_data: [("plaintext".to_string(), b"aGk=".to_vec())].into(),
                    push_secret_data: Some(PushSecretData { remote_key: key.clone(), ..Default::default() }),
                };
                outcomes.push(("push", c.push_secret(push).await.map(|_| "pushed".to_string())));
                let rr = Some(PushSecretRemoteRef { remote_key: key.clone(), ..Default::default() });
                let exists = SecretExistsRequest {
                    provider_ref: Some(r.clone()),
                    source_namespace: tenant.clone(),
                    remote_ref: rr.clone(),
                };
                outcomes.push(("exists", c.secret_exists(exists).await.map(|a| a.into_inner().exists.to_string())));
                let delete = DeleteSecretRequest {
                    provider_ref: Some(r.clone()),
                    source_namespace: tenant.clone(),
                    remote_ref: rr,
                };
                outcomes.push(("delete", c.delete_secret(delete).await.map(|_| "deleted".to_string())));
                for (op_name, outcome) in outcomes {
                    let text = match &outcome {
                        Ok(v) => v.clone(),
                        Err(s) => s.message().to_string(),
                    };
                    if text.contains(&operator_token) {
                        wrong.push(format!("{name} {op_name} {key:?}: THE OPERATOR TOKEN LEAKED: {text}"));
                    } else if outcome.as_ref().map_err(tonic::Status::code) != Err(tonic::Code::InvalidArgument) {
                        wrong.push(format!("{name} {op_name} {key:?}: not refused: {outcome:?}"));
                    }
                }
            }
            assert!(
                wrong.is_empty(),
                "{} of {} calls not refused:\n{}",
                wrong.len(),
                cases.len() * 6,
                wrong.join("\n")
            );
            // Nothing was written outside the mount.
            assert!(v.try_cli(&["read", "auth/token/lookup-self/x"]).is_err());

            // Inside the mount, the same operations work.
            for (name, key) in [
                ("kv1", format!("{tenant}/ok")),
                ("kv2", format!("{tenant}/ok")),
                ("any1", format!("kv1/{tenant}/ok")),
                ("any2", format!("secret/{tenant}/ok")),
            ] {
                let r = operator_ref("Vault", name, &op);
                assert_eq!(get_text(c, get(&r, &tenant, &key, "id", "")).await.unwrap(), "fine", "{name} {key}");
                let pushed = format!("{key}-pushed");
                let push = PushSecretRequest {
                    provider_ref: Some(r.clone()),
                    source_namespace: tenant.clone(),
                    secret_data: [("id".to_string(), b"new".to_vec())].into(),
                    push_secret_data: Some(PushSecretData { remote_key: pushed.clone(), ..Default::default() }),
                };
                c.push_secret(push).await.unwrap();
                assert_eq!(get_text(c, get(&r, &tenant, &pushed, "id", "")).await.unwrap(), "new", "{name} {pushed}");
                let rr = Some(PushSecretRemoteRef { remote_key: pushed.clone(), ..Default::default() });
                let exists = SecretExistsRequest {
                    provider_ref: Some(r.clone()),
                    source_namespace: tenant.clone(),
                    remote_ref: rr.clone(),
                };
                assert!(c.secret_exists(exists.clone()).await.unwrap().into_inner().exists, "{name} {pushed}");
                let delete = DeleteSecretRequest {
                    provider_ref: Some(r.clone()),
                    source_namespace: tenant.clone(),
                    remote_ref: rr,
                };
                c.delete_secret(delete).await.unwrap();
                assert!(!c.secret_exists(exists).await.unwrap().into_inner().exists, "{name} {pushed} deleted");
            }
            // A find inside the mount works; one that names Vault's own paths does not.
            let find = |name: &str, path: &str| GetAllSecretsRequest {
                provider_ref: Some(operator_ref("Vault", name, &op)),
                source_namespace: tenant.clone(),
                find: Some(ExternalSecretFind { path: path.into(), ..Default::default() }),
            };
            let found = c.get_all_secrets(find("any2", &format!("secret/{tenant}"))).await.unwrap().into_inner();
            assert_eq!(names(found.secrets), [format!("{tenant}/ok")]);
            for (name, path) in [("any2", "sys"), ("any1", "auth/token"), ("kv1", "../auth"), ("kv2", "%2e%2e/sys")] {
                let e = c.get_all_secrets(find(name, path)).await.unwrap_err();
                assert_eq!(e.code(), tonic::Code::InvalidArgument, "find {name} {path}: {e:?}");
            }
        })
        .await
    })
    .await;
    drop(p.child);
}

/// A token Secret, `vault-token` in `ns`, holding one of two fresh tokens, and a configuration
/// `rotating` that reads it; a value at `<ns>/db`. Returns the reference, the key, and the old
/// and new tokens.
async fn rotating_store(v: &VaultDev, client: &Client, ns: &str) -> (ProviderReference, String, String, String) {
    let key = format!("{ns}/db");
    v.cli(&["kv", "put", &format!("secret/{key}"), "user=app"]);
    let (old, new) = (token(v, &[]), token(v, &[]));
    secret(client, ns, "vault-token", &[("token", &old)]).await;
    config(
        client,
        ns,
        "rotating",
        json!({"server": v.address(), "path": "secret",
        "auth": {"tokenSecretRef": {"name": "vault-token", "key": "token"}}}),
    )
    .await;
    (provider_ref("Vault", "rotating", "", "Provider"), key, old, new)
}

/// Revokes `old` and writes `new` into the token Secret.
async fn rotate(v: &VaultDev, client: &Client, ns: &str, old: &str, new: &str) {
    v.cli(&["token", "revoke", old]);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let patch = json!({"stringData": {"token": new}});
    secrets.patch("vault-token", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&patch)).await.unwrap();
}

fn clients_built(p: &RunningProvider) -> usize {
    p.child.log().matches("built a Vault client").count()
}

/// Without the watch, a revoked token is what tells: Vault answers 403 "invalid token", which
/// is UNAUTHENTICATED, so the cached client is dropped and the next call reads the rotated
/// Secret (instead of failing until the 2-minute GET look).
#[tokio::test(flavor = "multi_thread")]
async fn a_revoked_token_is_replaced_from_its_secret_on_the_next_call() {
    let _guard = common::shared().await;
    let v = vault();
    let _cp = control_plane().await;
    let mut p = launch("keyward-provider-vault", &[]).await.unwrap();
    with_temp_namespace(&[], |client, ns| async move {
        let (r, key, old, new) = rotating_store(&v, &client, &ns).await;
        let periodic = || GetSecretRequest { max_age_millis: 1, ..get(&r, &ns, &key, "user", "") };
        assert_eq!(get_text(&mut p.client, periodic()).await.unwrap(), "app");
        rotate(&v, &client, &ns, &old, &new).await;
        let refused = get_text(&mut p.client, periodic()).await.expect_err("the revoked token is refused");
        assert_eq!(refused.code(), tonic::Code::Unauthenticated, "{refused}");
        assert!(refused.message().contains("invalid token"), "{refused}");
        assert_eq!(get_text(&mut p.client, periodic()).await.unwrap(), "app", "{}", p.child.log());
        assert_eq!(clients_built(&p), 2, "one rebuild after the refusal:\n{}", p.child.log());
    })
    .await;
}

/// A cached client is kept, with no timer, until a Secret it was built from changes: with
/// `--watch-referenced-objects`, a token Secret rotated under it (the old token revoked) is used
/// on the next periodic call, and the calls after that build nothing.
#[tokio::test(flavor = "multi_thread")]
async fn a_rotated_token_secret_is_used_on_the_next_call() {
    let _guard = common::shared().await;
    let v = vault();
    let _cp = control_plane().await;
    let mut p = launch("keyward-provider-vault", &[("KEYWARD_WATCH_REFERENCED_OBJECTS", "true")]).await.unwrap();
    with_temp_namespace(&[], |client, ns| async move {
        let (r, key, old, new) = rotating_store(&v, &client, &ns).await;
        // A periodic read (it accepts a watched configuration) that no earlier answer serves.
        let periodic = || GetSecretRequest { max_age_millis: 1, ..get(&r, &ns, &key, "user", "") };
        for _ in 0..3 {
            assert_eq!(get_text(&mut p.client, periodic()).await.unwrap(), "app");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        assert_eq!(clients_built(&p), 1, "an unchanged Secret keeps the client:\n{}", p.child.log());

        rotate(&v, &client, &ns, &old, &new).await;
        // The watch hears of the change within moments; the old token is refused meanwhile.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            match get_text(&mut p.client, periodic()).await {
                Ok(value) => break assert_eq!(value, "app"),
                Err(e) if std::time::Instant::now() < deadline => {
                    tracing::debug!(error = %e, "old client still in use");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => panic!("the rotated token was not used within 10 s: {e}\n{}", p.child.log()),
            }
        }
        assert_eq!(clients_built(&p), 2, "one rebuild for the rotation:\n{}", p.child.log());
        for _ in 0..3 {
            assert_eq!(get_text(&mut p.client, periodic()).await.unwrap(), "app");
        }
        assert_eq!(clients_built(&p), 2, "the new client is kept:\n{}", p.child.log());
    })
    .await;
}
