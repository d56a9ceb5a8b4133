//! `docs/templates.md` documents every function that exists.

#[test]
fn every_function_is_documented() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/templates.md");
    let doc = std::fs::read_to_string(path).expect("docs/templates.md");
    let documented = |f: &str| doc.contains(&format!("`{f} ")) || doc.contains(&format!("`{f}`"));
    let missing: Vec<&str> = keyward_template::function_names().into_iter().filter(|f| !documented(f)).collect();
    assert!(missing.is_empty(), "functions missing from docs/templates.md: {missing:?}");
}
