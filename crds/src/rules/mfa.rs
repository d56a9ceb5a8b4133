//! An MFA generator's spec: what the reconciler computes a TOTP code with (RFC 6238), checked at
//! admission (naming the field) and again before each generation, and where its seed may be read.

use super::FieldError;
use crate::generators::MfaSpec;
use crate::generators::mfa::{MAX_MFA_LENGTH, MAX_MFA_TIME_PERIOD};

/// Upstream's defaults: six digits, thirty-second steps, HMAC-SHA1 (the RFC's).
pub const DEFAULT_MFA_LENGTH: u32 = 6;
/// Seconds of one time step when `timePeriod` is unset or not positive.
pub const DEFAULT_MFA_TIME_PERIOD: u32 = 30;

/// The hash of a TOTP code's HMAC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MfaAlgorithm {
    /// HMAC-SHA1, the RFC's default.
    Sha1,
    /// HMAC-SHA256.
    Sha256,
    /// HMAC-SHA384.
    Sha384,
    /// HMAC-SHA512.
    Sha512,
    /// HMAC-SHA512/256.
    Sha512_256,
}

impl MfaAlgorithm {
    /// The names `spec.algorithm` takes (upstream's, lowercase), in the order messages list them.
    pub const NAMES: [(&'static str, MfaAlgorithm); 5] = [
        ("sha1", MfaAlgorithm::Sha1),
        ("sha256", MfaAlgorithm::Sha256),
        ("sha384", MfaAlgorithm::Sha384),
        ("sha512", MfaAlgorithm::Sha512),
        ("sha512_256", MfaAlgorithm::Sha512_256),
    ];
}

/// What one TOTP code is computed from, besides the seed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MfaPlan {
    /// Digits of the code.
    pub length: u32,
    /// Seconds of one time step.
    pub time_period: u64,
    /// The HMAC's hash.
    pub algorithm: MfaAlgorithm,
    /// The pinned time, in Unix seconds (`spec.when`); the current time when `None`.
    pub when: Option<u64>,
    /// The Secret holding the seed.
    pub secret_name: String,
    /// Its key.
    pub secret_key: String,
}

/// Reads an MFA spec at `path` (`spec`, or a ClusterGenerator's `spec.generator.mfaSpec`):
/// upstream's defaults for unset or non-positive numbers, every field within its limit.
pub fn mfa_plan(path: &str, spec: &MfaSpec) -> Result<MfaPlan, Vec<FieldError>> {
    let mut errs = Vec::new();
    let mut positive = |field: &str, value: Option<i64>, max: i64, default: u32, unit: &str| match value {
        Some(n) if n > max => {
            errs.push(FieldError::new(format!("{path}.{field}"), format!("{n} is above the limit of {max} {unit}")));
            default
        }
        // Not positive: upstream's default.
        Some(n) if n > 0 => u32::try_from(n).unwrap_or(default),
        _ => default,
    };
    let length = positive("length", spec.length, MAX_MFA_LENGTH, DEFAULT_MFA_LENGTH, "digits (a code has 31 bits)");
    let time_period =
        u64::from(positive("timePeriod", spec.time_period, MAX_MFA_TIME_PERIOD, DEFAULT_MFA_TIME_PERIOD, "seconds"));
    let algorithm = match spec.algorithm.as_deref().filter(|a| !a.is_empty()) {
        None => MfaAlgorithm::Sha1,
        Some(a) => match MfaAlgorithm::NAMES.iter().find(|(name, _)| name.eq_ignore_ascii_case(a)) {
            Some((_, algorithm)) => *algorithm,
            None => {
                let names: Vec<&str> = MfaAlgorithm::NAMES.iter().map(|(n, _)| *n).collect();
                errs.push(FieldError::new(
                    format!("{path}.algorithm"),
                    format!("{a:?} is not one of {}", names.join(", ")),
                ));
                MfaAlgorithm::Sha1
            }
        },
    };
    let when = spec.when.as_deref().and_then(|w| match w.parse::<jiff::Timestamp>() {
        Ok(t) if t.as_second() >= 0 => u64::try_from(t.as_second()).ok(),
        Ok(_) => {
            errs.push(FieldError::new(format!("{path}.when"), format!("{w:?} is before 1970 (Unix time 0)")));
            None
        }
        Err(e) => {
            errs.push(FieldError::new(format!("{path}.when"), format!("{w:?} is not an RFC 3339 time: {e}")));
            None
        }
    });
    if spec.secret.name.is_empty() {
        errs.push(FieldError::new(format!("{path}.secret.name"), "is required: the Secret holding the seed"));
    }
    let secret_key = spec.secret.key.clone().unwrap_or_default();
    if secret_key.is_empty() {
        errs.push(FieldError::new(format!("{path}.secret.key"), "is required: the key holding the seed"));
    }
    if !errs.is_empty() {
        return Err(errs);
    }
    Ok(MfaPlan { length, time_period, algorithm, when, secret_name: spec.secret.name.clone(), secret_key })
}

