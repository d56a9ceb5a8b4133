//! Evaluator: walks the syntax tree with a data value and writes the output.

use std::time::Instant;

use crate::ast::{Arg, Branch, Cmd, Node, Parsed, Pipe};
use crate::error::{ErrorKind, TemplateError};
use crate::funcs::{self, FnCtx};
use crate::value::Value;
use crate::{Limits, cost};

/// Steps between two readings of the clock: reading it costs about as much as 20 steps, and
/// 4096 cheap steps take well under a millisecond, so a render overruns its deadline by less
/// than that (plus at most one function call, which is checked before it starts).
const CLOCK_EVERY: usize = 4096;

enum Flow {
    Normal,
    Break,
    Continue,
}

/// Execution state of one template render.
pub struct Exec<'a> {
    parsed: &'a Parsed,
    limits: &'a Limits,
    out: Vec<u8>,
    vars: Vec<(String, Value)>,
    depth: usize,
    iterations: usize,
    steps: usize,
    /// The step count at which the deadline is checked next.
    next_clock: usize,
    current: String,
}

type R<T> = Result<T, TemplateError>;

/// Execute a parsed template with `data` as dot and `$`.
pub fn execute(parsed: &Parsed, data: Value, limits: &Limits) -> R<Vec<u8>> {
    let mut ex = Exec {
        parsed,
        limits,
        out: Vec::new(),
        vars: vec![("$".into(), data.clone())],
        depth: 0,
        iterations: 0,
        steps: 0,
        next_clock: 0,
        current: parsed.name.clone(),
    };
    ex.walk(&parsed.main, &data)?;
    Ok(ex.out)
}

