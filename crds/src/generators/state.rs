//! GeneratorState: the record of what a generator made that must be cleaned up later (a token
//! to revoke, a user to drop), with the deadline after which it is collected.
//!
//! No kind Keyward serves keeps state, so Keyward never creates one; the kind is served so the
//! records an External Secrets install made can be brought along and collected (the reconciler's
//! `generators::state` controller). The schema is upstream's.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

use crate::free_json::FreeJson;

/// Label upstream puts on a GeneratorState: the hash of the object and key that created it.
pub const GENERATOR_STATE_OWNER_KEY_LABEL: &str = "generators.external-secrets.io/owner-key";

/// Finalizer upstream's controller puts on every GeneratorState, and removes after the
/// generator's cleanup ran.
pub const GENERATOR_STATE_FINALIZER: &str = "generatorstate.externalsecrets.io/finalizer";

/// The condition type of a GeneratorState, as upstream.
pub const GENERATOR_STATE_READY: &str = "Ready";

/// The state a generator produced, kept until its garbage collection deadline.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "generators.external-secrets.io",
    version = "v1alpha1",
    kind = "GeneratorState",
    doc = "GeneratorState represents the state created and managed by a generator resource.",
    plural = "generatorstates",
    shortname = "gs",
    category = "external-secrets",
    category = "external-secrets-generators",
    status = "GeneratorStateStatus",
    printcolumn = r#"{"name":"GC Deadline","type":"string","jsonPath":".spec.garbageCollectionDeadline"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    namespaced
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["resource", "state"]))]
pub struct GeneratorStateSpec {
    /// The time after which the generator state is deleted (RFC 3339). Without one it is kept.
    // A string, parsed by the reconciler: a malformed value is reported on the object instead of
    // making it unreadable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "date_time")]
    pub garbage_collection_deadline: Option<String>,
    /// The generator manifest that produced the state, as it was then; its `kind` says how the
    /// state is cleaned up.
    #[serde(default)]
    #[schemars(schema_with = "any_json")]
    pub resource: Option<FreeJson>,
    /// The state the generator produced.
    #[serde(default)]
    #[schemars(schema_with = "any_json")]
    pub state: Option<FreeJson>,
}

/// The observed state of a GeneratorState.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct GeneratorStateStatus {
    /// Conditions; `Ready` says whether the state is collected as its deadline asks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<GeneratorStateCondition>,
}

/// One condition of a GeneratorState.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GeneratorStateCondition {
    /// The condition type, `Ready`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// Why, for machines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Why, for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When the status last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}

fn date_time(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "string",
        "format": "date-time",
    })
}

/// Any JSON value, kept as written (upstream's `apiextensions.JSON`). Also `null`, which
/// upstream's schema leaves out: the API server drops a null it does not allow, and the required
/// field is then missing, so upstream's own example (`resource:` and `state:` empty) would be
/// refused.
fn any_json(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "nullable": true,
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;

    #[test]
    fn the_crd_has_upstreams_names_columns_and_required_fields() {
        let crd = GeneratorState::crd();
        assert_eq!(crd.metadata.name.as_deref(), Some("generatorstates.generators.external-secrets.io"));
        assert_eq!(crd.spec.scope, "Namespaced");
        assert_eq!(crd.spec.names.short_names, Some(vec!["gs".to_string()]));
        let version = &crd.spec.versions[0];
        let columns: Vec<(&str, &str)> = version
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| (c.name.as_str(), c.json_path.as_str()))
            .collect();
        assert_eq!(
            columns,
            [("GC Deadline", ".spec.garbageCollectionDeadline"), ("Age", ".metadata.creationTimestamp")]
        );
        let schema =
            serde_json::to_value(version.schema.as_ref().unwrap().open_api_v3_schema.as_ref().unwrap()).unwrap();
        let spec = &schema["properties"]["spec"];
        assert_eq!(spec["required"], serde_json::json!(["resource", "state"]));
        assert_eq!(spec["properties"]["garbageCollectionDeadline"]["format"], "date-time");
        for field in ["resource", "state"] {
            assert_eq!(spec["properties"][field]["x-kubernetes-preserve-unknown-fields"], true, "{field}");
            assert_eq!(spec["properties"][field]["nullable"], true, "{field}: upstream's example leaves it empty");
            assert!(spec["properties"][field].get("type").is_none(), "{field}: any JSON value");
        }
        let condition = &schema["properties"]["status"]["properties"]["conditions"]["items"];
        assert_eq!(condition["required"], serde_json::json!(["status", "type"]));
    }

    #[test]
    fn a_state_reads_with_any_resource_and_state_and_an_unparsed_deadline() {
        let gs: GeneratorState = serde_json::from_value(serde_json::json!({
            "apiVersion": "generators.external-secrets.io/v1alpha1", "kind": "GeneratorState",
            "metadata": {"name": "s", "namespace": "n"},
            "spec": {"garbageCollectionDeadline": "not a time", "resource": null, "state": "opaque"},
        }))
        .unwrap();
        assert_eq!(gs.spec.garbage_collection_deadline.as_deref(), Some("not a time"));
        assert_eq!(gs.spec.resource, None);
        assert_eq!(gs.spec.state.map(|s| s.value().unwrap()), Some(serde_json::json!("opaque")));
    }
}
