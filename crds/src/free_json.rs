//! Free-form JSON that tenants write: every `x-kubernetes-preserve-unknown-fields` subtree of a
//! Keyward kind (PushSecret `metadata`, a store's `spec.provider.<key>` blocks Keyward does not
//! type, GeneratorState `resource` and `state`, VaultDynamicSecret `parameters`, a Webhook
//! generator's spec).
//!
//! The API server keeps such a subtree as written, up to the object's 1.5 MB, and decoded into
//! `serde_json::Value` it costs 16 to 32 bytes per 2 bytes of text (`[0,0,…]`): one object is
//! tens of MiB in a process every tenant shares. So these fields are never decoded into a tree
//! where they arrive. [`FreeJson`] keeps the compact JSON text, counted as it is read, and
//! decodes it only where it is used ([`FreeJson::value`]); past any one limit below it keeps
//! nothing but what it measured ([`Oversized`]), so a shared cache holds at most the limits per
//! field whatever a tenant wrote. The same measure is the admission rule ([`FreeJson::check`]):
//! the webhook denies such a subtree naming its field, and the reconciler and the providers
//! refuse to use one that was written while the webhook was not there.
//!
//! The limits are far above what the providers read there (labels, annotations and a namespace
//! for a push; a generator manifest; a Vault request body), and they are the one place these
//! numbers live.

use std::fmt;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde::ser::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::rules::FieldError;

/// Most bytes of compact JSON text one free-form field keeps.
pub const MAX_FREE_JSON_BYTES: usize = 64 * 1024;
/// Deepest nesting of objects and arrays in one free-form field (`{"a": [1]}` is 2 deep).
pub const MAX_FREE_JSON_DEPTH: usize = 16;
/// Most values (scalars, objects and arrays, the field's own included) in one free-form field.
pub const MAX_FREE_JSON_VALUES: usize = 4096;

/// The limit a free-form field passed first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// [`MAX_FREE_JSON_BYTES`].
    Bytes,
    /// [`MAX_FREE_JSON_DEPTH`].
    Depth,
    /// [`MAX_FREE_JSON_VALUES`].
    Values,
}

/// What was measured of a free-form field that passed a limit (its content is not kept).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Oversized {
    /// The limit passed first.
    pub limit: Limit,
    /// Bytes of compact JSON text, all of it.
    pub bytes: usize,
    /// Values, all of them.
    pub values: usize,
    /// The deepest nesting seen.
    pub depth: usize,
}

impl fmt::Display for Oversized {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let passed = match self.limit {
            Limit::Bytes => "bytes",
            Limit::Depth => "levels of nesting",
            Limit::Values => "values",
        };
        write!(
            f,
            "free-form JSON of {} bytes, {} values, {} levels deep is more than Keyward keeps ({passed} passed the \
             limit; at most {MAX_FREE_JSON_BYTES} bytes, {MAX_FREE_JSON_VALUES} values and {MAX_FREE_JSON_DEPTH} \
             levels in one field)",
            self.bytes, self.values, self.depth
        )
    }
}

/// Counts a capture against the limits; once one is passed, nothing more is written.
#[derive(Debug, Default)]
struct Meter {
    bytes: usize,
    values: usize,
    depth: usize,
    over: Option<Limit>,
}

impl Meter {
    fn pass(&mut self, limit: Limit) {
        self.over.get_or_insert(limit);
    }

    /// One more value at nesting `depth` (a container counts its own level).
    fn value(&mut self, depth: usize) {
        self.values = self.values.saturating_add(1);
        self.depth = self.depth.max(depth);
        if self.values > MAX_FREE_JSON_VALUES {
            self.pass(Limit::Values);
        }
        if depth > MAX_FREE_JSON_DEPTH {
            self.pass(Limit::Depth);
        }
    }

    /// Counts `len` bytes of the compact form.
    fn count(&mut self, len: usize) {
        self.bytes = self.bytes.saturating_add(len);
        if self.bytes > MAX_FREE_JSON_BYTES {
            self.pass(Limit::Bytes);
        }
    }

