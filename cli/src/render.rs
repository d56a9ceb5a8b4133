//! `keyward render`: an ExternalSecret's `spec.target.template` rendered locally over given
//! values, through the reconciler's own render path (its render thread, CPU budget and time
//! limit) and its own target Secret body.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use clap::CommandFactory;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use keyward_crds::ExternalSecret;
use keyward_crds::rules::parse_go_duration;
use keyward_reconciler::offline::{
    HashKey, RenderPool, Sources, data_hash, desired, render_in_pool, with_rendered_metadata,
};
use serde_json::Value;

use crate::Error;
use crate::manifests::{Document, documents, parse};

/// The reconciler's default `--template-time-limit`, read from its own command line.
pub fn default_time_limit() -> Duration {
    let command = keyward_reconciler::offline::Cli::command();
    command
        .get_arguments()
        .find(|a| a.get_id() == "template_time_limit")
        .and_then(|a| a.get_default_values().first().and_then(|v| v.to_str()).map(str::to_string))
        .and_then(|v| parse_go_duration(&v).ok())
        .unwrap_or(Duration::from_secs(5))
}

/// The fetched values: a map of key to value; values that are not strings are written as JSON,
/// as a provider answering with a structured value would.
pub fn values(name: &str, text: &str) -> Result<BTreeMap<String, Vec<u8>>, Error> {
    let bad = |message: String| Error::Manifest { path: name.to_string(), message };
    let docs = parse(name, text)?;
    let [doc] = docs.as_slice() else {
        return Err(bad(format!("holds {} documents; give one map of key to value", docs.len())));
    };
    let Value::Object(map) = &doc.value else {
        return Err(bad("is not a map of key to value".into()));
    };
    Ok(map
        .iter()
        .map(|(k, v)| {
            let bytes = match v {
                Value::String(s) => s.clone().into_bytes(),
                other => other.to_string().into_bytes(),
            };
            (k.clone(), bytes)
        })
        .collect())
}

/// The ExternalSecret of the manifest, and the ConfigMaps and Secrets beside it (the
/// `templateFrom` sources).
pub fn split(docs: &[Document]) -> Result<(ExternalSecret, Sources), Error> {
    let mut found = Vec::new();
    let mut sources = Sources::default();
    for d in docs {
        let read_err = |e: serde_json::Error| Error::Manifest { path: d.source.clone(), message: e.to_string() };
        match d.kind() {
            "ExternalSecret" => {
                found.push(serde_json::from_value::<ExternalSecret>(d.value.clone()).map_err(read_err)?)
            }
            "ConfigMap" => {
                let cm: ConfigMap = serde_json::from_value(d.value.clone()).map_err(read_err)?;
                sources.config_maps.insert(
                    d.name().to_string(),
                    cm.data.unwrap_or_default().into_iter().map(|(k, v)| (k, v.into())).collect(),
                );
            }
            "Secret" => {
                let s: Secret = serde_json::from_value(d.value.clone()).map_err(read_err)?;
                let mut data: BTreeMap<String, String> = s
                    .data
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (k, String::from_utf8_lossy(&v.0).into_owned()))
                    .collect();
                data.extend(s.string_data.unwrap_or_default());
                sources.secrets.insert(d.name().to_string(), data.into_iter().map(|(k, v)| (k, v.into())).collect());
            }
            _ => {}
        }
    }
    match found.len() {
        1 => Ok((found.remove(0), sources)),
        n => Err(Error::Usage(format!("the manifest holds {n} ExternalSecrets; give a file with exactly one"))),
    }
}

