//! UUID: a random (version 4) UUID under the key `uuid`.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// UUID generates a random UUID; its spec has no fields.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "generators.external-secrets.io",
    version = "v1alpha1",
    kind = "UUID",
    root = "Uuid",
    doc = "UUID generates a version 4 UUID.",
    plural = "uuids",
    category = "external-secrets",
    category = "external-secrets-generators",
    namespaced
)]
pub struct UuidSpec {}
