//! End to end: generators (`generators.external-secrets.io/v1alpha1`) served in the reconciler.
//! A Password's value is stable across a reconciler restart, changes on `force-sync` with
//! refreshPolicy Periodic and not with CreatedOnce; a ClusterGenerator is used only from the
//! namespaces its conditions admit; a PushSecret pushes one generated value until its spec
//! changes; upstream's generator examples (`fixtures/upstream-generators/`, as printed in
//! upstream's docs/snippets) apply unchanged and sync; the webhook refuses kinds Keyward does
//! not serve.

#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use keyward_crds::generators::ClusterGenerator;
use keyward_crds::{ExternalSecret, Fake, Provider, PushSecret};
use keyward_e2e::with_temp_namespace;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};
use support::*;

const WAIT: Duration = Duration::from_secs(60);

fn password_es(name: &str, ns: &str, policy: &str, generator_kind: &str, generator: &str) -> Value {
    json!({
        "apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
        "metadata": {"name": name, "labels": {CLASS_LABEL: ns}},
        "spec": {
            "refreshInterval": "1h",
            "refreshPolicy": policy,
            "target": {"name": name},
            "dataFrom": [{"sourceRef": {"generatorRef": {
                "apiVersion": "generators.external-secrets.io/v1alpha1", "kind": generator_kind, "name": generator}}}],
        },
    })
}

async fn secret_value(secrets: &Api<Secret>, name: &str, key: &str) -> Option<String> {
    value(&secrets.get_opt(name).await.ok()??, key)
}

async fn wait_for_key(secrets: &Api<Secret>, name: &str, key: &str) -> String {
    eventually(&format!("Secret {name} holds {key}"), WAIT, || secret_value(secrets, name, key)).await
}

