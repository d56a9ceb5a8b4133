//! External Secrets' values files in Keyward's chart: every value path of upstream's chart
//! (release 2.9.0, `charts/tests/upstream/defaults.yaml`) has its line in
//! `charts/keyward/upstream-keys.yaml`, and each does what that line says when set to something
//! other than upstream's default: a `same` or `alias` key changes the rendered objects, an
//! `accepted` one changes nothing, a `refused` one fails the render naming Keyward's key. Also:
//! upstream's default values file and a customized one render, with each customized value where
//! it belongs; and docs/helm.md's table is the table's.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use keyward_chart_tests::{chart_dir, helm};
use keyward_e2e::repo_root;
use serde_json::{Map, Value, json};

fn upstream(name: &str) -> PathBuf {
    repo_root().join("charts/tests/upstream").join(name)
}

fn yaml_file(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("parse {}: {e}", path.display()))
}

/// The table's entries: path, how, keyward key, note, default.
fn table() -> Vec<Value> {
    let t = yaml_file(&chart_dir().join("upstream-keys.yaml"));
    t["keys"].as_array().expect("keys").clone()
}

/// Every leaf path of a values tree (an empty map or any non-map is a leaf).
fn leaves(v: &Value, prefix: &str, out: &mut BTreeMap<String, Value>) {
    match v.as_object() {
        Some(m) if !m.is_empty() => {
            for (k, v) in m {
                let path = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                leaves(v, &path, out);
            }
        }
        _ => {
            out.insert(prefix.to_string(), v.clone());
        }
    }
}

/// `value` at a dotted path, as a values tree.
fn at(path: &str, value: Value) -> Value {
    path.rsplit('.').fold(value, |inner, key| json!({ key: inner }))
}

fn merge(into: &mut Value, from: Value) {
    match (into.as_object_mut(), from) {
        (Some(a), Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k).or_insert(Value::Null), v);
            }
        }
        (_, from) => *into = from,
    }
}

/// A value other than upstream's default, of the same type.
fn changed(default: &Value) -> Value {
    match default {
        Value::Bool(b) => json!(!b),
        Value::Number(n) => json!(n.as_i64().unwrap_or(0) + 3),
        Value::String(s) if s.ends_with('s') || s.ends_with('m') || s.ends_with('h') => json!("7m"),
        Value::String(_) => json!("upstream-test"),
        Value::Array(items) if items.first().is_some_and(Value::is_string) => json!(["UPSTREAM-TEST"]),
        Value::Array(_) => json!([{"name": "upstream-test"}]),
        Value::Object(_) => json!({"upstream-test": "1"}),
        Value::Null => json!(true),
    }
}

