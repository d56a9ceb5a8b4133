//! Target templates (`spec.target.template`): renders the Secret's data, type, labels and
//! annotations from the fetched values with the Go text/template engine of
//! `keyward-template`. Loading `templateFrom` ConfigMaps and Secrets is the only I/O; rendering
//! itself is pure.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use keyward_crds::external_secret::{
    ExternalSecretTemplate, TemplateMergePolicy, TemplateRef, TemplateScope, TemplateTarget,
};
use keyward_crds::rules::{PathStep, parse_target_path};
use keyward_template::{Limits, Scope};
use kube::{Api, Client};

use super::decode::decode;
use crate::renders::{RenderError, RenderPool};

/// What a template produces for the target Secret.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rendered {
    /// The Secret's data.
    pub data: BTreeMap<String, Vec<u8>>,
    /// The Secret's type, when the template sets one.
    pub type_: Option<String>,
    /// Labels to add.
    pub labels: BTreeMap<String, String>,
    /// Annotations to add.
    pub annotations: BTreeMap<String, String>,
    /// Finalizers to add (`metadata.finalizers`, as written).
    pub finalizers: Vec<String>,
    /// What `templateFrom` entries with a path target write into a generic target, in order
    /// (only a render for a generic target has any).
    pub at_paths: Vec<AtPath>,
}

/// A value a template writes at a path of a generic target (`templateFrom[].target: spec.database`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AtPath {
    /// Where, parsed by the rule the webhook also uses.
    pub steps: Vec<PathStep>,
    /// The rendered output read as YAML (kept as text when it is not YAML).
    pub value: serde_json::Value,
    /// Whether a map is merged into a map already there (a literal at a nested path, as
    /// upstream) rather than replacing it.
    pub merge: bool,
}

/// What a render is for: a Secret (`templateFrom[].target` names a part of it) or a generic
/// target (it may also name a path into the object).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RenderFor {
    /// The target Secret.
    Secret,
    /// An object of `spec.target.manifest`.
    Generic,
}

/// Object name → key → template (shared: a render on the pool takes a copy of the maps, not of
/// the templates).
type Loaded = BTreeMap<String, BTreeMap<String, Arc<str>>>;

/// Most bytes of templates one render reads with `templateFrom`, all objects together. Only the
/// named items are kept, but a tenant may name a hundred megabyte ConfigMaps; the reconciler's
/// memory is shared by every tenant, and real templates are a few kilobytes.
pub const TEMPLATE_FROM_MAX_BYTES: usize = 4 * 1024 * 1024;

/// Contents of the ConfigMaps and Secrets named in `templateFrom`, by name, then key.
#[derive(Debug, Default, Clone)]
pub struct Sources {
    /// ConfigMap name → key → template.
    pub config_maps: Loaded,
    /// Secret name → key → template.
    pub secrets: Loaded,
}

/// Reads the items `templateFrom` names (only those) from the ConfigMaps and Secrets of the
/// ExternalSecret's namespace, at most [`TEMPLATE_FROM_MAX_BYTES`] in all.
pub async fn load_sources(
    client: &Client,
    namespace: &str,
    template: &ExternalSecretTemplate,
) -> Result<Sources, String> {
    let mut sources = Sources::default();
    let mut total = 0;
    for from in &template.template_from {
        if let Some(r) = &from.config_map {
            let cm = Api::<ConfigMap>::namespaced(client.clone(), namespace)
                .get(&r.name)
                .await
                .map_err(|e| format!("templateFrom ConfigMap {:?}: {e}", r.name))?;
            let data = cm.data.unwrap_or_default();
            keep(&mut sources.config_maps, r, &mut total, |k| data.get(k).map(|v| Arc::from(v.as_str())))?;
        }
        if let Some(r) = &from.secret {
            let s = Api::<Secret>::namespaced(client.clone(), namespace)
                .get(&r.name)
                .await
                .map_err(|e| format!("templateFrom Secret {:?}: {e}", r.name))?;
            let data = s.data.unwrap_or_default();
            keep(&mut sources.secrets, r, &mut total, |k| {
                data.get(k).map(|v| Arc::from(String::from_utf8_lossy(&v.0)))
            })?;
        }
    }
    Ok(sources)
}

