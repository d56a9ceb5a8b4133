//! The references a ClusterSecretStore's configuration must give a namespace, as upstream
//! requires them to.
//!
//! A ClusterSecretStore is the operator's, and a reference in it without a namespace is read in
//! the namespace of each ExternalSecret or PushSecret that uses the store (upstream's "referent
//! authentication", meant for a tenant's own credentials). For what the configuration *trusts*
//! or *sends as the operator's* that would let a tenant supply it: the CA that verifies the
//! server an operator's token goes to, or the data an operator's URL template puts into the
//! host. Upstream refuses those shapes; so does Keyward, with one function, at admission (the
//! webhook) and in every provider process (`keyward_provider_runtime::refs`, when it reads the
//! store), so a store written while the webhook was away is refused too.

use serde_json::Value;

use super::ValidationErrors;
use super::secret_store::StoreBackend;

/// The reference every store's block pins, Vault's and openBao's included: the CA it trusts
/// (upstream's FetchCACertFromSource reads one this way for every provider). A plug-in block's
/// own paths are its row's ([`crate::registry::StoreBlock::pinned`]); Vault's other references
/// (its logins, its client TLS) may be referent, as upstream.
const EVERY_BLOCK: &str = "caProvider";

/// Refuses the configuration a ClusterSecretStore's `spec.provider` translates to when its
/// references leave out a namespace upstream requires, naming each field
/// (`spec.provider.webhook.secrets[0].secretRef.namespace`).
pub fn cluster_secret_store_references(backend: &StoreBackend) -> Result<(), ValidationErrors> {
    let key = backend.store_key();
    let (block, pinned): (Value, &[&str]) = match backend {
        StoreBackend::Vault(v) | StoreBackend::OpenBao(v) => (serde_json::to_value(v).unwrap_or_default(), &[]),
        StoreBackend::Plugin { kind, key, spec } => {
            (spec.clone(), kind.stores.iter().find(|b| b.key == *key).map_or(&[], |b| b.pinned))
        }
    };
    let mut errs = ValidationErrors::default();
    for path in std::iter::once(&EVERY_BLOCK).chain(pinned) {
        let mut found = Vec::new();
        references(&block, path, format!("spec.provider.{key}"), &mut found);
        for (field, reference) in found {
            if reference.get("namespace").and_then(Value::as_str).is_none_or(str::is_empty) {
                errs.push(format!("{field}.namespace"), message(reference));
            }
        }
    }
    errs.into_result()
}

/// Every object at `path` under `node`, with its field path.
fn references<'v>(node: &'v Value, path: &str, field: String, out: &mut Vec<(String, &'v Value)>) {
    let (segment, rest) = path.split_once('.').unwrap_or((path, ""));
    let (name, each) = segment.strip_suffix("[]").map_or((segment, false), |n| (n, true));
    let Some(child) = node.get(name) else { return };
    let field = format!("{field}.{name}");
    let items: Vec<(String, &'v Value)> = match (each, child) {
        (true, Value::Array(items)) => items.iter().enumerate().map(|(i, v)| (format!("{field}[{i}]"), v)).collect(),
        (true, _) => return,
        (false, v) => vec![(field, v)],
    };
    for (field, item) in items {
        match (rest, item) {
            ("", Value::Object(_)) => out.push((field, item)),
            ("", _) => {}
            (rest, item) => references(item, rest, field, out),
        }
    }
}

