//! Parser from tokens to the syntax tree.

use crate::ast::{Arg, Branch, Cmd, Node, Parsed, Pipe};
use crate::error::{ErrorKind, TemplateError};
use crate::lexer::{Tok, Token, lex};

/// How a list of nodes ended.
enum End {
    Eof,
    Close,
    /// `{{else}}`, or `{{else if …}}` / `{{else with …}}` with the keyword and its line.
    Else(Option<(String, usize)>),
}

struct Parser<'a> {
    name: &'a str,
    toks: Vec<Token>,
    pos: usize,
    depth: usize,
    max_depth: usize,
    vars: Vec<String>,
    range_depth: usize,
    defines: std::collections::BTreeMap<String, Vec<Node>>,
    in_define: bool,
    /// When set, functions that do not exist are collected here instead of failing the parse.
    unknown: Option<Vec<String>>,
}

/// Parse template source. `max_depth` bounds the nesting of blocks and parentheses.
pub fn parse(name: &str, src: &str, max_depth: usize) -> Result<Parsed, TemplateError> {
    parse_with(name, src, max_depth, None).map(|(p, _)| p)
}

/// Parse template source, collecting the names of functions that do not exist instead of
/// failing on the first one.
pub fn parse_collecting_unknown(name: &str, src: &str, max_depth: usize) -> Result<Vec<String>, TemplateError> {
    parse_with(name, src, max_depth, Some(Vec::new())).map(|(_, unknown)| unknown)
}

fn parse_with(
    name: &str,
    src: &str,
    max_depth: usize,
    unknown: Option<Vec<String>>,
) -> Result<(Parsed, Vec<String>), TemplateError> {
    let toks = lex(name, src)?;
    let mut p = Parser {
        name,
        toks,
        pos: 0,
        depth: 0,
        max_depth,
        vars: vec!["$".into()],
        range_depth: 0,
        defines: Default::default(),
        in_define: false,
        unknown,
    };
    let (main, end) = p.list()?;
    match end {
        End::Eof => {}
        End::Close => return Err(p.err_prev("unexpected {{end}}")),
        End::Else(_) => return Err(p.err_prev("unexpected {{else}}")),
    }
    let unknown = p.unknown.take().unwrap_or_default();
    Ok((Parsed { name: name.to_string(), main, defines: p.defines }, unknown))
}

