//! Runtime values of the template engine.
//!
//! Values mirror the Go types templates work with: `nil`, booleans, integers, floats, strings,
//! byte strings (Secret values that are not UTF-8), lists and maps. Maps are shared by reference,
//! like Go maps, so `set` on a dict is visible through every variable holding it. Maps keep their
//! keys sorted, which gives the same iteration order as Go's `range` over a map.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::rc::Rc;

pub use crate::object::Obj;

/// A shared, mutable map (Go `map[string]interface{}`).
pub type MapRef = Rc<RefCell<BTreeMap<String, Value>>>;

/// A template value.
#[derive(Clone, Debug, Default)]
pub enum Value {
    /// Go `nil`.
    #[default]
    Nil,
    /// A boolean.
    Bool(bool),
    /// An integer of Go type `int` (constants, `len`, `atoi`, `int`).
    Int(i64),
    /// An integer of Go type `int64` (Sprig's integer math: `add`, `mul`, `int64`, …). Prints
    /// and compares like [`Value::Int`]; only reflection (`typeOf`, `kindOf`, `deepEqual`) and
    /// the functions that read `int64` only (`duration`, `durationRound`) tell them apart.
    Int64(i64),
    /// A floating-point number (Go `float64`).
    Float(f64),
    /// A UTF-8 string.
    Str(String),
    /// A byte string that is not valid UTF-8 (for example a binary Secret value).
    Bytes(Vec<u8>),
    /// A list (Go slice). Shared on clone; lists are never mutated in place.
    List(Rc<Vec<Value>>),
    /// A map with string keys.
    Map(MapRef),
    /// A Go value with methods: a `time.Time` (`now`, `toDate`) or a `*semver.Version`.
    Obj(Rc<Obj>),
}

impl Value {
    /// A string value.
    pub fn str(s: impl Into<String>) -> Self {
        Value::Str(s.into())
    }

    /// A string value from bytes: `Str` when the bytes are UTF-8, else `Bytes`.
    pub fn from_bytes(b: Vec<u8>) -> Self {
        match String::from_utf8(b) {
            Ok(s) => Value::Str(s),
            Err(e) => Value::Bytes(e.into_bytes()),
        }
    }

    /// A list value.
    pub fn list(items: Vec<Value>) -> Self {
        Value::List(Rc::new(items))
    }

    /// Size of the value when printed or copied: one per node plus the bytes of its strings.
    /// Counting stops once it exceeds `cap`, and nesting deeper than `max_depth` counts as
    /// `usize::MAX`, so the cost of the check is bounded too.
    pub fn weight(&self, cap: usize, max_depth: usize) -> usize {
        fn walk(v: &Value, cap: usize, depth: usize, max_depth: usize, acc: &mut usize) {
            if *acc > cap {
                return;
            }
            if depth > max_depth {
                *acc = usize::MAX;
                return;
            }
            *acc = acc.saturating_add(1);
            match v {
                Value::Str(s) => *acc = acc.saturating_add(s.len()),
                Value::Bytes(b) => *acc = acc.saturating_add(b.len()),
                Value::List(l) => {
                    for e in l.iter() {
                        walk(e, cap, depth + 1, max_depth, acc);
                    }
                }
                Value::Map(m) => {
                    for (k, e) in m.borrow().iter() {
                        *acc = acc.saturating_add(k.len());
                        walk(e, cap, depth + 1, max_depth, acc);
                    }
                }
                _ => {}
            }
        }
        let mut acc = 0;
        walk(self, cap, 0, max_depth, &mut acc);
        acc
    }

    /// A map value.
    pub fn map(m: BTreeMap<String, Value>) -> Self {
        Value::Map(Rc::new(RefCell::new(m)))
    }

