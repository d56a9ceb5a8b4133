//! The escape matrix: a namespace owner attacks a running Keyward — the real kube-apiserver and
//! etcd, the webhook, the reconciler and the Kubernetes provider as processes over mTLS — to get
//! another namespace's secret, to write or delete outside its namespace, or to run something of
//! its own. Run twice: with the webhook registered, and without it (runtime enforcement alone,
//! as for objects that existed before the webhook or slipped past it).
//!
//! The invariant is black-box: the victim's value never appears in the attacker's namespace
//! (Secrets, statuses, events), nothing outside the attacker's namespace is written or deleted,
//! and nothing the attacker wrote runs anywhere. A control ExternalSecret that reads the
//! attacker's own remote Secret must sync, so a system that does nothing does not pass. The
//! invariant is checked before the refusal messages, so against a Keyward without the boundary
//! the test fails on the escape itself.
//!
//! See docs/security.md for the classes.

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use k8s_openapi::api::events::v1::Event;
use keyward_crds::{ClusterProvider, ExternalSecret, Provider, PushSecret};
use keyward_e2e::hostile::FloodingServer;
use keyward_e2e::{control_plane, kubectl, with_temp_namespace};
use keyward_provider_kubernetes::api::Kubernetes;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};

use crate::support::*;

const WAIT: Duration = Duration::from_secs(120);
const RUN_LABEL: &str = "keyward.dev/escape-e2e";
const VICTIM_VALUE: &str = "victim-crown-jewel-9f3c";
const ATTACKER_VALUE: &str = "attacker-own-value-51ad";
const WRITE: &[&str] = &["get", "list", "watch", "create", "update", "patch", "delete"];
const READ: &[&str] = &["get", "list", "watch"];

/// The ExternalSecrets of the attack, with the refusal each must end in (without the webhook).
const ATTACKS: [(&str, &str); 6] = [
    ("es-foreign-sa", "may only name objects of its own namespace"),
    ("es-foreign-token", "may only name objects of its own namespace"),
    ("es-foreign-kubeconfig", "may only name objects of its own namespace"),
    ("es-exec-kubeconfig", "users[\"u\"].exec"),
    ("es-file-kubeconfig", "users[\"u\"].client-certificate"),
    // The reconciler reads a Provider's configuration in the Provider's namespace only.
    ("es-foreign-config", "Kubernetes attacker-ns/victim-own not found"),
];

/// Deletes the run's ClusterProviders, also when the test fails.
struct ClusterProvidersOfRun(String);

impl Drop for ClusterProvidersOfRun {
    fn drop(&mut self) {
        let selector = format!("{RUN_LABEL}={}", self.0);
        let _ = kubectl().args(["delete", "clusterproviders", "-l", &selector, "--ignore-not-found"]).output();
    }
}

/// Applies as the attacker would; the webhook may refuse it.
async fn try_apply<K>(api: &Api<K>, body: Value) -> Result<K, String>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let name = body["metadata"]["name"].as_str().unwrap().to_string();
    api.patch(&name, &PatchParams::apply("attacker").force(), &Patch::Apply(body)).await.map_err(|e| e.to_string())
}

fn kubernetes(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "provider.external-secrets.io/v2alpha1", "kind": "Kubernetes", "metadata": {"name": name}, "spec": spec})
}

fn kubeconfig(server: &str, ca_pem: &str, user: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts:\n- name: c\n  context: {{cluster: k, user: u}}\n\
         clusters:\n- name: k\n  cluster:\n    server: {server}\n    certificate-authority-data: {}\n\
         users:\n- name: u\n  user:\n{user}",
        BASE64.encode(ca_pem)
    )
}

fn string_secret(name: &str, key: &str, value: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "stringData": {key: value}})
}

