//! End to end: every ExternalSecret, PushSecret, SecretStore, ClusterSecretStore and
//! ClusterExternalSecret of upstream's documentation (release 2.9.0, one JSON line each in
//! `e2e/fixtures/upstream-docs-2.9.0.jsonl.gz`, written by `scripts/check-upstream-manifests.py
//! --fixture`) goes through the API server and the webhook (a server-side dry run: nothing is
//! stored). Each is accepted, or refused for a reason [`REFUSED`] names: one upstream's own CRDs
//! or webhook also give, or a Keyward rule that docs/migrating.md names together with the
//! operator's switch.
//!
//! Only the namespace changes: the manifest's own namespace (and references to it) becomes the
//! test's, so a store naming its own namespace still does. Cluster-scoped manifests get the
//! test's name prefix and label (the webhook is registered for them by that label).

use std::collections::BTreeMap;

use base64::Engine;
use keyward_e2e::{repo_root, with_temp_namespace};
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde_json::{Value, json};

use crate::support::*;

const RUN_LABEL: &str = "keyward.dev/upstream-docs-e2e";

/// Upstream's webhook refuses it too ("either data or dataFrom should be specified").
const NO_DATA: (&str, &str) = ("set at least one entry in spec.data or spec.dataFrom", "upstream's webhook: no data");
/// A PushSecret fragment of a guide: upstream's CRD requires both fields too.
const PUSH_FRAGMENT: (&str, &str) = ("spec.secretStoreRefs: Required value", "upstream's CRD: a fragment");
/// Keyward's tenant rule: a SecretStore may not use the provider's own identity unless the
/// operator lists its namespace (chart value providerIdentityNamespaces, `*` for upstream's way).
const OWN_IDENTITY: (&str, &str) = ("uses the provider's own credentials", "Keyward: provider identity");
/// Upstream's webhook refuses a store naming several providers too.
const SEVERAL: (&str, &str) = ("set exactly one provider", "upstream's webhook: several providers");
/// A `[PLACEHOLDER]` that YAML reads as a list, where upstream's CRD wants a string too (the API
/// server says so where the block is typed, the webhook where it is not).
const GCP_LIST: (&str, &str) = (
    "spec.provider.gcpsm.projectID in body must be of type string|not a GCPSecretManager configuration: invalid type: sequence",
    "upstream's CRD: projectID: [PROJECT_ID] is a list",
);
/// Keyward checks a region's characters: it becomes part of the host names the provider signs
/// requests for; `<region>` is a placeholder.
const REGION: (&str, &str) = ("\"<region>\" is not an AWS region", "Keyward: the region names a host");

