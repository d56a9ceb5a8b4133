//! End to end: Pods receive synced Secrets at admission, and workloads roll when a Secret
//! rotates. The real kube-apiserver calls keyward-webhook (a local process) for Pods and
//! Deployments in opted-in namespaces; the reconciler and the Fake provider run as processes
//! over mTLS. There is no kubelet, so assertions are on the stored objects. A provider outage
//! does not stop Pods: a Secret that keeps its last good data is still injected.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, Secret};
use keyward_crds::workload::RELOAD_LABEL;
use keyward_crds::{ExternalSecret, Provider};
use keyward_e2e::{kubectl, with_temp_namespace};
use keyward_provider_fake::api::Fake;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

use crate::support::*;

const WAIT: Duration = Duration::from_secs(60);
const RUN_LABEL: &str = "keyward.dev/injection-e2e";
const SECRET_VALUE: &str = "s3cret-value-never-in-a-pod";

/// Starts the webhook and registers it for Pods and Deployments of this run's namespaces: only
/// namespaces that opted in (and belong to this run) ever call it, and for Deployments only
/// those labelled `keyward.dev/reload: "true"`, as the chart registers it
/// (`charts/tests/chart.rs::the_workloads_webhook_sees_labelled_workloads_only_and_its_switch_takes_the_rights_away`).
async fn start_webhook(client: &Client, pki: &Pki, run_id: &str) -> Webhook {
    let mut webhook = Webhook::start(&pki.issue_server_dir("webhook")).await;
    let rule = |group: &str, resource: &str| json!({"apiGroups": [group], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": [resource]});
    let entry = |name: &str, rules: serde_json::Value| {
        json!({
            "name": name,
            "clientConfig": {"url": format!("{}/mutate", webhook.url()), "caBundle": BASE64.encode(&pki.ca)},
            "rules": rules,
            "namespaceSelector": {"matchLabels": {"keyward.dev/injection": "enabled", RUN_LABEL: run_id}},
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "reinvocationPolicy": "IfNeeded",
            "timeoutSeconds": 10,
        })
    };
    let mut workloads = entry("workloads.keyward.dev", json!([rule("apps", "deployments")]));
    workloads["objectSelector"] = json!({"matchLabels": {RELOAD_LABEL: "true"}});
    workloads["timeoutSeconds"] = json!(2);
    let config = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": format!("keyward-injection-e2e-{run_id}")},
        "webhooks": [entry("inject.keyward.dev", json!([rule("", "pods")])), workloads],
    });
    webhook.register(client, config).await;
    webhook
}

/// Deployment reviews the webhook answered, from its `/metrics`.
async fn deployment_reviews(webhook: &Webhook) -> f64 {
    let out = std::process::Command::new("curl")
        .args(["-sf", &format!("http://127.0.0.1:{}/metrics", webhook.health)])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains("review_duration_seconds_count{") && l.contains(r#"kind="Deployment""#))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

fn pod(name: &str, annotations: serde_json::Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"containers": [{"name": "app", "image": "registry.example/app:1"}, {"name": "sidecar", "image": "registry.example/side:1"}]},
    }))
    .unwrap()
}

