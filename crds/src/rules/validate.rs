//! Spec validation for every Keyward kind. Each function returns every violation it finds,
//! each naming the field and what to do.

use std::collections::BTreeSet;

use super::selector::validate_label_selector;
use super::{ValidationErrors, parse_address, parse_go_duration};
use crate::SecretKeySelector;
use crate::common::SecretStoreRef;
use crate::external_secret::{
    CreationPolicy, DeletionPolicy, ExternalSecretFind, ExternalSecretRewrite, ExternalSecretSpec, GeneratorRef,
    MergeStrategy,
};
use crate::free_json::FreeJson;
use crate::provider::{
    AuthenticationScope, ClusterProviderCondition, ClusterProviderSpec, ProviderConfig, ProviderSpec,
};
use crate::push_secret::{PushSecretDataTo, PushSecretSpec, PushSecretStoreRef};

/// Validates an ExternalSecret spec.
pub fn validate_external_secret(spec: &ExternalSecretSpec) -> Result<(), ValidationErrors> {
    let mut errs = ValidationErrors::default();
    if spec.data.is_empty() && spec.data_from.is_empty() {
        errs.push("spec", "set at least one entry in spec.data or spec.dataFrom");
    }
    check_duration(&mut errs, "spec.refreshInterval", &spec.refresh_interval);
    if let Some(windows) = &spec.sync_windows {
        super::validate_sync_windows(&mut errs, "spec.syncWindows", windows);
    }
    if let Some(r) = &spec.secret_store_ref {
        check_store_ref(&mut errs, "spec.secretStoreRef", r);
    }

    let mut keys = BTreeSet::new();
    for (i, d) in spec.data.iter().enumerate() {
        let path = format!("spec.data[{i}]");
        if d.secret_key.is_empty() {
            errs.push(format!("{path}.secretKey"), "must not be empty: name the key of the target Secret");
        } else if spec.target.deletion_policy == DeletionPolicy::Retain && !keys.insert(d.secret_key.as_str()) {
            errs.push(
                format!("{path}.secretKey"),
                format!("duplicate secretKey {:?}: each entry must write a different key", d.secret_key),
            );
        }
        if d.remote_ref.key.is_empty() {
            errs.push(format!("{path}.remoteRef.key"), "must not be empty: name the remote value to fetch");
        }
        check_key(&mut errs, &format!("{path}.remoteRef.key"), &d.remote_ref.key);
        // No store at all is a warning (`external_secret_warnings`), as upstream accepts it.
        if let Some(s) = &d.source_ref {
            check_store_ref(&mut errs, &format!("{path}.sourceRef.storeRef"), &s.store_ref);
        }
    }

    for (i, d) in spec.data_from.iter().enumerate() {
        let path = format!("spec.dataFrom[{i}]");
        let generator = d.source_ref.as_ref().and_then(|s| s.generator_ref.as_ref());
        let store = d.source_ref.as_ref().and_then(|s| s.store_ref.as_ref());
        let set: Vec<&str> = [
            d.extract.as_ref().map(|_| "extract"),
            d.find.as_ref().map(|_| "find"),
            generator.map(|_| "sourceRef.generatorRef"),
        ]
        .into_iter()
        .flatten()
        .collect();
        match set.len() {
            0 if d.source_ref.is_some() => errs.push(
                format!("{path}.sourceRef"),
                "a storeRef needs extract or find in the same entry, or use generatorRef",
            ),
            0 => errs.push(path.clone(), "set exactly one of extract, find or sourceRef"),
            1 => {}
            _ => errs.push(
                path.clone(),
                format!("{} are set; set exactly one of extract, find or sourceRef.generatorRef", set.join(" and ")),
            ),
        }
        if let Some(s) = &d.source_ref
            && s.store_ref.is_none()
            && s.generator_ref.is_none()
        {
            errs.push(format!("{path}.sourceRef"), "set storeRef or generatorRef");
        }
        if let Some(g) = generator {
            check_generator_ref(&mut errs, &format!("{path}.sourceRef.generatorRef"), g);
        }
        if let Some(r) = store {
            check_store_ref(&mut errs, &format!("{path}.sourceRef.storeRef"), r);
        }
        if let Some(e) = &d.extract {
            if e.key.is_empty() {
                errs.push(format!("{path}.extract.key"), "must not be empty: name the remote value to extract");
            }
            check_key(&mut errs, &format!("{path}.extract.key"), &e.key);
        }
        if let Some(f) = &d.find {
            check_find(&mut errs, &format!("{path}.find"), f);
        }
        for (j, rw) in d.rewrite.iter().enumerate() {
            check_rewrite(&mut errs, &format!("{path}.rewrite[{j}]"), rw);
        }
    }

    let (creation, deletion) = (spec.target.creation_policy, spec.target.deletion_policy);
    match (deletion, creation) {
        (DeletionPolicy::Delete, CreationPolicy::Merge | CreationPolicy::None | CreationPolicy::CreateOrMerge) => errs
            .push(
                "spec.target.deletionPolicy",
                format!(
                    "deletionPolicy Delete cannot be used with creationPolicy {creation:?}: Keyward would delete a \
                 Secret it does not own; use creationPolicy Owner or Orphan, or deletionPolicy Retain"
                ),
            ),
        (DeletionPolicy::Merge, CreationPolicy::None) => errs.push(
            "spec.target.deletionPolicy",
            "deletionPolicy Merge cannot be used with creationPolicy None: there is no Secret to merge into; \
             use deletionPolicy Retain",
        ),
        _ => {}
    }
    if spec.target.creation_policy == CreationPolicy::None && spec.target.immutable {
        errs.push("spec.target.immutable", "has no effect with creationPolicy None: no Secret is written");
    }
    // Into a Secret only its data, labels and annotations: a path could reach its type,
    // immutability or owner references. Paths are for non-Secret targets (upstream's manifests).
    let into_secret = spec.target.manifest.as_ref().is_none_or(|m| m.is_secret());
    if let Some(template) = spec.target.template.as_ref() {
        for (i, from) in template.template_from.iter().enumerate() {
            // Into another kind, a path must parse, and may not reach the object's metadata.
            if let Some(path) = from.target.as_deref().filter(|_| !into_secret && from.secret_target().is_none()) {
                if let Err(e) = super::parse_target_path(path) {
                    errs.push(format!("spec.target.template.templateFrom[{i}].target"), e);
                }
            } else if into_secret && from.secret_target().is_none() {
                errs.push(
                    format!("spec.target.template.templateFrom[{i}].target"),
                    format!(
                        "{:?} is not allowed when the target is a Secret: use Data, Annotations or Labels",
                        from.target.as_deref().unwrap_or_default()
                    ),
                );
            }
        }
    }
    errs.into_result()
}

