//! Lexer for Go `text/template` syntax with `{{` `}}` delimiters.

use crate::error::{ErrorKind, TemplateError};

/// A token of template source.
#[derive(Clone, Debug, PartialEq)]
pub enum Tok {
    /// Text outside actions (already trimmed by `{{-` / `-}}`).
    Text(String),
    /// `{{` (start of an action).
    Open,
    /// `}}` (end of an action).
    Close,
    /// An identifier: function name, keyword, `true`, `false`, `nil`.
    Ident(String),
    /// `.` alone.
    Dot,
    /// `.a.b` — a field chain.
    Field(Vec<String>),
    /// `$x.a.b` — a variable with an optional field chain (`$` alone is the root).
    Var(String, Vec<String>),
    /// A quoted or raw string literal.
    Str(String),
    /// An integer literal (including character constants).
    Int(i64),
    /// A floating-point literal.
    Float(f64),
    /// `|`
    Pipe,
    /// `(`
    LParen,
    /// `)`
    RParen,
    /// `:=`
    Declare,
    /// `=`
    Assign,
    /// `,`
    Comma,
}

/// A token with its line and whether whitespace preceded it inside the action.
#[derive(Clone, Debug)]
pub struct Token {
    pub tok: Tok,
    pub line: usize,
    pub space_before: bool,
}

struct Lexer<'a> {
    name: &'a str,
    src: &'a str,
    pos: usize,
    line: usize,
    out: Vec<Token>,
}

/// Split template source into tokens.
pub fn lex(name: &str, src: &str) -> Result<Vec<Token>, TemplateError> {
    let mut lx = Lexer { name, src, pos: 0, line: 1, out: Vec::new() };
    lx.run()?;
    Ok(lx.out)
}

fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\r' | '\n')
}

