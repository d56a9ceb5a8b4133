//! Password: a random password per key.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Upstream's default length.
pub const DEFAULT_PASSWORD_LENGTH: i64 = 24;

fn default_length() -> i64 {
    DEFAULT_PASSWORD_LENGTH
}

/// Password generates a random password from the character classes its spec asks for.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "generators.external-secrets.io",
    version = "v1alpha1",
    kind = "Password",
    doc = "Password generates a random password based on the configuration parameters in spec.",
    plural = "passwords",
    category = "external-secrets",
    category = "external-secrets-generators",
    namespaced
)]
#[serde(rename_all = "camelCase")]
pub struct PasswordSpec {
    /// Length of the password to be generated. Defaults to 24 (also when not positive); at
    /// most 1024.
    #[serde(default = "default_length")]
    #[schemars(range(max = 1024))]
    pub length: i64,
    /// Number of digits in the password. Defaults to 25% of the length.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 1024))]
    pub digits: Option<i64>,
    /// Number of symbol characters in the password. Defaults to 25% of the length.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 1024))]
    pub symbols: Option<i64>,
    /// The symbol characters to use. Defaults to ``~!@#$%^&*()_+`-={}|[]\:"<>?,./``.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 4096))]
    pub symbol_characters: Option<String>,
    /// Disables uppercase letters.
    #[serde(default)]
    pub no_upper: bool,
    /// Allows a character to appear more than once.
    #[serde(default)]
    pub allow_repeat: bool,
    /// The keys that get a password each. Defaults to `password`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1, max = 64))]
    pub secret_keys: Vec<String>,
    /// Encoding of the generated password: `raw` (default), `base64`, `base64url`, `base32` or
    /// `hex`.
    #[serde(default)]
    pub encoding: PasswordEncoding,
}

/// How a generated password is written.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PasswordEncoding {
    /// Standard Base64, padded.
    Base64,
    /// URL-safe Base64, padded.
    Base64url,
    /// Base32 (RFC 4648), padded.
    Base32,
    /// Lowercase hexadecimal.
    Hex,
    /// As generated.
    #[default]
    Raw,
}
