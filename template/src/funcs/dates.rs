//! Sprig's date functions. `now`, and `date`/`ago` of anything but a time or a number, read
//! the clock: a template calling them renders differently every time (see `docs/templates.md`).
//! `Local` is UTC, the zone of the controller's container.

use std::rc::Rc;

use super::{FnCtx, FnError, FnResult, Func, s, want};
use crate::gotime::{GoTime, Loc, format_duration, load_location, parse_duration};
use crate::object::Obj;
use crate::value::Value;

pub const FUNCS: &[(&str, Func)] = &[
    ("now", now),
    ("date", date),
    ("dateInZone", date_in_zone),
    ("date_in_zone", date_in_zone),
    ("htmlDate", html_date),
    ("htmlDateInZone", html_date_in_zone),
    ("dateModify", date_modify),
    ("date_modify", date_modify),
    ("mustDateModify", must_date_modify),
    ("must_date_modify", must_date_modify),
    ("toDate", to_date),
    ("mustToDate", must_to_date),
    ("unixEpoch", unix_epoch),
    ("ago", ago),
    ("duration", duration),
    ("durationRound", duration_round),
];

/// Names of the functions whose result depends on the clock or on chance: a render that calls
/// one cannot be repeated. `date`, `dateInZone`, `htmlDate*` and `ago` read the clock only when
/// given something other than a time or a number.
pub const CLOCK: &[&str] = &["now", "ago", "date", "dateInZone", "date_in_zone", "htmlDate", "htmlDateInZone"];

pub(crate) fn time_value(t: GoTime) -> Value {
    Value::Obj(Rc::new(Obj::Time(t)))
}

fn time_arg(v: &Value) -> Option<&GoTime> {
    match v {
        Value::Obj(o) => match o.as_ref() {
            Obj::Time(t) => Some(t),
            Obj::Version(_) => None,
        },
        _ => None,
    }
}

/// A `time.Time` parameter: anything else is Go's argument type error.
fn need_time(v: &Value) -> Result<&GoTime, FnError> {
    time_arg(v).ok_or_else(|| {
        FnError::Msg(format!("wrong type for value; expected time.Time; got {}", super::reflect::type_text(v)))
    })
}

fn now(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 0)?;
    Ok(time_value(GoTime::now()))
}

/// The time a date function formats: a time, or seconds since the epoch; anything else is now.
fn when(v: &Value) -> GoTime {
    match v {
        Value::Int(n) | Value::Int64(n) => GoTime::unix(*n),
        other => time_arg(other).cloned().unwrap_or_else(GoTime::now),
    }
}

/// `dateInZone`: format in a zone; an unknown zone is UTC, as Sprig does.
fn format_in(layout: &str, v: &Value, zone: &str) -> Value {
    let loc = load_location(zone).unwrap_or(Loc::Utc);
    Value::Str(when(v).with_loc(loc).format(layout))
}

fn date(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 2)?;
    Ok(format_in(&s(&a[0]), &a[1], "Local"))
}

fn date_in_zone(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 3)?;
    Ok(format_in(&s(&a[0]), &a[1], &s(&a[2])))
}

fn html_date(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    Ok(format_in("2006-01-02", &a[0], "Local"))
}

fn html_date_in_zone(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 2)?;
    Ok(format_in("2006-01-02", &a[0], &s(&a[1])))
}

/// `dateModify "-1.5h" t`: `t` moved by a duration; an invalid duration leaves it unchanged.
fn date_modify(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 2)?;
    let t = need_time(&a[1])?;
    Ok(time_value(match parse_duration(&s(&a[0])) {
        Ok(d) => t.add(d),
        Err(_) => t.clone(),
    }))
}

fn must_date_modify(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 2)?;
    let t = need_time(&a[1])?;
    Ok(time_value(t.add(parse_duration(&s(&a[0]))?)))
}

/// `toDate layout s`: parse in `Local`; a string that does not parse is Go's zero time.
fn to_date(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 2)?;
    let t = crate::gotime_parse::parse(&s(&a[0]), &s(&a[1]), Loc::Local).unwrap_or_else(|_| GoTime::zero());
    Ok(time_value(t))
}

fn must_to_date(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 2)?;
    Ok(time_value(crate::gotime_parse::parse(&s(&a[0]), &s(&a[1]), Loc::Local)?))
}

fn unix_epoch(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    Ok(Value::Str(need_time(&a[0])?.unix_secs().to_string()))
}

/// Go's `Duration.Round(time.Second)`: halves away from zero.
fn round_seconds(d: i128) -> i64 {
    const M: i128 = 1_000_000_000;
    let r = (d % M).abs();
    let rounded = match (d < 0, 2 * r < M) {
        (false, true) => d - r,
        (false, false) => d + M - r,
        (true, true) => d + r,
        (true, false) => d - M + r,
    };
    rounded.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}

fn since(t: &GoTime) -> i128 {
    GoTime::now().nanos - t.nanos
}

/// `ago t`: the time since `t` (or since Unix seconds), to the second.
fn ago(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    Ok(Value::Str(format_duration(round_seconds(since(&when(&a[0]))))))
}

/// `duration seconds`: a string or an `int64` of seconds as a duration (`"95"` is `1m35s`).
/// Like Sprig, any other type (a constant is an `int`) counts as 0.
fn duration(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    let n = match &a[0] {
        Value::Str(t) => t.parse::<i64>().unwrap_or(0),
        Value::Int64(n) => *n,
        _ => 0,
    };
    Ok(Value::Str(format_duration(n.wrapping_mul(1_000_000_000))))
}

/// `durationRound d`: the largest unit of a duration (`2h10m` is `2h`, 400 days `1y`).
fn duration_round(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    let d: i64 = match &a[0] {
        Value::Str(t) => parse_duration(t).unwrap_or(0),
        Value::Int64(n) => *n,
        other => time_arg(other).map_or(0, |t| since(t).clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64),
    };
    let u = d.unsigned_abs();
    const HOUR: u64 = 3_600_000_000_000;
    let units: [(u64, &str); 6] = [
        (HOUR * 24 * 365, "y"),
        (HOUR * 24 * 30, "mo"),
        (HOUR * 24, "d"),
        (HOUR, "h"),
        (60_000_000_000, "m"),
        (1_000_000_000, "s"),
    ];
    let text = units.iter().find(|(n, _)| u > *n).map_or("0s".to_string(), |(n, unit)| format!("{}{unit}", u / n));
    Ok(Value::Str(text))
}
