//! The rules of upstream's `openBao` and `crd` store blocks: what each translates to (the Vault
//! and the Kubernetes provider's configurations), its field rules, and for `crd` which objects
//! and properties a read may reach. The webhook, the reconciler and the provider processes all
//! call these.

use regex::Regex;

use super::ValidationErrors;
use super::stores::validate_vault;
use super::validate::check_kubernetes;
use crate::provider_config::KubernetesSpec;
use crate::store_blocks::{CrdReadSpec, CrdStoreProvider, CrdWhitelistRule, OpenBaoStoreProvider};
use crate::vault::{VaultAuth, VaultSpec};

/// Store blocks served by the process that serves another key, as (block, that key): a process
/// keeps both when it keeps only what it serves.
pub const SHARED_STORE_KEYS: [(&str, &str); 2] = [("openBao", "vault"), ("crd", "kubernetes")];

/// The Vault configuration an `openBao` block means: the same fields, the rest at Vault's
/// defaults (OpenBao speaks Vault's API).
pub fn open_bao_vault(o: &OpenBaoStoreProvider) -> VaultSpec {
    let auth = o.auth.clone().unwrap_or_default();
    VaultSpec {
        server: o.server.clone(),
        path: o.path.clone(),
        version: o.version,
        namespace: o.namespace.clone(),
        ca_bundle: o.ca_bundle.clone(),
        ca_provider: o.ca_provider.clone(),
        auth: VaultAuth {
            namespace: auth.namespace,
            token_secret_ref: auth.token_secret_ref,
            app_role: auth.app_role,
            user_pass: auth.user_pass,
            ..VaultAuth::default()
        },
        ..VaultSpec::default()
    }
}

/// An `openBao` block's field errors: Vault's rules for the fields it shares, and upstream's
/// rule that an `auth` names exactly one login (without `auth`, as for Vault, the provider's own
/// identity).
pub fn validate_open_bao(o: &OpenBaoStoreProvider) -> Result<(), ValidationErrors> {
    let mut errs = validate_vault(&open_bao_vault(o)).err().unwrap_or_default();
    if o.auth.as_ref().is_some_and(|a| a.token_secret_ref.is_none() && a.app_role.is_none() && a.user_pass.is_none()) {
        errs.push("spec.auth", "set exactly one of appRole, tokenSecretRef or userPass");
    }
    errs.into_result()
}

/// What the Kubernetes provider serves a `crd` block with: its connection as a Kubernetes
/// configuration, the kind it reads and its allow rules.
pub fn crd_read_spec(c: &CrdStoreProvider) -> CrdReadSpec {
    CrdReadSpec {
        connection: KubernetesSpec {
            server: c.server.clone(),
            auth: c.auth.clone(),
            auth_ref: c.auth_ref.clone(),
            // Unused: a read's namespace is the store's, or the key's for a ClusterSecretStore.
            remote_namespace: "default".into(),
            allow_remote_namespace_override: false,
        },
        resource: c.resource.clone(),
        whitelist: c.whitelist.as_ref().map(|w| w.rules.clone()).unwrap_or_default(),
    }
}

