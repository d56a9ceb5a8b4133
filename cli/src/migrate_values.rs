//! `keyward migrate --values FILE`: an External Secrets chart values file as Keyward's chart
//! values, by the table the chart itself reads (`charts/keyward/upstream-keys.yaml`), with what
//! does not carry over: keys without an equivalent, keys to set by hand, `extraArgs` flags
//! keyward-reconciler does not have, and keys upstream's chart does not have either.

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::{Error, Output};

/// The chart's table of upstream's value paths.
const TABLE: &str = include_str!("../../charts/keyward/upstream-keys.yaml");

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Table {
    reconciler_flags: Vec<String>,
    flags: std::collections::BTreeMap<String, Option<String>>,
    keys: Vec<Entry>,
}

#[derive(Debug, Deserialize)]
struct Entry {
    path: String,
    how: String,
    keyward: Option<String>,
    #[serde(default)]
    default: Value,
    note: Option<String>,
    #[serde(default, rename = "move")]
    moves: bool,
}

/// One thing of the file that did not carry over as it is.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct Finding {
    /// The upstream path (`extraArgs.enable-flood-gate` for a flag).
    pub path: String,
    /// What to do about it.
    pub message: String,
}

/// The translation of one values file.
#[derive(Debug, Serialize)]
pub struct Translation {
    /// Keyward's chart values.
    pub values: Value,
    /// What needs a person: dropped keys and flags, keys to set by hand.
    pub problems: Vec<Finding>,
    /// What was translated or dropped with no effect, for the record.
    pub notes: Vec<Finding>,
}

fn table() -> Result<Table, Error> {
    serde_yaml::from_str(TABLE).map_err(|e| Error::Output(format!("charts/keyward/upstream-keys.yaml: {e}")))
}

fn get<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(v, |v, k| v.as_object()?.get(k))
}

/// Sets `value` at a dotted path, creating maps; a map merges over a map already there.
fn set(v: &mut Value, path: &str, value: Value) {
    let mut cur = v;
    for k in path.split('.') {
        if !cur.is_object() {
            *cur = Value::Object(Map::new());
        }
        let Value::Object(m) = cur else { return };
        cur = m.entry(k.to_string()).or_insert(Value::Null);
    }
    match (cur.as_object_mut(), value) {
        (Some(existing), Value::Object(new)) => existing.extend(new),
        (_, value) => *cur = value,
    }
}

/// Every leaf path of `v` (an empty map or a non-map is a leaf).
fn leaves(v: &Value, prefix: &str, out: &mut Vec<String>) {
    match v.as_object() {
        Some(m) if !m.is_empty() => {
            for (k, v) in m {
                let path = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                leaves(v, &path, out);
            }
        }
        _ => out.push(prefix.to_string()),
    }
}

fn covers(entry: &str, leaf: &str) -> bool {
    leaf == entry || leaf.strip_prefix(entry).is_some_and(|rest| rest.starts_with('.'))
}