fn external_secret(name: &str, ns: &str, store: Value, key: &str) -> Value {
    json!({
        "apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
        "metadata": {"name": name, "labels": {CLASS_LABEL: ns}},
        "spec": {"refreshInterval": "1s", "secretStoreRef": store,
                 "data": [{"secretKey": "stolen", "remoteRef": {"key": key, "property": "token"}}]},
    })
}

fn push_secret(name: &str, ns: &str, store: &str, remote_key: &str, remote_ns: &str, deletion: &str) -> Value {
    json!({
        "apiVersion": "external-secrets.io/v1alpha1", "kind": "PushSecret",
        "metadata": {"name": name, "labels": {CLASS_LABEL: ns}},
        "spec": {
            "refreshInterval": "1h", "deletionPolicy": deletion,
            "secretStoreRefs": [{"name": store, "kind": "ClusterProvider"}],
            "selector": {"secret": {"name": "loot"}},
            "data": [{"match": {"secretKey": "token", "remoteRef": {"remoteKey": remote_key}},
                      "metadata": {"apiVersion": "kubernetes.external-secrets.io/v1alpha1", "kind": "PushSecretMetadata",
                                   "spec": {"remoteNamespace": remote_ns}}}],
        },
    })
}

/// A token of ServiceAccount `ns/sa`.
async fn token_for(client: &Client, ns: &str, sa: &str) -> String {
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    let meta = kube::api::ObjectMeta { name: Some(sa.into()), ..Default::default() };
    sas.create(&PostParams::default(), &ServiceAccount { metadata: meta, ..Default::default() }).await.unwrap();
    let request = TokenRequest {
        spec: Some(TokenRequestSpec { expiration_seconds: Some(3600), ..Default::default() }),
        ..Default::default()
    };
    let issued = sas.create_token_request(sa, &PostParams::default(), &request).await.unwrap();
    issued.status.and_then(|s| s.token).unwrap()
}

/// Every Secret of a namespace: name → resourceVersion.
async fn snapshot(client: &Client, ns: &str) -> BTreeMap<String, String> {
    let list = Api::<Secret>::namespaced(client.clone(), ns).list(&ListParams::default()).await.unwrap();
    list.items.into_iter().map(|s| (s.name_any(), s.resource_version().unwrap_or_default())).collect()
}

/// Everything the attacker can read back in its namespace, as text: Secret data (decoded),
/// ExternalSecret and PushSecret statuses, events.
async fn attacker_view(client: &Client, ns: &str) -> String {
    let mut out = String::new();
    for s in Api::<Secret>::namespaced(client.clone(), ns).list(&ListParams::default()).await.unwrap() {
        let name = s.name_any();
        for (k, v) in s.data.unwrap_or_default() {
            out.push_str(&format!("Secret {name}[{k}]={}\n", String::from_utf8_lossy(&v.0)));
        }
    }
    let ess = Api::<ExternalSecret>::namespaced(client.clone(), ns).list(&ListParams::default()).await.unwrap();
    out.push_str(&serde_json::to_string(&ess.items).unwrap());
    let pss = Api::<PushSecret>::namespaced(client.clone(), ns).list(&ListParams::default()).await.unwrap();
    out.push_str(&serde_json::to_string(&pss.items).unwrap());
    let events = Api::<Event>::namespaced(client.clone(), ns).list(&ListParams::default()).await.unwrap();
    out.push_str(&serde_json::to_string(&events.items).unwrap());
    out
}

