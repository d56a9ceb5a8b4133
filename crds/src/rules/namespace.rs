//! Namespace conditions: which namespaces may use a ClusterProvider or a ClusterSecretStore.

use std::collections::BTreeMap;

use super::selector::{describe_selector, label_selector_matches};
use crate::common::StoreKind;
use crate::provider::ClusterProviderCondition;

/// What the rule needs to know about a namespace.
#[derive(Debug, Clone, Copy)]
pub struct NamespaceView<'a> {
    /// Name of the namespace.
    pub name: &'a str,
    /// Its labels.
    pub labels: &'a BTreeMap<String, String>,
}

/// A namespace that no condition of a ClusterProvider admits.
///
/// The message (what the namespace owner sees in a denial, a status condition or an event)
/// names only the ClusterProvider and the namespace. Why each condition failed would show the
/// conditions themselves: other namespaces' names, the labels they are selected by, the
/// patterns; tenants may not be able to read ClusterProviders, so that detail ([`Self::detail`])
/// goes to the components' logs, for the operator.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{kind} {cluster_provider:?} does not allow namespace {namespace:?}: its spec.conditions do not admit the \
     namespace"
)]
pub struct NamespaceDenied {
    /// Kind of the store: ClusterProvider or ClusterSecretStore.
    pub kind: StoreKind,
    /// The store's name.
    pub cluster_provider: String,
    /// The namespace that was refused.
    pub namespace: String,
    /// Why each condition failed, one entry per condition.
    pub reasons: Vec<String>,
}

impl NamespaceDenied {
    /// Why each condition failed, for the operator's logs (never for the namespace owner).
    pub fn detail(&self) -> String {
        self.reasons.join("; ")
    }
}

/// Checks a namespace against the conditions of a ClusterProvider or ClusterSecretStore (`kind`,
/// for the message); both have the same conditions and the same rule.
///
/// Any criterion of any condition that matches admits the namespace (as upstream): a
/// `namespaceSelector` matching the namespace labels, a name in `namespaces`, or a
/// `namespaceRegexes` entry found anywhere in the name. No conditions admit every namespace.
/// A malformed selector or regex never admits; its error is part of the denial.
pub fn check_namespace_admitted(
    kind: StoreKind,
    cluster_provider: &str,
    conditions: &[ClusterProviderCondition],
    namespace: NamespaceView<'_>,
) -> Result<(), NamespaceDenied> {
    conditions_admit(conditions, namespace).map_err(|reasons| NamespaceDenied {
        kind,
        cluster_provider: cluster_provider.to_string(),
        namespace: namespace.name.to_string(),
        reasons,
    })
}

/// The rule behind every kind with namespace conditions (ClusterProvider, ClusterSecretStore,
/// ClusterGenerator): `Ok` when a condition admits the namespace or there are none, otherwise
/// why each condition failed, one entry per condition (for the operator's logs).
pub fn conditions_admit(
    conditions: &[ClusterProviderCondition],
    namespace: NamespaceView<'_>,
) -> Result<(), Vec<String>> {
    if conditions.is_empty() {
        return Ok(());
    }
    let mut reasons = Vec::with_capacity(conditions.len());
    for (i, condition) in conditions.iter().enumerate() {
        match condition_admits(condition, namespace) {
            Ok(()) => return Ok(()),
            Err(why) => reasons.push(format!("conditions[{i}]: {why}")),
        }
    }
    Err(reasons)
}

fn condition_admits(condition: &ClusterProviderCondition, ns: NamespaceView<'_>) -> Result<(), String> {
    let mut misses = Vec::new();
    if let Some(selector) = &condition.namespace_selector {
        match label_selector_matches(selector, ns.labels) {
            Ok(true) => return Ok(()),
            Ok(false) => misses.push(format!(
                "namespaceSelector {} does not match the namespace labels {}",
                describe_selector(selector),
                describe_labels(ns.labels)
            )),
            Err(e) => misses.push(format!("namespaceSelector is invalid: {e}")),
        }
    }
    if !condition.namespaces.is_empty() {
        if condition.namespaces.iter().any(|n| n == ns.name) {
            return Ok(());
        }
        misses.push(format!("namespaces [{}] do not include it", condition.namespaces.join(", ")));
    }
    if !condition.namespace_regexes.is_empty() {
        for pattern in &condition.namespace_regexes {
            // Cluster-scoped conditions are the operator's: their compiled form is kept.
            match super::patterns::compiled(pattern) {
                Ok(re) if re.is_match(ns.name) => return Ok(()),
                Ok(_) => {}
                Err(_) => misses.push(format!("namespaceRegexes entry {pattern:?} is not a valid regular expression")),
            }
        }
        misses.push(format!("namespaceRegexes [{}] do not match its name", condition.namespace_regexes.join(", ")));
    }
    if misses.is_empty() {
        misses.push("the condition sets no namespaceSelector, namespaces or namespaceRegexes".to_string());
    }
    Err(misses.join(", "))
}