    /// Text of the compact form, written while within the limits.
    fn emit(&mut self, out: &mut String, text: &str) {
        self.count(text.len());
        if self.over.is_none() {
            out.push_str(text);
        }
    }

    /// A JSON string, escaped.
    fn emit_str(&mut self, out: &mut String, s: &str) {
        match serde_json::to_string(s) {
            Ok(quoted) => self.emit(out, &quoted),
            // Serialising a str cannot fail; counted as its bytes if it ever did.
            Err(_) => self.count(s.len()),
        }
    }

    fn oversized(&self) -> Option<Oversized> {
        self.over.map(|limit| Oversized { limit, bytes: self.bytes, values: self.values, depth: self.depth })
    }
}

/// Reads one value of any self-describing input (JSON, YAML, a `serde_json::Value`) and writes
/// its compact JSON text while the meter allows.
struct Capture<'a> {
    out: &'a mut String,
    meter: &'a mut Meter,
    /// Nesting of the containers around the value.
    depth: usize,
}

impl<'de> DeserializeSeed<'de> for Capture<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl Capture<'_> {
    fn scalar<E>(self, text: &str) -> Result<(), E> {
        self.meter.value(self.depth);
        self.meter.emit(self.out, text);
        Ok(())
    }

    /// The seed of the next element or member value, after a comma unless it is the first.
    fn nested(&mut self, first: bool) -> Element<'_> {
        Element { capture: Capture { out: self.out, meter: self.meter, depth: self.depth + 1 }, comma: !first }
    }
}

/// An element of an array: the comma before it is written only once it is known to exist.
struct Element<'a> {
    capture: Capture<'a>,
    comma: bool,
}

impl<'de> DeserializeSeed<'de> for Element<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        if self.comma {
            self.capture.meter.emit(self.capture.out, ",");
        }
        d.deserialize_any(self.capture)
    }
}

impl<'de> Visitor<'de> for Capture<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<(), E> {
        self.scalar(if v { "true" } else { "false" })
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<(), E> {
        self.scalar(&v.to_string())
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<(), E> {
        self.scalar(&v.to_string())
    }

    fn visit_i128<E: de::Error>(self, v: i128) -> Result<(), E> {
        self.scalar(&v.to_string())
    }

    fn visit_u128<E: de::Error>(self, v: u128) -> Result<(), E> {
        self.scalar(&v.to_string())
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<(), E> {
        // JSON has no NaN or infinity: written as null, as serde_json writes them.
        let text = serde_json::to_string(&v).unwrap_or_else(|_| "null".into());
        self.scalar(&text)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        self.meter.value(self.depth);
        self.meter.emit_str(self.out, v);
        Ok(())
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.scalar("null")
    }

    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        self.scalar("null")
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        self.meter.value(self.depth + 1);
        self.meter.emit(self.out, "[");
        let mut first = true;
        while seq.next_element_seed(self.nested(first))?.is_some() {
            first = false;
        }
        self.meter.emit(self.out, "]");
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
        self.meter.value(self.depth + 1);
        self.meter.emit(self.out, "{");
        let mut first = true;
        while let Some(key) = map.next_key_seed(Key)? {
            if !first {
                self.meter.emit(self.out, ",");
            }
            self.meter.emit_str(self.out, &key);
            self.meter.emit(self.out, ":");
            map.next_value_seed(self.nested(true))?;
            first = false;
        }
        self.meter.emit(self.out, "}");
        Ok(())
    }
}

/// A member name: JSON's are strings; YAML may write a number or a boolean, which JSON spells
/// as a string.
struct Key;

impl<'de> DeserializeSeed<'de> for Key {
    type Value = String;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<String, D::Error> {
        d.deserialize_any(self)
    }
}

impl Visitor<'_> for Key {
    type Value = String;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a member name")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
        Ok(v.to_string())
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<String, E> {
        Ok(v.to_string())
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<String, E> {
        Ok(v.to_string())
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<String, E> {
        Ok(v.to_string())
    }
}

/// Which free-form field could not be used, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FreeJsonError {
    /// Past a limit: nothing of it was kept.
    #[error("{0}")]
    Oversized(Oversized),
    /// The kept text did not read back (never expected: it was written by [`Capture`]).
    #[error("free-form JSON does not read back: {0}")]
    Unreadable(String),
}

/// One free-form JSON value, kept as compact JSON text within the limits (see the module).
#[derive(Clone)]
pub struct FreeJson(Kept);

/// Equal when they hold the same JSON value: member order aside (what the API server sends is
/// sorted, what a `Value` writes is too, so the texts are usually the same and nothing is
/// decoded).
impl PartialEq for FreeJson {
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (Kept::Text(a), Kept::Text(b)) => a == b || self.value().ok() == other.value().ok(),
            (a, b) => a == b,
        }
    }
}

