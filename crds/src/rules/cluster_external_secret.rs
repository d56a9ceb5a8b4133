//! ClusterExternalSecret rules: which namespaces one selects, which of them may not use the
//! store its ExternalSecret names (the ClusterProvider and ClusterSecretStore namespace
//! conditions of [`check_namespace_admitted`]), and validation of its spec.

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::ValidationErrors;
use super::namespace::{NamespaceDenied, NamespaceView, check_namespace_admitted};
use super::selector::{label_selector_matches, validate_label_selector};
use super::validate::{check_duration, is_dns_label, is_dns_subdomain, validate_external_secret};
use crate::cluster_external_secret::ClusterExternalSecretSpec;
use crate::common::StoreKind;
use crate::external_secret::ExternalSecretSpec;
use crate::provider::ClusterProviderCondition;

/// Whether a ClusterExternalSecret selects a namespace: its name is in `namespaces`, or its
/// labels match `namespaceSelector` or any of `namespaceSelectors` (an empty selector matches
/// every namespace; no selector and no names select nothing, as upstream). A malformed selector
/// matches nothing: validation refuses it at admission, and the controller reports it before
/// it changes anything.
pub fn selects_namespace(spec: &ClusterExternalSecretSpec, ns: NamespaceView<'_>) -> bool {
    spec.namespaces.iter().any(|n| n == ns.name)
        || any_selector_matches(spec.namespace_selector.iter().chain(&spec.namespace_selectors), ns)
}

/// Whether any of `selectors` matches the namespace's labels (a malformed one matches nothing).
pub(crate) fn any_selector_matches<'a>(
    mut selectors: impl Iterator<Item = &'a LabelSelector>,
    ns: NamespaceView<'_>,
) -> bool {
    selectors.any(|s| label_selector_matches(s, ns.labels) == Ok(true))
}

/// The first store of `spec` whose namespace conditions do not admit namespace `ns`, if any.
///
/// `conditions` gives the namespace conditions of a cluster-scoped store by kind and name, or
/// `None` when the store is not known (then nothing can be decided here; the ExternalSecret
/// reports the missing store itself). Namespaced stores are always in the manifest's own
/// namespace, so they never refuse it.
pub fn refused_store<'a, F>(spec: &ExternalSecretSpec, ns: NamespaceView<'_>, conditions: F) -> Option<NamespaceDenied>
where
    F: Fn(StoreKind, &str) -> Option<Cow<'a, [ClusterProviderCondition]>>,
{
    refused_store_of(spec.store_refs().into_iter().map(|(_, r)| (r.kind, r.name.as_str())), ns, conditions)
}

