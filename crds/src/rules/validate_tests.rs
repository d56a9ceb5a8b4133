//! Table-driven tests of the spec validation rules: each case states the field and the
//! message a user sees.

use super::*;
use crate::external_secret::ExternalSecretSpec;
use crate::rules::key_segments;

fn yaml<T: serde::de::DeserializeOwned>(text: &str) -> T {
    serde_yaml::from_str(text).expect("test manifest parses")
}

/// The field and message fragment a case expects, or `None` for a valid spec.
type Expected<'a> = Option<(&'a str, &'a str)>;
/// A named case: the spec as YAML and what validation must say.
type Case<'a> = (&'a str, String, Expected<'a>);

/// Asserts `result` holds exactly one error at `field` containing `message`, or none.
fn expect(result: Result<(), ValidationErrors>, want: Option<(&str, &str)>, case: &str) {
    match (result, want) {
        (Ok(()), None) => {}
        (Ok(()), Some((field, message))) => panic!("{case}: expected {field}: {message}, got no error"),
        (Err(e), None) => panic!("{case}: expected no error, got {e}"),
        (Err(e), Some((field, message))) => {
            assert!(
                e.0.iter().any(|fe| fe.field == field && fe.message.contains(message)),
                "{case}: expected {field}: {message}, got {e}"
            );
        }
    }
}

const ES_BASE: &str = "secretStoreRef: {name: store}\ndata: [{secretKey: a, remoteRef: {key: a}}]\n";

