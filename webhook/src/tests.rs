//! Unit tests of the review path: decoding, validation against cached state, mutation, and the
//! HTTPS server itself.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use keyward_crds::ClusterProviderSpec;
use serde_json::{Value, json};

use crate::cache::{Caches, Labels, ObjectKey, State, StoreUse, UserKind};
use crate::review::{Decision, Decoded, decode};
use crate::server::{Mode, answer, handle_body};

const ES: (&str, &str, &str) = ("external-secrets.io", "v1", "ExternalSecret");
const PS: (&str, &str, &str) = ("external-secrets.io", "v1alpha1", "PushSecret");
const PROV: (&str, &str, &str) = ("external-secrets.io", "v1", "Provider");
const CPROV: (&str, &str, &str) = ("external-secrets.io", "v1", "ClusterProvider");
const KUBE: (&str, &str, &str) = ("provider.external-secrets.io", "v2alpha1", "Kubernetes");
const FAKE: (&str, &str, &str) = ("provider.external-secrets.io", "v2alpha1", "Fake");
const VAULT: (&str, &str, &str) = ("provider.external-secrets.io", "v2alpha1", "Vault");
const AWS_SM: (&str, &str, &str) = ("provider.external-secrets.io", "v2alpha1", "SecretsManager");
const SS: (&str, &str, &str) = ("external-secrets.io", "v1", "SecretStore");
const CSS: (&str, &str, &str) = ("external-secrets.io", "v1", "ClusterSecretStore");

fn body(gvk: (&str, &str, &str), op: &str, ns: Option<&str>, object: Option<Value>, old: Option<Value>) -> Vec<u8> {
    let mut request = json!({
        "uid": "0000-uid",
        "kind": {"group": gvk.0, "version": gvk.1, "kind": gvk.2},
        "resource": {"group": gvk.0, "version": gvk.1, "resource": format!("{}s", gvk.2.to_lowercase())},
        "operation": op,
        "userInfo": {"username": "alice"},
        "name": object.as_ref().and_then(|o| o.pointer("/metadata/name")).cloned().unwrap_or(json!("")),
    });
    if let Some(ns) = ns {
        request["namespace"] = json!(ns);
    }
    if let Some(o) = object {
        request["object"] = o;
    }
    if let Some(o) = old {
        request["oldObject"] = o;
    }
    serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}))
        .expect("json")
}

fn run(mode: Mode, body: &[u8], caches: &Caches) -> Decision {
    let decoded = decode(body).expect("a review");
    let (uid, decision) = answer(mode, &decoded, caches);
    assert_eq!(uid, "0000-uid");
    decision
}

