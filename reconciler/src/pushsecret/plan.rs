//! What one reconcile pushes to one store: the explicit `data` entries and the `dataTo` rules
//! that name this store, expanded into single pushes (the same PushSecret gRPC call each).
//!
//! A `dataTo` rule takes the source keys (after `ReverseUnicode`, when asked) that match its
//! regexp; with `remoteKey` they go together as one push of that map (bundle mode), without it
//! each key is its own push to the key after `rewrite` (per-key mode). An explicit `data` entry
//! for the same source key wins over a per-key push; two pushes to one remote location are an
//! error naming both.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use keyward_crds::StoreKind;
use keyward_crds::external_secret::ExternalSecretRewrite;
use keyward_crds::push_secret::{
    PushSecretConversionStrategy, PushSecretData, PushSecretDataTo, PushSecretMatch, PushSecretRemoteRef,
    PushSecretSpec,
};
use keyward_crds::rules::{label_selector_matches, store_ref_kind};
use regex::Regex;

use crate::externalsecret::decode::KeyRewrites;
use crate::keys::{map_keys, reverse_key};
use crate::renders::{RenderError, RenderPool};

/// Longest remote key a rewrite may make: more than any store takes as a name (AWS allows 512
/// bytes, GCP 255, Azure 127), so a rewrite that grows keys is stopped before they are built.
const REMOTE_KEY_MAX: usize = 512;

/// One push.
#[derive(Debug, Clone, PartialEq)]
pub struct Push {
    /// Where it comes from, for messages: `data[0]`, `dataTo[1] (DB_HOST)`.
    pub origin: String,
    /// The entry as recorded in `status.syncedPushSecrets` (its metadata says where it wrote).
    pub entry: PushSecretData,
    /// The map sent with the push: `entry`'s one key when it names one, else the whole Secret
    /// (shared by every push of it).
    pub data: Arc<HashMap<String, Vec<u8>>>,
}

/// The store a plan is for.
#[derive(Debug, Clone, Copy)]
pub struct Store<'a> {
    /// Its name.
    pub name: &'a str,
    /// Its kind.
    pub kind: StoreKind,
    /// Its labels.
    pub labels: &'a BTreeMap<String, String>,
}

/// Every push of `spec` to `store`, from the source Secret's `data`.
///
/// A push that names one source key carries that key alone, and pushes of the whole Secret
/// share one copy: what a PushSecret holds and sends grows with the Secret, not with the Secret
/// times its entries (a megabyte Secret pushed key by key would otherwise be copied once per key,
/// into the memory every tenant's reconciles share).
///
/// Remote keys made by `rewrite` transforms (templates: tenant input) are rendered on a render
/// thread of `renders`, all the keys of the plan together within one render's budget, and each
/// rewrite is compiled once per plan, not once per key.
pub async fn plan(
    spec: &PushSecretSpec,
    store: Store<'_>,
    source: &HashMap<String, Vec<u8>>,
    renders: &RenderPool,
    namespace: &str,
) -> Result<Vec<Push>, String> {
    let mut views = Views::new(source);
    let mut rules = Vec::new();
    for (i, d) in spec.data_to.iter().enumerate() {
        if targets(d, store).map_err(|e| format!("dataTo[{i}].storeRef: {e}"))? {
            let view = views.get(d.conversion_strategy).map_err(|e| format!("dataTo[{i}].conversionStrategy: {e}"))?;
            rules.push(select(i, d, view).map_err(|e| format!("dataTo[{i}]: {e}"))?);
        }
    }
    let renames: Vec<Renames> = rules.iter_mut().filter_map(|r| r.renames.take()).collect();
    let renamed = if renames.iter().any(|r| r.rewrites.transforms() > 0) {
        renders.run(namespace, move |limits| Ok(rename(renames, limits))).await.map_err(|e| e.to_string())?
    } else {
        rename(renames, &keyward_template::Limits::default())
    };
    let mut renamed = renamed.into_iter();
    let mut pushes = Vec::new();
    for rule in rules {
        let d = &spec.data_to[rule.index];
        let view =
            views.get(d.conversion_strategy).map_err(|e| format!("dataTo[{}].conversionStrategy: {e}", rule.index))?;
        let rule_pushes = match rule.bundle {
            Some(push) => vec![push],
            None => {
                let remotes = renamed.next().ok_or("a rule's remote keys were not worked out")?;
                expand(d, view, remotes).map_err(|e| format!("dataTo[{}]{e}", rule.index))?
            }
        };
        pushes.extend(rule_pushes.into_iter().map(|mut p| {
            p.origin = format!("dataTo[{}]{}", rule.index, p.origin);
            p
        }));
    }
    // Explicit entries win over per-key dataTo pushes of the same source key.
    let mut explicit = Vec::with_capacity(spec.data.len());
    let mut overridden = HashSet::new();
    for (i, d) in spec.data.iter().enumerate() {
        let view = views.get(d.conversion_strategy).map_err(|e| format!("data[{i}].conversionStrategy: {e}"))?;
        let data = match &d.match_.secret_key {
            Some(k) => {
                let value = view.data.get(k).ok_or_else(|| format!("data[{i}]: source Secret has no key {k:?}"))?;
                overridden.insert(view.source_key(k).to_string());
                Arc::new(HashMap::from([(k.clone(), value.clone())]))
            }
            None => view.data.clone(),
        };
        explicit.push(Push { origin: format!("data[{i}]"), entry: d.clone(), data });
    }
    pushes.retain(|p: &Push| p.entry.match_.secret_key.as_ref().is_none_or(|k| !overridden.contains(k)));
    pushes.extend(explicit);
    let mut seen: BTreeMap<(&str, Option<&str>), &str> = BTreeMap::new();
    for p in &pushes {
        let r = &p.entry.match_.remote_ref;
        if let Some(first) = seen.insert((&r.remote_key, r.property.as_deref()), &p.origin) {
            return Err(format!("{first} and {} both push to remote key {:?}", p.origin, r.remote_key));
        }
    }
    Ok(pushes)
}