#[test]
fn external_secret_table() {
    let cases: Vec<Case> = vec![
        ("minimal", ES_BASE.into(), None),
        ("nothing to fetch", "secretStoreRef: {name: store}\n".into(), Some(("spec", "at least one entry"))),
        (
            "bad refresh interval",
            format!("{ES_BASE}refreshInterval: 1d\n"),
            Some(("spec.refreshInterval", "\"1d\" is not a duration")),
        ),
        ("zero refresh", format!("{ES_BASE}refreshInterval: \"0\"\n"), None),
        (
            "empty store name",
            "secretStoreRef: {name: ''}\ndata: [{secretKey: a, remoteRef: {key: a}}]\n".into(),
            Some(("spec.secretStoreRef.name", "name a Provider or ClusterProvider")),
        ),
        (
            // As upstream: admitted with a warning (rules::external_secret_warnings), Ready=False at sync.
            "no store anywhere",
            "data: [{secretKey: a, remoteRef: {key: a}}]\n".into(),
            None,
        ),
        (
            "per-entry store is enough",
            "data: [{secretKey: a, remoteRef: {key: a}, sourceRef: {storeRef: {name: s, kind: ClusterProvider}}}]\n"
                .into(),
            None,
        ),
        (
            "duplicate key under Retain",
            "secretStoreRef: {name: s}\ndata: [{secretKey: a, remoteRef: {key: a}}, {secretKey: a, remoteRef: {key: b}}]\n"
                .into(),
            Some(("spec.data[1].secretKey", "duplicate secretKey \"a\"")),
        ),
        (
            "duplicate key allowed under Delete",
            "secretStoreRef: {name: s}\ntarget: {deletionPolicy: Delete}\ndata: [{secretKey: a, remoteRef: {key: a}}, {secretKey: a, remoteRef: {key: b}}]\n"
                .into(),
            None,
        ),
        (
            "empty remote key",
            "secretStoreRef: {name: s}\ndata: [{secretKey: a, remoteRef: {key: ''}}]\n".into(),
            Some(("spec.data[0].remoteRef.key", "must not be empty")),
        ),
        (
            "remote key leaving the store path",
            "secretStoreRef: {name: s}\ndata: [{secretKey: a, remoteRef: {key: ../auth/token/lookup-self, property: id}}]\n"
                .into(),
            Some(("spec.data[0].remoteRef.key", "segment \"..\" is not allowed")),
        ),
        (
            "encoded dots in a remote key",
            "secretStoreRef: {name: s}\ndata: [{secretKey: a, remoteRef: {key: 'kv/%2E%2e/sys'}}]\n".into(),
            Some(("spec.data[0].remoteRef.key", "segment \"%2E%2e\" is not allowed")),
        ),
        (
            "a query in an extracted key",
            "secretStoreRef: {name: s}\ndataFrom: [{extract: {key: 'app?list=true'}}]\n".into(),
            Some(("spec.dataFrom[0].extract.key", "\"?\" would start a query")),
        ),
        (
            "a find path with an encoded slash",
            "secretStoreRef: {name: s}\ndataFrom: [{find: {path: 'kv/..%2fsys'}}]\n".into(),
            Some(("spec.dataFrom[0].find.path", "percent-encoded \"/\"")),
        ),
        (
            "slashes, dots inside names and a leading slash are keys",
            "secretStoreRef: {name: s}\ndata: [{secretKey: a, remoteRef: {key: /secret/data/my.app/db}}]\ndataFrom: [{find: {path: team-a/}}]\n"
                .into(),
            None,
        ),
        (
            "extract and find together",
            "secretStoreRef: {name: s}\ndataFrom: [{extract: {key: a}, find: {name: {regexp: x}}}]\n".into(),
            Some(("spec.dataFrom[0]", "extract and find are set")),
        ),
        (
            "empty dataFrom entry",
            "secretStoreRef: {name: s}\ndataFrom: [{}]\n".into(),
            Some(("spec.dataFrom[0]", "set exactly one of extract, find or sourceRef")),
        ),
        (
            "storeRef alone in dataFrom",
            "secretStoreRef: {name: s}\ndataFrom: [{sourceRef: {storeRef: {name: t}}}]\n".into(),
            Some(("spec.dataFrom[0].sourceRef", "needs extract or find")),
        ),
        (
            "empty sourceRef",
            "secretStoreRef: {name: s}\ndataFrom: [{extract: {key: a}, sourceRef: {}}]\n".into(),
            Some(("spec.dataFrom[0].sourceRef", "set storeRef or generatorRef")),
        ),
        (
            "generator with extract",
            "secretStoreRef: {name: s}\ndataFrom: [{extract: {key: a}, sourceRef: {generatorRef: {kind: Password, name: p}}}]\n"
                .into(),
            Some(("spec.dataFrom[0]", "extract and sourceRef.generatorRef are set")),
        ),
        (
            "generator alone needs no store",
            "dataFrom: [{sourceRef: {generatorRef: {kind: Password, name: p}}}]\n".into(),
            None,
        ),
        (
            "invalid find regex",
            "secretStoreRef: {name: s}\ndataFrom: [{find: {name: {regexp: '(unclosed'}}}]\n".into(),
            Some(("spec.dataFrom[0].find.name.regexp", "is not a valid regular expression")),
        ),
        (
            // As upstream: admitted with a warning (rules::external_secret_warnings).
            "empty find",
            "secretStoreRef: {name: s}\ndataFrom: [{find: {}}]\n".into(),
            None,
        ),
        (
            "invalid rewrite regex",
            "secretStoreRef: {name: s}\ndataFrom: [{extract: {key: a}, rewrite: [{regexp: {source: '[', target: x}}]}]\n"
                .into(),
            Some(("spec.dataFrom[0].rewrite[0].regexp.source", "is not a valid regular expression")),
        ),
        (
            "rewrite with both kinds",
            "secretStoreRef: {name: s}\ndataFrom: [{extract: {key: a}, rewrite: [{regexp: {source: a, target: b}, transform: {template: x}}]}]\n"
                .into(),
            Some(("spec.dataFrom[0].rewrite[0]", "set exactly one of merge, regexp or transform")),
        ),
        (
            "merge JSON without into",
            "secretStoreRef: {name: s}\ndataFrom: [{find: {path: a}, rewrite: [{merge: {strategy: JSON}}]}]\n".into(),
            Some(("spec.dataFrom[0].rewrite[0].merge.into", "must name the key")),
        ),
        (
            "merge JSON with into",
            "secretStoreRef: {name: s}\ndataFrom: [{find: {path: a}, rewrite: [{merge: {strategy: JSON, into: all}}]}]\n"
                .into(),
            None,
        ),
        (
            "merge Extract with upstream's defaults",
            "secretStoreRef: {name: s}\ndataFrom: [{find: {path: a}, rewrite: [{merge: {into: '', priority: [b], priorityPolicy: Strict, conflictPolicy: Error, strategy: Extract}}]}]\n"
                .into(),
            None,
        ),
        (
            "Delete with Merge",
            format!("{ES_BASE}target: {{creationPolicy: Merge, deletionPolicy: Delete}}\n"),
            Some(("spec.target.deletionPolicy", "cannot be used with creationPolicy Merge")),
        ),
        (
            "sync window with four cron fields",
            format!("{ES_BASE}syncWindows: {{kind: deny, windows: [{{schedule: '0 22 * *', duration: 8h}}]}}\n"),
            Some(("spec.syncWindows.windows[0].schedule", "is not a schedule")),
        ),
        (
            "sync windows as upstream documents them",
            format!("{ES_BASE}syncWindows: {{kind: allow, windows: [{{schedule: '0 22 * * 1-5', duration: 8h}}, {{schedule: '@daily', duration: 1h}}]}}\n"),
            None,
        ),
        (
            "a templateFrom path into a Secret",
            format!("{ES_BASE}target: {{template: {{templateFrom: [{{literal: 'a: b', target: metadata.ownerReferences}}]}}}}\n"),
            Some(("spec.target.template.templateFrom[0].target", "is not allowed when the target is a Secret")),
        ),
        (
            "templateFrom targets in any case",
            format!("{ES_BASE}target: {{template: {{templateFrom: [{{literal: 'a: b', target: labels}}, {{literal: 'c: d', target: Data}}]}}}}\n"),
            None,
        ),
        (
            "a manifest target with a path, as upstream documents it",
            format!("{ES_BASE}target: {{manifest: {{apiVersion: v1, kind: ConfigMap}}, template: {{templateFrom: [{{literal: 'a: b', target: spec.config}}]}}}}\n"),
            None,
        ),
        (
            "a manifest target with a path into its metadata",
            format!("{ES_BASE}target: {{manifest: {{apiVersion: v1, kind: ConfigMap}}, template: {{templateFrom: [{{literal: 'a: b', target: metadata.ownerReferences}}]}}}}\n"),
            Some(("spec.target.template.templateFrom[0].target", "a template may not write metadata")),
        ),
        (
            "a manifest target with a path that does not parse",
            format!("{ES_BASE}target: {{manifest: {{apiVersion: v1, kind: ConfigMap}}, template: {{templateFrom: [{{literal: 'a: b', target: 'spec.rules[x]'}}]}}}}\n"),
            Some(("spec.target.template.templateFrom[0].target", "\"x\" is not an index")),
        ),
        (
            "Delete with CreateOrMerge",
            format!("{ES_BASE}target: {{creationPolicy: CreateOrMerge, deletionPolicy: Delete}}\n"),
            Some(("spec.target.deletionPolicy", "cannot be used with creationPolicy CreateOrMerge")),
        ),
        (
            "CreateOrMerge with Merge",
            format!("{ES_BASE}target: {{creationPolicy: CreateOrMerge, deletionPolicy: Merge}}\n"),
            None,
        ),
        (
            "Delete with None",
            format!("{ES_BASE}target: {{creationPolicy: None, deletionPolicy: Delete}}\n"),
            Some(("spec.target.deletionPolicy", "cannot be used with creationPolicy None")),
        ),
        (
            "Merge deletion with None creation",
            format!("{ES_BASE}target: {{creationPolicy: None, deletionPolicy: Merge}}\n"),
            Some(("spec.target.deletionPolicy", "there is no Secret to merge into")),
        ),
        ("Delete with Owner", format!("{ES_BASE}target: {{creationPolicy: Owner, deletionPolicy: Delete}}\n"), None),
    ];
    for (case, text, want) in cases {
        let spec: ExternalSecretSpec = yaml(&text);
        expect(validate_external_secret(&spec), want, case);
    }
}

