//! Admission warnings for a ClusterExternalSecret or ClusterPushSecret: namespaces it selects
//! that may not use the ClusterProvider or ClusterSecretStore its ExternalSecret (PushSecret)
//! names. They are warnings, not a denial: the other namespaces still get their object, and the
//! controller reports the refused ones in `status.failedNamespaces`. Answered from the caches,
//! like every review.

use std::borrow::Cow;
use std::collections::BTreeMap;

use keyward_crds::rules::{
    NamespaceDenied, NamespaceView, push_refused_store, push_selects_namespace, refused_store, selects_namespace,
};
use keyward_crds::{ClusterExternalSecret, ClusterProviderCondition, ClusterPushSecret, StoreKind};

use crate::cache::State;

/// Namespaces named in one warning before "and N more".
const MAX_LISTED: usize = 10;

/// The namespace conditions of a cluster-scoped store, from the caches.
type Conditions<'a> = &'a dyn Fn(StoreKind, &str) -> Option<Cow<'a, [ClusterProviderCondition]>>;

/// What the warnings need to know of one such object.
struct Fanned<'a> {
    /// `ClusterExternalSecret` or `ClusterPushSecret`.
    kind: &'static str,
    name: &'a str,
    /// What it writes in each namespace: `ExternalSecret` or `PushSecret`.
    child: &'static str,
    /// Where the embedded spec is: `spec.externalSecretSpec`.
    spec_path: &'static str,
    /// How to select namespaces, for a selection that selects none.
    how_to_select: &'static str,
    /// Its store references: the path in the embedded spec (`spec.…`), the kind as written, the
    /// name.
    refs: Vec<(String, Option<StoreKind>, &'a str)>,
    selects_nothing: bool,
    selects: &'a dyn Fn(NamespaceView<'_>) -> bool,
    refused: &'a dyn Fn(NamespaceView<'_>, Conditions<'_>) -> Option<NamespaceDenied>,
}

/// The warnings for one ClusterExternalSecret (empty when every selected namespace may use
/// its stores).
pub fn warnings(state: &State, ces: &ClusterExternalSecret) -> Vec<String> {
    let spec = &ces.spec;
    let es = &spec.external_secret_spec;
    let refs = es.store_refs().into_iter().map(|(path, r)| (path, r.kind, r.name.as_str())).collect();
    fanned_warnings(
        state,
        &Fanned {
            kind: "ClusterExternalSecret",
            name: ces.metadata.name.as_deref().unwrap_or_default(),
            child: "ExternalSecret",
            spec_path: "spec.externalSecretSpec",
            how_to_select: "set spec.namespaceSelectors or spec.namespaces",
            refs,
            selects_nothing: spec.namespace_selector.is_none()
                && spec.namespace_selectors.is_empty()
                && spec.namespaces.is_empty(),
            selects: &|ns| selects_namespace(spec, ns),
            refused: &|ns, conditions| refused_store(es, ns, conditions),
        },
    )
}

/// The warnings for one ClusterPushSecret, as for a ClusterExternalSecret.
pub fn push_warnings(state: &State, cps: &ClusterPushSecret) -> Vec<String> {
    let spec = &cps.spec;
    let refs = spec
        .push_secret_spec
        .secret_store_refs
        .iter()
        .enumerate()
        .filter_map(|(i, r)| Some((format!("spec.secretStoreRefs[{i}]"), r.kind, r.name.as_deref()?)))
        .collect();
    fanned_warnings(
        state,
        &Fanned {
            kind: "ClusterPushSecret",
            name: cps.metadata.name.as_deref().unwrap_or_default(),
            child: "PushSecret",
            spec_path: "spec.pushSecretSpec",
            how_to_select: "set spec.namespaceSelectors",
            refs,
            selects_nothing: spec.namespace_selectors.is_empty(),
            selects: &|ns| push_selects_namespace(spec, ns),
            refused: &|ns, conditions| push_refused_store(spec, ns, conditions),
        },
    )
}

fn fanned_warnings(state: &State, f: &Fanned<'_>) -> Vec<String> {
    let (kind, name, child) = (f.kind, f.name, f.child);
    let mut out = Vec::new();
    if f.selects_nothing {
        out.push(format!("{kind} {name:?} selects no namespace: {}", f.how_to_select));
    }
    let mut refused: BTreeMap<(StoreKind, String), Vec<&str>> = BTreeMap::new();
    let mut without_provider: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let mut omitted_kind: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let mut selected: Vec<(&String, &crate::cache::Labels)> =
        state.namespaces.iter().filter(|(n, l)| (f.selects)(NamespaceView { name: n, labels: l })).collect();
    selected.sort_by(|a, b| a.0.cmp(b.0));
    let conditions = |kind: StoreKind, store: &str| match kind {
        StoreKind::ClusterProvider => match state.cluster_providers.get(store) {
            Some(Ok(cp)) => Some(Cow::Borrowed(cp.conditions.as_slice())),
            _ => None,
        },
        StoreKind::ClusterSecretStore => match state.cluster_secret_stores.get(store) {
            Some(Ok(conditions)) => Some(Cow::Borrowed(conditions.as_slice())),
            _ => None,
        },
        _ => None,
    };
    for (ns, labels) in selected {
        let view = NamespaceView { name: ns, labels };
        if let Some(d) = (f.refused)(view, &conditions) {
            tracing::info!(kind, name, namespace = %ns, detail = %d.detail(), "namespace refused");
            refused.entry((d.kind, d.cluster_provider)).or_default().push(ns);
        }
        for &(_, kind, store) in &f.refs {
            if store.is_empty() {
                continue;
            }
            let listing = match kind {
                Some(StoreKind::Provider) if !state.provider_exists(ns, store) => &mut without_provider,
                // An omitted kind is a SecretStore, as upstream, also where only a Provider exists.
                None if !state.secret_store_exists(ns, store) && state.provider_exists(ns, store) => &mut omitted_kind,
                _ => continue,
            };
            let namespaces = listing.entry(store).or_default();
            if namespaces.last() != Some(&ns.as_str()) {
                namespaces.push(ns);
            }
        }
    }
    for ((store_kind, store), namespaces) in refused {
        out.push(format!(
            "{kind} {name:?}: {store_kind} {store:?} does not allow {}; no {child} is written there (they are listed \
             in status.failedNamespaces). Use a {store_kind} whose spec.conditions admit them, or narrow the \
             namespace selection",
            listed("namespace", &namespaces)
        ));
    }
    for (store, namespaces) in without_provider {
        out.push(format!(
            "{kind} {name:?}: Provider {store:?} does not exist yet in {}; their {child}s do not sync until it does",
            listed("namespace", &namespaces)
        ));
    }
    for (store, namespaces) in omitted_kind {
        out.push(format!(
            "{kind} {name:?}: a store reference without kind means SecretStore {store:?}, as upstream; {} no \
             SecretStore {store:?} but a Provider {store:?}: set kind: Provider to use the Provider",
            listed_have("namespace", &namespaces)
        ));
    }
    for (path, store_kind, store) in &f.refs {
        let known = match store_kind {
            Some(StoreKind::ClusterProvider) => state.cluster_providers.contains_key(*store),
            Some(StoreKind::ClusterSecretStore) => state.cluster_secret_stores.contains_key(*store),
            _ => true,
        };
        if let (false, Some(store_kind)) = (known, store_kind) {
            out.push(format!(
                "{}{}: {store_kind} {store:?} does not exist yet; nothing syncs until it does",
                f.spec_path,
                path.strip_prefix("spec").unwrap_or(path)
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