fn validate(gvk: (&str, &str, &str), op: &str, ns: Option<&str>, object: Value, caches: &Caches) -> Decision {
    run(Mode::Validate, &body(gvk, op, ns, Some(object), None), caches)
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn cluster_provider(conditions: Value) -> ClusterProviderSpec {
    serde_json::from_value(json!({
        "config": {
            "address": "keyward-provider-kubernetes.keyward.svc:8443",
            "providerRef": {"apiVersion": "provider.external-secrets.io/v2alpha1", "kind": "Kubernetes",
                            "name": "remote", "namespace": "creds"}
        },
        "conditions": conditions
    }))
    .expect("spec")
}

/// Namespaces `team-a` (env=prod) and `team-b` (env=dev); ClusterProvider `shared` admits
/// env=prod, the name `special` or names matching `^ops-`; `open` admits everyone; Provider
/// `local` lives in `team-b`.
fn caches() -> Caches {
    let caches = Caches::new();
    {
        let mut s = caches.write();
        seed(&mut s);
    }
    caches.mark_all_synced();
    caches
}

fn seed(s: &mut State) {
    s.namespaces.insert("team-a".into(), labels(&[("env", "prod")]));
    s.namespaces.insert("team-b".into(), labels(&[("env", "dev")]));
    s.namespaces.insert("special".into(), labels(&[]));
    s.cluster_providers.insert(
        "shared".into(),
        Ok(cluster_provider(json!([
            {"namespaceSelector": {"matchLabels": {"env": "prod"}}},
            {"namespaces": ["special"]},
            {"namespaceRegexes": ["^ops-"]}
        ]))),
    );
    s.cluster_providers.insert("open".into(), Ok(cluster_provider(json!([]))));
    s.cluster_secret_stores.insert(
        "vault-prod".into(),
        Ok(serde_json::from_value(json!([
            {"namespaceSelector": {"matchLabels": {"env": "prod"}}},
            {"namespaces": ["special"]}
        ]))
        .expect("conditions")),
    );
    s.add_provider("team-b", "local");
    s.add_provider("team-a", "x");
}

fn external_secret(name: &str, store: Value) -> Value {
    json!({
        "apiVersion": "external-secrets.io/v1",
        "kind": "ExternalSecret",
        "metadata": {"name": name},
        "spec": {
            "secretStoreRef": store,
            "refreshInterval": "1h",
            "target": {"name": name},
            "data": [{"secretKey": "password", "remoteRef": {"key": "db"}}]
        }
    })
}

fn denied_with(d: &Decision, code: u16, needles: &[&str]) {
    assert!(!d.allowed, "expected a denial, got {d:?}");
    assert_eq!(d.code, code, "{d:?}");
    let msg = d.message.as_deref().unwrap_or_default();
    for n in needles {
        assert!(msg.contains(n), "{n:?} not in {msg:?}");
    }
}

#[test]
fn external_secret_in_a_namespace_the_cluster_provider_refuses_is_denied() {
    let c = caches();
    let es = external_secret("db", json!({"name": "shared", "kind": "ClusterProvider"}));
    let d = validate(ES, "CREATE", Some("team-b"), es.clone(), &c);
    denied_with(
        &d,
        403,
        &[
            "ExternalSecret \"db\" is not allowed",
            "spec.secretStoreRef: ClusterProvider \"shared\" does not allow namespace \"team-b\"",
            "ask its owner to admit it, or use a Provider in this namespace",
        ],
    );
    // The denial reveals nothing the requester may not read: not the other namespaces the
    // conditions name, not the labels or patterns they select by, not its own labels.
    let msg = d.message.as_deref().unwrap_or_default();
    for secret in ["special", "env=prod", "env=dev", "^ops-", "conditions["] {
        assert!(!msg.contains(secret), "{secret:?} revealed in {msg:?}");
    }
    for ns in ["team-a", "special"] {
        let d = validate(ES, "CREATE", Some(ns), es.clone(), &c);
        assert!(d.allowed && d.warnings.is_empty(), "{ns}: {d:?}");
    }
    // A namespace matching the regex, known to the cache.
    c.write().namespaces.insert("ops-tools".into(), Labels::new());
    assert!(validate(ES, "UPDATE", Some("ops-tools"), es, &c).allowed);
}

#[test]
fn every_per_entry_store_ref_is_checked() {
    let c = caches();
    let mut es = external_secret("db", json!({"name": "open", "kind": "ClusterProvider"}));
    es["spec"]["data"] = json!([
        {"secretKey": "a", "remoteRef": {"key": "a"}},
        {"secretKey": "b", "remoteRef": {"key": "b"}, "sourceRef": {"storeRef": {"name": "shared", "kind": "ClusterProvider"}}}
    ]);
    es["spec"]["dataFrom"] = json!([
        {"extract": {"key": "c"}, "sourceRef": {"storeRef": {"name": "shared", "kind": "ClusterProvider"}}}
    ]);
    let d = validate(ES, "CREATE", Some("team-b"), es, &c);
    denied_with(
        &d,
        403,
        &[
            "spec.data[1].sourceRef.storeRef: ClusterProvider \"shared\" does not allow namespace \"team-b\"",
            "spec.dataFrom[0].sourceRef.storeRef: ClusterProvider \"shared\" does not allow namespace \"team-b\"",
        ],
    );
    assert!(!d.message.as_deref().unwrap_or_default().contains("spec.secretStoreRef:"));
}

#[test]
fn missing_stores_are_allowed_with_a_warning() {
    let c = caches();
    let d = validate(
        ES,
        "CREATE",
        Some("team-a"),
        external_secret("db", json!({"name": "later", "kind": "ClusterProvider"})),
        &c,
    );
    assert!(d.allowed, "{d:?}");
    assert_eq!(
        d.warnings,
        ["spec.secretStoreRef: ClusterProvider \"later\" does not exist yet; nothing syncs until it does"]
    );

    // An explicit Provider that does not exist warns; an omitted kind means a SecretStore, as
    // upstream (the namespace's own: nothing to check), and a warning says so where only a
    // Provider of that name exists.
    let d =
        validate(ES, "CREATE", Some("team-a"), external_secret("db", json!({"name": "local", "kind": "Provider"})), &c);
    assert!(d.allowed);
    assert_eq!(d.warnings.len(), 1);
    assert!(d.warnings[0].contains("Provider \"local\" does not exist in namespace \"team-a\" yet"), "{d:?}");
    let d = validate(ES, "CREATE", Some("team-a"), external_secret("db", json!({"name": "local"})), &c);
    assert!(d.allowed && d.warnings.is_empty(), "{d:?}");
    let d = validate(ES, "CREATE", Some("team-b"), external_secret("db", json!({"name": "local"})), &c);
    assert!(d.allowed, "{d:?}");
    assert_eq!(
        d.warnings,
        ["spec.secretStoreRef: no kind given, which means SecretStore \"local\", as upstream; namespace \"team-b\" \
          has no SecretStore \"local\" but a Provider \"local\": set kind: Provider to use the Provider"]
    );
    // Once the SecretStore exists the reference means it without doubt.
    c.write().add_secret_store("team-b", "local");
    let d = validate(ES, "CREATE", Some("team-b"), external_secret("db", json!({"name": "local"})), &c);
    assert!(d.allowed && d.warnings.is_empty(), "{d:?}");
    c.write().remove_secret_store("team-b", "local");
    let d =
        validate(ES, "CREATE", Some("team-b"), external_secret("db", json!({"name": "local", "kind": "Provider"})), &c);
    assert!(d.allowed && d.warnings.is_empty(), "{d:?}");

    let d = validate(
        ES,
        "CREATE",
        Some("team-b"),
        external_secret("db", json!({"name": "old", "kind": "ClusterSecretStore"})),
        &c,
    );
    assert!(d.allowed);
    assert_eq!(
        d.warnings,
        ["spec.secretStoreRef: ClusterSecretStore \"old\" does not exist yet; nothing syncs until it does"]
    );
    // A SecretStore is the namespace's own: nothing to admit, and no watch of them.
    let d = validate(
        ES,
        "CREATE",
        Some("team-b"),
        external_secret("db", json!({"name": "mine", "kind": "SecretStore"})),
        &c,
    );
    assert!(d.allowed && d.warnings.is_empty(), "{d:?}");
}

#[test]
fn cluster_secret_store_conditions_are_enforced_like_cluster_provider_ones() {
    let c = caches();
    let es = external_secret("db", json!({"name": "vault-prod", "kind": "ClusterSecretStore"}));
    let d = validate(ES, "CREATE", Some("team-b"), es.clone(), &c);
    denied_with(
        &d,
        403,
        &[
            "ExternalSecret \"db\" is not allowed",
            "spec.secretStoreRef: ClusterSecretStore \"vault-prod\" does not allow namespace \"team-b\"",
            "Use a ClusterSecretStore whose spec.conditions admit namespace \"team-b\", ask its owner to admit it, \
             or use a SecretStore in this namespace",
        ],
    );
    let msg = d.message.as_deref().unwrap_or_default();
    for secret in ["special", "env=prod", "conditions["] {
        assert!(!msg.contains(secret), "{secret:?} revealed in {msg:?}");
    }
    for ns in ["team-a", "special"] {
        let d = validate(ES, "CREATE", Some(ns), es.clone(), &c);
        assert!(d.allowed && d.warnings.is_empty(), "{ns}: {d:?}");
    }
    // Per-entry references and PushSecrets too.
    let mut per_entry = external_secret("db", json!({"name": "open", "kind": "ClusterProvider"}));
    per_entry["spec"]["data"][0]["sourceRef"] =
        json!({"storeRef": {"name": "vault-prod", "kind": "ClusterSecretStore"}});
    denied_with(
        &validate(ES, "CREATE", Some("team-b"), per_entry, &c),
        403,
        &["spec.data[0].sourceRef.storeRef: ClusterSecretStore \"vault-prod\" does not allow namespace \"team-b\""],
    );
    let ps = push_secret(json!([{"name": "vault-prod", "kind": "ClusterSecretStore"}]));
    denied_with(
        &validate(PS, "CREATE", Some("team-b"), ps.clone(), &c),
        403,
        &["spec.secretStoreRefs[0]: ClusterSecretStore \"vault-prod\" does not allow namespace \"team-b\""],
    );
    assert!(validate(PS, "CREATE", Some("team-a"), ps, &c).allowed);
    // Unknown labels with a namespaceSelector: retry, not a verdict.
    let d = validate(ES, "CREATE", Some("brand-new"), es.clone(), &c);
    denied_with(&d, 403, &["namespaceSelector of ClusterSecretStore \"vault-prod\" cannot be checked; retry"]);
    // Conditions that could not be read: allowed with a warning (the reconciler decides again).
    c.write().cluster_secret_stores.insert("vault-prod".into(), Err("spec.conditions: invalid type".into()));
    let d = validate(ES, "CREATE", Some("team-b"), es, &c);
    assert!(d.allowed, "{d:?}");
    assert_eq!(
        d.warnings,
        ["spec.secretStoreRef: ClusterSecretStore \"vault-prod\" cannot be read: spec.conditions: invalid type"]
    );
}

#[test]
fn a_cluster_provider_without_its_auth_namespace_warns_its_users() {
    let c = caches();
    let mut spec = cluster_provider(json!([]));
    spec.config.provider_ref.namespace = None;
    c.write().cluster_providers.insert("slipped".into(), Ok(spec));
    let d = validate(
        ES,
        "CREATE",
        Some("team-a"),
        external_secret("db", json!({"name": "slipped", "kind": "ClusterProvider"})),
        &c,
    );
    assert!(d.allowed);
    assert!(d.warnings[0].contains("spec.config.providerRef.namespace is not set"), "{d:?}");
}

#[test]
fn spec_errors_and_policy_denials_are_reported_together() {
    let c = caches();
    let mut es = external_secret("db", json!({"name": "shared", "kind": "ClusterProvider"}));
    es["spec"]["refreshInterval"] = json!("soon");
    es["spec"]["data"][0]["secretKey"] = json!("");
    let d = validate(ES, "CREATE", Some("team-b"), es, &c);
    denied_with(
        &d,
        400,
        &[
            "ExternalSecret \"db\" is invalid",
            "spec.refreshInterval",
            "spec.data[0].secretKey: must not be empty",
            "spec.secretStoreRef: ClusterProvider \"shared\" does not allow namespace \"team-b\"",
        ],
    );
}

#[test]
fn unknown_namespace_labels_deny_with_a_retry_hint_only_when_a_selector_decides() {
    let c = caches();
    let es = external_secret("db", json!({"name": "shared", "kind": "ClusterProvider"}));
    let d = validate(ES, "CREATE", Some("brand-new"), es.clone(), &c);
    denied_with(&d, 403, &["labels of namespace \"brand-new\" are not known", "retry"]);
    // Names and regexes do not need labels.
    let d = validate(ES, "CREATE", Some("ops-new"), es, &c);
    assert!(d.allowed, "{d:?}");
}

fn push_secret(refs: Value) -> Value {
    json!({
        "apiVersion": "external-secrets.io/v1alpha1",
        "kind": "PushSecret",
        "metadata": {"name": "push"},
        "spec": {
            "secretStoreRefs": refs,
            "selector": {"secret": {"name": "source"}},
            "data": [{"match": {"secretKey": "k", "remoteRef": {"remoteKey": "r"}}}]
        }
    })
}

#[test]
fn push_secret_store_refs_are_checked() {
    let c = caches();
    let d =
        validate(PS, "CREATE", Some("team-b"), push_secret(json!([{"name": "shared", "kind": "ClusterProvider"}])), &c);
    denied_with(
        &d,
        403,
        &[
            "PushSecret \"push\"",
            "spec.secretStoreRefs[0]: ClusterProvider \"shared\" does not allow namespace \"team-b\"",
        ],
    );
    // Without a kind: the SecretStore "shared" of team-b, as upstream, never the ClusterProvider.
    let d = validate(PS, "CREATE", Some("team-b"), push_secret(json!([{"name": "shared"}])), &c);
    assert!(d.allowed && d.warnings.is_empty(), "{d:?}");
    // Nor a Provider of that name: a warning says how to reach it.
    c.write().add_provider("team-b", "shared");
    let d = validate(PS, "CREATE", Some("team-b"), push_secret(json!([{"name": "shared"}])), &c);
    assert!(d.allowed, "{d:?}");
    assert_eq!(d.warnings.len(), 1, "{d:?}");
    assert!(
        d.warnings[0]
            .starts_with("spec.secretStoreRefs[0]: no kind given, which means SecretStore \"shared\", as upstream")
            && d.warnings[0].ends_with("set kind: Provider to use the Provider"),
        "{d:?}"
    );
    let d = validate(PS, "CREATE", Some("team-b"), push_secret(json!([{"name": "shared", "kind": "Provider"}])), &c);
    assert!(d.allowed && d.warnings.is_empty(), "{d:?}");
    let d =
        validate(PS, "CREATE", Some("team-a"), push_secret(json!([{"name": "shared", "kind": "ClusterProvider"}])), &c);
    assert!(d.allowed, "{d:?}");
    let d = validate(PS, "CREATE", Some("team-a"), push_secret(json!([])), &c);
    denied_with(&d, 400, &["spec.secretStoreRefs: list at least one store"]);
}

fn cluster_provider_object(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "external-secrets.io/v1", "kind": "ClusterProvider", "metadata": {"name": name}, "spec": spec})
}

#[test]
fn provider_and_cluster_provider_rules_name_the_field() {
    let c = caches();
    let d = validate(
        CPROV,
        "CREATE",
        None,
        cluster_provider_object(
            "shared",
            json!({"config": {"address": "p.keyward.svc:8443",
                              "providerRef": {"apiVersion": "provider.external-secrets.io/v2alpha1", "kind": "Kubernetes", "name": "r"}}}),
        ),
        &c,
    );
    denied_with(&d, 400, &["ClusterProvider \"shared\" is invalid", "spec.config.providerRef.namespace: required"]);

    let d = validate(
        CPROV,
        "CREATE",
        None,
        cluster_provider_object(
            "shared",
            json!({"authenticationScope": "ManifestNamespace",
                   "config": {"address": "no-port",
                              "providerRef": {"apiVersion": "provider.external-secrets.io/v2alpha1", "kind": "Kubernetes", "name": "r"}},
                   "conditions": [{"namespaceRegexes": ["("]}]}),
        ),
        &c,
    );
    denied_with(&d, 400, &["spec.config.address", "spec.conditions[0].namespaceRegexes[0]"]);

    let provider = json!({"apiVersion": "external-secrets.io/v1", "kind": "Provider", "metadata": {"name": "p"},
        "spec": {"config": {"address": "p.keyward.svc:8443",
                 "providerRef": {"apiVersion": "provider.external-secrets.io/v2alpha1", "kind": "Kubernetes", "name": "r", "namespace": "other"}}}});
    let d = validate(PROV, "CREATE", Some("team-a"), provider, &c);
    denied_with(&d, 400, &["spec.config.providerRef.namespace"]);
}

