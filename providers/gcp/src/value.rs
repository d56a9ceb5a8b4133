//! What is read and written besides the payload: `metadataPolicy: Fetch` answers and the push
//! metadata, as upstream's gcpsm provider reads and writes them.

use std::collections::{BTreeMap, HashMap};

use keyward_provider_runtime::ProviderError;
use serde::Deserialize;

/// The label upstream puts on the secrets it creates; pushes and deletes touch only secrets
/// that carry it.
pub const MANAGED_BY: (&str, &str) = ("managed-by", "external-secrets");

/// The `spec` of upstream's gcpsm `PushSecretMetadata`.
#[derive(Deserialize, Default, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PushMetadata {
    /// Annotations of the secret (replace the current ones).
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// Labels of the secret (replace the current ones, or merge with `mergePolicy: Merge`).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Pub/Sub topics notified of changes (`projects/*/topics/*`), set when the secret is created.
    #[serde(default)]
    pub topics: Vec<String>,
    /// `Replace` (default) or `Merge`.
    #[serde(default)]
    pub merge_policy: Option<String>,
    /// A Cloud KMS key for a secret the push creates.
    #[serde(default)]
    pub cmek_key_name: String,
    /// One replica location (older form of `replicationLocations`).
    #[serde(default)]
    pub replication_location: String,
    /// User-managed replication: the replicas' locations.
    #[serde(default)]
    pub replication_locations: Vec<String>,
}

impl PushMetadata {
    /// Reads the metadata bytes of a push entry (empty: none).
    ///
    /// # Errors
    /// `INVALID_ARGUMENT` for metadata that is not upstream's shape.
    pub fn parse(bytes: &[u8]) -> Result<Self, ProviderError> {
        let meta: PushMetadata = keyward_provider_runtime::json::push_metadata_spec(bytes)?;
        match meta.merge_policy.as_deref() {
            None | Some("" | "Replace" | "Merge") => Ok(meta),
            Some(other) => Err(ProviderError::InvalidArgument(format!(
                "push metadata spec.mergePolicy {other:?} is neither Replace nor Merge"
            ))),
        }
    }

    /// The replica locations asked for.
    pub fn locations(&self) -> Vec<String> {
        if self.replication_locations.is_empty() && !self.replication_location.is_empty() {
            vec![self.replication_location.clone()]
        } else {
            self.replication_locations.clone()
        }
    }

    /// The labels a push leaves on the secret: these (with the current ones under `Merge`, the
    /// push's winning) and the managed-by label.
    pub fn labels_over(&self, current: &HashMap<String, String>) -> HashMap<String, String> {
        let mut out: HashMap<String, String> = HashMap::new();
        if self.merge_policy.as_deref() == Some("Merge") {
            out.extend(current.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        out.extend(self.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
        out.insert(MANAGED_BY.0.into(), MANAGED_BY.1.into());
        out
    }
}

/// Whether a secret's labels say upstream (or Keyward) manages it.
pub fn managed(labels: &HashMap<String, String>) -> bool {
    labels.get(MANAGED_BY.0).is_some_and(|v| v == MANAGED_BY.1)
}

/// The `metadataPolicy: Fetch` answer: `{"annotations": …, "labels": …}`, one of them with
/// `property: annotations` / `labels`, or one entry with `annotations.<key>` / `labels.<key>`.
///
/// # Errors
/// `NOT_FOUND` for a missing entry, `INVALID_ARGUMENT` for another property.
pub fn metadata(
    key: &str,
    property: &str,
    annotations: &HashMap<String, String>,
    labels: &HashMap<String, String>,
) -> Result<Vec<u8>, ProviderError> {
    let sorted =
        |m: &HashMap<String, String>| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect::<BTreeMap<_, _>>();
    let json = |v: serde_json::Value| serde_json::to_vec(&v).map_err(|e| ProviderError::Internal(e.to_string()));
    for (prefix, map) in [("annotations", annotations), ("labels", labels)] {
        if let Some(entry) = property.strip_prefix(prefix).and_then(|p| p.strip_prefix('.')) {
            return map.get(entry).map(|v| v.clone().into_bytes()).ok_or_else(|| {
                ProviderError::NoSecret(format!("secret {key:?} has no {} {entry:?}", &prefix[..prefix.len() - 1]))
            });
        }
        if property == prefix {
            return json(serde_json::json!(sorted(map)));
        }
    }
    if !property.is_empty() {
        return Err(ProviderError::InvalidArgument(format!(
            "property {property:?} of a metadataPolicy Fetch read must be annotations, labels, annotations.<key> or labels.<key>"
        )));
    }
    json(serde_json::json!({"annotations": sorted(annotations), "labels": sorted(labels)}))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn metadata_answers_as_upstream() {
        let (a, l) = (map(&[("owner", "team-a")]), map(&[("env", "prod"), ("app", "db")]));
        assert_eq!(
            metadata("s", "", &a, &l).unwrap(),
            br#"{"annotations":{"owner":"team-a"},"labels":{"app":"db","env":"prod"}}"#
        );
        assert_eq!(metadata("s", "labels", &a, &l).unwrap(), br#"{"app":"db","env":"prod"}"#);
        assert_eq!(metadata("s", "annotations.owner", &a, &l).unwrap(), b"team-a");
        assert!(metadata("s", "labels.none", &a, &l).unwrap_err().is_not_found());
        assert_eq!(metadata("s", "other", &a, &l).unwrap_err().code(), tonic::Code::InvalidArgument);
    }

    #[test]
    fn push_metadata() {
        let raw = br#"{"apiVersion":"kubernetes.external-secrets.io/v1alpha1","kind":"PushSecretMetadata",
            "spec":{"mergePolicy":"Merge","labels":{"a":"1"},"annotations":{"n":"v"},"topics":["projects/p/topics/t"],
            "replicationLocation":"us-east1"}}"#;
        let m = PushMetadata::parse(raw).expect("metadata");
        assert_eq!(m.locations(), ["us-east1"]);
        let labels = m.labels_over(&map(&[("a", "0"), ("kept", "yes")]));
        assert_eq!(labels, map(&[("a", "1"), ("kept", "yes"), ("managed-by", "external-secrets")]));
        let replace = PushMetadata::parse(br#"{"spec":{"labels":{"a":"1"}}}"#).expect("metadata");
        assert_eq!(
            replace.labels_over(&map(&[("kept", "yes")])),
            map(&[("a", "1"), ("managed-by", "external-secrets")])
        );
        assert!(PushMetadata::parse(br#"{"spec":{"mergePolicy":"Sometimes"}}"#).is_err());
        assert_eq!(PushMetadata::parse(b"").expect("none"), PushMetadata::default());
    }
}
