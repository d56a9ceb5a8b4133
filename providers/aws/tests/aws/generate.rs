//! The ECRAuthorizationToken and STSSessionToken generators served by the AWS provider process
//! (`provider.v1.GeneratorProvider/Generate`), over real mTLS, against moto and the local
//! control plane: a registry login and a session token, each signed with the generator's own
//! keys; the tenant boundary (another namespace's Secret, the provider's own credentials)
//! refused before any request; upstream's refusals (ECR Public, web identity for STS); the
//! clients cached per generator (one role assumed for many generations, never shared between
//! generators or versions of one).

use crate::common;

use keyward_provider_runtime::testkit::{generate, value_text as text};

use keyward_e2e::stores::{Moto, MotoRequest};
use keyward_e2e::with_temp_namespace;
use keyward_proto::v1::GenerateRequest;
use serde_json::{Value, json};

use crate::common::{REGION, keys, keys_secret, other_auth, other_keys, start_provider};

fn request(ns: &str, kind: &str, name: &str, spec: Value) -> GenerateRequest {
    GenerateRequest { kind: kind.into(), spec_json: spec.to_string(), namespace: ns.into(), name: name.into() }
}

/// The access keys that signed the requests moto served of operation `target`.
fn signers(moto: &Moto, target: &str) -> Vec<String> {
    moto.requests().into_iter().filter(|r: &MotoRequest| r.target == target).map(|r| r.access_key).collect()
}

const ECR: &str = "AmazonEC2ContainerRegistry_V20150921.GetAuthorizationToken";

#[tokio::test(flavor = "multi_thread")]
async fn ecr_and_sts_tokens_are_generated_with_the_generators_own_keys() {
    let _guard = common::shared().await;
    let moto = Moto::start_recording();
    let p = start_provider(&moto).await;
    let mut c = p.generator_client().await.unwrap();
    with_temp_namespace(&[], |client, ns| async move {
        keys_secret(&client, &ns).await.unwrap();

        // A registry login: moto's token is base64 of `AWS:<password>`, split as upstream does.
        let values = generate(
            &mut c,
            request(&ns, "ECRAuthorizationToken", "ecr", json!({"region": REGION, "auth": keys(None)})),
        )
        .await
        .unwrap();
        let mut names: Vec<&str> = values.keys().map(String::as_str).collect();
        names.sort_unstable();
        assert_eq!(names, ["expires_at", "password", "proxy_endpoint", "username"]);
        assert_eq!(text(&values, "username"), "AWS");
        assert!(!text(&values, "password").is_empty());
        assert!(text(&values, "proxy_endpoint").starts_with("https://"), "{values:?}");
        // Unix seconds (moto answers a fixed date, 2015-01-01).
        let expires: i64 = text(&values, "expires_at").parse().unwrap();
        assert!((1_000_000_000..100_000_000_000).contains(&expires), "expires_at is Unix seconds: {expires}");
        assert_eq!(signers(&moto, ECR), ["AKIDTEST"], "signed with the generator's keys");
        // `scope: private` is the default; ECR Public is refused with what to change.
        let private = json!({"region": REGION, "auth": keys(None), "scope": "private"});
        generate(&mut c, request(&ns, "ECRAuthorizationToken", "ecr", private)).await.unwrap();
        let public = json!({"region": REGION, "auth": keys(None), "scope": "public"});
        let e = generate(&mut c, request(&ns, "ECRAuthorizationToken", "ecr", public)).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::FailedPrecondition, "{e:?}");
        assert!(e.message().contains("ECR Public"), "{e:?}");

        // A session token of STS, with upstream's request parameters.
        let spec = json!({"region": REGION, "auth": keys(None), "requestParameters": {"sessionDuration": 900}});
        let values = generate(&mut c, request(&ns, "STSSessionToken", "sts", spec)).await.unwrap();
        let mut names: Vec<&str> = values.keys().map(String::as_str).collect();
        names.sort_unstable();
        assert_eq!(names, ["access_key_id", "expiration", "secret_access_key", "session_token"]);
        assert!(!text(&values, "access_key_id").is_empty() && !text(&values, "session_token").is_empty());
        let expiration: i64 = text(&values, "expiration").parse().unwrap();
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
        assert!((now..now + 100_000).contains(&expiration), "expiration is Unix seconds: {expiration}");
        assert_eq!(signers(&moto, "GetSessionToken"), ["AKIDTEST"], "signed with the generator's keys");
        let sent = moto.requests().into_iter().filter(|r| r.target == "GetSessionToken").count();
        assert_eq!(sent, 1);
        // Web identity cannot ask for a session token (as upstream).
        let jwt = json!({"region": REGION, "auth": {"jwt": {"serviceAccountRef": {"name": "default"}}}});
        let e = generate(&mut c, request(&ns, "STSSessionToken", "sts", jwt)).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::FailedPrecondition, "{e:?}");
        assert!(e.message().contains("spec.auth.jwt"), "{e:?}");

        // The tenant boundary, checked before any request: another namespace's Secret, and the
        // provider's own credentials (no auth), are refused as for a SecretStore.
        let before = moto.requests().len();
        for kind in ["ECRAuthorizationToken", "STSSessionToken"] {
            let other = json!({"region": REGION, "auth": keys(Some("kube-system"))});
            let e = generate(&mut c, request(&ns, kind, "other", other)).await.unwrap_err();
            assert_eq!(e.code(), tonic::Code::PermissionDenied, "{kind}: {e:?}");
            assert!(e.message().contains("kube-system") && e.message().contains(kind), "{e:?}");
            let ambient = json!({"region": REGION});
            let e = generate(&mut c, request(&ns, kind, "ambient", ambient)).await.unwrap_err();
            assert_eq!(e.code(), tonic::Code::PermissionDenied, "{kind}: {e:?}");
            assert!(e.message().contains("provider's own credentials"), "{e:?}");
        }
        assert_eq!(moto.requests().len(), before, "nothing was requested");
        // The store-calls metric counts the generators' calls.
        let (_, metrics) = keyward_provider_runtime::testkit::http_get(p.health, "/metrics").await.unwrap();
        assert!(
            metrics.contains("provider=\"AWS/ECR\",call=\"GetAuthorizationToken\",status=\"success\"}"),
            "{metrics}"
        );
        assert!(metrics.contains("provider=\"AWS/STS\",call=\"GetSessionToken\",status=\"success\"}"), "{metrics}");
    })
    .await;
}

