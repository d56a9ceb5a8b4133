//! The one duration grammar of Keyward: Go's duration strings (`1h30m`, `15s`, `1.5h`, `500ms`,
//! `0`), the format of every object field (`refreshInterval`, `retryInterval`, sync windows),
//! kept exactly as upstream's Go so a manifest means the same here. Flags take the same grammar
//! with three longer units for certificate lifetimes ([`parse_duration_with_days`]; the flag
//! front-end with its older spellings is `keyward_process::parse_duration`).

use std::time::Duration;

/// A string that is not a Go duration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{input:?} is not a duration: use a number with a unit (ns, us, ms, s, m, h), for example \"1h\" or \"15m30s\", or \"0\" to disable"
)]
pub struct DurationError {
    /// The rejected input.
    pub input: String,
}

/// Parses a non-negative Go duration (an object field's grammar).
pub fn parse_go_duration(input: &str) -> Result<Duration, DurationError> {
    parse(input, false)
}

/// Go's grammar plus `d` (24h), `w` (7d) and `y` (365.25d, as `humantime` counts it): the
/// grammar of flags, whose certificate lifetimes run to years. Not for object fields, which
/// stay Go's so that upstream's manifests are read alike.
pub fn parse_duration_with_days(input: &str) -> Result<Duration, DurationError> {
    parse(input, true)
}

/// `<number><unit>` repeated, or a bare `0`.
fn parse(input: &str, long_units: bool) -> Result<Duration, DurationError> {
    let err = || DurationError { input: input.to_string() };
    if input == "0" {
        return Ok(Duration::ZERO);
    }
    if input.is_empty() {
        return Err(err());
    }
    let mut rest = input;
    let mut total = 0f64;
    while !rest.is_empty() {
        let number_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).ok_or_else(err)?;
        if number_len == 0 {
            return Err(err());
        }
        let value: f64 = rest[..number_len].parse().map_err(|_| err())?;
        rest = &rest[number_len..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let seconds_per_unit = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "d" if long_units => 86_400.0,
            "w" if long_units => 604_800.0,
            "y" if long_units => 31_557_600.0,
            _ => return Err(err()),
        };
        rest = &rest[unit_len..];
        total += value * seconds_per_unit;
    }
    Duration::try_from_secs_f64(total).map_err(|_| err())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duration_table() {
        let ok = [
            ("0", 0.0),
            ("1h", 3600.0),
            ("15m", 900.0),
            ("1h30m", 5400.0),
            ("1.5h", 5400.0),
            ("30s", 30.0),
            ("250ms", 0.25),
            ("0s", 0.0),
        ];
        for (input, secs) in ok {
            assert_eq!(parse_go_duration(input), Ok(Duration::from_secs_f64(secs)), "{input}");
            assert_eq!(parse_duration_with_days(input), Ok(Duration::from_secs_f64(secs)), "{input}");
        }
        for bad in ["", "1", "h", "1d", "2w", "1y", "-1h", "1h-", "one hour", "1..5s"] {
            let err = parse_go_duration(bad).unwrap_err();
            assert!(err.to_string().contains("is not a duration"), "{bad}");
        }
    }

    #[test]
    fn days_weeks_and_years_only_where_asked_for() {
        let days = |s: &str| parse_duration_with_days(s).map(|d| d.as_secs_f64());
        assert_eq!(days("1d12h"), Ok(129_600.0));
        assert_eq!(days("2w"), Ok(1_209_600.0));
        assert_eq!(days("1y"), Ok(31_557_600.0));
        for bad in ["", "1", "d", "-1d", "1dd", "5 days"] {
            assert!(parse_duration_with_days(bad).is_err(), "{bad}");
        }
    }
}