#[test]
fn provider_configs_need_exactly_one_auth_method() {
    let c = caches();
    let kube = |auth: Value| {
        json!({"apiVersion": "provider.external-secrets.io/v2alpha1", "kind": "Kubernetes", "metadata": {"name": "r"},
               "spec": {"auth": auth, "remoteNamespace": "default"}})
    };
    let d = validate(KUBE, "CREATE", Some("creds"), kube(json!({})), &c);
    denied_with(
        &d,
        400,
        &["Kubernetes \"r\" is invalid", "spec.auth: set exactly one of cert, token or serviceAccount"],
    );
    let d = validate(
        KUBE,
        "CREATE",
        Some("creds"),
        kube(json!({"token": {"bearerToken": {"name": "t", "key": "token"}}, "serviceAccount": {"name": "sa"}})),
        &c,
    );
    denied_with(&d, 400, &["spec.auth: token and serviceAccount are set"]);
    let d = validate(KUBE, "CREATE", Some("creds"), kube(json!({"serviceAccount": {"name": "sa"}})), &c);
    assert!(d.allowed, "{d:?}");

    let fake = json!({"apiVersion": "provider.external-secrets.io/v2alpha1", "kind": "Fake", "metadata": {"name": "f"},
                      "spec": {"data": [{"key": "a", "value": "1"}, {"key": "a", "value": "2"}]}});
    let d = validate(FAKE, "CREATE", Some("creds"), fake, &c);
    denied_with(&d, 400, &["spec.data[1]: duplicate entry for key \"a\""]);
}

#[test]
fn vault_and_secrets_manager_configs_are_validated() {
    let c = caches();
    let vault = |auth: Value| {
        json!({"apiVersion": "provider.external-secrets.io/v2alpha1", "kind": "Vault", "metadata": {"name": "v"},
               "spec": {"server": "https://vault:8200", "path": "secret", "auth": auth}})
    };
    let d = validate(VAULT, "CREATE", Some("team-a"), vault(json!({})), &c);
    // No login method is the provider's own token (as upstream allows): a tenant may not.
    denied_with(&d, 403, &["spec.auth without a login method", "--provider-identity-namespaces"]);
    let two = vault(
        json!({"tokenSecretRef": {"name": "t", "key": "k"}, "appRole": {"roleId": "r", "secretRef": {"name": "s", "key": "k"}}}),
    );
    let d = validate(VAULT, "CREATE", Some("team-a"), two, &c);
    denied_with(
        &d,
        400,
        &["Vault \"v\" is invalid", "spec.auth: tokenSecretRef and appRole are set; set exactly one of"],
    );
    // A login with the provider's own ServiceAccount token is the operator's (namespace `creds`,
    // named by ClusterProvider "shared"); a tenant names its own ServiceAccount or Secret.
    let own_token = vault(json!({"kubernetes": {"role": "app"}}));
    let d = validate(VAULT, "CREATE", Some("team-a"), own_token.clone(), &c);
    denied_with(
        &d,
        403,
        &[
            "spec.auth.kubernetes: spec.auth.kubernetes without serviceAccountRef or secretRef uses the provider's own credentials",
        ],
    );
    assert!(validate(VAULT, "CREATE", Some("creds"), own_token, &c).allowed);
    let sa = vault(json!({"kubernetes": {"role": "app", "serviceAccountRef": {"name": "app"}}}));
    assert!(validate(VAULT, "CREATE", Some("team-a"), sa, &c).allowed);
    let foreign = vault(json!({"tokenSecretRef": {"name": "t", "key": "token", "namespace": "creds"}}));
    denied_with(
        &validate(VAULT, "CREATE", Some("team-a"), foreign, &c),
        403,
        &["spec.auth.tokenSecretRef.namespace: \"creds\" names Secret \"t\" outside namespace \"team-a\""],
    );
    let aws = |spec: Value| {
        json!({"apiVersion": "provider.external-secrets.io/v2alpha1", "kind": "SecretsManager", "metadata": {"name": "a"},
               "spec": spec})
    };
    let d = validate(AWS_SM, "CREATE", Some("team-a"), aws(json!({"region": "eu-west-1", "role": ""})), &c);
    denied_with(&d, 400, &["SecretsManager \"a\" is invalid", "spec.role: must not be empty"]);
    // The SDK's default chain is the provider's own identity: the operator's only.
    let d = validate(AWS_SM, "CREATE", Some("team-a"), aws(json!({"region": "eu-west-1"})), &c);
    denied_with(&d, 403, &["spec.auth: a SecretsManager config without spec.auth uses the provider's own credentials"]);
    let d = validate(AWS_SM, "CREATE", Some("creds"), aws(json!({"region": "eu-west-1"})), &c);
    assert!(d.allowed, "{d:?}");
}

#[test]
fn a_tenant_config_naming_another_namespace_is_denied_unless_the_operator_named_its_namespace() {
    let c = caches();
    let kube = |spec: Value| {
        json!({"apiVersion": "provider.external-secrets.io/v2alpha1", "kind": "Kubernetes", "metadata": {"name": "r"},
               "spec": spec})
    };
    let foreign_sa = kube(json!({"auth": {"serviceAccount": {"name": "admin", "namespace": "kube-system"}}}));
    let foreign_token =
        kube(json!({"auth": {"token": {"bearerToken": {"name": "t", "key": "token", "namespace": "team-a"}}}}));
    for (what, object, field) in [
        ("ServiceAccount", foreign_sa.clone(), "spec.auth.serviceAccount.namespace: \"kube-system\" names"),
        ("token Secret", foreign_token.clone(), "spec.auth.token.bearerToken.namespace: \"team-a\" names"),
    ] {
        let d = validate(KUBE, "CREATE", Some("team-b"), object, &c);
        denied_with(
            &d,
            403,
            &["Kubernetes \"r\" is not allowed", field, "outside namespace \"team-b\"", "create that first"],
        );
        assert!(!d.message.as_deref().unwrap_or_default().contains("is invalid"), "{what}: a policy denial");
    }
    // `creds` is named by ClusterProvider "shared" (ProviderNamespace): the operator's.
    assert!(validate(KUBE, "CREATE", Some("creds"), foreign_sa.clone(), &c).allowed);
    // Naming the own namespace explicitly is fine anywhere.
    let own = kube(json!({"auth": {"serviceAccount": {"name": "sa", "namespace": "team-b"}}}));
    assert!(validate(KUBE, "CREATE", Some("team-b"), own, &c).allowed);
    // Letting pushes choose their namespace is the operator's to grant.
    let overriding = kube(json!({"auth": {"serviceAccount": {"name": "sa"}}, "allowRemoteNamespaceOverride": true}));
    denied_with(
        &validate(KUBE, "CREATE", Some("team-b"), overriding.clone(), &c),
        403,
        &["spec.allowRemoteNamespaceOverride"],
    );
    assert!(validate(KUBE, "CREATE", Some("creds"), overriding, &c).allowed);
    // A ManifestNamespace ClusterProvider naming a namespace does not make it the operator's.
    let mut manifest_scoped = cluster_provider(json!([]));
    manifest_scoped.authentication_scope = keyward_crds::AuthenticationScope::ManifestNamespace;
    manifest_scoped.config.provider_ref.namespace = Some("team-b".into());
    c.write().cluster_providers.insert("per-tenant".into(), Ok(manifest_scoped));
    assert!(!validate(KUBE, "CREATE", Some("team-b"), foreign_sa, &c).allowed);
}

fn store(kind: &str, spec: Value) -> Value {
    json!({"apiVersion": "external-secrets.io/v1", "kind": kind, "metadata": {"name": "st"}, "spec": spec})
}

#[test]
fn a_manifest_target_is_accepted_with_a_warning() {
    let c = caches();
    let mut es = external_secret("cm", json!({"name": "missing", "kind": "Provider"}));
    es["spec"]["target"] = json!({"manifest": {"apiVersion": "v1", "kind": "ConfigMap"},
                                  "template": {"templateFrom": [{"literal": "a: b", "target": "data.config"}]}});
    let d = validate(ES, "CREATE", Some("team-a"), es.clone(), &c);
    assert!(d.allowed, "{d:?}");
    assert!(
        d.warnings.iter().any(|w| w.starts_with("spec.target.manifest (v1 ConfigMap): non-Secret targets")),
        "{d:?}"
    );
    assert!(
        d.warnings.iter().any(|w| w.contains("--generic-targets") && w.contains("genericTargets.enabled")),
        "{d:?}"
    );
    // Turned on for ConfigMaps (the operator's flags): the reconciler's rule warns what such an
    // object is; a kind of a group not listed is warned as the reconciler will refuse it.
    c.write().generic_targets = keyward_crds::rules::GenericTargets::from_flags(true, "configmaps").unwrap();
    let d = validate(ES, "CREATE", Some("team-a"), es.clone(), &c);
    assert!(d.allowed && d.warnings.iter().any(|w| w.contains("not encrypted at rest")), "{d:?}");
    let mut app = es.clone();
    app["spec"]["target"]["manifest"] = json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "Application"});
    let d = validate(ES, "CREATE", Some("team-a"), app, &c);
    assert!(d.warnings.iter().any(|w| w.contains("no resource of API group \"argoproj.io\" is listed")), "{d:?}");
    // Without a manifest, a path is refused: it could reach the Secret's privileged fields.
    es["spec"]["target"].as_object_mut().unwrap().remove("manifest");
    denied_with(&validate(ES, "CREATE", Some("team-a"), es, &c), 400, &["templateFrom[0].target"]);
}

