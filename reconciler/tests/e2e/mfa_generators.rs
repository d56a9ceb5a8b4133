//! End to end: upstream's generator kinds beyond those served by a provider process. MFA is
//! served in the reconciler: upstream's example (`fixtures/upstream-generators/generator-mfa.yaml`,
//! as printed) syncs an ExternalSecret with a valid code; RFC 6238's vectors come out of pinned
//! generators (SHA1 and SHA256), directly and through a ClusterGenerator; a seed in another
//! namespace is refused; admission names a bad field. The kinds Keyward does not serve (GitHub,
//! GitLab, Quay, Cloudsmith, Grafana, BeyondTrust) apply with upstream's examples and their
//! ExternalSecrets report `Ready=False` naming the kind.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::Secret;
use keyward_crds::ExternalSecret;
use keyward_crds::generators::ClusterGenerator;
use keyward_crds::rules::{MfaAlgorithm, MfaPlan};
use keyward_e2e::with_temp_namespace;
use keyward_reconciler::generators::mfa::totp;
use kube::Api;
use serde_json::{Value, json};

use crate::support::*;

const WAIT: Duration = Duration::from_secs(60);

/// The generator resources the run's webhook admits, as the chart routes them.
const RESOURCES: &[&str] = &[
    "mfas",
    "githubaccesstokens",
    "gitlabdeploytokens",
    "quayaccesstokens",
    "cloudsmithaccesstokens",
    "grafanas",
    "beyondtrustworkloadcredentialsdynamicsecrets",
];

/// RFC 4648 base32 of the RFC 6238 seeds (the ASCII digits repeated to 20 and 32 bytes).
const RFC_SHA1_SEED: &str = "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ";
const RFC_SHA256_SEED: &str = "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQGEZA";

async fn webhook_for(client: &kube::Client, ns: &str) -> (Webhook, Pki) {
    let pki = Pki::new();
    let mut webhook = Webhook::start(&pki.issue_server_dir("webhook")).await;
    register_generator_webhook(&mut webhook, client, &pki, ns, RESOURCES).await;
    (webhook, pki)
}

fn mfa(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "generators.external-secrets.io/v1alpha1", "kind": "MFA", "metadata": {"name": name},
           "spec": spec})
}

async fn key(secrets: &Api<Secret>, name: &str, key: &str) -> String {
    eventually(&format!("Secret {name} holds {key}"), WAIT, || async {
        value(&secrets.get_opt(name).await.ok()??, key)
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn upstreams_mfa_example_syncs_a_valid_code() {
    let _turn = shared().await;
    with_temp_namespace(&[], |client, ns| async move {
        let cluster_mfa = format!("{ns}-mfa");
        let _cleanup = ClusterGenerators(vec![cluster_mfa.clone()]);
        let (_webhook, _pki) = webhook_for(&client, &ns).await;
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
        // The seed upstream's example names (`secret`, key `token`), and the RFC's seeds.
        apply(
            &secrets,
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "secret"},
                               "stringData": {"token": "JBSW Y3DP EHPK 3PXP\n"}}),
        )
        .await;
        apply(
            &secrets,
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "rfc"},
                               "stringData": {"sha1": RFC_SHA1_SEED, "sha256": RFC_SHA256_SEED}}),
        )
        .await;
        for doc in upstream_generator_example("generator-mfa.yaml") {
            kubectl_apply(&ns, &doc);
        }
        let pinned = |key: &str| {
            json!({"secret": {"name": "rfc", "key": key}, "length": 8,
                                        "when": "1970-01-01T00:00:59Z"})
        };
        kubectl_apply(&ns, &mfa("rfc-sha1", pinned("sha1")));
        let mut sha256 = pinned("sha256");
        sha256["algorithm"] = json!("SHA256");
        kubectl_apply(&ns, &mfa("rfc-sha256", sha256));
        let mut elsewhere = pinned("sha1");
        elsewhere["secret"]["namespace"] = json!("default");
        kubectl_apply(&ns, &mfa("elsewhere", elsewhere));
        // Admission names the field, with the rule the reconciler applies again.
        let mut md5 = pinned("sha1");
        md5["algorithm"] = json!("md5");
        keyward_e2e::rejects_in(&ns, &mfa("md5", md5).to_string(), "spec.algorithm: \"md5\" is not one of sha1");
        apply(
            &Api::<ClusterGenerator>::all(client.clone()),
            json!({"apiVersion": "generators.external-secrets.io/v1alpha1", "kind": "ClusterGenerator",
                   "metadata": {"name": cluster_mfa, "labels": {RUN_LABEL: ns}},
                   "spec": {"kind": "MFA", "generator": {"mfaSpec": pinned("sha1")}}}),
        )
        .await;

        let _reconciler = Reconciler::start(&ns, &[]).await;
        let ess: Api<ExternalSecret> = Api::namespaced(client.clone(), &ns);
        for (name, kind, generator) in [
            ("mfa", "MFA", "my-mfa-generator"),
            ("rfc-sha1", "MFA", "rfc-sha1"),
            ("rfc-sha256", "MFA", "rfc-sha256"),
            ("cluster-mfa", "ClusterGenerator", cluster_mfa.as_str()),
            ("elsewhere", "MFA", "elsewhere"),
        ] {
            apply(&ess, generator_external_secret(name, &ns, kind, generator)).await;
        }

        // RFC 6238, appendix B, T = 59: the seed is read in the ExternalSecret's namespace,
        // for a ClusterGenerator too.
        assert_eq!(key(&secrets, "rfc-sha1", "token").await, "94287082");
        assert_eq!(key(&secrets, "rfc-sha1", "timeLeft").await, "1");
        assert_eq!(key(&secrets, "rfc-sha256", "token").await, "46119246");
        assert_eq!(key(&secrets, "cluster-mfa", "token").await, "94287082");

        // Upstream's example: six digits, valid now (or in the step just before, should the
        // step have turned since the sync).
        let token = key(&secrets, "mfa", "token").await;
        let left: u64 = key(&secrets, "mfa", "timeLeft").await.parse().unwrap();
        assert!(token.len() == 6 && token.chars().all(|c| c.is_ascii_digit()), "{token}");
        assert!((1..=30).contains(&left), "{left}");
        let plan = MfaPlan {
            length: 6,
            time_period: 30,
            algorithm: MfaAlgorithm::Sha1,
            when: None,
            secret_name: "secret".into(),
            secret_key: "token".into(),
        };
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
        let valid: Vec<String> =
            (0..4).map(|step| totp(b"JBSWY3DPEHPK3PXP", &plan, now - step * 30).unwrap().0).collect();
        assert!(valid.contains(&token), "{token} is none of the codes of the last two minutes {valid:?}");

        let message = wait_refused(&ess, "elsewhere", "secret.namespace", WAIT).await;
        assert!(message.contains("\"default\"") && message.contains(&format!("{ns:?}")), "{message}");
        assert!(secrets.get_opt("elsewhere").await.unwrap().is_none(), "nothing read from another namespace");
    })
    .await;
}

