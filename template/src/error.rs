//! Errors of parsing and rendering templates.

use std::fmt;

/// What went wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The template source is not valid template syntax.
    Parse(String),
    /// A map lookup found no entry for the key (missing keys are errors, never empty strings).
    MissingKey {
        /// The key that was looked up.
        key: String,
    },
    /// A function failed or was called with unusable arguments.
    Function {
        /// Name of the function.
        name: String,
        /// What went wrong.
        message: String,
    },
    /// Any other execution error (wrong types, undefined template, ...).
    Exec(String),
    /// A limit of [`crate::Limits`] was exceeded.
    Limit(String),
    /// The render ran out of its CPU budget ([`crate::Limits::max_steps`]) or past its
    /// wall-clock [`crate::Limits::deadline`].
    Budget(String),
    /// The rendered output could not be used (for example `KeysAndValues` output that is not a
    /// YAML map, or label output that is not UTF-8).
    Output(String),
}

/// An error naming the template and the line where it happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateError {
    /// Name of the template (the Secret key, or the name given to `define`).
    pub template: String,
    /// 1-based line in the template source; 0 when the error is not tied to a line.
    pub line: usize,
    /// What went wrong.
    pub kind: ErrorKind,
}

impl TemplateError {
    /// A new error.
    pub fn new(template: impl Into<String>, line: usize, kind: ErrorKind) -> Self {
        TemplateError { template: template.into(), line, kind }
    }

    /// True when a limit was exceeded (the CPU budget and the deadline included).
    pub fn is_limit(&self) -> bool {
        matches!(self.kind, ErrorKind::Limit(_) | ErrorKind::Budget(_))
    }

    /// True when the render ran out of its CPU budget or its time.
    pub fn is_over_budget(&self) -> bool {
        matches!(self.kind, ErrorKind::Budget(_))
    }
}

impl fmt::Display for TemplateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "template {:?}", self.template)?;
        if self.line > 0 {
            write!(f, " line {}", self.line)?;
        }
        match &self.kind {
            ErrorKind::Parse(m) => write!(f, ": parse error: {m}"),
            ErrorKind::MissingKey { key } => write!(f, ": map has no entry for key {key:?}"),
            ErrorKind::Function { name, message } => write!(f, ": error calling {name}: {message}"),
            ErrorKind::Exec(m) => write!(f, ": {m}"),
            ErrorKind::Limit(m) | ErrorKind::Budget(m) => write!(f, ": limit exceeded: {m}"),
            ErrorKind::Output(m) => write!(f, ": {m}"),
        }
    }
}

impl std::error::Error for TemplateError {}
