//! End to end: the ECRAuthorizationToken and STSSessionToken generators. An ExternalSecret's
//! `dataFrom` generatorRef names one (directly, and an ECRAuthorizationToken through a
//! ClusterGenerator); the reconciler sends it to the AWS provider process, which asks moto's
//! ECR or STS with the generator's own keys, and the target Secret holds upstream's keys. A
//! generator naming another namespace's Secret reports Ready=False; upstream's examples apply
//! unchanged and are sent to the AWS provider (which assumes their role at moto's STS).

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use keyward_crds::ExternalSecret;
use keyward_e2e::stores::Moto;
use keyward_e2e::with_temp_namespace;
use kube::Api;
use serde_json::{Value, json};

use crate::support::*;

const WAIT: Duration = Duration::from_secs(60);

/// The keys of a Secret's data, sorted.
fn keys_of(secret: &Secret) -> Vec<String> {
    secret.data.as_ref().map(|d| d.keys().cloned().collect()).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn ecr_and_sts_generators_fill_the_target_secret() {
    let _turn = shared().await;
    let moto = Moto::start_recording();
    with_temp_namespace(&[], |client, ns| async move {
        let pki = Pki::new();
        pki.install(&client, &ns).await;
        let env = moto.provider_env();
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let provider = ProviderProcess::start_with_env("keyward-provider-aws", pki.provider_dir(), &env).await;
        let cluster_generator = format!("{ns}-ecr");
        let _cleanup = ClusterGenerators(vec![cluster_generator.clone()]);
        // The keys upstream's examples name, in the manifests' namespace.
        kubectl_apply(
            &ns,
            &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "my-aws-creds"},
                    "stringData": {"key-id": "AKIDGENERATOR", "access-secret": "s3cr3t"}}),
        );
        let auth = |secret_ns: Option<&str>| {
            let sel = |key: &str| {
                let mut s = json!({"name": "my-aws-creds", "key": key});
                if let Some(n) = secret_ns {
                    s["namespace"] = json!(n);
                }
                s
            };
            json!({"secretRef": {"accessKeyIDSecretRef": sel("key-id"), "secretAccessKeySecretRef": sel("access-secret")}})
        };
        let generator = |kind: &str, name: &str, spec: Value| {
            json!({"apiVersion": "generators.external-secrets.io/v1alpha1", "kind": kind,
                   "metadata": {"name": name}, "spec": spec})
        };
        kubectl_apply(&ns, &generator("ECRAuthorizationToken", "ecr", json!({"region": "us-east-1", "auth": auth(None)})));
        kubectl_apply(
            &ns,
            &generator(
                "STSSessionToken",
                "sts",
                json!({"region": "us-east-1", "auth": auth(None), "requestParameters": {"sessionDuration": 900}}),
            ),
        );
        kubectl_apply(
            &ns,
            &generator("STSSessionToken", "stolen", json!({"region": "us-east-1", "auth": auth(Some("kube-system"))})),
        );
        kubectl_apply(
            &ns,
            &json!({"apiVersion": "generators.external-secrets.io/v1alpha1", "kind": "ClusterGenerator",
                    "metadata": {"name": cluster_generator},
                    "spec": {"kind": "ECRAuthorizationToken",
                             "generator": {"ecrAuthorizationTokenSpec": {"region": "us-east-1", "auth": auth(None)}},
                             "conditions": [{"namespaces": [ns]}]}}),
        );
        let upstream = ["generator-ecr.yaml", "generator-ecr-example.yaml", "generator-sts.yaml", "generator-sts-example.yaml"];
        for doc in upstream.iter().flat_map(|f| upstream_generator_example(f)) {
            let mut doc = doc.clone();
            if doc["kind"] == "ExternalSecret" {
                doc["metadata"]["labels"] = json!({CLASS_LABEL: ns});
            }
            kubectl_apply(&ns, &doc);
        }

        let _reconciler = Reconciler::start_with_stores(&ns, &[("aws", &provider)], &[]).await;
        let ess: Api<ExternalSecret> = Api::namespaced(client.clone(), &ns);
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
        apply(&ess, generator_external_secret("ecr", &ns, "ECRAuthorizationToken", "ecr")).await;
        apply(&ess, generator_external_secret("sts", &ns, "STSSessionToken", "sts")).await;
        apply(&ess, generator_external_secret("via-cluster", &ns, "ClusterGenerator", &cluster_generator)).await;
        apply(&ess, generator_external_secret("stolen", &ns, "STSSessionToken", "stolen")).await;

        // A registry login under upstream's four keys.
        let ecr = eventually("Secret ecr holds a registry login", WAIT, || async { secrets.get_opt("ecr").await.ok()? })
            .await;
        assert_eq!(keys_of(&ecr), ["expires_at", "password", "proxy_endpoint", "username"]);
        assert_eq!(value(&ecr, "username").unwrap(), "AWS");
        assert!(value(&ecr, "proxy_endpoint").unwrap().starts_with("https://"));
        assert!(value(&ecr, "expires_at").unwrap().parse::<i64>().is_ok());
        // A session token under upstream's four keys.
        let sts = eventually("Secret sts holds a session token", WAIT, || async { secrets.get_opt("sts").await.ok()? })
            .await;
        assert_eq!(keys_of(&sts), ["access_key_id", "expiration", "secret_access_key", "session_token"]);
        assert!(!value(&sts, "session_token").unwrap().is_empty());
        // Through a ClusterGenerator: the same provider, the keys read in the manifest's namespace.
        let via = eventually("Secret via-cluster holds a registry login", WAIT, || async {
            value(&secrets.get_opt("via-cluster").await.ok()??, "password")
        })
        .await;
        assert!(!via.is_empty());
        // Every request was signed with the generators' keys, never the provider's own: directly,
        // or with the temporary keys (`ASIA…`) of a role those keys assumed (upstream's examples
        // name a role).
        let requests = moto.requests();
        let signers = |wanted: &dyn Fn(&str) -> bool| -> Vec<String> {
            requests.iter().filter(|r| wanted(&r.target)).map(|r| r.access_key.clone()).collect()
        };
        let assumers = signers(&|t| t == "AssumeRole");
        assert!(assumers.iter().all(|k| k == "AKIDGENERATOR"), "AssumeRole signed by {assumers:?}");
        let callers = signers(&|t| t.ends_with("GetAuthorizationToken") || t == "GetSessionToken");
        let generators_own = callers.iter().filter(|k| *k == "AKIDGENERATOR").count();
        assert!(generators_own >= 3, "{callers:?}");
        assert!(
            callers.iter().all(|k| k == "AKIDGENERATOR" || (k.starts_with("ASIA") && !assumers.is_empty())),
            "{callers:?}"
        );
        // The tenant boundary: the generator's Secret in another namespace is refused.
        let message = wait_refused(&ess, "stolen", "kube-system", WAIT).await;
        assert!(message.contains("STSSessionToken \"stolen\""), "{message}");
        assert!(secrets.get_opt("stolen").await.unwrap().is_none(), "nothing written");
        // Upstream's examples applied unchanged are served: sent to the AWS provider, which
        // assumes their role `my-role` (a name, not an ARN: real STS refuses it and the sync
        // reports that; moto accepts it) and generates, or reports what STS answered.
        for es_name in ["ecr-secret", "sts-secret"] {
            let message = eventually(&format!("{es_name} has a Ready condition"), WAIT, || async {
                let es = ess.get(es_name).await.ok()?;
                let (_, _, message) = ready_of(&es.status?.conditions)?;
                Some(message)
            })
            .await;
            assert!(!message.contains("not served"), "{es_name}: {message}");
        }
    })
    .await;
}