/// Upstream's examples of the kinds Keyward does not serve, as applied: ExternalSecrets get the
/// run's controller class; namespaces upstream wrote (`default`, `external-secrets`) are left
/// out so the objects land in the test's namespace; the Cloudsmith example's `apiHost` is its
/// CRD's `apiUrl` (upstream's own CRD refuses `apiHost` as an unknown field).
fn unserved_examples(ns: &str) -> Vec<Value> {
    [
        "generator-github.yaml",
        "generator-github-example.yaml",
        "generator-github-example-basicauth.yaml",
        "generator-gitlab.yaml",
        "generator-gitlab-example.yaml",
        "generator-quay.yaml",
        "generator-quay-example.yaml",
        "generator-cloudsmith.yaml",
        "generator-cloudsmith-example.yaml",
        "generator-grafana.yaml",
        "generator-grafana-basicauth.yaml",
        "generator-grafana-example.yaml",
        "beyondtrustworkloadcredentials-dynamic-secret.yaml",
        "beyondtrustworkloadcredentials-dynamic-external-secret.yaml",
    ]
    .into_iter()
    .flat_map(upstream_generator_example)
    .map(|mut doc| {
        if let Some(meta) = doc["metadata"].as_object_mut() {
            meta.remove("namespace");
        }
        if doc["kind"] == "ExternalSecret" {
            doc["metadata"]["labels"][CLASS_LABEL] = json!(ns);
        }
        if let Some(host) = doc["spec"].as_object_mut().and_then(|s| s.remove("apiHost")) {
            doc["spec"]["apiUrl"] = json!(format!("https://{}", host.as_str().unwrap()));
        }
        doc
    })
    .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn upstreams_unserved_generator_manifests_apply_and_report_not_served() {
    let _turn = shared().await;
    with_temp_namespace(&[], |client, ns| async move {
        let cluster_gitlab = format!("{ns}-gitlab");
        let _cleanup = ClusterGenerators(vec![cluster_gitlab.clone()]);
        let (_webhook, _pki) = webhook_for(&client, &ns).await;
        // As printed, the Cloudsmith example names a field its CRD does not have.
        let mut cloudsmith = upstream_generator_example("generator-cloudsmith.yaml").remove(0);
        cloudsmith["metadata"].as_object_mut().unwrap().remove("namespace");
        keyward_e2e::rejects_in(&ns, &cloudsmith.to_string(), "apiHost");
        let examples = unserved_examples(&ns);
        for doc in &examples {
            kubectl_apply(&ns, doc);
        }
        // A ClusterGenerator accepts every upstream kind, with the spec upstream's example writes.
        let gitlab = examples.iter().find(|d| d["kind"] == "GitlabDeployToken").unwrap();
        apply(
            &Api::<ClusterGenerator>::all(client.clone()),
            json!({"apiVersion": "generators.external-secrets.io/v1alpha1", "kind": "ClusterGenerator",
                   "metadata": {"name": cluster_gitlab, "labels": {RUN_LABEL: ns}},
                   "spec": {"kind": "GitlabDeployToken", "generator": {"gitlabDeployTokenSpec": gitlab["spec"]}}}),
        )
        .await;
        let ess: Api<ExternalSecret> = Api::namespaced(client.clone(), &ns);
        apply(&ess, generator_external_secret("cluster-gitlab", &ns, "ClusterGenerator", &cluster_gitlab)).await;

        let _reconciler = Reconciler::start(&ns, &[]).await;
        for (es, kind) in [
            ("github-auth-token", "GithubAccessToken"),
            ("github-auth-template", "GithubAccessToken"),
            ("gitlab-deploy-token", "GitlabDeployToken"),
            ("quay-credentials", "QuayAccessToken"),
            ("cloudsmith-credentials", "CloudsmithAccessToken"),
            ("grafana-token", "Grafana"),
            ("app-aws-credentials", "BeyondtrustWorkloadCredentialsDynamicSecret"),
            ("cluster-gitlab", "GitlabDeployToken"),
        ] {
            let message =
                wait_refused(&ess, es, &format!("generator kind {kind:?} is not served by Keyward"), WAIT).await;
            assert!(message.contains("MFA"), "the served kinds are offered: {message}");
        }
    })
    .await;
}
