//! Label selectors as the API server's `labelSelector` query parameter.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// Renders a selector as `k=v,k in (a,b),!k`; an empty selector selects everything.
pub fn to_query(selector: &LabelSelector) -> String {
    let mut parts: Vec<String> = selector.match_labels.iter().flatten().map(|(k, v)| format!("{k}={v}")).collect();
    for e in selector.match_expressions.iter().flatten() {
        let values = e.values.clone().unwrap_or_default().join(",");
        parts.push(match e.operator.as_str() {
            "In" => format!("{} in ({values})", e.key),
            "NotIn" => format!("{} notin ({values})", e.key),
            "Exists" => e.key.clone(),
            _ => format!("!{}", e.key),
        });
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    #[test]
    fn renders_every_operator() {
        let req = |op: &str, values: Option<Vec<&str>>| LabelSelectorRequirement {
            key: "k".into(),
            operator: op.into(),
            values: values.map(|v| v.into_iter().map(String::from).collect()),
        };
        let s = LabelSelector {
            match_labels: Some([("team".to_string(), "a".to_string())].into()),
            match_expressions: Some(vec![
                req("In", Some(vec!["x", "y"])),
                req("NotIn", Some(vec!["z"])),
                req("Exists", None),
                req("DoesNotExist", None),
            ]),
        };
        assert_eq!(to_query(&s), "team=a,k in (x,y),k notin (z),k,!k");
        assert_eq!(to_query(&LabelSelector::default()), "");
    }
}