/// The generators' clients are cached as a store's: the generations of one generator assume
/// its role once (moto's request log), another generator with other credentials, and the same
/// generator edited to other credentials, each get their own, signed with their own keys.
#[tokio::test(flavor = "multi_thread")]
async fn a_generator_s_clients_are_cached_and_never_shared() {
    let _guard = common::shared().await;
    let moto = Moto::start_recording();
    let p = start_provider(&moto).await;
    let mut c = p.generator_client().await.unwrap();
    with_temp_namespace(&[], |client, ns| async move {
        keys_secret(&client, &ns).await.unwrap();
        other_keys(&client, &ns).await;
        let role = "arn:aws:iam::123456789012:role/generator";
        let assumed = || signers(&moto, "AssumeRole");

        // Two generations of one ECR generator, two of one STS generator: one AssumeRole each.
        let ecr = json!({"region": REGION, "role": role, "auth": keys(None)});
        for _ in 0..2 {
            generate(&mut c, request(&ns, "ECRAuthorizationToken", "ecr", ecr.clone())).await.unwrap();
        }
        assert_eq!(assumed(), ["AKIDTEST"], "one role assumed for two generations");
        let ecr_signers = signers(&moto, ECR);
        assert_eq!(ecr_signers.len(), 2, "each generation asks ECR");
        assert!(ecr_signers.iter().all(|k| k != "AKIDTEST"), "signed with the role's keys: {ecr_signers:?}");
        let sts = json!({"region": REGION, "role": role, "auth": keys(None)});
        for _ in 0..2 {
            generate(&mut c, request(&ns, "STSSessionToken", "sts", sts.clone())).await.unwrap();
        }
        assert_eq!(assumed(), ["AKIDTEST", "AKIDTEST"], "the STS generator is another generator");
        assert_eq!(signers(&moto, "GetSessionToken").len(), 2);

        // Another generator with other credentials: its own client, its own role session.
        let other = json!({"region": REGION, "role": role, "auth": other_auth()});
        for _ in 0..2 {
            generate(&mut c, request(&ns, "ECRAuthorizationToken", "ecr-b", other.clone())).await.unwrap();
        }
        assert_eq!(assumed(), ["AKIDTEST", "AKIDTEST", "AKIDOTHER"], "one AssumeRole, with its own keys");
        // The first generator edited to the other credentials: a new client, never the old one.
        generate(&mut c, request(&ns, "ECRAuthorizationToken", "ecr", other.clone())).await.unwrap();
        assert_eq!(assumed(), ["AKIDTEST", "AKIDTEST", "AKIDOTHER", "AKIDOTHER"]);
        // Without a role, the generations are signed with each generator's own keys.
        let plain = |auth: Value| json!({"region": REGION, "auth": auth});
        let before = signers(&moto, "GetSessionToken").len();
        generate(&mut c, request(&ns, "STSSessionToken", "sts-a", plain(keys(None)))).await.unwrap();
        generate(&mut c, request(&ns, "STSSessionToken", "sts-b", plain(other_auth()))).await.unwrap();
        generate(&mut c, request(&ns, "STSSessionToken", "sts-a", plain(keys(None)))).await.unwrap();
        assert_eq!(signers(&moto, "GetSessionToken")[before..], ["AKIDTEST", "AKIDOTHER", "AKIDTEST"]);
    })
    .await;
}