async fn force_sync(ess: &Api<ExternalSecret>, name: &str, stamp: &str) {
    let patch = json!({"metadata": {"annotations": {"force-sync": stamp}}});
    ess.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_generated_password_changes_only_when_a_refresh_is_due() {
    with_temp_namespace(&[], |client, ns| async move {
        kubectl_apply(
            &ns,
            &json!({"apiVersion": "generators.external-secrets.io/v1alpha1", "kind": "Password",
                    "metadata": {"name": "pw"},
                    "spec": {"length": 32, "digits": 4, "symbols": 4, "symbolCharacters": "-_", "noUpper": false,
                             "allowRepeat": true}}),
        );
        let mut reconciler = Reconciler::start(&ns, &[]).await;
        let ess: Api<ExternalSecret> = Api::namespaced(client.clone(), &ns);
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
        apply(&ess, password_es("periodic", &ns, "Periodic", "Password", "pw")).await;
        apply(&ess, password_es("once", &ns, "CreatedOnce", "Password", "pw")).await;
        let periodic = wait_for_key(&secrets, "periodic", "password").await;
        let once = wait_for_key(&secrets, "once", "password").await;
        for pw in [&periodic, &once] {
            assert_eq!(pw.chars().count(), 32, "{pw}");
            assert_eq!(pw.chars().filter(char::is_ascii_digit).count(), 4, "{pw}");
            assert_eq!(pw.chars().filter(|c| "-_".contains(*c)).count(), 4, "{pw}");
        }
        assert_ne!(periodic, once, "each ExternalSecret gets its own password");

        // A restart is not a refresh: the new process syncs a new ExternalSecret, and leaves the
        // generated values alone.
        reconciler.process.terminate(Duration::from_secs(20));
        drop(reconciler);
        let _reconciler = Reconciler::start(&ns, &[]).await;
        apply(&ess, password_es("after-restart", &ns, "Periodic", "Password", "pw")).await;
        wait_for_key(&secrets, "after-restart", "password").await;
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(secret_value(&secrets, "periodic", "password").await.unwrap(), periodic, "stable across a restart");
        assert_eq!(secret_value(&secrets, "once", "password").await.unwrap(), once, "stable across a restart");

        // force-sync: a refresh for Periodic (a new password), none for CreatedOnce.
        force_sync(&ess, "once", "1").await;
        force_sync(&ess, "periodic", "1").await;
        let rotated = eventually("periodic password rotated", WAIT, || async {
            let now = secret_value(&secrets, "periodic", "password").await?;
            (now != periodic).then_some(now)
        })
        .await;
        assert_eq!(rotated.chars().count(), 32);
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(secret_value(&secrets, "once", "password").await.unwrap(), once, "CreatedOnce ignores force-sync");
        let es = ess.get("once").await.unwrap();
        assert_eq!(ready_of(&es.status.unwrap().conditions).unwrap().0, "True");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cluster_generator_serves_only_the_namespaces_its_conditions_admit() {
    with_temp_namespace(&[], |client, ns| async move {
        let generators: Api<ClusterGenerator> = Api::all(client.clone());
        let (open, closed) = (format!("{ns}-open"), format!("{ns}-closed"));
        let _cleanup = ClusterGenerators(vec![open.clone(), closed.clone()]);
        let cluster_generator = |name: &str, admitted: &str| {
            json!({"apiVersion": "generators.external-secrets.io/v1alpha1", "kind": "ClusterGenerator",
                   "metadata": {"name": name},
                   "spec": {"kind": "UUID", "generator": {"uuidSpec": {}},
                            "conditions": [{"namespaces": [admitted]}]}})
        };
        apply(&generators, cluster_generator(&open, &ns)).await;
        apply(&generators, cluster_generator(&closed, "some-other-namespace")).await;
        let _reconciler = Reconciler::start(&ns, &[]).await;
        let ess: Api<ExternalSecret> = Api::namespaced(client.clone(), &ns);
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
        let uuid_es = |name: &str, generator: &str| {
            let mut es = password_es(name, &ns, "Periodic", "ClusterGenerator", generator);
            es["spec"]["refreshInterval"] = json!("1h");
            es
        };
        apply(&ess, uuid_es("admitted", &open)).await;
        apply(&ess, uuid_es("refused", &closed)).await;
        let id = wait_for_key(&secrets, "admitted", "uuid").await;
        assert!(uuid_like(&id), "{id}");
        let message = wait_refused(&ess, "refused", "does not allow namespace", WAIT).await;
        assert!(message.contains(&format!("ClusterGenerator {closed:?}")), "{message}");
        assert!(!message.contains("some-other-namespace"), "the conditions stay out of the tenant's view: {message}");
        assert!(secrets.get_opt("refused").await.unwrap().is_none(), "nothing written for a refused namespace");

        // Admitting the namespace later lets the next retry through.
        apply(&generators, cluster_generator(&closed, &ns)).await;
        wait_for_key(&secrets, "refused", "uuid").await;
    })
    .await;
}

fn uuid_like(s: &str) -> bool {
    s.len() == 36 && s.chars().all(|c| c.is_ascii_hexdigit() || c == '-') && s.as_bytes()[14] == b'4'
}

#[tokio::test(flavor = "multi_thread")]
async fn a_push_secret_pushes_one_generated_value_until_its_spec_changes() {
    with_temp_namespace(&[], |client, ns| async move {
        let pki = Pki::new();
        pki.install(&client, &ns).await;
        let fake = ProviderProcess::start("keyward-provider-fake", pki.provider_dir(), None).await;
        apply(&Api::<Fake>::namespaced(client.clone(), &ns), fake_config("cfg", &[("seed", "x")])).await;
        apply(&Api::<Provider>::namespaced(client.clone(), &ns), provider("fake", &ns, &fake.address(), "cfg")).await;
        kubectl_apply(
            &ns,
            &json!({"apiVersion": "generators.external-secrets.io/v1alpha1", "kind": "Password",
                    "metadata": {"name": "pw"}, "spec": {"length": 20}}),
        );
        let mut reconciler = Reconciler::start(&ns, &[]).await;
        let pss: Api<PushSecret> = Api::namespaced(client.clone(), &ns);
        let push = |interval: &str| {
            json!({
                "apiVersion": "external-secrets.io/v1alpha1", "kind": "PushSecret",
                "metadata": {"name": "push", "labels": {CLASS_LABEL: ns}},
                "spec": {
                    "refreshInterval": interval,
                    "secretStoreRefs": [{"name": "fake", "kind": "Provider"}],
                    "selector": {"generatorRef": {"apiVersion": "generators.external-secrets.io/v1alpha1",
                                                  "kind": "Password", "name": "pw"}},
                    "data": [{"match": {"secretKey": "password", "remoteRef": {"remoteKey": "generated"}}}],
                },
            })
        };
        apply(&pss, push("1h")).await;
        let ess: Api<ExternalSecret> = Api::namespaced(client.clone(), &ns);
        apply(
            &ess,
            json!({
                "apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
                "metadata": {"name": "readback", "labels": {CLASS_LABEL: ns}},
                "spec": {"refreshInterval": "1s", "secretStoreRef": {"name": "fake", "kind": "Provider"},
                         "data": [{"secretKey": "v", "remoteRef": {"key": "generated"}}]},
            }),
        )
        .await;
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
        let pushed = wait_for_key(&secrets, "readback", "v").await;
        assert_eq!(pushed.chars().count(), 20);
        let kept = wait_for_key(&secrets, "push-generated", "password").await;
        assert_eq!(kept, pushed, "the pushed value is kept in the PushSecret's Secret");

        // A restart pushes again (the PushSecret syncs on start): the same value.
        reconciler.process.terminate(Duration::from_secs(20));
        drop(reconciler);
        let _reconciler = Reconciler::start(&ns, &[]).await;
        eventually("the PushSecret synced after the restart", WAIT, || async {
            let ps = pss.get("push").await.ok()?;
            let (status, _, _) = ready_of(&ps.status?.conditions)?;
            (status == "True").then_some(())
        })
        .await;
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(secret_value(&secrets, "readback", "v").await.unwrap(), pushed, "not regenerated by a restart");

        // A spec change is a refresh: a new value is generated and pushed.
        apply(&pss, push("2h")).await;
        let rotated = eventually("a new value pushed", WAIT, || async {
            let now = secret_value(&secrets, "readback", "v").await?;
            (now != pushed).then_some(now)
        })
        .await;
        assert_eq!(secret_value(&secrets, "push-generated", "password").await.unwrap(), rotated);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn upstream_generator_examples_apply_unchanged_and_sync() {
    with_temp_namespace(&[], |client, ns| async move {
        // The example's ClusterGenerator is cluster-scoped, under its own name.
        let _cleanup = ClusterGenerators(vec!["cluster-gen".into()]);
        let _reconciler = Reconciler::start(&ns, &[]).await;
        for file in [
            "generator-password.yaml",
            "generator-password-example.yaml",
            "generator-password-multiple-keys.yaml",
            "generator-password-encoding-examples.yaml",
            "generator-uuid.yaml",
            "generator-uuid-example.yaml",
            "generator-sshkey.yaml",
            "generator-sshkey-rsa.yaml",
            "generator-sshkey-ecdsa.yaml",
            "generator-sshkey-example.yaml",
            "generator-fake.yaml",
            "generator-fake-example.yaml",
            "generator-cluster.yaml",
            "generator-cluster-example.yaml",
        ] {
            for mut doc in upstream_generator_example(file) {
                // Only the test's controller class label is added, so this run's reconciler
                // serves the ExternalSecrets.
                if doc["kind"] == "ExternalSecret" {
                    doc["metadata"]["labels"][CLASS_LABEL] = json!(ns);
                }
                kubectl_apply(&ns, &doc);
            }
        }
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
        let password = wait_for_key(&secrets, "password-secret", "password").await;
        assert_eq!(password.chars().count(), 42);
        assert_eq!(password.chars().filter(char::is_ascii_digit).count(), 5, "{password}");
        assert_eq!(password.chars().filter(|c| "-_$@".contains(*c)).count(), 5, "{password}");
        let cluster = wait_for_key(&secrets, "cluster-secret", "password").await;
        assert_eq!(cluster.chars().count(), 42);
        for key in ["key1", "key2"] {
            assert_eq!(wait_for_key(&secrets, "auth-secrets", key).await.chars().count(), 36);
        }
        let id = wait_for_key(&secrets, "uuid-secret", "uuid").await;
        assert!(uuid_like(&id), "{id}");
        wait_for_value(&secrets, "fake", "foo", "bar", WAIT).await;
        wait_for_value(&secrets, "fake", "baz", "bang", WAIT).await;
        let private = wait_for_key(&secrets, "ssh-key-secret", "privateKey").await;
        let public = wait_for_key(&secrets, "ssh-key-secret", "publicKey").await;
        let key = ssh_key::PrivateKey::from_openssh(&private).unwrap();
        assert_eq!(key.algorithm(), ssh_key::Algorithm::Ed25519);
        let public_key = ssh_key::PublicKey::from_openssh(public.trim_end()).unwrap();
        assert_eq!(public_key.key_data(), key.public_key().key_data());
        assert_eq!(public_key.comment(), "user@example.com");
        let raw = secrets.get("ssh-key-secret").await.unwrap();
        assert_eq!(raw.data.unwrap().len(), 2, "privateKey and publicKey only");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_webhook_warns_of_unserved_generator_kinds_and_refuses_cluster_generators_not_offered() {
    with_temp_namespace(&[], |client, ns| async move {
        let closed = format!("{ns}-elsewhere");
        let _cleanup = ClusterGenerators(vec![closed.clone()]);
        apply(
            &Api::<ClusterGenerator>::all(client.clone()),
            json!({"apiVersion": "generators.external-secrets.io/v1alpha1", "kind": "ClusterGenerator",
                   "metadata": {"name": closed},
                   "spec": {"kind": "Fake", "generator": {"fakeSpec": {"data": {"a": "b"}}},
                            "conditions": [{"namespaces": ["elsewhere"]}]}}),
        )
        .await;
        let pki = Pki::new();
        let ca_file = pki.dir.path().join("ca.pem");
        std::fs::write(&ca_file, &pki.ca).unwrap();
        let webhook = Webhook::start(&pki.issue_server_dir("webhook")).await;
        let review = |kind: &str, resource: &str, version: &str, object: Value| {
            json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
                "uid": "00000000-0000-4000-8000-000000000042",
                "kind": {"group": "external-secrets.io", "version": version, "kind": kind},
                "resource": {"group": "external-secrets.io", "version": version, "resource": resource},
                "operation": "CREATE", "namespace": ns, "name": "x", "object": object}})
        };
        let es = |generator_kind: &str| password_es("x", &ns, "Periodic", generator_kind, "g");
        let answer = webhook.review(
            &ca_file,
            "/validate",
            &review("ExternalSecret", "externalsecrets", "v1", es("GithubAccessToken")),
        );
        // Upstream's kind, not served: admitted with a warning (upstream's manifests apply).
        assert_eq!(answer["response"]["allowed"], true, "{answer}");
        let warnings = answer["response"]["warnings"].to_string();
        assert!(
            warnings.contains("spec.dataFrom[0].sourceRef.generatorRef")
                && warnings.contains("\\\"GithubAccessToken\\\" is not served"),
            "{warnings}"
        );
        let answer =
            webhook.review(&ca_file, "/validate", &review("ExternalSecret", "externalsecrets", "v1", es("Password")));
        assert_eq!(answer["response"]["allowed"], true, "a served kind is admitted: {answer}");
        // The webhook's ClusterGenerator watch: refused from its cache, no API call.
        let to_closed = password_es("x", &ns, "Periodic", "ClusterGenerator", &closed);
        let answer =
            webhook.review(&ca_file, "/validate", &review("ExternalSecret", "externalsecrets", "v1", to_closed));
        assert_eq!(answer["response"]["allowed"], false, "{answer}");
        let message = answer["response"]["status"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(&format!("ClusterGenerator {closed:?} does not allow namespace {ns:?}")), "{message}");
        let ps = json!({
            "apiVersion": "external-secrets.io/v1alpha1", "kind": "PushSecret", "metadata": {"name": "x"},
            "spec": {"secretStoreRefs": [{"name": "s", "kind": "Provider"}],
                     "selector": {"generatorRef": {"kind": "GCRAccessToken", "name": "g"}},
                     "data": [{"match": {"secretKey": "a", "remoteRef": {"remoteKey": "b"}}}]},
        });
        let answer = webhook.review(&ca_file, "/validate", &review("PushSecret", "pushsecrets", "v1alpha1", ps));
        assert_eq!(answer["response"]["allowed"], true, "{answer}");
        let warnings = answer["response"]["warnings"].to_string();
        assert!(warnings.contains("spec.selector.generatorRef") && warnings.contains("GCRAccessToken"), "{warnings}");
    })
    .await;
}
