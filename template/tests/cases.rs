//! Table of template cases with their expected output (or error message).

use std::collections::BTreeMap;

use keyward_template::{Limits, render};

fn data() -> BTreeMap<String, Vec<u8>> {
    [
        ("user", "admin"),
        ("pass", "p@ss w0rd"),
        ("host", "db.example"),
        ("port", "5432"),
        ("json", r#"{"a":1,"b":[1,2],"c":{"d":"x"},"f":1.5,"big":1000000}"#),
        ("yaml", "a: 1\nb: two\nc:\n  - x\n  - y\n"),
        ("csv", "a,b,c"),
        ("api-key", "k-123"),
        ("empty", ""),
        ("spaces", "  padded  "),
        ("b64", "aGVsbG8="),
        ("zero", "0"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
    .collect()
}

fn run(src: &str) -> Result<String, String> {
    render(&[("t", src)], &data(), &Limits::default())
        .map(|m| String::from_utf8_lossy(&m["t"]).into_owned())
        .map_err(|e| e.to_string())
}

/// (template, expected output)
const OK: &[(&str, &str)] = &[
    // text, actions, comments, whitespace control
    ("plain", "plain"),
    ("{{ .user }}", "admin"),
    ("{{.user}}:{{.pass}}", "admin:p@ss w0rd"),
    ("a {{- /* comment */ -}} b", "ab"),
    ("a {{/* comment */}} b", "a  b"),
    ("x  \n  {{- .user -}}  \n  y", "xadminy"),
    ("x {{- .user }} y", "xadmin y"),
    ("x {{ .user -}} y", "x adminy"),
    ("{{ 3 }}{{- 4 }}", "34"),
    ("{{ -3 }}", "-3"),
    ("{{ 0x1F }} {{ 0o17 }} {{ 1_000 }} {{ 'a' }} {{ 1.5 }} {{ 1e6 }}", "31 15 1000 97 1.5 1e+06"),
    ("{{ `raw\\n` }}", "raw\\n"),
    ("{{ \"esc\\t\\\"q\\\"\" }}", "esc\t\"q\""),
    ("{{ true }} {{ false }}", "true false"),
    ("{{ index . \"api-key\" }}", "k-123"),
    ("{{ $.user }}", "admin"),
    // variables
    ("{{ $x := .user }}{{ $x }}", "admin"),
    ("{{ $x := 1 }}{{ $x = 2 }}{{ $x }}", "2"),
    ("{{ $x := 1 }}{{ if true }}{{ $x = 3 }}{{ end }}{{ $x }}", "3"),
    // pipelines
    ("{{ .user | upper }}", "ADMIN"),
    ("{{ .user | upper | printf \"%s!\" }}", "ADMIN!"),
    ("{{ (printf \"%s-%s\" .user .host) | len }}", "16"),
    ("{{ (fromJson .json).c.d }}", "x"),
    // if / else if / else
    ("{{ if .user }}yes{{ else }}no{{ end }}", "yes"),
    ("{{ if .empty }}yes{{ else }}no{{ end }}", "no"),
    ("{{ if eq .user \"x\" }}1{{ else if eq .user \"admin\" }}2{{ else }}3{{ end }}", "2"),
    ("{{ if eq .user \"x\" }}1{{ else if eq .user \"y\" }}2{{ else }}3{{ end }}", "3"),
    ("{{ if and .user .empty }}a{{ else }}b{{ end }}", "b"),
    ("{{ if or .empty .user }}a{{ else }}b{{ end }}", "a"),
    ("{{ and 1 0 2 }} {{ or 0 \"\" 3 }} {{ or 0 \"\" }}", "0 3 "),
    ("{{ if not .empty }}ok{{ end }}", "ok"),
    ("{{ if $v := .user }}{{ $v }}{{ end }}", "admin"),
    // with
    ("{{ with .user }}{{ . }}{{ end }}", "admin"),
    ("{{ with .empty }}x{{ else }}none{{ end }}", "none"),
    ("{{ with .empty }}x{{ else with .user }}{{ . }}{{ end }}", "admin"),
    // range
    ("{{ range splitList \",\" .csv }}[{{ . }}]{{ end }}", "[a][b][c]"),
    ("{{ range $i, $e := splitList \",\" .csv }}{{ $i }}={{ $e }};{{ end }}", "0=a;1=b;2=c;"),
    ("{{ range $k, $v := dict \"b\" 2 \"a\" 1 \"c\" 3 }}{{ $k }}{{ $v }}{{ end }}", "a1b2c3"),
    ("{{ range list }}x{{ else }}empty{{ end }}", "empty"),
    ("{{ range 3 }}{{ . }}{{ end }}", "012"),
    ("{{ range $i, $e := list 1 2 3 4 }}{{ if eq $e 3 }}{{ break }}{{ end }}{{ $e }}{{ end }}", "12"),
    ("{{ range list 1 2 3 }}{{ if eq . 2 }}{{ continue }}{{ end }}{{ . }}{{ end }}", "13"),
    ("{{ range $k, $v := . }}{{ if hasPrefix \"p\" $k }}{{ $k }};{{ end }}{{ end }}", "pass;port;"),
    ("{{ range (fromYaml .yaml).c }}{{ . }}{{ end }}", "xy"),
    ("{{ range $x := list 1 2 }}{{ $x }}{{ $.user }}{{ end }}", "1admin2admin"),
    // define / template / block
    ("{{ define \"a\" }}<{{ . }}>{{ end }}{{ template \"a\" .user }}", "<admin>"),
    (
        "{{ define \"in\" }}[{{ . }}]{{ end }}{{ define \"out\" }}{{ template \"in\" . }}{{ template \"in\" . }}{{ end }}{{ template \"out\" \"z\" }}",
        "[z][z]",
    ),
    ("{{ define \"d\" }}{{ $.user }}{{ end }}{{ template \"d\" . }}", "admin"),
    (
        "{{ define \"n\" }}{{ if gt . 0 }}{{ . }}{{ template \"n\" (sub . 1) }}{{ end }}{{ end }}{{ template \"n\" 3 }}",
        "321",
    ),
    ("{{ block \"b\" .user }}({{ . }}){{ end }}", "(admin)"),
    ("{{ template \"x\" }}{{ define \"x\" }}nil:{{ . }}{{ end }}", "nil:<no value>"),
    // comparisons
    (
        "{{ eq 1 1 }} {{ eq \"a\" \"b\" \"a\" }} {{ ne 1 2 }} {{ lt 1 2 }} {{ le 2 2 }} {{ gt \"b\" \"a\" }} {{ ge 1 2 }}",
        "true true true true true true false",
    ),
    ("{{ eq .port \"5432\" }}", "true"),
    // printf and friends
    ("{{ printf \"%s:%d\" .host 5432 }}", "db.example:5432"),
    ("{{ printf \"%v %v %v\" 1 \"a\" true }}", "1 a true"),
    ("{{ printf \"%q\" .pass }}", "\"p@ss w0rd\""),
    ("{{ printf \"%x %X %x\" 255 255 \"hi\" }}", "ff FF 6869"),
    ("{{ printf \"%5d|%-5s|%05d|%.2f|%t\" 42 \"ab\" 42 3.14159 true }}", "   42|ab   |00042|3.14|true"),
    ("{{ printf \"%d\" \"x\" }}", "%!d(string=x)"),
    ("{{ printf \"%s %s\" \"a\" }}", "a %!s(MISSING)"),
    ("{{ printf \"%d%%\" 5 }}", "5%"),
    // checked against Go's text/template
    ("{{ 123456.0 }} {{ 0.00001 }} {{ printf \"%v\" 1.0 }} {{ printf \"%g\" 1e21 }}", "123456 1e-05 1 1e+21"),
    ("{{ printf \"%q\" \"a\\tb\" }}", "\"a\\tb\""),
    ("{{ print \"a\" 1 2 \"b\" }}", "a1 2b"),
    ("{{ println \"a\" 1 }}", "a 1\n"),
    ("{{ len .user }} {{ len (list 1 2) }} {{ len (dict \"a\" 1) }}", "5 2 1"),
    ("{{ index (list \"a\" \"b\") 1 }} {{ index (dict \"k\" (list 1 2)) \"k\" 0 }}", "b 1"),
    ("{{ slice \"abcdef\" 1 3 }} {{ slice (list 1 2 3) 1 }}", "bc [2 3]"),
    ("{{ html \"<a href='x'>\" }}", "&lt;a href=&#39;x&#39;&gt;"),
    ("{{ urlquery \"a b&c\" }}", "a+b%26c"),
    ("{{ js \"it's <b>\" }}", "it\\'s \\u003Cb\\u003E"),
    // strings
    (
        "{{ upper \"abc\" }} {{ lower \"ABC\" }} {{ title \"hello wide world\" }} {{ untitle \"Hello World\" }}",
        "ABC abc Hello Wide World hello world",
    ),
    (
        "[{{ trim .spaces }}] [{{ trimAll \"$\" \"$$x$\" }}] [{{ trimPrefix \"db.\" .host }}] [{{ trimSuffix \".example\" .host }}]",
        "[padded] [x] [example] [db]",
    ),
    ("{{ replace \".\" \"_\" .host }}", "db_example"),
    ("{{ quote .user 1 }} {{ squote .user }}", "\"admin\" \"1\" 'admin'"),
    ("{{ indent 2 \"a\\nb\" }}|{{ nindent 2 \"c\" }}", "  a\n  b|\n  c"),
    ("{{ contains \"mi\" .user }} {{ hasPrefix \"ad\" .user }} {{ hasSuffix \"x\" .user }}", "true true false"),
    ("{{ (split \",\" .csv)._1 }} {{ splitList \",\" .csv }} {{ (splitn \",\" 2 .csv)._1 }}", "b [a b c] b,c"),
    ("{{ join \"-\" (splitList \",\" .csv) }}", "a-b-c"),
    ("{{ repeat 3 \"ab\" }}", "ababab"),
    ("{{ substr 1 3 .user }} {{ substr 2 -1 .user }} {{ trunc 3 .user }} {{ trunc -2 .user }}", "dm min adm in"),
    ("{{ abbrev 5 \"hello world\" }} {{ nospace \" a b \" }} {{ cat \"a\" nil \"b\" }}", "he... ab a b"),
    ("{{ .empty | default \"fallback\" }} {{ .user | default \"fallback\" }}", "fallback admin"),
    ("{{ empty .empty }} {{ empty .user }} {{ empty 0 }} {{ empty (list) }}", "true false true true"),
    ("{{ coalesce .empty \"\" .user }}", "admin"),
    ("{{ ternary \"y\" \"n\" true }} {{ true | ternary \"y\" \"n\" }}", "y y"),
    ("{{ required \"need user\" .user }}", "admin"),
    // encoding
    ("{{ b64enc .user }} {{ b64dec .b64 }}", "YWRtaW4= hello"),
    (
        "{{ dict \"b\" 1 \"a\" (list 1 \"x\") \"h\" \"<&>\" | toJson }}",
        "{\"a\":[1,\"x\"],\"b\":1,\"h\":\"\\u003c\\u0026\\u003e\"}",
    ),
    ("{{ dict \"h\" \"<\" | toRawJson }}", "{\"h\":\"<\"}"),
    ("{{ dict \"a\" (list 1) | toPrettyJson }}", "{\n  \"a\": [\n    1\n  ]\n}"),
    (
        "{{ (fromJson .json).a }} {{ (fromJson .json).f }} {{ (fromJson .json).big }} {{ (fromJson .json).b }}",
        "1 1.5 1e+06 [1 2]",
    ),
    ("{{ fromJson .json | toJson }}", "{\"a\":1,\"b\":[1,2],\"big\":1000000,\"c\":{\"d\":\"x\"},\"f\":1.5}"),
    ("{{ (fromYaml .yaml).b }} {{ add (fromYaml .yaml).a 1 }}", "two 2"),
    ("{{ dict \"user\" .user \"port\" 5432 \"list\" (list \"a\") | toYaml }}", "list:\n- a\nport: 5432\nuser: admin"),
    ("{{ fromJson .json | toYaml }}", "a: 1\nb:\n- 1\n- 2\nbig: 1000000\nc:\n  d: x\nf: 1.5"),
    ("{{ toString 12 }} {{ toString .user }}", "12 admin"),
    // lists and dicts
    ("{{ list 1 \"a\" }} {{ list }}", "[1 a] []"),
    (
        "{{ $d := dict \"a\" 1 }}{{ $_ := set $d \"b\" 2 }}{{ $d }} {{ get $d \"b\" }} [{{ get $d \"zz\" }}]",
        "map[a:1 b:2] 2 []",
    ),
    (
        "{{ $d := dict \"a\" 1 \"b\" 2 }}{{ $_ := unset $d \"a\" }}{{ keys $d }} {{ hasKey $d \"b\" }} {{ hasKey $d \"a\" }}",
        "[b] true false",
    ),
    ("{{ keys (dict \"z\" 1 \"a\" 2) }} {{ values (dict \"z\" 1 \"a\" 2) }}", "[a z] [2 1]"),
    ("{{ pluck \"a\" (dict \"a\" 1) (dict \"b\" 2) (dict \"a\" 3) }}", "[1 3]"),
    ("{{ pick (dict \"a\" 1 \"b\" 2) \"a\" }} {{ omit (dict \"a\" 1 \"b\" 2) \"a\" }}", "map[a:1] map[b:2]"),
    (
        "{{ merge (dict \"a\" 1 \"n\" (dict \"x\" 1)) (dict \"a\" 2 \"b\" 3 \"n\" (dict \"y\" 2)) }}",
        "map[a:1 b:3 n:map[x:1 y:2]]",
    ),
    ("{{ mergeOverwrite (dict \"a\" 1) (dict \"a\" 2 \"b\" 3) }}", "map[a:2 b:3]"),
    (
        "{{ first (list 1 2 3) }} {{ last (list 1 2 3) }} {{ rest (list 1 2 3) }} {{ initial (list 1 2 3) }}",
        "1 3 [2 3] [1 2]",
    ),
    ("{{ uniq (list 1 2 1 \"a\" \"a\") }} {{ sortAlpha (list \"b\" \"c\" \"a\") }}", "[1 2 a] [a b c]"),
    (
        "{{ append (list 1) 2 }} {{ prepend (list 1) 0 }} {{ concat (list 1) (list 2 3) }} {{ reverse (list 1 2) }}",
        "[1 2] [0 1] [1 2 3] [2 1]",
    ),
    ("{{ compact (list 1 \"\" 0 \"a\") }} {{ has 2 (list 1 2) }} {{ without (list 1 2 3) 2 }}", "[1 a] true [1 3]"),
    ("{{ $d := dict \"a\" 1 }}{{ $c := deepCopy $d }}{{ $_ := set $c \"a\" 2 }}{{ $d.a }}{{ $c.a }}", "12"),
    ("{{ until 3 }}", "[0 1 2]"),
    // hashes
    ("{{ sha1sum \"abc\" }}", "a9993e364706816aba3e25717850c26c9cd0d89d"),
    ("{{ sha256sum \"abc\" }}", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
    // regex
    ("{{ regexMatch \"^[a-z]+$\" .user }} {{ regexMatch \"^[0-9]+$\" .user }}", "true false"),
    ("{{ regexFind \"[0-9]+\" \"ab123cd45\" }} {{ regexFindAll \"[0-9]+\" \"ab123cd45\" -1 }}", "123 [123 45]"),
    ("{{ regexReplaceAll \"(\\\\w+)@(\\\\w+)\" \"me@host\" \"${2}:${1}\" }}", "host:me"),
    ("{{ regexReplaceAllLiteral \"a\" \"banana\" \"$1\" }}", "b$1n$1n$1"),
    ("{{ regexSplit \",\" .csv -1 }} {{ regexQuoteMeta \"a.b\" }}", "[a b c] a\\.b"),
    // numbers
    ("{{ add 1 2 3 }} {{ add1 1 }} {{ sub 5 2 }} {{ mul 2 3 4 }} {{ div 7 2 }} {{ mod 7 2 }}", "6 2 3 24 3 1"),
    ("{{ max 1 5 3 }} {{ min 4 2 8 }} {{ atoi .port }} {{ atoi \"x\" }} {{ add .port 1 }}", "5 2 5432 0 5433"),
    ("{{ int \"42\" }} {{ float64 \"1.5\" }} {{ int64 2.9 }}", "42 1.5 2"),
];

#[test]
fn table_of_cases() {
    let mut failures = Vec::new();
    for (src, want) in OK {
        match run(src) {
            Ok(got) if got == *want => {}
            Ok(got) => failures.push(format!("{src}\n   want {want:?}\n    got {got:?}")),
            Err(e) => failures.push(format!("{src}\n   want {want:?}\n  error {e}")),
        }
    }
    assert!(failures.is_empty(), "{} failing cases:\n{}", failures.len(), failures.join("\n"));
}

/// (template, substring the error message must contain)
const ERR: &[(&str, &str)] = &[
    ("{{ .missing }}", "template \"t\" line 1: map has no entry for key \"missing\""),
    ("line1\nline2 {{ .user }}\n{{ .nope }}", "line 3: map has no entry for key \"nope\""),
    ("{{ index . \"nope\" }}", "map has no entry for key \"nope\""),
    ("{{ (fromJson .json).c.zz }}", "map has no entry for key \"zz\""),
    ("{{ if .missing }}x{{ end }}", "map has no entry for key \"missing\""),
    (
        "{{ define \"d\" }}\n{{ .gone }}{{ end }}{{ template \"d\" . }}",
        "template \"d\" line 2: map has no entry for key \"gone\"",
    ),
    ("{{ .user.x }}", "can't evaluate field x in type string"),
    ("{{ nosuch 1 }}", "parse error: function \"nosuch\" not defined"),
    ("{{ if true }}x", "unexpected EOF"),
    ("{{ end }}", "unexpected {{end}}"),
    ("{{ else }}", "unexpected {{else}}"),
    ("{{ .user ", "unclosed action"),
    ("{{ \"abc }}", "unterminated quoted string"),
    ("{{ $x }}", "undefined variable \"$x\""),
    ("{{ break }}", "{{break}} outside {{range}}"),
    ("{{ (1 }}", "unclosed left paren"),
    ("{{ .user 1 }}", "can't give argument to non-function .user"),
    ("{{ /* open }}", "unclosed comment"),
    ("{{ template \"none\" }}", "no such template \"none\""),
    ("{{ div 1 0 }}", "error calling div: integer divide by zero"),
    ("{{ b64dec \"%%%\" }}", "error calling b64dec: illegal base64 data"),
    ("{{ fromJson \"{\" }}", "error calling fromJson: invalid JSON"),
    ("{{ regexMatch \"(\" \"x\" }}", "error calling regexMatch: invalid regular expression"),
    ("{{ required \"password is required\" .empty }}", "error calling required: password is required"),
    ("{{ fail \"stop\" }}", "error calling fail: stop"),
    ("{{ eq (list 1) 1 }}", "non-comparable type"),
    ("{{ lt 1 \"a\" }}", "incompatible types for comparison"),
    ("{{ range .user }}{{ end }}", "range can't iterate over admin"),
    ("{{ len 3 }}", "error calling len: len of type int"),
    ("{{ index (list 1) 5 }}", "index out of range: 5"),
    ("{{ upper }}", "error calling upper: wrong number of args: got 0 want 1"),
    ("{{ htpasswd \"a:b\" \"x\" }}", "invalid username: a:b"),
    ("{{ filterPEM \"CERTIFICATE\" \"junk\" }}", "no PEM data found"),
    ("{{ pkcs12key \"not a keystore\" }}", "cannot read PKCS#12 data"),
    ("{{ jwkPublicKeyPem \"{}\" }}", "unsupported JWK key type"),
    ("{{ 1 | 2 }}", "can't give argument to non-function 2"),
    ("{{ $x := 1 }}{{ $y = 2 }}", "undefined variable \"$y\""),
];

#[test]
fn error_messages() {
    let mut failures = Vec::new();
    for (src, want) in ERR {
        match run(src) {
            Ok(got) => failures.push(format!("{src}\n   want error containing {want:?}\n    got output {got:?}")),
            Err(e) if e.contains(want) => {}
            Err(e) => failures.push(format!("{src}\n   want error containing {want:?}\n    got {e}")),
        }
    }
    assert!(failures.is_empty(), "{} failing cases:\n{}", failures.len(), failures.join("\n"));
}
