//! The one grammar of every duration flag of every Keyward binary: Go's duration strings (what
//! most flags and upstream's manifests use: `30s`, `5m`, `1h30m`, `1.5h`, `500ms`, `0`), with
//! three longer units for certificate lifetimes (`d` = 24h, `w` = 7d, `y` = 365.25d, as
//! `humantime` counts them) and the forms older flags accepted, so existing charts and manifests
//! keep working: a bare number of seconds (`25`), and `humantime`'s spellings (`5 days`,
//! `1h 30m`, `2min`).
//!
//! The `<number><unit>` grammar itself is `keyward-crds`' (the one object fields use, Go's exact
//! units there); this adds the flags' older spellings around it.

use std::time::Duration;

use keyward_crds::rules::parse_duration_with_days;

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
    parse_duration_with_days(s).or_else(|_| humantime::parse_duration(s)).map_err(|_| refused())
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
