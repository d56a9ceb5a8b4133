//! Templates admitted with a warning when they would fail at sync: they call a function that
//! is not in `keyward_template`'s table (the one list the engine renders with, the names of
//! upstream's engine v2), or do not parse. Upstream admits such templates too, so this warns
//! and does not deny; the ExternalSecret or PushSecret goes Ready=False at sync with the same
//! message. `keyward check` prints these warnings and `keyward migrate` lists them.
//!
//! Templates read from ConfigMaps and Secrets (`templateFrom[].configMap` / `.secret`) are not
//! in the object and are checked at sync only.

use keyward_crds::external_secret::{ExternalSecretSpec, ExternalSecretTemplate};
use keyward_crds::push_secret::PushSecretSpec;
use keyward_crds::{ClusterExternalSecret, ClusterPushSecret, ExternalSecret, PushSecret};
use keyward_template::{Limits, unknown_functions};
use serde_json::Value;

/// The warning for one template source at `path`, if it would fail at sync.
pub fn template_warning(path: &str, source: &str) -> Option<String> {
    match unknown_functions(path, source, &Limits::default()) {
        Ok(unknown) if unknown.is_empty() => None,
        Ok(unknown) => {
            let names: Vec<String> = unknown.iter().map(|n| format!("{n:?}")).collect();
            Some(format!(
                "{path}: calls {} that no template engine of Keyward or External Secrets has; the sync fails \
                 with Ready=False (function {:?} not defined). docs/templates.md lists the functions",
                if names.len() == 1 {
                    format!("function {}", names[0])
                } else {
                    format!("functions {}", names.join(", "))
                },
                unknown[0]
            ))
        }
        Err(e) => Some(format!("{path}: the template does not parse, so the sync fails with Ready=False: {e}")),
    }
}

fn template_block(out: &mut Vec<String>, path: &str, t: &ExternalSecretTemplate) {
    for (key, source) in &t.data {
        out.extend(template_warning(&format!("{path}.data[{key:?}]"), source));
    }
    for (i, from) in t.template_from.iter().enumerate() {
        if let Some(literal) = &from.literal {
            out.extend(template_warning(&format!("{path}.templateFrom[{i}].literal"), literal));
        }
    }
    if let Some(meta) = &t.metadata {
        for (part, map) in [("labels", &meta.labels), ("annotations", &meta.annotations)] {
            for (key, source) in map {
                out.extend(template_warning(&format!("{path}.metadata.{part}[{key:?}]"), source));
            }
        }
    }
}

/// Warnings for the templates of an ExternalSecret spec at `prefix` (`spec`, or
/// `spec.externalSecretSpec` in a ClusterExternalSecret).
pub fn external_secret_template_warnings(prefix: &str, spec: &ExternalSecretSpec) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(t) = &spec.target.template {
        template_block(&mut out, &format!("{prefix}.target.template"), t);
    }
    for (i, d) in spec.data_from.iter().enumerate() {
        for (j, rw) in d.rewrite.iter().enumerate() {
            if let Some(t) = &rw.transform {
                out.extend(template_warning(
                    &format!("{prefix}.dataFrom[{i}].rewrite[{j}].transform.template"),
                    &t.template,
                ));
            }
        }
    }
    out
}

/// Warnings for the templates of a PushSecret spec at `prefix` (`spec`, or
/// `spec.pushSecretSpec` in a ClusterPushSecret).
pub fn push_secret_template_warnings(prefix: &str, spec: &PushSecretSpec) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(t) = &spec.template {
        template_block(&mut out, &format!("{prefix}.template"), t);
    }
    for (i, d) in spec.data_to.iter().enumerate() {
        for (j, rw) in d.rewrite.iter().enumerate() {
            if let Some(t) = &rw.transform {
                out.extend(template_warning(
                    &format!("{prefix}.dataTo[{i}].rewrite[{j}].transform.template"),
                    &t.template,
                ));
            }
        }
    }
    out
}

/// The template warnings of an object of `kind` as read from the cluster or a file (for
/// `keyward migrate`); kinds without templates, and objects that cannot be read, have none.
pub fn template_warnings(kind: &str, object: &Value) -> Vec<String> {
    match kind {
        "ExternalSecret" => serde_json::from_value::<ExternalSecret>(object.clone())
            .map(|o| external_secret_template_warnings("spec", &o.spec))
            .unwrap_or_default(),
        "ClusterExternalSecret" => serde_json::from_value::<ClusterExternalSecret>(object.clone())
            .map(|o| external_secret_template_warnings("spec.externalSecretSpec", &o.spec.external_secret_spec))
            .unwrap_or_default(),
        "PushSecret" => serde_json::from_value::<PushSecret>(object.clone())
            .map(|o| push_secret_template_warnings("spec", &o.spec))
            .unwrap_or_default(),
        "ClusterPushSecret" => serde_json::from_value::<ClusterPushSecret>(object.clone())
            .map(|o| push_secret_template_warnings("spec.pushSecretSpec", &o.spec.push_secret_spec))
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_functions_and_parse_errors_are_named_with_their_field() {
        let es: ExternalSecret = serde_json::from_value(serde_json::json!({
            "apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
            "metadata": {"name": "e", "namespace": "n"},
            "spec": {
                "secretStoreRef": {"name": "s"},
                "data": [{"secretKey": "k", "remoteRef": {"key": "k"}}],
                "target": {"template": {
                    "data": {
                        "ok": "{{ now | date \"2006\" }} {{ .k | semverCompare \"^1\" }} {{ dig \"a\" \"b\" (dict) }}",
                        "bad": "{{ .k | frobnicate | env }}",
                        "broken": "{{ if }}"
                    },
                    "templateFrom": [{"literal": "{{ getHostByName \"x\" }}"}],
                    "metadata": {"labels": {"l": "{{ expandenv .k }}"}}
                }},
                "dataFrom": [{"extract": {"key": "x"}, "rewrite": [
                    {"transform": {"template": "{{ .value | camelcase }}"}},
                    {"transform": {"template": "{{ nope }}"}}
                ]}]
            }
        }))
        .expect("an ExternalSecret");
        let w = external_secret_template_warnings("spec", &es.spec);
        assert_eq!(w.len(), 5, "{w:#?}");
        assert!(
            w[0].starts_with("spec.target.template.data[\"bad\"]: calls functions \"env\", \"frobnicate\""),
            "{}",
            w[0]
        );
        assert!(w[1].starts_with("spec.target.template.data[\"broken\"]: the template does not parse"), "{}", w[1]);
        assert!(
            w[2].starts_with("spec.target.template.templateFrom[0].literal: calls function \"getHostByName\""),
            "{}",
            w[2]
        );
        assert!(
            w[3].starts_with("spec.target.template.metadata.labels[\"l\"]: calls function \"expandenv\""),
            "{}",
            w[3]
        );
        assert!(
            w[4].starts_with("spec.dataFrom[0].rewrite[1].transform.template: calls function \"nope\""),
            "{}",
            w[4]
        );
        let as_value = serde_json::to_value(&es).expect("json");
        assert_eq!(template_warnings("ExternalSecret", &as_value), w);
    }
}