/// Creates a Pod, retrying while the webhook's caches catch up; returns the stored Pod or the
/// last denial.
async fn create_pod(pods: &Api<Pod>, pod: &Pod, expect_admitted: bool) -> Result<Pod, String> {
    let mut last = String::new();
    for _ in 0..50 {
        match pods.create(&PostParams::default(), pod).await {
            Ok(p) if expect_admitted => return Ok(p),
            Ok(p) => {
                let _ = pods.delete(p.metadata.name.as_deref().unwrap_or_default(), &DeleteParams::default()).await;
                last = "admitted".into();
            }
            Err(e) if !expect_admitted => return Err(e.to_string()),
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    panic!("pod {:?}: expected admitted={expect_admitted}, last outcome: {last}", pod.metadata.name);
}

fn env_from_secrets(pod: &Pod, container: usize) -> Vec<(String, Option<bool>)> {
    pod.spec.as_ref().unwrap().containers[container]
        .env_from
        .iter()
        .flatten()
        .filter_map(|e| e.secret_ref.as_ref().map(|s| (s.name.clone(), s.optional)))
        .collect()
}

fn external_secret(name: &str, ns: &str, key: &str) -> serde_json::Value {
    json!({
        "apiVersion": "external-secrets.io/v1",
        "kind": "ExternalSecret",
        "metadata": {"name": name, "labels": {CLASS_LABEL: ns}},
        "spec": {
            "refreshInterval": "1s",
            "secretStoreRef": {"name": "fake", "kind": "Provider"},
            "target": {"name": format!("{name}-secret")},
            "data": [{"secretKey": "value", "remoteRef": {"key": key}}],
        },
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn pods_get_synced_secrets_and_workloads_roll_once_per_rotation() {
    // Alone: exactly one rollout for a burst of rotations rests on the reload debounce's timing.
    let _turn = exclusive().await;
    let run_id = format!("{:x}", std::process::id());
    let run_label = run_id.clone();
    let labels = [("keyward.dev/injection", "enabled"), (RUN_LABEL, run_label.as_str())];
    with_temp_namespace(&labels, |client, ns| async move {
        let pki = Pki::new();
        pki.install(&client, &ns).await;
        let mut fake = ProviderProcess::start("keyward-provider-fake", pki.provider_dir(), None).await;
        let fakes: Api<Fake> = Api::namespaced(client.clone(), &ns);
        apply(&fakes, fake_config("data", &[("db", SECRET_VALUE), ("api", "api-v1")])).await;
        let providers: Api<Provider> = Api::namespaced(client.clone(), &ns);
        apply(&providers, provider("fake", &ns, &fake.address(), "data")).await;
        let _reconciler = Reconciler::start(&ns, &["--reload-debounce", "2s"]).await;
        let webhook = start_webhook(&client, &pki, &run_id).await;

        let ess: Api<ExternalSecret> = Api::namespaced(client.clone(), &ns);
        apply(&ess, external_secret("db", &ns, "db")).await;
        apply(&ess, external_secret("api", &ns, "api")).await;
        // Its remote key does not exist: it never syncs.
        apply(&ess, external_secret("broken", &ns, "no-such-key")).await;
        for name in ["db", "api"] {
            eventually(&format!("{name} synced"), WAIT, || async {
                let es = ess.get(name).await.ok()?;
                (ready_of(&es.status?.conditions)?.0 == "True").then_some(())
            })
            .await;
        }
        let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);

        // Not synced, or missing: denied with the reason, so the workload controller retries.
        let denied = create_pod(&pods, &pod("p-broken", json!({"keyward.dev/inject": "broken"})), false).await;
        let denied = denied.unwrap_err();
        assert!(denied.contains("ExternalSecret \"broken\"") && denied.contains("has not synced"), "{denied}");
        let denied = create_pod(&pods, &pod("p-ghost", json!({"keyward.dev/inject": "ghost"})), false).await;
        assert!(denied.unwrap_err().contains("\"ghost\" named in annotation keyward.dev/inject does not exist"));

        // Optional policy: admitted with the reference marked optional.
        let optional =
            pod("p-optional", json!({"keyward.dev/inject": "ghost", "keyward.dev/inject-policy": "optional"}));
        let stored = create_pod(&pods, &optional, true).await.unwrap();
        assert_eq!(env_from_secrets(&stored, 0), vec![("ghost".to_string(), Some(true))]);

        // Env mode, two ExternalSecrets, one container only.
        let env = pod("p-env", json!({"keyward.dev/inject": "db,api", "keyward.dev/inject-containers": "app"}));
        let stored = create_pod(&pods, &env, true).await.unwrap();
        assert_eq!(
            env_from_secrets(&stored, 0),
            vec![("db-secret".to_string(), None), ("api-secret".to_string(), None)]
        );
        assert!(env_from_secrets(&stored, 1).is_empty(), "sidecar not listed, not injected");
        assert_eq!(stored.metadata.annotations.unwrap()["keyward.dev/injected"], "db=db-secret,api=api-secret");

        // Volume mode: a read-only Secret volume per ExternalSecret, user volume names kept.
        let mut vol = pod("p-volume", json!({"keyward.dev/inject": "db", "keyward.dev/inject-mode": "volume"}));
        vol.spec.as_mut().unwrap().volumes =
            Some(vec![serde_json::from_value(json!({"name": "keyward-db", "emptyDir": {}})).unwrap()]);
        let stored = create_pod(&pods, &vol, true).await.unwrap();
        let spec = stored.spec.clone().unwrap();
        let volumes = spec.volumes.unwrap();
        assert!(volumes.iter().any(|v| v.name == "keyward-db" && v.empty_dir.is_some()), "user's volume kept");
        let injected = volumes.iter().find(|v| v.name == "keyward-db-1").expect("injected volume");
        assert_eq!(injected.secret.as_ref().unwrap().secret_name.as_deref(), Some("db-secret"));
        for c in &spec.containers {
            let m = c.volume_mounts.iter().flatten().find(|m| m.mount_path == "/var/run/secrets/keyward/db").unwrap();
            assert_eq!((m.name.as_str(), m.read_only), ("keyward-db-1", Some(true)), "{}", c.name);
        }

        // No secret value anywhere in what the API server stored.
        let out = kubectl().args(["get", "pods", "-n", &ns, "-o", "json"]).output().unwrap();
        let stored_pods = String::from_utf8_lossy(&out.stdout);
        assert!(stored_pods.contains("db-secret"), "sanity: the listing has the pods");
        assert!(!stored_pods.contains(SECRET_VALUE), "a secret value reached a Pod spec");

        // A namespace that did not opt in never calls the webhook: the annotation stays inert.
        with_temp_namespace(&[], |client, other| async move {
            let pods: Api<Pod> = Api::namespaced(client, &other);
            let stored = pods.create(&PostParams::default(), &pod("p", json!({"keyward.dev/inject": "db"}))).await;
            let stored = stored.expect("admitted without the webhook");
            assert!(env_from_secrets(&stored, 0).is_empty());
            assert!(!stored.metadata.annotations.unwrap().contains_key("keyward.dev/injected"));
        })
        .await;

        // Reload: the Deployment's template carries the hash of the Secrets it uses.
        let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
        let deployment: Deployment = serde_json::from_value(json!({
            "metadata": {"name": "web", "labels": {RELOAD_LABEL: "true"}},
            "spec": {
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}, "annotations": {"keyward.dev/inject": "db"}},
                    "spec": {"containers": [{"name": "app", "image": "registry.example/app:1",
                        "envFrom": [{"secretRef": {"name": "api-secret"}}]}]},
                },
            },
        }))
        .unwrap();
        let template_hash = |d: &Deployment| {
            d.spec.as_ref()?.template.metadata.as_ref()?.annotations.as_ref()?.get("keyward.dev/secrets-hash").cloned()
        };
        let created = eventually("Deployment admitted with a hash", WAIT, || async {
            let d = deployments.create(&PostParams::default(), &deployment).await.ok()?;
            Some(d)
        })
        .await;
        let first = template_hash(&created).expect("hash set at admission");
        let generation = created.metadata.generation.unwrap();
        let reviews = || async { deployment_reviews(&webhook).await };
        assert!(reviews().await >= 1.0, "the labelled Deployment was reviewed");

        // A Deployment without the label never reaches the webhook, created or updated.
        let before = reviews().await;
        let mut plain = deployment.clone();
        plain.metadata.name = Some("plain".into());
        plain.metadata.labels = None;
        plain.metadata.annotations = Some([("keyward.dev/reload".to_string(), "true".to_string())].into());
        let plain = deployments.create(&PostParams::default(), &plain).await.expect("admitted");
        assert!(template_hash(&plain).is_none(), "nothing was added to it");
        let patch = json!({"metadata": {"annotations": {"touched": "yes"}}});
        deployments.patch("plain", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
        assert_eq!(reviews().await, before, "no review of an unlabelled Deployment");

        // No-op refreshes (every second) change nothing.
        tokio::time::sleep(Duration::from_secs(6)).await;
        let d = deployments.get("web").await.unwrap();
        assert_eq!((template_hash(&d).unwrap(), d.metadata.generation.unwrap()), (first.clone(), generation));

        // A burst of rotations of one Secret: one rollout.
        for v in ["rotated-1", "rotated-2", "rotated-3"] {
            apply(&fakes, fake_config("data", &[("db", v), ("api", "api-v1")])).await;
            tokio::time::sleep(Duration::from_millis(400)).await;
        }
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
        eventually("db-secret rotated", WAIT, || async {
            let s = secrets.get("db-secret").await.ok()?;
            (value(&s, "value")? == "rotated-3").then_some(())
        })
        .await;
        // The ExternalSecret mirrors the Secret's data hash: the webhook's only source for it.
        let ess: Api<ExternalSecret> = Api::namespaced(client.clone(), &ns);
        eventually("status.syncedDataHash mirrors the Secret", WAIT, || async {
            let s = secrets.get("db-secret").await.ok()?;
            let annotated = s.metadata.annotations?.get("reconcile.external-secrets.io/data-hash")?.clone();
            let mirrored = ess.get("db").await.ok()?.status?.synced_data_hash?;
            (annotated == mirrored).then_some(())
        })
        .await;
        let rolled = eventually("template hash changed", WAIT, || async {
            let d = deployments.get("web").await.ok()?;
            (template_hash(&d)? != first).then_some(d)
        })
        .await;
        tokio::time::sleep(Duration::from_secs(6)).await;
        let settled = deployments.get("web").await.unwrap();
        assert_eq!(template_hash(&settled), template_hash(&rolled), "settled on one hash");
        assert_eq!(settled.metadata.generation.unwrap(), generation + 1, "exactly one rollout");

        // Provider outage: the ExternalSecret turns Ready=False, its Secret keeps the last good
        // data, and Pods that need it are still admitted (with a required reference).
        fake.stop();
        eventually("db failing while the provider is down", WAIT, || async {
            let es = ess.get("db").await.ok()?;
            let (status, reason, _) = ready_of(&es.status?.conditions)?;
            (status == "False" && reason == "SecretSyncedError").then_some(())
        })
        .await;
        let kept = secrets.get("db-secret").await.unwrap();
        assert_eq!(value(&kept, "value").as_deref(), Some("rotated-3"), "the last good data stays");
        let stored = create_pod(&pods, &pod("p-outage", json!({"keyward.dev/inject": "db"})), true).await.unwrap();
        assert_eq!(env_from_secrets(&stored, 0), vec![("db-secret".to_string(), None)]);

        // Once the Secret itself is gone the binding goes too, and Pods are denied again.
        secrets.delete("db-secret", &DeleteParams::default()).await.unwrap();
        eventually("binding dropped", WAIT, || async {
            let es = ess.get("db").await.ok()?;
            es.status?.binding.is_none().then_some(())
        })
        .await;
        let denied = create_pod(&pods, &pod("p-gone", json!({"keyward.dev/inject": "db"})), false).await;
        assert!(denied.unwrap_err().contains("has not synced its Secret \"db-secret\""));
    })
    .await;
}
