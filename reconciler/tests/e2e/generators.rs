//! End to end: generators (`generators.external-secrets.io/v1alpha1`) served in the reconciler.
//! A Password's value is stable across a reconciler restart, changes on `force-sync` with
//! refreshPolicy Periodic and not with CreatedOnce; a ClusterGenerator is used only from the
//! namespaces its conditions admit; a PushSecret pushes one generated value until its spec
//! changes; upstream's generator examples (`fixtures/upstream-generators/`, as printed in
//! upstream's docs/snippets) apply unchanged and sync; the webhook refuses kinds Keyward does
//! not serve; GeneratorStates past their deadline are deleted for the kinds Keyward serves and
//! kept, with a condition and a Warning event, for the others.

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::jiff::Timestamp;
use keyward_crds::generators::state::GENERATOR_STATE_FINALIZER;
use keyward_crds::generators::{ClusterGenerator, GeneratorState};
use keyward_crds::{ExternalSecret, Provider, PushSecret};
use keyward_e2e::with_temp_namespace;
use keyward_provider_fake::api::Fake;
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

use crate::support::*;

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
    let _turn = shared().await;
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
    let _turn = shared().await;
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
    let _turn = shared().await;
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
    let _turn = shared().await;
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
    let _turn = shared().await;
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
                "operation": "CREATE", "namespace": ns, "name": "x", "userInfo": {"username": "e2e-test"},
                "object": object}})
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
                     "selector": {"generatorRef": {"kind": "QuayAccessToken", "name": "g"}},
                     "data": [{"match": {"secretKey": "a", "remoteRef": {"remoteKey": "b"}}}]},
        });
        let answer = webhook.review(&ca_file, "/validate", &review("PushSecret", "pushsecrets", "v1alpha1", ps));
        assert_eq!(answer["response"]["allowed"], true, "{answer}");
        let warnings = answer["response"]["warnings"].to_string();
        assert!(warnings.contains("spec.selector.generatorRef") && warnings.contains("QuayAccessToken"), "{warnings}");
    })
    .await;
}

/// A GeneratorState recording what a `kind` generator made, with upstream's finalizer.
fn generator_state(name: &str, kind: &str, deadline: &str) -> Value {
    json!({
        "apiVersion": "generators.external-secrets.io/v1alpha1", "kind": "GeneratorState",
        "metadata": {"name": name, "finalizers": [GENERATOR_STATE_FINALIZER]},
        "spec": {
            "garbageCollectionDeadline": deadline,
            "resource": {"apiVersion": "generators.external-secrets.io/v1alpha1", "kind": kind,
                         "metadata": {"name": "g"}, "spec": {}},
            "state": {"id": "42"},
        },
    })
}