/// Values that `changed` would not make valid or visible: (path, value, values it needs beside).
fn overrides() -> BTreeMap<String, (Value, Value)> {
    let none = || json!({});
    let spread =
        json!([{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway"}]);
    let mount = json!([{"name": "upstream-test", "mountPath": "/upstream-test"}]);
    let mut more = BTreeMap::new();
    for prefix in ["", "global.", "webhook.", "certController."] {
        more.insert(format!("{prefix}topologySpreadConstraints"), (spread.clone(), none()));
        more.insert(format!("{prefix}extraVolumeMounts"), (mount.clone(), none()));
    }
    let fixed = BTreeMap::from([
        ("leaderElect", (json!(false), none())),
        ("leaderElectionLeaseDuration", (json!("30s"), none())),
        ("dnsPolicy", (json!("Default"), none())),
        ("image.pullPolicy", (json!("Always"), none())),
        ("securityContext.seccompProfile.type", (json!("Unconfined"), none())),
        ("webhook.securityContext.seccompProfile.type", (json!("Unconfined"), none())),
        ("certController.securityContext.seccompProfile.type", (json!("Unconfined"), none())),
        ("resources", (json!({"requests": {"cpu": "7m"}}), none())),
        ("webhook.resources", (json!({"requests": {"cpu": "7m"}}), none())),
        ("certController.resources", (json!({"requests": {"cpu": "7m"}}), none())),
        ("extraArgs", (json!({"concurrency": "3"}), none())),
        ("scopedRBAC", (json!(true), json!({"scopedNamespace": "team-a"}))),
        ("webhook.hostNetwork", (json!(true), json!({"webhook": {"port": 9443}}))),
        (
            "genericTargets.resources",
            (
                json!([{"apiGroup": "config.example.com", "resources": ["appconfigs"]}]),
                json!({"genericTargets": {"enabled": true}}),
            ),
        ),
        ("serviceMonitor.enabled", (json!(false), none())),
        // Keyward's default is upstream's non-default: upstream's default shows the key is read.
        ("serviceMonitor.honorLabels", (json!(false), none())),
        ("networkPolicy.enabled", (json!(false), none())),
        ("webhook.podDisruptionBudget.enabled", (json!(false), none())),
        ("serviceMonitor.renderMode", (json!("skipIfMissing"), none())),
        ("podDisruptionBudget.minAvailable", (json!(2), json!({"podDisruptionBudget": {"enabled": true}}))),
        (
            "certController.podDisruptionBudget.minAvailable",
            (json!(2), json!({"certController": {"podDisruptionBudget": {"enabled": true}}})),
        ),
        ("grafanaDashboard.sidecarLabel", (json!("upstream-test"), json!({"grafanaDashboard": {"enabled": true}}))),
        ("grafanaDashboard.sidecarLabelValue", (json!("2"), json!({"grafanaDashboard": {"enabled": true}}))),
        ("grafanaDashboard.annotations", (json!({"a": "b"}), json!({"grafanaDashboard": {"enabled": true}}))),
        ("grafanaDashboard.extraLabels", (json!({"a": "b"}), json!({"grafanaDashboard": {"enabled": true}}))),
    ]);
    more.extend(fixed.into_iter().map(|(k, v)| (k.to_string(), v)));
    more
}

/// What every render starts from: a ServiceMonitor rendered (so its keys show).
fn base() -> Value {
    json!({"serviceMonitor": {"enabled": true, "renderMode": "alwaysRender"}})
}

/// `helm template` of the chart with `values`; Ok(output without the randomly keyed hash-key
/// Secret) or Err(stderr).
fn template(values: &Value, files: &[PathBuf]) -> Result<String, String> {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("values.yaml");
    std::fs::write(&file, serde_yaml::to_string(values).expect("yaml")).expect("write values");
    let mut cmd = helm(Path::new("/nonexistent"));
    cmd.args(["template", "kw"]).arg(chart_dir()).args(["-n", "keyward"]);
    for f in files {
        cmd.arg("-f").arg(f);
    }
    cmd.arg("-f").arg(&file);
    let out = cmd.output().expect("run helm");
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let docs: Vec<&str> =
        text.split("\n---").filter(|d| !d.contains("# Source: keyward/templates/hash-key.yaml")).collect();
    Ok(docs.join("\n---"))
}

#[test]
fn the_table_covers_every_upstream_value_path_once() {
    let mut paths = BTreeMap::new();
    leaves(&yaml_file(&upstream("defaults.yaml")), "", &mut paths);
    let table = table();
    let mut seen = BTreeMap::new();
    for e in &table {
        let path = e["path"].as_str().expect("path");
        assert!(seen.insert(path.to_string(), ()).is_none(), "{path} is in upstream-keys.yaml twice");
        assert!(paths.contains_key(path), "{path} in upstream-keys.yaml is no value path of upstream's chart");
        let how = e["how"].as_str().expect("how");
        assert!(["same", "alias", "accepted", "refused"].contains(&how), "{path}: how {how}");
        if how == "refused" {
            assert_eq!(e["default"], paths[path], "{path}: the default is not upstream's");
        }
        if how == "same" {
            assert_eq!(e["keyward"].as_str(), Some(path), "{path}: `same` names another key");
        }
        if how == "alias" {
            assert!(e["keyward"].is_string(), "{path}: an alias names Keyward's key");
        }
    }
    let missing: Vec<_> = paths.keys().filter(|p| !seen.contains_key(*p)).collect();
    assert!(missing.is_empty(), "upstream value paths missing from upstream-keys.yaml: {missing:?}");
}

#[test]
fn every_upstream_value_path_is_taken_or_refused_naming_keywards_key() {
    let base_render = template(&base(), &[]).expect("the base renders");
    let overrides = overrides();
    let entries = table();
    let mut defaults = BTreeMap::new();
    leaves(&yaml_file(&upstream("defaults.yaml")), "", &mut defaults);
    let check = |e: &Value| -> Option<String> {
        let path = e["path"].as_str().expect("path");
        let how = e["how"].as_str().expect("how");
        let (value, extra) = overrides.get(path).cloned().unwrap_or_else(|| (changed(&defaults[path]), json!({})));
        let mut values = base();
        merge(&mut values, extra.clone());
        merge(&mut values, at(path, value.clone()));
        let before = if extra == json!({}) {
            base_render.clone()
        } else {
            let mut before = base();
            merge(&mut before, extra);
            template(&before, &[]).expect("the base renders")
        };
        let result = template(&values, &[]);
        match (how, result) {
            ("refused", Err(err)) => {
                let names = match e["keyward"].as_str() {
                    Some(k) => err.contains(&format!("set `{k}`")),
                    None => err.contains("no equivalent in Keyward"),
                };
                (!(names && err.contains(&format!("`{path}`"))))
                    .then(|| format!("{path} = {value}: refused without naming the key: {err}"))
            }
            ("refused", Ok(_)) => Some(format!("{path} = {value}: rendered, but the table says refused")),
            (_, Err(err)) => Some(format!("{path} = {value} ({how}): refused: {err}")),
            ("accepted", Ok(out)) => {
                (out != before).then(|| format!("{path} = {value}: accepted but changed the render"))
            }
            (_, Ok(out)) => (out == before).then(|| format!("{path} = {value} ({how}): rendered nothing different")),
        }
    };
    assert!(!base_render.is_empty());
    // Two workers: each render is a helm process.
    let (a, b) = entries.split_at(entries.len() / 2);
    let failures: Vec<String> = std::thread::scope(|s| {
        let ha = s.spawn(|| a.iter().filter_map(check).collect::<Vec<_>>());
        let hb = s.spawn(|| b.iter().filter_map(check).collect::<Vec<_>>());
        let mut f = ha.join().expect("worker");
        f.extend(hb.join().expect("worker"));
        f
    });
    assert!(failures.is_empty(), "{} of {} upstream paths:\n{}", failures.len(), entries.len(), failures.join("\n"));
}

/// The rendered objects of kind `kind` named `name`.
fn object<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("{kind} {name} not rendered"))
}

fn env(deployment: &Value) -> Map<String, Value> {
    deployment["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .expect("env")
        .iter()
        .map(|e| (e["name"].as_str().expect("name").to_string(), e.get("value").cloned().unwrap_or(Value::Null)))
        .collect()
}

#[test]
fn upstreams_default_values_and_a_customized_file_render_with_the_same_meaning() {
    let defaults = upstream("defaults.yaml");
    let out = template(&json!({}), std::slice::from_ref(&defaults)).expect("upstream's default values render");
    let docs: Vec<Value> =
        out.split("\n---").filter_map(|d| serde_yaml::from_str::<Value>(d).ok()).filter(Value::is_object).collect();
    let reconciler = object(&docs, "Deployment", "keyward-reconciler");
    // Upstream's defaults mean one controller replica, no leader election, one worker.
    assert_eq!(reconciler["spec"]["replicas"], 1);
    assert_eq!(env(reconciler)["KEYWARD_LEADER_ELECT"], "false");
    assert_eq!(env(reconciler)["KEYWARD_CONCURRENCY"], "1");
    assert_eq!(object(&docs, "Deployment", "keyward-webhook")["spec"]["replicas"], 1);
    assert_eq!(reconciler["spec"]["revisionHistoryLimit"], 10);

    let custom = template(&json!({}), &[defaults, upstream("customized.yaml")]).expect("the customized values render");
    let docs: Vec<Value> =
        custom.split("\n---").filter_map(|d| serde_yaml::from_str::<Value>(d).ok()).filter(Value::is_object).collect();
    let reconciler = object(&docs, "Deployment", "eso-reconciler");
    let pod = &reconciler["spec"]["template"];
    let env = env(reconciler);
    assert_eq!(reconciler["spec"]["replicas"], 2);
    assert_eq!(reconciler["spec"]["revisionHistoryLimit"], 3);
    assert_eq!(reconciler["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"], 0);
    assert_eq!(reconciler["metadata"]["annotations"]["reloader.stakater.com/auto"], "false");
    assert_eq!(env["KEYWARD_LEADER_ELECT"], "true");
    assert_eq!(env["KEYWARD_CONCURRENCY"], "5");
    assert_eq!(env["KEYWARD_CONTROLLER_CLASS"], "team-platform");
    assert_eq!(env["KEYWARD_LOG_LEVEL"], "debug");
    assert_eq!(env["HTTPS_PROXY"], "http://proxy.internal:3128");
    assert_eq!(pod["metadata"]["annotations"]["cluster-autoscaler.kubernetes.io/safe-to-evict"], "true");
    assert_eq!(pod["metadata"]["labels"]["cost-center"], "42");
    assert_eq!(pod["spec"]["nodeSelector"]["kubernetes.io/os"], "linux");
    assert_eq!(pod["spec"]["tolerations"][0]["key"], "dedicated");
    assert_eq!(pod["spec"]["priorityClassName"], "system-cluster-critical");
    assert_eq!(pod["spec"]["dnsPolicy"], "ClusterFirst");
    assert_eq!(pod["spec"]["dnsConfig"]["options"][0]["name"], "ndots");
    assert_eq!(pod["spec"]["automountServiceAccountToken"], true);
    assert_eq!(pod["spec"]["containers"][0]["resources"]["limits"]["memory"], "1Gi");
    assert_eq!(pod["spec"]["containers"][1]["name"], "log-shipper");
    let sa = object(&docs, "ServiceAccount", "eso-reconciler");
    assert_eq!(
        sa["metadata"]["annotations"]["eks.amazonaws.com/role-arn"],
        "arn:aws:iam::111122223333:role/external-secrets"
    );
    assert_eq!(sa["metadata"]["labels"]["team"], "platform");
    assert_eq!(object(&docs, "PodDisruptionBudget", "eso-reconciler")["spec"]["minAvailable"], 1);
    let webhook = object(&docs, "Deployment", "eso-webhook");
    assert_eq!(webhook["spec"]["replicas"], 3);
    assert_eq!(webhook["spec"]["template"]["metadata"]["annotations"]["prometheus.io/scrape"], "false");
    assert_eq!(object(&docs, "PodDisruptionBudget", "eso-webhook")["spec"]["minAvailable"], 2);
    let certs = object(&docs, "Deployment", "eso-certs");
    assert_eq!(self::env(certs)["KEYWARD_INTERVAL"], "10m");
    assert_eq!(certs["spec"]["template"]["spec"]["tolerations"][0]["value"], "platform");
    let monitor = object(&docs, "ServiceMonitor", "eso");
    assert_eq!(monitor["metadata"]["labels"]["release"], "kube-prometheus-stack");
    assert_eq!(monitor["spec"]["endpoints"][0]["interval"], "1m");
    assert_eq!(object(&docs, "ConfigMap", "eso-extra")["data"]["owner"], "kw");
    object(&docs, "CustomResourceDefinition", "externalsecrets.external-secrets.io");
    object(&docs, "ConfigMap", "eso-dashboard");
}

/// docs/helm.md's table of upstream's keys, as upstream-keys.yaml says.
fn docs_table() -> String {
    let mut out = String::from("| upstream key | in Keyward | |\n|---|---|---|\n");
    for e in table() {
        let path = e["path"].as_str().expect("path");
        let note = e["note"].as_str().unwrap_or("");
        let key = e["keyward"].as_str().map(|k| format!("`{k}`"));
        let (what, key) = match e["how"].as_str().expect("how") {
            "same" => ("same", String::new()),
            "alias" => ("works, as", key.unwrap_or_default()),
            "accepted" => ("accepted, no effect", String::new()),
            _ => match key {
                Some(k) => ("refused unless upstream's default; use", k),
                None => ("refused unless upstream's default; no equivalent", String::new()),
            },
        };
        out.push_str(&format!("| `{path}` | {what} {key} | {note} |\n").replace("  ", " "));
    }
    out
}

#[test]
fn docs_helm_md_shows_the_table() {
    let docs = std::fs::read_to_string(repo_root().join("docs/helm.md")).expect("docs/helm.md");
    let begin = "<!-- upstream-keys:begin (charts/tests/upstream.rs writes nothing; paste the table it prints) -->\n";
    let end = "<!-- upstream-keys:end -->";
    let expected = docs_table();
    let found = docs.split_once(begin).and_then(|(_, rest)| rest.split_once(end)).map(|(t, _)| t);
    assert_eq!(
        found,
        Some(expected.as_str()),
        "docs/helm.md's table of upstream keys differs; it should read:\n{begin}{expected}{end}"
    );
}

/// The schema's shared blocks let upstream's webhook-only keys through for every component; the
/// chart refuses them where they are not upstream's.
#[test]
fn keywards_own_components_refuse_upstreams_webhook_only_keys() {
    for (values, path) in [
        (json!({"reconciler": {"log": {"timeEncoding": "iso8601"}}}), "reconciler.log.timeEncoding"),
        (json!({"certs": {"podDisruptionBudget": {"nameOverride": "x"}}}), "certs.podDisruptionBudget.nameOverride"),
        (
            json!({"providers": {"kubernetes": {"log": {"timeEncoding": "iso8601"}}}}),
            "providers.kubernetes.log.timeEncoding",
        ),
    ] {
        let err = template(&values, &[]).expect_err("refused");
        assert!(err.contains(&format!("`{path}` is not a key of Keyward's chart")), "{path}: {err}");
    }
}

/// The reconciler's ClusterRole rules, as (resource, verb) pairs.
fn reconciler_rights(docs: &[Value]) -> Vec<(String, String)> {
    let role = object(docs, "ClusterRole", "keyward-reconciler");
    let mut rights = Vec::new();
    for rule in role["rules"].as_array().expect("rules") {
        for resource in rule["resources"].as_array().into_iter().flatten() {
            for verb in rule["verbs"].as_array().expect("verbs") {
                rights.push((resource.as_str().expect("resource").into(), verb.as_str().expect("verb").into()));
            }
        }
    }
    rights
}

fn documents(out: &str) -> Vec<Value> {
    out.split("\n---").filter_map(|d| serde_yaml::from_str::<Value>(d).ok()).filter(Value::is_object).collect()
}

/// Upstream's controller switches turn keyward-reconciler's `--process-*` flags off (through
/// their environment variables) and take the switched-off kinds' rights out of its role.
#[test]
fn upstreams_process_switches_render_to_the_reconcilers_flags_and_drop_their_rights() {
    let switches = [
        ("processPushSecret", "KEYWARD_PROCESS_PUSH_SECRET"),
        ("processClusterPushSecret", "KEYWARD_PROCESS_CLUSTER_PUSH_SECRET"),
        ("processClusterExternalSecret", "KEYWARD_PROCESS_CLUSTER_EXTERNAL_SECRET"),
        ("processSecretStore", "KEYWARD_PROCESS_SECRET_STORE"),
        ("processClusterStore", "KEYWARD_PROCESS_CLUSTER_STORE"),
        ("processClusterGenerator", "KEYWARD_PROCESS_CLUSTER_GENERATOR"),
    ];
    let has = |rights: &[(String, String)], resource: &str, verb: &str| {
        rights.iter().any(|(r, v)| r == resource && v == verb)
    };
    // Upstream's defaults: every controller on, every right there, no switch rendered.
    let on = documents(&template(&json!({}), &[upstream("defaults.yaml")]).expect("renders"));
    let on_env = env(object(&on, "Deployment", "keyward-reconciler"));
    let on_rights = reconciler_rights(&on);
    for (_, var) in switches {
        assert!(!on_env.contains_key(var), "{var} rendered with the switch on");
    }
    let dropped = [
        ("pushsecrets", "watch"),
        ("pushsecrets/status", "patch"),
        ("clusterpushsecrets", "watch"),
        ("clusterexternalsecrets", "watch"),
        ("clusterexternalsecrets/status", "patch"),
        ("secretstores/status", "patch"),
        ("clustersecretstores/status", "patch"),
        ("clustergenerators", "get"),
    ];
    for (resource, verb) in dropped {
        assert!(has(&on_rights, resource, verb), "{resource} {verb} with every controller on");
    }

    // Each switch alone: its flag, nothing else.
    for (value, var) in switches {
        let out = template(&at(value, json!(false)), &[upstream("defaults.yaml")]).expect("renders");
        let env = env(object(&documents(&out), "Deployment", "keyward-reconciler"));
        assert_eq!(env.get(var), Some(&json!("false")), "{value}: false");
        let others: Vec<_> = env.keys().filter(|k| k.starts_with("KEYWARD_PROCESS_") && *k != var).collect();
        assert!(others.is_empty(), "{value} set {others:?} too");
    }
    // PushSecrets off but ClusterPushSecrets on: the children are still kept and read.
    let out = template(&json!({"processPushSecret": false}), &[]).expect("renders");
    let rights = reconciler_rights(&documents(&out));
    assert!(has(&rights, "pushsecrets", "watch") && has(&rights, "pushsecrets", "create"));
    assert!(!has(&rights, "pushsecrets/status", "patch"), "no PushSecret status written");

    // All off: every right of theirs gone, the ExternalSecret's and the stores' reads kept.
    let mut all_off = json!({});
    for (value, _) in switches {
        merge(&mut all_off, at(value, json!(false)));
    }
    let off = documents(&template(&all_off, &[upstream("defaults.yaml")]).expect("renders"));
    let rights = reconciler_rights(&off);
    for (resource, verb) in dropped {
        assert!(!has(&rights, resource, verb), "{resource} {verb} kept with its controller off");
    }
    for (resource, verb) in [("externalsecrets", "watch"), ("secretstores", "watch"), ("clustersecretstores", "watch")]
    {
        assert!(has(&rights, resource, verb), "{resource} {verb} dropped");
    }
}

/// The schema takes anything under External Secrets' own blocks; the chart then refuses a key
/// there that is no path of upstream's chart, naming the keys the block has. `blocks` in
/// upstream-keys.yaml is exactly the schema's upstream-only keys that are blocks upstream.
#[test]
fn misspelt_keys_under_upstreams_own_blocks_are_refused_naming_the_blocks_keys() {
    let schema = yaml_file(&chart_dir().join("values.schema.json"));
    let defaults = yaml_file(&upstream("defaults.yaml"));
    let paths: Vec<String> = table().iter().map(|e| e["path"].as_str().expect("path").to_string()).collect();
    let mut expected: Vec<&str> = schema["properties"]
        .as_object()
        .expect("properties")
        .iter()
        .filter(|(k, v)| {
            v["$ref"] == "#/definitions/upstreamKey" && defaults[k.as_str()].is_object() && !paths.contains(k)
        })
        .map(|(k, _)| k.as_str())
        .collect();
    expected.sort_unstable();
    let listed = yaml_file(&chart_dir().join("upstream-keys.yaml"))["blocks"].clone();
    let mut listed: Vec<&str> = listed.as_array().expect("blocks").iter().map(|b| b.as_str().expect("name")).collect();
    listed.sort_unstable();
    assert_eq!(listed, expected, "upstream-keys.yaml's blocks");

    for (values, path, names) in [
        (json!({"serviceMonitor": {"enabeld": true}}), "serviceMonitor.enabeld", "`enabled`"),
        (json!({"vault": {"enableTokenCash": false}}), "vault.enableTokenCash", "`enableTokenCache`"),
        (
            json!({"certController": {"podDisruptionBudget": {"minAvaliable": 1}}}),
            "certController.podDisruptionBudget.minAvaliable",
            "`minAvailable`",
        ),
    ] {
        let err = template(&values, &[]).expect_err("refused");
        assert!(err.contains(&format!("`{path}` is no key of External Secrets' chart")), "{path}: {err}");
        assert!(err.contains(names), "{path}: the block's keys named: {err}");
    }
    let err = template(&json!({"certController": {"podDisruptionBudget": "x"}}), &[]).expect_err("refused");
    assert!(err.contains("`certController.podDisruptionBudget` is a block"), "{err}");
    // A path covers everything under it; null blocks and correct keys render.
    for values in [
        json!({"certController": {"resources": {"limits": {"cpu": "1"}}}}),
        json!({"serviceMonitor": null}),
        json!({"serviceMonitor": {"enabled": true, "additionalLabels": {"release": "x"}}}),
    ] {
        template(&values, &[]).unwrap_or_else(|e| panic!("{values}: {e}"));
    }
}