#[test]
fn a_secret_store_naming_another_namespace_is_denied_and_a_cluster_secret_store_may() {
    let c = caches();
    let foreign = json!({"provider": {"kubernetes": {"auth": {"serviceAccount": {"name": "admin", "namespace": "kube-system"}}}}});
    let d = validate(SS, "CREATE", Some("team-b"), store("SecretStore", foreign.clone()), &c);
    denied_with(
        &d,
        403,
        &[
            "SecretStore \"st\" is not allowed",
            "spec.provider.kubernetes.auth.serviceAccount.namespace: \"kube-system\" names",
            "through a ClusterSecretStore",
        ],
    );
    let update =
        run(Mode::Validate, &body(SS, "UPDATE", Some("team-b"), Some(store("SecretStore", foreign.clone())), None), &c);
    assert!(!update.allowed, "an update is checked like a create");
    // Its own namespace, named or implied, is the tenant's to use.
    let own = json!({"provider": {"kubernetes": {"auth": {"serviceAccount": {"name": "sa", "namespace": "team-b"}}}}});
    assert!(validate(SS, "CREATE", Some("team-b"), store("SecretStore", own), &c).allowed);
    // A ClusterSecretStore is the operator's: it may name any namespace.
    assert!(validate(CSS, "CREATE", None, store("ClusterSecretStore", foreign), &c).allowed);
    // A provider Keyward does not serve applies unchanged (its status says so).
    assert!(
        validate(
            SS,
            "CREATE",
            Some("team-b"),
            store("SecretStore", json!({"provider": {"alibaba": {"regionID": "r"}}})),
            &c
        )
        .allowed
    );
}

#[test]
fn secret_store_fields_and_cluster_secret_store_conditions_are_validated() {
    let c = caches();
    let d = validate(SS, "CREATE", Some("team-b"), store("SecretStore", json!({"provider": {}})), &c);
    denied_with(&d, 400, &["SecretStore \"st\" is invalid", "spec.provider names no provider"]);
    let bad_regex = json!({"provider": {"fake": {"data": []}}, "conditions": [{"namespaceRegexes": ["("]}]});
    denied_with(
        &validate(CSS, "CREATE", None, store("ClusterSecretStore", bad_regex), &c),
        400,
        &["ClusterSecretStore \"st\" is invalid", "spec.conditions[0].namespaceRegexes[0]"],
    );
    let duplicate = json!({"provider": {"fake": {"data": [{"key": "k", "value": "a"}, {"key": "k", "value": "b"}]}}});
    denied_with(
        &validate(CSS, "CREATE", None, store("ClusterSecretStore", duplicate), &c),
        400,
        &["spec.provider.fake.data[1]"],
    );
    // No mutation for either kind.
    assert!(patched(&store("SecretStore", json!({"provider": {"fake": {"data": []}}})), SS).1.is_empty());
    // A refreshInterval is seconds or a duration, as upstream.
    for interval in [json!(30), json!("1h"), json!("0")] {
        let s = json!({"provider": {"fake": {"data": []}}, "refreshInterval": interval});
        let d = validate(SS, "CREATE", Some("team-b"), store("SecretStore", s), &c);
        assert!(d.allowed && d.warnings.is_empty(), "{interval}: {d:?}");
    }
    for interval in [json!(-1), json!("soon")] {
        let s = json!({"provider": {"fake": {"data": []}}, "refreshInterval": interval});
        denied_with(
            &validate(SS, "CREATE", Some("team-b"), store("SecretStore", s), &c),
            400,
            &["spec.refreshInterval: "],
        );
    }
}

#[test]
fn secret_stores_warn_where_keyward_differs_from_upstream() {
    let c = caches();
    let unserved = json!({"provider": {"alibaba": {"regionID": "r"}}});
    for (review, ns, kind) in [(SS, Some("team-b"), "SecretStore"), (CSS, None, "ClusterSecretStore")] {
        let d = validate(review, "CREATE", ns, store(kind, unserved.clone()), &c);
        assert!(d.allowed, "{d:?}");
        assert_eq!(d.warnings.len(), 1, "{d:?}");
        assert!(d.warnings[0].starts_with("spec.provider.alibaba is not served by this controller"), "{d:?}");
    }
    let vault = json!({"provider": {"vault": {"server": "http://v", "auth": {"gcp": {"role": "r"}}}}});
    let d = validate(SS, "CREATE", Some("team-b"), store("SecretStore", vault), &c);
    assert!(d.allowed, "{d:?}");
    assert_eq!(d.warnings.len(), 1, "{d:?}");
    assert!(d.warnings[0].starts_with("spec.provider.vault.auth.gcp: "), "{d:?}");
    // The AWS (IAM) login is served: validated, bounded, no warning.
    let iam = json!({"provider": {"vault": {"server": "http://v", "auth": {"iam": {"vaultRole": "r",
        "secretRef": {"accessKeyIDSecretRef": {"name": "a", "key": "id"},
                      "secretAccessKeySecretRef": {"name": "a", "key": "secret"}}}}}}});
    let d = validate(SS, "CREATE", Some("team-b"), store("SecretStore", iam), &c);
    assert!(d.allowed && d.warnings.is_empty(), "{d:?}");
    let own = json!({"provider": {"vault": {"server": "http://v", "auth": {"iam": {"vaultRole": "r"}}}}});
    let d = validate(SS, "CREATE", Some("team-b"), store("SecretStore", own), &c);
    assert!(!d.allowed, "a SecretStore may not use the provider's own AWS identity: {d:?}");
    let aws = json!({"provider": {"aws": {"service": "SecretsManager", "region": "eu-west-1",
        "auth": {"secretRef": {"accessKeyIDSecretRef": {"name": "a", "key": "id"},
                               "secretAccessKeySecretRef": {"name": "a", "key": "secret"}}},
        "sessionTagsPolicy": "Custom", "customSessionTags": {"team": "a"}}}});
    let d = validate(CSS, "CREATE", None, store("ClusterSecretStore", aws), &c);
    assert!(d.allowed, "{d:?}");
    let fields: Vec<&str> = d.warnings.iter().filter_map(|w| w.split_once(':').map(|(f, _)| f)).collect();
    assert_eq!(fields, ["spec.provider.aws.sessionTagsPolicy", "spec.provider.aws.customSessionTags"], "{d:?}");
    let served = json!({"provider": {"fake": {"data": []}}});
    let d = validate(SS, "CREATE", Some("team-b"), store("SecretStore", served), &c);
    assert!(d.allowed && d.warnings.is_empty(), "{d:?}");
    assert!(patched(&store("ClusterSecretStore", json!({"provider": {"fake": {"data": []}}})), CSS).1.is_empty());
}

#[test]
fn push_remote_namespace_overrides_through_tenant_owned_stores_are_denied() {
    let c = caches();
    let mut manifest_scoped = cluster_provider(json!([]));
    manifest_scoped.authentication_scope = keyward_crds::AuthenticationScope::ManifestNamespace;
    c.write().cluster_providers.insert("per-tenant".into(), Ok(manifest_scoped));
    let overriding = |refs: Value| {
        let mut ps = push_secret(refs);
        ps["spec"]["data"][0]["metadata"] = json!({"apiVersion": "kubernetes.external-secrets.io/v1alpha1",
            "kind": "PushSecretMetadata", "spec": {"remoteNamespace": "kube-system"}});
        ps
    };
    for refs in [
        json!([{"name": "local", "kind": "Provider"}]),
        json!([{"name": "local"}]),
        json!([{"name": "per-tenant", "kind": "ClusterProvider"}]),
    ] {
        let d = validate(PS, "CREATE", Some("team-b"), overriding(refs.clone()), &c);
        denied_with(
            &d,
            403,
            &["spec.data[0].metadata (for spec.secretStoreRefs[0]", "remoteNamespace \"kube-system\"", "tenant-owned"],
        );
    }
    // Through an operator-owned configuration the provider decides (with the config in hand).
    let d =
        validate(PS, "CREATE", Some("team-a"), overriding(json!([{"name": "shared", "kind": "ClusterProvider"}])), &c);
    assert!(d.allowed, "{d:?}");
    // Without an override nothing changes.
    let d = validate(PS, "CREATE", Some("team-b"), push_secret(json!([{"name": "local", "kind": "Provider"}])), &c);
    assert!(d.allowed, "{d:?}");
}

fn use_index(c: &Caches) {
    let mut s = c.write();
    let uses = vec![StoreUse { cluster_provider: "shared".into() }];
    for (kind, ns, name) in [
        (UserKind::ExternalSecret, "team-a", "es1"),
        (UserKind::ExternalSecret, "team-a", "es2"),
        (UserKind::PushSecret, "team-a", "ps1"),
        (UserKind::ExternalSecret, "special", "es3"),
    ] {
        s.refs.upsert(ObjectKey { kind, namespace: ns.into(), name: name.into() }, uses.clone());
    }
}

