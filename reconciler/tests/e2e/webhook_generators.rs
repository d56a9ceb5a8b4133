//! End to end: the Webhook generator. An ExternalSecret's `dataFrom` generatorRef names one
//! (directly, and through a ClusterGenerator); the reconciler sends it to the webhook provider
//! process, which posts the rendered body to a real HTTP server, and the target Secret holds
//! the members of the answer's JSON object. A generator naming another namespace's Secret
//! reports Ready=False; upstream's example applies unchanged and is sent to the webhook
//! provider. The generators are admitted through keyward-webhook, which refuses a Webhook
//! generator (or ClusterGenerator) whose spec breaks the webhook store's rules.

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use keyward_crds::ExternalSecret;
use keyward_e2e::with_temp_namespace;
use kube::Api;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::*;

const WAIT: Duration = Duration::from_secs(60);

/// An HTTP server on loopback that answers every request with `{"json": <its body>}`.
async fn echo_server() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                let body = loop {
                    let Ok(n) = tcp.read(&mut chunk).await else { return };
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else { continue };
                    let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
                    let len = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse::<usize>().ok())
                        .unwrap_or(0);
                    if buf.len() >= end + 4 + len {
                        break buf[end + 4..end + 4 + len].to_vec();
                    }
                };
                let parsed: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                let answer = json!({ "json": parsed }).to_string();
                let response = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
                    answer.len()
                );
                let _ = tcp.write_all(response.as_bytes()).await;
                let _ = tcp.shutdown().await;
            });
        }
    });
    url
}

#[tokio::test(flavor = "multi_thread")]
async fn webhook_generators_fill_the_target_secret() {
    let _turn = shared().await;
    let server = echo_server().await;
    with_temp_namespace(&[], |client, ns| async move {
        let pki = Pki::new();
        pki.install(&client, &ns).await;
        let provider = ProviderProcess::start_with_env("keyward-provider-webhook", pki.provider_dir(), &[]).await;
        let cluster_generator = format!("{ns}-webhook");
        let bad_cluster_generator = format!("{ns}-bad-webhook");
        let _cleanup = ClusterGenerators(vec![cluster_generator.clone(), bad_cluster_generator.clone()]);
        let mut webhook = Webhook::start(&pki.issue_server_dir("webhook")).await;
        register_generator_webhook(&mut webhook, &client, &pki, &ns, &["webhooks"]).await;
        kubectl_apply(
            &ns,
            &json!({"apiVersion": "v1", "kind": "Secret",
                    "metadata": {"name": "creds", "labels": {"external-secrets.io/type": "webhook"}},
                    "stringData": {"user": "app"}}),
        );
        let spec = |secret_ns: Option<&str>| {
            let mut secret_ref = json!({"name": "creds"});
            if let Some(n) = secret_ns {
                secret_ref["namespace"] = json!(n);
            }
            json!({
                "url": format!("{server}/generate"),
                "method": "POST",
                "headers": {"Content-Type": "application/json"},
                "body": r#"{"username": "{{ .creds.user }}", "port": 5432}"#,
                "result": {"jsonPath": "$.json"},
                "secrets": [{"name": "creds", "secretRef": secret_ref}],
            })
        };
        let generator = |name: &str, spec: Value| {
            json!({"apiVersion": "generators.external-secrets.io/v1alpha1", "kind": "Webhook",
                   "metadata": {"name": name}, "spec": spec})
        };
        // Admission: a spec the webhook store's rules refuse is denied by the API server, with
        // the generator's field path; the same spec in a ClusterGenerator at its own path.
        let mut bad = spec(None);
        bad["method"] = json!("BREW");
        let bad = generator("bad-method", bad);
        eventually("the validating webhook in force", WAIT, || async {
            (!server_dry_run_accepts(&ns, &bad)).then_some(())
        })
        .await;
        let refused = keyward_e2e::rejects_in(&ns, &bad.to_string(), "is invalid: spec.method:");
        assert!(refused.contains("denied the request") && refused.contains("is not one of GET"), "{refused}");
        let bad_cluster = json!({"apiVersion": "generators.external-secrets.io/v1alpha1", "kind": "ClusterGenerator",
                                 "metadata": {"name": bad_cluster_generator, "labels": {RUN_LABEL: ns}},
                                 "spec": {"kind": "Webhook", "generator": {"webhookSpec": {"url": "ftp://h/"}}}});
        let refused = keyward_e2e::rejects(&bad_cluster.to_string(), "spec.generator.webhookSpec.url: must start with");
        assert!(refused.contains("denied the request"), "{refused}");

        kubectl_apply(&ns, &generator("login", spec(None)));
        kubectl_apply(&ns, &generator("stolen", spec(Some("kube-system"))));
        kubectl_apply(
            &ns,
            &json!({"apiVersion": "generators.external-secrets.io/v1alpha1", "kind": "ClusterGenerator",
                    "metadata": {"name": cluster_generator, "labels": {RUN_LABEL: ns}},
                    "spec": {"kind": "Webhook", "generator": {"webhookSpec": spec(None)},
                             "conditions": [{"namespaces": [ns]}]}}),
        );
        for doc in ["generator-webhook.yaml", "generator-webhook-example.yaml"]
            .iter()
            .flat_map(|f| upstream_generator_example(f))
        {
            let mut doc = doc.clone();
            if doc["kind"] == "ExternalSecret" {
                doc["metadata"]["labels"] = json!({CLASS_LABEL: ns});
            }
            kubectl_apply(&ns, &doc);
        }

        let _reconciler = Reconciler::start_with_stores(&ns, &[("webhook", &provider)], &[]).await;
        let ess: Api<ExternalSecret> = Api::namespaced(client.clone(), &ns);
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
        apply(&ess, generator_external_secret("login", &ns, "Webhook", "login")).await;
        apply(&ess, generator_external_secret("via-cluster", &ns, "ClusterGenerator", &cluster_generator)).await;
        apply(&ess, generator_external_secret("stolen", &ns, "Webhook", "stolen")).await;

        // The members of the answer's object, one key each.
        for name in ["login", "via-cluster"] {
            wait_for_value(&secrets, name, "username", "app", WAIT).await;
            wait_for_value(&secrets, name, "port", "5432", WAIT).await;
        }
        // The tenant boundary: the generator's Secret in another namespace is refused.
        let message = wait_refused(&ess, "stolen", "kube-system", WAIT).await;
        assert!(message.contains("Webhook \"stolen\""), "{message}");
        assert!(secrets.get_opt("stolen").await.unwrap().is_none(), "nothing written");
        // Upstream's example applied unchanged: served (sent to the webhook provider, which
        // calls httpbin.org): synced where that host answers, else refused by the provider, never
        // as an unserved kind.
        let outcome = eventually("upstream's example is served", WAIT, || async {
            if let Some(s) = secrets.get_opt("webhook-secret").await.ok()? {
                return Some(Ok(value(&s, "parameter")));
            }
            let es = ess.get("webhook").await.ok()?;
            let (status, _, message) = ready_of(&es.status?.conditions)?;
            (status == "False" && message.contains("Webhook \"webhook\"")).then_some(Err(message))
        })
        .await;
        match outcome {
            Ok(parameter) => assert_eq!(parameter.as_deref(), Some("test")),
            Err(message) => assert!(!message.contains("not served"), "{message}"),
        }
    })
    .await;
}
