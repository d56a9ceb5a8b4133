//! Admission warnings for a ClusterExternalSecret: namespaces it selects that may not use the
//! ClusterProvider or ClusterSecretStore its ExternalSecret names. They are warnings, not a denial: the other namespaces still
//! get their ExternalSecret, and the controller reports the refused ones in
//! `status.failedNamespaces`. Answered from the caches, like every review.

use std::borrow::Cow;
use std::collections::BTreeMap;

use keyward_crds::rules::{NamespaceView, refused_store, selects_namespace};
use keyward_crds::{ClusterExternalSecret, StoreKind};

use crate::cache::State;

/// Namespaces named in one warning before "and N more".
const MAX_LISTED: usize = 10;

/// The warnings for one ClusterExternalSecret (empty when every selected namespace may use
/// its stores).
pub fn warnings(state: &State, ces: &ClusterExternalSecret) -> Vec<String> {
    let name = ces.metadata.name.as_deref().unwrap_or_default();
    let spec = &ces.spec;
    let mut out = Vec::new();
    if spec.namespace_selector.is_none() && spec.namespace_selectors.is_empty() && spec.namespaces.is_empty() {
        out.push(format!(
            "ClusterExternalSecret {name:?} selects no namespace: set spec.namespaceSelectors or spec.namespaces"
        ));
    }
    let es = &spec.external_secret_spec;
    let mut refused: BTreeMap<(StoreKind, String), Vec<&str>> = BTreeMap::new();
    let mut without_provider: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let mut omitted_kind: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let mut selected: Vec<(&String, &crate::cache::Labels)> = state
        .namespaces
        .iter()
        .filter(|(n, l)| selects_namespace(spec, NamespaceView { name: n, labels: l }))
        .collect();
    selected.sort_by(|a, b| a.0.cmp(b.0));
    for (ns, labels) in selected {
        let view = NamespaceView { name: ns, labels };
        let denied = refused_store(es, view, |kind, store| match kind {
            StoreKind::ClusterProvider => match state.cluster_providers.get(store) {
                Some(Ok(cp)) => Some(Cow::Borrowed(cp.conditions.as_slice())),
                _ => None,
            },
            StoreKind::ClusterSecretStore => match state.cluster_secret_stores.get(store) {
                Some(Ok(conditions)) => Some(Cow::Borrowed(conditions.as_slice())),
                _ => None,
            },
            _ => None,
        });
        if let Some(d) = denied {
            tracing::info!(cluster_external_secret = name, namespace = %ns, detail = %d.detail(), "namespace refused");
            refused.entry((d.kind, d.cluster_provider)).or_default().push(ns);
        }
        for (_, r) in es.store_refs() {
            if r.name.is_empty() {
                continue;
            }
            let listing = match r.kind {
                Some(StoreKind::Provider) if !state.provider_exists(ns, &r.name) => &mut without_provider,
                // An omitted kind is a SecretStore, as upstream, also where only a Provider exists.
                None if !state.secret_store_exists(ns, &r.name) && state.provider_exists(ns, &r.name) => {
                    &mut omitted_kind
                }
                _ => continue,
            };
            let namespaces = listing.entry(r.name.as_str()).or_default();
            if namespaces.last() != Some(&ns.as_str()) {
                namespaces.push(ns);
            }
        }
    }
    for ((kind, store), namespaces) in refused {
        out.push(format!(
            "ClusterExternalSecret {name:?}: {kind} {store:?} does not allow {}; no ExternalSecret is written there \
             (they are listed in status.failedNamespaces). Use a {kind} whose spec.conditions admit them, or narrow \
             the namespace selection",
            listed("namespace", &namespaces)
        ));
    }
    for (store, namespaces) in without_provider {
        out.push(format!(
            "ClusterExternalSecret {name:?}: Provider {store:?} does not exist yet in {}; their ExternalSecrets do \
             not sync until it does",
            listed("namespace", &namespaces)
        ));
    }
    for (store, namespaces) in omitted_kind {
        out.push(format!(
            "ClusterExternalSecret {name:?}: a store reference without kind means SecretStore {store:?}, as upstream; \
             {} no SecretStore {store:?} but a Provider {store:?}: set kind: Provider to use the Provider",
            listed_have("namespace", &namespaces)
        ));
    }
    for (path, r) in es.store_refs() {
        let known = match r.kind {
            Some(StoreKind::ClusterProvider) => state.cluster_providers.contains_key(&r.name),
            Some(StoreKind::ClusterSecretStore) => state.cluster_secret_stores.contains_key(&r.name),
            _ => true,
        };
        if let (false, Some(kind)) = (known, r.kind) {
            out.push(format!(
                "spec.externalSecretSpec{}: {kind} {:?} does not exist yet; nothing syncs until it does",
                path.strip_prefix("spec").unwrap_or(&path),
                r.name
            ));
        }
    }
    out
}

/// `namespace "a" has`, `namespaces "a", "b" and 3 more have`.
fn listed_have(word: &str, names: &[&str]) -> String {
    format!("{} {}", listed(word, names), if names.len() == 1 { "has" } else { "have" })
}

/// `namespace "a"`, `namespaces "a", "b" and 3 more`.
fn listed(word: &str, names: &[&str]) -> String {
    let shown: Vec<String> = names.iter().take(MAX_LISTED).map(|n| format!("{n:?}")).collect();
    let more = names.len().saturating_sub(MAX_LISTED);
    let plural = if names.len() == 1 { "" } else { "s" };
    let tail = if more > 0 { format!(" and {more} more") } else { String::new() };
    format!("{word}{plural} {}{tail}", shown.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_cut_after_ten_names() {
        assert_eq!(listed("namespace", &["a"]), "namespace \"a\"");
        assert_eq!(listed("namespace", &["a", "b"]), "namespaces \"a\", \"b\"");
        let many: Vec<String> = (0..12).map(|i| format!("n{i}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        let text = listed("namespace", &many);
        assert!(text.ends_with("\"n9\" and 2 more"), "{text}");
        assert!(!text.contains("n10"));
    }
}
