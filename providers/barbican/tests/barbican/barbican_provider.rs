//! The Barbican provider as a process (real mTLS) against real Keystone and Barbican servers
//! (installed from PyPI) and the local control plane: reads by ID, properties, maps, finds by
//! name, a SecretStore written as upstream's docs write it, a wrong password, missing secrets,
//! hostile keys, the tenant boundary, and one Keystone login for many reads.

use crate::common;

use crate::common::{
    apply_config, apply_secret, apply_store, barbican_ref, get, get_bytes, get_map, install_crd, openstack, spec,
    start_provider,
};
use keyward_e2e::with_temp_namespace;
use keyward_proto::v1::{
    CapabilitiesRequest, ExternalSecretFind, FindName, GetAllSecretsRequest, PushSecretData, PushSecretRequest,
    SecretStoreCapabilities, ValidateRequest,
};
use keyward_provider_runtime::testkit::provider_ref;
use serde_json::json;
use tonic::Code;

const MISSING: &str = "00000000-0000-4000-8000-000000000000";

#[tokio::test(flavor = "multi_thread")]
async fn reads_by_id_property_map_and_find() {
    let _guard = common::shared().await;
    let os = openstack().await;
    with_temp_namespace(&[], |client, ns| async move {
        install_crd(&client).await;
        apply_secret(&client, &ns, "os-creds", &[("password", os.password())]).await;
        apply_config(&client, &ns, "tenant", spec(&os, "os-creds")).await;
        let provider = start_provider().await;
        let c = provider.client.clone();
        let r = barbican_ref("tenant");
        let payload = r#"{"user":"admin","password":"s3cret","port":5432,"nested":{"a": 1}}"#;
        let db = os.create_secret("db", payload);
        let plain = os.create_secret("plain", "hello world");
        let blob = os.create_binary_secret("blob", &[0, 1, 2, 255]);

        // By ID: the payload as stored, text or binary.
        assert_eq!(get(&c, &r, &ns, &db, "").await.expect("whole"), payload);
        assert_eq!(get(&c, &r, &ns, &plain, "").await.expect("text"), "hello world");
        assert_eq!(get_bytes(&c, &r, &ns, &blob).await.expect("binary"), [0, 1, 2, 255]);
        // A property: a top-level key; strings as text, other values as their JSON.
        assert_eq!(get(&c, &r, &ns, &db, "password").await.expect("property"), "s3cret");
        assert_eq!(get(&c, &r, &ns, &db, "port").await.expect("number"), "5432");
        assert_eq!(get(&c, &r, &ns, &db, "nested").await.expect("object"), r#"{"a": 1}"#);
        let e = get(&c, &r, &ns, &db, "nope").await.expect_err("missing property");
        assert_eq!(e.code(), Code::NotFound, "{e:?}");
        let e = get(&c, &r, &ns, &plain, "user").await.expect_err("not JSON");
        assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");

        // Maps.
        let m = get_map(&c, &r, &ns, &db, "").await.expect("map");
        let want = [("nested", r#"{"a": 1}"#), ("password", "s3cret"), ("port", "5432"), ("user", "admin")];
        assert_eq!(m, want.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
        let m = get_map(&c, &r, &ns, &db, "nested").await.expect("map of a property");
        assert_eq!(m.get("a").map(String::as_str), Some("1"));
        let e = get_map(&c, &r, &ns, &plain, "").await.expect_err("not JSON");
        assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");

        // Missing secrets and keys that are no secret ID.
        let e = get(&c, &r, &ns, MISSING, "").await.expect_err("missing");
        assert_eq!(e.code(), Code::NotFound, "{e:?}");
        assert!(e.message().contains(MISSING), "{e:?}");
        let e = get_map(&c, &r, &ns, MISSING, "").await.expect_err("missing");
        assert_eq!(e.code(), Code::NotFound, "{e:?}");
        for key in [format!("../{db}"), format!("x/{db}"), "%2e%2e".into(), format!("{db}?x=1"), String::new()] {
            let e = get(&c, &r, &ns, &key, "").await.expect_err("not an ID");
            assert_eq!(e.code(), Code::InvalidArgument, "{key}: {e:?}");
        }

        // Find by name: a regexp matched here, keys are the secrets' IDs.
        let db2 = os.create_secret("db-replica", r#"{"user":"replica"}"#);
        let find = |regexp: &str| GetAllSecretsRequest {
            provider_ref: Some(r.clone()),
            source_namespace: ns.clone(),
            find: Some(ExternalSecretFind {
                name: (!regexp.is_empty()).then(|| FindName { regexp: regexp.into() }),
                ..Default::default()
            }),
        };
        let found = c.clone().get_all_secrets(find("^db")).await.expect("find").into_inner().secrets;
        let mut keys: Vec<&String> = found.keys().collect();
        keys.sort();
        let mut want = vec![&db, &db2];
        want.sort();
        assert_eq!(keys, want);
        assert_eq!(found[&db2], br#"{"user":"replica"}"#);
        let none = c.clone().get_all_secrets(find("^nothing$")).await.expect("find nothing").into_inner();
        assert!(none.secrets.is_empty());
        let e = c.clone().get_all_secrets(find("")).await.expect_err("no regexp");
        assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");

        // Read-only, as upstream.
        let push = PushSecretRequest {
            provider_ref: Some(r.clone()),
            source_namespace: ns.clone(),
            secret_data: [("k".to_string(), b"v".to_vec())].into(),
            push_secret_data: Some(PushSecretData {
                secret_key: "k".into(),
                remote_key: db.clone(),
                ..Default::default()
            }),
        };
        let e = c.clone().push_secret(push).await.expect_err("read-only");
        assert_eq!(e.code(), Code::Unimplemented, "{e:?}");
        let caps = CapabilitiesRequest { provider_ref: Some(r.clone()), source_namespace: ns.clone() };
        let caps = c.clone().capabilities(caps).await.expect("capabilities").into_inner();
        assert_eq!(caps.capabilities(), SecretStoreCapabilities::ReadOnly);
        let v = ValidateRequest { provider_ref: Some(r.clone()), source_namespace: ns.clone(), max_age_millis: 0 };
        let v = c.clone().validate(v).await.expect("validate").into_inner();
        assert!(v.valid, "{v:?}");
        drop(provider);
        drop(os);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn stores_as_upstreams_docs_write_them_wrong_passwords_and_the_tenant_boundary() {
    let _guard = common::shared().await;
    let os = openstack().await;
    with_temp_namespace(&[], |client, ns| async move {
        install_crd(&client).await;
        let provider = start_provider().await;
        let c = provider.client.clone();
        let id = os.create_secret("db", r#"{"token":"t0k3n"}"#);

        // docs/provider/barbican.md: the credentials Secret and the SecretStore, only the URL and
        // the names of the user, project and domain changed.
        apply_secret(&client, &ns, "barbican-secret", &[("username", os.user()), ("password", os.password())]).await;
        let docs = format!(
            r#"
apiVersion: external-secrets.io/v1
kind: SecretStore
metadata:
  name: barbican-backend
spec:
  provider:
    barbican:
      authURL: "{}"
      tenantName: "{}"
      domainName: "{}"
      region: "RegionOne"
      auth:
        username:
          secretRef:
            name: "barbican-secret"
            key: "username"
        password:
          secretRef:
            name: "barbican-secret"
            key: "password"
"#,
            os.auth_url(),
            os.project(),
            os.domain()
        );
        let mut obj: serde_json::Value = serde_yaml::from_str(&docs).expect("the docs' YAML");
        obj["metadata"]["namespace"] = json!(ns);
        apply_store(&client, &obj).await;
        let store = provider_ref("SecretStore", "barbican-backend", "", "SecretStore");
        assert_eq!(get(&c, &store, &ns, &id, "token").await.expect("as the docs say"), "t0k3n");

        // The docs' ClusterSecretStore: its Secrets in the namespace they name.
        let css = format!("barbican-{ns}");
        let mut cluster = obj.clone();
        cluster["kind"] = json!("ClusterSecretStore");
        cluster["metadata"] = json!({"name": css});
        for field in ["username", "password"] {
            cluster["spec"]["provider"]["barbican"]["auth"][field]["secretRef"]["namespace"] = json!(ns);
        }
        apply_store(&client, &cluster).await;
        let r = provider_ref("ClusterSecretStore", &css, "", "ClusterSecretStore");
        let got = get(&c, &r, &ns, &id, "").await;
        let api: kube::Api<kube::api::DynamicObject> =
            kube::Api::all_with(client.clone(), &common::store_resource("ClusterSecretStore"));
        let _ = api.delete(&css, &Default::default()).await;
        assert_eq!(got.expect("a ClusterSecretStore"), r#"{"token":"t0k3n"}"#);

        // A wrong password: Keystone's refusal, said plainly, and Validate calls it invalid.
        apply_secret(&client, &ns, "wrong", &[("password", "not-the-password")]).await;
        apply_config(&client, &ns, "wrong", spec(&os, "wrong")).await;
        let e = get(&c, &barbican_ref("wrong"), &ns, &id, "").await.expect_err("wrong password");
        assert_eq!(e.code(), Code::Unauthenticated, "{e:?}");
        assert!(
            e.message().contains("refused the login") && e.message().contains("wrong user name or password"),
            "{e:?}"
        );
        assert!(!e.message().contains("not-the-password"), "the password is not in the message: {e:?}");
        let v = ValidateRequest {
            provider_ref: Some(barbican_ref("wrong")),
            source_namespace: ns.clone(),
            max_age_millis: 0,
        };
        let v = c.clone().validate(v).await.expect("validate").into_inner();
        assert!(!v.valid && v.error.contains("refused the login"), "{v:?}");
        assert!(!provider.child.log().contains("not-the-password") && !provider.child.log().contains(os.password()));

        // Another namespace's Secret: refused before anything is read.
        let mut foreign = spec(&os, "barbican-secret");
        foreign["auth"]["password"]["secretRef"]["namespace"] = json!("kube-system");
        apply_config(&client, &ns, "foreign", foreign).await;
        let e = get(&c, &barbican_ref("foreign"), &ns, &id, "").await.expect_err("another namespace");
        assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
        assert!(e.message().contains("spec.auth.password.secretRef.namespace"), "{e:?}");

        // A broken configuration names its field.
        let mut broken = spec(&os, "barbican-secret");
        broken["authURL"] = json!("ftp://keystone.example.com/v3");
        apply_config(&client, &ns, "broken", broken).await;
        let e = get(&c, &barbican_ref("broken"), &ns, &id, "").await.expect_err("broken");
        assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
        assert!(e.message().contains("spec.authURL"), "{e:?}");

        // A region the catalog does not have.
        let mut region = spec(&os, "barbican-secret");
        region["region"] = json!("Elsewhere");
        apply_config(&client, &ns, "region", region).await;
        let e = get(&c, &barbican_ref("region"), &ns, &id, "").await.expect_err("no endpoint");
        assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
        assert!(e.message().contains("in region \"Elsewhere\""), "{e:?}");
        drop(provider);
        drop(os);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn one_login_serves_many_reads_and_a_refused_token_is_replaced_once() {
    let _guard = common::shared().await;
    let os = openstack().await;
    with_temp_namespace(&[], |client, ns| async move {
        install_crd(&client).await;
        apply_secret(&client, &ns, "os-creds", &[("password", os.password())]).await;
        // Two configurations with the same credentials share the token.
        apply_config(&client, &ns, "one", spec(&os, "os-creds")).await;
        apply_config(&client, &ns, "two", spec(&os, "os-creds")).await;
        let provider = start_provider().await;
        let c = provider.client.clone();
        let id = os.create_secret("db", "v1");
        let before = os.keystone_logins();
        for i in 0..6 {
            let r = barbican_ref(if i % 2 == 0 { "one" } else { "two" });
            assert_eq!(get(&c, &r, &ns, &id, "").await.expect("read"), "v1");
        }
        assert_eq!(os.keystone_logins() - before, 1, "one Keystone login for six reads");

        // Keystone revokes the user's tokens: Barbican answers 401, the provider logs in again
        // once and the read succeeds.
        os.revoke_user_tokens();
        let before = os.keystone_logins();
        assert_eq!(get(&c, &barbican_ref("one"), &ns, &id, "").await.expect("after revocation"), "v1");
        assert_eq!(get(&c, &barbican_ref("two"), &ns, &id, "").await.expect("the new token"), "v1");
        assert_eq!(os.keystone_logins() - before, 1, "one new login after the revocation");
        assert!(os.barbican().log().contains(" 401 "), "Barbican refused the revoked token");
        drop(provider);
        drop(os);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_token_is_replaced_shortly_before_it_expires() {
    let _guard = common::shared().await;
    // Keystone's tokens live 75 s here; the provider stops using one a minute before it expires,
    // so a token serves reads for about 15 s.
    let os = tokio::task::spawn_blocking(|| keyward_e2e::stores::OpenStack::start_with_token_expiration(75))
        .await
        .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
    with_temp_namespace(&[], |client, ns| async move {
        install_crd(&client).await;
        apply_secret(&client, &ns, "os-creds", &[("password", os.password())]).await;
        apply_config(&client, &ns, "short", spec(&os, "os-creds")).await;
        let provider = start_provider().await;
        let c = provider.client.clone();
        let r = barbican_ref("short");
        let id = os.create_secret("db", "v1");
        let before = os.keystone_logins();
        for _ in 0..2 {
            assert_eq!(get(&c, &r, &ns, &id, "").await.expect("read"), "v1");
        }
        assert_eq!(os.keystone_logins() - before, 1, "the fresh token is reused");
        tokio::time::sleep(std::time::Duration::from_secs(17)).await;
        for _ in 0..2 {
            assert_eq!(get(&c, &r, &ns, &id, "").await.expect("read"), "v1");
        }
        assert_eq!(os.keystone_logins() - before, 2, "a token near its expiry is replaced, the new one reused");
        drop(provider);
        drop(os);
    })
    .await;
}