/// Registers the webhook for the attacker's namespace (by label) and the run's ClusterProviders.
async fn start_webhook(client: &Client, pki: &Pki, run: &str) -> Webhook {
    let mut webhook = Webhook::start(&pki.issue_server_dir("webhook")).await;
    let rule = |group: &str, version: &str, resources: &[&str]| json!({"apiGroups": [group], "apiVersions": [version], "operations": ["CREATE", "UPDATE"], "resources": resources});
    let namespaced = json!([
        rule("external-secrets.io", "v1", &["externalsecrets", "providers"]),
        rule("external-secrets.io", "v1alpha1", &["pushsecrets"]),
        rule("provider.external-secrets.io", "v2alpha1", &["kubernetes", "fakes"]),
    ]);
    let cluster = json!([rule("external-secrets.io", "v1", &["clusterproviders"])]);
    let selector = json!({"matchLabels": {RUN_LABEL: run}});
    for (kind, path) in [("ValidatingWebhookConfiguration", "/validate"), ("MutatingWebhookConfiguration", "/mutate")] {
        let hook = |name: &str, rules: &Value, namespaced: bool| {
            let mut h = json!({
                "name": format!("{name}.escape.keyward.dev"),
                "clientConfig": {"url": format!("{}{path}", webhook.url()), "caBundle": BASE64.encode(&pki.ca)},
                "rules": rules, "failurePolicy": "Fail", "sideEffects": "None",
                "admissionReviewVersions": ["v1"], "timeoutSeconds": 10,
            });
            h[if namespaced { "namespaceSelector" } else { "objectSelector" }] = selector.clone();
            h
        };
        let config = json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
            "metadata": {"name": format!("keyward-escape-e2e-{run}")},
            "webhooks": [hook("namespaced", &namespaced, true), hook("cluster", &cluster, false)],
        });
        webhook.register(client, config).await;
    }
    webhook
}

/// What the run sets up outside the attacker's reach.
struct Stage {
    victim: String,
    operator: String,
    attacker: String,
    run: String,
    address: String,
    server: Value,
}

impl Stage {
    fn cluster_provider(&self, name: &str, scope: &str, config: &str, config_ns: Option<&str>) -> Value {
        let mut provider_ref =
            json!({"apiVersion": "provider.external-secrets.io/v2alpha1", "kind": "Kubernetes", "name": config});
        if let Some(ns) = config_ns {
            provider_ref["namespace"] = json!(ns);
        }
        json!({
            "apiVersion": "external-secrets.io/v1", "kind": "ClusterProvider",
            "metadata": {"name": format!("{name}-{}", self.run), "labels": {CLASS_LABEL: self.attacker, RUN_LABEL: self.run}},
            "spec": {"authenticationScope": scope, "config": {"address": self.address, "providerRef": provider_ref},
                     "conditions": [{"namespaces": [self.attacker]}]},
        })
    }
}

async fn escape_matrix(with_webhook: bool) {
    let run = format!("{:08x}", rand::random::<u32>());
    let attacker_labels = [(RUN_LABEL.to_string(), run.clone())];
    with_temp_namespace(&[], |_, victim| async move {
        with_temp_namespace(&[], |_, operator| async move {
            let labels: Vec<(&str, &str)> = attacker_labels.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            with_temp_namespace(&labels, |client, attacker| async move {
                let _cleanup = ClusterProvidersOfRun(run.clone());
                attack(
                    client,
                    Stage { victim, operator, attacker, run, address: String::new(), server: Value::Null },
                    with_webhook,
                )
                .await;
            })
            .await
        })
        .await
    })
    .await;
}