pub(crate) fn check_duration(errs: &mut ValidationErrors, field: &str, value: &str) {
    if let Err(e) = parse_go_duration(value) {
        errs.push(field, e.to_string());
    }
}

fn check_store_ref(errs: &mut ValidationErrors, path: &str, r: &SecretStoreRef) {
    if r.name.is_empty() {
        errs.push(format!("{path}.name"), "must not be empty: name a Provider or ClusterProvider");
    }
}

/// A `generatorRef` must name a generator kind: a served one, or one of upstream's that Keyward
/// does not serve (admitted with a warning, `unserved_generator_warning`). The generator object
/// itself is read, and a ClusterGenerator's conditions checked, where it is used.
fn check_generator_ref(errs: &mut ValidationErrors, path: &str, r: &GeneratorRef) {
    if r.name.is_empty() {
        errs.push(format!("{path}.name"), "must not be empty: name the generator");
    }
    if let Err(e) = super::generator_target(r)
        && super::unserved_generator_warning(r).is_none()
    {
        errs.push(path, e);
    }
}

fn check_regex(errs: &mut ValidationErrors, field: &str, pattern: &str) {
    if let Some(e) = super::patterns::compile_error(pattern) {
        let detail = e.to_string();
        let last = detail.lines().last().unwrap_or_default().trim().to_string();
        errs.push(field, format!("{pattern:?} is not a valid regular expression: {last}"));
    }
}

