//! Go's `time.ParseInLocation` for the layouts of [`crate::gotime`].

use crate::gotime::{DAYS, GoTime, Loc, MONTHS, Std, days_from_civil, days_in, next_chunk};

/// Go's `ParseError` text.
fn parse_err(layout: &str, value: &str, elem: &str, rest: &str, msg: &str) -> String {
    let q = crate::quote::go_quote;
    if msg.is_empty() {
        format!("parsing time {} as {}: cannot parse {} as {}", q(value), q(layout), q(rest), q(elem))
    } else {
        format!("parsing time {}{msg}", q(value))
    }
}

/// One or two digits (`fixed`: exactly two).
fn getnum(s: &str, fixed: bool) -> Option<(i64, &str)> {
    let b = s.as_bytes();
    if !b.first()?.is_ascii_digit() {
        return None;
    }
    if !b.get(1).is_some_and(u8::is_ascii_digit) {
        if fixed {
            return None;
        }
        return Some((i64::from(b[0] - b'0'), &s[1..]));
    }
    Some((i64::from(b[0] - b'0') * 10 + i64::from(b[1] - b'0'), &s[2..]))
}

/// Exactly `n` digits.
fn digits(s: &str, n: usize) -> Option<(i64, &str)> {
    let d = s.get(..n)?;
    if !d.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    Some((d.parse().ok()?, &s[n..]))
}

fn lookup<'a>(names: &[&str], s: &'a str, short: bool) -> Option<(usize, &'a str)> {
    names.iter().enumerate().find_map(|(i, n)| {
        let n = if short { &n[..3] } else { n };
        let head = s.get(..n.len())?;
        head.eq_ignore_ascii_case(n).then(|| (i, &s[n.len()..]))
    })
}

/// A zone abbreviation: three to five upper-case letters (`MST`, `CEST`, `ChST`), or `GMT±h`.
fn zone_name(s: &str) -> Option<usize> {
    if s.len() < 3 {
        return None;
    }
    if s.starts_with("ChST") || s.starts_with("MeST") {
        return Some(4);
    }
    if let Some(r) = s.strip_prefix("GMT") {
        let sign = r.bytes().next();
        if !matches!(sign, Some(b'+' | b'-')) {
            return Some(3);
        }
        let n = r[1..].bytes().take_while(u8::is_ascii_digit).count();
        return Some(if n == 0 { 3 } else { 4 + n });
    }
    let n = s.bytes().take_while(u8::is_ascii_uppercase).count();
    match n {
        3 => Some(3),
        4 | 5 if s.as_bytes()[n - 1] == b'T' => Some(n),
        4 if s.as_bytes()[3] == b'T' => Some(4),
        _ => None,
    }
}

#[derive(Default)]
struct Fields {
    year: i64,
    month: Option<i64>,
    day: Option<i64>,
    yday: Option<i64>,
    hour: i64,
    min: i64,
    sec: i64,
    nsec: i64,
    pm: Option<bool>,
    utc: bool,
    offset: Option<i64>,
    zone: Option<String>,
}