impl Lexer<'_> {
    fn err(&self, msg: impl Into<String>) -> TemplateError {
        TemplateError::new(self.name, self.line, ErrorKind::Parse(msg.into()))
    }

    fn rest(&self) -> &str {
        &self.src[self.pos..]
    }

    fn push(&mut self, tok: Tok, line: usize, space_before: bool) {
        self.out.push(Token { tok, line, space_before });
    }

    fn advance(&mut self, n: usize) {
        self.line += self.src[self.pos..self.pos + n].matches('\n').count();
        self.pos += n;
    }

    fn run(&mut self) -> Result<(), TemplateError> {
        let mut trim_next_text = false;
        while self.pos < self.src.len() {
            let rest = self.rest();
            let text_len = rest.find("{{").unwrap_or(rest.len());
            let mut text = &rest[..text_len];
            let text_line = self.line;
            let after = &rest[text_len..];
            let trim_left = after.starts_with("{{- ")
                || after.starts_with("{{-\t")
                || after.starts_with("{{-\n")
                || after.starts_with("{{-\r");
            if trim_next_text {
                text = text.trim_start_matches(is_space);
            }
            if trim_left {
                text = text.trim_end_matches(is_space);
            }
            if !text.is_empty() {
                self.push(Tok::Text(text.to_string()), text_line, false);
            }
            self.advance(text_len);
            if self.pos >= self.src.len() {
                break;
            }
            // At "{{".
            let open_line = self.line;
            self.advance(if trim_left { 3 } else { 2 });
            trim_next_text = self.action(open_line)?;
        }
        Ok(())
    }

    /// Lex one action after its opening delimiter; returns whether it ended with `-}}`.
    fn action(&mut self, open_line: usize) -> Result<bool, TemplateError> {
        // Comments: `{{/* ... */}}`, only directly after the delimiter (and trim marker).
        let ws = self.rest().len() - self.rest().trim_start_matches(is_space).len();
        if self.rest()[ws..].starts_with("/*") {
            self.advance(ws + 2);
            let Some(end) = self.rest().find("*/") else {
                return Err(self.err("unclosed comment"));
            };
            self.advance(end + 2);
            let ws = self.rest().len() - self.rest().trim_start_matches(is_space).len();
            let r = &self.rest()[ws..];
            if r.starts_with("-}}") && ws > 0 {
                self.advance(ws + 3);
                return Ok(true);
            }
            if r.starts_with("}}") {
                self.advance(ws + 2);
                return Ok(false);
            }
            return Err(self.err("comment ends before closing delimiter"));
        }
        self.push(Tok::Open, open_line, false);
        let mut space_before = false;
        let mut paren_depth: usize = 0;
        loop {
            let rest = self.rest();
            let Some(c) = rest.chars().next() else {
                return Err(self.err("unclosed action"));
            };
            let line = self.line;
            if is_space(c) {
                let n = rest.len() - rest.trim_start_matches(is_space).len();
                let r = &rest[n..];
                if r.starts_with("-}}") {
                    if paren_depth > 0 {
                        return Err(self.err("unclosed left paren"));
                    }
                    self.advance(n + 3);
                    self.push(Tok::Close, line, true);
                    return Ok(true);
                }
                self.advance(n);
                space_before = true;
                continue;
            }
            if rest.starts_with("}}") {
                if paren_depth > 0 {
                    return Err(self.err("unclosed left paren"));
                }
                self.advance(2);
                self.push(Tok::Close, line, space_before);
                return Ok(false);
            }
            let sb = space_before;
            space_before = false;
            match c {
                '|' => {
                    self.advance(1);
                    self.push(Tok::Pipe, line, sb);
                }
                '(' => {
                    paren_depth += 1;
                    self.advance(1);
                    self.push(Tok::LParen, line, sb);
                }
                ')' => {
                    if paren_depth == 0 {
                        return Err(self.err("unexpected right paren"));
                    }
                    paren_depth -= 1;
                    self.advance(1);
                    self.push(Tok::RParen, line, sb);
                }
                ',' => {
                    self.advance(1);
                    self.push(Tok::Comma, line, sb);
                }
                ':' => {
                    if !rest.starts_with(":=") {
                        return Err(self.err("expected :="));
                    }
                    self.advance(2);
                    self.push(Tok::Declare, line, sb);
                }
                '=' => {
                    self.advance(1);
                    self.push(Tok::Assign, line, sb);
                }
                '"' => {
                    let s = self.quoted()?;
                    self.push(Tok::Str(s), line, sb);
                }
                '`' => {
                    let Some(end) = rest[1..].find('`') else {
                        return Err(self.err("unterminated raw quoted string"));
                    };
                    let s = rest[1..1 + end].to_string();
                    self.advance(end + 2);
                    self.push(Tok::Str(s), line, sb);
                }
                '\'' => {
                    let v = self.char_const()?;
                    self.push(Tok::Int(v), line, sb);
                }
                '$' => {
                    let n = 1 + ident_len(&rest[1..]);
                    let name = rest[..n].to_string();
                    self.advance(n);
                    let fields = self.fields()?;
                    self.push(Tok::Var(name, fields), line, sb);
                }
                '.' => {
                    if rest[1..].starts_with(|c: char| c.is_ascii_digit()) {
                        let t = self.number()?;
                        self.push(t, line, sb);
                    } else {
                        let fields = self.fields()?;
                        if fields.is_empty() {
                            self.advance(1);
                            self.push(Tok::Dot, line, sb);
                        } else {
                            self.push(Tok::Field(fields), line, sb);
                        }
                    }
                }
                '0'..='9' | '-' | '+' => {
                    let t = self.number()?;
                    self.push(t, line, sb);
                }
                c if c == '_' || c.is_alphabetic() => {
                    let n = ident_len(rest);
                    let id = rest[..n].to_string();
                    self.advance(n);
                    // `now.Unix` chains a field on a function's result; constants have none.
                    let keyword = matches!(id.as_str(), "true" | "false" | "nil");
                    if keyword && self.rest().starts_with('.') && !self.rest()[1..].starts_with(is_space) {
                        return Err(self.err(format!("unexpected field access after identifier {id}")));
                    }
                    self.push(Tok::Ident(id), line, sb);
                }
                other => return Err(self.err(format!("unexpected {other:?} in action"))),
            }
        }
    }

    /// A chain of `.name` fields at the current position.
    fn fields(&mut self) -> Result<Vec<String>, TemplateError> {
        let mut fields = Vec::new();
        while self.rest().starts_with('.') {
            let n = ident_len(&self.rest()[1..]);
            if n == 0 {
                if fields.is_empty() {
                    return Ok(fields);
                }
                return Err(self.err("bad field name after '.'"));
            }
            fields.push(self.rest()[1..1 + n].to_string());
            self.advance(1 + n);
        }
        Ok(fields)
    }

    fn quoted(&mut self) -> Result<String, TemplateError> {
        let rest = self.rest();
        let mut out = String::new();
        let mut chars = rest.char_indices().skip(1);
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => {
                    self.advance(i + 1);
                    return Ok(out);
                }
                '\n' => break,
                '\\' => {
                    let Some((_, e)) = chars.next() else { break };
                    match e {
                        'n' => out.push('\n'),
                        't' => out.push('\t'),
                        'r' => out.push('\r'),
                        'a' => out.push('\x07'),
                        'b' => out.push('\x08'),
                        'f' => out.push('\x0c'),
                        'v' => out.push('\x0b'),
                        '\\' => out.push('\\'),
                        '"' => out.push('"'),
                        '\'' => out.push('\''),
                        'x' | 'u' | 'U' => {
                            let n = match e {
                                'x' => 2,
                                'u' => 4,
                                _ => 8,
                            };
                            let mut hex = String::new();
                            for _ in 0..n {
                                match chars.next() {
                                    Some((_, h)) => hex.push(h),
                                    None => return Err(self.err("bad escape in string")),
                                }
                            }
                            let v = u32::from_str_radix(&hex, 16).map_err(|_| self.err("bad escape in string"))?;
                            let ch = char::from_u32(v).ok_or_else(|| self.err("bad escape in string"))?;
                            out.push(ch);
                        }
                        _ => return Err(self.err(format!("unknown escape sequence \\{e}"))),
                    }
                }
                c => out.push(c),
            }
        }
        Err(self.err("unterminated quoted string"))
    }

    fn char_const(&mut self) -> Result<i64, TemplateError> {
        let rest = self.rest();
        let Some(end) = rest[1..].find('\'') else {
            return Err(self.err("unterminated character constant"));
        };
        let body = &rest[1..1 + end];
        let v = match body {
            "\\n" => '\n',
            "\\t" => '\t',
            "\\r" => '\r',
            "\\\\" => '\\',
            "\\'" => '\'',
            _ => {
                let mut it = body.chars();
                match (it.next(), it.next()) {
                    (Some(c), None) => c,
                    _ => return Err(self.err(format!("malformed character constant '{body}'"))),
                }
            }
        };
        self.advance(end + 2);
        Ok(v as i64)
    }

    fn number(&mut self) -> Result<Tok, TemplateError> {
        let rest = self.rest();
        let n = rest
            .char_indices()
            .find(|&(i, c)| {
                !(c.is_ascii_alphanumeric()
                    || c == '_'
                    || c == '.'
                    || (i == 0 && (c == '-' || c == '+'))
                    || ((c == '-' || c == '+') && i > 0 && matches!(rest.as_bytes()[i - 1], b'e' | b'E' | b'p' | b'P')))
            })
            .map(|(i, _)| i)
            .unwrap_or(rest.len());
        let text = &rest[..n];
        let tok = parse_number(text).ok_or_else(|| self.err(format!("bad number syntax: {text:?}")))?;
        self.advance(n);
        Ok(tok)
    }
}

