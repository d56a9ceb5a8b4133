//! Sprig string functions built on `huandu/xstrings` and `Masterminds/goutils`: case
//! conversions, wrapping, initials, abbreviation. Their quirks are kept (goutils reads some
//! strings byte by byte), so the output is upstream's for every input.

use super::{FnCtx, FnResult, Func, check_size, int, s, want};
use crate::value::Value;

pub const FUNCS: &[(&str, Func)] = &[
    ("camelcase", camelcase),
    ("snakecase", snakecase),
    ("kebabcase", kebabcase),
    ("swapcase", swapcase),
    ("initials", initials),
    ("wrap", wrap),
    ("wrapWith", wrap_with),
    ("abbrevboth", abbrevboth),
    ("plural", plural),
    ("hello", hello),
];

/// Go's `unicode.IsSpace`.
pub(crate) fn go_space(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\u{b}' | '\u{c}' | '\r' | ' ' | '\u{85}' | '\u{a0}')
        || (c as u32 > 0xff && c.is_whitespace())
}

/// Go's `unicode.IsPunct` (category P).
fn go_punct(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_punctuation() && !matches!(c, '$' | '+' | '<' | '=' | '>' | '^' | '`' | '|' | '~');
    }
    matches!(c as u32, 0xa1 | 0xa7 | 0xab | 0xb6 | 0xb7 | 0xbb | 0xbf | 0x2010..=0x2027 | 0x2030..=0x205e | 0x3001..=0x3003 | 0x3008..=0x3011 | 0xff01..=0xff0f)
}

fn upper(c: char) -> char {
    let mut u = c.to_uppercase();
    match (u.next(), u.next()) {
        (Some(x), None) => x,
        _ => c,
    }
}

fn lower(c: char) -> char {
    let mut l = c.to_lowercase();
    match (l.next(), l.next()) {
        (Some(x), None) => x,
        _ => c,
    }
}

fn is_upper(c: char) -> bool {
    c.is_uppercase() && c.is_alphabetic() && lower(c) != c
}

fn is_connector(c: char) -> bool {
    c == '-' || c == '_' || go_space(c)
}