#[test]
fn narrowing_a_cluster_provider_warns_about_the_objects_that_lose_access() {
    let c = caches();
    use_index(&c);
    let old = cluster_provider_object(
        "shared",
        serde_json::to_value(cluster_provider(json!([
            {"namespaceSelector": {"matchLabels": {"env": "prod"}}},
            {"namespaces": ["special"]}
        ])))
        .expect("json"),
    );
    let new = cluster_provider_object(
        "shared",
        serde_json::to_value(cluster_provider(json!([{"namespaceRegexes": ["^ops-"]}]))).expect("json"),
    );
    let d = run(Mode::Validate, &body(CPROV, "UPDATE", None, Some(new.clone()), Some(old.clone())), &c);
    assert!(d.allowed, "{d:?}");
    assert_eq!(
        d.warnings,
        ["ClusterProvider \"shared\": 4 objects in 2 namespaces lose access with these conditions: \
          special (1 ExternalSecret), team-a (2 ExternalSecrets, 1 PushSecret)"]
    );
    // Deleting it is allowed, and says who is left without it.
    let d = run(Mode::Validate, &body(CPROV, "DELETE", None, None, Some(old.clone())), &c);
    assert!(d.allowed, "{d:?}");
    assert_eq!(
        d.warnings,
        ["ClusterProvider \"shared\" is still used by 4 objects in 2 namespaces; they stop syncing until it is back"]
    );
    // Widening (or keeping) access says nothing.
    let d = run(Mode::Validate, &body(CPROV, "UPDATE", None, Some(old.clone()), Some(new)), &c);
    assert!(d.allowed && d.warnings.is_empty(), "{d:?}");
    let d = run(Mode::Validate, &body(CPROV, "UPDATE", None, Some(old.clone()), Some(old)), &c);
    assert!(d.allowed && d.warnings.is_empty(), "{d:?}");
}

#[test]
fn delete_is_always_allowed_and_subresources_pass() {
    let c = caches();
    let broken = json!({"metadata": {"name": "x"}, "spec": "garbage"});
    for gvk in [ES, PS, PROV, CPROV, KUBE, FAKE] {
        let d = run(Mode::Validate, &body(gvk, "DELETE", Some("team-b"), None, Some(broken.clone())), &c);
        assert!(d.allowed, "{gvk:?}: {d:?}");
        let d = run(Mode::Mutate, &body(gvk, "DELETE", Some("team-b"), None, Some(broken.clone())), &c);
        assert!(d.allowed, "{gvk:?}: {d:?}");
    }
    let mut status_update: Value =
        serde_json::from_slice(&body(ES, "UPDATE", Some("team-b"), Some(broken), None)).expect("json");
    status_update["request"]["subResource"] = json!("status");
    let d = run(Mode::Validate, &serde_json::to_vec(&status_update).expect("json"), &c);
    assert!(d.allowed, "{d:?}");
}

const CES: (&str, &str, &str) = ("external-secrets.io", "v1", "ClusterExternalSecret");

fn cluster_external_secret(selection: Value, store: Value) -> Value {
    let mut spec = json!({"externalSecretSpec": {"secretStoreRef": store,
                                                  "data": [{"secretKey": "k", "remoteRef": {"key": "db"}}]}});
    for (k, v) in selection.as_object().expect("selection is an object") {
        spec[k] = v.clone();
    }
    json!({"apiVersion": "external-secrets.io/v1", "kind": "ClusterExternalSecret", "metadata": {"name": "shared-db"},
           "spec": spec})
}

#[test]
fn cluster_external_secret_warns_about_selected_namespaces_the_store_refuses() {
    let c = caches();
    // team-a (env=prod) is admitted by "shared", team-b (env=dev) and special (by name) are
    // selected too; special is admitted by name, team-b is not.
    let selection = json!({"namespaceSelectors": [{"matchExpressions": [{"key": "env", "operator": "Exists"}]}],
                           "namespaces": ["special"]});
    let d = validate(
        CES,
        "CREATE",
        None,
        cluster_external_secret(selection.clone(), json!({"name": "shared", "kind": "ClusterProvider"})),
        &c,
    );
    assert!(d.allowed, "{d:?}");
    assert_eq!(d.warnings.len(), 1, "{:?}", d.warnings);
    assert!(
        d.warnings[0].starts_with(
            "ClusterExternalSecret \"shared-db\": ClusterProvider \"shared\" does not allow namespace \"team-b\"; \
             no ExternalSecret is written there"
        ),
        "{:?}",
        d.warnings
    );
    // A store that admits everyone: no warning.
    let d = validate(
        CES,
        "CREATE",
        None,
        cluster_external_secret(selection.clone(), json!({"name": "open", "kind": "ClusterProvider"})),
        &c,
    );
    assert!(d.allowed && d.warnings.is_empty(), "{d:?}");
    // A namespaced Provider that exists in team-b only.
    let d = validate(
        CES,
        "UPDATE",
        None,
        cluster_external_secret(selection, json!({"name": "local", "kind": "Provider"})),
        &c,
    );
    assert!(d.allowed, "{d:?}");
    assert_eq!(
        d.warnings,
        ["ClusterExternalSecret \"shared-db\": Provider \"local\" does not exist yet in namespaces \"special\", \
          \"team-a\"; their ExternalSecrets do not sync until it does"]
    );
}

#[test]
fn cluster_external_secret_warns_about_namespaces_a_cluster_secret_store_refuses() {
    let c = caches();
    let selection = json!({"namespaceSelectors": [{"matchExpressions": [{"key": "env", "operator": "Exists"}]}]});
    let d = validate(
        CES,
        "CREATE",
        None,
        cluster_external_secret(selection.clone(), json!({"name": "vault-prod", "kind": "ClusterSecretStore"})),
        &c,
    );
    assert!(d.allowed, "{d:?}");
    assert_eq!(
        d.warnings,
        [
            "ClusterExternalSecret \"shared-db\": ClusterSecretStore \"vault-prod\" does not allow namespace \"team-b\"; \
          no ExternalSecret is written there (they are listed in status.failedNamespaces). Use a ClusterSecretStore \
          whose spec.conditions admit them, or narrow the namespace selection"
        ]
    );
    let d = validate(
        CES,
        "CREATE",
        None,
        cluster_external_secret(selection, json!({"name": "later", "kind": "ClusterSecretStore"})),
        &c,
    );
    assert_eq!(
        d.warnings,
        ["spec.externalSecretSpec.secretStoreRef: ClusterSecretStore \"later\" does not exist yet; nothing syncs \
          until it does"]
    );
}

#[test]
fn cluster_external_secret_spec_errors_deny_and_an_empty_selection_warns() {
    let c = caches();
    let bad = cluster_external_secret(
        json!({"refreshTime": "often", "namespaceSelectors": [{"matchExpressions": [{"key": "a", "operator": "In"}]}]}),
        json!({"name": "open", "kind": "ClusterProvider"}),
    );
    let d = validate(CES, "CREATE", None, bad, &c);
    denied_with(
        &d,
        400,
        &["ClusterExternalSecret \"shared-db\" is invalid", "spec.refreshTime", "spec.namespaceSelectors[0]"],
    );
    let d = validate(
        CES,
        "CREATE",
        None,
        cluster_external_secret(json!({}), json!({"name": "gone", "kind": "ClusterProvider"})),
        &c,
    );
    assert!(d.allowed, "{d:?}");
    assert_eq!(
        d.warnings,
        [
            "ClusterExternalSecret \"shared-db\" selects no namespace: set spec.namespaceSelectors or spec.namespaces",
            "spec.externalSecretSpec.secretStoreRef: ClusterProvider \"gone\" does not exist yet; nothing syncs until it does",
        ]
    );
    // Mutation leaves a ClusterExternalSecret as written.
    let obj = cluster_external_secret(json!({"namespaces": ["team-a"]}), json!({"name": "open"}));
    let d = run(Mode::Mutate, &body(CES, "CREATE", None, Some(obj), None), &c);
    assert!(d.allowed && d.patch.as_ref().is_some_and(|p| p.0.is_empty()), "{d:?}");
}

#[test]
fn cluster_external_secret_warns_where_an_omitted_kind_names_only_a_provider() {
    let c = caches();
    // team-b has a Provider "local" and no SecretStore "local"; team-a has neither.
    let selection = json!({"namespaces": ["team-a", "team-b"]});
    let d = validate(CES, "CREATE", None, cluster_external_secret(selection.clone(), json!({"name": "local"})), &c);
    assert!(d.allowed, "{d:?}");
    assert_eq!(
        d.warnings,
        ["ClusterExternalSecret \"shared-db\": a store reference without kind means SecretStore \"local\", as \
          upstream; namespace \"team-b\" has no SecretStore \"local\" but a Provider \"local\": set kind: Provider \
          to use the Provider"]
    );
    c.write().add_secret_store("team-b", "local");
    let d = validate(CES, "CREATE", None, cluster_external_secret(selection.clone(), json!({"name": "local"})), &c);
    assert!(d.allowed && d.warnings.is_empty(), "{d:?}");
    let explicit = json!({"name": "local", "kind": "Provider"});
    let d = validate(CES, "CREATE", None, cluster_external_secret(selection, explicit), &c);
    assert!(d.allowed, "{d:?}");
    assert!(d.warnings.iter().all(|w| !w.contains("without kind")), "{d:?}");
}

#[test]
fn unknown_kinds_missing_and_unreadable_objects_are_denied_with_a_message() {
    let c = caches();
    let d = validate(("", "v1", "ConfigMap"), "CREATE", Some("team-a"), json!({"metadata": {"name": "x"}}), &c);
    denied_with(&d, 400, &["keyward-webhook does not handle core/v1 ConfigMap"]);
    let d = validate(("external-secrets.io", "v1beta1", "ExternalSecret"), "CREATE", Some("team-a"), json!({}), &c);
    denied_with(&d, 400, &["does not handle external-secrets.io/v1beta1 ExternalSecret"]);
    let d = run(Mode::Validate, &body(ES, "CREATE", Some("team-a"), None, None), &c);
    denied_with(&d, 400, &["carries no object"]);
    let d = validate(ES, "CREATE", Some("team-a"), json!({"metadata": {"name": "x"}, "spec": {"data": 5}}), &c);
    denied_with(&d, 400, &["the ExternalSecret cannot be read"]);
    // An object that is no object at all never reaches a kind: kube's admission request
    // cannot hold it, and both webhooks deny the review naming the field.
    for mode in [Mode::Mutate, Mode::Validate] {
        let d = run(mode, &body(ES, "CREATE", Some("team-a"), Some(json!([1, 2])), None), &c);
        denied_with(&d, 400, &["keyward-webhook cannot read the admission request", "object"]);
    }
}