/// [`refused_store`] over store references given as (kind, name).
pub(crate) fn refused_store_of<'a, 'r, F>(
    refs: impl Iterator<Item = (Option<StoreKind>, &'r str)>,
    ns: NamespaceView<'_>,
    conditions: F,
) -> Option<NamespaceDenied>
where
    F: Fn(StoreKind, &str) -> Option<Cow<'a, [ClusterProviderCondition]>>,
{
    let mut checked: Vec<(StoreKind, &str)> = Vec::new();
    for (kind, name) in refs {
        // An omitted kind is a namespaced store (`store_ref_kind`): nothing to admit.
        let Some(kind) = kind else { continue };
        let cluster_scoped = matches!(kind, StoreKind::ClusterProvider | StoreKind::ClusterSecretStore);
        if !cluster_scoped || name.is_empty() || checked.contains(&(kind, name)) {
            continue;
        }
        checked.push((kind, name));
        let Some(conds) = conditions(kind, name) else { continue };
        if let Err(denied) = check_namespace_admitted(kind, name, &conds, ns) {
            return Some(denied);
        }
    }
    None
}

/// Validates a ClusterExternalSecret spec; errors of the embedded ExternalSecret spec are named
/// under `spec.externalSecretSpec`.
pub fn validate_cluster_external_secret(spec: &ClusterExternalSecretSpec) -> Result<(), ValidationErrors> {
    let mut errs = ValidationErrors::default();
    nest_errors(&mut errs, "spec.externalSecretSpec", validate_external_secret(&spec.external_secret_spec));
    check_object_name(&mut errs, "spec.externalSecretName", spec.external_secret_name.as_deref());
    if let Some(s) = &spec.namespace_selector
        && let Err(e) = validate_label_selector(s)
    {
        errs.push("spec.namespaceSelector", e.to_string());
    }
    check_selectors(&mut errs, &spec.namespace_selectors);
    for (i, n) in spec.namespaces.iter().enumerate() {
        if !is_dns_label(n) {
            errs.push(format!("spec.namespaces[{i}]"), format!("{n:?} is not a valid namespace name"));
        }
    }
    check_duration(&mut errs, "spec.refreshTime", &spec.refresh_time);
    errs.into_result()
}

/// Adds the errors of an embedded spec, their `spec` prefix moved under `path`.
pub(crate) fn nest_errors(errs: &mut ValidationErrors, path: &str, inner: Result<(), ValidationErrors>) {
    for e in inner.err().map(|e| e.0).unwrap_or_default() {
        let rest = e.field.strip_prefix("spec").unwrap_or(&e.field);
        errs.push(format!("{path}{rest}"), e.message);
    }
}

/// The name a cluster-scoped kind gives the objects it creates, when set.
pub(crate) fn check_object_name(errs: &mut ValidationErrors, field: &str, name: Option<&str>) {
    if let Some(name) = name
        && !is_dns_subdomain(name)
    {
        errs.push(
            field,
            format!("{name:?} is not a valid object name (lower-case letters, digits, '-' and '.', at most 253)"),
        );
    }
}

/// `spec.namespaceSelectors`: each a valid label selector.
pub(crate) fn check_selectors(errs: &mut ValidationErrors, selectors: &[LabelSelector]) {
    for (i, s) in selectors.iter().enumerate() {
        if let Err(e) = validate_label_selector(s) {
            errs.push(format!("spec.namespaceSelectors[{i}]"), e.to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn by_labels(pairs: &[(&str, &str)]) -> LabelSelector {
        LabelSelector { match_labels: Some(labels(pairs)), match_expressions: None }
    }

    fn spec(yaml: &str) -> ClusterExternalSecretSpec {
        serde_yaml::from_str(yaml).expect("test spec parses")
    }

    #[test]
    fn selection_is_the_union_of_names_and_every_selector() {
        let team_a = labels(&[("team", "a")]);
        let team_b = labels(&[("team", "b"), ("tier", "web")]);
        let none = labels(&[]);
        let s = ClusterExternalSecretSpec {
            namespace_selector: Some(by_labels(&[("team", "a")])),
            namespace_selectors: vec![LabelSelector {
                match_labels: None,
                match_expressions: Some(vec![LabelSelectorRequirement {
                    key: "tier".into(),
                    operator: "In".into(),
                    values: Some(vec!["web".into()]),
                }]),
            }],
            namespaces: vec!["by-name".into()],
            ..Default::default()
        };
        let cases = [
            ("deprecated selector", "x", &team_a, true),
            ("selector list", "y", &team_b, true),
            ("name", "by-name", &none, true),
            ("nothing matches", "z", &none, false),
        ];
        for (what, name, l, want) in cases {
            assert_eq!(selects_namespace(&s, NamespaceView { name, labels: l }), want, "{what}");
        }
        // No selector and no names select nothing; an empty selector selects everything.
        let nothing = ClusterExternalSecretSpec::default();
        assert!(!selects_namespace(&nothing, NamespaceView { name: "x", labels: &team_a }));
        let all = ClusterExternalSecretSpec { namespace_selectors: vec![LabelSelector::default()], ..nothing };
        assert!(selects_namespace(&all, NamespaceView { name: "x", labels: &none }));
        // A malformed selector selects nothing, and leaves the other selectors working.
        let bad = ClusterExternalSecretSpec {
            namespace_selectors: vec![
                LabelSelector {
                    match_labels: None,
                    match_expressions: Some(vec![LabelSelectorRequirement {
                        key: "team".into(),
                        operator: "Equals".into(),
                        values: Some(vec!["a".into()]),
                    }]),
                },
                by_labels(&[("team", "b")]),
            ],
            ..Default::default()
        };
        assert!(!selects_namespace(&bad, NamespaceView { name: "x", labels: &team_a }));
        assert!(selects_namespace(&bad, NamespaceView { name: "x", labels: &team_b }));
    }

    #[test]
    fn refusal_names_the_cluster_provider_that_does_not_admit_the_namespace() {
        let es: ExternalSecretSpec = serde_yaml::from_str(
            "secretStoreRef: {name: open, kind: ClusterProvider}\n\
             data: [{secretKey: a, remoteRef: {key: a}}, \
                    {secretKey: b, remoteRef: {key: b}, sourceRef: {storeRef: {name: prod-only, kind: ClusterProvider}}}, \
                    {secretKey: c, remoteRef: {key: c}, sourceRef: {storeRef: {name: local}}}, \
                    {secretKey: d, remoteRef: {key: d}, sourceRef: {storeRef: {name: unknown, kind: ClusterProvider}}}, \
                    {secretKey: e, remoteRef: {key: e}, sourceRef: {storeRef: {name: team-p, kind: ClusterSecretStore}}}, \
                    {secretKey: f, remoteRef: {key: f}, sourceRef: {storeRef: {name: own, kind: SecretStore}}}]",
        )
        .expect("parses");
        let prod_only = vec![ClusterProviderCondition {
            namespace_selector: Some(by_labels(&[("env", "prod")])),
            ..Default::default()
        }];
        let asked = std::cell::RefCell::new(Vec::new());
        let conditions = |kind: StoreKind, name: &str| {
            asked.borrow_mut().push(format!("{kind}/{name}"));
            match name {
                "open" => Some(Cow::Owned(Vec::new())),
                "prod-only" => Some(Cow::Borrowed(prod_only.as_slice())),
                "team-p" if kind == StoreKind::ClusterSecretStore => Some(Cow::Owned(vec![ClusterProviderCondition {
                    namespaces: vec!["p".into()],
                    ..Default::default()
                }])),
                _ => None,
            }
        };
        let prod = labels(&[("env", "prod")]);
        let dev = labels(&[("env", "dev")]);
        assert_eq!(refused_store(&es, NamespaceView { name: "p", labels: &prod }, conditions), None);
        // The namespaced Provider "local" and SecretStore "own" are never looked up; each
        // cluster-scoped store once.
        assert_eq!(
            *asked.borrow(),
            [
                "ClusterProvider/open",
                "ClusterProvider/prod-only",
                "ClusterProvider/unknown",
                "ClusterSecretStore/team-p"
            ]
        );
        let denied = refused_store(&es, NamespaceView { name: "d", labels: &dev }, conditions).expect("refused");
        assert_eq!((denied.cluster_provider.as_str(), denied.namespace.as_str()), ("prod-only", "d"));
        // A namespace every ClusterProvider admits is still refused by the ClusterSecretStore.
        let denied = refused_store(&es, NamespaceView { name: "q", labels: &prod }, conditions).expect("refused");
        assert_eq!((denied.kind, denied.cluster_provider.as_str()), (StoreKind::ClusterSecretStore, "team-p"));
    }

    #[test]
    fn validation_names_each_field() {
        assert_eq!(
            validate_cluster_external_secret(&spec(
                "namespaceSelectors: [{matchLabels: {a: b}}]\nexternalSecretSpec: {secretStoreRef: {name: s}, \
                 data: [{secretKey: k, remoteRef: {key: r}}]}"
            )),
            Ok(())
        );
        let errs = validate_cluster_external_secret(&spec(
            "externalSecretName: Bad_Name\nnamespaces: [ok, -bad]\nrefreshTime: soon\n\
             namespaceSelector: {matchExpressions: [{key: a, operator: In}]}\n\
             namespaceSelectors: [{matchExpressions: [{key: a, operator: Equals, values: [x]}]}]\n\
             externalSecretSpec: {data: [{secretKey: '', remoteRef: {key: r}}]}",
        ))
        .expect_err("invalid");
        let fields: Vec<&str> = errs.0.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "spec.externalSecretSpec.data[0].secretKey",
                "spec.externalSecretName",
                "spec.namespaceSelector",
                "spec.namespaceSelectors[0]",
                "spec.namespaces[1]",
                "spec.refreshTime",
            ]
        );
    }
}
