//! End to end: PushSecrets through the Kubernetes provider (reconciler and provider as
//! processes over mTLS, the local control plane as the remote cluster): the pushed Secret keeps
//! its type, labels and annotations, and the `remoteNamespace` override is refused for every
//! tenant-owned configuration (a namespaced Provider, a ManifestNamespace ClusterProvider) and
//! honoured for an operator-owned one that allows it, whose deletes then go where the push
//! wrote and never to a same-named Secret of the default namespace.

use std::time::Duration;

use base64::Engine;
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use keyward_crds::{ClusterProvider, Provider, PushSecret};
use keyward_e2e::{control_plane, with_temp_namespace};
use keyward_provider_kubernetes::api::Kubernetes;
use kube::api::PostParams;
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::support::*;

const WAIT: Duration = Duration::from_secs(90);
const WRITE: &[&str] = &["get", "list", "watch", "create", "update", "patch", "delete"];

fn push_secret(name: &str, ns: &str, store: serde_json::Value, metadata: serde_json::Value) -> serde_json::Value {
    json!({
        "apiVersion": "external-secrets.io/v1alpha1", "kind": "PushSecret",
        "metadata": {"name": name, "labels": {CLASS_LABEL: ns}},
        "spec": {
            "refreshInterval": "1h",
            "secretStoreRefs": [store],
            "selector": {"secret": {"name": "source"}},
            "data": [{"match": {"secretKey": "password", "remoteRef": {"remoteKey": name}}, "metadata": metadata}],
        },
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn pushes_keep_type_labels_annotations_and_the_override_follows_the_store_kind() {
    // Alone: ClusterProviders, which every reconciler watches.
    let _turn = exclusive().await;
    with_temp_namespace(&[], |_client, remote| async move {
        with_temp_namespace(&[], |_client, elsewhere| async move {
            with_temp_namespace(&[], |client, ns| async move {
                let pki = Pki::new();
                pki.install(&client, &ns).await;
                let provider = ProviderProcess::start("keyward-provider-kubernetes", pki.provider_dir(), None).await;
                let sa = ServiceAccount { metadata: kube::api::ObjectMeta { name: Some("writer".into()), ..Default::default() }, ..Default::default() };
                Api::<ServiceAccount>::namespaced(client.clone(), &ns).create(&PostParams::default(), &sa).await.unwrap();
                grant_secrets(&client, &remote, &ns, "writer", WRITE).await;
                grant_secrets(&client, &elsewhere, &ns, "writer", WRITE).await;

                let ca = std::fs::read(control_plane().await.ca_files().0).unwrap();
                let server = json!({"url": control_plane().await.server_url(),
                                    "caBundle": base64::engine::general_purpose::STANDARD.encode(ca)});
                for (name, allow) in [("remote", false), ("remote-override", true)] {
                    apply(
                        &Api::<Kubernetes>::namespaced(client.clone(), &ns),
                        json!({"apiVersion": "provider.external-secrets.io/v2alpha1", "kind": "Kubernetes",
                               "metadata": {"name": name},
                               "spec": {"server": server, "auth": {"serviceAccount": {"name": "writer"}},
                                        "remoteNamespace": remote, "allowRemoteNamespaceOverride": allow}}),
                    )
                    .await;
                }
                let provider_ref = json!({"apiVersion": "provider.external-secrets.io/v2alpha1", "kind": "Kubernetes", "name": "remote"});
                apply(
                    &Api::<Provider>::namespaced(client.clone(), &ns),
                    json!({"apiVersion": "external-secrets.io/v1", "kind": "Provider",
                           "metadata": {"name": "k8s", "labels": {CLASS_LABEL: ns}},
                           "spec": {"config": {"address": provider.address(), "providerRef": provider_ref}}}),
                )
                .await;
                // A ManifestNamespace ClusterProvider reaches the tenant's own config; a
                // ProviderNamespace one names `ns` as the operator's namespace.
                let cluster_name = format!("{ns}-k8s");
                let operator_name = format!("{ns}-operator");
                let operator_ref = json!({"apiVersion": "provider.external-secrets.io/v2alpha1", "kind": "Kubernetes",
                                          "name": "remote-override", "namespace": ns});
                for (name, scope, pref) in [
                    (&cluster_name, "ManifestNamespace", &provider_ref),
                    (&operator_name, "ProviderNamespace", &operator_ref),
                ] {
                    apply(
                        &Api::<ClusterProvider>::all(client.clone()),
                        json!({"apiVersion": "external-secrets.io/v1", "kind": "ClusterProvider",
                               "metadata": {"name": name, "labels": {CLASS_LABEL: ns}},
                               "spec": {"authenticationScope": scope,
                                        "config": {"address": provider.address(), "providerRef": pref}}}),
                    )
                    .await;
                }
                let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
                apply(
                    &secrets,
                    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "source"},
                           "stringData": {"password": "pushed-value"}}),
                )
                .await;
                let _reconciler = Reconciler::start(&ns, &[]).await;

                let pss: Api<PushSecret> = Api::namespaced(client.clone(), &ns);
                let meta = |spec: serde_json::Value| {
                    json!({"apiVersion": "kubernetes.external-secrets.io/v1alpha1", "kind": "PushSecretMetadata", "spec": spec})
                };
                apply(
                    &pss,
                    push_secret(
                        "typed",
                        &ns,
                        json!({"name": "k8s", "kind": "Provider"}),
                        meta(json!({"labels": {"team": "payments"}, "annotations": {"owner": "keyward"},
                                    "secretType": "example.com/credentials"})),
                    ),
                )
                .await;
                apply(
                    &pss,
                    push_secret("override-provider", &ns, json!({"name": "k8s", "kind": "Provider"}),
                        meta(json!({"remoteNamespace": elsewhere}))),
                )
                .await;
                apply(
                    &pss,
                    push_secret("override-cluster", &ns, json!({"name": cluster_name, "kind": "ClusterProvider"}),
                        meta(json!({"remoteNamespace": elsewhere}))),
                )
                .await;
                // A Secret of the same name as the operator push below already lives in the
                // default remote namespace; it belongs to someone else.
                let remote_secrets: Api<Secret> = Api::namespaced(client.clone(), &remote);
                apply(
                    &remote_secrets,
                    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "override-operator"},
                           "stringData": {"owner": "someone-else"}}),
                )
                .await;
                let mut operator_push = push_secret(
                    "override-operator",
                    &ns,
                    json!({"name": operator_name, "kind": "ClusterProvider"}),
                    meta(json!({"remoteNamespace": elsewhere})),
                );
                operator_push["spec"]["deletionPolicy"] = json!("Delete");
                apply(&pss, operator_push).await;

                let typed = eventually("typed push", WAIT, || async { remote_secrets.get_opt("typed").await.ok()? }).await;
                assert_eq!(value(&typed, "password").as_deref(), Some("pushed-value"));
                assert_eq!(typed.type_.as_deref(), Some("example.com/credentials"));
                assert_eq!(typed.labels().get("team").map(String::as_str), Some("payments"));
                assert_eq!(typed.annotations().get("owner").map(String::as_str), Some("keyward"));

                let elsewhere_secrets: Api<Secret> = Api::namespaced(client.clone(), &elsewhere);
                let pushed = eventually("operator-owned override honoured", WAIT, || async {
                    elsewhere_secrets.get_opt("override-operator").await.ok()?
                })
                .await;
                assert_eq!(value(&pushed, "password").as_deref(), Some("pushed-value"));

                for name in ["override-provider", "override-cluster"] {
                    let message = eventually(&format!("{name}: tenant-owned override refused"), WAIT, || async {
                        let ps = pss.get(name).await.ok()?;
                        let (status, _, message) = ready_of(&ps.status?.conditions)?;
                        (status == "False").then_some(message)
                    })
                    .await;
                    assert!(message.contains("tenant-owned"), "{name}: {message}");
                    assert!(elsewhere_secrets.get_opt(name).await.unwrap().is_none(), "{name}: nothing written");
                    assert!(remote_secrets.get_opt(name).await.unwrap().is_none(), "{name}: nor in the default");
                }

                // Deleting the PushSecret (deletionPolicy Delete) removes its copy where the push
                // wrote, and leaves the same-named Secret of the default namespace alone.
                pss.delete("override-operator", &Default::default()).await.unwrap();
                eventually("pushed copy deleted", WAIT, || async {
                    elsewhere_secrets.get_opt("override-operator").await.ok()?.is_none().then_some(())
                })
                .await;
                eventually("PushSecret gone", WAIT, || async { pss.get_opt("override-operator").await.ok()?.is_none().then_some(()) }).await;
                let kept = remote_secrets.get("override-operator").await.expect("someone else's Secret is untouched");
                assert_eq!(value(&kept, "owner").as_deref(), Some("someone-else"));
                for name in [&cluster_name, &operator_name] {
                    let _ = Api::<ClusterProvider>::all(client.clone()).delete(name, &Default::default()).await;
                }
            })
            .await;
        })
        .await;
    })
    .await;
}