/// The tenant boundary of an MFA generator: its seed is read in `namespace`, the namespace of
/// the ExternalSecret or PushSecret that uses it (a ClusterGenerator's spec too). A
/// `secret.namespace` naming another one is refused, never followed.
pub fn mfa_secret_namespace(path: &str, spec: &MfaSpec, namespace: &str) -> Result<(), FieldError> {
    match spec.secret.namespace.as_deref().filter(|ns| !ns.is_empty() && *ns != namespace) {
        None => Ok(()),
        Some(other) => Err(FieldError::new(
            format!("{path}.secret.namespace"),
            format!(
                "{other:?} is not namespace {namespace:?} where the generator is used: an MFA generator reads its \
                 seed from a Secret of that namespace only; remove {path}.secret.namespace"
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SecretKeySelector;

    fn spec(v: serde_json::Value) -> MfaSpec {
        serde_json::from_value(v).expect("an MFA spec")
    }

    fn fields(r: Result<MfaPlan, Vec<FieldError>>) -> Vec<String> {
        r.err().unwrap_or_default().into_iter().map(|e| e.field).collect()
    }

    #[test]
    fn upstreams_example_takes_upstreams_defaults() {
        let plan = mfa_plan("spec", &spec(serde_json::json!({"secret": {"key": "token", "name": "secret"}})))
            .expect("upstream's example");
        assert_eq!(
            plan,
            MfaPlan {
                length: 6,
                time_period: 30,
                algorithm: MfaAlgorithm::Sha1,
                when: None,
                secret_name: "secret".into(),
                secret_key: "token".into()
            }
        );
        let zero = spec(serde_json::json!({"secret": {"key": "k", "name": "s"}, "length": 0, "timePeriod": -5}));
        let plan = mfa_plan("spec", &zero).expect("not positive: the defaults, as upstream");
        assert_eq!((plan.length, plan.time_period), (6, 30));
    }

    #[test]
    fn every_field_is_checked_and_named() {
        let full = spec(serde_json::json!({
            "secret": {"key": "k", "name": "s"}, "length": 8, "timePeriod": 60,
            "algorithm": "SHA512", "when": "2005-03-18T01:58:29Z"
        }));
        let plan = mfa_plan("spec", &full).expect("valid");
        assert_eq!(
            (plan.length, plan.time_period, plan.algorithm, plan.when),
            (8, 60, MfaAlgorithm::Sha512, Some(1111111109))
        );
        let bad = spec(serde_json::json!({
            "secret": {"name": ""}, "length": 11, "timePeriod": 86_401, "algorithm": "md5", "when": "yesterday"
        }));
        assert_eq!(
            fields(mfa_plan("spec.generator.mfaSpec", &bad)),
            [
                "spec.generator.mfaSpec.length",
                "spec.generator.mfaSpec.timePeriod",
                "spec.generator.mfaSpec.algorithm",
                "spec.generator.mfaSpec.when",
                "spec.generator.mfaSpec.secret.name",
                "spec.generator.mfaSpec.secret.key"
            ]
        );
        let huge = spec(serde_json::json!({"secret": {"key": "k", "name": "s"}, "length": i64::MAX}));
        assert_eq!(fields(mfa_plan("spec", &huge)), ["spec.length"]);
        let early = spec(serde_json::json!({"secret": {"key": "k", "name": "s"}, "when": "1969-12-31T23:59:59Z"}));
        assert_eq!(fields(mfa_plan("spec", &early)), ["spec.when"]);
    }

    #[test]
    fn the_seed_is_read_in_the_namespace_that_uses_the_generator() {
        let with = |namespace: Option<&str>| MfaSpec {
            secret: SecretKeySelector {
                name: "s".into(),
                key: Some("k".into()),
                namespace: namespace.map(String::from),
            },
            ..Default::default()
        };
        assert!(mfa_secret_namespace("spec", &with(None), "team-a").is_ok());
        assert!(mfa_secret_namespace("spec", &with(Some("team-a")), "team-a").is_ok());
        let e = mfa_secret_namespace("spec", &with(Some("team-b")), "team-a").unwrap_err();
        assert_eq!(e.field, "spec.secret.namespace");
        assert!(e.message.contains("\"team-b\"") && e.message.contains("\"team-a\""), "{e}");
    }
}