async fn attack(client: Client, mut stage: Stage, with_webhook: bool) {
    let cp = control_plane().await;
    let (victim, operator, attacker) = (stage.victim.clone(), stage.operator.clone(), stage.attacker.clone());
    let secrets = |ns: &str| Api::<Secret>::namespaced(client.clone(), ns);
    let pki = Pki::new();
    // The provider is reached at 127.0.0.1, so its client TLS Secret is looked up in the auth
    // namespace: the attacker's for its own stores, the operator's for ProviderNamespace ones.
    pki.install(&client, &attacker).await;
    pki.install(&client, &operator).await;
    let mut provider = ProviderProcess::start("keyward-provider-kubernetes", pki.provider_dir(), None).await;
    stage.address = provider.address();
    let ca_pem = std::fs::read_to_string(cp.ca_files().0).unwrap();
    stage.server = json!({"url": cp.server_url(), "caBundle": BASE64.encode(&ca_pem)});
    let _webhook = if with_webhook { Some(start_webhook(&client, &pki, &stage.run).await) } else { None };

    // The victim: a Secret worth stealing, and credentials that can read it.
    apply(&secrets(&victim), string_secret("crown-jewels", "token", VICTIM_VALUE)).await;
    let victim_token = token_for(&client, &victim, "victim-reader").await;
    grant_secrets(&client, &victim, &victim, "victim-reader", READ).await;
    apply(&secrets(&victim), string_secret("victim-token", "token", &victim_token)).await;
    let victim_kubeconfig = kubeconfig(&cp.server_url(), &ca_pem, &format!("    token: {victim_token}\n"));
    apply(&secrets(&victim), string_secret("victim-kubeconfig", "kubeconfig", &victim_kubeconfig)).await;
    // The victim's own store configuration, which can read its crown jewels.
    let victim_spec = json!({"server": stage.server, "auth": {"serviceAccount": {"name": "victim-reader"}},
                             "remoteNamespace": victim});
    apply(&Api::<Kubernetes>::namespaced(client.clone(), &victim), kubernetes("victim-own", victim_spec)).await;

    // The operator: configs in its own namespace whose credentials reach further (into the
    // victim's namespace, for its own reasons), offered to the attacker through ProviderNamespace
    // ClusterProviders; and ManifestNamespace ClusterProviders that let the attacker bring its own.
    token_for(&client, &operator, "operator-writer").await;
    for ns in [&operator, &victim, &attacker] {
        grant_secrets(&client, ns, &operator, "operator-writer", WRITE).await;
    }
    let configs = Api::<Kubernetes>::namespaced(client.clone(), &operator);
    for (name, allow) in [("shared", false), ("shared-override", true)] {
        let spec = json!({"server": stage.server, "auth": {"serviceAccount": {"name": "operator-writer"}},
                          "remoteNamespace": operator, "allowRemoteNamespaceOverride": allow});
        apply(&configs, kubernetes(name, spec)).await;
    }
    apply(&secrets(&operator), string_secret("operator-shared", "token", "the operator's own")).await;
    let cluster_providers = Api::<ClusterProvider>::all(client.clone());
    for body in [
        stage.cluster_provider("pn", "ProviderNamespace", "shared", Some(&operator)),
        stage.cluster_provider("pn-override", "ProviderNamespace", "shared-override", Some(&operator)),
        stage.cluster_provider("mn-sa", "ManifestNamespace", "attack-sa", None),
        stage.cluster_provider("mn-token", "ManifestNamespace", "attack-token", None),
        stage.cluster_provider("mn-kubeconfig", "ManifestNamespace", "attack-kubeconfig", None),
    ] {
        apply(&cluster_providers, body).await;
    }
    let cp_name = |n: &str| format!("{n}-{}", stage.run);

    // The attacker's legitimate use: its own credentials and remote Secret.
    token_for(&client, &attacker, "attacker-reader").await;
    grant_secrets(&client, &attacker, &attacker, "attacker-reader", READ).await;
    apply(&secrets(&attacker), string_secret("attacker-remote", "token", ATTACKER_VALUE)).await;
    apply(&secrets(&attacker), string_secret("loot", "token", "planted-by-the-attacker")).await;
    let marker_dir = tempfile::tempdir().unwrap();
    let marker = marker_dir.path().join("attacker-code-ran");
    let (admin_crt, admin_key) = (cp.dir().join("pki/admin.crt"), cp.dir().join("pki/admin.key"));
    assert!(admin_crt.exists(), "the control plane's admin certificate is a file on this host");

    let victim_before = snapshot(&client, &victim).await;
    let operator_before = snapshot(&client, &operator).await;
    let _reconciler = Reconciler::start(&attacker, &[]).await;

    // The attack, as the namespace owner writes it. With the webhook, some of it is refused at
    // admission; what gets through is refused at runtime.
    let attacker_configs = Api::<Kubernetes>::namespaced(client.clone(), &attacker);
    // A server of the attacker's own that answers every request with 300 MB, named as the
    // cluster its configuration reads: the shared provider must neither hold the answer nor die.
    let flood_ca = keyward_certs::CertificateAuthority::generate("flood-ca", Duration::from_secs(3600)).unwrap();
    let flood_leaf = flood_ca.issue(&["127.0.0.1"], keyward_certs::Usage::Server, Duration::from_secs(3600)).unwrap();
    let flood = FloodingServer::start(false, Some((&flood_leaf.cert_pem, &flood_leaf.key_pem))).await;
    let flood_server = json!({"url": flood.url, "caBundle": BASE64.encode(flood_ca.cert_pem())});
    let on_victim = |auth: Value| json!({"server": stage.server, "auth": auth, "remoteNamespace": victim});
    let mut denied = BTreeMap::new();
    let attempts = [
        ("attack-sa", on_victim(json!({"serviceAccount": {"name": "victim-reader", "namespace": victim}}))),
        (
            "attack-token",
            on_victim(json!({"token": {"bearerToken": {"name": "victim-token", "key": "token", "namespace": victim}}})),
        ),
        (
            "attack-kubeconfig",
            json!({"authRef": {"name": "victim-kubeconfig", "key": "kubeconfig", "namespace": victim}, "remoteNamespace": victim}),
        ),
        (
            "attack-exec",
            json!({"authRef": {"name": "exec-kubeconfig", "key": "kubeconfig"}, "remoteNamespace": victim}),
        ),
        (
            "attack-files",
            json!({"authRef": {"name": "file-kubeconfig", "key": "kubeconfig"}, "remoteNamespace": victim}),
        ),
        (
            "own",
            json!({"server": stage.server, "auth": {"serviceAccount": {"name": "attacker-reader"}}, "remoteNamespace": attacker}),
        ),
        (
            "attack-flood",
            json!({"server": flood_server, "auth": {"serviceAccount": {"name": "attacker-reader"}}, "remoteNamespace": attacker}),
        ),
    ];
    for (name, spec) in attempts {
        if let Err(e) = try_apply(&attacker_configs, kubernetes(name, spec)).await {
            denied.insert(name, e);
        }
    }
    let exec = format!(
        "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: touch\n      args: [{}]\n",
        marker.display()
    );
    apply(
        &secrets(&attacker),
        string_secret("exec-kubeconfig", "kubeconfig", &kubeconfig(&cp.server_url(), &ca_pem, &exec)),
    )
    .await;
    let files = format!("    client-certificate: {}\n    client-key: {}\n", admin_crt.display(), admin_key.display());
    apply(
        &secrets(&attacker),
        string_secret("file-kubeconfig", "kubeconfig", &kubeconfig(&cp.server_url(), &ca_pem, &files)),
    )
    .await;
    let providers = Api::<Provider>::namespaced(client.clone(), &attacker);
    // A Provider naming the victim's configuration (its providerRef.namespace) is the attacker's
    // way to use the victim's credentials.
    for (name, config, config_ns) in [
        ("p-exec", "attack-exec", None),
        ("p-files", "attack-files", None),
        ("p-own", "own", None),
        ("p-flood", "attack-flood", None),
        ("p-foreign-config", "victim-own", Some(victim.as_str())),
    ] {
        let mut provider_ref =
            json!({"apiVersion": "provider.external-secrets.io/v2alpha1", "kind": "Kubernetes", "name": config});
        if let Some(ns) = config_ns {
            provider_ref["namespace"] = json!(ns);
        }
        let body = json!({"apiVersion": "external-secrets.io/v1", "kind": "Provider",
            "metadata": {"name": name, "labels": {CLASS_LABEL: attacker}},
            "spec": {"config": {"address": stage.address, "providerRef": provider_ref}}});
        match try_apply(&providers, body).await {
            Ok(_) => {}
            Err(e) if config_ns.is_some() => {
                denied.insert("attack-config", e);
            }
            Err(e) => panic!("{name}: {e}"),
        }
    }
    let ess = Api::<ExternalSecret>::namespaced(client.clone(), &attacker);
    let cluster_store = |n: &str| json!({"name": cp_name(n), "kind": "ClusterProvider"});
    let provider_store = |n: &str| json!({"name": n, "kind": "Provider"});
    for (name, store, key) in [
        ("es-foreign-sa", cluster_store("mn-sa"), "crown-jewels"),
        ("es-foreign-token", cluster_store("mn-token"), "crown-jewels"),
        ("es-foreign-kubeconfig", cluster_store("mn-kubeconfig"), "crown-jewels"),
        ("es-exec-kubeconfig", provider_store("p-exec"), "crown-jewels"),
        ("es-file-kubeconfig", provider_store("p-files"), "crown-jewels"),
        ("es-foreign-config", provider_store("p-foreign-config"), "crown-jewels"),
        ("es-oversized", provider_store("p-flood"), "attacker-remote"),
        ("control", provider_store("p-own"), "attacker-remote"),
    ] {
        try_apply(&ess, external_secret(name, &attacker, store, key)).await.unwrap();
    }
    // Pushes: into the victim's namespace through an operator config that does not allow it;
    // into its own namespace through one that does, under the name of an operator Secret.
    let pss = Api::<PushSecret>::namespaced(client.clone(), &attacker);
    try_apply(&pss, push_secret("ps-into-victim", &attacker, &cp_name("pn"), "planted", &victim, "None"))
        .await
        .unwrap();
    try_apply(
        &pss,
        push_secret("ps-own-namespace", &attacker, &cp_name("pn-override"), "operator-shared", &attacker, "Delete"),
    )
    .await
    .unwrap();

    // Settle: the control syncs; every attack has been tried (each has a Ready condition) and
    // retried for a while.
    eventually("control synced", WAIT, || async {
        let s = secrets(&attacker).get_opt("control").await.ok()??;
        (value(&s, "stolen").as_deref() == Some(ATTACKER_VALUE)).then_some(())
    })
    .await;
    for (name, _) in ATTACKS {
        eventually(&format!("{name} tried"), WAIT, || async {
            ready_of(&ess.get(name).await.ok()?.status?.conditions)
        })
        .await;
    }
    for name in ["ps-into-victim", "ps-own-namespace"] {
        eventually(&format!("{name} tried"), WAIT, || async {
            ready_of(&pss.get(name).await.ok()?.status?.conditions)
        })
        .await;
    }
    eventually("the legitimate push landed", WAIT, || async {
        secrets(&attacker).get_opt("operator-shared").await.ok()?.map(|_| ())
    })
    .await;
    // The push is withdrawn: its copy goes, and only its copy.
    pss.delete("ps-own-namespace", &Default::default()).await.unwrap();
    eventually("ps-own-namespace gone", WAIT, || async {
        pss.get_opt("ps-own-namespace").await.ok()?.is_none().then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(5)).await;

    // The invariant.
    let view = attacker_view(&client, &attacker).await;
    assert!(view.contains(ATTACKER_VALUE), "sanity: the attacker's view holds its own value");
    assert!(!view.contains(VICTIM_VALUE), "the victim's value reached the attacker's namespace:\n{view}");
    assert!(!marker.exists(), "a command from the attacker's kubeconfig ran inside the provider");
    assert_eq!(snapshot(&client, &victim).await, victim_before, "Secrets of the victim's namespace changed");
    assert_eq!(snapshot(&client, &operator).await, operator_before, "Secrets of the operator's namespace changed");
    assert!(secrets(&attacker).get_opt("operator-shared").await.unwrap().is_none(), "the withdrawn push's copy stays");

    // Why: each attack was refused with a message that says what to fix.
    if with_webhook {
        for name in ["attack-sa", "attack-token", "attack-kubeconfig"] {
            let e = denied.get(name).unwrap_or_else(|| panic!("{name} was admitted"));
            assert!(e.contains("may only name objects of its own namespace"), "{name}: {e}");
        }
        let e = denied.get("attack-config").expect("the Provider naming the victim's configuration was admitted");
        assert!(e.contains("always uses its own namespace"), "{e}");
    } else {
        assert!(denied.is_empty(), "nothing refused at admission without a webhook: {denied:?}");
    }
    for (name, refusal) in ATTACKS {
        let message = eventually(&format!("{name} refused"), WAIT, || async {
            let (status, _, message) = ready_of(&ess.get(name).await.ok()?.status?.conditions)?;
            (status == "False").then_some(message)
        })
        .await;
        // A configuration refused at admission does not exist: the ExternalSecret says so.
        let refusal =
            if denied.contains_key(name.replace("es-foreign", "attack").as_str()) { "not found" } else { refusal };
        let refusal = refusal.replace("attacker-ns", &attacker);
        assert!(message.contains(&refusal), "{name}: {message}");
        assert!(secrets(&attacker).get_opt(name).await.unwrap().is_none(), "{name}: no target Secret");
    }
    // The oversized answer is refused with the reason (the store's breaker may say it is open
    // between attempts), and the provider that refused it still serves everyone else.
    let message = eventually("es-oversized says why", WAIT, || async {
        let (status, _, message) = ready_of(&ess.get("es-oversized").await.ok()?.status?.conditions)?;
        (status == "False" && message.contains("answered with more than 4 MiB; refusing the response"))
            .then_some(message)
    })
    .await;
    assert!(message.contains("the target cluster's API server"), "{message}");
    assert!(secrets(&attacker).get_opt("es-oversized").await.unwrap().is_none(), "es-oversized: no target Secret");
    assert!(provider.process.is_running(), "the provider died of the flood:\n{}", provider.process.log());
    assert!(flood.sent() > 0, "sanity: the provider did call the flooding server");

    let (status, _, message) = ready_of(&pss.get("ps-into-victim").await.unwrap().status.unwrap().conditions).unwrap();
    assert_eq!(status, "False");
    assert!(message.contains("allowRemoteNamespaceOverride: true"), "{message}");

    // `kubectl delete externalsecrets --all -n <attacker>` deletes ExternalSecrets there, and
    // nothing else: not the ClusterProviders of the cluster, not the other Keyward kinds.
    let provider_count = providers.list(&ListParams::default()).await.unwrap().items.len();
    let out = kubectl().args(["delete", "externalsecrets", "--all", "-n", &attacker, "--wait=false"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("externalsecret.external-secrets.io \"control\" deleted"), "{said}");
    assert!(!said.contains("clusterprovider") && !said.contains("provider.external-secrets.io"), "{said}");
    for name in ["pn", "pn-override", "mn-sa", "mn-token", "mn-kubeconfig"] {
        assert!(cluster_providers.get_opt(&cp_name(name)).await.unwrap().is_some(), "ClusterProvider {name} deleted");
    }
    assert_eq!(providers.list(&ListParams::default()).await.unwrap().items.len(), provider_count, "Providers deleted");
    assert!(attacker_configs.get_opt("own").await.unwrap().is_some(), "provider configuration deleted");
    assert!(pss.get_opt("ps-into-victim").await.unwrap().is_some(), "PushSecret deleted");
    eventually("ExternalSecrets deleted", WAIT, || async {
        ess.list(&ListParams::default()).await.ok()?.items.is_empty().then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn escape_matrix_with_the_webhook() {
    // Alone: ClusterProviders, and a 300 MB flood through the shared provider.
    let _turn = exclusive().await;
    escape_matrix(true).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn escape_matrix_with_runtime_enforcement_alone() {
    // Alone: ClusterProviders, and a 300 MB flood through the shared provider.
    let _turn = exclusive().await;
    escape_matrix(false).await;
}
