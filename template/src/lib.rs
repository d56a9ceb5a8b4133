//! # keyward-template
//!
//! The template engine Keyward uses to render target Secrets: Go `text/template` syntax with the
//! Sprig functions and the External Secrets additions that templates written for the External
//! Secrets "engine v2" use. `docs/templates.md` lists every function.
//!
//! ## Data context
//!
//! Like External Secrets engine v2, a template sees the fetched values as a map from key to
//! string: `{{ .password }}`, `{{ index . "api-key" }}`. Values that are not UTF-8 (binary
//! keystores) stay byte strings and print unchanged. A missing key is an error, never an empty
//! string: `{{ .pasword }}` fails with `map has no entry for key "pasword"`.
//!
//! ## API
//!
//! - [`render`]: render several templates (`target.template.data`, or the `Values` items of
//!   `templateFrom`), each independently, into a map from name to rendered bytes.
//! - [`render_keys_and_values`]: a `KeysAndValues` item of `templateFrom`: the rendered output is a
//!   YAML map whose keys and values both become entries.
//! - [`render_scoped`]: either of the two, chosen by [`Scope`].
//! - [`render_strings`]: like [`render`], for labels and annotations (output must be UTF-8).
//! - [`transform_key`]: `dataFrom[].rewrite[].transform`: the template sees the key as `.value`.
//! - [`Template`]: parse once, execute many times, with any [`Value`] as data.
//!
//! ```
//! use std::collections::BTreeMap;
//! use keyward_template::{render, Limits};
//!
//! let data = BTreeMap::from([("user".to_string(), b"app".to_vec()), ("pass".to_string(), b"s3cret".to_vec())]);
//! let out = render(&[("url", "postgres://{{ .user }}:{{ .pass | urlquery }}@db:5432/app")], &data, &Limits::default())
//!     .expect("renders");
//! assert_eq!(out["url"], b"postgres://app:s3cret@db:5432/app");
//! ```
//!
//! ## Safety
//!
//! Templates cannot read the environment, files or the network: no function does. Execution is
//! bounded by [`Limits`]: template size, output size, nesting depth (blocks, parentheses and
//! `template` calls, including recursion), total `range` iterations and total evaluation steps.
//! Exceeding a limit is an error whose [`ErrorKind`] is `Limit`; running out of the CPU budget
//! (steps, with expensive functions charged their real cost) or past the optional wall-clock
//! [`Limits::deadline`] is `Budget`. [`TemplateError::is_limit`] is true for both.
//!
//! ## Errors
//!
//! Every [`TemplateError`] names the template (the Secret key, or the `define` name inside which
//! the error happened) and the line, for example
//! `template "config" line 3: map has no entry for key "password"`.

#![forbid(unsafe_code)]

mod ast;
mod cost;
mod der;
mod error;
mod eval;
mod funcs;
mod gotime;
mod gotime_parse;
mod lexer;
mod object;
mod parser;
mod quote;
mod semver;
mod value;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

pub use error::{ErrorKind, TemplateError};
pub use value::Value;

/// Bounds on parsing and execution.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest template source accepted, in bytes.
    pub max_template_bytes: usize,
    /// Largest output of one template, and of all templates of one [`render`] call, in bytes.
    /// Also bounds values built by functions (`repeat`, `indent`, `printf`, …).
    pub max_output_bytes: usize,
    /// Deepest nesting of blocks, parentheses, `template` calls and data values.
    pub max_depth: usize,
    /// Most `range` iterations in one execution (all loops together).
    pub max_range_iterations: usize,
    /// Most evaluation steps in one execution: the CPU budget. A node or a cheap function call
    /// is one step (about 100 ns); functions are charged for what they really cost (`bcrypt`
    /// a million steps, RSA and PKCS#12 by key size and iteration count, string builders and
    /// parsers by size). The default, ten million, is about a second of CPU.
    pub max_steps: usize,
    /// When set, execution stops with a [`ErrorKind::Budget`] error once this instant has passed.
    /// Checked while evaluating (every few thousand steps and before every expensive call), so a
    /// render ends within a few milliseconds of it wherever it is; one uninterruptible function
    /// call (a single `bcrypt`, one keystore) can overrun by its own duration.
    pub deadline: Option<Instant>,
}

impl Limits {
    /// These limits with a wall-clock deadline `within` from now (shared by every template
    /// rendered with them).
    pub fn within(self, within: Duration) -> Self {
        Limits { deadline: Instant::now().checked_add(within), ..self }
    }
}