fn patched(object: &Value, gvk: (&str, &str, &str)) -> (Value, Vec<Value>) {
    let c = caches();
    let out = handle_body(Mode::Mutate, &body(gvk, "CREATE", Some("team-a"), Some(object.clone()), None), &c)
        .expect("review");
    let review: Value = serde_json::from_slice(&out).expect("json");
    assert_eq!(review["response"]["allowed"], true, "{review}");
    let Some(patch) = review["response"]["patch"].as_str() else {
        return (object.clone(), Vec::new());
    };
    assert_eq!(review["response"]["patchType"], "JSONPatch");
    let raw = base64::engine::general_purpose::STANDARD.decode(patch).expect("base64");
    let ops: Vec<Value> = serde_json::from_slice(&raw).expect("ops");
    let p: json_patch::Patch = serde_json::from_slice(&raw).expect("patch");
    let mut doc = object.clone();
    json_patch::patch(&mut doc, &p).expect("applies");
    (doc, ops)
}

#[test]
fn external_secret_defaults_are_json_patches() {
    let es = json!({
        "metadata": {"name": "db"},
        "spec": {
            "refreshInterval": "0",
            "secretStoreRef": {"name": "local"},
            "data": [
                {"secretKey": "a", "remoteRef": {"key": "a"}, "sourceRef": {"storeRef": {"name": "x"}}},
                {"secretKey": "b", "remoteRef": {"key": "b"}, "sourceRef": {"storeRef": {"name": "y", "kind": "ClusterProvider"}}}
            ],
            "dataFrom": [{"extract": {"key": "c"}, "sourceRef": {"storeRef": {"name": "z"}}}]
        }
    });
    let (doc, _) = patched(&es, ES);
    assert_eq!(doc["spec"]["target"], json!({"name": "db"}));
    assert_eq!(doc["spec"]["refreshPolicy"], "OnChange");
    // Store references keep their kind as written: an omitted one is resolved where it is used.
    assert_eq!(doc["spec"]["secretStoreRef"], json!({"name": "local"}));
    assert_eq!(doc["spec"]["data"][0]["sourceRef"]["storeRef"], json!({"name": "x"}));
    assert_eq!(doc["spec"]["data"][1]["sourceRef"]["storeRef"]["kind"], "ClusterProvider");
    assert_eq!(doc["spec"]["dataFrom"][0]["sourceRef"]["storeRef"], json!({"name": "z"}));
    // Validation warns where an omitted kind means a SecretStore but only a Provider of that
    // name exists ("x" is a Provider in team-a).
    let d = validate(ES, "CREATE", Some("team-a"), doc.clone(), &caches());
    let omitted: Vec<&str> =
        d.warnings.iter().filter_map(|w| w.split_once(": no kind given").map(|(path, _)| path)).collect();
    assert!(d.allowed, "{d:?}");
    assert_eq!(omitted, ["spec.data[0].sourceRef.storeRef"], "{:?}", d.warnings);

    // Nothing to do: no patch at all; explicit values are never overwritten.
    let mut explicit = doc.clone();
    explicit["spec"]["target"]["name"] = json!("other");
    explicit["spec"]["refreshPolicy"] = json!("CreatedOnce");
    let (again, ops) = patched(&explicit, ES);
    assert!(ops.is_empty(), "{ops:?}");
    assert_eq!(again, explicit);

    let periodic = json!({"metadata": {"name": "db"}, "spec": {"target": {"creationPolicy": "Owner"}}});
    let (doc, _) = patched(&periodic, ES);
    assert_eq!(doc["spec"]["refreshPolicy"], "Periodic");
    assert_eq!(doc["spec"]["target"], json!({"creationPolicy": "Owner", "name": "db"}));
}

#[test]
fn push_secret_store_kinds_are_never_defaulted() {
    let ps = push_secret(json!([{"name": "a"}, {"name": "b", "kind": "ClusterProvider"}]));
    let (doc, ops) = patched(&ps, PS);
    assert!(ops.is_empty(), "{ops:?}");
    assert!(doc["spec"]["secretStoreRefs"][0].get("kind").is_none());
}

#[test]
fn provider_ref_api_version_defaults_from_its_kind() {
    let cp = cluster_provider_object(
        "c",
        json!({"config": {"address": "a.b.svc:1", "providerRef": {"kind": "Fake", "name": "f", "namespace": "n"}}}),
    );
    let (doc, ops) = patched(&cp, CPROV);
    assert_eq!(ops.len(), 1);
    assert_eq!(doc["spec"]["config"]["providerRef"]["apiVersion"], "provider.external-secrets.io/v2alpha1");
    let other = cluster_provider_object(
        "c",
        json!({"config": {"address": "a.b.svc:1", "providerRef": {"kind": "Gitlab", "name": "f"}}}),
    );
    assert!(patched(&other, CPROV).1.is_empty());
}

#[test]
fn remote_keys_that_leave_the_store_path_are_denied_naming_the_field() {
    let c = caches();
    let store = json!({"name": "shared", "kind": "ClusterProvider"});
    let mut es = external_secret("db", store.clone());
    es["spec"]["data"][0]["remoteRef"] = json!({"key": "../auth/token/lookup-self", "property": "id"});
    es["spec"]["dataFrom"] = json!([{"extract": {"key": "kv/%2E%2e/sys"}}, {"find": {"path": "app?list=true"}}]);
    let d = validate(ES, "CREATE", Some("team-a"), es.clone(), &c);
    denied_with(
        &d,
        400,
        &[
            "ExternalSecret \"db\" is invalid",
            "spec.data[0].remoteRef.key: segment \"..\" is not allowed",
            "spec.dataFrom[0].extract.key: segment \"%2E%2e\" is not allowed",
            "spec.dataFrom[1].find.path: segment \"app?list=true\" is not allowed: \"?\" would start a query",
        ],
    );
    // Slashes, dots inside names and a leading slash are ordinary keys.
    es["spec"]["data"][0]["remoteRef"] = json!({"key": "/secret/data/my.app/db"});
    es["spec"]["dataFrom"] = json!([{"extract": {"key": "projects/p/secrets/db"}}, {"find": {"path": "team-a/"}}]);
    let d = validate(ES, "CREATE", Some("team-a"), es, &c);
    assert!(d.allowed, "{d:?}");

    let mut ps = push_secret(json!([{"name": "shared", "kind": "ClusterProvider"}]));
    ps["spec"]["data"][0]["match"]["remoteRef"]["remoteKey"] = json!("kv/%252e%252e/auth/x");
    let d = validate(PS, "CREATE", Some("team-a"), ps, &c);
    denied_with(&d, 400, &["spec.data[0].match.remoteRef.remoteKey: segment \"%252e%252e\" is not allowed"]);

    let mut ces = cluster_external_secret(json!({"namespaces": ["team-a"]}), json!({"name": "open"}));
    ces["spec"]["externalSecretSpec"]["data"][0]["remoteRef"]["key"] = json!("a/..\\b");
    let d = validate(CES, "CREATE", None, ces, &c);
    denied_with(&d, 400, &["spec.externalSecretSpec.data[0].remoteRef.key: segment \"..\\\\b\" is not allowed"]);
}

#[test]
fn wrong_review_versions_get_a_denial_not_an_error() {
    let c = caches();
    let mut v: Value =
        serde_json::from_slice(&body(ES, "CREATE", Some("team-a"), Some(json!({})), None)).expect("json");
    v["apiVersion"] = json!("admission.k8s.io/v1beta1");
    let out = handle_body(Mode::Validate, &serde_json::to_vec(&v).expect("json"), &c).expect("answered");
    let review: Value = serde_json::from_slice(&out).expect("json");
    assert_eq!(review["response"]["uid"], "0000-uid");
    assert_eq!(review["response"]["allowed"], false);
    assert!(decode(b"null").is_err());
    assert!(matches!(decode(&serde_json::to_vec(&v).expect("json")), Ok(Decoded::Reject { .. })));
}

// --- The HTTPS server -----------------------------------------------------------------------

mod https {
    use super::*;
    use crate::client::{Connection, client_config};
    use crate::metrics::Metrics;
    use crate::server::{AppState, admission_router, health_router, serve_tls};
    use crate::tls::{ReloadingCert, server_config};
    use keyward_certs::{CertificateAuthority, TlsFiles, Usage, write_tls_dir};
    use std::net::SocketAddr;
    use tokio::net::TcpListener;

    const DAY: Duration = Duration::from_secs(86_400);

    struct Server {
        addr: SocketAddr,
        health: SocketAddr,
        ca: CertificateAuthority,
        dir: tempfile::TempDir,
        cert: Arc<ReloadingCert>,
        stop: Option<tokio::sync::oneshot::Sender<()>>,
        task: tokio::task::JoinHandle<()>,
        state: AppState,
    }

    fn write_leaf(ca: &CertificateAuthority, dir: &std::path::Path) {
        let leaf = ca.issue(&["127.0.0.1", "localhost"], Usage::Server, DAY).expect("leaf");
        write_tls_dir(dir, &TlsFiles { ca_pem: ca.cert_pem(), cert_pem: &leaf.cert_pem, key_pem: &leaf.key_pem })
            .expect("write");
    }