fn check_find(errs: &mut ValidationErrors, path: &str, f: &ExternalSecretFind) {
    let regexp = f.name.as_ref().and_then(|n| n.regexp.as_deref());
    if let Some(re) = regexp {
        check_regex(errs, &format!("{path}.name.regexp"), re);
    }
    // A find without a filter is a warning (`external_secret_warnings`), as upstream accepts it.
    if let Some(p) = &f.path {
        check_key(errs, &format!("{path}.path"), p);
    }
}

/// A remote key or path must stay inside the store path it is resolved against (see
/// [`super::key_segments`]); the providers refuse the same keys at runtime.
fn check_key(errs: &mut ValidationErrors, path: &str, key: &str) {
    if let Err(e) = super::key_segments(key) {
        errs.push(path, e.to_string());
    }
}

fn check_rewrite(errs: &mut ValidationErrors, path: &str, rw: &ExternalSecretRewrite) {
    match (&rw.merge, &rw.regexp, &rw.transform) {
        (Some(m), None, None) => {
            if m.strategy == Some(MergeStrategy::Json) && m.into.as_deref().is_none_or(str::is_empty) {
                errs.push(
                    format!("{path}.merge.into"),
                    "must name the key that receives the merged JSON (strategy JSON)",
                );
            }
        }
        (None, Some(r), None) => check_regex(errs, &format!("{path}.regexp.source"), &r.source),
        (None, None, Some(t)) if t.template.is_empty() => {
            errs.push(format!("{path}.transform.template"), "must not be empty");
        }
        (None, None, Some(_)) => {}
        _ => errs.push(path, "set exactly one of merge, regexp or transform"),
    }
}

/// Validates a PushSecret spec.
pub fn validate_push_secret(spec: &PushSecretSpec) -> Result<(), ValidationErrors> {
    let mut errs = ValidationErrors::default();
    check_duration(&mut errs, "spec.refreshInterval", &spec.refresh_interval);
    if spec.secret_store_refs.is_empty() {
        errs.push("spec.secretStoreRefs", "list at least one store to push to");
    }
    for (i, r) in spec.secret_store_refs.iter().enumerate() {
        let path = format!("spec.secretStoreRefs[{i}]");
        let named = r.name.as_deref().is_some_and(|n| !n.is_empty());
        match (named, &r.label_selector) {
            (true, Some(_)) => errs.push(path, "set name or labelSelector, not both"),
            (false, None) => errs.push(path, "set name or labelSelector"),
            (false, Some(sel)) => {
                if let Err(e) = validate_label_selector(sel) {
                    errs.push(format!("{path}.labelSelector"), e.to_string());
                }
            }
            (true, None) => {}
        }
    }
    match (&spec.selector.secret, &spec.selector.generator_ref) {
        (Some(s), None) => match (s.name.as_deref(), &s.selector) {
            (Some(""), _) => errs.push("spec.selector.secret.name", "must not be empty: name the Secret to push"),
            (None, None) => errs.push("spec.selector.secret", "set name, or selector to push every Secret it matches"),
            (None, Some(sel)) => {
                if let Err(e) = validate_label_selector(sel) {
                    errs.push("spec.selector.secret.selector", e.to_string());
                }
            }
            (Some(_), _) => {}
        },
        (None, Some(g)) => check_generator_ref(&mut errs, "spec.selector.generatorRef", g),
        _ => errs.push("spec.selector", "set exactly one of secret or generatorRef"),
    }
    let mut targets = BTreeSet::new();
    for (i, d) in spec.data.iter().enumerate() {
        let path = format!("spec.data[{i}]");
        // An empty remote key is a warning (`push_secret_warnings`), as upstream accepts it.
        if !d.match_.remote_ref.remote_key.is_empty() && !targets.insert(&d.match_.remote_ref) {
            errs.push(format!("{path}.match.remoteRef"), "another entry already pushes to this remoteKey and property");
        }
        check_key(&mut errs, &format!("{path}.match.remoteRef.remoteKey"), &d.match_.remote_ref.remote_key);
        check_push_metadata(&mut errs, &path, d.metadata.as_ref());
    }
    for (i, d) in spec.data_to.iter().enumerate() {
        check_data_to(&mut errs, &format!("spec.dataTo[{i}]"), d, &spec.secret_store_refs);
    }
    errs.into_result()
}

