//! ClusterGenerator: the spec of one generator kind, usable from the namespaces its conditions
//! admit.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{FakeSpec, PasswordSpec, SshKeySpec, UuidSpec};
use crate::provider::ClusterProviderCondition;

/// ClusterGenerator holds a generator spec that ExternalSecrets and PushSecrets in admitted
/// namespaces reference with `generatorRef.kind: ClusterGenerator`.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "generators.external-secrets.io",
    version = "v1alpha1",
    kind = "ClusterGenerator",
    doc = "ClusterGenerator represents a cluster-wide generator which can be referenced as part of `generatorRef` fields.",
    plural = "clustergenerators",
    category = "external-secrets",
    category = "external-secrets-generators",
    printcolumn = r#"{"name":"Kind","type":"string","jsonPath":".spec.kind"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterGeneratorSpec {
    /// The kind of this generator.
    pub kind: GeneratorKind,
    /// The spec of this generator; the one field set must match `kind`.
    pub generator: GeneratorSpec,
    /// Namespaces allowed to use this ClusterGenerator; any one condition admits (a Keyward
    /// addition, with the same conditions as a ClusterProvider). Without conditions every
    /// namespace may use it, as upstream.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<ClusterProviderCondition>,
}

/// The generator kinds a ClusterGenerator may hold: the ones Keyward serves.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum GeneratorKind {
    /// A random password.
    Password,
    /// A random UUID.
    #[serde(rename = "UUID")]
    Uuid,
    /// An SSH key pair.
    #[serde(rename = "SSHKey")]
    SshKey,
    /// Static data.
    Fake,
}

impl GeneratorKind {
    /// Every kind, in the order messages list them.
    pub const ALL: [GeneratorKind; 4] =
        [GeneratorKind::Password, GeneratorKind::Uuid, GeneratorKind::SshKey, GeneratorKind::Fake];

    /// The kind as written in manifests.
    pub fn as_str(self) -> &'static str {
        match self {
            GeneratorKind::Password => "Password",
            GeneratorKind::Uuid => "UUID",
            GeneratorKind::SshKey => "SSHKey",
            GeneratorKind::Fake => "Fake",
        }
    }

    /// The kind of that name, case-sensitive as in manifests.
    pub fn parse(kind: &str) -> Option<GeneratorKind> {
        GeneratorKind::ALL.into_iter().find(|k| k.as_str() == kind)
    }
}

impl std::fmt::Display for GeneratorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One generator spec; exactly one field is set.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1, "maxProperties" = 1))]
pub struct GeneratorSpec {
    /// For kind Password.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_spec: Option<PasswordSpec>,
    /// For kind UUID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid_spec: Option<UuidSpec>,
    /// For kind SSHKey.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssh_key_spec: Option<SshKeySpec>,
    /// For kind Fake.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fake_spec: Option<FakeSpec>,
}
