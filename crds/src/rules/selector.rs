//! Kubernetes label selector semantics (matchLabels and matchExpressions).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::core::{Selector, SelectorExt};

/// A label selector that cannot be evaluated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// The operator is not one of In, NotIn, Exists, DoesNotExist.
    #[error("matchExpressions[{index}].operator {operator:?} is not valid: use In, NotIn, Exists or DoesNotExist")]
    UnknownOperator { index: usize, operator: String },
    /// In / NotIn without values.
    #[error("matchExpressions[{index}] uses {operator} on key {key:?} and needs at least one value")]
    MissingValues { index: usize, operator: String, key: String },
    /// Exists / DoesNotExist with values.
    #[error("matchExpressions[{index}] uses {operator} on key {key:?} and must not list values")]
    UnexpectedValues { index: usize, operator: String, key: String },
    /// Refused by kube's selector parser (after the checks above).
    #[error("{0}")]
    Unparsed(String),
}

/// Checks that a selector is well formed.
pub fn validate_label_selector(selector: &LabelSelector) -> Result<(), SelectorError> {
    for (index, expr) in selector.match_expressions.iter().flatten().enumerate() {
        let values = expr.values.as_deref().unwrap_or_default();
        let op = expr.operator.as_str();
        match op {
            "In" | "NotIn" if values.is_empty() => {
                return Err(SelectorError::MissingValues { index, operator: op.to_string(), key: expr.key.clone() });
            }
            "Exists" | "DoesNotExist" if !values.is_empty() => {
                return Err(SelectorError::UnexpectedValues { index, operator: op.to_string(), key: expr.key.clone() });
            }
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            _ => {
                return Err(SelectorError::UnknownOperator { index, operator: op.to_string() });
            }
        }
    }
    Ok(())
}

/// A well-formed selector as kube's [`Selector`]: matched with [`SelectorExt::matches`] and
/// rendered (`Display`) as the API server's `labelSelector` parameter and as `kubectl` prints
/// one. Checked first with [`validate_label_selector`], whose messages name the expression.
pub fn parse_label_selector(selector: &LabelSelector) -> Result<Selector, SelectorError> {
    validate_label_selector(selector)?;
    Selector::try_from(selector.clone()).map_err(|e| SelectorError::Unparsed(e.0))
}

/// Whether `labels` satisfy `selector`, with Kubernetes semantics: every matchLabels entry and
/// every expression must hold; an empty selector matches everything; `NotIn` and
/// `DoesNotExist` hold when the key is absent.
pub fn label_selector_matches(
    selector: &LabelSelector,
    labels: &BTreeMap<String, String>,
) -> Result<bool, SelectorError> {
    Ok(parse_label_selector(selector)?.matches(labels))
}

/// Renders a well-formed selector the way `kubectl` prints one, for messages.
pub(crate) fn describe_selector(selector: &LabelSelector) -> String {
    match parse_label_selector(selector) {
        Ok(s) if s.selects_all() => "<everything>".to_string(),
        Ok(s) => s.to_string(),
        Err(e) => format!("<invalid: {e}>"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn expr(key: &str, op: &str, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: if values.is_empty() { None } else { Some(values.iter().map(|v| v.to_string()).collect()) },
        }
    }

    fn sel(ml: &[(&str, &str)], exprs: Vec<LabelSelectorRequirement>) -> LabelSelector {
        LabelSelector {
            match_labels: if ml.is_empty() { None } else { Some(labels(ml)) },
            match_expressions: if exprs.is_empty() { None } else { Some(exprs) },
        }
    }

    #[test]
    fn selector_table() {
        let env_prod = labels(&[("env", "prod"), ("team", "a")]);
        let none = labels(&[]);
        let cases: Vec<(&str, LabelSelector, &BTreeMap<String, String>, bool)> = vec![
            ("empty selector matches all", sel(&[], vec![]), &none, true),
            ("matchLabels hit", sel(&[("env", "prod")], vec![]), &env_prod, true),
            ("matchLabels wrong value", sel(&[("env", "dev")], vec![]), &env_prod, false),
            ("matchLabels missing key", sel(&[("env", "prod")], vec![]), &none, false),
            ("In hit", sel(&[], vec![expr("env", "In", &["dev", "prod"])]), &env_prod, true),
            ("In miss", sel(&[], vec![expr("env", "In", &["dev"])]), &env_prod, false),
            ("In absent key", sel(&[], vec![expr("env", "In", &["prod"])]), &none, false),
            ("NotIn hit", sel(&[], vec![expr("env", "NotIn", &["prod"])]), &env_prod, false),
            ("NotIn other", sel(&[], vec![expr("env", "NotIn", &["dev"])]), &env_prod, true),
            ("NotIn absent key", sel(&[], vec![expr("env", "NotIn", &["dev"])]), &none, true),
            ("Exists", sel(&[], vec![expr("team", "Exists", &[])]), &env_prod, true),
            ("Exists absent", sel(&[], vec![expr("team", "Exists", &[])]), &none, false),
            ("DoesNotExist", sel(&[], vec![expr("team", "DoesNotExist", &[])]), &none, true),
            ("DoesNotExist present", sel(&[], vec![expr("team", "DoesNotExist", &[])]), &env_prod, false),
            (
                "labels and expressions are ANDed",
                sel(&[("env", "prod")], vec![expr("team", "In", &["b"])]),
                &env_prod,
                false,
            ),
        ];
        for (name, selector, labels, want) in cases {
            assert_eq!(label_selector_matches(&selector, labels), Ok(want), "{name}");
        }
    }

    #[test]
    fn malformed_selectors_are_errors() {
        let l = labels(&[]);
        let bad_op = sel(&[], vec![expr("a", "Equals", &["x"])]);
        let err = label_selector_matches(&bad_op, &l).unwrap_err();
        assert_eq!(
            err.to_string(),
            "matchExpressions[0].operator \"Equals\" is not valid: use In, NotIn, Exists or DoesNotExist"
        );
        let no_values = sel(&[], vec![expr("a", "In", &[])]);
        assert!(matches!(label_selector_matches(&no_values, &l), Err(SelectorError::MissingValues { .. })));
        let values_on_exists = sel(&[], vec![expr("a", "Exists", &["x"])]);
        assert!(matches!(validate_label_selector(&values_on_exists), Err(SelectorError::UnexpectedValues { .. })));
    }

    #[test]
    fn describes_selectors_like_kubectl() {
        let s = sel(&[("env", "prod")], vec![expr("tier", "In", &["a", "b"]), expr("x", "DoesNotExist", &[])]);
        assert_eq!(describe_selector(&s), "env=prod,tier in (a,b),!x");
        assert_eq!(describe_selector(&sel(&[], vec![])), "<everything>");
        let bad = sel(&[], vec![expr("a", "Equals", &["x"])]);
        assert!(describe_selector(&bad).starts_with("<invalid: matchExpressions[0].operator"));
    }

    #[test]
    fn renders_the_api_servers_label_selector_parameter() {
        let s = sel(
            &[("team", "a")],
            vec![
                expr("k", "In", &["y", "x"]),
                expr("k", "NotIn", &["z"]),
                expr("k", "Exists", &[]),
                expr("k", "DoesNotExist", &[]),
            ],
        );
        assert_eq!(parse_label_selector(&s).unwrap().to_string(), "team=a,k in (x,y),k notin (z),k,!k");
        assert_eq!(parse_label_selector(&LabelSelector::default()).unwrap().to_string(), "");
    }
}