/// A `crd` block's field errors: the Kubernetes connection's rules with credentials required
/// (upstream requires `auth` or `authRef`), a kind, Secrets refused (the Kubernetes block reads
/// those), and allow rules that say something and compile.
pub fn validate_crd(c: &CrdReadSpec) -> Result<(), ValidationErrors> {
    let mut errs = check_kubernetes(&c.connection, true).err().unwrap_or_default();
    let r = &c.resource;
    if r.version.is_empty() {
        errs.push("spec.resource.version", "must not be empty: the API version of the kind, e.g. v1alpha1");
    }
    if r.kind.is_empty() {
        errs.push("spec.resource.kind", "must not be empty: the kind read, e.g. ConfigMap");
    }
    if r.group.is_empty() && r.kind == "Secret" {
        errs.push("spec.resource.kind", "Secrets are read through spec.provider.kubernetes, not crd");
    }
    for (i, rule) in c.whitelist.iter().enumerate() {
        let field = format!("spec.whitelist.rules[{i}]");
        if rule.name.is_empty() && rule.namespace.is_empty() && rule.properties.is_empty() {
            errs.push(field.clone(), "set name, namespace or properties: a rule without any allows nothing");
        }
        let patterns = [("name", &rule.name), ("namespace", &rule.namespace)].into_iter();
        let properties = rule.properties.iter().enumerate().map(|(j, p)| (format!("properties[{j}]"), p));
        for (at, pattern) in patterns.map(|(a, p)| (a.to_string(), p)).chain(properties) {
            if let Err(e) = Regex::new(pattern) {
                errs.push(format!("{field}.{at}"), format!("{pattern:?} is not a regular expression: {e}"));
            }
        }
    }
    errs.into_result()
}

/// Which object a `crd` store's remote key names, as (namespace, name). A SecretStore reads its
/// own namespace only, so its key is a bare name (`store_namespace` given); a ClusterSecretStore's
/// key is `namespace/name`, or a bare name for a cluster-scoped kind (`store_namespace` `None`).
pub fn crd_object_ref<'k>(
    key: &'k str,
    store_namespace: Option<&'k str>,
) -> Result<(Option<&'k str>, &'k str), String> {
    let (ns, name) = match (store_namespace, key.split_once('/')) {
        (Some(_), Some(_)) => {
            return Err(format!(
                "remote key {key:?} names a namespace: a SecretStore's crd store reads objects of its own namespace \
                 only, by name; use a ClusterSecretStore to read another namespace"
            ));
        }
        (Some(ns), None) => (Some(ns), key),
        (None, Some((ns, name))) => (Some(ns), name),
        (None, None) => (None, key),
    };
    let valid = |s: &str| !s.is_empty() && !s.contains('/') && s != "." && s != "..";
    if !valid(name) || ns.is_some_and(|n| !valid(n)) {
        return Err(format!("remote key {key:?} is not an object name (or namespace/name for a ClusterSecretStore)"));
    }
    Ok((ns, name))
}

