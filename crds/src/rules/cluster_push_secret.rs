//! ClusterPushSecret rules: which namespaces one selects, which of them may not use a store its
//! PushSecret names, and validation of its spec. The embedded PushSecret spec is checked by
//! [`validate_push_secret`], the rule every PushSecret gets.

use std::borrow::Cow;

use super::ValidationErrors;
use super::cluster_external_secret::{
    any_selector_matches, check_object_name, check_selectors, nest_errors, refused_store_of,
};
use super::namespace::{NamespaceDenied, NamespaceView};
use super::validate::{check_duration, validate_push_secret};
use crate::cluster_push_secret::ClusterPushSecretSpec;
use crate::common::StoreKind;
use crate::provider::ClusterProviderCondition;

/// Whether a ClusterPushSecret selects a namespace: its labels match any of
/// `namespaceSelectors` (an empty selector matches every namespace; none selects nothing, as
/// upstream). A malformed selector matches nothing.
pub fn push_selects_namespace(spec: &ClusterPushSecretSpec, ns: NamespaceView<'_>) -> bool {
    any_selector_matches(spec.namespace_selectors.iter(), ns)
}

/// The first ClusterProvider or ClusterSecretStore of the PushSecret spec whose namespace
/// conditions do not admit namespace `ns` (as [`super::refused_store`] for an ExternalSecret
/// spec; references by label selector name no store to look up).
pub fn push_refused_store<'a, F>(
    spec: &ClusterPushSecretSpec,
    ns: NamespaceView<'_>,
    conditions: F,
) -> Option<NamespaceDenied>
where
    F: Fn(StoreKind, &str) -> Option<Cow<'a, [ClusterProviderCondition]>>,
{
    let refs = spec.push_secret_spec.secret_store_refs.iter().filter_map(|r| Some((r.kind, r.name.as_deref()?)));
    refused_store_of(refs, ns, conditions)
}

/// Validates a ClusterPushSecret spec; errors of the embedded PushSecret spec are named under
/// `spec.pushSecretSpec`.
pub fn validate_cluster_push_secret(spec: &ClusterPushSecretSpec) -> Result<(), ValidationErrors> {
    let mut errs = ValidationErrors::default();
    nest_errors(&mut errs, "spec.pushSecretSpec", validate_push_secret(&spec.push_secret_spec));
    check_object_name(&mut errs, "spec.pushSecretName", spec.push_secret_name.as_deref());
    check_selectors(&mut errs, &spec.namespace_selectors);
    if let Some(every) = &spec.refresh_time {
        check_duration(&mut errs, "spec.refreshTime", every);
    }
    errs.into_result()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn spec(yaml: &str) -> ClusterPushSecretSpec {
        serde_yaml::from_str(yaml).expect("test spec parses")
    }

    const PUSH: &str = "pushSecretSpec: {secretStoreRefs: [{name: s, kind: ClusterProvider}, {labelSelector: \
                        {matchLabels: {a: b}}}], selector: {secret: {name: src}}, data: [{match: {secretKey: k, \
                        remoteRef: {remoteKey: r}}}]}";

    #[test]
    fn selection_is_any_selector_and_none_selects_nothing() {
        let team_a: BTreeMap<String, String> = [("team".to_string(), "a".to_string())].into();
        let none = BTreeMap::new();
        let s = spec(&format!("namespaceSelectors: [{{matchLabels: {{team: a}}}}]\n{PUSH}"));
        assert!(push_selects_namespace(&s, NamespaceView { name: "x", labels: &team_a }));
        assert!(!push_selects_namespace(&s, NamespaceView { name: "x", labels: &none }));
        assert!(!push_selects_namespace(&spec(PUSH), NamespaceView { name: "x", labels: &team_a }));
        let all = spec(&format!("namespaceSelectors: [{{}}]\n{PUSH}"));
        assert!(push_selects_namespace(&all, NamespaceView { name: "x", labels: &none }));
    }

    #[test]
    fn a_cluster_provider_that_does_not_admit_the_namespace_refuses_it() {
        let s = spec(PUSH);
        let labels = BTreeMap::new();
        let only_p = |_: StoreKind, _: &str| {
            Some(Cow::Owned(vec![ClusterProviderCondition { namespaces: vec!["p".into()], ..Default::default() }]))
        };
        assert_eq!(push_refused_store(&s, NamespaceView { name: "p", labels: &labels }, only_p), None);
        let denied = push_refused_store(&s, NamespaceView { name: "q", labels: &labels }, only_p).expect("refused");
        assert_eq!((denied.cluster_provider.as_str(), denied.namespace.as_str()), ("s", "q"));
    }

    #[test]
    fn validation_names_each_field_and_nests_the_push_secret_spec() {
        assert_eq!(validate_cluster_push_secret(&spec(&format!("refreshTime: 1m\n{PUSH}"))), Ok(()));
        let errs = validate_cluster_push_secret(&spec(
            "pushSecretName: Bad_Name\nrefreshTime: soon\n\
             namespaceSelectors: [{matchExpressions: [{key: a, operator: Equals, values: [x]}]}]\n\
             pushSecretSpec: {secretStoreRefs: [], selector: {secret: {name: src}}, refreshInterval: often}",
        ))
        .expect_err("invalid");
        let fields: Vec<&str> = errs.0.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "spec.pushSecretSpec.refreshInterval",
                "spec.pushSecretSpec.secretStoreRefs",
                "spec.pushSecretName",
                "spec.namespaceSelectors[0]",
                "spec.refreshTime",
            ]
        );
    }
}