/// xstrings' `isAlphabet`: a letter that is not a CJK ideograph.
fn is_alphabet(c: char) -> bool {
    let r = c as u32;
    c.is_alphabetic()
        && !(0x4e00..=0x9fcc).contains(&r)
        && !(0x3400..=0x4d85).contains(&r)
        && !(0x20000..=0x2b81d).contains(&r)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Word {
    None,
    Number,
    Upper,
    Alpha,
    Connector,
    Punct,
    Other,
}

/// xstrings' `nextWord`: the next run of one kind and the rest.
fn next_word(s: &str) -> (Word, &str, &str) {
    let mut chars = s.chars();
    let Some(first) = chars.next() else { return (Word::None, "", "") };
    let mut end = first.len_utf8();
    let run = |end: &mut usize, keep: &dyn Fn(char) -> bool| {
        for c in s[*end..].chars() {
            if !keep(c) {
                break;
            }
            *end += c.len_utf8();
        }
    };
    let kind = if is_connector(first) {
        run(&mut end, &is_connector);
        Word::Connector
    } else if go_punct(first) {
        run(&mut end, &go_punct);
        Word::Punct
    } else if is_upper(first) {
        match s[end..].chars().next() {
            Some(c) if is_upper(c) => {
                let mut last = 0;
                for c in s[end..].chars() {
                    if !is_upper(c) {
                        // "HTTPStatus": the S starts the next word.
                        if is_alphabet(c) {
                            end -= last;
                        }
                        break;
                    }
                    last = c.len_utf8();
                    end += last;
                }
            }
            Some(c) if is_alphabet(c) => run(&mut end, &|c| is_alphabet(c) && !is_upper(c)),
            _ => {}
        }
        Word::Upper
    } else if is_alphabet(first) {
        run(&mut end, &|c| is_alphabet(c) && !is_upper(c));
        Word::Alpha
    } else if first.is_numeric() {
        run(&mut end, &char::is_numeric);
        Word::Number
    } else {
        run(&mut end, &|c| !(is_connector(c) || is_alphabet(c) || c.is_numeric() || go_punct(c)));
        Word::Other
    };
    (kind, &s[..end], &s[end..])
}

fn push_lower(out: &mut String, kind: Word, word: &str, connector: char) {
    if kind != Word::Upper && kind != Word::Connector {
        out.push_str(word);
        return;
    }
    for c in word.chars() {
        out.push(if is_connector(c) { connector } else { lower(c) });
    }
}

/// xstrings' `camelCaseToLowerCase`, the core of `snakecase` and `kebabcase`.
fn to_lower_case(text: &str, connector: char) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    let (mut kind, mut word, mut rest) = next_word(text);
    while !rest.is_empty() {
        if kind != Word::Connector {
            push_lower(&mut out, kind, word, connector);
        }
        let (prev, last) = (kind, word);
        (kind, word, rest) = next_word(rest);
        match prev {
            Word::Number => {
                while kind == Word::Alpha || kind == Word::Number {
                    push_lower(&mut out, kind, word, connector);
                    (kind, word, rest) = next_word(rest);
                }
                if !matches!(kind, Word::None | Word::Punct | Word::Connector) {
                    out.push(connector);
                }
            }
            Word::Connector => push_lower(&mut out, prev, last, connector),
            Word::Punct => {}
            _ => {
                if kind != Word::Number {
                    if kind != Word::Connector && kind != Word::Punct {
                        out.push(connector);
                    }
                    continue;
                }
                if rest.is_empty() {
                    continue;
                }
                let number = word;
                (kind, word, rest) = next_word(rest);
                // A number followed by anything but letters belongs to the word before it.
                if kind != Word::Alpha {
                    push_lower(&mut out, Word::Number, number, connector);
                    if kind != Word::Connector && kind != Word::Punct {
                        out.push(connector);
                    }
                    continue;
                }
                out.push(connector);
                push_lower(&mut out, Word::Number, number, connector);
                while kind == Word::Alpha || kind == Word::Number {
                    push_lower(&mut out, kind, word, connector);
                    (kind, word, rest) = next_word(rest);
                }
                if !matches!(kind, Word::None | Word::Connector | Word::Punct) {
                    out.push(connector);
                }
            }
        }
    }
    push_lower(&mut out, kind, word, connector);
    out
}

/// xstrings' `ToPascalCase` (Sprig's `camelcase`): `some_words` → `SomeWords`.
fn pascal_case(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    let mut r0 = None;
    let mut first_upper = false;
    for c in chars.by_ref() {
        if !is_connector(c) {
            first_upper = is_upper(c);
            r0 = Some(upper(c));
            break;
        }
        out.push(c);
    }
    let Some(mut r0) = r0 else { return out };
    for c in chars {
        let r1 = r0;
        r0 = c;
        if is_connector(r0) && is_connector(r1) {
            out.push(r1);
            continue;
        }
        if is_connector(r1) {
            first_upper = is_upper(r0);
            r0 = upper(r0);
        } else {
            if first_upper {
                if is_upper(r0) {
                    r0 = lower(r0);
                } else {
                    first_upper = false;
                }
            }
            out.push(r1);
        }
    }
    out.push(r0);
    out
}

fn camelcase(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    Ok(Value::Str(pascal_case(&s(&a[0]))))
}

fn snakecase(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    Ok(Value::Str(to_lower_case(&s(&a[0]), '_')))
}

fn kebabcase(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    Ok(Value::Str(to_lower_case(&s(&a[0]), '-')))
}

/// goutils' `SwapCase`: upper to lower; lower to title case at a word's start, else upper.
fn swapcase(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    let mut space = true;
    let out = s(&a[0])
        .chars()
        .map(|c| {
            if is_upper(c) {
                space = false;
                lower(c)
            } else if c.is_lowercase() && upper(c) != c {
                space = false;
                upper(c)
            } else {
                space = go_space(c);
                c
            }
        })
        .collect();
    Ok(Value::Str(out))
}

/// Go's `unicode.IsSpace` of a byte read as a rune (goutils reads strings byte by byte).
pub(crate) fn byte_space(b: u8) -> bool {
    matches!(b, b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | b' ' | 0x85 | 0xa0)
}