    /// The Go type name, used in error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Nil => "nil",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Int64(_) => "int64",
            Value::Float(_) => "float64",
            Value::Str(_) => "string",
            Value::Bytes(_) => "[]byte",
            Value::List(_) => "[]interface {}",
            Value::Map(_) => "map[string]interface {}",
            Value::Obj(o) => o.type_name(),
        }
    }

    /// Go truthiness: false, 0, nil and empty strings, lists and maps are false.
    pub fn truthy(&self) -> bool {
        match self {
            Value::Nil => false,
            Value::Bool(b) => *b,
            Value::Int(i) | Value::Int64(i) => *i != 0,
            Value::Float(f) => *f != 0.0,
            Value::Str(s) => !s.is_empty(),
            Value::Bytes(b) => !b.is_empty(),
            Value::List(l) => !l.is_empty(),
            Value::Map(m) => !m.borrow().is_empty(),
            // A struct or a non-nil pointer.
            Value::Obj(_) => true,
        }
    }

    /// The bytes of a string-like value, or its printed form.
    pub fn to_bytes(&self) -> Vec<u8> {
        match self {
            Value::Bytes(b) => b.clone(),
            other => other.to_display().into_bytes(),
        }
    }

    /// The value as text, the way `{{ . }}` and `%v` print it. Byte strings are converted lossily.
    pub fn to_display(&self) -> String {
        let mut out = String::new();
        self.write_display(&mut out);
        out
    }

    fn write_display(&self, out: &mut String) {
        match self {
            Value::Nil => out.push_str("<nil>"),
            Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Value::Int(i) | Value::Int64(i) => {
                let _ = write!(out, "{i}");
            }
            Value::Obj(o) => out.push_str(&o.display()),
            Value::Float(f) => out.push_str(&format_float_g(*f)),
            Value::Str(s) => out.push_str(s),
            Value::Bytes(b) => out.push_str(&String::from_utf8_lossy(b)),
            Value::List(l) => {
                out.push('[');
                for (i, v) in l.iter().enumerate() {
                    if i > 0 {
                        out.push(' ');
                    }
                    v.write_display(out);
                }
                out.push(']');
            }
            Value::Map(m) => {
                out.push_str("map[");
                for (i, (k, v)) in m.borrow().iter().enumerate() {
                    if i > 0 {
                        out.push(' ');
                    }
                    out.push_str(k);
                    out.push(':');
                    v.write_display(out);
                }
                out.push(']');
            }
        }
    }

    /// The integer of an `int` or `int64`.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Value::Int(i) | Value::Int64(i) => Some(*i),
            _ => None,
        }
    }

    /// Length of a string (bytes), list or map.
    pub fn length(&self) -> Option<usize> {
        match self {
            Value::Str(s) => Some(s.len()),
            Value::Bytes(b) => Some(b.len()),
            Value::List(l) => Some(l.len()),
            Value::Map(m) => Some(m.borrow().len()),
            _ => None,
        }
    }

    /// Deep copy: maps are copied instead of shared.
    pub fn deep_clone(&self) -> Value {
        match self {
            Value::List(l) => Value::list(l.iter().map(Value::deep_clone).collect()),
            Value::Map(m) => Value::map(m.borrow().iter().map(|(k, v)| (k.clone(), v.deep_clone())).collect()),
            other => other.clone(),
        }
    }

    /// Convert to a JSON value (byte strings become lossy strings).
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value as J;
        match self {
            Value::Nil => J::Null,
            Value::Bool(b) => J::Bool(*b),
            Value::Int(i) | Value::Int64(i) => J::from(*i),
            Value::Obj(o) => J::String(o.json_text()),
            Value::Float(f) => serde_json::Number::from_f64(*f).map(J::Number).unwrap_or(J::Null),
            Value::Str(_) | Value::Bytes(_) => J::String(self.to_display()),
            Value::List(l) => J::Array(l.iter().map(Value::to_json).collect()),
            Value::Map(m) => J::Object(m.borrow().iter().map(|(k, v)| (k.clone(), v.to_json())).collect()),
        }
    }

    /// Convert from a JSON value. Numbers become floats, like Go's `encoding/json`.
    pub fn from_json(j: &serde_json::Value) -> Value {
        use serde_json::Value as J;
        match j {
            J::Null => Value::Nil,
            J::Bool(b) => Value::Bool(*b),
            J::Number(n) => Value::Float(n.as_f64().unwrap_or(0.0)),
            J::String(s) => Value::Str(s.clone()),
            J::Array(a) => Value::list(a.iter().map(Value::from_json).collect()),
            J::Object(o) => Value::map(o.iter().map(|(k, v)| (k.clone(), Value::from_json(v))).collect()),
        }
    }

    /// Convert from a YAML value. Integers stay integers, like Go's YAML decoders.
    pub fn from_yaml(y: &serde_yaml::Value) -> Value {
        use serde_yaml::Value as Y;
        match y {
            Y::Null => Value::Nil,
            Y::Bool(b) => Value::Bool(*b),
            Y::Number(n) => match n.as_i64() {
                Some(i) => Value::Int(i),
                None => Value::Float(n.as_f64().unwrap_or(0.0)),
            },
            Y::String(s) => Value::Str(s.clone()),
            Y::Sequence(a) => Value::list(a.iter().map(Value::from_yaml).collect()),
            Y::Mapping(m) => {
                Value::map(m.iter().map(|(k, v)| (Value::from_yaml(k).to_display(), Value::from_yaml(v))).collect())
            }
            Y::Tagged(t) => Value::from_yaml(&t.value),
        }
    }

    /// Convert to a YAML value.
    pub fn to_yaml(&self) -> serde_yaml::Value {
        use serde_yaml::Value as Y;
        match self {
            Value::Nil => Y::Null,
            Value::Bool(b) => Y::Bool(*b),
            Value::Int(i) | Value::Int64(i) => Y::Number((*i).into()),
            Value::Obj(o) => Y::String(o.json_text()),
            Value::Float(f) => Y::Number((*f).into()),
            Value::Str(_) | Value::Bytes(_) => Y::String(self.to_display()),
            Value::List(l) => Y::Sequence(l.iter().map(Value::to_yaml).collect()),
            Value::Map(m) => Y::Mapping(m.borrow().iter().map(|(k, v)| (Y::String(k.clone()), v.to_yaml())).collect()),
        }
    }
}

