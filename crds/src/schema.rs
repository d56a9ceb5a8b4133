//! Schema helpers for fields that schemars cannot describe structurally on its own.

use schemars::{Schema, SchemaGenerator, json_schema};

/// An arbitrary JSON object kept as written (`x-kubernetes-preserve-unknown-fields`).
pub fn preserve_unknown_fields(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}