/// Keeps the items `r` names of an object (a missing one is reported when rendering), adding
/// their size to `total`.
fn keep(
    loaded: &mut Loaded,
    r: &TemplateRef,
    total: &mut usize,
    item: impl Fn(&str) -> Option<Arc<str>>,
) -> Result<(), String> {
    let kept = loaded.entry(r.name.clone()).or_default();
    for i in &r.items {
        if kept.contains_key(&i.key) {
            continue;
        }
        let Some(value) = item(&i.key) else { continue };
        *total += i.key.len() + value.len();
        if *total > TEMPLATE_FROM_MAX_BYTES {
            return Err(format!(
                "templateFrom names more than {} MiB of templates (at item {:?} of {:?}); name fewer or smaller items",
                TEMPLATE_FROM_MAX_BYTES / (1024 * 1024),
                i.key,
                r.name
            ));
        }
        kept.insert(i.key.clone(), value);
    }
    Ok(())
}

fn scope(s: Option<TemplateScope>) -> Scope {
    match s {
        Some(TemplateScope::KeysAndValues) => Scope::KeysAndValues,
        Some(TemplateScope::Values) | None => Scope::Values,
    }
}

/// Renders `template` over the fetched `data`.
///
/// With neither `data` nor `templateFrom`, the fetched data passes through (a template that
/// only sets the type or metadata). `mergePolicy: Merge` keeps the fetched keys next to the
/// rendered ones (rendered keys win); `Replace` (the default) keeps only rendered keys.
pub fn render(
    template: &ExternalSecretTemplate,
    sources: &Sources,
    data: &BTreeMap<String, Vec<u8>>,
) -> Result<Rendered, String> {
    render_limited(template, sources, data, &Limits::default()).map_err(|e| e.to_string())
}

/// Renders on the pool's render threads (never on an async worker: a template is tenant input
/// and may be slow), within the CPU budget and the time limit of a render.
pub async fn render_in_pool(
    pool: &RenderPool,
    namespace: &str,
    template: &ExternalSecretTemplate,
    sources: &Sources,
    data: &BTreeMap<String, Vec<u8>>,
) -> Result<Rendered, RenderError> {
    render_for_in_pool(pool, namespace, RenderFor::Secret, template, sources, data).await
}

/// [`render_in_pool`] for the target `purpose` names.
pub async fn render_for_in_pool(
    pool: &RenderPool,
    namespace: &str,
    purpose: RenderFor,
    template: &ExternalSecretTemplate,
    sources: &Sources,
    data: &BTreeMap<String, Vec<u8>>,
) -> Result<Rendered, RenderError> {
    let (template, sources, data) = (template.clone(), sources.clone(), data.clone());
    pool.run(namespace, move |limits| render_for(purpose, &template, &sources, &data, limits)).await
}

/// [`render`] with `limits` (their deadline is shared by every template of the render).
pub fn render_limited(
    template: &ExternalSecretTemplate,
    sources: &Sources,
    data: &BTreeMap<String, Vec<u8>>,
    limits: &Limits,
) -> Result<Rendered, RenderError> {
    render_for(RenderFor::Secret, template, sources, data, limits)
}