/// Whether a rule names this store.
fn targets(d: &PushSecretDataTo, store: Store<'_>) -> Result<bool, String> {
    let Some(r) = &d.store_ref else { return Ok(false) };
    // An omitted kind is a SecretStore, as upstream, for a name and a label selector alike.
    if store_ref_kind(r.kind) != store.kind {
        return Ok(false);
    }
    if let Some(name) = r.name.as_deref().filter(|n| !n.is_empty()) {
        return Ok(name == store.name);
    }
    match &r.label_selector {
        Some(sel) => label_selector_matches(sel, store.labels).map_err(|e| e.to_string()),
        None => Ok(false),
    }
}

/// The source Secret as one conversion strategy reads it.
struct View {
    /// Values by key as read (after `ReverseUnicode`, when asked), shared by the pushes of the
    /// whole Secret.
    data: Arc<HashMap<String, Vec<u8>>>,
    /// The source Secret's key of each key as read, where the two differ.
    source_keys: HashMap<String, String>,
}

impl View {
    fn new(strategy: Option<PushSecretConversionStrategy>, source: &HashMap<String, Vec<u8>>) -> Result<View, String> {
        if strategy != Some(PushSecretConversionStrategy::ReverseUnicode) {
            return Ok(View { data: Arc::new(source.clone()), source_keys: HashMap::new() });
        }
        let data = map_keys(source.iter().map(|(k, v)| (k.clone(), v.clone())), |k| reverse_key(strategy, k))?;
        let source_keys = source
            .keys()
            .map(|k| (reverse_key(strategy, k), k))
            .filter(|(read, k)| read != *k)
            .map(|(read, k)| (read, k.clone()))
            .collect();
        Ok(View { data: Arc::new(data.into_iter().collect()), source_keys })
    }

    /// The source Secret's key that reads as `key`.
    fn source_key<'k>(&'k self, key: &'k str) -> &'k str {
        self.source_keys.get(key).map_or(key, String::as_str)
    }
}

/// The views of one plan, each worked out once, when first asked for.
struct Views<'a> {
    source: &'a HashMap<String, Vec<u8>>,
    plain: Option<View>,
    reversed: Option<View>,
}

impl<'a> Views<'a> {
    fn new(source: &'a HashMap<String, Vec<u8>>) -> Self {
        Views { source, plain: None, reversed: None }
    }