/// Renders and returns the Secret as YAML.
pub async fn render(
    mut es: ExternalSecret,
    sources: &Sources,
    data: &BTreeMap<String, Vec<u8>>,
    namespace: Option<&str>,
    limit: Duration,
) -> Result<String, Error> {
    if es.metadata.namespace.is_none() {
        es.metadata.namespace = namespace.map(str::to_string);
    }
    let ns = es.metadata.namespace.clone().unwrap_or_default();
    let target = &es.spec.target;
    let rendered = match &target.template {
        None => None,
        Some(template) => {
            let pool = RenderPool::new(1, limit);
            let r = render_in_pool(&pool, &ns, template, sources, data).await.map_err(|e| {
                let hint = if e.to_string().contains("not loaded") {
                    " (put the ConfigMap or Secret that templateFrom names in the manifest file)"
                } else {
                    ""
                };
                Error::Template(format!("{e}{hint}"))
            })?;
            Some(r)
        }
    };
    let data = rendered.as_ref().map_or(data, |r| &r.data);
    // The cluster's hash key is the release's own: a local render hashes under a key of its own.
    let mut hash = data_hash(&HashKey::random(), data, target.creation_policy, target.immutable);
    if let Some(r) = &rendered {
        hash = with_rendered_metadata(&hash, r);
    }
    let mut body = desired(&es, data, &hash, rendered.as_ref());
    if let Some(meta) = body.get_mut("metadata").and_then(Value::as_object_mut)
        && meta.get("namespace").is_some_and(Value::is_null)
    {
        meta.remove("namespace");
    }
    serde_yaml::to_string(&body).map_err(|e| Error::Output(e.to_string()))
}

/// `keyward render -f MANIFEST --data DATA`.
pub async fn run(file: &Path, data: &Path, namespace: Option<&str>, limit: Option<Duration>) -> Result<bool, Error> {
    let (es, sources) = split(&documents(file)?)?;
    let values = values(&data.display().to_string(), &crate::manifests::read_text(data)?)?;
    let yaml = render(es, &sources, &values, namespace, limit.unwrap_or_else(default_time_limit)).await?;
    print!("{yaml}");
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MANIFEST: &str = "apiVersion: external-secrets.io/v1\nkind: ExternalSecret\n\
        metadata: {name: db, namespace: apps}\nspec:\n  secretStoreRef: {name: s, kind: SecretStore}\n  \
        target:\n    name: db-url\n    template:\n      type: Opaque\n      metadata: {labels: {team: '{{ .team }}'}}\n      \
        data: {url: 'postgres://{{ .user }}:{{ .password | urlquery }}@db/app'}\n      \
        templateFrom: [{configMap: {name: tpl, items: [{key: extra}]}}]\n---\n\
        apiVersion: v1\nkind: ConfigMap\nmetadata: {name: tpl}\ndata: {extra: 'port={{ .port }}'}\n";

    #[tokio::test]
    async fn renders_the_secret_the_reconciler_would_apply() {
        let (es, sources) = split(&parse("m.yaml", MANIFEST).unwrap()).unwrap();
        let data = values("d.json", r#"{"user": "app", "password": "p@ss", "team": "pay", "port": 5432}"#).unwrap();
        let yaml = render(es, &sources, &data, None, default_time_limit()).await.unwrap();
        let secret: Secret = serde_yaml::from_str(&yaml).unwrap();
        let d = secret.data.unwrap();
        assert_eq!(d["url"].0, b"postgres://app:p%40ss@db/app");
        assert_eq!(d["extra"].0, b"port=5432", "non-string values are written as JSON");
        assert_eq!(secret.metadata.name.as_deref(), Some("db-url"));
        assert_eq!(secret.metadata.namespace.as_deref(), Some("apps"));
        let labels = secret.metadata.labels.unwrap();
        assert_eq!(labels["team"], "pay");
        assert_eq!(labels["reconcile.external-secrets.io/managed"], "true");
        assert_eq!(secret.type_.as_deref(), Some("Opaque"));
    }

    #[tokio::test]
    async fn template_errors_name_the_template_and_the_key() {
        let (es, sources) = split(&parse("m.yaml", MANIFEST).unwrap()).unwrap();
        let data = values("d.yaml", "user: app\n").unwrap();
        let err = render(es, &sources, &data, None, default_time_limit()).await.unwrap_err().to_string();
        assert!(err.starts_with("template error: ") && err.contains("port"), "{err}");
        let (es, _) = split(&parse("m.yaml", MANIFEST).unwrap()).unwrap();
        let err = render(es, &Sources::default(), &data, None, default_time_limit()).await.unwrap_err().to_string();
        assert!(err.contains("put the ConfigMap or Secret"), "{err}");
    }

    #[test]
    fn inputs_are_checked() {
        assert!(values("d", "- a\n").unwrap_err().to_string().contains("not a map"));
        assert!(split(&[]).unwrap_err().to_string().contains("0 ExternalSecrets"));
        assert_eq!(default_time_limit(), Duration::from_secs(5));
    }
}