/// Parses `value` as `layout`; a time without zone information is in `default`.
pub fn parse(layout: &str, value: &str, default: Loc) -> Result<GoTime, String> {
    let mut f = Fields { year: 1, ..Fields::default() };
    let (mut lay, mut val) = (layout, value);
    loop {
        let (lit, std, after) = next_chunk(lay);
        let elem = &lay[lit.len()..lay.len() - after.len()];
        val = val.strip_prefix(lit).ok_or_else(|| parse_err(layout, value, lit, val, ""))?;
        let Some(std) = std else {
            if !val.is_empty() {
                return Err(parse_err(
                    layout,
                    value,
                    "",
                    val,
                    &format!(": extra text: {}", crate::quote::go_quote(val)),
                ));
            }
            break;
        };
        lay = after;
        let hold = val;
        let bad = || parse_err(layout, value, elem, hold, "");
        let range = |what: &str| parse_err(layout, value, elem, hold, &format!(": {what} out of range"));
        val = match std {
            Std::Year => {
                let (y, r) = digits(val, 2).ok_or_else(bad)?;
                f.year = if y >= 69 { y + 1900 } else { y + 2000 };
                r
            }
            Std::LongYear => {
                let (y, r) = digits(val, 4).ok_or_else(bad)?;
                f.year = y;
                r
            }
            Std::Month | Std::LongMonth => {
                let (m, r) = lookup(&MONTHS, val, std == Std::Month).ok_or_else(bad)?;
                f.month = Some(m as i64 + 1);
                r
            }
            Std::NumMonth | Std::ZeroMonth => {
                let (m, r) = getnum(val, std == Std::ZeroMonth).ok_or_else(bad)?;
                if !(1..=12).contains(&m) {
                    return Err(range("month"));
                }
                f.month = Some(m);
                r
            }
            Std::WeekDay | Std::LongWeekDay => lookup(&DAYS, val, std == Std::WeekDay).ok_or_else(bad)?.1,
            Std::Day | Std::UnderDay | Std::ZeroDay => {
                let v = if std == Std::UnderDay { val.strip_prefix(' ').unwrap_or(val) } else { val };
                let (d, r) = getnum(v, std == Std::ZeroDay).ok_or_else(bad)?;
                f.day = Some(d);
                r
            }
            Std::UnderYearDay | Std::ZeroYearDay => {
                let v = if std == Std::UnderYearDay { val.trim_start_matches(' ') } else { val };
                let n = v.bytes().take(3).take_while(u8::is_ascii_digit).count();
                if n == 0 || (std == Std::ZeroYearDay && n < 3) {
                    return Err(bad());
                }
                let (d, r) = digits(v, n).ok_or_else(bad)?;
                f.yday = Some(d);
                r
            }
            Std::Hour | Std::Hour12 | Std::ZeroHour12 => {
                let (h, r) = getnum(val, std == Std::ZeroHour12).ok_or_else(bad)?;
                if h > if std == Std::Hour { 23 } else { 12 } {
                    return Err(range("hour"));
                }
                f.hour = h;
                r
            }
            Std::Minute | Std::ZeroMinute => {
                let (m, r) = getnum(val, std == Std::ZeroMinute).ok_or_else(bad)?;
                if m > 59 {
                    return Err(range("minute"));
                }
                f.min = m;
                r
            }
            Std::Second | Std::ZeroSecond => {
                let (s, mut r) = getnum(val, std == Std::ZeroSecond).ok_or_else(bad)?;
                if s > 59 {
                    return Err(range("second"));
                }
                f.sec = s;
                // A fraction the layout does not name is read all the same, as Go does.
                let next_is_frac = matches!(next_chunk(lay).1, Some(Std::Frac { .. })) && next_chunk(lay).0.is_empty();
                if !next_is_frac
                    && r.len() >= 2
                    && matches!(r.as_bytes()[0], b'.' | b',')
                    && r.as_bytes()[1].is_ascii_digit()
                {
                    let n = r[1..].bytes().take_while(u8::is_ascii_digit).count();
                    f.nsec = frac_nanos(&r[1..1 + n]);
                    r = &r[1 + n..];
                }
                r
            }
            Std::Pm | Std::LowerPm => {
                let (am, pm) = if std == Std::Pm { ("AM", "PM") } else { ("am", "pm") };
                match val.get(..2) {
                    Some(x) if x == am => f.pm = Some(false),
                    Some(x) if x == pm => f.pm = Some(true),
                    _ => return Err(bad()),
                }
                &val[2..]
            }
            Std::NumTz { z, minutes, seconds, colon } => {
                if z && val.starts_with('Z') {
                    f.utc = true;
                    &val[1..]
                } else {
                    let sign = match val.as_bytes().first() {
                        Some(b'+') => 1,
                        Some(b'-') => -1,
                        _ => return Err(bad()),
                    };
                    let (h, mut r) = digits(&val[1..], 2).ok_or_else(bad)?;
                    let (mut m, mut s) = (0, 0);
                    if minutes {
                        if colon {
                            r = r.strip_prefix(':').ok_or_else(bad)?;
                        }
                        (m, r) = digits(r, 2).ok_or_else(bad)?;
                    }
                    if seconds {
                        if colon {
                            r = r.strip_prefix(':').ok_or_else(bad)?;
                        }
                        (s, r) = digits(r, 2).ok_or_else(bad)?;
                    }
                    if h > 24 || m > 60 || s > 60 {
                        return Err(range("time zone offset"));
                    }
                    f.offset = Some(sign * (h * 3600 + m * 60 + s));
                    r
                }
            }
            Std::Tz => {
                if let Some(rest) = val.strip_prefix("UTC") {
                    f.utc = true;
                    rest
                } else {
                    let n = zone_name(val).ok_or_else(bad)?;
                    f.zone = Some(val[..n].to_string());
                    &val[n..]
                }
            }
            Std::Frac { digits: n, trim, .. } => {
                let b = val.as_bytes();
                if trim {
                    if b.len() < 2 || !matches!(b[0], b'.' | b',') || !b[1].is_ascii_digit() {
                        val
                    } else {
                        let k = val[1..].bytes().take_while(u8::is_ascii_digit).count();
                        f.nsec = frac_nanos(&val[1..1 + k]);
                        &val[1 + k..]
                    }
                } else {
                    let ok = b.len() > n && matches!(b[0], b'.' | b',') && b[1..=n].iter().all(u8::is_ascii_digit);
                    if !ok {
                        return Err(bad());
                    }
                    f.nsec = frac_nanos(&val[1..=n]);
                    &val[1 + n..]
                }
            }
        };
    }
    build(layout, value, f, default)
}