/// Translates an upstream values tree.
pub fn translate(upstream: &Value) -> Result<Translation, Error> {
    let table = table()?;
    // The chart refuses the same flags (a test checks the list is keyward-reconciler's).
    let known = &table.reconciler_flags;
    let mut out = Translation { values: Value::Object(Map::new()), problems: Vec::new(), notes: Vec::new() };
    let finding = |path: &str, message: String| Finding { path: path.to_string(), message };
    for e in &table.keys {
        let Some(value) = get(upstream, &e.path) else { continue };
        let why = e.note.as_deref().map(|n| format!(" ({n})")).unwrap_or_default();
        let keyward = e.keyward.as_deref().unwrap_or(&e.path);
        match e.how.as_str() {
            "same" | "alias" if e.path == "extraArgs" => {
                for (flag, v) in value.as_object().into_iter().flatten() {
                    let path = format!("extraArgs.{flag}");
                    let target = if known.contains(flag) {
                        Some(flag.clone())
                    } else {
                        table.flags.get(flag).cloned().flatten()
                    };
                    match target {
                        Some(t) => {
                            if &t != flag {
                                out.notes.push(finding(&path, format!("--{flag} is keyward-reconciler's --{t}")));
                            }
                            set(&mut out.values, &format!("reconciler.extraArgs.{t}"), v.clone());
                        }
                        None => out
                            .problems
                            .push(finding(&path, format!("--{flag}: keyward-reconciler has no such flag; left out"))),
                    }
                }
            }
            "same" | "alias" if e.path.ends_with(".extraArgs") && value.as_object().is_some_and(|m| !m.is_empty()) => {
                out.problems.push(finding(
                    &e.path,
                    format!("upstream's flags are not {keyward}'s component's (`--help` of its binary); left out"),
                ));
            }
            "same" => set(&mut out.values, &e.path, value.clone()),
            "alias" => {
                out.notes.push(finding(&e.path, format!("is {keyward}")));
                set(&mut out.values, keyward, value.clone());
            }
            "accepted" => out.notes.push(finding(&e.path, format!("left out: no effect in Keyward{why}"))),
            _ if *value == e.default => {}
            _ if e.moves => {
                out.notes.push(finding(&e.path, format!("is {keyward}")));
                set(&mut out.values, keyward, value.clone());
            }
            _ => out.problems.push(match &e.keyward {
                Some(k) => finding(&e.path, format!("set `{k}` by hand{why}; left out")),
                None => finding(&e.path, format!("no equivalent in Keyward{why}; left out")),
            }),
        }
    }
    let mut all = Vec::new();
    leaves(upstream, "", &mut all);
    for leaf in all.iter().filter(|l| !l.is_empty()) {
        if !table.keys.iter().any(|e| covers(&e.path, leaf)) {
            out.problems.push(finding(leaf, "not a key of External Secrets' chart 2.9.0; left out".to_string()));
        }
    }
    Ok(out)
}

/// The text output: Keyward's values file, headed by what did not carry over as comments.
pub fn text(t: &Translation) -> Result<String, Error> {
    let mut s = String::from(
        "# Keyward chart values translated by `keyward migrate --values` from External Secrets' chart values.\n",
    );
    for p in &t.problems {
        s.push_str(&format!("# NOT CARRIED OVER: {}: {}\n", p.path, p.message));
    }
    for n in &t.notes {
        s.push_str(&format!("# {}: {}\n", n.path, n.message));
    }
    let body = if t.values.as_object().is_some_and(Map::is_empty) {
        "{}\n".to_string()
    } else {
        serde_yaml::to_string(&t.values).map_err(|e| Error::Output(e.to_string()))?
    };
    s.push_str(&body);
    Ok(s)
}

