//! Go values with methods that functions return: `time.Time` (`now`, `toDate`, `dateModify`)
//! and `*semver.Version` (`semver`). A template reads their methods without arguments as
//! fields: `{{ (now).Unix }}`, `{{ $v.Major }}`.

use crate::gotime::{DAYS, GoTime, Loc, MONTHS};
use crate::semver::Version;
use crate::value::Value;

/// A value with methods.
#[derive(Clone, Debug, PartialEq)]
pub enum Obj {
    /// A Go `time.Time`.
    Time(GoTime),
    /// A `*semver.Version`.
    Version(Version),
}

impl Obj {
    /// The Go type, as `typeOf` and `%T` print it.
    pub fn type_name(&self) -> &'static str {
        match self {
            Obj::Time(_) => "time.Time",
            Obj::Version(_) => "*semver.Version",
        }
    }

    /// The Go kind, as `kindOf` prints it.
    pub fn kind(&self) -> &'static str {
        match self {
            Obj::Time(_) => "struct",
            Obj::Version(_) => "ptr",
        }
    }

    /// How `{{ . }}` prints it (both have a `String` method).
    pub fn display(&self) -> String {
        match self {
            Obj::Time(t) => t.display(),
            Obj::Version(v) => v.display(),
        }
    }

    /// The string their `MarshalJSON` writes.
    pub fn json_text(&self) -> String {
        match self {
            Obj::Time(t) => t.rfc3339(),
            Obj::Version(v) => v.display(),
        }
    }

    /// A method without arguments, read as a field.
    pub fn method(&self, name: &str) -> Option<Value> {
        match self {
            Obj::Time(t) => time_method(t, name),
            Obj::Version(v) => Some(match name {
                "Major" => Value::Int64(v.major as i64),
                "Minor" => Value::Int64(v.minor as i64),
                "Patch" => Value::Int64(v.patch as i64),
                "Prerelease" => Value::str(&v.pre),
                "Metadata" => Value::str(&v.metadata),
                "Original" => Value::str(&v.original),
                "String" => Value::str(v.display()),
                _ => return None,
            }),
        }
    }
}

fn time_method(t: &GoTime, name: &str) -> Option<Value> {
    let c = t.civil();
    let obj = |t: GoTime| Value::Obj(std::rc::Rc::new(Obj::Time(t)));
    Some(match name {
        "Unix" => Value::Int64(t.unix_secs()),
        "UnixMilli" => Value::Int64(t.nanos.div_euclid(1_000_000) as i64),
        "UnixMicro" => Value::Int64(t.nanos.div_euclid(1_000) as i64),
        "UnixNano" => Value::Int64(t.nanos as i64),
        "Year" => Value::Int(c.year),
        "Month" => Value::str(MONTHS[c.month as usize - 1]),
        "Day" => Value::Int(c.day.into()),
        "Hour" => Value::Int(c.hour.into()),
        "Minute" => Value::Int(c.minute.into()),
        "Second" => Value::Int(c.second.into()),
        "Nanosecond" => Value::Int(c.nano.into()),
        "YearDay" => Value::Int(c.yday.into()),
        "Weekday" => Value::str(DAYS[c.weekday as usize]),
        "IsZero" => Value::Bool(t.nanos == GoTime::zero().nanos),
        "UTC" => obj(GoTime { loc: Loc::Utc, ..t.clone() }),
        "Local" => obj(GoTime { loc: Loc::Local, ..t.clone() }),
        "String" => Value::str(t.display()),
        _ => return None,
    })
}