fn check_data_to(errs: &mut ValidationErrors, path: &str, d: &PushSecretDataTo, refs: &[PushSecretStoreRef]) {
    let name = d.store_ref.as_ref().and_then(|r| r.name.as_deref()).filter(|n| !n.is_empty());
    let selector = d.store_ref.as_ref().and_then(|r| r.label_selector.as_ref());
    match (name, selector) {
        (None, None) => errs.push(format!("{path}.storeRef"), "set storeRef.name or storeRef.labelSelector"),
        (Some(_), Some(_)) => errs.push(format!("{path}.storeRef"), "set name or labelSelector, not both"),
        (Some(n), None) => {
            // Omitted kinds are SecretStores on both sides, as upstream.
            let kind = super::store_ref_kind(d.store_ref.as_ref().and_then(|r| r.kind));
            let listed = refs.iter().any(|r| r.name.as_deref() == Some(n) && super::store_ref_kind(r.kind) == kind);
            if !listed {
                errs.push(
                    format!("{path}.storeRef.name"),
                    format!("{kind} {n:?} is not listed in spec.secretStoreRefs (an omitted kind is SecretStore)"),
                );
            }
        }
        (None, Some(sel)) => {
            if let Err(e) = validate_label_selector(sel) {
                errs.push(format!("{path}.storeRef.labelSelector"), e.to_string());
            }
        }
    }
    if let Some(k) = &d.remote_key {
        check_key(errs, &format!("{path}.remoteKey"), k);
    }
    let bundle = d.remote_key.as_deref().is_some_and(|k| !k.is_empty());
    if bundle && !d.rewrite.is_empty() {
        errs.push(
            format!("{path}.rewrite"),
            "remoteKey and rewrite are mutually exclusive: rewrite names per-key remote values (omit remoteKey)",
        );
    }
    if let Some(re) = d.match_.as_ref().and_then(|m| m.regexp.as_deref()) {
        check_regex(errs, &format!("{path}.match.regexp"), re);
    }
    for (j, rw) in d.rewrite.iter().enumerate() {
        let path = format!("{path}.rewrite[{j}]");
        match (&rw.regexp, &rw.transform) {
            (Some(_), None) | (None, Some(_)) => check_rewrite(errs, &path, &rw.into()),
            _ => errs.push(path, "set exactly one of regexp or transform"),
        }
    }
    check_push_metadata(errs, path, d.metadata.as_ref());
}

/// The free-form fields of a PushSecret (`metadata` of each `data` and `dataTo` entry) within
/// their limits: part of [`validate_push_secret`], and what the reconciler checks again before
/// a push, since metadata past them was not kept.
pub fn push_secret_free_json(spec: &PushSecretSpec) -> Result<(), ValidationErrors> {
    let mut errs = ValidationErrors::default();
    let data = spec.data.iter().enumerate().map(|(i, d)| (format!("spec.data[{i}].metadata"), &d.metadata));
    let data_to = spec.data_to.iter().enumerate().map(|(i, d)| (format!("spec.dataTo[{i}].metadata"), &d.metadata));
    for (field, m) in data.chain(data_to) {
        if let Some(Err(e)) = m.as_ref().map(|m| m.check(&field)) {
            errs.0.push(e);
        }
    }
    errs.into_result()
}

/// A push's `metadata`: an object, within the free-form JSON limits.
fn check_push_metadata(errs: &mut ValidationErrors, path: &str, metadata: Option<&FreeJson>) {
    let Some(m) = metadata else { return };
    let field = format!("{path}.metadata");
    match m.check(&field) {
        Err(e) => errs.0.push(e),
        Ok(()) if !m.is_object() => errs.push(field, "must be an object"),
        Ok(()) => {}
    }
}