/// The `Ready` condition of a GeneratorState once it is `False`: (reason, message).
async fn state_refusal(states: &Api<GeneratorState>, name: &str, want: &str) -> (String, String) {
    eventually(&format!("GeneratorState {name} reports {want:?}"), WAIT, || async {
        let state = states.get(name).await.ok()?;
        let ready = state.status?.conditions.into_iter().find(|c| c.type_ == "Ready")?;
        let message = ready.message.unwrap_or_default();
        (ready.status == "False" && message.contains(want)).then(|| (ready.reason.unwrap_or_default(), message))
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn generator_states_past_their_deadline_are_collected_only_for_the_kinds_served() {
    let _turn = shared().await;
    with_temp_namespace(&[], |client, ns| async move {
        let states: Api<GeneratorState> = Api::namespaced(client.clone(), &ns);
        // Upstream's snapshot applies unchanged but for a name (it has none). Server-side: a
        // client-side `kubectl apply` drops its empty `resource` and `state` before sending, and
        // the API server then refuses the required fields as missing (upstream's CRD too).
        for mut doc in upstream_generator_example("generatorstate-v1alpha1.yaml") {
            doc["metadata"]["name"] = json!("snapshot");
            let applied = apply(&states, doc).await;
            assert_eq!((applied.spec.resource, applied.spec.state), (None, None));
        }
        apply(&states, generator_state("expired", "Password", "2020-01-01T00:00:00Z")).await;
        apply(&states, generator_state("future", "Password", "2999-01-01T00:00:00Z")).await;
        apply(&states, generator_state("grafana", "Grafana", "2020-01-01T00:00:00Z")).await;
        let mut undated = generator_state("undated", "UUID", "");
        undated["spec"].as_object_mut().unwrap().remove("garbageCollectionDeadline");
        apply(&states, undated).await;
        let _reconciler = Reconciler::start(&ns, &[]).await;

        // A served kind past its deadline: upstream's finalizer removed, the state deleted.
        eventually("the expired Password state deleted", WAIT, || async {
            states.get_opt("expired").await.unwrap().is_none().then_some(())
        })
        .await;
        // Any other kind is kept, and says why.
        let (reason, message) = state_refusal(&states, "grafana", "not served").await;
        assert_eq!(reason, "CleanupNotServed");
        assert!(message.contains("cleanup of generator kind \"Grafana\" is not served by Keyward"), "{message}");
        assert!(message.contains("Revoke what spec.state records by hand, then delete"), "{message}");
        let (reason, message) = state_refusal(&states, "snapshot", "not a generator manifest").await;
        assert_eq!(reason, "CleanupNotServed", "{message}");
        let events = eventually("a Warning event on the Grafana state", WAIT, || async {
            let events = Api::<Event>::namespaced(client.clone(), &ns).list(&ListParams::default()).await.ok()?;
            events
                .items
                .into_iter()
                .find(|e| {
                    e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("grafana")
                        && e.type_.as_deref() == Some("Warning")
                })
                .map(|e| (e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
        })
        .await;
        assert_eq!(events.0, "CleanupNotServed");
        assert!(events.1.contains("\"Grafana\""), "{}", events.1);
        for name in ["future", "grafana", "undated", "snapshot"] {
            assert!(states.get_opt(name).await.unwrap().is_some(), "{name} kept");
        }
        assert!(
            states.get("future").await.unwrap().status.is_none_or(|s| s.conditions.is_empty()),
            "nothing to say about a state waiting for its deadline"
        );

        // A deadline a few seconds ahead is acted on when it comes (the state is not polled).
        let soon = Timestamp::from_second(Timestamp::now().as_second() + 6).unwrap();
        apply(&states, generator_state("soon", "SSHKey", &soon.to_string())).await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(states.get_opt("soon").await.unwrap().is_some(), "not before its deadline");
        eventually("the SSHKey state deleted at its deadline", WAIT, || async {
            states.get_opt("soon").await.unwrap().is_none().then_some(())
        })
        .await;
        assert!(Timestamp::now() >= soon);

        // The operator's way out for a kept state: deleting it waits on upstream's finalizer,
        // which Keyward leaves; removing it by hand (after revoking) lets it go.
        states.delete("grafana", &DeleteParams::default()).await.unwrap();
        state_refusal(&states, "grafana", "its deletion waits on the finalizer").await;
        assert!(states.get_opt("grafana").await.unwrap().is_some());
        let release = json!({"metadata": {"finalizers": null}});
        states.patch("grafana", &PatchParams::default(), &Patch::Merge(&release)).await.unwrap();
        eventually("the Grafana state gone", WAIT, || async {
            states.get_opt("grafana").await.unwrap().is_none().then_some(())
        })
        .await;
        assert!(states.get_opt("future").await.unwrap().is_some(), "the future state is still kept");

        // A served kind's state deleted before its deadline (its owner went, or by hand): upstream's
        // finalizer is removed, as the cleanup it waits for does nothing.
        for name in ["future", "undated"] {
            states.delete(name, &DeleteParams::default()).await.unwrap();
        }
        eventually("the deleted Password and UUID states gone", WAIT, || async {
            let future = states.get_opt("future").await.unwrap();
            let undated = states.get_opt("undated").await.unwrap();
            (future.is_none() && undated.is_none()).then_some(())
        })
        .await;
    })
    .await;
}
