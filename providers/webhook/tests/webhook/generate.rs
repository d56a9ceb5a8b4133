//! The `Webhook` generator (`generators.external-secrets.io/v1alpha1`) served by the webhook
//! provider process (`provider.v1.GeneratorProvider/Generate`), over real mTLS, against a real
//! HTTP server and the local control plane: a POST with a rendered body whose JSON answer gives
//! one key per member; the tenant boundary (another namespace's Secret refused before any
//! request) and the denied networks of a tenant's configuration (loopback, link-local).

use crate::common;

use keyward_provider_runtime::testkit::{generate, value_text as text};

use crate::common::{StoreServer, apply_secret, start_provider};
use keyward_e2e::with_temp_namespace;
use keyward_proto::v1::GenerateRequest;
use serde_json::{Value, json};
use tonic::Code;

fn request(ns: &str, name: &str, spec: Value) -> GenerateRequest {
    GenerateRequest { kind: "Webhook".into(), spec_json: spec.to_string(), namespace: ns.into(), name: name.into() }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_post_with_a_rendered_body_gives_one_key_per_member_of_the_answer() {
    let _guard = common::shared().await;
    let store = StoreServer::start().await;
    // No denied networks: the test server is on loopback.
    let provider = start_provider(Some("")).await.unwrap_or_else(|e| panic!("{e}"));
    let mut c = provider.generator_client().await.unwrap();
    with_temp_namespace(&[], |client, ns| async move {
        apply_secret(&client, &ns, "creds", &[("user", "app"), ("token", "t0k3n")], true).await;
        let spec = json!({
            "url": format!("{}/post", store.http_url),
            "method": "POST",
            "headers": {"Content-Type": "application/json", "X-Token": "{{ .creds.token }}"},
            "body": r#"{"user": "{{ .creds.user }}", "port": 5432, "tls": {"on": true}}"#,
            "result": {"jsonPath": "$.json"},
            "secrets": [{"name": "creds", "secretRef": {"name": "creds"}}],
        });
        let values = generate(&mut c, request(&ns, "db", spec)).await.unwrap();
        let mut names: Vec<&str> = values.keys().map(String::as_str).collect();
        names.sort_unstable();
        assert_eq!(names, ["port", "tls", "user"]);
        assert_eq!(text(&values, "user"), "app");
        assert_eq!(text(&values, "port"), "5432");
        assert_eq!(text(&values, "tls"), r#"{"on":true}"#);
        assert_eq!(store.last_headers().get("x-token").map(String::as_str), Some("t0k3n"));

        // A GET (the default method) whose selected value is not an object is refused.
        let spec = json!({"url": format!("{}/get?a=b", store.http_url), "result": {"jsonPath": "$.args.a"}});
        let e = generate(&mut c, request(&ns, "scalar", spec)).await.unwrap_err();
        assert_eq!(e.code(), Code::Unavailable, "{e:?}");

        // A spec the webhook provider's rules refuse: no scheme in the URL.
        let e = generate(&mut c, request(&ns, "bad", json!({"url": "example.com/x"}))).await.unwrap_err();
        assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");

        // Another generator kind is not the webhook provider's.
        let other = GenerateRequest { kind: "Password".into(), ..request(&ns, "p", json!({})) };
        let e = generate(&mut c, other).await.unwrap_err();
        assert_eq!(e.code(), Code::Unimplemented, "{e:?}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn another_namespaces_secret_and_denied_networks_are_refused_before_any_request() {
    let _guard = common::shared().await;
    let store = StoreServer::start().await;
    let open = start_provider(Some("")).await.unwrap_or_else(|e| panic!("{e}"));
    let mut c = open.generator_client().await.unwrap();
    // The default denied networks of a tenant's configuration.
    let guarded = start_provider(None).await.unwrap_or_else(|e| panic!("{e}"));
    let mut g = guarded.generator_client().await.unwrap();
    with_temp_namespace(&[], |client, ns| async move {
        apply_secret(&client, &ns, "creds", &[("token", "t0k3n")], true).await;
        let url = format!("{}/post", store.http_url);

        // A Secret of another namespace: refused, nothing sent.
        let foreign = json!({
            "url": url, "method": "POST", "body": "{}",
            "secrets": [{"name": "auth", "secretRef": {"name": "creds", "namespace": "kube-system"}}],
        });
        let e = generate(&mut c, request(&ns, "foreign", foreign)).await.unwrap_err();
        assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
        assert!(e.message().contains("spec.secrets[0].secretRef.namespace"), "{e:?}");
        assert!(store.last_headers().is_empty(), "a request was sent: {:?}", store.last_headers());

        // Loopback and link-local, by address and by name: refused as for a tenant's store.
        let by_name = url.replace("127.0.0.1", "localhost");
        for (url, network) in [
            (url.as_str(), "127.0.0.0/8"),
            (by_name.as_str(), "127.0.0.0/8"),
            ("http://169.254.169.254/latest/meta-data/", "169.254.0.0/16"),
        ] {
            let spec = json!({"url": url, "method": "POST", "body": "{}"});
            let e = generate(&mut g, request(&ns, "loop", spec)).await.unwrap_err();
            assert_eq!(e.code(), Code::PermissionDenied, "{url}: {e:?}");
            assert!(e.message().contains(&format!("denied network {network}")), "{url}: {e:?}");
        }
        assert!(store.last_headers().is_empty(), "a request was sent: {:?}", store.last_headers());
    })
    .await;
}
