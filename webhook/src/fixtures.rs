//! Sample caches and reviews shared by the randomized tests, the fuzz target and the
//! benchmark. Not used by the server itself.

use serde_json::{Value, json};

use crate::cache::{Caches, Labels};

/// Name of the sample ClusterProvider whose conditions combine a selector, names and regexes.
pub const SHARED: &str = "shared";

/// A ClusterProvider spec with one condition of each sort: `env=prod`, the names `special`
/// and `billing`, and names matching `^ops-` or `-tools$`.
pub fn shared_cluster_provider() -> Value {
    json!({
        "config": {
            "address": "keyward-provider-kubernetes.keyward.svc:8443",
            "providerRef": {"apiVersion": "provider.external-secrets.io/v2alpha1", "kind": "Kubernetes",
                            "name": "remote", "namespace": "creds"}
        },
        "conditions": [
            {"namespaceSelector": {"matchLabels": {"env": "prod"},
                                   "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["sandbox"]}]}},
            {"namespaces": ["special", "billing"]},
            {"namespaceRegexes": ["^ops-", "-tools$"]}
        ]
    })
}

/// Caches with namespaces `team-a` (env=prod), `team-b` (env=dev), `special`, the ClusterProvider
/// [`SHARED`], and a Provider `local` in `team-b`; marked synced.
pub fn sample_caches() -> Caches {
    let caches = Caches::new();
    {
        let mut s = caches.write();
        let labels =
            |pairs: &[(&str, &str)]| -> Labels { pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect() };
        s.namespaces.insert("team-a".into(), labels(&[("env", "prod")]));
        s.namespaces.insert("team-b".into(), labels(&[("env", "dev")]));
        s.namespaces.insert("special".into(), labels(&[]));
        if let Ok(spec) = serde_json::from_value(shared_cluster_provider()) {
            s.cluster_providers.insert(SHARED.into(), Ok(spec));
        }
        s.add_provider("team-b", "local");
    }
    caches.mark_all_synced();
    caches
}

/// An AdmissionReview body.
pub fn review(
    group: &str,
    version: &str,
    kind: &str,
    operation: &str,
    namespace: Option<&str>,
    object: Value,
) -> Vec<u8> {
    let mut request = json!({
        "uid": "7d0c3b4e-0000-4000-8000-000000000001",
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": format!("{}s", kind.to_lowercase())},
        "operation": operation,
        "userInfo": {"username": "kubernetes-admin", "groups": ["kubeadm:cluster-admins", "system:authenticated"]},
        "name": object.pointer("/metadata/name").cloned().unwrap_or(json!("")),
        "object": object,
    });
    if let Some(ns) = namespace {
        request["namespace"] = json!(ns);
    }
    serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}))
        .unwrap_or_default()
}

/// An ExternalSecret in `namespace` that uses the ClusterProvider [`SHARED`].
pub fn external_secret_review(namespace: &str) -> Vec<u8> {
    review(
        "external-secrets.io",
        "v1",
        "ExternalSecret",
        "CREATE",
        Some(namespace),
        json!({
            "apiVersion": "external-secrets.io/v1",
            "kind": "ExternalSecret",
            "metadata": {"name": "db", "namespace": namespace},
            "spec": {
                "secretStoreRef": {"name": SHARED, "kind": "ClusterProvider"},
                "refreshInterval": "1h",
                "target": {"name": "db", "creationPolicy": "Owner"},
                "data": [
                    {"secretKey": "username", "remoteRef": {"key": "db", "property": "username"}},
                    {"secretKey": "password", "remoteRef": {"key": "db", "property": "password"}}
                ],
                "dataFrom": [{"find": {"name": {"regexp": "^db-"}}, "rewrite": [{"regexp": {"source": "^db-", "target": ""}}]}]
            }
        }),
    )
}

/// One valid review of every Keyward kind: the seed corpus of the fuzz target and the
/// randomized tests.
pub fn sample_reviews() -> Vec<Vec<u8>> {
    vec![
        external_secret_review("team-a"),
        external_secret_review("team-b"),
        review(
            "external-secrets.io",
            "v1alpha1",
            "PushSecret",
            "CREATE",
            Some("team-b"),
            json!({"metadata": {"name": "push"}, "spec": {
                "secretStoreRefs": [{"name": SHARED, "kind": "ClusterProvider"}, {"name": "local", "kind": "Provider"}, {"labelSelector": {"matchLabels": {"a": "b"}}}],
                "selector": {"secret": {"name": "source"}},
                "data": [{"match": {"secretKey": "k", "remoteRef": {"remoteKey": "r", "property": "p"}}, "metadata": {"labels": {}}}]
            }}),
        ),
        review(
            "external-secrets.io",
            "v1",
            "Provider",
            "UPDATE",
            Some("team-b"),
            json!({"metadata": {"name": "local"}, "spec": {"config": {"address": "p.keyward.svc:8443",
                   "providerRef": {"apiVersion": "provider.external-secrets.io/v2alpha1", "kind": "Fake", "name": "f"}}}}),
        ),
        review(
            "external-secrets.io",
            "v1",
            "ClusterProvider",
            "CREATE",
            None,
            json!({"metadata": {"name": SHARED}, "spec": shared_cluster_provider()}),
        ),
        review(
            "provider.external-secrets.io",
            "v2alpha1",
            "Kubernetes",
            "CREATE",
            Some("creds"),
            json!({"metadata": {"name": "remote"}, "spec": {"server": {"url": "https://kubernetes.default.svc"},
                   "auth": {"serviceAccount": {"name": "reader"}}, "remoteNamespace": "default"}}),
        ),
        review(
            "provider.external-secrets.io",
            "v2alpha1",
            "Fake",
            "CREATE",
            Some("creds"),
            json!({"metadata": {"name": "f"}, "spec": {"data": [{"key": "a", "value": "1", "version": "v1"}]}}),
        ),
    ]
}