impl Eq for FreeJson {}

#[derive(Clone, PartialEq, Eq)]
enum Kept {
    Text(Box<str>),
    Oversized(Oversized),
}

impl FreeJson {
    /// The value measured from a decoded tree (what admission holds), by the same rule.
    pub fn from_value(value: &Value) -> FreeJson {
        // Every `Value` reads: `null` stands in for the error that cannot happen.
        FreeJson::deserialize(value).unwrap_or_else(|_| FreeJson(Kept::Text("null".into())))
    }

    /// The compact JSON text, or what was measured when it passed a limit.
    pub fn text(&self) -> Result<&str, FreeJsonError> {
        match &self.0 {
            Kept::Text(t) => Ok(t),
            Kept::Oversized(o) => Err(FreeJsonError::Oversized(*o)),
        }
    }

    /// The value decoded, for the one use that reads it.
    pub fn value(&self) -> Result<Value, FreeJsonError> {
        serde_json::from_str(self.text()?).map_err(|e| FreeJsonError::Unreadable(e.to_string()))
    }

    /// What was measured, when it passed a limit.
    pub fn oversized(&self) -> Option<Oversized> {
        match &self.0 {
            Kept::Oversized(o) => Some(*o),
            Kept::Text(_) => None,
        }
    }

    /// Whether it is a JSON object (an oversized value is not known to be one).
    pub fn is_object(&self) -> bool {
        matches!(&self.0, Kept::Text(t) if t.starts_with('{'))
    }

    /// Whether it is JSON `null`.
    pub fn is_null(&self) -> bool {
        matches!(&self.0, Kept::Text(t) if &**t == "null")
    }

    /// The admission rule, and the runtime one: the field `field` within the limits.
    pub fn check(&self, field: &str) -> Result<(), FieldError> {
        match self.oversized() {
            Some(o) => Err(FieldError::new(field, o.to_string())),
            None => Ok(()),
        }
    }

    fn finish(out: String, meter: &Meter) -> FreeJson {
        match meter.oversized() {
            Some(o) => FreeJson(Kept::Oversized(o)),
            None => FreeJson(Kept::Text(out.into_boxed_str())),
        }
    }
}

impl fmt::Debug for FreeJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Kept::Text(t) => write!(f, "FreeJson({t})"),
            Kept::Oversized(o) => write!(f, "FreeJson(not kept: {o})"),
        }
    }
}

impl From<Value> for FreeJson {
    fn from(value: Value) -> Self {
        FreeJson::from_value(&value)
    }
}

impl<'de> Deserialize<'de> for FreeJson {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let (mut out, mut meter) = (String::new(), Meter::default());
        Capture { out: &mut out, meter: &mut meter, depth: 0 }.deserialize(d)?;
        Ok(FreeJson::finish(out, &meter))
    }
}

/// Written back as the value it holds (decoded for the one write: a status or a request). One
/// that was not kept cannot be written: an error, never a silent `null`.
impl Serialize for FreeJson {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.value().map_err(S::Error::custom)?.serialize(s)
    }
}

/// Any JSON value; the field that holds one says `x-kubernetes-preserve-unknown-fields`.
impl JsonSchema for FreeJson {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "FreeJson".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!(true)
    }
}