/// The documented manifests Keyward refuses, by source file and label ([`label`]), with pieces
/// of the refusal (`|` between alternatives) and why that is right. docs/migrating.md
/// ("Upstream's documentation examples") says the same.
const REFUSED: &[(&str, &str, (&str, &str))] = &[
    ("docs/api/externalsecret.md", "ExternalSecret/example", NO_DATA),
    ("docs/api/externalsecret.md", "ExternalSecret/example#2", NO_DATA),
    ("docs/api/externalsecret.md", "ExternalSecret/example#3", NO_DATA),
    ("docs/api/externalsecret.md", "ExternalSecret/example#4", NO_DATA),
    ("docs/api/externalsecret.md", "ExternalSecret/example#5", NO_DATA),
    ("docs/guides/ai-setup-guide.md", "ClusterSecretStore/aws-secrets-manager", REGION),
    ("docs/guides/ai-setup-guide.md", "SecretStore/aws-secrets-manager", REGION),
    (
        "docs/guides/ai-setup-guide.md",
        "ExternalSecret/<secret-name>",
        ("a lowercase RFC 1123 subdomain", "the API server: a placeholder name"),
    ),
    ("docs/guides/pushsecret-datato.md", "SecretStore/aws-store", OWN_IDENTITY),
    (
        "docs/guides/security-best-practices.md",
        "ClusterSecretStore/fake",
        ("spec.provider: Required value", "upstream's CRD: no provider"),
    ),
    ("docs/provider/aws-access.md", "SecretStore/store", OWN_IDENTITY),
    ("docs/provider/aws-access.md", "SecretStore/team-b-store", OWN_IDENTITY),
    ("docs/provider/aws-access.md", "SecretStore/team-b-store#3", OWN_IDENTITY),
    ("docs/provider/aws-access.md", "SecretStore/team-b-store#4", OWN_IDENTITY),
    ("docs/provider/aws-access.md", "SecretStore/team-b-store#5", OWN_IDENTITY),
    ("docs/provider/aws-access.md", "SecretStore/team-b-store#6", OWN_IDENTITY),
    ("docs/provider/aws-access.md", "SecretStore/team-b-store#7", OWN_IDENTITY),
    ("docs/provider/beyondtrustworkloadcredentials.md", "ExternalSecret/my-secret", NO_DATA),
    ("docs/provider/google-secrets-manager.md", "PushSecret/pushsecret-example#2", PUSH_FRAGMENT),
    ("docs/provider/google-secrets-manager.md", "PushSecret/pushsecret-example#3", PUSH_FRAGMENT),
    ("docs/provider/google-secrets-manager.md", "SecretStore/gcp-secret-store", OWN_IDENTITY),
    ("docs/provider/google-secrets-manager.md", "SecretStore/gcp-secret-store#3", OWN_IDENTITY),
    ("docs/provider/google-secrets-manager.md", "SecretStore/gcp-secret-store#4", OWN_IDENTITY),
    ("docs/provider/hashicorp-vault.md", "SecretStore/vault-backend#2", OWN_IDENTITY),
    ("docs/provider/hashicorp-vault.md", "SecretStore/vault-backend#3", OWN_IDENTITY),
    ("docs/provider/hashicorp-vault.md", "SecretStore/vault-backend#4", OWN_IDENTITY),
    ("docs/provider/kubernetes.md", "PushSecret/example#3", PUSH_FRAGMENT),
    ("docs/provider/kubernetes.md", "PushSecret/example#4", PUSH_FRAGMENT),
    (
        "docs/provider/webhook.md",
        "ClusterSecretStore/statervault",
        ("Unsupported value: \"Secret or ConfigMap\"", "upstream's CRD: a placeholder caProvider.type"),
    ),
    (
        "docs/provider/webhook.md",
        "SecretStore/webhook-backend#3",
        ("NTLM authentication is not supported", "Keyward: no NTLM, and a Secret in another namespace"),
    ),
    ("docs/snippets/aws-sm-store-secretsmanager-config.yaml", "SecretStore/aws-secretsmanager", OWN_IDENTITY),
    ("docs/snippets/azkv-secret-store-mi.yaml", "SecretStore/azure-store", OWN_IDENTITY),
    ("docs/snippets/azkv-workload-identity-mounted.yaml", "SecretStore/azure-store", OWN_IDENTITY),
    ("docs/snippets/certsans-template-v2-external-secret.yaml", "ExternalSecret/cert-sans-example", NO_DATA),
    ("docs/snippets/controller-class-store.yaml", "SecretStore/controller-custom-example", OWN_IDENTITY),
    (
        "docs/snippets/full-cluster-external-secret.yaml",
        "ClusterExternalSecret/hello-world",
        (
            "spec.externalSecretSpec.dataFrom[0]: set exactly one of extract, find or sourceRef",
            "Keyward: an invalid embedded spec (v1beta1's dataFrom key) is denied; upstream's webhook refuses each ExternalSecret",
        ),
    ),
    ("docs/snippets/full-cluster-secret-store.yaml", "ClusterSecretStore/example", SEVERAL),
    (
        "docs/snippets/full-external-secret.yaml",
        "ExternalSecret/hello-world",
        ("invalid type: integer `1234`, expected a string", "an annotation's value is a number: never a valid object"),
    ),
    ("docs/snippets/full-secret-store.yaml", "SecretStore/example", SEVERAL),
    ("docs/snippets/gcpsm-sa-secret-store.yaml", "SecretStore/demo-store", GCP_LIST),
    ("docs/snippets/gcpsm-wif-core-controller-secret-store.yaml", "SecretStore/demo-store", GCP_LIST),
    ("docs/snippets/gcpsm-wif-iam-secret-store.yaml", "SecretStore/demo-store", GCP_LIST),
    ("docs/snippets/gcpsm-wif-non-native-iam-secret-store.yaml", "SecretStore/demo-store", GCP_LIST),
    (
        "docs/snippets/gcpsm-wif-sa-secret-store-with-explicit-name-and-location.yaml",
        "SecretStore/demo-store",
        GCP_LIST,
    ),
    ("docs/snippets/jwk-template-v2-external-secret.yaml", "ExternalSecret/template", NO_DATA),
    (
        "docs/snippets/pkcs12-template-v1-external-secret.yaml",
        "ExternalSecret/template",
        ("engineVersion: Unsupported value: \"v1\"", "upstream's CRD: engineVersion v1 was removed"),
    ),
    ("docs/snippets/vault-iam-store-controller-pod-identity.yaml", "SecretStore/vault-backend-aws-iam", OWN_IDENTITY),
    (
        "docs/snippets/vault-mtls-store.yaml",
        "SecretStore/vault-backend",
        ("spec.provider.vault.auth in body must be of type object", "upstream's CRD: auth: \"...\" is a placeholder"),
    ),
    (
        "docs/snippets/volcengine-external-secrets.yaml",
        "ExternalSecret/my-app-secret",
        ("duplicate secretKey \"password\"", "upstream's webhook: duplicate secretKey with deletionPolicy Retain"),
    ),
];