/// Runs `keyward migrate --values FILE`; `Ok(false)` when something did not carry over.
pub fn run(file: &Path, out: Output) -> Result<bool, Error> {
    let raw = std::fs::read_to_string(file).map_err(|source| Error::Read { path: file.to_path_buf(), source })?;
    let upstream: Value = serde_yaml::from_str::<Option<Value>>(&raw)
        .map_err(|e| Error::Manifest { path: file.display().to_string(), message: e.to_string() })?
        .unwrap_or(Value::Object(Map::new()));
    if !upstream.is_object() {
        return Err(Error::Manifest { path: file.display().to_string(), message: "not a map of values".to_string() });
    }
    let t = translate(&upstream)?;
    match out {
        Output::Json => println!("{}", serde_json::to_string_pretty(&t).map_err(|e| Error::Output(e.to_string()))?),
        Output::Text => print!("{}", text(&t)?),
    }
    Ok(t.problems.is_empty())
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;
    use serde_json::json;

    use super::*;

    /// keyward-reconciler's long flags and their aliases.
    fn reconciler_flags() -> Vec<String> {
        let cmd = keyward_reconciler::offline::Cli::command();
        let mut flags: Vec<String> = cmd
            .get_arguments()
            .flat_map(|a| a.get_long().into_iter().chain(a.get_all_aliases().unwrap_or_default()))
            .map(String::from)
            .filter(|f| f != "help" && f != "version")
            .collect();
        flags.sort();
        flags.dedup();
        flags
    }

    fn tr(yaml: &str) -> Translation {
        translate(&serde_yaml::from_str(yaml).unwrap()).unwrap()
    }

    fn paths(f: &[Finding]) -> Vec<&str> {
        f.iter().map(|f| f.path.as_str()).collect()
    }

    #[test]
    fn the_charts_list_of_reconciler_flags_is_the_reconcilers() {
        let mut listed = table().unwrap().reconciler_flags;
        listed.sort();
        assert_eq!(listed, reconciler_flags(), "update reconcilerFlags in charts/keyward/upstream-keys.yaml");
    }

    #[test]
    fn aliases_move_to_keywards_keys_and_same_keys_stay() {
        let t =
            tr("replicaCount: 3\nleaderElect: true\nconcurrent: 4\nserviceMonitor: {enabled: true, interval: 1m}\n\
                    webhook: {replicaCount: 2, port: 9443}\ncertController: {requeueInterval: 10m}\n\
                    resources: {limits: {memory: 1Gi}}\nfullnameOverride: eso\ninstallCRDs: false\n");
        assert_eq!(
            t.values,
            json!({
                "reconciler": {"replicas": 3, "leaderElection": true, "concurrency": 4, "resources": {"limits": {"memory": "1Gi"}}},
                "metrics": {"serviceMonitor": {"enabled": true, "interval": "1m"}},
                "webhook": {"replicas": 2, "port": 9443},
                "certs": {"interval": "10m"},
                "fullnameOverride": "eso",
                "crds": {"install": false},
            })
        );
        assert!(t.problems.is_empty(), "{:?}", t.problems);
    }

    #[test]
    fn upstream_defaults_need_nothing_and_other_values_are_flagged() {
        let t = tr(
            "image: {flavour: \"\"}\nleaderElectionID: \"\"\nwebhook: {certManager: {cert: {issuerRef: {name: my-issuer}}}}\n",
        );
        assert!(t.problems.is_empty(), "{:?}", t.problems);
        assert_eq!(t.values, json!({}));
        let t = tr(
            "image: {flavour: ubi}\nleaderElectionID: eso-lock\nprocessClusterStore: false\nwebhook: {certManager: {cert: {issuerRef: {name: vault}}}}\n",
        );
        assert_eq!(
            paths(&t.problems),
            ["image.flavour", "leaderElectionID", "webhook.certManager.cert.issuerRef.name"]
        );
        assert!(t.problems[0].message.contains("no equivalent"), "{:?}", t.problems[0]);
        assert!(t.problems[1].message.contains("`fullnameOverride`"), "{:?}", t.problems[1]);
        // A controller switch is Keyward's key too: it carries over as written.
        assert_eq!(t.values, json!({"processClusterStore": false}));
        assert!(t.problems[2].message.contains("`certManager.issuerRef`"), "{:?}", t.problems[2]);
    }

    #[test]
    fn extra_args_are_translated_or_flagged() {
        let t = tr(
            "extraArgs: {concurrent: 5, enable-flood-gate: true, call-timeout: 10s, unsafe-allow-generic-targets: \"\"}\n",
        );
        assert_eq!(
            t.values,
            json!({"reconciler": {"extraArgs": {"concurrency": 5, "call-timeout": "10s", "unsafe-allow-generic-targets": ""}}})
        );
        assert_eq!(paths(&t.problems), ["extraArgs.enable-flood-gate"]);
        assert!(t.notes.iter().any(|n| n.path == "extraArgs.concurrent" && n.message.contains("--concurrency")));
        let t = tr("webhook: {extraArgs: {loglevel: debug}}\n");
        assert_eq!(paths(&t.problems), ["webhook.extraArgs"]);
    }

    #[test]
    fn keys_of_neither_chart_are_flagged() {
        let t = tr("replicaCount: 1\ncontroler: {class: x}\nwebhook: {replicaCont: 2}\n");
        assert_eq!(paths(&t.problems), ["controler.class", "webhook.replicaCont"]);
        assert_eq!(t.values, json!({"reconciler": {"replicas": 1}}));
    }

    #[test]
    fn text_is_a_values_file_with_the_findings_as_comments() {
        let t = tr("replicaCount: 2\nimage: {flavour: ubi}\n");
        let s = text(&t).unwrap();
        assert!(s.contains("# NOT CARRIED OVER: image.flavour: no equivalent in Keyward"), "{s}");
        let parsed: Value = serde_yaml::from_str(&s).unwrap();
        assert_eq!(parsed, json!({"reconciler": {"replicas": 2}}));
    }
}