const PS_BASE: &str = "selector: {secret: {name: src}}\n";

#[test]
fn push_secret_table() {
    let cases: Vec<Case> = vec![
        ("by name", format!("{PS_BASE}secretStoreRefs: [{{name: s}}]\n"), None),
        ("by selector", format!("{PS_BASE}secretStoreRefs: [{{labelSelector: {{matchLabels: {{a: b}}}}}}]\n"), None),
        ("no stores", format!("{PS_BASE}secretStoreRefs: []\n"), Some(("spec.secretStoreRefs", "at least one store"))),
        (
            "name and selector",
            format!("{PS_BASE}secretStoreRefs: [{{name: s, labelSelector: {{}}}}]\n"),
            Some(("spec.secretStoreRefs[0]", "not both")),
        ),
        (
            "neither",
            format!("{PS_BASE}secretStoreRefs: [{{kind: Provider}}]\n"),
            Some(("spec.secretStoreRefs[0]", "set name or labelSelector")),
        ),
        (
            "bad selector operator",
            format!(
                "{PS_BASE}secretStoreRefs: [{{labelSelector: {{matchExpressions: [{{key: a, operator: Is, values: [b]}}]}}}}]\n"
            ),
            Some(("spec.secretStoreRefs[0].labelSelector", "operator \"Is\" is not valid")),
        ),
        (
            "source Secrets by label",
            "selector: {secret: {selector: {matchLabels: {push: 'yes'}}}}\nsecretStoreRefs: [{name: s}]\n".into(),
            None,
        ),
        (
            "a source Secret selector with a bad operator",
            "selector: {secret: {selector: {matchExpressions: [{key: a, operator: Is}]}}}\nsecretStoreRefs: [{name: s}]\n"
                .into(),
            Some(("spec.selector.secret.selector", "operator \"Is\" is not valid")),
        ),
        (
            "a source Secret without name or selector",
            "selector: {secret: {}}\nsecretStoreRefs: [{name: s}]\n".into(),
            Some(("spec.selector.secret", "set name, or selector")),
        ),
        (
            "no source",
            "selector: {}\nsecretStoreRefs: [{name: s}]\n".into(),
            Some(("spec.selector", "set exactly one of secret or generatorRef")),
        ),
        (
            // As upstream: admitted with a warning (rules::push_secret_warnings).
            "empty remote key",
            format!("{PS_BASE}secretStoreRefs: [{{name: s}}]\ndata: [{{match: {{remoteRef: {{remoteKey: ''}}}}}}]\n"),
            None,
        ),
        (
            "remote key leaving the store path",
            format!("{PS_BASE}secretStoreRefs: [{{name: s}}]\ndata: [{{match: {{remoteRef: {{remoteKey: 'kv/a/../../sys/x'}}}}}}]\n"),
            Some(("spec.data[0].match.remoteRef.remoteKey", "segment \"..\" is not allowed")),
        ),
        (
            "bundle remote key with a fragment",
            format!("{PS_BASE}secretStoreRefs: [{{name: s}}]\ndataTo: [{{storeRef: {{name: s}}, remoteKey: 'app#x'}}]\n"),
            Some(("spec.dataTo[0].remoteKey", "\"#\" would start a fragment")),
        ),
        (
            "two entries to one target",
            format!(
                "{PS_BASE}secretStoreRefs: [{{name: s}}]\ndata: [{{match: {{secretKey: a, remoteRef: {{remoteKey: r}}}}}}, {{match: {{secretKey: b, remoteRef: {{remoteKey: r}}}}}}]\n"
            ),
            Some(("spec.data[1].match.remoteRef", "already pushes")),
        ),
        (
            "metadata must be an object",
            format!(
                "{PS_BASE}secretStoreRefs: [{{name: s}}]\ndata: [{{match: {{remoteRef: {{remoteKey: r}}}}, metadata: [1]}}]\n"
            ),
            Some(("spec.data[0].metadata", "must be an object")),
        ),
        (
            "metadata past the free-form JSON limits",
            format!(
                "{PS_BASE}secretStoreRefs: [{{name: s}}]\ndata: [{{match: {{remoteRef: {{remoteKey: r}}}}, metadata: {{pad: [{}0]}}}}]\n",
                "0, ".repeat(5000)
            ),
            Some(("spec.data[0].metadata", "more than Keyward keeps")),
        ),
        (
            "dataTo metadata past the free-form JSON limits",
            format!(
                "{PS_BASE}secretStoreRefs: [{{name: s}}]\ndataTo: [{{storeRef: {{name: s}}, metadata: {{a: '{}'}}}}]\n",
                "x".repeat(70_000)
            ),
            Some(("spec.dataTo[0].metadata", "more than Keyward keeps")),
        ),
        (
            "dataTo bundle, as upstream's guide",
            format!(
                "{PS_BASE}secretStoreRefs: [{{name: s}}]\ndataTo: [{{storeRef: {{name: s}}, remoteKey: my-app/config, match: {{regexp: '^DB_'}}, metadata: {{a: b}}}}]\n"
            ),
            None,
        ),
        (
            "dataTo per key with rewrites",
            format!(
                "{PS_BASE}secretStoreRefs: [{{name: s}}]\ndataTo: [{{storeRef: {{name: s}}, conversionStrategy: ReverseUnicode, rewrite: [{{regexp: {{source: '^db-', target: DATABASE_}}}}, {{transform: {{template: '{{{{ .value | upper }}}}'}}}}]}}]\n"
            ),
            None,
        ),
        (
            "dataTo by labels",
            format!(
                "{PS_BASE}secretStoreRefs: [{{name: s}}]\ndataTo: [{{storeRef: {{labelSelector: {{matchLabels: {{a: b}}}}}}}}]\n"
            ),
            None,
        ),
        (
            "dataTo without a store",
            format!("{PS_BASE}secretStoreRefs: [{{name: s}}]\ndataTo: [{{remoteKey: r}}]\n"),
            Some(("spec.dataTo[0].storeRef", "set storeRef.name or storeRef.labelSelector")),
        ),
        (
            "dataTo store not listed",
            format!("{PS_BASE}secretStoreRefs: [{{name: s}}]\ndataTo: [{{storeRef: {{name: other}}}}]\n"),
            Some(("spec.dataTo[0].storeRef.name", "\"other\" is not listed in spec.secretStoreRefs")),
        ),
        (
            "dataTo store listed with another kind",
            format!("{PS_BASE}secretStoreRefs: [{{name: s, kind: Provider}}]\ndataTo: [{{storeRef: {{name: s}}}}]\n"),
            Some(("spec.dataTo[0].storeRef.name", "SecretStore \"s\" is not listed in spec.secretStoreRefs")),
        ),
        (
            "dataTo store of another kind",
            format!(
                "{PS_BASE}secretStoreRefs: [{{name: s, kind: Provider}}]\ndataTo: [{{storeRef: {{name: s, kind: ClusterProvider}}}}]\n"
            ),
            Some(("spec.dataTo[0].storeRef.name", "is not listed")),
        ),
        (
            "dataTo remoteKey with rewrite",
            format!(
                "{PS_BASE}secretStoreRefs: [{{name: s}}]\ndataTo: [{{storeRef: {{name: s}}, remoteKey: r, rewrite: [{{regexp: {{source: a, target: b}}}}]}}]\n"
            ),
            Some(("spec.dataTo[0].rewrite", "mutually exclusive")),
        ),
        (
            "dataTo bad match",
            format!(
                "{PS_BASE}secretStoreRefs: [{{name: s}}]\ndataTo: [{{storeRef: {{name: s}}, match: {{regexp: '('}}}}]\n"
            ),
            Some(("spec.dataTo[0].match.regexp", "is not a valid regular expression")),
        ),
        (
            "dataTo empty rewrite",
            format!("{PS_BASE}secretStoreRefs: [{{name: s}}]\ndataTo: [{{storeRef: {{name: s}}, rewrite: [{{}}]}}]\n"),
            Some(("spec.dataTo[0].rewrite[0]", "set exactly one of regexp or transform")),
        ),
        (
            "dataTo bad rewrite regexp",
            format!(
                "{PS_BASE}secretStoreRefs: [{{name: s}}]\ndataTo: [{{storeRef: {{name: s}}, rewrite: [{{regexp: {{source: '[', target: b}}}}]}}]\n"
            ),
            Some(("spec.dataTo[0].rewrite[0].regexp.source", "is not a valid regular expression")),
        ),
    ];
    for (case, text, want) in cases {
        let spec: crate::PushSecretSpec = yaml(&text);
        expect(validate_push_secret(&spec), want, case);
    }
}

