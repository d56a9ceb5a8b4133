//! Go's `time.Time` as templates see it: an instant, the zone it is shown in, and (for `now`)
//! a monotonic clock reading. Formatting and parsing follow Go's reference layout
//! (`Mon Jan 2 15:04:05 MST 2006`), durations Go's `time.Duration` text.
//!
//! Time zones come from the IANA database bundled into the binary, as Go's `time.LoadLocation`
//! reads it from the image. `Local` is UTC: the zone of the controller's container, as in
//! upstream's image.

use std::sync::OnceLock;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use jiff::tz::TimeZone;

const NANOS: i128 = 1_000_000_000;

/// Where a time is shown.
#[derive(Clone, Debug, PartialEq)]
pub enum Loc {
    /// UTC.
    Utc,
    /// The process's zone (UTC), named `Local`.
    Local,
    /// A zone of the IANA database.
    Zone(String, TimeZone),
    /// A fixed offset east of UTC, with a name that may be empty (a parsed `-0700`).
    Fixed(String, i32),
}

/// A Go `time.Time`.
#[derive(Clone, Debug, PartialEq)]
pub struct GoTime {
    /// Nanoseconds since the Unix epoch.
    pub nanos: i128,
    /// The zone it is shown in.
    pub loc: Loc,
    /// Nanoseconds since the process's monotonic clock origin, for times read from the clock.
    pub mono: Option<i128>,
}

fn process_start() -> Instant {
    static START: OnceLock<Instant> = OnceLock::new();
    *START.get_or_init(Instant::now)
}

impl GoTime {
    /// The current time in `Local`, with a monotonic reading (Go's `time.Now()`).
    pub fn now() -> GoTime {
        let start = process_start();
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as i128).unwrap_or(0);
        GoTime { nanos, loc: Loc::Local, mono: Some(start.elapsed().as_nanos() as i128) }
    }

    /// `time.Unix(secs, 0)` in `Local`.
    pub fn unix(secs: i64) -> GoTime {
        GoTime { nanos: i128::from(secs) * NANOS, loc: Loc::Local, mono: None }
    }

    /// Go's zero time, `0001-01-01 00:00:00 +0000 UTC`.
    pub fn zero() -> GoTime {
        GoTime { nanos: i128::from(days_from_civil(1, 1, 1)) * 86_400 * NANOS, loc: Loc::Utc, mono: None }
    }

    /// Seconds since the epoch (`Unix()`), rounded down.
    pub fn unix_secs(&self) -> i64 {
        self.nanos.div_euclid(NANOS) as i64
    }

    /// The same instant shown in `loc` (`In`); the monotonic reading is kept, as Go does.
    pub fn with_loc(&self, loc: Loc) -> GoTime {
        GoTime { loc, ..self.clone() }
    }

    /// `Add(d)`.
    pub fn add(&self, d: i64) -> GoTime {
        GoTime { nanos: self.nanos + i128::from(d), loc: self.loc.clone(), mono: self.mono.map(|m| m + i128::from(d)) }
    }

    /// The offset east of UTC in seconds and the zone abbreviation at this instant.
    pub fn zone(&self) -> (i32, String) {
        match &self.loc {
            Loc::Utc | Loc::Local => (0, "UTC".into()),
            Loc::Fixed(name, off) => (*off, name.clone()),
            Loc::Zone(_, tz) => {
                let secs = (self.unix_secs()).clamp(-377_705_116_800, 253_402_207_200);
                match jiff::Timestamp::from_second(secs) {
                    Ok(ts) => {
                        let info = tz.to_offset_info(ts);
                        (info.offset().seconds(), info.abbreviation().to_string())
                    }
                    Err(_) => (0, "UTC".into()),
                }
            }
        }
    }

    /// The wall clock in this time's zone.
    pub fn civil(&self) -> Civil {
        let (off, _) = self.zone();
        let local = self.nanos + i128::from(off) * NANOS;
        let secs = local.div_euclid(NANOS) as i64;
        let nano = local.rem_euclid(NANOS) as u32;
        let days = secs.div_euclid(86_400);
        let sod = secs.rem_euclid(86_400);
        let (year, month, day) = civil_from_days(days);
        Civil {
            year,
            month,
            day,
            hour: (sod / 3600) as u32,
            minute: (sod % 3600 / 60) as u32,
            second: (sod % 60) as u32,
            nano,
            weekday: ((days + 4).rem_euclid(7)) as u32,
            yday: (days - days_from_civil(year, 1, 1) + 1) as u32,
        }
    }

    /// Go's `String()`: `2006-01-02 15:04:05.999999999 -0700 MST`, and ` m=+0.000000001` when
    /// the time carries a monotonic reading.
    pub fn display(&self) -> String {
        let mut s = self.format("2006-01-02 15:04:05.999999999 -0700 MST");
        if let Some(m) = self.mono {
            let sign = if m < 0 { '-' } else { '+' };
            let m = m.unsigned_abs();
            s.push_str(&format!(" m={sign}{}.{:09}", m / 1_000_000_000, m % 1_000_000_000));
        }
        s
    }

    /// RFC 3339 with nanoseconds, as Go's `MarshalJSON` writes it.
    pub fn rfc3339(&self) -> String {
        self.format("2006-01-02T15:04:05.999999999Z07:00")
    }
}

