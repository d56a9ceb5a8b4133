//! `spec.syncWindows`: whether a periodic refresh may run now, and when that changes.
//!
//! A window is open from each time its schedule fires until `duration` later (both ends
//! included), in UTC. `allow` windows let periodic refreshes run only while one is open, `deny`
//! windows only while none is. The webhook validates schedules and durations with the same
//! parser the reconciler evaluates them with; one that slipped past admission counts as never
//! open, as upstream.

use std::time::Duration;

use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use jiff::Timestamp;
use jiff::tz::TimeZone;

use super::{ValidationErrors, parse_go_duration};
use crate::external_secret::{SyncWindow, SyncWindowKind, SyncWindows};

/// Whether a periodic refresh may run now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowGate {
    /// It may.
    Open,
    /// It may not; look again after this long (when a window opens or closes).
    Closed(Duration),
}

/// Windows per ExternalSecret (the schema says so too): a schedule that fires rarely or never
/// costs the reconciler a search of up to tens of milliseconds at each look, so a tenant may not
/// make that unbounded.
pub const MAX_WINDOWS: usize = 16;

/// When a blocked refresh looks again if no window says when it changes.
const RECHECK: Duration = Duration::from_secs(3600);

enum Schedule {
    Cron(Box<Cron>),
    /// `@every <d>`: it fires all the time, so its window is open when it outlasts the period.
    Every(Duration),
}

fn parse_schedule(text: &str) -> Result<Schedule, String> {
    let text = text.trim();
    if let Some(every) = text.strip_prefix("@every ") {
        return parse_go_duration(every.trim()).map(Schedule::Every).map_err(|e| format!("@every: {e}"));
    }
    if text.split_whitespace().count() != 5 && !text.starts_with('@') {
        return Err("needs five fields: minute hour day-of-month month day-of-week".into());
    }
    CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build()
        .parse(text)
        .map(|c| Schedule::Cron(Box::new(c)))
        .map_err(|e| e.to_string())
}

/// Checks every window's schedule and duration.
pub fn validate_sync_windows(errs: &mut ValidationErrors, path: &str, windows: &SyncWindows) {
    if windows.windows.is_empty() {
        errs.push(format!("{path}.windows"), "needs at least one window");
    }
    if windows.windows.len() > MAX_WINDOWS {
        errs.push(format!("{path}.windows"), format!("at most {MAX_WINDOWS} windows"));
    }
    for (i, w) in windows.windows.iter().enumerate() {
        if let Err(e) = parse_schedule(&w.schedule) {
            errs.push(format!("{path}.windows[{i}].schedule"), format!("{:?} is not a schedule: {e}", w.schedule));
        }
        match parse_go_duration(&w.duration) {
            Ok(d) if d.is_zero() => errs.push(format!("{path}.windows[{i}].duration"), "must be longer than 0"),
            Ok(_) => {}
            Err(e) => errs.push(format!("{path}.windows[{i}].duration"), e.to_string()),
        }
    }
}

/// One window at `now`: `Ok(end)` when open (it closes at `end`), `Err(next)` when closed (it
/// opens at `next`, if it ever does).
fn window_at(w: &SyncWindow, now: Timestamp) -> Result<Timestamp, Option<Timestamp>> {
    let (Ok(schedule), Ok(duration)) = (parse_schedule(&w.schedule), parse_go_duration(&w.duration)) else {
        return Err(None);
    };
    let span = jiff::SignedDuration::try_from(duration).unwrap_or(jiff::SignedDuration::MAX);
    match schedule {
        Schedule::Every(period) if duration >= period => Ok(Timestamp::MAX),
        Schedule::Every(_) => Err(None),
        Schedule::Cron(cron) => {
            let zoned = now.to_zoned(TimeZone::UTC);
            if let Ok(fired) = cron.find_previous_occurrence(&zoned, true) {
                let end = fired.timestamp().saturating_add(span).unwrap_or(Timestamp::MAX);
                if now <= end {
                    return Ok(end);
                }
            }
            Err(cron.find_next_occurrence(&zoned, false).ok().map(|z| z.timestamp()))
        }
    }
}

