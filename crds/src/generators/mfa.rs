//! MFA: a time-based one-time password (RFC 6238) computed in the reconciler from a seed kept in
//! a Secret of the namespace that uses the generator. No store, no provider process.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::SecretKeySelector;

/// Most digits of a code: the HOTP value is 31 bits, so more digits are only leading zeros.
pub const MAX_MFA_LENGTH: i64 = 10;
/// Longest time step, in seconds (a day): a code valid longer is no one-time password.
pub const MAX_MFA_TIME_PERIOD: i64 = 86_400;

/// MFA computes the TOTP code of the seed in `secret` (base32, as authenticator apps take it)
/// for the current time step, or the one of `when`. It returns upstream's keys: `token` (the
/// code) and `timeLeft` (seconds until the step ends).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "generators.external-secrets.io",
    version = "v1alpha1",
    kind = "MFA",
    root = "Mfa",
    doc = "MFA generates a new TOTP token that is compliant with RFC 6238.",
    plural = "mfas",
    category = "external-secrets",
    category = "external-secrets-generators",
    namespaced
)]
#[serde(rename_all = "camelCase")]
pub struct MfaSpec {
    /// The Secret and key holding the seed (base32; spaces and case ignored), read in the
    /// namespace of the ExternalSecret or PushSecret that uses the generator.
    pub secret: SecretKeySelector,
    /// Digits of the code. Defaults to 6 (also when not positive); at most 10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = 10))]
    pub length: Option<i64>,
    /// Seconds a code stays valid. Defaults to 30 (also when not positive); at most a day.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = 86_400))]
    pub time_period: Option<i64>,
    /// The HMAC hash: `sha1` (default, as the RFC), `sha256`, `sha384`, `sha512` or
    /// `sha512_256` (any case).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 16))]
    pub algorithm: Option<String>,
    /// Pins the time the code is computed for (RFC 3339); the current time when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64), extend("format" = "date-time"))]
    pub when: Option<String>,
}