fn message(reference: &Value) -> String {
    let name = reference.get("name").and_then(Value::as_str).unwrap_or_default();
    format!(
        "is required on a ClusterSecretStore: without it {name:?} would be read in the namespace of each \
         ExternalSecret or PushSecret using the store, so a tenant would supply what this operator-owned \
         configuration trusts or sends; name the namespace that holds it"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::{ProviderKind, StoreBlock};

    fn fields(yaml: &str) -> Vec<String> {
        let provider: crate::secret_store::SecretStoreProvider = serde_yaml::from_str(yaml).expect("spec.provider");
        let backend = crate::rules::store_backend(&provider, &[&KUBERNETES, &WEBHOOK, &OTHER]).expect("served");
        let errs = cluster_secret_store_references(&backend).err().map(|e| e.0).unwrap_or_default();
        errs.into_iter().map(|e| e.field).collect()
    }

    /// Rows standing in for provider crates' kinds: their store keys and pinned paths matter here
    /// (the Kubernetes and Webhook provider crates' rows pin these paths of their blocks).
    static KUBERNETES: ProviderKind = row(
        "Kubernetes",
        "kubernetes",
        &[StoreBlock {
            pinned: &["server.caProvider", "auth.cert.clientCert", "auth.token.bearerToken"],
            ..StoreBlock::spec("kubernetes")
        }],
    );
    static WEBHOOK: ProviderKind = row(
        "Webhook",
        "webhook",
        &[StoreBlock {
            pinned: &["secrets[].secretRef", "auth.ntlm.usernameSecret", "auth.ntlm.passwordSecret"],
            ..StoreBlock::spec("webhook")
        }],
    );
    static OTHER: ProviderKind = row("Other", "other", &[StoreBlock::spec("other")]);

    const fn row(kind: &'static str, key: &'static str, stores: &'static [StoreBlock]) -> ProviderKind {
        use crate::registry::admit_spec;
        ProviderKind {
            kind,
            plural: key,
            provider: key,
            stores,
            admit: admit_spec::<crate::rules::test_spec::TestSpec>,
            crd: <crate::Provider as kube::CustomResourceExt>::crd,
        }
    }

    #[test]
    fn what_a_cluster_store_trusts_or_sends_names_its_namespace() {
        let k8s = "kubernetes: {server: {url: 'https://k', caProvider: {type: ConfigMap, name: ca, key: ca.crt}}, \
                   auth: {token: {bearerToken: {name: t, key: token}}}}";
        assert_eq!(
            fields(k8s),
            [
                "spec.provider.kubernetes.server.caProvider.namespace",
                "spec.provider.kubernetes.auth.token.bearerToken.namespace"
            ]
        );
        let named = "kubernetes: {server: {url: 'https://k', caProvider: {type: ConfigMap, name: ca, key: ca.crt, \
                     namespace: keyward}}, auth: {token: {bearerToken: {name: t, key: token, namespace: keyward}}}}";
        assert!(fields(named).is_empty());
        let referent_sa = "kubernetes: {server: {url: 'https://k'}, auth: {serviceAccount: {name: reader}}}";
        assert!(fields(referent_sa).is_empty(), "a ServiceAccount may follow the ExternalSecret, as upstream");
        let vault = "vault: {server: 'https://v', caProvider: {type: Secret, name: ca, key: ca.crt}, \
                     auth: {tokenSecretRef: {name: t, key: token}}}";
        assert_eq!(fields(vault), ["spec.provider.vault.caProvider.namespace"], "a referent token stays allowed");
        let webhook = "webhook: {url: 'https://{{ .creds.host }}/x', caProvider: {type: Secret, name: ca, key: ca.crt, \
                       namespace: ''}, secrets: [{name: creds, secretRef: {name: c, namespace: ops}}, \
                       {name: more, secretRef: {name: m}}], auth: {ntlm: {usernameSecret: {name: u, key: u}, \
                       passwordSecret: {name: p, key: p, namespace: ops}}}}";
        assert_eq!(
            fields(webhook),
            [
                "spec.provider.webhook.caProvider.namespace",
                "spec.provider.webhook.secrets[1].secretRef.namespace",
                "spec.provider.webhook.auth.ntlm.usernameSecret.namespace",
            ]
        );
        assert_eq!(
            fields("other: {caProvider: {type: Secret, name: ca, key: c}}"),
            ["spec.provider.other.caProvider.namespace"]
        );
    }

    /// A block's paths are pinned through its row: the same block under a row that does not pin
    /// them may stay referent, and a row pins only its own block's paths.
    #[test]
    fn a_plugin_row_pins_its_own_paths() {
        static PINNING: ProviderKind = row(
            "Pinning",
            "pinning",
            &[
                StoreBlock { pinned: &["auth.tokenRef", "items[].ref"], ..StoreBlock::spec("pinning") },
                StoreBlock::spec("loose"),
            ],
        );
        let refused = |yaml: &str| {
            let provider: crate::secret_store::SecretStoreProvider = serde_yaml::from_str(yaml).expect("spec.provider");
            let backend = crate::rules::store_backend(&provider, &[&PINNING]).expect("served");
            cluster_secret_store_references(&backend).err().map(|e| e.0).unwrap_or_default()
        };
        let block =
            "{auth: {tokenRef: {name: t, key: k}}, items: [{ref: {name: a, namespace: ops}}, {ref: {name: b}}]}";
        let errs = refused(&format!("pinning: {block}"));
        let fields: Vec<_> = errs.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            ["spec.provider.pinning.auth.tokenRef.namespace", "spec.provider.pinning.items[1].ref.namespace"]
        );
        assert!(errs[0].message.contains("\"t\" would be read in the namespace of each ExternalSecret"), "{errs:?}");
        assert!(refused(&format!("loose: {block}")).is_empty(), "the row's other block pins none of them");
    }
}
