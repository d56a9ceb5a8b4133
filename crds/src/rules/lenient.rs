//! What upstream's webhook accepts and Keyward warns about instead of refusing: manifests its
//! own documentation prints (fragments without a store, a `find` without filters, a push
//! without a remote key) apply as they do upstream, and what cannot work says so at sync.

use crate::external_secret::ExternalSecretSpec;
use crate::push_secret::PushSecretSpec;

/// An ExternalSecret's (`prefix`: `spec`, or `spec.externalSecretSpec` in a
/// ClusterExternalSecret) entries that no store serves (the sync reports Ready=False naming
/// them), and `find`s without a filter (they match everything the store lists).
pub fn external_secret_warnings(prefix: &str, spec: &ExternalSecretSpec) -> Vec<String> {
    const NO_STORE: &str = "no store: neither spec.secretStoreRef nor sourceRef.storeRef is set, so the sync reports \
                            Ready=False until one is (upstream accepts it too)";
    let mut out = Vec::new();
    if spec.secret_store_ref.is_none() {
        for (i, _) in spec.data.iter().enumerate().filter(|(_, d)| d.source_ref.is_none()) {
            out.push(format!("{prefix}.data[{i}]: {NO_STORE}"));
        }
        for (i, d) in spec.data_from.iter().enumerate() {
            let source = d.source_ref.as_ref();
            if source.is_none_or(|s| s.store_ref.is_none() && s.generator_ref.is_none()) {
                out.push(format!("{prefix}.dataFrom[{i}]: {NO_STORE}"));
            }
        }
    }
    for (i, f) in spec.data_from.iter().enumerate().filter_map(|(i, d)| Some((i, d.find.as_ref()?))) {
        let regexp = f.name.as_ref().and_then(|n| n.regexp.as_deref());
        if regexp.is_none() && f.tags.is_empty() && f.path.is_none() {
            out.push(format!(
                "{prefix}.dataFrom[{i}].find: no name.regexp, tags or path: it matches every value the store lists"
            ));
        }
    }
    out
}

/// A PushSecret's (`prefix`: `spec`, or `spec.pushSecretSpec`) entries without a remote key:
/// upstream accepts them for stores that name a secret from its metadata (BeyondTrust); every
/// store Keyward serves needs the key and refuses the push.
pub fn push_secret_warnings(prefix: &str, spec: &PushSecretSpec) -> Vec<String> {
    let empty = spec.data.iter().enumerate().filter(|(_, d)| d.match_.remote_ref.remote_key.is_empty());
    empty
        .map(|(i, _)| {
            format!(
                "{prefix}.data[{i}].match.remoteRef.remoteKey: empty; only a store that names the secret from the \
                 push metadata accepts it, every store Keyward serves refuses the push"
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fragments_of_upstreams_docs_warn() {
        let es: ExternalSecretSpec = serde_yaml::from_str(
            "data: [{secretKey: a, remoteRef: {key: k}}]\n\
             dataFrom: [{extract: {key: k}}, {find: {}}, {sourceRef: {generatorRef: {kind: Password, name: p}}}]",
        )
        .expect("parses");
        let w = external_secret_warnings("spec", &es);
        assert_eq!(w.len(), 4, "{w:?}");
        assert!(w[0].starts_with("spec.data[0]: no store") && w[1].starts_with("spec.dataFrom[0]: no store"), "{w:?}");
        assert!(w[2].starts_with("spec.dataFrom[1]: no store"), "{w:?}");
        assert!(w[3].starts_with("spec.dataFrom[1].find: no name.regexp"), "{w:?}");
        let with_store: ExternalSecretSpec = serde_yaml::from_str(
            "secretStoreRef: {name: s}\ndata: [{secretKey: a, remoteRef: {key: k}}]\ndataFrom: [{find: {path: p}}]",
        )
        .expect("parses");
        assert!(external_secret_warnings("spec", &with_store).is_empty());
        let push: PushSecretSpec = serde_yaml::from_str(
            "secretStoreRefs: [{name: s}]\nselector: {secret: {name: x}}\n\
             data: [{match: {secretKey: a, remoteRef: {remoteKey: ''}}}, {match: {secretKey: b, remoteRef: {remoteKey: r}}}]",
        )
        .expect("parses");
        let w = push_secret_warnings("spec", &push);
        assert!(w.len() == 1 && w[0].starts_with("spec.data[0].match.remoteRef.remoteKey: empty"), "{w:?}");
    }
}