/// [`render_limited`] for the target `purpose` names. For a generic target the fetched data
/// passes into `data` only with `mergePolicy: Merge` (as upstream, whose generic targets carry
/// only what the template writes: a custom kind has no `data` field to receive it).
pub fn render_for(
    purpose: RenderFor,
    template: &ExternalSecretTemplate,
    sources: &Sources,
    data: &BTreeMap<String, Vec<u8>>,
    limits: &Limits,
) -> Result<Rendered, RenderError> {
    let limit = limits.deadline.map(|d| d.saturating_duration_since(std::time::Instant::now())).unwrap_or_default();
    let e = |e: keyward_template::TemplateError| RenderError::from_template(&e, limit);
    let mut out = Rendered { type_: template.type_.clone(), ..Default::default() };
    for (i, from) in template.template_from.iter().enumerate() {
        // Admission refuses other targets for a Secret; one that got past it is refused here.
        let target = match (from.secret_target(), purpose) {
            (Some(t), _) => Some(t),
            (None, RenderFor::Generic) => None,
            (None, RenderFor::Secret) => {
                return Err(RenderError::Failed(format!(
                    "templateFrom[{i}].target {:?} names no part of a Secret (Data, Annotations, Labels)",
                    from.target
                )));
            }
        };
        let path = from.target.as_deref().unwrap_or_default();
        if target.is_none()
            && let Some(literal) = &from.literal
        {
            // A literal at a path is one YAML document placed there whole, as upstream.
            let name = format!("templateFrom[{i}].literal");
            let text = keyward_template::render(&[(&name, literal)], data, limits).map_err(e)?;
            let text = text.into_values().next().unwrap_or_default();
            let value = serde_yaml::from_slice(&text).map_err(|err| {
                RenderError::Failed(format!("templateFrom[{i}]: output for {path:?} is not YAML: {err}"))
            })?;
            let steps =
                parse_target_path(path).map_err(|err| RenderError::Failed(format!("templateFrom[{i}]: {err}")))?;
            out.at_paths.push(AtPath { merge: steps.len() > 1, steps, value });
        }
        let mut rendered: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        let sourced: [(&Option<TemplateRef>, &Loaded, &str); 2] =
            [(&from.config_map, &sources.config_maps, "ConfigMap"), (&from.secret, &sources.secrets, "Secret")];
        for (reference, loaded, kind) in sourced {
            let Some(r) = reference else { continue };
            let contents = loaded
                .get(&r.name)
                .ok_or_else(|| RenderError::Failed(format!("templateFrom[{i}]: {kind} {:?} not loaded", r.name)))?;
            for item in &r.items {
                let source = contents.get(&item.key).ok_or_else(|| {
                    RenderError::Failed(format!("templateFrom[{i}]: {kind} {:?} has no key {:?}", r.name, item.key))
                })?;
                let one = [(item.key.as_str(), &**source)];
                rendered
                    .extend(keyward_template::render_scoped(scope(item.template_as), &one, data, limits).map_err(e)?);
            }
        }
        if let Some(literal) = from.literal.as_ref().filter(|_| target.is_some()) {
            let name = format!("templateFrom[{i}].literal");
            rendered.extend(keyward_template::render_keys_and_values(&name, literal, data, limits).map_err(e)?);
        }
        if from.values_decoding_strategy.is_some() {
            rendered = rendered
                .into_iter()
                .map(|(k, v)| {
                    let decoded = decode(from.values_decoding_strategy, &k, v);
                    decoded.map(|v| (k, v)).map_err(|e| RenderError::Failed(format!("templateFrom[{i}]: {e}")))
                })
                .collect::<Result<_, _>>()?;
        }
        match target {
            Some(TemplateTarget::Data) => out.data.extend(rendered),
            Some(TemplateTarget::Labels) => out.labels.extend(text(rendered, i).map_err(RenderError::Failed)?),
            Some(TemplateTarget::Annotations) => {
                out.annotations.extend(text(rendered, i).map_err(RenderError::Failed)?)
            }
            None => out.at_paths.extend(
                items_at_path(path, rendered)
                    .map_err(|err| RenderError::Failed(format!("templateFrom[{i}]: {err}")))?,
            ),
        }
    }

    // template.data after templateFrom: an explicit template wins a key both write, as upstream.
    let inline: Vec<(&str, &str)> = template.data.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    out.data.extend(keyward_template::render(&inline, data, limits).map_err(e)?);

    if let Some(meta) = &template.metadata {
        let as_pairs = |m: &BTreeMap<String, String>| -> Vec<(String, String)> {
            m.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
        };
        for (map, target) in [(&meta.labels, &mut out.labels), (&meta.annotations, &mut out.annotations)] {
            let pairs = as_pairs(map);
            let refs: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            target.extend(keyward_template::render_strings(Scope::Values, &refs, data, limits).map_err(e)?);
        }
        out.finalizers.clone_from(&meta.finalizers);
    }

    let renders_data = !template.data.is_empty()
        || template.template_from.iter().any(|f| f.secret_target() == Some(TemplateTarget::Data));
    let merge = template.merge_policy == Some(TemplateMergePolicy::Merge);
    if merge || (!renders_data && purpose == RenderFor::Secret) {
        let mut merged = data.clone();
        merged.extend(out.data);
        out.data = merged;
    }
    Ok(out)
}