    fn get(&mut self, strategy: Option<PushSecretConversionStrategy>) -> Result<&View, String> {
        let slot = match strategy {
            Some(PushSecretConversionStrategy::ReverseUnicode) => &mut self.reversed,
            _ => &mut self.plain,
        };
        if slot.is_none() {
            *slot = Some(View::new(strategy, self.source)?);
        }
        slot.as_ref().ok_or_else(|| "a view of the source Secret was not made".to_string())
    }
}

/// One `dataTo` rule that names the store: its bundle push, or the keys it pushes one by one.
struct Rule {
    index: usize,
    bundle: Option<Push>,
    renames: Option<Renames>,
}

/// The matched keys of a per-key rule, as read, and the rewrites that make their remote keys.
struct Renames {
    rewrites: KeyRewrites,
    keys: Vec<String>,
}

/// The bundle push of a rule, or the keys it pushes one by one (none when nothing matches).
fn select(index: usize, d: &PushSecretDataTo, view: &View) -> Result<Rule, String> {
    let pattern = match d.match_.as_ref().and_then(|m| m.regexp.as_deref()).filter(|r| !r.is_empty()) {
        Some(re) => Some(Regex::new(re).map_err(|e| format!("match.regexp {re:?} is invalid: {e}"))?),
        None => None,
    };
    let matched: BTreeMap<&String, &Vec<u8>> =
        view.data.iter().filter(|(k, _)| pattern.as_ref().is_none_or(|p| p.is_match(k))).collect();
    let mut rule = Rule { index, bundle: None, renames: None };
    if let Some(remote_key) = d.remote_key.as_deref().filter(|k| !k.is_empty()) {
        if matched.is_empty() {
            return Ok(Rule { renames: Some(Renames::none()), ..rule });
        }
        if !d.rewrite.is_empty() {
            return Err("remoteKey and rewrite are mutually exclusive".into());
        }
        let data = Arc::new(matched.into_iter().map(|(k, v)| (k.clone(), v.clone())).collect());
        rule.bundle = Some(Push { origin: String::new(), entry: entry(d, None, remote_key.to_string()), data });
        return Ok(rule);
    }
    if matched.is_empty() {
        return Ok(Rule { renames: Some(Renames::none()), ..rule });
    }
    let rewrites: Vec<ExternalSecretRewrite> = d.rewrite.iter().map(Into::into).collect();
    let rewrites = KeyRewrites::compile(&rewrites, REMOTE_KEY_MAX, "remote key").map_err(|e| e.to_string())?;
    rule.renames = Some(Renames { rewrites, keys: matched.into_keys().cloned().collect() });
    Ok(rule)
}

impl Renames {
    fn none() -> Self {
        Renames { rewrites: KeyRewrites::none(REMOTE_KEY_MAX, "remote key"), keys: Vec::new() }
    }
}

/// Each key of each rule with its remote key, or why it has none (`" (KEY): …"`); the transforms
/// of every key together take at most `limits.max_steps` steps.
fn rename(renames: Vec<Renames>, limits: &keyward_template::Limits) -> Vec<Vec<(String, Result<String, String>)>> {
    let runs: usize = renames.iter().map(|r| r.keys.len() * r.rewrites.transforms()).sum();
    let each = keyward_template::Limits { max_steps: (limits.max_steps / runs.max(1)).max(1), ..limits.clone() };
    let mut failed = false;
    renames
        .into_iter()
        .map(|r| {
            r.keys
                .into_iter()
                .map(|key| {
                    // After the first failure (the budget may be spent) the other keys are not rewritten.
                    let remote = if failed {
                        Err(String::new())
                    } else {
                        r.rewrites.key(&key, &each).map_err(|e: RenderError| format!(" ({key}): {e}"))
                    };
                    failed |= remote.is_err();
                    (key, remote)
                })
                .collect()
        })
        .collect()
}

fn entry(d: &PushSecretDataTo, secret_key: Option<String>, remote_key: String) -> PushSecretData {
    PushSecretData {
        match_: PushSecretMatch { secret_key, remote_ref: PushSecretRemoteRef { remote_key, property: None } },
        metadata: d.metadata.clone(),
        conversion_strategy: None,
    }
}