fn check_provider_config(errs: &mut ValidationErrors, c: &ProviderConfig) {
    if let Err(e) = parse_address(&c.address) {
        errs.push("spec.config.address", e);
    }
    let r = &c.provider_ref;
    for (field, value) in [("apiVersion", &r.api_version), ("kind", &r.kind), ("name", &r.name)] {
        if value.is_empty() {
            errs.push(
                format!("spec.config.providerRef.{field}"),
                "must not be empty: reference the provider configuration object",
            );
        }
    }
}

/// Validates a namespaced Provider living in `namespace`.
pub fn validate_provider(namespace: &str, spec: &ProviderSpec) -> Result<(), ValidationErrors> {
    let mut errs = ValidationErrors::default();
    check_provider_config(&mut errs, &spec.config);
    if let Some(ns) = spec.config.provider_ref.namespace.as_deref()
        && !ns.is_empty()
        && ns != namespace
    {
        errs.push(
            "spec.config.providerRef.namespace",
            format!(
                "a namespaced Provider always uses its own namespace {namespace:?}; remove the namespace {ns:?} \
                 or use a ClusterProvider"
            ),
        );
    }
    errs.into_result()
}

/// Validates a ClusterProvider.
pub fn validate_cluster_provider(spec: &ClusterProviderSpec) -> Result<(), ValidationErrors> {
    let mut errs = ValidationErrors::default();
    check_provider_config(&mut errs, &spec.config);
    if spec.authentication_scope == AuthenticationScope::ProviderNamespace
        && spec.config.provider_ref.namespace.as_deref().unwrap_or_default().is_empty()
    {
        errs.push(
            "spec.config.providerRef.namespace",
            "required with authenticationScope ProviderNamespace: set it to the namespace that holds the \
             provider configuration and its credentials, or use authenticationScope: ManifestNamespace",
        );
    }
    check_conditions(&mut errs, &spec.conditions);
    errs.into_result()
}

/// The namespace conditions of a ClusterProvider or ClusterSecretStore: each sets a criterion,
/// and its selector and regexes parse.
pub(crate) fn check_conditions(errs: &mut ValidationErrors, conditions: &[ClusterProviderCondition]) {
    for (i, c) in conditions.iter().enumerate() {
        let path = format!("spec.conditions[{i}]");
        if c.namespace_selector.is_none() && c.namespaces.is_empty() && c.namespace_regexes.is_empty() {
            errs.push(
                path.clone(),
                "set namespaceSelector, namespaces or namespaceRegexes: an empty condition admits no namespace",
            );
        }
        if let Some(sel) = &c.namespace_selector
            && let Err(e) = validate_label_selector(sel)
        {
            errs.push(format!("{path}.namespaceSelector"), e.to_string());
        }
        for (j, re) in c.namespace_regexes.iter().enumerate() {
            check_regex(errs, &format!("{path}.namespaceRegexes[{j}]"), re);
        }
    }
}

/// A Secret key reference's errors at `path`: a Secret named, and a key when `key_required`.
pub fn check_secret_key(errs: &mut ValidationErrors, path: &str, s: &SecretKeySelector, key_required: bool) {
    if s.name.is_empty() {
        errs.push(format!("{path}.name"), "must not be empty: name the Secret");
    }
    if key_required && s.key.as_deref().unwrap_or_default().is_empty() {
        errs.push(format!("{path}.key"), "must not be empty: name the key inside the Secret");
    }
}

/// A DNS-1123 label: a namespace name.
pub fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// A DNS-1123 subdomain: an object name such as a Secret's (at most 253 characters; parts
/// joined by `.`, each like a label but, as the API server has it, of any length).
pub fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253
        && s.split('.').all(|part| {
            !part.is_empty()
                && part.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !part.starts_with('-')
                && !part.ends_with('-')
        })
}

#[cfg(test)]
#[path = "validate_tests.rs"]
mod tests;