/// The rendered items of a ConfigMap or Secret entry with a path target, as upstream places
/// them: under `spec` each item is a key of it (a text value); at any other path the item's
/// value, read as YAML, replaces what is there.
fn items_at_path(path: &str, rendered: BTreeMap<String, Vec<u8>>) -> Result<Vec<AtPath>, String> {
    let steps = parse_target_path(path)?;
    rendered
        .into_iter()
        .map(|(k, v)| {
            let text = String::from_utf8(v).map_err(|_| format!("{k:?} is not text"))?;
            Ok(if path.eq_ignore_ascii_case("spec") {
                AtPath { steps: vec![PathStep::Key("spec".into()), PathStep::Key(k)], value: text.into(), merge: false }
            } else {
                let value = serde_yaml::from_str(&text).unwrap_or(serde_json::Value::String(text));
                AtPath { steps: steps.clone(), value, merge: false }
            })
        })
        .collect()
}

fn text(rendered: BTreeMap<String, Vec<u8>>, i: usize) -> Result<BTreeMap<String, String>, String> {
    rendered
        .into_iter()
        .map(|(k, v)| {
            String::from_utf8(v).map(|v| (k.clone(), v)).map_err(|_| format!("templateFrom[{i}]: {k:?} is not text"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, Vec<u8>> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.as_bytes().to_vec())).collect()
    }

    fn template(yaml: &str) -> ExternalSecretTemplate {
        serde_yaml::from_str(yaml).unwrap()
    }

    fn text_of(r: &Rendered, key: &str) -> String {
        String::from_utf8(r.data[key].clone()).unwrap()
    }

    #[test]
    fn inline_templates_replace_the_data_by_default() {
        let t = template(
            "type: kubernetes.io/dockerconfigjson\ndata:\n  url: 'postgres://{{ .user }}:{{ .pass }}@db:5432/app'\n",
        );
        let r = render(&t, &Sources::default(), &data(&[("user", "app"), ("pass", "pw")])).unwrap();
        assert_eq!(r.data.keys().collect::<Vec<_>>(), ["url"]);
        assert_eq!(text_of(&r, "url"), "postgres://app:pw@db:5432/app");
        assert_eq!(r.type_.as_deref(), Some("kubernetes.io/dockerconfigjson"));
    }

    #[test]
    fn merge_policy_keeps_fetched_keys_and_metadata_is_rendered() {
        let t = template(
            "mergePolicy: Merge\nmetadata:\n  labels: {team: '{{ .team }}'}\n  annotations: {owner: fixed}\n  finalizers: ['example.com/{{ .team }}']\ndata:\n  greeting: 'hi {{ .team }}'\n",
        );
        let r = render(&t, &Sources::default(), &data(&[("team", "payments")])).unwrap();
        assert_eq!(text_of(&r, "team"), "payments");
        assert_eq!(text_of(&r, "greeting"), "hi payments");
        assert_eq!(r.labels["team"], "payments");
        assert_eq!(r.annotations["owner"], "fixed");
        assert_eq!(r.finalizers, ["example.com/{{ .team }}"], "finalizers are copied as written, as upstream");
    }

    #[test]
    fn template_from_config_maps_secrets_and_literals() {
        let t = template(
            "templateFrom:\n- configMap: {name: tpl, items: [{key: config.yaml}, {key: multi, templateAs: KeysAndValues}]}\n\
             - secret: {name: stpl, items: [{key: note}]}\n  target: Annotations\n- literal: 'extra: {{ .a }}'\n",
        );
        let mut sources = Sources::default();
        sources.config_maps.insert(
            "tpl".into(),
            [
                ("config.yaml".to_string(), "password: {{ .a }}\n".into()),
                ("multi".to_string(), "k1: '{{ .a }}1'\nk2: '{{ .a }}2'\n".into()),
            ]
            .into(),
        );
        sources.secrets.insert("stpl".into(), [("note".to_string(), "from {{ .a }}".into())].into());
        let r = render(&t, &sources, &data(&[("a", "x")])).unwrap();
        assert_eq!(text_of(&r, "config.yaml"), "password: x\n");
        assert_eq!((text_of(&r, "k1"), text_of(&r, "k2")), ("x1".into(), "x2".into()));
        assert_eq!(text_of(&r, "extra"), "x");
        assert_eq!(r.annotations["note"], "from x");
        assert!(!r.data.contains_key("a"), "Replace drops fetched keys");
    }

    #[test]
    fn template_from_keeps_only_the_named_items_up_to_a_total() {
        let object: BTreeMap<String, String> =
            [("used", "{{ .a }}"), ("unused", "x"), ("other", "y")].map(|(k, v)| (k.to_string(), v.to_string())).into();
        let item = |k: &str| object.get(k).map(|v| Arc::from(v.as_str()));
        let t = template(
            "templateFrom:\n- configMap: {name: tpl, items: [{key: used}]}\n- configMap: {name: tpl, items: [{key: other}, {key: used}, {key: missing}]}\n- configMap: {name: none}\n",
        );
        let mut loaded = Loaded::new();
        let mut total = 0;
        for from in &t.template_from {
            keep(&mut loaded, from.config_map.as_ref().unwrap(), &mut total, item).unwrap();
        }
        assert_eq!(loaded["tpl"].keys().collect::<Vec<_>>(), ["other", "used"], "the named items, each once");
        assert!(loaded["none"].is_empty(), "no items, nothing kept (as upstream, nothing is rendered of it)");
        assert_eq!(total, "used{{ .a }}".len() + "othery".len());

        // Three ConfigMaps of 1.5 MiB templates: the third passes the 4 MiB total.
        let big = "x".repeat(1536 * 1024);
        let t = template(
            "templateFrom:\n- configMap: {name: a, items: [{key: t}]}\n- configMap: {name: b, items: [{key: t}]}\n- configMap: {name: c, items: [{key: t}]}\n",
        );
        let (mut loaded, mut total) = (Loaded::new(), 0);
        let results: Vec<_> = t
            .template_from
            .iter()
            .map(|from| {
                keep(&mut loaded, from.config_map.as_ref().unwrap(), &mut total, |_| Some(Arc::from(big.as_str())))
            })
            .collect();
        assert!(results[0].is_ok() && results[1].is_ok(), "{results:?}");
        let err = results[2].clone().unwrap_err();
        assert!(err.contains("templateFrom") && err.contains("4 MiB") && err.contains("\"c\""), "{err}");
    }

    #[test]
    fn template_data_wins_a_key_template_from_writes_too() {
        let t = template("data:\n  extra: 'inline {{ .a }}'\ntemplateFrom:\n- literal: 'extra: from {{ .a }}'\n");
        let r = render(&t, &Sources::default(), &data(&[("a", "x")])).unwrap();
        assert_eq!(text_of(&r, "extra"), "inline x", "template.data takes precedence, as upstream");
    }

    #[test]
    fn values_decoding_strategy_decodes_the_values_of_its_entry_only() {
        let t = template(
            "data:\n  plain: '{{ .b64 }}'\ntemplateFrom:\n- literal: 'decoded: {{ .b64 }}'\n  valuesDecodingStrategy: Base64\n\
             - literal: 'kept: {{ .b64 }}'\n- literal: 'auto: {{ .b64 }}'\n  valuesDecodingStrategy: Auto\n\
             - literal: '{{ .b64 }}: x'\n  target: Annotations\n  valuesDecodingStrategy: None\n",
        );
        let r = render(&t, &Sources::default(), &data(&[("b64", "c2VjcmV0")])).unwrap();
        assert_eq!(text_of(&r, "decoded"), "secret");
        assert_eq!(text_of(&r, "auto"), "secret");
        assert_eq!(text_of(&r, "kept"), "c2VjcmV0", "another entry is not decoded");
        assert_eq!(text_of(&r, "plain"), "c2VjcmV0", "template.data is never decoded");
        assert_eq!(r.annotations["c2VjcmV0"], "x", "keys are never decoded");
        let bad = template("templateFrom:\n- literal: 'x: not base64!'\n  valuesDecodingStrategy: Base64\n");
        let err = render(&bad, &Sources::default(), &data(&[])).unwrap_err();
        assert!(err.starts_with("templateFrom[0]: value of \"x\" is not Base64"), "{err}");
    }

    #[test]
    fn a_missing_key_names_the_template_and_line() {
        let t = template("data:\n  conn: \"line1\\n{{ .nope }}\"\n");
        let err = render(&t, &Sources::default(), &data(&[("a", "x")])).unwrap_err();
        assert!(err.contains("conn") && err.contains("line 2") && err.contains("nope"), "{err}");
    }

    #[test]
    fn metadata_only_templates_pass_the_data_through() {
        let t = template("type: Opaque\nmetadata: {labels: {a: b}}\n");
        let r = render(&t, &Sources::default(), &data(&[("k", "v")])).unwrap();
        assert_eq!(text_of(&r, "k"), "v");
    }
}
