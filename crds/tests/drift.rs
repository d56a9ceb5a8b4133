//! The drift check catches YAML that no longer matches the types. (That the committed YAML is current is checked where the whole table of provider kinds is
//! known: providers/registry/tests/drift.rs.)

use keyward_crds::generate::{GenerateError, Layout, check_all, write_all};
use keyward_crds::registry::BUILTIN_KINDS;

#[test]
fn drift_is_detected_when_a_type_changes_without_regenerating() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_all(dir.path(), Layout::Plain, &BUILTIN_KINDS).expect("generate");
    check_all(dir.path(), Layout::Plain, &BUILTIN_KINDS).expect("freshly generated files are up to date");

    // Simulate a type change: the committed file no longer matches what the types generate.
    let file = dir.path().join("externalsecrets.external-secrets.io.yaml");
    let text = std::fs::read_to_string(&file).expect("read");
    std::fs::write(&file, text.replace("refreshInterval", "refreshEvery")).expect("write");
    // A kind that was removed from the code leaves a stale generated file behind.
    let stale = dir.path().join("oldkinds.external-secrets.io.yaml");
    std::fs::write(&stale, format!("{}kind: CustomResourceDefinition\n", keyward_crds::generate::HEADER)).expect("w");
    // And one file went missing.
    std::fs::remove_file(dir.path().join("pushsecrets.external-secrets.io.yaml")).expect("rm");

    match check_all(dir.path(), Layout::Plain, &BUILTIN_KINDS) {
        Err(GenerateError::Drift(files)) => {
            let joined = files.join("\n");
            assert!(joined.contains("externalsecrets.external-secrets.io.yaml (changed)"), "{joined}");
            assert!(joined.contains("oldkinds.external-secrets.io.yaml (stale)"), "{joined}");
            assert!(joined.contains("pushsecrets.external-secrets.io.yaml (missing)"), "{joined}");
            assert_eq!(files.len(), 3, "{joined}");
        }
        other => panic!("expected drift, got {other:?}"),
    }
    write_all(dir.path(), Layout::Plain, &BUILTIN_KINDS).expect("regenerate");
    assert!(!stale.exists(), "regenerating removes stale files");
    check_all(dir.path(), Layout::Plain, &BUILTIN_KINDS).expect("regenerated files are up to date");
}

#[test]
fn chart_templates_are_switchable_and_kept_on_uninstall() {
    let files = keyward_crds::generate::render_all(Layout::HelmTemplate, &BUILTIN_KINDS).expect("render");
    // The partial naming the provider config resources for the webhook rules is not a CRD.
    for (name, text) in files.into_iter().filter(|(name, _)| name.ends_with(".yaml")) {
        let body = text.strip_prefix(keyward_crds::generate::HEADER).expect("header first");
        assert!(body.starts_with("{{- if .Values.crds.install }}\n"), "{name}: not switchable");
        assert!(body.ends_with("{{- end }}\n"), "{name}: switch not closed");
        assert!(body.contains("helm.sh/resource-policy: keep"), "{name}: not kept on uninstall");
        assert!(body.contains("kind: CustomResourceDefinition"), "{name}");
    }
}
