//! The API the reconciler calls: render, KeysAndValues, labels/annotations, rewrite transform.

use std::collections::BTreeMap;

use keyward_template::{
    ErrorKind, Limits, Scope, Template, Value, render, render_keys_and_values, render_scoped, render_strings,
    transform_key,
};

fn data() -> BTreeMap<String, Vec<u8>> {
    BTreeMap::from([
        ("user".to_string(), b"app".to_vec()),
        ("pass".to_string(), b"pw".to_vec()),
        ("host".to_string(), b"db".to_vec()),
    ])
}

#[test]
fn render_several_templates() {
    let out = render(
        &[("url", "postgres://{{ .user }}:{{ .pass }}@{{ .host }}"), ("user", "{{ .user | upper }}")],
        &data(),
        &Limits::default(),
    )
    .expect("renders");
    assert_eq!(out["url"], b"postgres://app:pw@db");
    assert_eq!(out["user"], b"APP");
    assert_eq!(out.len(), 2);
}

#[test]
fn error_names_template_and_line() {
    let err = render(&[("ok", "x"), ("config", "a\nb\n{{ .password }}")], &data(), &Limits::default())
        .expect_err("missing key");
    assert_eq!(err.template, "config");
    assert_eq!(err.line, 3);
    assert_eq!(err.kind, ErrorKind::MissingKey { key: "password".into() });
    assert_eq!(err.to_string(), "template \"config\" line 3: map has no entry for key \"password\"");
}

#[test]
fn keys_and_values() {
    let src = "{{ .user }}: {{ .pass }}\n{{ .host }}-port: 5432\nflag: true\nempty:\n";
    let out = render_keys_and_values("tpl", src, &data(), &Limits::default()).expect("renders");
    assert_eq!(
        out,
        BTreeMap::from([
            ("app".to_string(), b"pw".to_vec()),
            ("db-port".to_string(), b"5432".to_vec()),
            ("flag".to_string(), b"true".to_vec()),
            ("empty".to_string(), Vec::new()),
        ])
    );
    let err = render_keys_and_values("tpl", "a:\n  b: c\n", &data(), &Limits::default()).expect_err("nested");
    assert!(err.to_string().contains("value of \"a\" is not a scalar"), "{err}");
    let err = render_keys_and_values("tpl", "- a\n", &data(), &Limits::default()).expect_err("list");
    assert!(err.to_string().contains("not a YAML map"), "{err}");
    let empty = render_keys_and_values("tpl", "{{/* nothing */}}", &data(), &Limits::default()).expect("empty");
    assert!(empty.is_empty());
}

#[test]
fn scoped_rendering() {
    let l = Limits::default();
    let values = render_scoped(Scope::Values, &[("k", "{{ .user }}")], &data(), &l).expect("values");
    assert_eq!(values["k"], b"app");
    let kv = render_scoped(Scope::KeysAndValues, &[("a", "x: 1\ny: 2"), ("b", "y: 3")], &data(), &l).expect("kv");
    assert_eq!(kv["x"], b"1");
    assert_eq!(kv["y"], b"3");
    let labels = render_strings(Scope::Values, &[("team", "{{ .user }}")], &data(), &l).expect("labels");
    assert_eq!(labels["team"], "app");
    let bin = BTreeMap::from([("b".to_string(), vec![0xff, 0xfe])]);
    let err = render_strings(Scope::Values, &[("x", "{{ .b }}")], &bin, &l).expect_err("not utf-8");
    assert!(err.to_string().contains("not UTF-8"), "{err}");
}

#[test]
fn rewrite_transform_sees_value() {
    let l = Limits::default();
    assert_eq!(transform_key("{{ .value | upper }}", "db-password", &l).expect("ok"), "DB-PASSWORD");
    assert_eq!(transform_key("app_{{ .value | replace \"-\" \"_\" }}", "a-b", &l).expect("ok"), "app_a_b");
    let err = transform_key("{{ .key }}", "a", &l).expect_err("missing");
    assert!(err.to_string().contains("map has no entry for key \"key\""), "{err}");
}

#[test]
fn parse_once_execute_many() {
    let l = Limits::default();
    let t = Template::parse("t", "{{ define \"x\" }}{{ . }}{{ end }}{{ template \"x\" .a }}", &l).expect("parses");
    assert_eq!(t.name(), "t");
    assert_eq!(t.defined().collect::<Vec<_>>(), vec!["x"]);
    for v in ["1", "2"] {
        let data = Value::map(BTreeMap::from([("a".to_string(), Value::str(v))]));
        assert_eq!(t.execute(&data, &l).expect("runs"), v.as_bytes());
    }
}

#[test]
fn defines_do_not_leak_between_templates() {
    let err =
        render(&[("a", "{{ define \"d\" }}x{{ end }}"), ("b", "{{ template \"d\" }}")], &data(), &Limits::default())
            .expect_err("separate");
    assert_eq!(err.template, "b");
}