/// The per-key pushes of one rule; their origin is the key suffix (` (KEY)`).
fn expand(
    d: &PushSecretDataTo,
    view: &View,
    remotes: Vec<(String, Result<String, String>)>,
) -> Result<Vec<Push>, String> {
    let mut pushes = Vec::with_capacity(remotes.len());
    for (key, remote) in remotes {
        let remote = remote?;
        if remote.is_empty() {
            return Err(format!(": rewrite turns key {key:?} into an empty remote key"));
        }
        let value = view.data.get(&key).ok_or_else(|| format!(" ({key}): the key is gone from the source Secret"))?;
        // The entry names the source key as the Secret holds it; the push sends that key.
        let original = view.source_key(&key).to_string();
        pushes.push(Push {
            origin: format!(" ({key})"),
            data: Arc::new(HashMap::from([(original.clone(), value.clone())])),
            entry: entry(d, Some(original), remote),
        });
    }
    Ok(pushes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(yaml: &str) -> PushSecretSpec {
        serde_yaml::from_str(yaml).unwrap()
    }

    fn source(keys: &[(&str, &str)]) -> HashMap<String, Vec<u8>> {
        keys.iter().map(|(k, v)| (k.to_string(), v.as_bytes().to_vec())).collect()
    }

    fn store(labels: &BTreeMap<String, String>) -> Store<'_> {
        Store { name: "s", kind: StoreKind::SecretStore, labels }
    }

    fn remotes(pushes: &[Push]) -> Vec<(Option<&str>, &str)> {
        pushes
            .iter()
            .map(|p| (p.entry.match_.secret_key.as_deref(), p.entry.match_.remote_ref.remote_key.as_str()))
            .collect()
    }

    /// [`plan`] with a render pool of its own.
    fn run(spec: &PushSecretSpec, store: Store<'_>, source: &HashMap<String, Vec<u8>>) -> Result<Vec<Push>, String> {
        let pool = RenderPool::new(1, std::time::Duration::from_secs(10));
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(plan(spec, store, source, &pool, "ns"))
    }

    const BASE: &str = "selector: {secret: {name: src}}\nsecretStoreRefs: [{name: s}]\n";

    #[test]
    fn bundle_pushes_the_matched_keys_as_one_map() {
        let s = spec(&format!(
            "{BASE}dataTo: [{{storeRef: {{name: s}}, remoteKey: my-app/config, match: {{regexp: '^DB_'}}, metadata: {{labels: {{a: b}}}}}}]"
        ));
        let src = source(&[("DB_HOST", "h"), ("DB_USER", "u"), ("API_KEY", "k")]);
        let pushes = run(&s, store(&BTreeMap::new()), &src).unwrap();
        assert_eq!(remotes(&pushes), vec![(None, "my-app/config")]);
        assert_eq!(*pushes[0].data, source(&[("DB_HOST", "h"), ("DB_USER", "u")]), "only the matched keys");
        assert_eq!(pushes[0].entry.metadata, Some(serde_json::json!({"labels": {"a": "b"}}).into()));
        assert_eq!(pushes[0].origin, "dataTo[0]");
    }

    #[test]
    fn per_key_with_rewrites_and_explicit_override() {
        let s = spec(&format!(
            "{BASE}dataTo: [{{storeRef: {{name: s}}, match: {{regexp: '^db-'}}, rewrite: [{{regexp: {{source: '^db-', target: DATABASE_}}}}, {{transform: {{template: '{{{{ .value | upper }}}}'}}}}]}}]\n\
             data: [{{match: {{secretKey: db-pass, remoteRef: {{remoteKey: vault/master}}}}}}]"
        ));
        let src = source(&[("db-host", "h"), ("db-pass", "p"), ("other", "o")]);
        let pushes = run(&s, store(&BTreeMap::new()), &src).unwrap();
        assert_eq!(
            remotes(&pushes),
            vec![(Some("db-host"), "DATABASE_HOST"), (Some("db-pass"), "vault/master")],
            "db-pass goes where the explicit entry says"
        );
        assert_eq!(pushes[0].origin, "dataTo[0] (db-host)");
    }

    #[test]
    fn rules_for_other_stores_are_skipped_and_labels_select() {
        let s = spec(&format!(
            "{BASE}dataTo: [{{storeRef: {{name: other}}, remoteKey: x}}, {{storeRef: {{name: s, kind: ClusterProvider}}, remoteKey: y}}, {{storeRef: {{labelSelector: {{matchLabels: {{tier: prod}}}}}}, remoteKey: z}}]"
        ));
        let src = source(&[("a", "1")]);
        assert!(run(&s, store(&BTreeMap::new()), &src).unwrap().is_empty());
        let prod = BTreeMap::from([("tier".to_string(), "prod".to_string())]);
        assert_eq!(remotes(&run(&s, store(&prod), &src).unwrap()), vec![(None, "z")]);
        // Without a kind a rule names a SecretStore, as upstream: a Provider "s" is another store.
        let provider = Store { name: "s", kind: StoreKind::Provider, labels: &prod };
        assert!(run(&s, provider, &src).unwrap().is_empty());
        let s = spec(&format!("{BASE}dataTo: [{{storeRef: {{name: s, kind: Provider}}, remoteKey: p}}]"));
        assert_eq!(remotes(&run(&s, provider, &src).unwrap()), vec![(None, "p")]);
    }

    #[test]
    fn reverse_unicode_matches_decoded_keys_and_records_the_source_key() {
        let s = spec(&format!(
            "{BASE}dataTo: [{{storeRef: {{name: s}}, conversionStrategy: ReverseUnicode, match: {{regexp: '/'}}}}]"
        ));
        let src = source(&[("app_U002f_token", "t"), ("plain", "p")]);
        let pushes = run(&s, store(&BTreeMap::new()), &src).unwrap();
        assert_eq!(remotes(&pushes), vec![(Some("app_U002f_token"), "app/token")]);
        assert_eq!(
            *pushes[0].data,
            source(&[("app_U002f_token", "t")]),
            "the push sends the key as the Secret holds it, and the entry names it"
        );
        let explicit = spec(&format!(
            "{BASE}data: [{{conversionStrategy: ReverseUnicode, match: {{secretKey: app/token, remoteRef: {{remoteKey: r}}}}}}]"
        ));
        let pushes = run(&explicit, store(&BTreeMap::new()), &src).unwrap();
        assert_eq!(pushes[0].data.get("app/token").map(Vec::as_slice), Some(b"t".as_slice()));
    }

    #[test]
    fn pushes_hold_one_key_each_or_share_the_whole_secret() {
        // A megabyte Secret of 10,000 keys pushed key by key, and twice as a whole: what the
        // pushes hold stays the size of the Secret (it was the Secret once per key).
        let src: HashMap<String, Vec<u8>> = (0..10_000).map(|i| (format!("k{i:05}"), vec![b'v'; 100])).collect();
        let s = spec(&format!(
            "{BASE}dataTo: [{{storeRef: {{name: s}}}}]\n\
             data: [{{match: {{remoteRef: {{remoteKey: all}}}}}}, {{match: {{remoteRef: {{remoteKey: all-again}}}}}}, \
             {{match: {{secretKey: k00007, remoteRef: {{remoteKey: seven}}}}}}]"
        ));
        let pushes = run(&s, store(&BTreeMap::new()), &src).unwrap();
        assert_eq!(pushes.len(), 10_000 - 1 + 3, "k00007 goes where the explicit entry says");
        let per_key: Vec<&Push> = pushes.iter().filter(|p| p.origin.starts_with("dataTo[0] (")).collect();
        assert!(
            per_key
                .iter()
                .all(|p| p.data.len() == 1 && p.data.contains_key(p.entry.match_.secret_key.as_deref().unwrap()))
        );
        let whole: Vec<&Push> = pushes.iter().filter(|p| p.entry.match_.secret_key.is_none()).collect();
        assert_eq!(whole.len(), 2);
        assert!(Arc::ptr_eq(&whole[0].data, &whole[1].data), "one copy of the whole Secret");
        assert_eq!(*whole[0].data, src);
        let seven = pushes.iter().find(|p| p.origin == "data[2]").unwrap();
        assert_eq!(*seven.data, source(&[("k00007", &"v".repeat(100))]));
        // Each distinct map once: the whole Secret's copy is shared, so it counts once.
        let mut distinct = HashSet::new();
        let bytes: usize = pushes
            .iter()
            .filter(|p| distinct.insert(Arc::as_ptr(&p.data)))
            .flat_map(|p| p.data.iter().map(|(k, v)| k.len() + v.len()))
            .sum();
        assert!(bytes <= 2 * 10_000 * 106, "{bytes} bytes held for a Secret of about 1 MB");
    }

    #[test]
    fn the_transforms_of_a_plan_share_one_budget() {
        // About 10,000 steps a key: 2,000 keys take twice a render's 10,000,000 steps, though
        // each key alone is far within them; 500 keys take half.
        let costly = "{{ range until 5000 }}{{ end }}{{ .value | upper }}";
        let s = spec(&format!(
            "{BASE}dataTo: [{{storeRef: {{name: s}}, rewrite: [{{transform: {{template: '{costly}'}}}}]}}]"
        ));
        let keys =
            |n: usize| -> HashMap<String, Vec<u8>> { (0..n).map(|i| (format!("k{i:04}"), vec![b'v'])).collect() };
        let pushes = run(&s, store(&BTreeMap::new()), &keys(500)).unwrap();
        assert_eq!(pushes.len(), 500);
        assert_eq!(pushes[0].entry.match_.remote_ref.remote_key, "K0000");
        let started = std::time::Instant::now();
        let err = run(&s, store(&BTreeMap::new()), &keys(2_000)).unwrap_err();
        assert!(
            err.starts_with("dataTo[0] (k0000): ")
                && err.contains("rewrite[0].transform")
                && err.contains("CPU budget"),
            "{err}"
        );
        assert!(started.elapsed() < std::time::Duration::from_secs(2), "stopped at once: {:?}", started.elapsed());
        // A regexp that grows the remote key is stopped at the longest remote key.
        let s = spec(&format!(
            "{BASE}dataTo: [{{storeRef: {{name: s}}, rewrite: [{{regexp: {{source: '.', target: '$0$0$0$0'}}}}, {{regexp: {{source: '.', target: '$0$0$0$0'}}}}, {{regexp: {{source: '.', target: '$0$0$0$0'}}}}, {{regexp: {{source: '.', target: '$0$0$0$0'}}}}]}}]"
        ));
        let err = run(&s, store(&BTreeMap::new()), &keys(1)).unwrap_err();
        assert!(err.contains("dataTo[0] (k0000): rewrite[3]") && err.contains("512 bytes"), "{err}");
    }

    #[test]
    fn errors_name_the_entries() {
        let s = spec(&format!(
            "{BASE}dataTo: [{{storeRef: {{name: s}}, rewrite: [{{regexp: {{source: '^.*$', target: same}}}}]}}]"
        ));
        let err = run(&s, store(&BTreeMap::new()), &source(&[("a", "1"), ("b", "2")])).unwrap_err();
        assert!(err.contains("dataTo[0] (a)") && err.contains("dataTo[0] (b)") && err.contains("\"same\""), "{err}");
        let s = spec(&format!(
            "{BASE}dataTo: [{{storeRef: {{name: s}}, rewrite: [{{regexp: {{source: '^.*$', target: ''}}}}]}}]"
        ));
        let err = run(&s, store(&BTreeMap::new()), &source(&[("a", "1")])).unwrap_err();
        assert!(err.contains("dataTo[0]") && err.contains("empty remote key"), "{err}");
        let s = spec(&format!("{BASE}data: [{{match: {{secretKey: missing, remoteRef: {{remoteKey: r}}}}}}]"));
        let err = run(&s, store(&BTreeMap::new()), &source(&[("a", "1")])).unwrap_err();
        assert!(err.contains("data[0]") && err.contains("\"missing\""), "{err}");
        let s = spec(&format!("{BASE}dataTo: [{{storeRef: {{name: s}}, match: {{regexp: '^z'}}}}]"));
        assert!(run(&s, store(&BTreeMap::new()), &source(&[("a", "1")])).unwrap().is_empty(), "no match is no error");
    }
}
