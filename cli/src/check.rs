//! `keyward check`: manifests against the webhook's rules, without a cluster. What the webhook
//! would look up in its caches (namespace labels, ClusterProviders, stores) is taken from the
//! files themselves; a namespace not among them counts as one without labels.

use std::path::PathBuf;

use keyward_webhook::offline::State;
use serde::Serialize;

use crate::admission::{Verdict, admitted_kind, defaulted, record, review};
use crate::manifests::{Document, documents};
use crate::{Error, Output};

/// The result for one document.
#[derive(Debug, Serialize)]
pub struct Checked {
    /// `file` or `file#N`.
    pub source: String,
    /// Its kind.
    pub kind: String,
    /// Its name.
    pub name: String,
    /// Its namespace, for namespaced kinds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The webhook's answer; `None` for kinds Keyward does not admit (not checked).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
}

/// Checks every document of `files`; `Ok(false)` when any is refused.
pub fn run(files: &[PathBuf], default_namespace: &str, out: Output) -> Result<bool, Error> {
    let mut docs = Vec::new();
    for f in files {
        docs.extend(documents(f)?);
    }
    let results = check(&docs, default_namespace);
    let ok = results.iter().all(|r| r.verdict.as_ref().is_none_or(|v| v.allowed));
    match out {
        Output::Json => {
            let text = serde_json::to_string_pretty(&results).map_err(|e| Error::Output(e.to_string()))?;
            println!("{text}");
        }
        Output::Text => print!("{}", text(&results)),
    }
    Ok(ok)
}

/// Checks `docs` together: each one sees the others as the cluster.
pub fn check(docs: &[Document], default_namespace: &str) -> Vec<Checked> {
    let namespace_of = |d: &Document| {
        let cluster_scoped = matches!(
            d.kind(),
            "Namespace"
                | "ClusterProvider"
                | "ClusterSecretStore"
                | "ClusterExternalSecret"
                | "ClusterPushSecret"
                | "ClusterGenerator"
                | "CustomResourceDefinition"
        );
        (!cluster_scoped).then(|| d.namespace().unwrap_or(default_namespace).to_string())
    };
    // The webhook's caches hold objects as stored: after the mutating webhook's defaults.
    let mut state = State::default();
    let docs: Vec<Document> = docs
        .iter()
        .map(|d| Document { value: defaulted(&d.value, namespace_of(d).as_deref(), &state), ..d.clone() })
        .collect();
    for d in &docs {
        record(&mut state, &d.value, namespace_of(d).as_deref().unwrap_or_default());
    }
    for d in &docs {
        if let Some(ns) = namespace_of(d) {
            state.namespaces.entry(ns).or_default();
        }
    }
    docs.iter()
        .map(|d| {
            let namespace = namespace_of(d);
            let verdict = admitted_kind(&d.value).and_then(|_| review(&d.value, namespace.as_deref(), false, &state));
            Checked {
                source: d.source.clone(),
                kind: d.kind().to_string(),
                name: d.name().to_string(),
                namespace,
                verdict,
            }
        })
        .collect()
}

/// One line per document: `source: Kind ns/name: ok`, `refused: …` or `not checked`, warnings
/// indented under it.
pub fn text(results: &[Checked]) -> String {
    let mut s = String::new();
    for r in results {
        let object = match &r.namespace {
            Some(ns) => format!("{} {ns}/{}", r.kind, r.name),
            None => format!("{} {}", r.kind, r.name),
        };
        let status = match &r.verdict {
            None => "not checked (not a kind Keyward admits)".to_string(),
            Some(v) if v.allowed => "ok".to_string(),
            Some(v) => format!("refused: {}", v.message.as_deref().unwrap_or("no reason given")),
        };
        s.push_str(&format!("{}: {object}: {status}\n", r.source));
        for w in r.verdict.iter().flat_map(|v| &v.warnings) {
            s.push_str(&format!("  warning: {w}\n"));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifests::parse;

    fn examples(names: &[&str]) -> Vec<Document> {
        let root = std::path::Path::new(
            &std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR when it runs a test"),
        )
        .join("../examples");
        names.iter().flat_map(|n| documents(&root.join(n)).unwrap()).collect()
    }

    #[test]
    fn the_examples_are_admitted_and_refused_as_their_comments_say() {
        let mut docs = examples(&["00-namespaces.yaml", "02-clusterprovider.yaml"]);
        // The examples are templates: fill in the address as `envsubst` would.
        for d in &mut docs {
            if let Some(a) = d.value.pointer_mut("/spec/config/address") {
                *a = "provider.keyward-system.svc:8443".into();
            }
        }
        docs.extend(examples(&["03-externalsecret-allowed.yaml", "04-externalsecret-denied.yaml"]));
        let results = check(&docs, "default");
        let out = text(&results);
        let line = |name: &str| out.lines().find(|l| l.contains(name)).unwrap_or_default().to_string();
        assert!(line("ClusterProvider shared-kubernetes").ends_with(": ok"), "{out}");
        assert!(line("team-a/database").ends_with(": ok"), "{out}");
        let denied = line("team-b/database");
        assert!(denied.contains("refused:") && denied.contains("spec.secretStoreRef"), "{out}");
        assert!(line("Namespace team-a").ends_with("not checked (not a kind Keyward admits)"), "{out}");
    }

    #[test]
    fn templates_calling_functions_no_engine_has_are_warned() {
        let docs = parse(
            "ps.yaml",
            "apiVersion: external-secrets.io/v1alpha1\nkind: PushSecret\nmetadata: {name: p, namespace: apps}\n\
             spec: {secretStoreRefs: [{name: s}], selector: {secret: {name: src}}, data: [{match: {secretKey: k, \
             remoteRef: {remoteKey: r}}}], template: {data: {k: '{{ .k | sha256sum | trunc 8 }}{{ uuidv4 }}', \
             j: '{{ .k | toJsonPath }}'}}}\n",
        )
        .unwrap();
        let out = text(&check(&docs, "default"));
        assert!(out.contains("PushSecret apps/p: ok"), "{out}");
        let warnings: Vec<&str> = out.lines().filter(|l| l.contains("warning:")).collect();
        assert_eq!(warnings.len(), 1, "{out}");
        assert!(warnings[0].contains("spec.template.data[\"j\"]: calls function \"toJsonPath\""), "{out}");
    }

    #[test]
    fn namespaced_objects_without_a_namespace_get_the_default() {
        let docs = parse(
            "s.yaml",
            "apiVersion: external-secrets.io/v1\nkind: SecretStore\nmetadata: {name: s}\n\
             spec: {provider: {fake: {data: [{key: k, value: v}]}}}\n",
        )
        .unwrap();
        let r = check(&docs, "apps");
        assert_eq!(r[0].namespace.as_deref(), Some("apps"));
        assert!(r[0].verdict.as_ref().unwrap().allowed, "{:?}", r[0].verdict);
    }
}