/// Whether `message` holds one of `want`'s `|`-separated pieces.
fn names_reason(message: &str, want: &str) -> bool {
    want.split('|').any(|piece| message.contains(piece))
}

/// The fixture: (source file, manifest).
fn upstream_docs() -> Vec<(String, Value)> {
    let path = repo_root().join("e2e/fixtures/upstream-docs-2.9.0.jsonl.gz");
    let out = std::process::Command::new("gzip").arg("-dc").arg(&path).output().unwrap();
    assert!(out.status.success(), "gzip -dc {}", path.display());
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let mut line: Value = serde_json::from_str(l).unwrap();
            (line["source"].as_str().unwrap().to_string(), line["doc"].take())
        })
        .collect()
}

/// Every string field `namespace` equal to `from` becomes `to`.
fn rename_namespace(v: &mut Value, from: &str, to: &str) {
    match v {
        Value::Object(m) => {
            for (k, child) in m.iter_mut() {
                if k == "namespace" && child.as_str() == Some(from) {
                    *child = json!(to);
                } else {
                    rename_namespace(child, from, to);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|c| rename_namespace(c, from, to)),
        _ => {}
    }
}

fn cluster_scoped(kind: &str) -> bool {
    matches!(kind, "ClusterSecretStore" | "ClusterExternalSecret")
}

/// The manifest as the test applies it in `ns`.
fn adapt(mut doc: Value, ns: &str) -> Value {
    let kind = doc["kind"].as_str().unwrap_or_default().to_string();
    let name = doc["metadata"]["name"].as_str().unwrap_or("unnamed").to_string();
    let own = doc["metadata"]["namespace"].as_str().unwrap_or("default").to_string();
    if let Some(m) = doc["metadata"].as_object_mut() {
        m.remove("namespace");
    }
    if cluster_scoped(&kind) {
        doc["metadata"]["name"] = json!(format!("{ns}-{name}"));
        doc["metadata"]["labels"][RUN_LABEL] = json!(ns);
    } else {
        rename_namespace(&mut doc["spec"], &own, ns);
        doc["metadata"]["namespace"] = json!(ns);
    }
    doc
}

/// Registers the validating and mutating webhooks for the five kinds: the namespaced ones in
/// `ns`, the cluster-scoped ones labelled for the run.
async fn start_webhook(client: &kube::Client, pki: &Pki, ns: &str, args: &[&str]) -> Webhook {
    let mut webhook = Webhook::start_with(&pki.issue_server_dir("webhook"), args).await;
    let rule = |version: &str, resources: &[&str]| {
        json!({"apiGroups": ["external-secrets.io"], "apiVersions": [version], "operations": ["CREATE", "UPDATE"],
               "resources": resources})
    };
    let namespaced = json!([rule("v1", &["externalsecrets", "secretstores"]), rule("v1alpha1", &["pushsecrets"])]);
    let cluster = json!([rule("v1", &["clustersecretstores", "clusterexternalsecrets"])]);
    let ca = base64::engine::general_purpose::STANDARD.encode(&pki.ca);
    for (kind, path) in [("ValidatingWebhookConfiguration", "/validate"), ("MutatingWebhookConfiguration", "/mutate")] {
        let hook = |name: &str, rules: &Value, selector: (&str, Value)| {
            let mut h = json!({
                "name": format!("{name}.upstream-docs.keyward.dev"),
                "clientConfig": {"url": format!("{}{path}", webhook.url()), "caBundle": ca},
                "rules": rules, "failurePolicy": "Fail", "sideEffects": "None",
                "admissionReviewVersions": ["v1"], "timeoutSeconds": 10,
            });
            h[selector.0] = selector.1;
            h
        };
        let config = json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
            "metadata": {"name": format!("keyward-upstream-docs-e2e-{ns}")},
            "webhooks": [
                hook("namespaced", &namespaced,
                     ("namespaceSelector", json!({"matchLabels": {"kubernetes.io/metadata.name": ns}}))),
                hook("cluster", &cluster, ("objectSelector", json!({"matchLabels": {RUN_LABEL: ns}}))),
            ],
        });
        webhook.register(client, config).await;
    }
    webhook
}