/// The members of a JSON object kept as free-form JSON (a store's `spec.provider` blocks that
/// Keyward does not type, a Webhook generator's spec): all of them together are one field for
/// the limits, 1 deep at the object itself.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct FreeJsonMap {
    members: Vec<(String, FreeJson)>,
    oversized: Option<Oversized>,
}

impl FreeJsonMap {
    /// The member `name`.
    pub fn get(&self, name: &str) -> Option<&FreeJson> {
        self.members.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }

    /// The member names, in the order written (none once the members passed a limit).
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.members.iter().map(|(n, _)| n.as_str())
    }

    /// Whether there are no members (and none were dropped).
    pub fn is_empty(&self) -> bool {
        self.members.is_empty() && self.oversized.is_none()
    }

    /// What was measured, when the members passed a limit (none of them is kept then).
    pub fn oversized(&self) -> Option<Oversized> {
        self.oversized
    }

    /// The admission rule, and the runtime one, for the members at `field`.
    pub fn check(&self, field: &str) -> Result<(), FieldError> {
        match self.oversized {
            Some(o) => Err(FieldError::new(field, o.to_string())),
            None => Ok(()),
        }
    }

    /// Drops the content of every member `keep` turns down, keeping the names (what is set is
    /// still known; what a process does not read is not held).
    pub fn keep_content(&mut self, keep: impl Fn(&str) -> bool) {
        for (name, value) in &mut self.members {
            if !keep(name) {
                *value = FreeJson(Kept::Text("null".into()));
            }
        }
    }

    /// The members of the object `value`, measured by the same rule (admission's tree).
    pub fn from_value(value: &Value) -> Result<FreeJsonMap, serde_json::Error> {
        FreeJsonMap::deserialize(value)
    }

    /// Reads the members of a map whose first `typed` members a caller reads itself: every
    /// member `claim` turns down is measured and kept here. The caller's own
    /// `Deserialize` uses it (serde's `flatten` would decode the rest into a tree first).
    pub fn read_rest<'de, A: MapAccess<'de>>(
        mut map: A,
        mut claim: impl FnMut(&str, &mut A) -> Result<bool, A::Error>,
    ) -> Result<FreeJsonMap, A::Error> {
        let mut meter = Meter::default();
        // The object itself: one value, one level, its braces.
        meter.value(1);
        meter.count(2);
        let mut members = Vec::new();
        while let Some(name) = map.next_key::<String>()? {
            if claim(&name, &mut map)? {
                continue;
            }
            // The name, its colon and a comma, as in `{"a":…,"b":…}`.
            meter.count(serde_json::to_string(&name).map_or(name.len(), |q| q.len()) + 2);
            let mut out = String::new();
            map.next_value_seed(Capture { out: &mut out, meter: &mut meter, depth: 1 })?;
            if meter.over.is_none() {
                members.push((name, FreeJson(Kept::Text(out.into_boxed_str()))));
            } else if !members.is_empty() {
                // Past a limit nothing is kept: what was is given back at once.
                members = Vec::new();
            }
        }
        Ok(FreeJsonMap { members, oversized: meter.oversized() })
    }
}

impl fmt::Debug for FreeJsonMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.oversized {
            Some(o) => write!(f, "FreeJsonMap(not kept: {o})"),
            None => f.debug_map().entries(self.members.iter().map(|(k, v)| (k, v))).finish(),
        }
    }
}

impl<'de> Deserialize<'de> for FreeJsonMap {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Members;
        impl<'de> Visitor<'de> for Members {
            type Value = FreeJsonMap;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<FreeJsonMap, A::Error> {
                FreeJsonMap::read_rest(map, |_, _| Ok(false))
            }
        }
        d.deserialize_map(Members)
    }
}

/// Written back as the object of its members; members that were not kept cannot be written.
impl Serialize for FreeJsonMap {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        if let Some(o) = self.oversized {
            return Err(S::Error::custom(FreeJsonError::Oversized(o)));
        }
        let mut map = s.serialize_map(Some(self.members.len()))?;
        for (name, value) in &self.members {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }
}

#[cfg(test)]
#[path = "free_json_tests.rs"]
pub(crate) mod tests;