impl Exec<'_> {
    fn err(&self, line: usize, kind: ErrorKind) -> TemplateError {
        TemplateError::new(self.current.clone(), line, kind)
    }

    fn exec_err(&self, line: usize, msg: impl Into<String>) -> TemplateError {
        self.err(line, ErrorKind::Exec(msg.into()))
    }

    fn write(&mut self, line: usize, bytes: &[u8]) -> R<()> {
        if self.out.len() + bytes.len() > self.limits.max_output_bytes {
            return Err(
                self.err(line, ErrorKind::Limit(format!("output larger than {} bytes", self.limits.max_output_bytes)))
            );
        }
        self.out.extend_from_slice(bytes);
        Ok(())
    }

    /// Count evaluation work against `max_steps`, and stop at the deadline. A large charge (an
    /// expensive function about to run) always looks at the clock.
    fn charge(&mut self, line: usize, n: usize) -> R<()> {
        self.steps = self.steps.saturating_add(n);
        if self.steps > self.limits.max_steps {
            return Err(self.err(
                line,
                ErrorKind::Budget(format!(
                    "template exceeded its CPU budget (more than {} evaluation steps)",
                    self.limits.max_steps
                )),
            ));
        }
        if self.steps >= self.next_clock {
            self.next_clock = self.steps.saturating_add(CLOCK_EVERY);
            if self.limits.deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(self.err(line, ErrorKind::Budget("template exceeded its time limit".into())));
            }
        }
        Ok(())
    }

    /// Lists and maps are printed or copied recursively: bound their size and depth first.
    fn check_value(&mut self, line: usize, v: &Value) -> R<()> {
        if !matches!(v, Value::List(_) | Value::Map(_)) {
            return Ok(());
        }
        let cap = self.limits.max_output_bytes;
        let w = v.weight(cap, self.limits.max_depth);
        self.charge(line, w.min(cap))?;
        if w > cap {
            return Err(self.err(
                line,
                ErrorKind::Limit(format!(
                    "value larger than {cap} bytes or nested deeper than {}",
                    self.limits.max_depth
                )),
            ));
        }
        Ok(())
    }

    fn walk(&mut self, nodes: &[Node], dot: &Value) -> R<Flow> {
        for node in nodes {
            match self.node(node, dot)? {
                Flow::Normal => {}
                other => return Ok(other),
            }
        }
        Ok(Flow::Normal)
    }

    fn scoped(&mut self, nodes: &[Node], dot: &Value) -> R<Flow> {
        let mark = self.vars.len();
        let r = self.walk(nodes, dot);
        self.vars.truncate(mark);
        r
    }

    fn node(&mut self, node: &Node, dot: &Value) -> R<Flow> {
        self.charge(0, 1)?;
        match node {
            Node::Text(t) => self.write(0, t.as_bytes())?,
            Node::Action(pipe) => {
                let v = self.pipe(pipe, dot)?;
                if pipe.decl.is_empty() {
                    self.check_value(pipe.line, &v)?;
                    let bytes = match v {
                        Value::Nil => b"<no value>".to_vec(),
                        Value::Bytes(b) => b,
                        Value::Str(s) => s.into_bytes(),
                        other => other.to_display().into_bytes(),
                    };
                    self.write(pipe.line, &bytes)?;
                }
            }
            Node::If(b) => return self.if_with(b, dot, false),
            Node::With(b) => return self.if_with(b, dot, true),
            Node::Range(b) => return self.range(b, dot),
            Node::Template { line, name, pipe } => {
                let new_dot = match pipe {
                    Some(p) => self.pipe(p, dot)?,
                    None => Value::Nil,
                };
                self.call_template(*line, name, new_dot)?;
            }
            Node::Break(_) => return Ok(Flow::Break),
            Node::Continue(_) => return Ok(Flow::Continue),
        }
        Ok(Flow::Normal)
    }

    fn enter(&mut self, line: usize) -> R<()> {
        self.depth += 1;
        if self.depth > self.limits.max_depth {
            return Err(
                self.err(line, ErrorKind::Limit(format!("nesting deeper than {} levels", self.limits.max_depth)))
            );
        }
        Ok(())
    }

    fn call_template(&mut self, line: usize, name: &str, dot: Value) -> R<()> {
        let Some(body) = self.parsed.defines.get(name) else {
            return Err(self.exec_err(line, format!("no such template {name:?}")));
        };
        self.enter(line)?;
        let saved_vars = std::mem::replace(&mut self.vars, vec![("$".into(), dot.clone())]);
        let saved_name = std::mem::replace(&mut self.current, name.to_string());
        let r = self.walk(body, &dot);
        self.current = saved_name;
        self.vars = saved_vars;
        self.depth -= 1;
        r.map(|_| ())
    }

    fn if_with(&mut self, b: &Branch, dot: &Value, is_with: bool) -> R<Flow> {
        self.enter(b.line)?;
        let mark = self.vars.len();
        let v = self.pipe(&b.pipe, dot)?;
        let r = if v.truthy() {
            let new_dot = if is_with { v } else { dot.clone() };
            self.scoped(&b.body, &new_dot)
        } else if let Some(els) = &b.els {
            self.scoped(els, dot)
        } else {
            Ok(Flow::Normal)
        };
        self.vars.truncate(mark);
        self.depth -= 1;
        r
    }

    fn range(&mut self, b: &Branch, dot: &Value) -> R<Flow> {
        self.enter(b.line)?;
        let mark = self.vars.len();
        // Declared variables are set per iteration, not to the pipeline result.
        let mut pipe = b.pipe.clone();
        let decl = std::mem::take(&mut pipe.decl);
        let v = self.pipe(&pipe, dot)?;
        // Lists and maps are materialized (their size is already bounded); integers are not.
        let (count, items): (usize, Vec<(Value, Value)>) = match &v {
            Value::Nil => (0, Vec::new()),
            Value::List(l) => (l.len(), l.iter().enumerate().map(|(i, e)| (Value::Int(i as i64), e.clone())).collect()),
            Value::Map(m) => {
                let m = m.borrow();
                (m.len(), m.iter().map(|(k, e)| (Value::Str(k.clone()), e.clone())).collect())
            }
            Value::Int(n) | Value::Int64(n) => (usize::try_from(*n).unwrap_or(0), Vec::new()),
            other => return Err(self.exec_err(b.line, format!("range can't iterate over {}", other.to_display()))),
        };
        let empty = count == 0;
        let mut items = items.into_iter();
        for i in 0..count {
            let (k, e) = match items.next() {
                Some(pair) => pair,
                None => (Value::Int(i as i64), Value::Int(i as i64)),
            };
            self.iterations += 1;
            if self.iterations > self.limits.max_range_iterations {
                return Err(self.err(
                    b.line,
                    ErrorKind::Limit(format!("more than {} range iterations", self.limits.max_range_iterations)),
                ));
            }
            self.vars.truncate(mark);
            match decl.len() {
                1 => self.vars.push((decl[0].clone(), e.clone())),
                2 => {
                    self.vars.push((decl[0].clone(), k));
                    self.vars.push((decl[1].clone(), e.clone()));
                }
                _ => {}
            }
            match self.scoped(&b.body, &e)? {
                Flow::Break => break,
                Flow::Continue | Flow::Normal => {}
            }
        }
        self.vars.truncate(mark);
        if empty && let Some(els) = &b.els {
            self.scoped(els, dot)?;
        }
        self.depth -= 1;
        Ok(Flow::Normal)
    }

    fn pipe(&mut self, pipe: &Pipe, dot: &Value) -> R<Value> {
        let mut prev: Option<Value> = None;
        for cmd in &pipe.cmds {
            prev = Some(self.cmd(cmd, dot, prev)?);
        }
        let v = prev.unwrap_or_default();
        if pipe.assign {
            for name in &pipe.decl {
                if let Some(slot) = self.vars.iter_mut().rev().find(|(n, _)| n == name) {
                    slot.1 = v.clone();
                }
            }
        } else {
            for name in &pipe.decl {
                self.vars.push((name.clone(), v.clone()));
            }
        }
        Ok(v)
    }

    fn cmd(&mut self, cmd: &Cmd, dot: &Value, prev: Option<Value>) -> R<Value> {
        let first = &cmd.args[0];
        if let Arg::Func(name) = first {
            return self.call(cmd.line, name, &cmd.args[1..], dot, prev);
        }
        if prev.is_some() {
            return Err(self.exec_err(cmd.line, format!("can't give argument to non-function {}", first.describe())));
        }
        self.arg(cmd.line, first, dot)
    }

    fn call(&mut self, line: usize, name: &str, args: &[Arg], dot: &Value, prev: Option<Value>) -> R<Value> {
        // `and` and `or` stop evaluating at the first falsy / truthy argument, like Go.
        if name == "and" || name == "or" {
            let total = args.len() + usize::from(prev.is_some());
            if total == 0 {
                return Err(self.err(
                    line,
                    ErrorKind::Function { name: name.into(), message: "wrong number of args: want at least 1".into() },
                ));
            }
            let mut last = Value::Nil;
            for a in args {
                last = self.arg(line, a, dot)?;
                if last.truthy() != (name == "and") {
                    return Ok(last);
                }
            }
            if let Some(p) = prev {
                last = p;
            }
            return Ok(last);
        }
        let mut vals = Vec::with_capacity(args.len() + 1);
        for a in args {
            vals.push(self.arg(line, a, dot)?);
        }
        if let Some(p) = prev {
            vals.push(p);
        }
        self.charge(line, 1)?;
        for v in &vals {
            self.check_value(line, v)?;
        }
        let Some(f) = funcs::lookup(name) else {
            return Err(self.exec_err(line, format!("function {name:?} not defined")));
        };
        // What the call will cost is paid before it runs: a budget that cannot pay for a
        // `bcrypt` stops here, not after the hash.
        self.charge(line, cost::before(name, &vals))?;
        let ctx = FnCtx { limits: self.limits };
        let out = f(&ctx, vals).map_err(|e| match e {
            funcs::FnError::MissingKey(key) => self.err(line, ErrorKind::MissingKey { key }),
            funcs::FnError::Limit(m) => self.err(line, ErrorKind::Limit(m)),
            funcs::FnError::Msg(message) => self.err(line, ErrorKind::Function { name: name.into(), message }),
        })?;
        self.charge(line, cost::after(&out))?;
        Ok(out)
    }

    /// An argument's value. Reading a string copies it: large values are charged for the copy.
    fn arg(&mut self, line: usize, arg: &Arg, dot: &Value) -> R<Value> {
        let v = self.arg_value(line, arg, dot)?;
        self.charge(line, cost::text_len(&v) / cost::BYTES_PER_COPY_STEP)?;
        Ok(v)
    }

    fn arg_value(&mut self, line: usize, arg: &Arg, dot: &Value) -> R<Value> {
        match arg {
            Arg::Dot => Ok(dot.clone()),
            Arg::Nil => Ok(Value::Nil),
            Arg::Bool(b) => Ok(Value::Bool(*b)),
            Arg::Int(i) => Ok(Value::Int(*i)),
            Arg::Float(f) => Ok(Value::Float(*f)),
            Arg::Str(s) => Ok(Value::Str(s.clone())),
            Arg::Field(f) => self.fields(line, dot.clone(), f, arg),
            Arg::Var(name, f) => {
                let Some((_, v)) = self.vars.iter().rev().find(|(n, _)| n == name) else {
                    return Err(self.exec_err(line, format!("undefined variable {name}")));
                };
                let v = v.clone();
                self.fields(line, v, f, arg)
            }
            Arg::Func(name) => self.call(line, name, &[], dot, None),
            Arg::Sub(pipe, f) => {
                self.enter(line)?;
                let mark = self.vars.len();
                let v = self.pipe(pipe, dot);
                self.vars.truncate(mark);
                self.depth -= 1;
                self.fields(line, v?, f, arg)
            }
        }
    }

    fn fields(&self, line: usize, mut v: Value, fields: &[String], arg: &Arg) -> R<Value> {
        for name in fields {
            v = match v {
                Value::Map(m) => match m.borrow().get(name) {
                    Some(x) => x.clone(),
                    None => return Err(self.err(line, ErrorKind::MissingKey { key: name.clone() })),
                },
                Value::Nil => {
                    return Err(self.exec_err(
                        line,
                        format!("at <{}>: nil pointer evaluating interface {{}}.{name}", arg.describe()),
                    ));
                }
                Value::Obj(o) if o.method(name).is_some() => o.method(name).unwrap_or_default(),
                other => {
                    return Err(self.exec_err(
                        line,
                        format!("at <{}>: can't evaluate field {name} in type {}", arg.describe(), other.type_name()),
                    ));
                }
            };
        }
        Ok(v)
    }
}