/// Dry-run creates `doc`; the refusal's message when refused.
async fn dry_run(client: &kube::Client, ns: &str, doc: &Value) -> Result<(), String> {
    let api_version = doc["apiVersion"].as_str().unwrap_or_default();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let kind = doc["kind"].as_str().unwrap_or_default();
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind));
    let api: Api<DynamicObject> = if cluster_scoped(kind) {
        Api::all_with(client.clone(), &resource)
    } else {
        Api::namespaced_with(client.clone(), ns, &resource)
    };
    let obj: DynamicObject = serde_json::from_value(doc.clone()).map_err(|e| format!("not an object: {e}"))?;
    let params = PostParams { dry_run: true, ..Default::default() };
    api.create(&params, &obj).await.map(|_| ()).map_err(|e| match e {
        kube::Error::Api(s) => s.message,
        other => other.to_string(),
    })
}

/// `Kind/name`, and `#n` for the n-th manifest of that kind and name in one source file (a
/// guide often shows several versions of one store).
fn label(doc: &Value, seen: &mut BTreeMap<(String, String), usize>, source: &str) -> String {
    let kind = doc["kind"].as_str().unwrap_or_default();
    let name = doc["metadata"]["name"].as_str().unwrap_or("unnamed");
    let label = format!("{kind}/{name}");
    let n = seen.entry((source.to_string(), label.clone())).or_default();
    *n += 1;
    if *n == 1 { label } else { format!("{label}#{n}") }
}

/// Applies every documented manifest; returns the refusals by (source, label).
async fn refusals(client: &kube::Client, ns: &str) -> BTreeMap<(String, String), String> {
    let mut refused = BTreeMap::new();
    let mut seen = BTreeMap::new();
    let docs = upstream_docs();
    assert!(docs.len() > 400, "the fixture holds upstream's documented manifests: {}", docs.len());
    for (source, doc) in docs {
        let name = label(&doc, &mut seen, &source);
        let adapted = adapt(doc, ns);
        // The webhook answers from watches: a refusal is retried once, a moment later.
        let mut result = dry_run(client, ns, &adapted).await;
        if result.is_err() {
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            result = dry_run(client, ns, &adapted).await;
        }
        if let Err(message) = result {
            refused.insert((source, name), message);
        }
    }
    refused
}

#[tokio::test(flavor = "multi_thread")]
async fn upstream_documentation_examples_pass_admission_or_are_refused_for_a_named_reason() {
    let _turn = shared().await;
    with_temp_namespace(&[], |client, ns| async move {
        let pki = Pki::new();
        let _webhook = start_webhook(&client, &pki, &ns, &[]).await;
        let refused = refusals(&client, &ns).await;
        for ((source, name), message) in &refused {
            eprintln!("REFUSED {source} {name}: {message}");
        }
        let unexplained: Vec<String> = refused
            .iter()
            .filter(|((source, name), message)| {
                !REFUSED.iter().any(|(s, n, (want, _))| s == source && n == name && names_reason(message, want))
            })
            .map(|((source, name), message)| format!("{source} {name}: {message}"))
            .collect();
        assert!(unexplained.is_empty(), "refused without a reason this test names:\n{}", unexplained.join("\n"));
        let accepted: Vec<_> =
            REFUSED.iter().filter(|(s, n, _)| !refused.contains_key(&(s.to_string(), n.to_string()))).collect();
        assert!(accepted.is_empty(), "named as refused, but accepted: {accepted:?}");
    })
    .await;
}