/// Format a float like Go's `%v` (`strconv.FormatFloat(f, 'g', -1, 64)`).
pub fn format_float_g(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf".into() } else { "-Inf".into() };
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0".into() } else { "0".into() };
    }
    // Shortest round-trip digits and exponent, from Rust's `{:e}` ("1.2345e6").
    let sci = format!("{:e}", f.abs());
    let (mant, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mant.chars().filter(|c| c.is_ascii_digit()).collect();
    let sign = if f < 0.0 { "-" } else { "" };
    // Go uses the exponent form when the exponent is below -4 or at least 6 (shortest precision).
    if !(-4..6).contains(&exp) {
        return format_exp(sign, &digits, exp);
    }
    let mut out = String::from(sign);
    if exp < 0 {
        out.push_str("0.");
        for _ in 0..(-exp - 1) {
            out.push('0');
        }
        out.push_str(&digits);
    } else {
        let int_len = (exp + 1) as usize;
        if digits.len() <= int_len {
            out.push_str(&digits);
            for _ in digits.len()..int_len {
                out.push('0');
            }
        } else {
            out.push_str(&digits[..int_len]);
            out.push('.');
            out.push_str(&digits[int_len..]);
        }
    }
    out
}

fn format_exp(sign: &str, digits: &str, exp: i32) -> String {
    let mut out = String::from(sign);
    out.push_str(&digits[..1]);
    if digits.len() > 1 {
        out.push('.');
        out.push_str(&digits[1..]);
    }
    let _ = write!(out, "e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs());
    out
}

/// Format a float like Go's `encoding/json` (positional unless very small or large).
pub fn format_float_json(f: f64) -> String {
    if f == 0.0 || !f.is_finite() {
        return if f.is_finite() { "0".into() } else { "null".into() };
    }
    let abs = f.abs();
    let sci = format!("{abs:e}");
    let (mant, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mant.chars().filter(|c| c.is_ascii_digit()).collect();
    let sign = if f < 0.0 { "-" } else { "" };
    if !(1e-6..1e21).contains(&abs) {
        let mut out = String::from(sign);
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let _ = write!(out, "e{}{}", if exp < 0 { '-' } else { '+' }, exp.abs());
        return out;
    }
    let mut out = String::from(sign);
    if exp < 0 {
        out.push_str("0.");
        for _ in 0..(-exp - 1) {
            out.push('0');
        }
        out.push_str(&digits);
    } else {
        let int_len = (exp + 1) as usize;
        if digits.len() <= int_len {
            out.push_str(&digits);
            for _ in digits.len()..int_len {
                out.push('0');
            }
        } else {
            out.push_str(&digits[..int_len]);
            out.push('.');
            out.push_str(&digits[int_len..]);
        }
    }
    out
}
