//! The kinds the in-place switch also carries over, beside `keyward_e2e::switch`'s: a
//! ClusterPushSecret and the PushSecret it made, an ExternalSecret writing a ConfigMap (generic
//! target), one whose template calls every function of upstream's engine a render can repeat, an
//! `openBao` store (Vault's dev server) and a `crd` store (ConfigMaps, through the Kubernetes
//! provider), and a generator of every upstream kind with an ExternalSecret using it. Served
//! kinds must be served after the switch; the kinds Keyward does not serve must be named by
//! `keyward migrate` before it and report `Ready=False` naming the kind after it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use keyward_chart_tests::installed::apply;
use keyward_crds::generators::GeneratorKind;
use keyward_e2e::repo_root;
use keyward_e2e::stores::VaultDev;
use keyward_e2e::switch::{create_with_status, eventually, ready, resource};
use kube::api::{Api, DynamicObject};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

/// One call of each template function a render can repeat (`function_names` less
/// `unrepeatable_functions`), named after it. A function whose call cannot succeed in a render
/// (`fail`, `call` without a function value) sits in a branch never taken: the engine still
/// parses and resolves it.
pub const CALLS: &[(&str, &str)] = &[
    ("abbrev", r#"{{ abbrev 5 "hello world" }}"#),
    ("abbrevboth", r#"{{ abbrevboth 5 10 "1234 5678 9123" }}"#),
    ("add", "{{ add 1 2 3 }}"),
    ("add1", "{{ add1 1 }}"),
    ("add1f", "{{ add1f 1.5 }}"),
    ("addf", "{{ addf 1.5 2 }}"),
    ("adler32sum", "{{ adler32sum .user }}"),
    ("all", r#"{{ all 1 "a" true }}"#),
    ("and", "{{ and true .user }}"),
    ("any", r#"{{ any 0 "" .user }}"#),
    ("append", "{{ append (list 1 2) 3 | toJson }}"),
    ("atoi", r#"{{ atoi "42" }}"#),
    ("b32dec", "{{ b32enc .user | b32dec }}"),
    ("b32enc", "{{ b32enc .user }}"),
    ("b64dec", "{{ b64enc .user | b64dec }}"),
    ("b64enc", "{{ b64enc .user }}"),
    ("base", r#"{{ base "a/b/c.txt" }}"#),
    ("bcrypt", "{{ bcrypt .user | len }}"),
    ("biggest", "{{ biggest 1 5 3 }}"),
    ("buildCustomCert", "{{ (buildCustomCert (b64enc .cert) (b64enc .key)).Cert | len }}"),
    ("call", "{{ if false }}{{ call .user }}{{ end }}-"),
    ("camelcase", r#"{{ camelcase "http_server" }}"#),
    ("cat", r#"{{ cat "a" 1 .user }}"#),
    ("ceil", "{{ ceil 1.5 }}"),
    ("certSANs", "{{ certSANs .cert | toJson }}"),
    ("chunk", "{{ chunk 2 (list 1 2 3) | toJson }}"),
    ("clean", r#"{{ clean "a//b/../c" }}"#),
    ("coalesce", r#"{{ coalesce "" .user }}"#),
    ("compact", r#"{{ compact (list 1 "" 2) | toJson }}"#),
    ("concat", "{{ concat (list 1) (list 2) | toJson }}"),
    ("contains", r#"{{ contains "dm" .user }}"#),
    ("dateModify", r#"{{ toDate "2006-01-02" "2024-01-02" | dateModify "1h" | unixEpoch }}"#),
    ("date_modify", r#"{{ toDate "2006-01-02" "2024-01-02" | date_modify "-1h" | unixEpoch }}"#),
    ("decryptAES", r#"{{ encryptAES "k" .user | decryptAES "k" }}"#),
    ("deepCopy", r#"{{ deepCopy (dict "a" 1) | toJson }}"#),
    ("deepEqual", "{{ deepEqual (list 1) (list 1) }}"),
    ("default", r#"{{ default "d" "" }}"#),
    ("derivePassword", r#"{{ derivePassword 1 "long" "password" "user" "example.com" }}"#),
    ("dict", r#"{{ dict "a" 1 | toJson }}"#),
    ("dig", r#"{{ dig "a" "b" "none" (dict "a" (dict "b" "x")) }}"#),
    ("dir", r#"{{ dir "a/b/c" }}"#),
    ("div", "{{ div 7 2 }}"),
    ("divf", "{{ divf 7 2 }}"),
    ("duration", "{{ duration 95 }}"),
    ("durationRound", r#"{{ durationRound "2h10m5s" }}"#),
    ("empty", r#"{{ empty "" }}"#),
    ("eq", r#"{{ eq .user "admin" }}"#),
    ("ext", r#"{{ ext "a.txt" }}"#),
    ("fail", r#"{{ if false }}{{ fail "never" }}{{ end }}-"#),
    ("filterCertChain", r#"{{ filterCertChain "leaf" .cert }}"#),
    ("filterPEM", r#"{{ filterPEM "CERTIFICATE" .cert }}"#),
    ("first", "{{ first (list 1 2) }}"),
    ("float64", r#"{{ float64 "1.5" }}"#),
    ("floor", "{{ floor 1.5 }}"),
    ("fromJson", "{{ (fromJson .json).a }}"),
    ("fromYaml", "{{ (fromYaml .yaml).b }}"),
    ("ge", "{{ ge 2 1 }}"),
    ("get", r#"{{ get (dict "a" "x") "a" }}"#),
    ("gt", "{{ gt 2 1 }}"),
    ("has", "{{ has 1 (list 1 2) }}"),
    ("hasKey", r#"{{ hasKey . "user" }}"#),
    ("hasPrefix", r#"{{ hasPrefix "ad" .user }}"#),
    ("hasSuffix", r#"{{ hasSuffix "in" .user }}"#),
    ("hello", "{{ hello }}"),
    ("hexdec", r#"{{ hexdec "6869" }}"#),
    ("html", r#"{{ html "<a>" }}"#),
    ("htpasswd", r#"{{ htpasswd "alice" .user | len }}"#),
    ("indent", r#"{{ indent 2 "a\nb" }}"#),
    ("index", r#"{{ index . "user" }}"#),
    ("initial", "{{ initial (list 1 2 3) | toJson }}"),
    ("initials", r#"{{ initials "Hello World" }}"#),
    ("int", r#"{{ int "42" }}"#),
    ("int64", r#"{{ int64 "42" }}"#),
    ("isAbs", r#"{{ isAbs "/a" }}"#),
    ("js", r#"{{ js "a'b" }}"#),
    ("join", r#"{{ join "," (list "a" "b") }}"#),
    ("jwkPrivateKeyPem", "{{ jwkPrivateKeyPem .jwk }}"),
    ("jwkPublicKeyPem", "{{ jwkPublicKeyPem .jwk }}"),
    ("kebabcase", r#"{{ kebabcase "HelloWorld" }}"#),
    ("keys", r#"{{ keys (dict "a" 1) | toJson }}"#),
    ("kindIs", r#"{{ kindIs "string" .user }}"#),
    ("kindOf", "{{ kindOf .user }}"),
    ("last", "{{ last (list 1 2) }}"),
    ("le", "{{ le 1 2 }}"),
    ("len", "{{ len .user }}"),
    ("list", "{{ list 1 2 | toJson }}"),
    ("lower", r#"{{ lower "ABC" }}"#),
    ("lt", "{{ lt 1 2 }}"),
    ("max", "{{ max 1 3 2 }}"),
    ("maxf", "{{ maxf 1.5 2.5 }}"),
    ("merge", r#"{{ merge (dict "a" 1) (dict "b" 2) | toJson }}"#),
    ("mergeOverwrite", r#"{{ mergeOverwrite (dict "a" 1) (dict "a" 2) | toJson }}"#),
    ("min", "{{ min 3 1 2 }}"),
    ("minf", "{{ minf 1.5 2.5 }}"),
    ("mod", "{{ mod 7 3 }}"),
    ("mul", "{{ mul 2 3 }}"),
    ("mulf", "{{ mulf 1.5 2 }}"),
    ("mustAppend", "{{ mustAppend (list 1) 2 | toJson }}"),
    ("mustChunk", "{{ mustChunk 1 (list 1 2) | toJson }}"),
    ("mustCompact", r#"{{ mustCompact (list 1 "" 2) | toJson }}"#),
    ("mustDateModify", r#"{{ toDate "2006-01-02" "2024-01-02" | mustDateModify "2h" | unixEpoch }}"#),
    ("mustDeepCopy", r#"{{ mustDeepCopy (dict "a" 1) | toJson }}"#),
    ("mustFirst", "{{ mustFirst (list 1 2) }}"),
    ("mustFromJson", "{{ (mustFromJson .json).a }}"),
    ("mustHas", "{{ mustHas 1 (list 1) }}"),
    ("mustInitial", "{{ mustInitial (list 1 2) | toJson }}"),
    ("mustLast", "{{ mustLast (list 1 2) }}"),
    ("mustMerge", r#"{{ mustMerge (dict "a" 1) (dict "b" 2) | toJson }}"#),
    ("mustMergeOverwrite", r#"{{ mustMergeOverwrite (dict "a" 1) (dict "a" 3) | toJson }}"#),
    ("mustPrepend", "{{ mustPrepend (list 2) 1 | toJson }}"),
    ("mustPush", "{{ mustPush (list 1) 2 | toJson }}"),
    ("mustRegexFind", r#"{{ mustRegexFind "d.i" .user }}"#),
    ("mustRegexFindAll", r#"{{ mustRegexFindAll "[a-z]" .user 2 | toJson }}"#),
    ("mustRegexMatch", r#"{{ mustRegexMatch "^a" .user }}"#),
    ("mustRegexReplaceAll", r#"{{ mustRegexReplaceAll "a(d)" .user "${1}A" }}"#),
    ("mustRegexReplaceAllLiteral", r#"{{ mustRegexReplaceAllLiteral "a" .user "$1" }}"#),
    ("mustRegexSplit", r#"{{ mustRegexSplit "m" .user -1 | toJson }}"#),
    ("mustRest", "{{ mustRest (list 1 2) | toJson }}"),
    ("mustReverse", "{{ mustReverse (list 1 2) | toJson }}"),
    ("mustSlice", "{{ mustSlice (list 1 2 3) 1 2 | toJson }}"),
    ("mustToDate", r#"{{ mustToDate "2006-01-02" "2024-01-02" | unixEpoch }}"#),
    ("mustToJson", r#"{{ mustToJson (dict "a" "<b>") }}"#),
    ("mustToPrettyJson", r#"{{ mustToPrettyJson (dict "a" 1) }}"#),
    ("mustToRawJson", r#"{{ mustToRawJson (dict "a" "<b>") }}"#),
    ("mustUniq", "{{ mustUniq (list 1 1 2) | toJson }}"),
    ("mustWithout", "{{ mustWithout (list 1 2) 1 | toJson }}"),
    ("must_date_modify", r#"{{ toDate "2006-01-02" "2024-01-02" | must_date_modify "3h" | unixEpoch }}"#),
    ("ne", "{{ ne 1 2 }}"),
    ("nindent", r#"{{ nindent 2 "a" }}"#),
    ("nospace", r#"{{ nospace "a b c" }}"#),
    ("not", "{{ not false }}"),
    ("omit", r#"{{ omit (dict "a" 1 "b" 2) "a" | toJson }}"#),
    ("or", r#"{{ or "" .user }}"#),
    ("osBase", r#"{{ osBase "a/b" }}"#),
    ("osClean", r#"{{ osClean "a//b" }}"#),
    ("osDir", r#"{{ osDir "a/b" }}"#),
    ("osExt", r#"{{ osExt "a.b" }}"#),
    ("osIsAbs", r#"{{ osIsAbs "a" }}"#),
    ("pick", r#"{{ pick (dict "a" 1 "b" 2) "a" | toJson }}"#),
    ("pkcs12cert", "{{ .p12nopass | b64dec | pkcs12cert }}"),
    ("pkcs12certPass", r#"{{ .p12 | b64dec | pkcs12certPass "changeit" }}"#),
    ("pkcs12key", "{{ .p12nopass | b64dec | pkcs12key }}"),
    ("pkcs12keyPass", r#"{{ .p12 | b64dec | pkcs12keyPass "changeit" }}"#),
    ("plural", r#"{{ plural "one" "many" 2 }}"#),
    ("pluck", r#"{{ pluck "a" (dict "a" 1) (dict "a" 2) | toJson }}"#),
    ("prepend", "{{ prepend (list 2) 1 | toJson }}"),
    ("print", r#"{{ print "a" 1 }}"#),
    ("printf", r#"{{ printf "%s-%d" .user 1 }}"#),
    ("println", r#"{{ println "a" }}"#),
    ("push", "{{ push (list 1) 2 | toJson }}"),
    ("quote", "{{ quote .user }}"),
    ("regexFind", r#"{{ regexFind "d.i" .user }}"#),
    ("regexFindAll", r#"{{ regexFindAll "[a-z]" .user -1 | toJson }}"#),
    ("regexMatch", r#"{{ regexMatch "^a" .user }}"#),
    ("regexQuoteMeta", r#"{{ regexQuoteMeta "a.b" }}"#),
    ("regexReplaceAll", r#"{{ regexReplaceAll "a(d)" .user "${1}X" }}"#),
    ("regexReplaceAllLiteral", r#"{{ regexReplaceAllLiteral "a" .user "$1" }}"#),
    ("regexSplit", r#"{{ regexSplit "m" .user -1 | toJson }}"#),
    ("repeat", r#"{{ repeat 2 "ab" }}"#),
    ("replace", r#"{{ replace "a" "b" .user }}"#),
    ("required", r#"{{ required "user is needed" .user }}"#),
    ("rest", "{{ rest (list 1 2) | toJson }}"),
    ("reverse", "{{ reverse (list 1 2) | toJson }}"),
    ("round", "{{ round 1.2345 2 }}"),
    ("rsaDecrypt", r#"{{ rsaDecrypt "RSA-OAEP" "SHA256" (b64dec .ct) .rsakey }}"#),
    ("semver", r#"{{ (semver "1.2.3").Major }}"#),
    ("semverCompare", r#"{{ semverCompare ">=1.0" "1.2.3" }}"#),
    ("seq", "{{ seq 3 }}"),
    ("set", r#"{{ set (dict) "a" 1 | toJson }}"#),
    ("sha1sum", "{{ sha1sum .user }}"),
    ("sha256sum", "{{ sha256sum .user }}"),
    ("sha512sum", "{{ sha512sum .user }}"),
    ("slice", "{{ slice .user 1 3 }}"),
    ("snakecase", r#"{{ snakecase "HelloWorld" }}"#),
    ("sortAlpha", r#"{{ sortAlpha (list "b" "a") | toJson }}"#),
    ("split", r#"{{ split "," "a,b" | toJson }}"#),
    ("splitList", r#"{{ splitList "," "a,b" | toJson }}"#),
    ("splitn", r#"{{ splitn "," 2 "a,b,c" | toJson }}"#),
    ("squote", "{{ squote .user }}"),
    ("sub", "{{ sub 5 2 }}"),
    ("subf", "{{ subf 5.5 2 }}"),
    ("substr", "{{ substr 0 2 .user }}"),
    ("swapcase", r#"{{ swapcase "aB" }}"#),
    ("ternary", r#"{{ ternary "y" "n" true }}"#),
    ("title", r#"{{ title "hello world" }}"#),
    ("toDate", r#"{{ toDate "2006-01-02" "2024-01-02" | unixEpoch }}"#),
    ("toDecimal", r#"{{ toDecimal "0777" }}"#),
    ("toJson", r#"{{ toJson (dict "a" "<b>") }}"#),
    ("toPrettyJson", r#"{{ toPrettyJson (list 1) }}"#),
    ("toRawJson", r#"{{ toRawJson (dict "a" "<b>") }}"#),
    ("toString", "{{ toString 1 }}"),
    ("toStrings", "{{ toStrings (list 1 2) | toJson }}"),
    ("toYaml", r#"{{ toYaml (dict "a" 1) }}"#),
    ("trim", r#"{{ trim "  a  " }}"#),
    ("trimAll", r#"{{ trimAll "$" "$5$" }}"#),
    ("trimPrefix", r#"{{ trimPrefix "ad" .user }}"#),
    ("trimSuffix", r#"{{ trimSuffix "in" .user }}"#),
    ("trimall", r#"{{ trimall "$" "$6$" }}"#),
    ("trunc", r#"{{ trunc 3 "abcdef" }}"#),
    ("tuple", "{{ tuple 1 2 | toJson }}"),
    ("typeIs", r#"{{ typeIs "string" .user }}"#),
    ("typeIsLike", r#"{{ typeIsLike "string" .user }}"#),
    ("typeOf", "{{ typeOf .user }}"),
    ("uniq", "{{ uniq (list 1 1 2) | toJson }}"),
    ("unixEpoch", r#"{{ toDate "2006-01-02" "2024-01-03" | unixEpoch }}"#),
    ("unset", r#"{{ unset (dict "a" 1 "b" 2) "a" | toJson }}"#),
    ("until", "{{ until 3 | toJson }}"),
    ("untilStep", "{{ untilStep 0 6 2 | toJson }}"),
    ("untitle", r#"{{ untitle "Hello World" }}"#),
    ("upper", "{{ upper .user }}"),
    ("urlJoin", r#"{{ urlJoin (dict "scheme" "https" "host" "h" "path" "/p") }}"#),
    ("urlParse", r#"{{ (urlParse "https://h/p").host }}"#),
    ("urlquery", r#"{{ urlquery "a b&c" }}"#),
    ("values", r#"{{ values (dict "a" 1) | toJson }}"#),
    ("without", "{{ without (list 1 2) 1 | toJson }}"),
    ("wrap", r#"{{ wrap 5 "hello world" }}"#),
    ("wrapWith", r#"{{ wrapWith 5 "|" "hello world" }}"#),
];

/// The values the template reads, as Vault holds them (`secret/template`): text, and the
/// template crate's own PEM, PKCS#12, JWK and RSA-OAEP fixtures (binary ones as base64).
pub fn template_data() -> BTreeMap<String, String> {
    let fixture = |name: &str| {
        let path = repo_root().join("template/tests/fixtures").join(name);
        std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    };
    let text = |name: &str| String::from_utf8(fixture(name)).expect("a text fixture");
    BTreeMap::from([
        ("user".to_string(), "admin".to_string()),
        ("json".into(), r#"{"a":1,"b":[1,2]}"#.into()),
        ("yaml".into(), "a: 1\nb: two\n".into()),
        ("cert".into(), text("leaf.crt.pem")),
        ("key".into(), text("leaf.key.pem")),
        ("p12".into(), BASE64.encode(fixture("leaf.p12"))),
        ("p12nopass".into(), BASE64.encode(fixture("leaf-nopass.p12"))),
        ("jwk".into(), text("rsa.jwk.json")),
        ("ct".into(), BASE64.encode(fixture("rsa-oaep-sha256.bin"))),
        ("rsakey".into(), text("rsa.key.pem")),
    ])
}

/// The render of [`CALLS`] over [`template_data`], by Keyward's template engine.
pub fn expected_render() -> BTreeMap<String, Vec<u8>> {
    let data = template_data().into_iter().map(|(k, v)| (k, v.into_bytes())).collect();
    keyward_template::render(CALLS, &data, &keyward_template::Limits::default())
        .unwrap_or_else(|e| panic!("the switch's template renders: {e}"))
}

/// The repeatable functions [`CALLS`] leaves out, and the names it has that are none.
fn calls_against_the_table() -> (Vec<&'static str>, Vec<&'static str>) {
    let unrepeatable = keyward_template::unrepeatable_functions();
    let repeatable: BTreeSet<&str> =
        keyward_template::function_names().into_iter().filter(|f| !unrepeatable.contains(f)).collect();
    let called: BTreeSet<&str> = CALLS.iter().map(|(name, _)| *name).collect();
    (repeatable.difference(&called).copied().collect(), called.difference(&repeatable).copied().collect())
}

#[test]
fn the_switch_template_calls_every_repeatable_function_and_renders() {
    let (missing, extra) = calls_against_the_table();
    assert!(missing.is_empty(), "functions the switch's template does not call: {missing:?}");
    assert!(extra.is_empty(), "calls of no repeatable function: {extra:?}");
    for (name, src) in CALLS {
        let used = keyward_template::unknown_functions(name, src, &keyward_template::Limits::default())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(used.is_empty(), "{name}: {used:?}");
        assert!(src.contains(&format!("{name} ")) || src.contains(&format!("{name} }}")), "{name} calls itself: {src}");
    }
    let rendered = expected_render();
    assert_eq!(rendered.len(), CALLS.len());
    assert!(rendered["pkcs12keyPass"].starts_with(b"-----BEGIN PRIVATE KEY-----\n"), "{rendered:?}");
}

/// The unserved generator kinds, each as upstream's documentation writes its generator and the
/// ExternalSecret using it (`reconciler/tests/fixtures/upstream-generators/`), with those
/// ExternalSecrets' names.
const UNSERVED_EXAMPLES: &[&str] = &[
    "generator-github.yaml",
    "generator-github-example.yaml",
    "generator-gitlab.yaml",
    "generator-gitlab-example.yaml",
    "generator-quay.yaml",
    "generator-quay-example.yaml",
    "generator-cloudsmith.yaml",
    "generator-cloudsmith-example.yaml",
    "generator-grafana.yaml",
    "generator-grafana-example.yaml",
    "beyondtrustworkloadcredentials-dynamic-secret.yaml",
    "beyondtrustworkloadcredentials-dynamic-external-secret.yaml",
];
const UNSERVED_USES: &[(&str, &str)] = &[
    ("github-auth-token", "GithubAccessToken"),
    ("gitlab-deploy-token", "GitlabDeployToken"),
    ("quay-credentials", "QuayAccessToken"),
    ("cloudsmith-credentials", "CloudsmithAccessToken"),
    ("grafana-token", "Grafana"),
    ("app-aws-credentials", "BeyondtrustWorkloadCredentialsDynamicSecret"),
];

/// The served generators: ExternalSecret `gen-<name>` uses generator `<name>` of `kind`, and its
/// Secret must hold `key` (a value the generator makes).
const SERVED: &[(&str, &str, &str)] = &[
    ("password", "Password", "password"),
    ("uuid", "UUID", "uuid"),
    ("sshkey", "SSHKey", "privateKey"),
    ("fake", "Fake", "foo"),
    ("mfa", "MFA", "token"),
    ("vault", "VaultDynamicSecret", "data"),
    ("ecr", "ECRAuthorizationToken", "password"),
    ("sts", "STSSessionToken", "session_token"),
    ("webhook", "Webhook", "sealed"),
    ("cluster", "ClusterGenerator", "uuid"),
];

/// Served kinds whose cloud is not reachable here (no Azure or Google endpoint on the node):
/// their ExternalSecrets must reach the provider and fail there, not be refused as unserved.
const SERVED_ELSEWHERE: &[(&str, &str)] = &[("azurecr-credentials", "ACRAccessToken"), ("gen-gcr", "GCRAccessToken")];

fn yaml_documents(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.split("\n---").filter_map(|doc| serde_yaml::from_str::<Option<Value>>(doc).expect("fixture YAML")).collect()
}

fn upstream_example(file: &str, ns: &str) -> Vec<Value> {
    let dir = repo_root().join("reconciler/tests/fixtures/upstream-generators");
    yaml_documents(&dir.join(file))
        .into_iter()
        .map(|mut doc| {
            doc["metadata"]["namespace"] = json!(ns);
            // As printed, the Cloudsmith example names a field its CRD does not have.
            if let Some(host) = doc["spec"].as_object_mut().and_then(|s| s.remove("apiHost")) {
                doc["spec"]["apiUrl"] = json!(format!("https://{}", host.as_str().unwrap_or_default()));
            }
            doc
        })
        .collect()
}

fn generator(kind: &str, name: &str, ns: &str, spec: Value) -> Value {
    json!({"apiVersion": "generators.external-secrets.io/v1alpha1", "kind": kind,
           "metadata": {"name": name, "namespace": ns}, "spec": spec})
}

fn generator_user(name: &str, ns: &str, kind: &str, generator: &str) -> Value {
    json!({"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
           "metadata": {"name": name, "namespace": ns},
           "spec": {"refreshInterval": "1h", "target": {"name": name},
                    "dataFrom": [{"sourceRef": {"generatorRef": {
                        "apiVersion": "generators.external-secrets.io/v1alpha1", "kind": kind, "name": generator}}}]}})
}

/// What upstream's controller left of these kinds in namespace `ns`.
pub struct Kinds {
    client: Client,
    ns: String,
    vault_address: String,
    cps_push_uid: Option<String>,
}

impl Kinds {
    /// Writes the stores' data and leaves the objects, under upstream's CRDs, in `ns`;
    /// `css` is the Vault ClusterSecretStore `keyward_e2e::switch` left.
    pub async fn leave(client: &Client, kc: &Path, ns: &str, vault: &VaultDev, css: &str) -> Kinds {
        let data = serde_json::to_string(&template_data()).expect("JSON");
        vault.try_cli_with_stdin(&["kv", "put", "secret/template", "-"], Some(&data)).expect("vault kv put");
        vault.cli(&["kv", "put", "secret/cps-pushed", "token=first"]);
        vault.cli(&["kv", "metadata", "put", "-custom-metadata=managed-by=external-secrets", "secret/cps-pushed"]);

        // What the stores and generators read in the namespace.
        let secret = |name: &str, data: Value| json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": ns}, "stringData": data});
        let mut objects = vec![
            secret("cps-source", json!({"token": "first"})),
            secret("mfa-seed", json!({"token": "JBSWY3DPEHPK3PXP"})),
            secret("aws-generator", json!({"key-id": "AKIDGENERATOR", "access-secret": "s3cr3t"})),
            secret("az-secret", json!({"clientid": "id", "clientsecret": "secret"})),
            secret("gcp-sa", json!({"key.json": "{}"})),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "crd-source", "namespace": ns},
                   "data": {"url": "https://db.example"}}),
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "crd-reader", "namespace": ns}}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                   "metadata": {"name": "crd-reader", "namespace": ns},
                   "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                   "metadata": {"name": "crd-reader", "namespace": ns},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "crd-reader"},
                   "subjects": [{"kind": "ServiceAccount", "name": "crd-reader", "namespace": ns}]}),
        ];

        // Generators of every kind Keyward serves, and ExternalSecrets using them.
        let aws_auth = json!({"secretRef": {"accessKeyIDSecretRef": {"name": "aws-generator", "key": "key-id"},
                                            "secretAccessKeySecretRef": {"name": "aws-generator", "key": "access-secret"}}});
        let vault_auth = json!({"tokenSecretRef": {"name": "vault-token", "key": "token"}});
        objects.extend([
            generator("Password", "password", ns, json!({"length": 24, "digits": 4, "symbols": 0, "noUpper": false, "allowRepeat": true})),
            generator("UUID", "uuid", ns, json!({})),
            generator("SSHKey", "sshkey", ns, json!({"keyType": "ed25519"})),
            generator("Fake", "fake", ns, json!({"data": {"foo": "bar"}})),
            generator("MFA", "mfa", ns, json!({"secret": {"name": "mfa-seed", "key": "token"}})),
            generator("VaultDynamicSecret", "vault", ns, json!({"method": "GET", "path": "secret/data/app",
                "provider": {"server": vault.address(), "auth": vault_auth}})),
            generator("ECRAuthorizationToken", "ecr", ns, json!({"region": "us-east-1", "auth": aws_auth})),
            generator("STSSessionToken", "sts", ns, json!({"region": "us-east-1", "auth": aws_auth})),
            generator("Webhook", "webhook", ns, json!({"url": format!("{}/v1/sys/health", vault.address()),
                "method": "GET", "result": {"jsonPath": "$"}})),
            generator("GCRAccessToken", "gcr", ns, json!({"projectID": "keyward-e2e",
                "auth": {"secretRef": {"secretAccessKeySecretRef": {"name": "gcp-sa", "key": "key.json"}}}})),
            json!({"apiVersion": "generators.external-secrets.io/v1alpha1", "kind": "ClusterGenerator",
                   "metadata": {"name": format!("{ns}-uuid")}, "spec": {"kind": "UUID", "generator": {"uuidSpec": {}}}}),
        ]);
        for (name, kind, _) in SERVED {
            let generator_name = if *kind == "ClusterGenerator" { format!("{ns}-uuid") } else { name.to_string() };
            objects.push(generator_user(&format!("gen-{name}"), ns, kind, &generator_name));
        }
        objects.push(generator_user("gen-gcr", ns, "GCRAccessToken", "gcr"));
        for file in ["generator-acr.yaml", "generator-acr-example.yaml"].iter().chain(UNSERVED_EXAMPLES) {
            objects.extend(upstream_example(file, ns));
        }

        // The stores upstream added to Vault's and Kubernetes': OpenBao (Vault's dev server
        // speaks its API) and a `crd` store of ConfigMaps, with ExternalSecrets reading them.
        let store = |name: &str, provider: Value| {
            json!({"apiVersion": "external-secrets.io/v1", "kind": "SecretStore",
                   "metadata": {"name": name, "namespace": ns}, "spec": {"provider": provider}})
        };
        let reader = |name: &str, store: &str, key: &str, property: &str| {
            json!({"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
                   "metadata": {"name": name, "namespace": ns},
                   "spec": {"refreshInterval": "15s", "secretStoreRef": {"kind": "SecretStore", "name": store},
                            "target": {"name": name},
                            "data": [{"secretKey": "value", "remoteRef": {"key": key, "property": property}}]}})
        };
        objects.extend([
            store(
                "bao",
                json!({"openBao": {"server": vault.address(), "path": "secret", "version": "v2",
                                            "auth": {"tokenSecretRef": {"name": "vault-token", "key": "token"}}}}),
            ),
            store(
                "config-maps",
                json!({"crd": {"auth": {"serviceAccount": {"name": "crd-reader"}},
                                                "resource": {"group": "", "version": "v1", "kind": "ConfigMap"}}}),
            ),
            reader("from-bao", "bao", "app", "password"),
            reader("from-crd", "config-maps", "crd-source", "data.url"),
        ]);

        // A template calling every repeatable function, through the Vault ClusterSecretStore.
        let template: serde_json::Map<String, Value> = CALLS.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
        objects.push(json!({"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
            "metadata": {"name": "templated", "namespace": ns},
            "spec": {"refreshInterval": "1h", "secretStoreRef": {"kind": "ClusterSecretStore", "name": css},
                     "target": {"name": "templated", "template": {"engineVersion": "v2", "data": template}},
                     "dataFrom": [{"extract": {"key": "template"}}]}}));
        // One JSON object a line: kubectl reads a stream of JSON documents, not YAML separators.
        let manifest: Vec<String> = objects.iter().map(Value::to_string).collect();
        apply(kc, &manifest.join("\n"));

        // A generic target: the ConfigMap upstream wrote for its ExternalSecret.
        let ess = Api::namespaced_with(client.clone(), ns, &resource("ExternalSecret", "v1"));
        let es = create_with_status(&ess, json!({"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
            "metadata": {"name": "to-config-map"},
            "spec": {"refreshInterval": "15s", "secretStoreRef": {"kind": "ClusterSecretStore", "name": css},
                     "target": {"name": "app-config", "creationPolicy": "Owner",
                                "manifest": {"apiVersion": "v1", "kind": "ConfigMap"}},
                     "data": [{"secretKey": "password", "remoteRef": {"key": "app", "property": "password"}}]}}),
            json!({"conditions": [{"type": "Ready", "status": "True", "reason": "SecretSynced", "message": "secret synced",
                                   "lastTransitionTime": "2026-12-01T10:00:00Z"}],
                   "refreshTime": "2026-12-01T10:00:00Z", "syncedResourceVersion": "1-0f3c2b"})).await;
        apply(
            kc,
            &json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "app-config", "namespace": ns,
                         "labels": {"reconcile.external-secrets.io/managed": "true"},
                         "ownerReferences": [{"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
                             "name": es.name_any(), "uid": es.uid().unwrap_or_default(), "controller": true,
                             "blockOwnerDeletion": true}]},
            "data": {"password": "vault-one"}})
            .to_string(),
        );

        // A ClusterPushSecret and the PushSecret it made (controller owner), as upstream left them.
        let cps_name = format!("{ns}-cps");
        let push_ref =
            json!({"match": {"secretKey": "token", "remoteRef": {"remoteKey": "cps-pushed", "property": "token"}}});
        let push_spec = json!({"refreshInterval": "15s", "deletionPolicy": "Delete",
            "secretStoreRefs": [{"name": css, "kind": "ClusterSecretStore"}],
            "selector": {"secret": {"name": "cps-source"}}, "data": [push_ref]});
        let cpss = Api::all_with(client.clone(), &resource("ClusterPushSecret", "v1alpha1"));
        let cps = create_with_status(
            &cpss,
            json!({"apiVersion": "external-secrets.io/v1alpha1", "kind": "ClusterPushSecret",
            "metadata": {"name": cps_name},
            "spec": {"pushSecretName": "cps-push", "refreshTime": "1m",
                     "namespaceSelectors": [{"matchLabels": {"kubernetes.io/metadata.name": ns}}],
                     "pushSecretSpec": push_spec}}),
            json!({"pushSecretName": "cps-push", "provisionedNamespaces": [ns],
                   "conditions": [{"type": "Ready", "status": "True"}]}),
        )
        .await;
        let pushes = Api::namespaced_with(client.clone(), ns, &resource("PushSecret", "v1alpha1"));
        let made = create_with_status(&pushes, json!({"apiVersion": "external-secrets.io/v1alpha1", "kind": "PushSecret",
            "metadata": {"name": "cps-push", "ownerReferences": [{"apiVersion": "external-secrets.io/v1alpha1",
                "kind": "ClusterPushSecret", "name": cps_name, "uid": cps.uid(), "controller": true, "blockOwnerDeletion": true}]},
            "spec": push_spec}),
            json!({"conditions": [{"type": "Ready", "status": "True", "reason": "Synced", "message": "PushSecret synced successfully"}],
                   "refreshTime": "2026-12-01T10:00:00Z", "syncedResourceVersion": "1-aa",
                   "syncedPushSecrets": {format!("ClusterSecretStore/{css}"): {"cps-pushed/token": push_ref}}})).await;

        Kinds { client: client.clone(), ns: ns.to_string(), vault_address: vault.address(), cps_push_uid: made.uid() }
    }

    /// The cluster-scoped objects left, to delete after the namespace.
    pub fn cluster_scoped(&self) -> Vec<(&'static str, String)> {
        vec![("clusterpushsecret", format!("{}-cps", self.ns)), ("clustergenerator", format!("{}-uuid", self.ns))]
    }

    /// Checks, once Keyward runs and Vault's `secret/app` holds `vault-two`, that everything
    /// served is served and the unserved generators say so.
    pub async fn assert_served(&self, vault: &VaultDev, wait: Duration) {
        assert_eq!(vault.address(), self.vault_address);
        let ns = self.ns.as_str();
        let ess: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), ns, &resource("ExternalSecret", "v1"));
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), ns);
        let value = |secret: &Secret, key: &str| secret.data.as_ref()?.get(key).map(|v| v.0.clone());

        // The generic target follows Vault's rotation.
        let config_maps: Api<ConfigMap> = Api::namespaced(self.client.clone(), ns);
        eventually("the ConfigMap target holds vault-two", wait, || async {
            let cm = config_maps.get("app-config").await.ok()?;
            (cm.data?.get("password")? == "vault-two").then_some(())
        })
        .await;
        // The OpenBao and crd stores.
        for (name, want) in [("from-bao", "vault-two"), ("from-crd", "https://db.example")] {
            eventually(&format!("{name} holds {want}"), wait, || async {
                (value(&secrets.get(name).await.ok()?, "value")? == want.as_bytes()).then_some(())
            })
            .await;
        }
        // The template: every call rendered as the engine renders it here.
        let want = expected_render();
        let templated =
            eventually("the templated Secret", wait, || async { secrets.get("templated").await.ok() }).await;
        let got = templated.data.unwrap_or_default();
        let differ: Vec<&String> = want.keys().filter(|k| got.get(*k).map(|v| &v.0) != want.get(*k)).collect();
        assert!(differ.is_empty(), "template calls rendered otherwise in the cluster: {differ:?}");

        // Every served generator fills its Secret.
        for (name, kind, key) in SERVED {
            let es = format!("gen-{name}");
            eventually(&format!("{es} ({kind}) holds {key}"), wait, || async {
                value(&secrets.get(&es).await.ok()?, key).filter(|v| !v.is_empty())
            })
            .await;
        }
        for (es, kind) in SERVED_ELSEWHERE {
            let message = eventually(&format!("{es} ({kind}) fails at its cloud"), wait, || async {
                let (status, _, message) = ready(&ess.get(es).await.ok()?)?;
                (status == "False" && !message.is_empty()).then_some(message)
            })
            .await;
            assert!(!message.contains("not served"), "{kind} is served: {message}");
        }
        // The unserved ones say which kind Keyward does not serve, and write nothing.
        for (es, kind) in UNSERVED_USES {
            let message = eventually(&format!("{es} refused"), wait, || async {
                let (status, _, message) = ready(&ess.get(es).await.ok()?)?;
                (status == "False" && message.contains("is not served by Keyward")).then_some(message)
            })
            .await;
            assert!(message.contains(&format!("generator kind {kind:?} is not served by Keyward")), "{message}");
        }

        // The ClusterPushSecret keeps its PushSecret, which keeps owning what it pushed.
        let pushes: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), ns, &resource("PushSecret", "v1alpha1"));
        eventually("the ClusterPushSecret's PushSecret is Ready under Keyward", wait, || async {
            let (status, _, message) = ready(&pushes.get("cps-push").await.ok()?)?;
            (status == "True" && message != "PushSecret synced successfully").then_some(())
        })
        .await;
        let made = pushes.get("cps-push").await.expect("the ClusterPushSecret's PushSecret");
        assert_eq!(made.uid(), self.cps_push_uid, "the ClusterPushSecret's PushSecret stays");
        let source: Secret = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "cps-source"}, "stringData": {"token": "second"}}))
        .expect("Secret");
        secrets
            .patch(
                "cps-source",
                &kube::api::PatchParams::apply("keyward-e2e").force(),
                &kube::api::Patch::Apply(&source),
            )
            .await
            .expect("update the pushed source");
        eventually("the ClusterPushSecret's value follows its source", wait, || async {
            let v = vault.json(&["kv", "get"], &["secret/cps-pushed"]);
            (v["data"]["data"]["token"] == "second").then_some(())
        })
        .await;
    }
}

/// The generator kinds `keyward migrate`'s text report names as not served.
pub fn named_unserved_kinds(report: &str) -> BTreeSet<String> {
    report
        .lines()
        .skip_while(|l| !l.starts_with("Generators and generator references Keyward does not serve"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_once(" (")?.1.split_once("): ").map(|(kind, _)| kind.to_string()))
        .collect()
}

/// The generator kinds Keyward does not serve.
pub fn unserved_kinds() -> BTreeSet<String> {
    GeneratorKind::ALL.iter().filter(|k| !k.served()).map(|k| k.to_string()).collect()
}

#[test]
fn the_unserved_uses_cover_every_unserved_kind() {
    let used: BTreeSet<String> = UNSERVED_USES.iter().map(|(_, k)| k.to_string()).collect();
    assert_eq!(used, unserved_kinds());
    let served: BTreeSet<&str> = SERVED.iter().chain(&[("", "", "")]).map(|(_, k, _)| *k).collect();
    for kind in GeneratorKind::ALL.iter().filter(|k| k.served()) {
        let elsewhere = SERVED_ELSEWHERE.iter().any(|(_, k)| *k == kind.as_str());
        assert!(served.contains(kind.as_str()) || elsewhere, "no generator of served kind {kind}");
    }
    let report = "Generators and generator references Keyward does not serve (see docs/generators.md):\n  \
                  ExternalSecret a/b: spec.dataFrom[0].sourceRef.generatorRef (Grafana): not served\n  \
                  Grafana a/g: kind (Grafana): not served\nObjects Keyward's admission rules refuse now:\n  \
                  X a/c: (Quay): no\n";
    assert_eq!(named_unserved_kinds(report), BTreeSet::from(["Grafana".to_string()]));
}
