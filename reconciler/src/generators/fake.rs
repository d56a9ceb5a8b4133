//! Fake: the spec's data, as written.

use std::collections::BTreeMap;

use keyward_crds::generators::FakeSpec;

/// The data of the spec, key by key.
pub fn generate(spec: &FakeSpec) -> BTreeMap<String, Vec<u8>> {
    spec.data.iter().map(|(k, v)| (k.clone(), v.clone().into_bytes())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn returns_the_data() {
        let spec = FakeSpec { data: BTreeMap::from([("foo".into(), "bar".into())]), ..Default::default() };
        assert_eq!(generate(&spec), BTreeMap::from([("foo".to_string(), b"bar".to_vec())]));
        assert!(generate(&FakeSpec::default()).is_empty());
    }
}