const CONFIG: &str = "config: {address: 'p.keyward.svc:8443', providerRef: {apiVersion: provider.external-secrets.io/v2alpha1, kind: Kubernetes, name: r";

#[test]
fn provider_table() {
    let cases: Vec<Case> = vec![
        ("valid", format!("{CONFIG}}}}}\n"), None),
        ("own namespace is fine", format!("{CONFIG}, namespace: team-a}}}}\n"), None),
        (
            "other namespace",
            format!("{CONFIG}, namespace: other}}}}\n"),
            Some(("spec.config.providerRef.namespace", "always uses its own namespace \"team-a\"")),
        ),
        (
            "bad address",
            "config: {address: 'p.keyward.svc', providerRef: {apiVersion: v, kind: K, name: n}}\n".into(),
            Some(("spec.config.address", "has no port")),
        ),
        (
            "empty ref",
            "config: {address: 'p:1', providerRef: {apiVersion: v, kind: '', name: n}}\n".into(),
            Some(("spec.config.providerRef.kind", "must not be empty")),
        ),
    ];
    for (case, text, want) in cases {
        let spec: crate::ProviderSpec = yaml(&text);
        expect(validate_provider("team-a", &spec), want, case);
    }
}

#[test]
fn cluster_provider_table() {
    let with_ns = format!("{CONFIG}, namespace: creds}}}}\n");
    let cases: Vec<Case> = vec![
        ("ProviderNamespace with namespace", with_ns.clone(), None),
        (
            "ProviderNamespace without namespace",
            format!("{CONFIG}}}}}\n"),
            Some(("spec.config.providerRef.namespace", "required with authenticationScope ProviderNamespace")),
        ),
        (
            "ManifestNamespace without namespace",
            format!("{CONFIG}}}}}\nauthenticationScope: ManifestNamespace\n"),
            None,
        ),
        (
            "invalid regex",
            format!("{with_ns}conditions: [{{namespaceRegexes: ['ok', '[bad']}}]\n"),
            Some(("spec.conditions[0].namespaceRegexes[1]", "\"[bad\" is not a valid regular expression")),
        ),
        (
            "empty condition",
            format!("{with_ns}conditions: [{{}}]\n"),
            Some(("spec.conditions[0]", "an empty condition admits no namespace")),
        ),
        (
            "bad selector",
            format!("{with_ns}conditions: [{{namespaceSelector: {{matchExpressions: [{{key: a, operator: In}}]}}}}]\n"),
            Some(("spec.conditions[0].namespaceSelector", "needs at least one value")),
        ),
        (
            "every condition kind",
            format!(
                "{with_ns}conditions: [{{namespaceSelector: {{matchLabels: {{a: b}}}}}}, {{namespaces: [x]}}, {{namespaceRegexes: ['^t-']}}]\n"
            ),
            None,
        ),
    ];
    for (case, text, want) in cases {
        let spec: crate::ClusterProviderSpec = yaml(&text);
        expect(validate_cluster_provider(&spec), want, case);
    }
}

/// Every remote key and find path of upstream's documentation and end-to-end manifests
/// (`upstream_keys.txt`: field, tab, key; extracted from external-secrets/external-secrets at
/// release 2.9.0) passes the key rule, so refusing traversal refuses no upstream example.
#[test]
fn upstream_example_keys_pass_the_key_rule() {
    let mut checked = 0;
    for line in include_str!("upstream_keys.txt").lines().filter(|l| !l.starts_with('#')) {
        let (field, key) = line.split_once('\t').expect("field<TAB>key");
        assert!(key_segments(key).is_ok(), "{field} {key:?}: {:?}", key_segments(key));
        checked += 1;
    }
    assert!(checked > 150, "only {checked} upstream keys");
}
