//! The row's store blocks as the webhook, the reconciler and the provider read them, through
//! `keyward_crds::rules` with this row as the plug-in.

use keyward_crds::rules::{
    Plugins, ProviderIdentityNamespaces, StoreBackend, cluster_secret_store_references, secret_store_boundary,
    secret_store_warnings, store_backend, validate_secret_store,
};
use keyward_crds::secret_store::SecretStoreSpec;

use super::*;

const ROW: Plugins<'static> = &[&KIND];

fn spec(yaml: &str) -> SecretStoreSpec {
    serde_yaml::from_str(yaml).expect("test manifest parses")
}

/// The configuration a store is served with, as the provider reads it.
fn served(yaml: &str) -> KubernetesConfig {
    let b = store_backend(&spec(yaml).provider, ROW).expect("served");
    assert_eq!(b.provider_name(), "kubernetes");
    let StoreBackend::Plugin { kind, key, spec } = b else { panic!("a plug-in block") };
    assert_eq!(kind, &KIND);
    KubernetesConfig::from_block(key, spec).expect("reads")
}

/// Field errors, then (for a SecretStore) boundary errors, as admission reports them.
fn errors(ns: Option<&str>, yaml: &str) -> Vec<String> {
    let s = spec(yaml);
    let boundary = ns.map(|ns| secret_store_boundary(ns, &s, ROW, &ProviderIdentityNamespaces::NONE));
    [validate_secret_store(ns, &s, ROW)]
        .into_iter()
        .chain(boundary)
        .filter_map(Result::err)
        .flat_map(|e| e.0.iter().map(ToString::to_string).collect::<Vec<_>>())
        .collect()
}

#[test]
fn kubernetes_translates_to_the_kubernetes_configuration() {
    let KubernetesConfig::Secrets(k) = served(
        "provider:\n  kubernetes:\n    server: {url: 'https://k', caProvider: {type: ConfigMap, name: ca, key: ca.crt}}\n    \
         auth: {serviceAccount: {name: reader, audiences: [a]}}\n",
    ) else {
        panic!("kubernetes")
    };
    assert_eq!(k.remote_namespace, "default", "upstream default");
    assert_eq!(k.server.url.as_deref(), Some("https://k"));
    assert_eq!(k.auth.and_then(|a| a.service_account).map(|sa| sa.audiences), Some(vec!["a".to_string()]));
    assert!(!k.allow_remote_namespace_override);
    let KubernetesConfig::Secrets(k) =
        served("provider: {kubernetes: {remoteNamespace: apps, authRef: {name: kc, key: config}}}")
    else {
        panic!("kubernetes")
    };
    assert_eq!(k.remote_namespace, "apps");
    assert_eq!(k.auth_ref.map(|r| r.name), Some("kc".to_string()));
    // Without the row the block is not served.
    let s = spec("provider: {kubernetes: {authRef: {name: kc, key: config}}}");
    assert!(store_backend(&s.provider, &[]).is_err());
}

#[test]
fn upstream_store_shapes_it_admits_are_admitted_with_a_warning() {
    // A Kubernetes store without credentials (upstream fails it at the first sync).
    let k8s = "provider: {kubernetes: {server: {url: 'https://k', caProvider: {type: ConfigMap, name: ca}}}}";
    assert_eq!(errors(Some("a"), k8s), Vec::<String>::new());
    let w = secret_store_warnings(&spec(k8s), ROW);
    assert!(w.len() == 1 && w[0].starts_with("spec.provider.kubernetes: neither auth nor authRef"), "{w:?}");
    let with = "provider: {kubernetes: {authRef: {name: kc, key: config}}}";
    assert!(secret_store_warnings(&spec(with), ROW).is_empty());
    // The provider itself requires credentials: the store reports Ready=False.
    let KubernetesConfig::Secrets(k) = served(k8s) else { panic!("kubernetes") };
    assert!(ProviderSpec::validate(&KubernetesConfig::Secrets(k)).is_err());
}

#[test]
fn kubernetes_stores_are_validated_by_the_kinds_rules() {
    let got = errors(Some("a"), "provider: {kubernetes: {auth: {token: {bearerToken: {name: t}}}}}");
    assert!(
        got.iter().any(|e| e.contains("spec.provider.kubernetes.auth.token.bearerToken.key: must not be empty")),
        "{got:?}"
    );
    let got = errors(Some("a"), "provider: {kubernetes: {remoteNamespace: [1]}}");
    assert!(got.iter().any(|e| e.starts_with("spec.provider.kubernetes: not a Kubernetes configuration")), "{got:?}");
}

