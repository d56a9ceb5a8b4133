//! The committed CRD YAML and chart partials are what `make generate` writes from the types and
//! the table of provider kinds.

use keyward_crds::generate::{Layout, check_all};
use keyward_provider_registry::PROVIDER_KINDS;

#[test]
fn committed_crd_yaml_matches_the_types() {
    let root = std::path::Path::new(
        &std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR when it runs a test"),
    )
    .join("../..");
    for (dir, layout) in [("crds/yaml", Layout::Plain), ("charts/keyward/templates/crds", Layout::HelmTemplate)] {
        if let Err(e) = check_all(&root.join(dir), layout, PROVIDER_KINDS) {
            panic!("{e}");
        }
    }
}