fn frac_nanos(d: &str) -> i64 {
    let mut n: i64 = 0;
    for (i, c) in d.bytes().take(9).enumerate() {
        n += i64::from(c - b'0') * 10i64.pow(8 - i as u32);
    }
    n
}

fn build(layout: &str, value: &str, mut f: Fields, default: Loc) -> Result<GoTime, String> {
    match f.pm {
        Some(true) if f.hour < 12 => f.hour += 12,
        Some(false) if f.hour == 12 => f.hour = 0,
        _ => {}
    }
    if let Some(yday) = f.yday {
        let leap = days_in(2, f.year) == 29;
        if yday < 1 || yday > if leap { 366 } else { 365 } {
            return Err(parse_err(layout, value, "", value, ": day-of-year out of range"));
        }
        let mut m = 1u32;
        let mut d = yday;
        while d > i64::from(days_in(m, f.year)) {
            d -= i64::from(days_in(m, f.year));
            m += 1;
        }
        if f.month.is_some_and(|x| x != i64::from(m)) || f.day.is_some_and(|x| x != d) {
            return Err(parse_err(layout, value, "", value, ": day-of-year does not match month"));
        }
        f.month = Some(i64::from(m));
        f.day = Some(d);
    }
    let month = f.month.unwrap_or(1) as u32;
    let day = f.day.unwrap_or(1);
    if day < 1 || day > i64::from(days_in(month, f.year)) {
        return Err(parse_err(layout, value, "", value, ": day out of range"));
    }
    let secs = days_from_civil(f.year, month, day as u32) * 86_400 + f.hour * 3600 + f.min * 60 + f.sec;
    let wall = i128::from(secs) * 1_000_000_000 + i128::from(f.nsec);
    let at = |off: i64, loc: Loc| GoTime { nanos: wall - i128::from(off) * 1_000_000_000, loc, mono: None };
    if f.utc {
        return Ok(at(0, Loc::Utc));
    }
    if let Some(off) = f.offset {
        // An offset that is the default zone's at that instant keeps the default zone.
        let t = at(off, default.clone());
        if i64::from(t.zone().0) == off {
            return Ok(t);
        }
        return Ok(at(off, Loc::Fixed(String::new(), off as i32)));
    }
    if let Some(name) = f.zone {
        let t = at(0, default.clone());
        if t.zone().1 == name {
            return Ok(t);
        }
        let off = name.strip_prefix("GMT").and_then(|h| h.parse::<i64>().ok()).map_or(0, |h| h * 3600);
        return Ok(at(off, Loc::Fixed(name, off as i32)));
    }
    // The wall clock in the default zone.
    let guess = at(0, default.clone());
    let off = i64::from(guess.zone().0);
    let t = at(off, default.clone());
    let off2 = i64::from(t.zone().0);
    Ok(if off2 == off { t } else { at(off2, default) })
}