/// goutils' `Initials`: the first byte of each whitespace-separated word.
fn initials(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    let mut gap = true;
    let mut out = String::new();
    for b in s(&a[0]).bytes() {
        if byte_space(b) {
            gap = true;
        } else if gap {
            out.push(char::from(b));
            gap = false;
        }
    }
    Ok(Value::Str(out))
}

/// goutils' `WrapCustom`: break lines at spaces before column `width` (bytes); long words
/// are cut only with `cut_long`.
fn wrap_custom(text: &[u8], width: i64, newline: &[u8], cut_long: bool) -> Vec<u8> {
    if text.is_empty() {
        return Vec::new();
    }
    let newline: &[u8] = if newline.is_empty() { b"\n" } else { newline };
    let width = usize::try_from(width.max(1)).unwrap_or(usize::MAX);
    let mut out = Vec::with_capacity(text.len());
    let mut offset = 0;
    while text.len() - offset > width {
        if text[offset] == b' ' {
            offset += 1;
            continue;
        }
        let end = (width + offset + 1).min(text.len());
        match text[offset..end].iter().rposition(|b| *b == b' ') {
            Some(i) => {
                out.extend_from_slice(&text[offset..offset + i]);
                out.extend_from_slice(newline);
                offset += i + 1;
            }
            None if cut_long => {
                out.extend_from_slice(&text[offset..offset + width]);
                out.extend_from_slice(newline);
                offset += width;
            }
            None => match text[offset + width..].iter().position(|b| *b == b' ') {
                None => {
                    out.extend_from_slice(&text[offset..]);
                    offset = text.len();
                }
                Some(i) => {
                    out.extend_from_slice(&text[offset..offset + width + i]);
                    out.extend_from_slice(newline);
                    offset += width + i + 1;
                }
            },
        }
    }
    out.extend_from_slice(&text[offset..]);
    out
}

/// `wrap width s`.
fn wrap(ctx: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 2)?;
    let text = s(&a[1]);
    check_size(ctx, text.len().saturating_mul(2))?;
    Ok(Value::from_bytes(wrap_custom(text.as_bytes(), int(&a[0]), b"", false)))
}

/// `wrapWith width separator s`: long words are cut too.
fn wrap_with(ctx: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 3)?;
    let (sep, text) = (s(&a[1]), s(&a[2]));
    let width = int(&a[0]).max(1).unsigned_abs() as usize;
    let breaks = text.len() / width + 1;
    check_size(ctx, text.len().saturating_add(breaks.saturating_mul(sep.len().max(1))))?;
    Ok(Value::from_bytes(wrap_custom(text.as_bytes(), int(&a[0]), sep.as_bytes(), true)))
}

/// goutils' `AbbreviateFull`: at most `max` bytes around byte `offset`, with `...` markers.
pub(crate) fn abbreviate(b: &[u8], offset: i64, max: i64) -> Vec<u8> {
    let len = b.len() as i64;
    if b.is_empty() || max < 4 {
        return Vec::new();
    }
    if len <= max {
        return b.to_vec();
    }
    let mut offset = offset.min(len);
    // Go's int arithmetic wraps: a huge negative offset ends up at the end, as upstream.
    if len.wrapping_sub(offset) < max - 3 {
        offset = len - (max - 3);
    }
    if offset <= 4 {
        let mut out = b[..(max - 3) as usize].to_vec();
        out.extend_from_slice(b"...");
        return out;
    }
    if max < 7 {
        return Vec::new();
    }
    let mut out = b"...".to_vec();
    if offset + max - 3 < len {
        out.extend(abbreviate(&b[offset as usize..], 0, max - 3));
    } else {
        out.extend_from_slice(&b[(len - (max - 3)) as usize..]);
    }
    out
}

/// `abbrevboth left right s`: abbreviate on both sides.
fn abbrevboth(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 3)?;
    let (left, right, text) = (int(&a[0]), int(&a[1]), s(&a[2]));
    if right < 4 || (left > 0 && right < 7) {
        return Ok(Value::Str(text));
    }
    Ok(Value::from_bytes(abbreviate(text.as_bytes(), left, right)))
}

/// `plural one many count`.
fn plural(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 3)?;
    Ok(if int(&a[2]) == 1 { a[0].clone() } else { a[1].clone() })
}

fn hello(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 0)?;
    Ok(Value::str("Hello!"))
}