#[test]
fn namespaces_in_references_only_for_cluster_secret_stores() {
    let yaml = "provider:\n  kubernetes:\n    auth: {serviceAccount: {name: reader, namespace: creds}}\n";
    let got = errors(Some("team-a"), yaml);
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(got[0].starts_with("spec.provider.kubernetes.auth.serviceAccount.namespace: \"creds\" names"), "{got:?}");
    assert!(got[0].ends_with("or have the cluster operator serve this store through a ClusterSecretStore"), "{got:?}");
    assert_eq!(errors(Some("creds"), yaml), Vec::<String>::new(), "its own namespace is fine");
    assert_eq!(errors(None, yaml), Vec::<String>::new(), "a ClusterSecretStore is the operator's");
    let token = "provider:\n  kubernetes:\n    auth: {token: {bearerToken: {name: t, key: k, namespace: other}}}\n";
    assert!(errors(Some("team-a"), token)[0].contains("auth.token.bearerToken.namespace"));
}

#[test]
fn crd_stores_are_served_checked_and_bounded_by_their_own_rules() {
    let crd_yaml =
        "provider: {crd: {auth: {serviceAccount: {name: r}}, resource: {group: '', version: v1, kind: ConfigMap}}}";
    let crd_store = spec(crd_yaml);
    let b = store_backend(&crd_store.provider, ROW).expect("served");
    assert_eq!((b.provider_name(), b.store_key()), ("kubernetes", "crd"));
    let KubernetesConfig::Crd(c) = served(crd_yaml) else { panic!("a crd read") };
    assert_eq!(c.resource.kind, "ConfigMap");
    assert_eq!(validate_secret_store(Some("a"), &crd_store, ROW), Ok(()));

    // Field errors carry the store's own key.
    let bad = spec("provider: {crd: {resource: {group: '', version: v1, kind: Secret}}}");
    let e = validate_secret_store(Some("a"), &bad, ROW).unwrap_err().to_string();
    assert!(e.contains("spec.provider.crd: set exactly one of auth or authRef"), "{e}");
    assert!(e.contains("spec.provider.crd.resource.kind: Secrets are read"), "{e}");

    // A SecretStore's references stay in its namespace, as for kubernetes.
    let none = &ProviderIdentityNamespaces::NONE;
    let across = spec(
        "provider: {crd: {auth: {serviceAccount: {name: r, namespace: other}}, resource: {group: '', version: v1, kind: ConfigMap}}}",
    );
    let e = secret_store_boundary("a", &across, ROW, none).unwrap_err().to_string();
    assert!(e.contains("spec.provider.crd.auth.serviceAccount.namespace"), "{e}");
    assert_eq!(secret_store_boundary("a", &crd_store, ROW, none), Ok(()));

    // A ClusterSecretStore pins the CA it trusts, as for kubernetes, at the block's own paths.
    for key in ["crd", "kubernetes"] {
        let ca = spec(&format!(
            "provider: {{{key}: {{server: {{caProvider: {{type: ConfigMap, name: kube-root-ca.crt, key: ca.crt}}}}, \
             auth: {{serviceAccount: {{name: r, namespace: es}}}}, resource: {{group: '', version: v1, kind: ConfigMap}}}}}}"
        ));
        let e = cluster_secret_store_references(&store_backend(&ca.provider, ROW).expect("served")).unwrap_err();
        assert!(e.to_string().contains(&format!("spec.provider.{key}.server.caProvider.namespace")), "{e}");
    }

    // And the operator's credentials the row pins (its block's `pinned`), in either block.
    for (key, auth, field) in [
        ("kubernetes", "token: {bearerToken: {name: t, key: token}}", "auth.token.bearerToken"),
        (
            "crd",
            "cert: {clientCert: {name: c, key: tls.crt}, clientKey: {name: c, key: tls.key}}",
            "auth.cert.clientCert",
        ),
    ] {
        let store = spec(&format!(
            "provider: {{{key}: {{server: {{url: 'https://k'}}, auth: {{{auth}}}, \
             resource: {{group: '', version: v1, kind: ConfigMap}}}}}}"
        ));
        let e = cluster_secret_store_references(&store_backend(&store.provider, ROW).expect("served")).unwrap_err();
        assert_eq!(
            e.0.iter().map(|e| e.field.as_str()).collect::<Vec<_>>(),
            [format!("spec.provider.{key}.{field}.namespace")]
        );
    }

    // The process serving the row keeps both its blocks, and no other's.
    let mut kept = crd_store.clone();
    kept.provider.keep_only(&["kubernetes", "crd"]);
    assert_eq!(kept.provider, crd_store.provider);
    kept.provider.keep_only(&["vault"]);
    assert!(kept.provider.other.get("crd").is_some_and(|c| c.is_null()));
}

/// The row's blocks are typed in both store CRDs with the schemas the typed fields had.
#[test]
fn the_blocks_are_typed_with_upstreams_shapes() {
    for key in ["kubernetes", CRD_KEY] {
        let block = KIND.stores.iter().find(|b| b.key == key).expect("a block");
        let schema = (block.schema.expect("its own schema"))().expect("typed");
        assert!(schema.description.as_deref().is_some_and(|d| d.contains("(served by the Kubernetes")), "{key}");
        let properties = schema.properties.expect("properties");
        assert!(properties.contains_key("server") && properties.contains_key("auth"), "{key}");
    }
}
