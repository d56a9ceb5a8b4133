//! The one grammar of every duration flag of every Keyward binary: Go's duration strings (what
//! most flags and upstream's manifests use: `30s`, `5m`, `1h30m`, `1.5h`, `500ms`, `0`), with
//! three longer units for certificate lifetimes (`d` = 24h, `w` = 7d, `y` = 365.25d, as
//! `humantime` counts them) and the forms older flags accepted, so existing charts and manifests
//! keep working: a bare number of seconds (`25`), and `humantime`'s spellings (`5 days`,
//! `1h 30m`, `2min`).
//!
//! Object fields (`refreshInterval`) keep upstream's exact Go grammar in `keyward-crds`; this
//! one is for flags only.

use std::time::Duration;

/// Parses a flag's duration; the error says what is accepted. Use as
/// `#[arg(value_parser = keyward_process::parse_duration)]`.
pub fn parse_duration(input: &str) -> Result<Duration, String> {
    let s = input.trim();
    let refused =
        || format!("{input:?} is not a duration: use a number with a unit (ms, s, m, h, d), e.g. 30s, 5m or 1h30m");
    if s.is_empty() || s.starts_with('-') {
        return Err(refused());
    }
    // A bare number is seconds (the providers' `--shutdown-timeout 25` of old).
    if let Ok(seconds) = s.parse::<f64>() {
        return Duration::try_from_secs_f64(seconds).map_err(|_| refused());
    }
    go_with_days(s).or_else(|| humantime::parse_duration(s).ok()).ok_or_else(refused)
}

/// `<number><unit>` repeated, Go's units plus `d`, `w` and `y`.
fn go_with_days(s: &str) -> Option<Duration> {
    let mut rest = s;
    let mut total = 0f64;
    while !rest.is_empty() {
        let number_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        let value: f64 = rest.get(..number_len)?.parse().ok()?;
        rest = &rest[number_len..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let seconds_per_unit = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "d" => 86_400.0,
            "w" => 604_800.0,
            "y" => 31_557_600.0,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total += value * seconds_per_unit;
    }
    Duration::try_from_secs_f64(total).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_and_every_older_form_parse() {
        let secs = |s: &str| parse_duration(s).map(|d| d.as_secs_f64());
        // Go's grammar, as the reconciler and the webhook took it.
        for (given, want) in [("0", 0.0), ("30s", 30.0), ("5m", 300.0), ("1h30m", 5400.0), ("1.5h", 5400.0)] {
            assert_eq!(secs(given), Ok(want), "{given}");
        }
        assert_eq!(secs("500ms"), Ok(0.5));
        assert_eq!(secs("250us"), Ok(0.00025));
        // The providers' forms: a bare number of seconds, a fraction of a minute.
        assert_eq!(secs("25"), Ok(25.0));
        assert_eq!(secs(" 1.5m "), Ok(90.0));
        // keyward-certs' humantime forms keep their values.
        for given in ["5y", "180d", "90d", "30d", "10m", "1m", "15s", "2w", "5 days", "1h 30m", "2min", "1year"] {
            assert_eq!(parse_duration(given).ok(), humantime::parse_duration(given).ok(), "{given}");
        }
        assert_eq!(secs("180d"), Ok(180.0 * 86_400.0));
    }

    #[test]
    fn refusals_name_the_input_and_the_grammar() {
        for given in ["", " ", "soon", "-5s", "5x", "1h-2m", "s", ".m"] {
            let e = parse_duration(given).expect_err(given);
            assert!(e.contains(&format!("{given:?}")) && e.contains("30s"), "{given}: {e}");
        }
    }
}