impl Parser<'_> {
    fn line(&self) -> usize {
        self.toks.get(self.pos).or_else(|| self.toks.last()).map(|t| t.line).unwrap_or(1)
    }

    fn err(&self, msg: impl Into<String>) -> TemplateError {
        TemplateError::new(self.name, self.line(), ErrorKind::Parse(msg.into()))
    }

    fn err_prev(&self, msg: impl Into<String>) -> TemplateError {
        let line = self.toks.get(self.pos.saturating_sub(1)).map(|t| t.line).unwrap_or(1);
        TemplateError::new(self.name, line, ErrorKind::Parse(msg.into()))
    }

    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|t| &t.tok)
    }

    fn peek_at(&self, n: usize) -> Option<&Tok> {
        self.toks.get(self.pos + n).map(|t| &t.tok)
    }

    fn next(&mut self) -> Option<Token> {
        let t = self.toks.get(self.pos).cloned();
        if t.is_some() {
            self.pos += 1;
        }
        t
    }

    fn expect_close(&mut self, what: &str) -> Result<(), TemplateError> {
        match self.next() {
            Some(Token { tok: Tok::Close, .. }) => Ok(()),
            _ => Err(self.err_prev(format!("unexpected input in {what}; expected }}}}"))),
        }
    }

    fn enter(&mut self) -> Result<(), TemplateError> {
        self.depth += 1;
        if self.depth > self.max_depth {
            return Err(TemplateError::new(
                self.name,
                self.line(),
                ErrorKind::Limit(format!("nesting deeper than {} levels", self.max_depth)),
            ));
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.depth -= 1;
    }

    /// Nodes until end of input, `{{end}}` or `{{else}}`.
    fn list(&mut self) -> Result<(Vec<Node>, End), TemplateError> {
        let mut nodes = Vec::new();
        loop {
            let Some(tok) = self.next() else { return Ok((nodes, End::Eof)) };
            match tok.tok {
                Tok::Text(t) => nodes.push(Node::Text(t)),
                Tok::Open => {
                    let line = self.line();
                    let kw = match self.peek() {
                        Some(Tok::Ident(k)) => k.clone(),
                        _ => String::new(),
                    };
                    match kw.as_str() {
                        "end" => {
                            self.pos += 1;
                            self.expect_close("end")?;
                            return Ok((nodes, End::Close));
                        }
                        "else" => {
                            self.pos += 1;
                            let chained = match self.peek() {
                                Some(Tok::Ident(k)) if k == "if" || k == "with" => {
                                    let k = k.clone();
                                    self.pos += 1;
                                    Some((k, line))
                                }
                                _ => {
                                    self.expect_close("else")?;
                                    None
                                }
                            };
                            return Ok((nodes, End::Else(chained)));
                        }
                        "if" | "range" | "with" => {
                            self.pos += 1;
                            nodes.push(self.branch(&kw, line)?);
                        }
                        "define" => {
                            self.pos += 1;
                            self.define(line)?;
                        }
                        "block" => {
                            self.pos += 1;
                            nodes.push(self.block(line)?);
                        }
                        "template" => {
                            self.pos += 1;
                            let name = self.template_name()?;
                            let pipe = if matches!(self.peek(), Some(Tok::Close)) {
                                None
                            } else {
                                Some(self.pipeline(line, false, false)?)
                            };
                            self.expect_close("template")?;
                            nodes.push(Node::Template { line, name, pipe });
                        }
                        "break" | "continue" => {
                            self.pos += 1;
                            if self.range_depth == 0 {
                                return Err(self.err_prev(format!("{{{{{kw}}}}} outside {{{{range}}}}")));
                            }
                            self.expect_close(&kw)?;
                            nodes.push(if kw == "break" { Node::Break(line) } else { Node::Continue(line) });
                        }
                        _ => {
                            let pipe = self.pipeline(line, true, false)?;
                            self.expect_close("command")?;
                            nodes.push(Node::Action(pipe));
                        }
                    }
                }
                _ => return Err(self.err_prev("unexpected token outside action")),
            }
        }
    }

    fn template_name(&mut self) -> Result<String, TemplateError> {
        match self.next() {
            Some(Token { tok: Tok::Str(s), .. }) => Ok(s),
            _ => Err(self.err_prev("expected quoted template name")),
        }
    }

    /// `if`, `range` or `with` after its keyword.
    fn branch(&mut self, kw: &str, line: usize) -> Result<Node, TemplateError> {
        self.enter()?;
        let saved_vars = self.vars.len();
        let is_range = kw == "range";
        let pipe = self.pipeline(line, true, is_range)?;
        self.expect_close(kw)?;
        if is_range {
            self.range_depth += 1;
        }
        let (body, end) = self.list()?;
        if is_range {
            self.range_depth -= 1;
        }
        let els = match end {
            End::Eof => return Err(self.err(format!("unexpected EOF: {{{{{kw}}}}} without {{{{end}}}}"))),
            End::Close => None,
            End::Else(None) => {
                let (els, end) = self.list()?;
                if !matches!(end, End::Close) {
                    return Err(self.err(format!("expected {{{{end}}}} after {{{{else}}}} of {{{{{kw}}}}}")));
                }
                Some(els)
            }
            End::Else(Some((chained, eline))) => {
                // `{{else if x}}…{{end}}` is `{{else}}{{if x}}…{{end}}{{end}}`; one {{end}} closes both.
                Some(vec![self.branch(&chained, eline)?])
            }
        };
        self.vars.truncate(saved_vars);
        self.leave();
        let b = Branch { line, pipe, body, els };
        Ok(match kw {
            "if" => Node::If(b),
            "range" => Node::Range(b),
            _ => Node::With(b),
        })
    }

    fn define(&mut self, line: usize) -> Result<(), TemplateError> {
        if self.in_define || self.depth > 0 {
            return Err(self.err_prev("{{define}} is only allowed at the top level"));
        }
        let name = self.template_name()?;
        self.expect_close("define")?;
        let body = self.define_body(line)?;
        self.defines.insert(name, body);
        Ok(())
    }

    fn define_body(&mut self, line: usize) -> Result<Vec<Node>, TemplateError> {
        let saved = std::mem::replace(&mut self.vars, vec!["$".into()]);
        let saved_range = std::mem::replace(&mut self.range_depth, 0);
        let was_in_define = std::mem::replace(&mut self.in_define, true);
        self.enter()?;
        let (body, end) = self.list()?;
        self.leave();
        self.in_define = was_in_define;
        self.range_depth = saved_range;
        self.vars = saved;
        if !matches!(end, End::Close) {
            return Err(TemplateError::new(self.name, line, ErrorKind::Parse("{{define}} without {{end}}".into())));
        }
        Ok(body)
    }

    fn block(&mut self, line: usize) -> Result<Node, TemplateError> {
        let name = self.template_name()?;
        let pipe = self.pipeline(line, false, false)?;
        self.expect_close("block")?;
        let body = self.define_body(line)?;
        self.defines.insert(name.clone(), body);
        Ok(Node::Template { line, name, pipe: Some(pipe) })
    }

    /// A pipeline up to (not including) `}}` or `)`.
    fn pipeline(&mut self, line: usize, allow_decl: bool, is_range: bool) -> Result<Pipe, TemplateError> {
        let mut decl = Vec::new();
        let mut assign = false;
        if allow_decl {
            let one = matches!(
                (self.peek(), self.peek_at(1)),
                (Some(Tok::Var(_, f)), Some(Tok::Declare | Tok::Assign)) if f.is_empty()
            );
            let two = is_range
                && matches!(
                    (self.peek(), self.peek_at(1), self.peek_at(2), self.peek_at(3)),
                    (Some(Tok::Var(_, f)), Some(Tok::Comma), Some(Tok::Var(_, g)), Some(Tok::Declare | Tok::Assign))
                        if f.is_empty() && g.is_empty()
                );
            if one || two {
                let n = if two { 2 } else { 1 };
                for _ in 0..n {
                    if let Some(Token { tok: Tok::Var(v, _), .. }) = self.next() {
                        decl.push(v);
                    }
                    if n == 2 && decl.len() == 1 {
                        self.pos += 1; // comma
                    }
                }
                assign = matches!(self.next().map(|t| t.tok), Some(Tok::Assign));
                for v in &decl {
                    if v == "$" {
                        return Err(self.err_prev("cannot assign to $"));
                    }
                    if assign && !self.vars.contains(v) {
                        return Err(self.err_prev(format!("undefined variable {v:?}")));
                    }
                }
            }
        }
        let mut cmds = Vec::new();
        loop {
            let cmd = self.command()?;
            cmds.push(cmd);
            match self.peek() {
                Some(Tok::Pipe) => {
                    self.pos += 1;
                }
                Some(Tok::Close | Tok::RParen) => break,
                _ => return Err(self.err("unexpected input in pipeline")),
            }
        }
        if !assign {
            self.vars.extend(decl.iter().cloned());
        }
        Ok(Pipe { line, decl, assign, cmds })
    }

    fn command(&mut self) -> Result<Cmd, TemplateError> {
        let line = self.line();
        let mut args = Vec::new();
        loop {
            match self.peek() {
                None => return Err(self.err("unexpected end of input in command")),
                Some(Tok::Pipe | Tok::Close | Tok::RParen) => break,
                _ => {}
            }
            if !args.is_empty() && !self.toks[self.pos].space_before && !matches!(self.peek(), Some(Tok::LParen)) {
                return Err(self.err("missing space between operands"));
            }
            args.push(self.operand()?);
        }
        if args.is_empty() {
            return Err(self.err("missing value for command"));
        }
        if args.len() > 1 && !matches!(args[0], Arg::Func(_)) {
            return Err(self.err(format!("can't give argument to non-function {}", args[0].describe())));
        }
        Ok(Cmd { line, args })
    }

    /// A function name, or a call of it followed by fields (`now.Unix`, Go's chain node).
    fn chained(&mut self, id: String) -> Arg {
        match self.toks.get(self.pos) {
            Some(Token { tok: Tok::Field(f), space_before: false, line }) => {
                let (fields, line) = (f.clone(), *line);
                self.pos += 1;
                let cmd = Cmd { line, args: vec![Arg::Func(id)] };
                Arg::Sub(Box::new(Pipe { line, decl: Vec::new(), assign: false, cmds: vec![cmd] }), fields)
            }
            _ => Arg::Func(id),
        }
    }

    fn operand(&mut self) -> Result<Arg, TemplateError> {
        let Some(tok) = self.next() else { return Err(self.err("unexpected end of input")) };
        let arg = match tok.tok {
            Tok::Dot => Arg::Dot,
            Tok::Field(f) => Arg::Field(f),
            Tok::Var(v, f) => {
                if !self.vars.contains(&v) {
                    return Err(self.err_prev(format!("undefined variable {v:?}")));
                }
                Arg::Var(v, f)
            }
            Tok::Str(s) => Arg::Str(s),
            Tok::Int(i) => Arg::Int(i),
            Tok::Float(f) => Arg::Float(f),
            Tok::Ident(id) => match id.as_str() {
                "true" => Arg::Bool(true),
                "false" => Arg::Bool(false),
                "nil" => Arg::Nil,
                _ if crate::funcs::exists(&id) => self.chained(id),
                _ if self.unknown.is_some() => {
                    if let Some(u) = self.unknown.as_mut() {
                        u.push(id.clone());
                    }
                    self.chained(id)
                }
                _ => return Err(self.err_prev(format!("function {id:?} not defined"))),
            },
            Tok::LParen => {
                self.enter()?;
                let line = self.line();
                let pipe = self.pipeline(line, true, false)?;
                self.leave();
                match self.next() {
                    Some(Token { tok: Tok::RParen, .. }) => {}
                    _ => return Err(self.err_prev("unclosed left paren")),
                }
                let mut fields = Vec::new();
                if let Some(Token { tok: Tok::Field(f), space_before: false, .. }) = self.toks.get(self.pos) {
                    fields = f.clone();
                    self.pos += 1;
                }
                Arg::Sub(Box::new(pipe), fields)
            }
            _ => return Err(self.err_prev("unexpected token in operand")),
        };
        Ok(arg)
    }
}
