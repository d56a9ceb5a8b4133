//! Syntax tree of a parsed template.

use std::collections::BTreeMap;

/// A node of a template body.
#[derive(Clone, Debug, PartialEq)]
pub enum Node {
    /// Literal text.
    Text(String),
    /// `{{ pipeline }}`: prints the result unless the pipeline declares variables.
    Action(Pipe),
    /// `{{if}}` … `{{else}}` … `{{end}}`.
    If(Branch),
    /// `{{range}}` … `{{else}}` … `{{end}}`.
    Range(Branch),
    /// `{{with}}` … `{{else}}` … `{{end}}`.
    With(Branch),
    /// `{{template "name" pipeline}}`.
    Template {
        /// Line of the action.
        line: usize,
        /// Name of the invoked template.
        name: String,
        /// The new dot; `nil` when absent.
        pipe: Option<Pipe>,
    },
    /// `{{break}}` inside a range.
    Break(usize),
    /// `{{continue}}` inside a range.
    Continue(usize),
}

/// A control structure with a pipeline, a body and an optional else body.
#[derive(Clone, Debug, PartialEq)]
pub struct Branch {
    /// Line of the opening action.
    pub line: usize,
    /// The condition or the value ranged over.
    pub pipe: Pipe,
    /// Body executed when the pipeline is non-empty.
    pub body: Vec<Node>,
    /// Body executed otherwise.
    pub els: Option<Vec<Node>>,
}

/// A pipeline: optional variable declarations and commands joined by `|`.
#[derive(Clone, Debug, PartialEq)]
pub struct Pipe {
    /// Line of the pipeline.
    pub line: usize,
    /// Declared or assigned variables (`$x :=`, `$i, $e :=`).
    pub decl: Vec<String>,
    /// True for `=` (assignment to existing variables), false for `:=`.
    pub assign: bool,
    /// The commands; each one's result is passed as the last argument of the next.
    pub cmds: Vec<Cmd>,
}

/// A command: a function call, or a single operand.
#[derive(Clone, Debug, PartialEq)]
pub struct Cmd {
    /// Line of the command.
    pub line: usize,
    /// The words of the command.
    pub args: Vec<Arg>,
}

/// An operand.
#[derive(Clone, Debug, PartialEq)]
pub enum Arg {
    /// `.`
    Dot,
    /// `nil`
    Nil,
    /// `true` / `false`
    Bool(bool),
    /// An integer constant.
    Int(i64),
    /// A floating-point constant.
    Float(f64),
    /// A string constant.
    Str(String),
    /// `.a.b`
    Field(Vec<String>),
    /// `$x.a.b`
    Var(String, Vec<String>),
    /// A function name.
    Func(String),
    /// `(pipeline).a.b`
    Sub(Box<Pipe>, Vec<String>),
}

impl Arg {
    /// Short text of the operand for error messages, like Go's `<.field>`.
    pub fn describe(&self) -> String {
        let chain = |f: &[String]| f.iter().map(|s| format!(".{s}")).collect::<String>();
        match self {
            Arg::Dot => ".".into(),
            Arg::Nil => "nil".into(),
            Arg::Bool(b) => b.to_string(),
            Arg::Int(i) => i.to_string(),
            Arg::Float(f) => f.to_string(),
            Arg::Str(s) => format!("{s:?}"),
            Arg::Field(f) => chain(f),
            Arg::Var(n, f) => format!("{n}{}", chain(f)),
            Arg::Func(n) => n.clone(),
            Arg::Sub(_, f) => format!("(...){}", chain(f)),
        }
    }
}

/// A parsed template: its main body and the templates it defines.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Parsed {
    /// Name of the template.
    pub name: String,
    /// The main body.
    pub main: Vec<Node>,
    /// Templates declared with `define` or `block`.
    pub defines: BTreeMap<String, Vec<Node>>,
}