/// Whether sync windows let a periodic refresh run at `now`.
pub fn window_gate(windows: &SyncWindows, now: Timestamp) -> WindowGate {
    let states: Vec<_> = windows.windows.iter().map(|w| window_at(w, now)).collect();
    let until = |t: Timestamp| {
        let wait = Duration::try_from(t.duration_since(now)).unwrap_or(Duration::ZERO);
        // Just past the edge, so the next look sees the change.
        WindowGate::Closed((wait + Duration::from_secs(1)).min(RECHECK))
    };
    match windows.kind {
        SyncWindowKind::Deny => match states.iter().filter_map(|s| s.ok()).max() {
            None => WindowGate::Open,
            Some(end) => until(end),
        },
        SyncWindowKind::Allow => {
            if states.iter().any(Result::is_ok) {
                return WindowGate::Open;
            }
            match states.iter().filter_map(|s| s.err().flatten()).min() {
                Some(next) => until(next),
                None => WindowGate::Closed(RECHECK),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn windows(kind: SyncWindowKind, list: &[(&str, &str)]) -> SyncWindows {
        SyncWindows {
            kind,
            windows: list
                .iter()
                .map(|(s, d)| SyncWindow { schedule: s.to_string(), duration: d.to_string() })
                .collect(),
        }
    }

    fn at(s: &str) -> Timestamp {
        s.parse().expect("timestamp")
    }

    #[test]
    fn a_window_is_open_from_its_firing_to_its_end_inclusive() {
        let deny = windows(SyncWindowKind::Deny, &[("0 22 * * *", "2h")]);
        assert_eq!(window_gate(&deny, at("2026-12-04T21:59:59Z")), WindowGate::Open);
        // Closed until 00:00:01, looked at again within the hour.
        assert_eq!(window_gate(&deny, at("2026-12-04T22:00:00Z")), WindowGate::Closed(RECHECK));
        assert_eq!(window_gate(&deny, at("2026-12-05T00:00:00Z")), WindowGate::Closed(Duration::from_secs(1)));
        assert_eq!(window_gate(&deny, at("2026-12-05T00:00:01Z")), WindowGate::Open);
        let allow = windows(SyncWindowKind::Allow, &[("0 22 * * *", "2h")]);
        assert_eq!(window_gate(&allow, at("2026-12-04T23:00:00Z")), WindowGate::Open);
        assert_eq!(window_gate(&allow, at("2026-12-04T21:30:00Z")), WindowGate::Closed(Duration::from_secs(1801)));
        assert_eq!(window_gate(&allow, at("2026-12-04T12:00:00Z")), WindowGate::Closed(RECHECK), "capped");
    }

    #[test]
    fn any_allow_window_opens_and_every_deny_window_closes() {
        let allow = windows(SyncWindowKind::Allow, &[("0 1 * * *", "1h"), ("30 12 * * *", "30m")]);
        assert_eq!(window_gate(&allow, at("2026-12-04T12:45:00Z")), WindowGate::Open);
        assert_eq!(window_gate(&allow, at("2026-12-04T01:59:00Z")), WindowGate::Open);
        let deny = windows(SyncWindowKind::Deny, &[("0 1 * * *", "1h"), ("30 1 * * *", "1h")]);
        // Both open at 01:45: closed until the later one ends.
        assert_eq!(window_gate(&deny, at("2026-12-04T01:45:00Z")), WindowGate::Closed(Duration::from_secs(2701)));
    }

    #[test]
    fn weekdays_descriptors_and_every() {
        // 2026-12-04 is a Friday. Day-of-week alone restricts the days (day-of-month is `*`).
        let mondays = windows(SyncWindowKind::Allow, &[("0 9 * * MON", "8h")]);
        assert!(matches!(window_gate(&mondays, at("2026-12-04T10:00:00Z")), WindowGate::Closed(_)));
        assert_eq!(window_gate(&mondays, at("2026-12-07T10:00:00Z")), WindowGate::Open);
        let daily = windows(SyncWindowKind::Deny, &[("@daily", "1h")]);
        assert!(matches!(window_gate(&daily, at("2026-12-04T00:30:00Z")), WindowGate::Closed(_)));
        assert_eq!(window_gate(&daily, at("2026-12-04T01:30:00Z")), WindowGate::Open);
        let every = windows(SyncWindowKind::Allow, &[("@every 1h", "1h")]);
        assert_eq!(window_gate(&every, at("2026-12-04T01:30:00Z")), WindowGate::Open);
        let short = windows(SyncWindowKind::Allow, &[("@every 1h", "10m")]);
        assert_eq!(window_gate(&short, at("2026-12-04T01:30:00Z")), WindowGate::Closed(RECHECK));
    }

    #[test]
    fn bad_schedules_are_refused_at_admission_and_never_open_at_runtime() {
        let bad = windows(SyncWindowKind::Allow, &[("0 22 * *", "2h"), ("0 0 0 22 * * *", "1h"), ("61 * * * *", "x")]);
        let mut errs = ValidationErrors::default();
        validate_sync_windows(&mut errs, "spec.syncWindows", &bad);
        let text: Vec<String> = errs.0.iter().map(ToString::to_string).collect();
        assert!(
            text[0].starts_with("spec.syncWindows.windows[0].schedule: \"0 22 * *\" is not a schedule"),
            "{text:?}"
        );
        assert!(text.iter().any(|e| e.starts_with("spec.syncWindows.windows[1].schedule")), "{text:?}");
        assert!(text.iter().any(|e| e.starts_with("spec.syncWindows.windows[2].schedule")), "{text:?}");
        assert!(text.iter().any(|e| e.starts_with("spec.syncWindows.windows[2].duration")), "{text:?}");
        assert_eq!(window_gate(&bad, at("2026-12-04T22:30:00Z")), WindowGate::Closed(RECHECK));
        let deny = windows(SyncWindowKind::Deny, &[("nonsense", "1h")]);
        assert_eq!(window_gate(&deny, at("2026-12-04T22:30:00Z")), WindowGate::Open);
        let mut errs = ValidationErrors::default();
        validate_sync_windows(&mut errs, "s", &windows(SyncWindowKind::Deny, &[("@weekly", "0s")]));
        assert_eq!(errs.0.len(), 1, "a zero duration");
        let many = windows(SyncWindowKind::Deny, &[("@daily", "1h"); MAX_WINDOWS + 1]);
        let mut errs = ValidationErrors::default();
        validate_sync_windows(&mut errs, "s", &many);
        assert_eq!(errs.0.iter().map(ToString::to_string).collect::<Vec<_>>(), ["s.windows: at most 16 windows"]);
    }
}