fn describe_labels(labels: &BTreeMap<String, String>) -> String {
    let pairs: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("{{{}}}", pairs.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn by_labels(pairs: &[(&str, &str)]) -> ClusterProviderCondition {
        ClusterProviderCondition {
            namespace_selector: Some(LabelSelector { match_labels: Some(labels(pairs)), match_expressions: None }),
            ..Default::default()
        }
    }

    fn by_names(names: &[&str]) -> ClusterProviderCondition {
        ClusterProviderCondition { namespaces: names.iter().map(|s| s.to_string()).collect(), ..Default::default() }
    }

    fn by_regexes(res: &[&str]) -> ClusterProviderCondition {
        ClusterProviderCondition {
            namespace_regexes: res.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    type Case<'a> = (&'a str, Vec<ClusterProviderCondition>, &'a str, &'a BTreeMap<String, String>, bool);

    #[test]
    fn admission_table() {
        let prod = labels(&[("env", "prod")]);
        let dev = labels(&[("env", "dev")]);
        let cases: Vec<Case> = vec![
            ("no conditions admit all", vec![], "anything", &dev, true),
            ("selector match", vec![by_labels(&[("env", "prod")])], "team-a", &prod, true),
            ("selector miss", vec![by_labels(&[("env", "prod")])], "team-a", &dev, false),
            ("name match", vec![by_names(&["team-a", "team-b"])], "team-b", &dev, true),
            ("name miss", vec![by_names(&["team-a"])], "team-b", &dev, false),
            ("regex unanchored search", vec![by_regexes(&["eam"])], "team-a", &dev, true),
            ("regex anchored miss", vec![by_regexes(&["^eam"])], "team-a", &dev, false),
            ("regex anchored hit", vec![by_regexes(&["^team-[a-c]$"])], "team-b", &dev, true),
            ("second condition admits", vec![by_names(&["x"]), by_labels(&[("env", "dev")])], "y", &dev, true),
            (
                "any criterion inside one condition admits",
                vec![ClusterProviderCondition {
                    namespaces: vec!["other".into()],
                    namespace_regexes: vec!["^team".into()],
                    ..by_labels(&[("env", "prod")])
                }],
                "team-a",
                &dev,
                true,
            ),
            ("empty condition admits nothing", vec![ClusterProviderCondition::default()], "a", &dev, false),
            ("invalid regex never admits", vec![by_regexes(&["("])], "(", &dev, false),
            (
                "NotIn expression",
                vec![ClusterProviderCondition {
                    namespace_selector: Some(LabelSelector {
                        match_labels: None,
                        match_expressions: Some(vec![LabelSelectorRequirement {
                            key: "env".into(),
                            operator: "NotIn".into(),
                            values: Some(vec!["prod".into()]),
                        }]),
                    }),
                    ..Default::default()
                }],
                "a",
                &dev,
                true,
            ),
        ];
        for (name, conditions, ns, labels, want) in cases {
            let got = check_namespace_admitted(
                StoreKind::ClusterProvider,
                "shared",
                &conditions,
                NamespaceView { name: ns, labels },
            );
            assert_eq!(got.is_ok(), want, "{name}: {got:?}");
        }
    }

    #[test]
    fn denial_names_provider_and_namespace_and_keeps_the_conditions_for_logs() {
        let dev = labels(&[("env", "dev")]);
        let err = check_namespace_admitted(
            StoreKind::ClusterProvider,
            "shared",
            &[by_labels(&[("env", "prod")]), by_names(&["team-a"]), by_regexes(&["^prod-", "("])],
            NamespaceView { name: "team-b", labels: &dev },
        )
        .unwrap_err();
        assert_eq!(err.cluster_provider, "shared");
        assert_eq!(err.namespace, "team-b");
        assert_eq!(
            err.detail(),
            "conditions[0]: namespaceSelector env=prod does not match the namespace labels {env=dev}; \
             conditions[1]: namespaces [team-a] do not include it; \
             conditions[2]: namespaceRegexes entry \"(\" is not a valid regular expression, \
             namespaceRegexes [^prod-, (] do not match its name"
        );
        // What the namespace owner sees names no other namespace, label or pattern.
        assert_eq!(
            err.to_string(),
            "ClusterProvider \"shared\" does not allow namespace \"team-b\": its spec.conditions do not admit the namespace"
        );
        // A ClusterSecretStore's conditions are the same rule, named after its kind.
        let err = check_namespace_admitted(
            StoreKind::ClusterSecretStore,
            "vault",
            &[by_names(&["team-a"])],
            NamespaceView { name: "team-b", labels: &dev },
        )
        .unwrap_err();
        assert!(
            err.to_string().starts_with("ClusterSecretStore \"vault\" does not allow namespace \"team-b\""),
            "{err}"
        );
        assert!(
            check_namespace_admitted(
                StoreKind::ClusterSecretStore,
                "vault",
                &[by_names(&["team-a"])],
                NamespaceView { name: "team-a", labels: &dev }
            )
            .is_ok()
        );
    }
}