/// A time's calendar fields.
pub struct Civil {
    pub year: i64,
    pub month: u32,
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    pub second: u32,
    pub nano: u32,
    /// 0 = Sunday.
    pub weekday: u32,
    /// 1-based day of the year.
    pub yday: u32,
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// Days in a month of a year.
pub fn days_in(month: u32, year: i64) -> u32 {
    match month {
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// The location named like Go's `time.LoadLocation` names them; `None` when unknown.
pub fn load_location(name: &str) -> Option<Loc> {
    match name {
        "" | "UTC" => Some(Loc::Utc),
        "Local" => Some(Loc::Local),
        _ => TimeZone::get(name).ok().map(|tz| Loc::Zone(name.to_string(), tz)),
    }
}

pub(crate) const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
pub(crate) const DAYS: [&str; 7] = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];

/// A piece of a Go layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Std {
    Month,
    LongMonth,
    NumMonth,
    ZeroMonth,
    WeekDay,
    LongWeekDay,
    Day,
    UnderDay,
    ZeroDay,
    UnderYearDay,
    ZeroYearDay,
    Hour,
    Hour12,
    ZeroHour12,
    Minute,
    ZeroMinute,
    Second,
    ZeroSecond,
    LongYear,
    Year,
    Pm,
    LowerPm,
    Tz,
    /// `Z07…` (`z`: `Z` for UTC) or `-07…`: hours, then minutes and seconds when present, with colons.
    NumTz {
        z: bool,
        minutes: bool,
        seconds: bool,
        colon: bool,
    },
    /// Fractional seconds: separator, digit count, `9` (trailing zeros trimmed) or `0`.
    Frac {
        sep: u8,
        digits: usize,
        trim: bool,
    },
}

/// Go's `nextStdChunk`: the literal before the next layout element, the element, and the rest.
pub(crate) fn next_chunk(layout: &str) -> (&str, Option<Std>, &str) {
    let b = layout.as_bytes();
    let at = |i: usize, s: &str| layout.get(i..).is_some_and(|r| r.starts_with(s));
    for i in 0..b.len() {
        let (std, len) = match b[i] {
            b'J' if at(i, "January") => (Std::LongMonth, 7),
            b'J' if at(i, "Jan") => (Std::Month, 3),
            b'M' if at(i, "Monday") => (Std::LongWeekDay, 6),
            b'M' if at(i, "Mon") => (Std::WeekDay, 3),
            b'M' if at(i, "MST") => (Std::Tz, 3),
            b'0' if at(i, "002") => (Std::ZeroYearDay, 3),
            b'0' if b.get(i + 1).is_some_and(|c| (b'1'..=b'6').contains(c)) => {
                let s = [Std::ZeroMonth, Std::ZeroDay, Std::ZeroHour12, Std::ZeroMinute, Std::ZeroSecond, Std::Year];
                (s[usize::from(b[i + 1] - b'1')], 2)
            }
            b'1' if at(i, "15") => (Std::Hour, 2),
            b'1' => (Std::NumMonth, 1),
            b'2' if at(i, "2006") => (Std::LongYear, 4),
            b'2' => (Std::Day, 1),
            // `_2006` is a literal `_` and a year.
            b'_' if at(i, "_2006") => return (&layout[..i + 1], Some(Std::LongYear), &layout[i + 5..]),
            b'_' if at(i, "__2") => (Std::UnderYearDay, 3),
            b'_' if at(i, "_2") => (Std::UnderDay, 2),
            b'3' => (Std::Hour12, 1),
            b'4' => (Std::Minute, 1),
            b'5' => (Std::Second, 1),
            b'P' if at(i, "PM") => (Std::Pm, 2),
            b'p' if at(i, "pm") => (Std::LowerPm, 2),
            c @ (b'-' | b'Z') => {
                let z = c == b'Z';
                let forms: [(&str, bool, bool, bool); 5] = [
                    ("070000", true, true, false),
                    ("07:00:00", true, true, true),
                    ("0700", true, false, false),
                    ("07:00", true, false, true),
                    ("07", false, false, false),
                ];
                match forms.iter().find(|(f, ..)| at(i + 1, f)) {
                    Some((f, minutes, seconds, colon)) => {
                        (Std::NumTz { z, minutes: *minutes, seconds: *seconds, colon: *colon }, 1 + f.len())
                    }
                    None => continue,
                }
            }
            c @ (b'.' | b',') if b.get(i + 1).is_some_and(|d| *d == b'0' || *d == b'9') => {
                let d = b[i + 1];
                let mut j = i + 1;
                while j < b.len() && b[j] == d {
                    j += 1;
                }
                if b.get(j).is_some_and(u8::is_ascii_digit) {
                    continue;
                }
                (Std::Frac { sep: c, digits: j - i - 1, trim: d == b'9' }, j - i)
            }
            _ => continue,
        };
        return (&layout[..i], Some(std), &layout[i + len..]);
    }
    (layout, None, "")
}

fn pad(out: &mut String, x: i64, width: usize) {
    if x < 0 {
        out.push('-');
    }
    let digits = x.unsigned_abs().to_string();
    for _ in digits.len()..width {
        out.push('0');
    }
    out.push_str(&digits);
}

impl GoTime {
    /// Go's `Format(layout)`.
    pub fn format(&self, layout: &str) -> String {
        let c = self.civil();
        let (offset, name) = self.zone();
        let mut out = String::new();
        let mut rest = layout;
        loop {
            let (lit, std, after) = next_chunk(rest);
            out.push_str(lit);
            let Some(std) = std else { break };
            rest = after;
            let hour12 = match c.hour % 12 {
                0 => 12,
                h => h,
            };
            match std {
                Std::Year => pad(&mut out, c.year.rem_euclid(100), 2),
                Std::LongYear => pad(&mut out, c.year, 4),
                Std::Month => out.push_str(&MONTHS[c.month as usize - 1][..3]),
                Std::LongMonth => out.push_str(MONTHS[c.month as usize - 1]),
                Std::NumMonth => pad(&mut out, c.month.into(), 0),
                Std::ZeroMonth => pad(&mut out, c.month.into(), 2),
                Std::WeekDay => out.push_str(&DAYS[c.weekday as usize][..3]),
                Std::LongWeekDay => out.push_str(DAYS[c.weekday as usize]),
                Std::Day => pad(&mut out, c.day.into(), 0),
                Std::UnderDay => {
                    if c.day < 10 {
                        out.push(' ');
                    }
                    pad(&mut out, c.day.into(), 0)
                }
                Std::ZeroDay => pad(&mut out, c.day.into(), 2),
                Std::UnderYearDay => out.push_str(&format!("{:>3}", c.yday)),
                Std::ZeroYearDay => pad(&mut out, c.yday.into(), 3),
                Std::Hour => pad(&mut out, c.hour.into(), 2),
                Std::Hour12 => pad(&mut out, hour12.into(), 0),
                Std::ZeroHour12 => pad(&mut out, hour12.into(), 2),
                Std::Minute => pad(&mut out, c.minute.into(), 0),
                Std::ZeroMinute => pad(&mut out, c.minute.into(), 2),
                Std::Second => pad(&mut out, c.second.into(), 0),
                Std::ZeroSecond => pad(&mut out, c.second.into(), 2),
                Std::Pm => out.push_str(if c.hour >= 12 { "PM" } else { "AM" }),
                Std::LowerPm => out.push_str(if c.hour >= 12 { "pm" } else { "am" }),
                Std::Tz if !name.is_empty() => out.push_str(&name),
                Std::Tz => {
                    let zone = offset / 60;
                    out.push(if zone < 0 { '-' } else { '+' });
                    pad(&mut out, i64::from(zone.abs() / 60), 2);
                    pad(&mut out, i64::from(zone.abs() % 60), 2);
                }
                Std::NumTz { z: true, .. } if offset == 0 => out.push('Z'),
                Std::NumTz { minutes, seconds, colon, .. } => {
                    let zone = offset / 60;
                    out.push(if zone < 0 { '-' } else { '+' });
                    pad(&mut out, i64::from(zone.abs() / 60), 2);
                    if colon {
                        out.push(':');
                    }
                    if minutes {
                        pad(&mut out, i64::from(zone.abs() % 60), 2);
                    }
                    if seconds {
                        if colon {
                            out.push(':');
                        }
                        pad(&mut out, i64::from(offset.abs() % 60), 2);
                    }
                }
                Std::Frac { sep, digits, trim } => {
                    let all = format!("{:09}", c.nano);
                    let mut f = &all[..digits.min(9)];
                    if trim {
                        f = f.trim_end_matches('0');
                    }
                    if !f.is_empty() || !trim {
                        out.push(char::from(sep));
                        out.push_str(f);
                        for _ in 9..digits {
                            out.push('0');
                        }
                    }
                }
            }
        }
        out
    }
}

/// Go's `Duration.String()`: `1h2m3.5s`, `1.5ms`, `0s`.
pub fn format_duration(d: i64) -> String {
    let neg = d < 0;
    let u = d.unsigned_abs();
    let frac = |u: u64, prec: u32| -> (String, u64) {
        let p = 10u64.pow(prec);
        let f = format!("{:0width$}", u % p, width = prec as usize);
        let f = f.trim_end_matches('0');
        (if f.is_empty() { String::new() } else { format!(".{f}") }, u / p)
    };
    let body = if u == 0 {
        return "0s".into();
    } else if u < 1_000_000_000 {
        let (unit, prec) = match u {
            u if u < 1_000 => ("ns", 0),
            u if u < 1_000_000 => ("µs", 3),
            _ => ("ms", 6),
        };
        let (f, int) = frac(u, prec);
        format!("{int}{f}{unit}")
    } else {
        let (f, secs) = frac(u, 9);
        let (mins, hours) = (secs / 60, secs / 3600);
        match (hours, mins) {
            (0, 0) => format!("{}{f}s", secs % 60),
            (0, m) => format!("{m}m{}{f}s", secs % 60),
            (h, _) => format!("{h}h{}m{}{f}s", mins % 60, secs % 60),
        }
    };
    if neg { format!("-{body}") } else { body }
}

/// Go's `time.ParseDuration`: `300ms`, `-1.5h`, `2h45m`; units ns, us (µs, μs), ms, s, m, h.
pub fn parse_duration(text: &str) -> Result<i64, String> {
    let invalid = || format!("time: invalid duration {}", quote(text));
    let mut s = text;
    let mut neg = false;
    if let Some(r) = s.strip_prefix('-') {
        neg = true;
        s = r;
    } else if let Some(r) = s.strip_prefix('+') {
        s = r;
    }
    if s == "0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err(invalid());
    }
    let mut total: u128 = 0;
    while !s.is_empty() {
        let int_len = s.bytes().take_while(u8::is_ascii_digit).count();
        let int_part = &s[..int_len];
        s = &s[int_len..];
        let mut frac_part = "";
        if let Some(r) = s.strip_prefix('.') {
            let n = r.bytes().take_while(u8::is_ascii_digit).count();
            frac_part = &r[..n];
            s = &r[n..];
            if int_part.is_empty() && frac_part.is_empty() {
                return Err(invalid());
            }
        } else if int_part.is_empty() {
            return Err(invalid());
        }
        let unit_len = s.find(|c: char| c == '.' || c.is_ascii_digit()).unwrap_or(s.len());
        let unit = &s[..unit_len];
        s = &s[unit_len..];
        let scale: u128 = match unit {
            "" => return Err(format!("time: missing unit in duration {}", quote(text))),
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            other => return Err(format!("time: unknown unit {} in duration {}", quote(other), quote(text))),
        };
        let int: u128 = if int_part.is_empty() { 0 } else { int_part.parse().map_err(|_| invalid())? };
        let mut v = int.checked_mul(scale).ok_or_else(invalid)?;
        let mut f_scale = scale;
        for d in frac_part.bytes().take(30) {
            f_scale /= 10;
            v += u128::from(d - b'0') * f_scale;
        }
        total = total.checked_add(v).filter(|t| *t <= 1 << 63).ok_or_else(invalid)?;
    }
    if !neg && total > i64::MAX as u128 {
        return Err(invalid());
    }
    Ok(if neg { (-(total as i128)) as i64 } else { total as i64 })
}

fn quote(s: &str) -> String {
    crate::quote::go_quote(s)
}
