//! The ACRAccessToken generator served by the Azure provider process
//! (`provider.v1.GeneratorProvider/Generate`), over real mTLS, against the protocol test server's
//! Entra ID and registry token exchange and the local control plane: a refresh token and a
//! scoped access token of the generator's service principal, a workload identity's token, refused
//! credentials with Entra ID's answer, and the tenant boundary (another namespace's Secret, the
//! provider's own managed identity) refused before any request.

use keyward_e2e::stores::azure::TENANT;
use keyward_e2e::with_temp_namespace;
use keyward_proto::v1::GenerateRequest;
use keyward_provider_runtime::testkit::{generate, value_text as text};
use serde_json::{Value, json};
use tonic::Code;

use crate::common::{self, CLIENT_ID, apply_sp_secret};

fn request(ns: &str, name: &str, spec: &Value) -> GenerateRequest {
    GenerateRequest {
        kind: "ACRAccessToken".into(),
        spec_json: spec.to_string(),
        namespace: ns.into(),
        name: name.into(),
    }
}

/// A service-principal spec of `registry` reading Secret `secret`, with `scope` if any.
fn sp(registry: &str, secret: &str, scope: Option<&str>) -> Value {
    let mut spec = json!({"tenantId": TENANT, "registry": registry, "auth": {"servicePrincipal": {"secretRef": {
        "clientId": {"name": secret, "key": "ClientID"}, "clientSecret": {"name": secret, "key": "ClientSecret"}}}}});
    if let Some(s) = scope {
        spec["scope"] = json!(s);
    }
    spec
}

#[tokio::test(flavor = "multi_thread")]
async fn acr_tokens_are_generated_with_the_generators_identity() {
    let _guard = common::shared().await;
    let server = common::azure();
    let p = common::start_provider(&server).await;
    let mut c = p.generator_client().await.expect("generator client");
    let registry = server.registry();
    with_temp_namespace(&[], |client, ns| {
        let (server, registry) = (&server, registry.clone());
        async move {
            apply_sp_secret(&client, &ns, "sp").await;

            // Without scope: the ACR refresh token, under upstream's two keys.
            let values = generate(&mut c, request(&ns, "refresh", &sp(&registry, "sp", None))).await.expect("refresh");
            let mut keys: Vec<&String> = values.keys().collect();
            keys.sort();
            assert_eq!(keys, ["password", "username"]);
            assert_eq!(text(&values, "username"), "00000000-0000-0000-0000-000000000000");
            let token = server.registry_token(&text(&values, "password")).expect("a registry token");
            assert_eq!(token, (format!("acr-refresh:{registry}"), CLIENT_ID.to_string()));

            // With scope: an access token of that scope.
            let scoped = sp(&registry, "sp", Some("repository:app:pull"));
            let values = generate(&mut c, request(&ns, "scoped", &scoped)).await.expect("access token");
            let token = server.registry_token(&text(&values, "password")).expect("a registry token");
            assert_eq!(token.0, format!("acr:{registry}:repository:app:pull"));

            // Workload identity: a ServiceAccount of the namespace, federated with the issuer.
            let (issuer, jwks) = common::issuer(&client).await;
            server.set_issuer_keys(jwks);
            server.add_federated("acr-wi", &issuer, &format!("system:serviceaccount:{ns}:pusher"));
            let annotations =
                [("azure.workload.identity/client-id", "acr-wi"), ("azure.workload.identity/tenant-id", TENANT)];
            common::apply_service_account(&client, &ns, "pusher", &annotations).await;
            let wi = json!({"tenantId": TENANT, "registry": registry, "scope": "repository:app:push",
                            "auth": {"workloadIdentity": {"serviceAccountRef": {"name": "pusher"}}}});
            let values = generate(&mut c, request(&ns, "wi", &wi)).await.expect("workload identity");
            let token = server.registry_token(&text(&values, "password")).expect("a registry token");
            assert_eq!(token.1, "acr-wi");

            // A wrong secret: Entra ID's answer, naming the generator.
            common::apply_secret(&client, &ns, "wrong", &[("ClientID", CLIENT_ID), ("ClientSecret", "nope")]).await;
            let e = generate(&mut c, request(&ns, "wrong", &sp(&registry, "wrong", None))).await.expect_err("refused");
            assert_eq!(e.code(), Code::Unauthenticated, "{e:?}");
            assert!(e.message().contains("AADSTS7000215") && e.message().contains("ACRAccessToken"), "{e:?}");

            // The tenant boundary, before any request: another namespace's Secret, the provider's
            // own managed identity.
            let before = server.requests().len();
            let mut stolen = sp(&registry, "sp", None);
            stolen["auth"]["servicePrincipal"]["secretRef"]["clientSecret"]["namespace"] = json!("kube-system");
            let e = generate(&mut c, request(&ns, "stolen", &stolen)).await.expect_err("another namespace");
            assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
            assert!(e.message().contains("spec.auth.servicePrincipal.secretRef.clientSecret"), "{e:?}");
            let mi = json!({"registry": registry, "auth": {"managedIdentity": {}}});
            let e = generate(&mut c, request(&ns, "mi", &mi)).await.expect_err("the provider's identity");
            assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
            assert!(e.message().contains("spec.auth"), "{e:?}");
            // A spec the rules refuse: the field named.
            let bad = json!({"registry": "https://example.azurecr.io/v2", "auth": {"managedIdentity": {}}});
            let e = generate(&mut c, request(&ns, "bad", &bad)).await.expect_err("a URL for a registry");
            assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
            assert!(e.message().contains("spec.registry"), "{e:?}");
            assert_eq!(server.requests().len(), before, "nothing was asked of Azure");
        }
    })
    .await;
}
