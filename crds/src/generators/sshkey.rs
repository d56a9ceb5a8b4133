//! SSHKey: an SSH key pair, the private key in OpenSSH format and the public key as an
//! `authorized_keys` line.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// SSHKey generates an SSH key pair under the keys `privateKey` and `publicKey`.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "generators.external-secrets.io",
    version = "v1alpha1",
    kind = "SSHKey",
    root = "SshKey",
    doc = "SSHKey generates an SSH key pair.",
    plural = "sshkeys",
    category = "external-secrets",
    category = "external-secrets-generators",
    namespaced
)]
#[serde(rename_all = "camelCase")]
pub struct SshKeySpec {
    /// Key type: `rsa` (default), `ecdsa` or `ed25519`.
    #[serde(default)]
    pub key_type: SshKeyType,
    /// Key size: for RSA 2048 (default), 3072 or 4096; for ECDSA 256 (default), 384 or 521;
    /// ignored for ed25519.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 256, max = 8192))]
    pub key_size: Option<i64>,
    /// Comment of the key (one line, at most 1024 bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub comment: Option<String>,
}

/// The type of an SSH key.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SshKeyType {
    /// RSA.
    #[default]
    Rsa,
    /// ECDSA on NIST P-256, P-384 or P-521.
    Ecdsa,
    /// Ed25519.
    Ed25519,
}