impl Default for Limits {
    /// 256 KiB templates, 1 MiB output (the Kubernetes Secret size limit), depth 64,
    /// 100 000 range iterations, 10 000 000 steps.
    fn default() -> Self {
        Limits {
            max_template_bytes: 256 * 1024,
            max_output_bytes: 1024 * 1024,
            max_depth: 64,
            max_range_iterations: 100_000,
            max_steps: 10_000_000,
            deadline: None,
        }
    }
}

/// How a `templateFrom` item is applied (mirrors `TemplateScope` of the API).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// The rendered output is the value of the entry named like the template.
    Values,
    /// The rendered output is a YAML map; each of its keys and values becomes an entry.
    KeysAndValues,
}

/// A parsed template, ready to execute.
#[derive(Clone, Debug)]
pub struct Template {
    parsed: ast::Parsed,
}

impl Template {
    /// Parse `source`; `name` appears in errors.
    pub fn parse(name: &str, source: &str, limits: &Limits) -> Result<Self, TemplateError> {
        if source.len() > limits.max_template_bytes {
            return Err(TemplateError::new(
                name,
                0,
                ErrorKind::Limit(format!("template larger than {} bytes", limits.max_template_bytes)),
            ));
        }
        Ok(Template { parsed: parser::parse(name, source, limits.max_depth)? })
    }

    /// Name of the template.
    pub fn name(&self) -> &str {
        &self.parsed.name
    }

    /// Names of the templates declared with `define` or `block`.
    pub fn defined(&self) -> impl Iterator<Item = &str> {
        self.parsed.defines.keys().map(String::as_str)
    }

    /// Execute with `data` as `.` and `$`.
    pub fn execute(&self, data: &Value, limits: &Limits) -> Result<Vec<u8>, TemplateError> {
        eval::execute(&self.parsed, data.clone(), limits)
    }
}

/// The data context of a render: each fetched key maps to its value as a string (a byte string
/// when the value is not UTF-8).
pub fn data_context(data: &BTreeMap<String, Vec<u8>>) -> Value {
    Value::map(data.iter().map(|(k, v)| (k.clone(), Value::from_bytes(v.clone()))).collect())
}

fn total_check(name: &str, total: usize, limits: &Limits) -> Result<(), TemplateError> {
    if total > limits.max_output_bytes {
        return Err(TemplateError::new(
            name,
            0,
            ErrorKind::Limit(format!("rendered data larger than {} bytes in total", limits.max_output_bytes)),
        ));
    }
    Ok(())
}

/// Render each `(name, source)` template independently with the fetched `data`; the result maps
/// each name to its rendered bytes. Stops at the first error.
pub fn render(
    templates: &[(&str, &str)],
    data: &BTreeMap<String, Vec<u8>>,
    limits: &Limits,
) -> Result<BTreeMap<String, Vec<u8>>, TemplateError> {
    let ctx = data_context(data);
    let mut out = BTreeMap::new();
    let mut total = 0usize;
    for (name, source) in templates {
        let rendered = Template::parse(name, source, limits)?.execute(&ctx, limits)?;
        total = total.saturating_add(rendered.len());
        total_check(name, total, limits)?;
        out.insert((*name).to_string(), rendered);
    }
    Ok(out)
}

/// Render a `KeysAndValues` template: its output must be a YAML map (or empty). Each key becomes
/// an entry whose value is the scalar as text (`null` becomes ""). Nested maps or lists are an
/// error.
pub fn render_keys_and_values(
    name: &str,
    source: &str,
    data: &BTreeMap<String, Vec<u8>>,
    limits: &Limits,
) -> Result<BTreeMap<String, Vec<u8>>, TemplateError> {
    let rendered = Template::parse(name, source, limits)?.execute(&data_context(data), limits)?;
    keys_and_values(name, &rendered)
}

fn keys_and_values(name: &str, rendered: &[u8]) -> Result<BTreeMap<String, Vec<u8>>, TemplateError> {
    let bad = |m: String| TemplateError::new(name, 0, ErrorKind::Output(m));
    let y: serde_yaml::Value =
        serde_yaml::from_slice(rendered).map_err(|e| bad(format!("KeysAndValues output is not YAML: {e}")))?;
    let map = match y {
        serde_yaml::Value::Null => return Ok(BTreeMap::new()),
        serde_yaml::Value::Mapping(m) => m,
        _ => return Err(bad("KeysAndValues output is not a YAML map".into())),
    };
    let mut out = BTreeMap::new();
    for (k, v) in map {
        let key = scalar_text(&k).ok_or_else(|| bad("KeysAndValues keys must be scalars".into()))?;
        let value = scalar_text(&v).ok_or_else(|| bad(format!("KeysAndValues value of {key:?} is not a scalar")))?;
        out.insert(key, value.into_bytes());
    }
    Ok(out)
}