    async fn start(caches: Caches, tweak: impl FnOnce(&mut AppState)) -> Server {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let ca = CertificateAuthority::generate("keyward-test-ca", DAY).expect("ca");
        let dir = tempfile::tempdir().expect("tmp");
        write_leaf(&ca, dir.path());
        let cert = ReloadingCert::load(dir.path(), provider.clone()).expect("load");
        let tls = Arc::new(server_config(provider, cert.clone()).expect("config"));
        let mut state = AppState::new(Arc::new(caches), Arc::new(Metrics::new()));
        tweak(&mut state);
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let health_listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let health = health_listener.local_addr().expect("addr");
        tokio::spawn(keyward_process::health::serve(
            health_listener,
            health_router(state.clone()),
            std::future::pending(),
        ));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let router = admission_router(state.clone());
        let task = tokio::spawn(async move {
            serve_tls(
                listener,
                tls,
                router,
                Duration::from_secs(5),
                async {
                    let _ = stopped.await;
                },
                Duration::from_secs(5),
            )
            .await;
        });
        Server { addr, health, ca, dir, cert, stop: Some(stop), task, state }
    }

    async fn connect(s: &Server) -> Connection {
        let config = client_config(s.ca.cert_pem()).expect("client config");
        Connection::connect(config, s.addr, "127.0.0.1").await.expect("connect")
    }

    async fn http_get(addr: SocketAddr, path: &str) -> (u16, String) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
        tcp.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
            .await
            .expect("write");
        let mut out = String::new();
        tcp.read_to_string(&mut out).await.expect("read");
        let status = out.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
        (status, out)
    }

    #[tokio::test]
    async fn reviews_over_tls_with_keep_alive() {
        let s = start(caches(), |_| {}).await;
        let mut conn = connect(&s).await;
        let es = external_secret("db", json!({"name": "shared", "kind": "ClusterProvider"}));
        for (ns, allowed) in [("team-b", false), ("team-a", true), ("team-b", false)] {
            let (status, out) =
                conn.post("/validate", body(ES, "CREATE", Some(ns), Some(es.clone()), None)).await.expect("post");
            assert_eq!(status, 200);
            let v: Value = serde_json::from_slice(&out).expect("json");
            assert_eq!(v["response"]["allowed"], allowed, "{v}");
        }
        let (status, out) =
            conn.post("/mutate", body(ES, "CREATE", Some("team-a"), Some(es), None)).await.expect("post");
        assert_eq!(status, 200);
        let v: Value = serde_json::from_slice(&out).expect("json");
        assert_eq!(v["response"]["patchType"], "JSONPatch", "{v}");

        // Not reviews: JSON errors, and the connection stays usable.
        let (status, out) = conn.post("/validate", b"{not json".to_vec()).await.expect("post");
        assert_eq!(status, 400);
        let v: Value = serde_json::from_slice(&out).expect("json error");
        assert!(v["error"].as_str().expect("error").contains("not valid JSON"), "{v}");
        let (status, _) = conn.post("/nowhere", b"{}".to_vec()).await.expect("post");
        assert_eq!(status, 404);

        let (status, text) = http_get(s.health, "/metrics").await;
        assert_eq!(status, 200);
        assert!(text.contains("keyward_webhook_review_duration_seconds_count{webhook=\"validate\",kind=\"ExternalSecret\",operation=\"CREATE\",decision=\"denied\"} 2"), "{text}");
        assert!(text.contains("keyward_webhook_bad_requests_total 1"), "{text}");
        // controller-runtime's names, by path and HTTP status; unknown paths make no series.
        for line in [
            "controller_runtime_webhook_requests_total{webhook=\"/validate\",code=\"200\"} 3",
            "controller_runtime_webhook_requests_total{webhook=\"/validate\",code=\"400\"} 1",
            "controller_runtime_webhook_requests_total{webhook=\"/validate\",code=\"500\"} 0",
            "controller_runtime_webhook_requests_total{webhook=\"/mutate\",code=\"200\"} 1",
            "controller_runtime_webhook_latency_seconds_count{webhook=\"/validate\"} 4",
            "controller_runtime_webhook_requests_in_flight{webhook=\"/validate\"} 0",
            "keyward_build_info{component=\"webhook\",",
            "# TYPE process_resident_memory_bytes gauge",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
        assert!(!text.contains("nowhere"), "{text}");
        assert_eq!(http_get(s.health, "/healthz").await.0, 200);
        assert_eq!(http_get(s.health, "/readyz").await.0, 200);
    }

    #[tokio::test]
    async fn oversized_bodies_are_refused_with_a_json_error() {
        let s = start(caches(), |st| st.limits.max_body_bytes = 1024).await;
        let mut conn = connect(&s).await;
        let (status, out) = conn.post("/validate", vec![b' '; 4096]).await.expect("post");
        assert_eq!(status, 413);
        let v: Value = serde_json::from_slice(&out).expect("json error");
        assert!(v["error"].is_string(), "{v}");
    }

    #[tokio::test]
    async fn a_body_that_never_arrives_times_out_with_a_json_error() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let s = start(caches(), |st| st.limits.request_timeout = Duration::from_millis(300)).await;
        let config = client_config(s.ca.cert_pem()).expect("config");
        let tcp = tokio::net::TcpStream::connect(s.addr).await.expect("connect");
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1".to_string()).expect("name");
        let mut tls = tokio_rustls::TlsConnector::from(config).connect(name, tcp).await.expect("handshake");
        tls.write_all(b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"apiVersion\"")
            .await
            .expect("write");
        tls.flush().await.expect("flush");
        let mut buf = vec![0u8; 4096];
        let n = tokio::time::timeout(Duration::from_secs(5), tls.read(&mut buf))
            .await
            .expect("answered before the client gave up")
            .expect("read");
        let text = String::from_utf8_lossy(&buf[..n]);
        assert!(text.starts_with("HTTP/1.1 408"), "{text}");
        assert!(text.contains("did not arrive in time"), "{text}");
    }

    #[tokio::test]
    async fn readiness_waits_for_the_caches() {
        let s = start(Caches::new(), |_| {}).await;
        let (status, text) = http_get(s.health, "/readyz").await;
        assert_eq!(status, 503);
        assert!(text.contains("caches not synced: namespaces, clusterproviders"), "{text}");
        s.state.caches.mark_all_synced();
        assert_eq!(http_get(s.health, "/readyz").await.0, 200);
        s.state.shutting_down.store(true, std::sync::atomic::Ordering::SeqCst);
        assert_eq!(http_get(s.health, "/readyz").await.0, 503);
    }

    #[tokio::test]
    async fn a_rotated_certificate_is_served_without_restart() {
        let s = start(caches(), |_| {}).await;
        let first = connect(&s).await.peer_certificate.expect("cert");
        assert!(!s.cert.reload_if_changed().expect("reload"), "unchanged files are not reloaded");
        // Rotate the way the kubelet does: new files, then the ..data symlink swap.
        write_leaf(&s.ca, s.dir.path());
        assert!(s.cert.reload_if_changed().expect("reload"));
        let second = connect(&s).await.peer_certificate.expect("cert");
        assert_ne!(first, second);
        assert_eq!(s.cert.chain()[0], second);
        // A broken rotation keeps the last good certificate.
        std::fs::write(s.dir.path().join("..data").join("tls.key"), "garbage").expect("write");
        assert!(s.cert.reload_if_changed().is_err());
        assert_eq!(connect(&s).await.peer_certificate.expect("cert"), second);
    }

    /// One review over a new HTTP/1.1 TLS connection (keep-alive, the default): the answer's
    /// header block, and whether the server then closed the connection.
    async fn review_over_http1(s: &Server) -> (String, bool) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let config = client_config(s.ca.cert_pem()).expect("config");
        let tcp = tokio::net::TcpStream::connect(s.addr).await.expect("connect");
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1".to_string()).expect("name");
        let mut tls = tokio_rustls::TlsConnector::from(config).connect(name, tcp).await.expect("handshake");
        let es = external_secret("db", json!({"name": "shared", "kind": "ClusterProvider"}));
        let review = body(ES, "CREATE", Some("team-a"), Some(es), None);
        let head = format!(
            "POST /validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            review.len()
        );
        tls.write_all(head.as_bytes()).await.expect("write");
        tls.write_all(&review).await.expect("write");
        tls.flush().await.expect("flush");
        let mut received = Vec::new();
        let mut buf = vec![0u8; 8192];
        let (headers, body_len) = loop {
            let n = tls.read(&mut buf).await.expect("read");
            assert!(n > 0, "closed before an answer: {}", String::from_utf8_lossy(&received));
            received.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&received).to_string();
            if let Some(end) = text.find("\r\n\r\n") {
                let headers = text[..end].to_ascii_lowercase();
                let len = headers
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse::<usize>().ok())
                    .expect("content-length");
                break (headers, end + 4 + len);
            }
        };
        while received.len() < body_len {
            let n = tls.read(&mut buf).await.expect("read");
            assert!(n > 0, "closed before the whole answer");
            received.extend_from_slice(&buf[..n]);
        }
        // A closed connection reads end-of-stream at once; an open one waits for more (2 s: a
        // busy machine may take a moment to close).
        let closed =
            matches!(tokio::time::timeout(Duration::from_secs(2), tls.read(&mut buf)).await, Ok(Ok(0)) | Ok(Err(_)));
        (headers, closed)
    }

    #[tokio::test]
    async fn while_shutting_down_http1_answers_close_their_connection() {
        let s = start(caches(), |_| {}).await;
        let (headers, closed) = review_over_http1(&s).await;
        assert!(headers.starts_with("http/1.1 200"), "{headers}");
        assert!(!headers.contains("connection: close"), "{headers}");
        assert!(!closed, "a connection is kept for the next review");
        // Shutdown has begun (readiness already fails, the delay has not passed): answers still
        // come, and each tells the client not to reuse the connection.
        s.state.shutting_down.store(true, std::sync::atomic::Ordering::SeqCst);
        let (headers, closed) = review_over_http1(&s).await;
        assert!(headers.starts_with("http/1.1 200"), "{headers}");
        assert!(headers.contains("connection: close"), "{headers}");
        assert!(closed, "the server closes the connection after the answer");
    }

    #[tokio::test]
    async fn shutdown_drains_a_review_in_flight() {
        // A review that waits for a namespace the cache does not know yet is in flight while
        // shutdown starts; it still gets its answer.
        let mut s = start(caches(), |st| st.limits.namespace_wait = Duration::from_millis(600)).await;
        let mut conn = connect(&s).await;
        let es = external_secret("db", json!({"name": "shared", "kind": "ClusterProvider"}));
        let pending =
            tokio::spawn(async move { conn.post("/validate", body(ES, "CREATE", Some("late"), Some(es), None)).await });
        tokio::time::sleep(Duration::from_millis(150)).await;
        s.stop.take().expect("stop").send(()).expect("signal");
        let (status, out) = pending.await.expect("join").expect("answered during drain");
        assert_eq!(status, 200);
        let v: Value = serde_json::from_slice(&out).expect("json");
        assert_eq!(v["response"]["allowed"], false);
        tokio::time::timeout(Duration::from_secs(5), &mut s.task).await.expect("server stopped").expect("join");
        // New connections are refused once drained.
        let config = client_config(s.ca.cert_pem()).expect("config");
        assert!(Connection::connect(config, s.addr, "127.0.0.1").await.is_err());
    }
}