/// Whether a `crd` store's allow rules let a read of object `name` (in `namespace`, matched only
/// for a ClusterSecretStore, `cluster`) and `property` (empty: the whole object) through: no
/// rules allow everything; otherwise one rule must match every filter it sets. A rule whose
/// pattern does not compile (refused at admission) matches nothing.
pub fn crd_whitelist_allows(
    rules: &[CrdWhitelistRule],
    cluster: bool,
    namespace: Option<&str>,
    name: &str,
    property: &str,
) -> bool {
    let matches = |pattern: &str, value: &str| Regex::new(pattern).is_ok_and(|r| r.is_match(value));
    rules.is_empty()
        || rules.iter().any(|rule| {
            let name_ok = rule.name.is_empty() || matches(&rule.name, name);
            let ns_ok = !cluster || rule.namespace.is_empty() || namespace.is_some_and(|n| matches(&rule.namespace, n));
            let props_ok = rule.properties.is_empty()
                || (!property.is_empty() && rule.properties.iter().any(|p| matches(p, property)));
            let says_something = !(rule.name.is_empty() && rule.namespace.is_empty() && rule.properties.is_empty());
            says_something && name_ok && ns_ok && props_ok
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secret_store::SecretStoreSpec;

    fn spec(yaml: &str) -> SecretStoreSpec {
        serde_yaml::from_str(yaml).expect("test manifest parses")
    }

    #[test]
    fn open_bao_is_the_vault_block_it_is_a_subset_of() {
        let s = spec(
            "provider: {openBao: {server: 'https://bao:8200', path: kv, version: v1, namespace: ns1, \
             caProvider: {type: ConfigMap, name: ca}, auth: {namespace: root, userPass: {path: up, username: app, \
             secretRef: {name: pw, key: password}}}}}",
        );
        let v = open_bao_vault(s.provider.open_bao.as_ref().expect("typed"));
        assert_eq!(v.server, "https://bao:8200");
        assert_eq!((v.path.as_deref(), v.version), (Some("kv"), crate::vault::VaultKvVersion::V1));
        assert_eq!(v.namespace.as_deref(), Some("ns1"));
        assert_eq!(v.ca_provider.as_ref().map(|c| c.name.as_str()), Some("ca"));
        assert_eq!(v.auth.namespace.as_deref(), Some("root"));
        assert_eq!(v.auth.methods(), ["userPass"]);
        assert_eq!(v.auth.user_pass.as_ref().map(|u| u.username.as_str()), Some("app"));
        let default = open_bao_vault(&OpenBaoStoreProvider { server: "http://b".into(), ..Default::default() });
        assert_eq!(default.version, crate::vault::VaultKvVersion::V2, "v2 by default, as upstream");
        assert!(default.auth.methods().is_empty());
    }

    #[test]
    fn open_bao_rules() {
        let errors = |yaml: &str| {
            let s = spec(&format!("provider: {{openBao: {yaml}}}"));
            validate_open_bao(s.provider.open_bao.as_ref().expect("typed"))
                .err()
                .map(|e| e.0.iter().map(|e| format!("{}: {}", e.field, e.message)).collect::<Vec<_>>())
                .unwrap_or_default()
        };
        assert!(errors("{server: 'http://b', auth: {tokenSecretRef: {name: t, key: token}}}").is_empty());
        assert!(errors("{server: 'http://b'}").is_empty(), "no auth: the provider's own identity");
        let none = errors("{server: 'http://b', auth: {namespace: ns}}");
        assert_eq!(none, ["spec.auth: set exactly one of appRole, tokenSecretRef or userPass"]);
        let two = errors(
            "{server: 'http://b', auth: {tokenSecretRef: {name: t, key: k}, appRole: {roleId: r, secretRef: {name: s, key: k}}}}",
        );
        assert!(two.len() == 1 && two[0].starts_with("spec.auth: tokenSecretRef and appRole are set"), "{two:?}");
        let server = errors("{server: 'ftp://b', auth: {tokenSecretRef: {name: t, key: k}}}");
        assert!(server.len() == 1 && server[0].starts_with("spec.server: "), "{server:?}");
    }

    fn crd(yaml: &str) -> CrdReadSpec {
        crd_read_spec(spec(&format!("provider: {{crd: {yaml}}}")).provider.crd.as_ref().expect("typed"))
    }

    fn crd_errors(yaml: &str) -> Vec<String> {
        validate_crd(&crd(yaml))
            .err()
            .map(|e| e.0.iter().map(|e| format!("{}: {}", e.field, e.message)).collect())
            .unwrap_or_default()
    }

    #[test]
    fn crd_rules() {
        let ok = "{auth: {serviceAccount: {name: r}}, resource: {group: '', version: v1, kind: ConfigMap}}";
        assert_eq!(crd_errors(ok), Vec::<String>::new());
        let c = crd(ok);
        assert_eq!((c.resource.kind.as_str(), c.connection.auth.is_some()), ("ConfigMap", true));
        let none = crd_errors("{resource: {group: '', version: v1, kind: ConfigMap}}");
        assert_eq!(none, ["spec: set exactly one of auth or authRef"]);
        let secret =
            crd_errors("{auth: {serviceAccount: {name: r}}, resource: {group: '', version: v1, kind: Secret}}");
        assert_eq!(secret, ["spec.resource.kind: Secrets are read through spec.provider.kubernetes, not crd"]);
        let empty = crd_errors("{auth: {serviceAccount: {name: r}}, resource: {group: x.io, version: '', kind: ''}}");
        assert_eq!(empty.len(), 2, "{empty:?}");
        let rules = crd_errors(
            "{auth: {serviceAccount: {name: r}}, resource: {group: x.io, version: v1, kind: W}, \
             whitelist: {rules: [{}, {name: '('}, {properties: ['^spec$', '[']}]}}",
        );
        assert_eq!(rules.len(), 3, "{rules:?}");
        assert!(rules[0].starts_with("spec.whitelist.rules[0]: set name, namespace or properties"), "{rules:?}");
        assert!(rules[1].starts_with("spec.whitelist.rules[1].name: \"(\" is not a regular expression"), "{rules:?}");
        assert!(rules[2].starts_with("spec.whitelist.rules[2].properties[1]: "), "{rules:?}");
    }

    #[test]
    fn a_secret_store_reads_its_own_namespace_only() {
        assert_eq!(crd_object_ref("app", Some("team-a")), Ok((Some("team-a"), "app")));
        let across = crd_object_ref("team-b/app", Some("team-a")).unwrap_err();
        assert!(across.contains("names a namespace") && across.contains("ClusterSecretStore"), "{across}");
        assert_eq!(crd_object_ref("team-b/app", None), Ok((Some("team-b"), "app")));
        assert_eq!(crd_object_ref("cluster-wide", None), Ok((None, "cluster-wide")));
        for bad in ["", "a/", "/a", "a/b/c", "..", "../x"] {
            assert!(crd_object_ref(bad, None).is_err(), "{bad:?}");
        }
        assert!(crd_object_ref("..", Some("team-a")).is_err());
    }

    #[test]
    fn whitelist_rules_allow_as_upstream() {
        let rules =
            crd("{auth: {serviceAccount: {name: r}}, resource: {group: x, version: v1, kind: W}, whitelist: {rules: [\
             {name: '^app-'}, {name: '^team-', properties: ['^spec\\.password$']}, {namespace: '^prod$'}]}}")
            .whitelist;
        assert!(crd_whitelist_allows(&[], false, None, "anything", ""), "no rules: everything");
        assert!(crd_whitelist_allows(&rules, true, Some("a"), "app-x", ""));
        assert!(crd_whitelist_allows(&rules, true, Some("a"), "team-x", "spec.password"));
        assert!(!crd_whitelist_allows(&rules, true, Some("a"), "team-x", "spec.user"), "the property must match");
        assert!(!crd_whitelist_allows(&rules, true, Some("a"), "team-x", ""), "no property: rules needing one miss");
        assert!(crd_whitelist_allows(&rules, true, Some("prod"), "other", ""), "the namespace rule");
        assert!(!crd_whitelist_allows(&rules, true, Some("dev"), "other", ""));
        // A SecretStore ignores namespace filters, as upstream: the namespace-only rule then sets
        // nothing else and allows every object of the store's namespace.
        assert!(crd_whitelist_allows(&rules, false, Some("a"), "other", "spec.user"));
        let names = &rules[..2];
        assert!(!crd_whitelist_allows(names, false, Some("a"), "other", ""));
        let bad = [CrdWhitelistRule { name: "(".into(), ..Default::default() }];
        assert!(!crd_whitelist_allows(&bad, false, None, "x", ""), "a broken pattern matches nothing");
    }

    #[test]
    fn stores_name_them_and_the_vault_and_kubernetes_processes_serve_them() {
        use crate::rules::{
            ProviderIdentityNamespaces, StoreBackend, cluster_secret_store_references, secret_store_boundary,
            store_backend, validate_secret_store,
        };
        let bao = spec(
            "provider: {openBao: {server: 'http://bao:8200', path: secret, auth: {tokenSecretRef: {name: t, key: token}}}}",
        );
        let b = store_backend(&bao.provider, &[]).expect("served");
        assert_eq!((b.provider_name(), b.store_key()), ("vault", "openBao"));
        let StoreBackend::OpenBao(v) = &b else { panic!("{b:?}") };
        assert_eq!(v.auth.methods(), ["tokenSecretRef"]);
        assert_eq!(validate_secret_store(Some("a"), &bao, &[]), Ok(()));
        let crd_store = spec(
            "provider: {crd: {auth: {serviceAccount: {name: r}}, resource: {group: '', version: v1, kind: ConfigMap}}}",
        );
        let b = store_backend(&crd_store.provider, &[]).expect("served");
        assert_eq!((b.provider_name(), b.store_key()), ("kubernetes", "crd"));
        assert_eq!(validate_secret_store(Some("a"), &crd_store, &[]), Ok(()));

        // Field errors carry the store's own key.
        let bad = spec("provider: {openBao: {server: 'http://b', auth: {}}}");
        let e = validate_secret_store(Some("a"), &bad, &[]).unwrap_err().to_string();
        assert!(
            e.contains("spec.provider.openBao.auth: set exactly one of appRole, tokenSecretRef or userPass"),
            "{e}"
        );
        let bad = spec("provider: {crd: {resource: {group: '', version: v1, kind: Secret}}}");
        let e = validate_secret_store(Some("a"), &bad, &[]).unwrap_err().to_string();
        assert!(e.contains("spec.provider.crd: set exactly one of auth or authRef"), "{e}");
        assert!(e.contains("spec.provider.crd.resource.kind: Secrets are read"), "{e}");

        // A SecretStore's references stay in its namespace, as for vault and kubernetes.
        let none = &ProviderIdentityNamespaces::NONE;
        let across = spec(
            "provider: {openBao: {server: 'http://b', auth: {tokenSecretRef: {name: t, key: k, namespace: other}}}}",
        );
        let e = secret_store_boundary("a", &across, &[], none).unwrap_err().to_string();
        assert!(e.contains("spec.provider.openBao.auth.tokenSecretRef"), "{e}");
        let own = spec("provider: {openBao: {server: 'http://b'}}");
        let e = secret_store_boundary("a", &own, &[], none).unwrap_err().to_string();
        assert!(e.contains("spec.provider.openBao.auth"), "the provider's own token is refused to a tenant: {e}");
        let across = spec(
            "provider: {crd: {auth: {serviceAccount: {name: r, namespace: other}}, resource: {group: '', version: v1, kind: ConfigMap}}}",
        );
        let e = secret_store_boundary("a", &across, &[], none).unwrap_err().to_string();
        assert!(e.contains("spec.provider.crd.auth.serviceAccount.namespace"), "{e}");
        assert_eq!(secret_store_boundary("a", &crd_store, &[], none), Ok(()));

        // A ClusterSecretStore pins the CA it trusts, as for kubernetes.
        let ca = spec(
            "provider: {crd: {server: {caProvider: {type: ConfigMap, name: kube-root-ca.crt, key: ca.crt}}, \
             auth: {serviceAccount: {name: r, namespace: es}}, resource: {group: '', version: v1, kind: ConfigMap}}}",
        );
        let e = cluster_secret_store_references(&store_backend(&ca.provider, &[]).expect("served")).unwrap_err();
        assert!(e.to_string().contains("spec.provider.crd.server.caProvider.namespace"), "{e}");

        // The process that serves vault keeps openBao; the one serving kubernetes keeps crd.
        let mut kept = bao.clone();
        kept.provider.keep_only(&["vault"]);
        assert_eq!(kept.provider, bao.provider);
        kept.provider.keep_only(&["kubernetes"]);
        assert_eq!(kept.provider.open_bao, Some(Default::default()));
        let mut kept = crd_store.clone();
        kept.provider.keep_only(&["kubernetes"]);
        assert_eq!(kept.provider, crd_store.provider);
        kept.provider.keep_only(&["vault"]);
        assert_eq!(kept.provider.crd, Some(Default::default()));
    }
}