fn scalar_text(v: &serde_yaml::Value) -> Option<String> {
    match v {
        serde_yaml::Value::Null => Some(String::new()),
        serde_yaml::Value::Bool(b) => Some(b.to_string()),
        serde_yaml::Value::Number(n) => Some(n.to_string()),
        serde_yaml::Value::String(s) => Some(s.clone()),
        serde_yaml::Value::Tagged(t) => scalar_text(&t.value),
        _ => None,
    }
}

/// Render templates with a [`Scope`]: `Values` is [`render`]; `KeysAndValues` merges the maps of
/// every template (later templates win on equal keys).
pub fn render_scoped(
    scope: Scope,
    templates: &[(&str, &str)],
    data: &BTreeMap<String, Vec<u8>>,
    limits: &Limits,
) -> Result<BTreeMap<String, Vec<u8>>, TemplateError> {
    match scope {
        Scope::Values => render(templates, data, limits),
        Scope::KeysAndValues => {
            let mut out = BTreeMap::new();
            let mut total = 0usize;
            for (name, source) in templates {
                for (k, v) in render_keys_and_values(name, source, data, limits)? {
                    total = total.saturating_add(k.len() + v.len());
                    total_check(name, total, limits)?;
                    out.insert(k, v);
                }
            }
            Ok(out)
        }
    }
}

/// Like [`render_scoped`], for labels and annotations: every key and value must be UTF-8.
pub fn render_strings(
    scope: Scope,
    templates: &[(&str, &str)],
    data: &BTreeMap<String, Vec<u8>>,
    limits: &Limits,
) -> Result<BTreeMap<String, String>, TemplateError> {
    render_scoped(scope, templates, data, limits)?
        .into_iter()
        .map(|(k, v)| {
            String::from_utf8(v)
                .map(|v| (k.clone(), v))
                .map_err(|_| TemplateError::new(k, 0, ErrorKind::Output("rendered value is not UTF-8".into())))
        })
        .collect()
}

/// `rewrite.transform`: render `template` with `{ "value": key }` as data and return the new key.
pub fn transform_key(template: &str, key: &str, limits: &Limits) -> Result<String, TemplateError> {
    let data = Value::map(BTreeMap::from([("value".to_string(), Value::str(key))]));
    let out = Template::parse("transform", template, limits)?.execute(&data, limits)?;
    String::from_utf8(out)
        .map_err(|_| TemplateError::new("transform", 0, ErrorKind::Output("rendered key is not UTF-8".into())))
}

/// Names of every template function, sorted (the list `docs/templates.md` documents): Go's
/// builtins, Sprig's functions and External Secrets' additions, each name upstream's engine v2
/// knows.
pub fn function_names() -> Vec<&'static str> {
    funcs::names()
}

/// Whether `name` is a template function.
pub fn is_function(name: &str) -> bool {
    funcs::exists(name)
}

/// The functions whose result a render cannot repeat: they read the clock (`now`; `date`,
/// `dateInZone`, `htmlDate*` and `ago` when not given a time or a number) or the random
/// generator (`randAlpha`…, `uuidv4`, `encryptAES`'s IV, new keys and serials of
/// `genPrivateKey`, `genCA`, …). Sorted.
pub fn unrepeatable_functions() -> Vec<&'static str> {
    let mut v: Vec<&'static str> = funcs::unrepeatable().collect();
    v.sort_unstable();
    v
}

/// The functions `source` calls that do not exist, sorted and each once (empty when all do).
/// An error when the template does not parse for another reason, or is larger than
/// [`Limits::max_template_bytes`]. Admission and `keyward check` warn with it; rendering the
/// template would fail with `function "x" not defined`.
pub fn unknown_functions(name: &str, source: &str, limits: &Limits) -> Result<Vec<String>, TemplateError> {
    if source.len() > limits.max_template_bytes {
        return Err(TemplateError::new(
            name,
            0,
            ErrorKind::Limit(format!("template larger than {} bytes", limits.max_template_bytes)),
        ));
    }
    let mut unknown = parser::parse_collecting_unknown(name, source, limits.max_depth)?;
    unknown.sort();
    unknown.dedup();
    Ok(unknown)
}