fn ident_len(s: &str) -> usize {
    s.char_indices().find(|&(_, c)| !(c == '_' || c.is_alphanumeric())).map(|(i, _)| i).unwrap_or(s.len())
}

/// Parse a Go number literal: decimal, `0x`, `0o`, `0b`, leading-zero octal, floats, `_` separators.
fn parse_number(text: &str) -> Option<Tok> {
    let (neg, body) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    if body.is_empty() {
        return None;
    }
    let clean: String = body.chars().filter(|&c| c != '_').collect();
    let lower = clean.to_ascii_lowercase();
    let int = if let Some(h) = lower.strip_prefix("0x") {
        i64::from_str_radix(h, 16).ok()
    } else if let Some(o) = lower.strip_prefix("0o") {
        i64::from_str_radix(o, 8).ok()
    } else if let Some(b) = lower.strip_prefix("0b") {
        i64::from_str_radix(b, 2).ok()
    } else if lower.len() > 1 && lower.starts_with('0') && lower.bytes().all(|b| b.is_ascii_digit()) {
        i64::from_str_radix(&lower[1..], 8).ok()
    } else if lower.bytes().all(|b| b.is_ascii_digit()) {
        lower.parse::<i64>().ok()
    } else {
        None
    };
    if let Some(i) = int {
        return Some(Tok::Int(if neg { i.checked_neg()? } else { i }));
    }
    if lower.starts_with("0x") || !lower.bytes().any(|b| b.is_ascii_digit()) || lower.contains("inf") {
        return None;
    }
    let f: f64 = lower.parse().ok()?;
    Some(Tok::Float(if neg { -f } else { f }))
}