#[test]
fn a_generator_ref_to_a_cluster_generator_follows_its_conditions_and_unserved_kinds_are_refused() {
    let c = caches();
    c.write().cluster_generators.insert(
        "prod-passwords".into(),
        Ok(serde_json::from_value(json!([{"namespaceSelector": {"matchLabels": {"env": "prod"}}}]))
            .expect("conditions")),
    );
    let es = |kind: &str, name: &str| {
        json!({
            "apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret", "metadata": {"name": "gen"},
            "spec": {"refreshInterval": "1h", "target": {"name": "gen"},
                     "dataFrom": [{"sourceRef": {"generatorRef": {"kind": kind, "name": name}}}]}
        })
    };
    assert!(validate(ES, "CREATE", Some("team-a"), es("ClusterGenerator", "prod-passwords"), &c).allowed);
    denied_with(
        &validate(ES, "CREATE", Some("team-b"), es("ClusterGenerator", "prod-passwords"), &c),
        403,
        &[
            "spec.dataFrom[0].sourceRef.generatorRef: ClusterGenerator \"prod-passwords\" does not allow namespace \"team-b\"",
        ],
    );
    let d = validate(ES, "CREATE", Some("team-b"), es("ClusterGenerator", "later"), &c);
    assert!(d.allowed, "{d:?}");
    assert!(d.warnings[0].contains("ClusterGenerator \"later\" does not exist yet"), "{d:?}");
    let d = validate(ES, "CREATE", Some("team-b"), es("Password", "pw"), &c);
    assert!(d.allowed && d.warnings.is_empty(), "a namespaced generator is the namespace's own: {d:?}");
    // One of upstream's kinds Keyward does not serve: admitted, so upstream's manifests apply
    // unchanged, with a warning; an unknown kind is refused.
    let d = validate(ES, "CREATE", Some("team-b"), es("GithubAccessToken", "v"), &c);
    assert!(d.allowed, "{d:?}");
    assert!(
        d.warnings.iter().any(|w| w.starts_with("spec.dataFrom[0].sourceRef.generatorRef: ")
            && w.contains("\"GithubAccessToken\" is not served")),
        "{d:?}"
    );
    denied_with(
        &validate(ES, "CREATE", Some("team-b"), es("Passwords", "v"), &c),
        400,
        &["spec.dataFrom[0].sourceRef.generatorRef", "unknown generator kind \"Passwords\""],
    );
    let ps = json!({
        "apiVersion": "external-secrets.io/v1alpha1", "kind": "PushSecret", "metadata": {"name": "p"},
        "spec": {"secretStoreRefs": [{"name": "local", "kind": "Provider"}],
                 "selector": {"generatorRef": {"kind": "ClusterGenerator", "name": "prod-passwords"}},
                 "data": [{"match": {"secretKey": "password", "remoteRef": {"remoteKey": "r"}}}]}
    });
    denied_with(
        &validate(PS, "CREATE", Some("team-b"), ps.clone(), &c),
        403,
        &["spec.selector.generatorRef: ClusterGenerator \"prod-passwords\" does not allow namespace \"team-b\""],
    );
    assert!(validate(PS, "CREATE", Some("team-a"), ps, &c).allowed);
}

const WEBHOOK_GEN: (&str, &str, &str) = ("generators.external-secrets.io", "v1alpha1", "Webhook");
const CLUSTER_GEN: (&str, &str, &str) = ("generators.external-secrets.io", "v1alpha1", "ClusterGenerator");

fn webhook_generator(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "generators.external-secrets.io/v1alpha1", "kind": "Webhook",
           "metadata": {"name": name}, "spec": spec})
}

fn cluster_generator(name: &str, kind: &str, generator: Value) -> Value {
    json!({"apiVersion": "generators.external-secrets.io/v1alpha1", "kind": "ClusterGenerator",
           "metadata": {"name": name}, "spec": {"kind": kind, "generator": generator}})
}

/// Upstream's Webhook generator example (docs/snippets/generator-webhook.yaml), as printed.
fn upstream_webhook_generator_spec() -> Value {
    json!({
        "url": "http://httpbin.org/get?parameter={{ .auth.param }}",
        "result": {"jsonPath": "$.args"},
        "headers": {"Content-Type": "application/json",
                    "Authorization": "Basic {{ print .auth.username \":\" .auth.password | b64enc }}"},
        "secrets": [{"name": "auth", "secretRef": {"name": "webhook-credentials"}}],
    })
}

#[test]
fn webhook_generators_are_checked_with_the_webhook_store_rules() {
    let c = caches();
    let good = webhook_generator("webhook", upstream_webhook_generator_spec());
    let d = validate(WEBHOOK_GEN, "CREATE", Some("team-a"), good, &c);
    assert!(d.allowed && d.warnings.is_empty(), "upstream's example is admitted: {d:?}");
    // A field the store block does not know is kept, as upstream keeps it; a Secret of another
    // namespace is the webhook provider's to refuse when the generator runs in a namespace.
    let mut spec = upstream_webhook_generator_spec();
    spec["secrets"][0]["secretRef"]["namespace"] = json!("kube-system");
    spec["somethingNew"] = json!(true);
    assert!(validate(WEBHOOK_GEN, "CREATE", Some("team-a"), webhook_generator("w", spec), &c).allowed);

    let mut bad = upstream_webhook_generator_spec();
    bad["method"] = json!("BREW");
    bad["body"] = json!("{{ .auth.username");
    let d = validate(WEBHOOK_GEN, "CREATE", Some("team-a"), webhook_generator("bad", bad.clone()), &c);
    denied_with(
        &d,
        400,
        &[
            "Webhook \"bad\" is invalid",
            "spec.method: \"BREW\" is not one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS",
            "spec.body: not a valid template",
        ],
    );
    let d = validate(WEBHOOK_GEN, "UPDATE", Some("team-a"), webhook_generator("bad", json!({"url": "ftp://h/"})), &c);
    denied_with(&d, 400, &["spec.url: must start with http:// or https://"]);
    let d = validate(WEBHOOK_GEN, "CREATE", Some("team-a"), webhook_generator("bad", json!({"url": 5})), &c);
    denied_with(&d, 400, &["spec: not a Webhook generator spec"]);
    let mut ntlm = upstream_webhook_generator_spec();
    ntlm["auth"] =
        json!({"ntlm": {"usernameSecret": {"name": "u", "key": "u"}, "passwordSecret": {"name": "u", "key": "p"}}});
    let d = validate(WEBHOOK_GEN, "CREATE", Some("team-a"), webhook_generator("ntlm", ntlm), &c);
    denied_with(&d, 400, &["spec.auth.ntlm: NTLM authentication is not supported"]);

    // The same spec in a ClusterGenerator, named at its own path.
    let d = validate(CLUSTER_GEN, "CREATE", None, cluster_generator("cg", "Webhook", json!({"webhookSpec": bad})), &c);
    denied_with(
        &d,
        400,
        &[
            "ClusterGenerator \"cg\" is invalid",
            "spec.generator.webhookSpec.method: \"BREW\" is not one of",
            "spec.generator.webhookSpec.body: not a valid template",
        ],
    );
    let ok = cluster_generator("cg", "Webhook", json!({"webhookSpec": upstream_webhook_generator_spec()}));
    assert!(validate(CLUSTER_GEN, "CREATE", None, ok, &c).allowed);
    let d = validate(CLUSTER_GEN, "CREATE", None, cluster_generator("cg", "Webhook", json!({"fakeSpec": {}})), &c);
    denied_with(&d, 400, &["spec.generator.webhookSpec is required for kind Webhook"]);
    // Other kinds are not checked here.
    let pw = cluster_generator("pw", "Password", json!({"passwordSpec": {"length": 12}}));
    assert!(validate(CLUSTER_GEN, "CREATE", None, pw.clone(), &c).allowed);
    // Nothing to default.
    let d = run(Mode::Mutate, &body(CLUSTER_GEN, "CREATE", None, Some(pw), None), &c);
    assert!(d.allowed && d.patch.as_ref().is_some_and(|p| p.0.is_empty()), "{d:?}");
}

mod limits;

mod cluster_push_secret;
