//! Go `fmt` formatting for `print`, `println` and `printf`.

pub use crate::quote::go_quote;
use crate::value::{Value, format_float_g};

fn is_string(v: &Value) -> bool {
    matches!(v, Value::Str(_) | Value::Bytes(_))
}

/// Go `fmt.Sprint`: a space between operands when neither side is a string.
pub fn sprint(args: &[Value]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, a) in args.iter().enumerate() {
        if i > 0 && !is_string(a) && !is_string(&args[i - 1]) {
            out.push(b' ');
        }
        out.extend(display_bytes(a));
    }
    out
}

/// Go `fmt.Sprintln`: spaces between all operands and a trailing newline.
pub fn sprintln(args: &[Value]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, a) in args.iter().enumerate() {
        if i > 0 {
            out.push(b' ');
        }
        out.extend(display_bytes(a));
    }
    out.push(b'\n');
    out
}

fn display_bytes(v: &Value) -> Vec<u8> {
    match v {
        Value::Bytes(b) => b.clone(),
        other => other.to_display().into_bytes(),
    }
}

#[derive(Default, Clone, Copy)]
struct Spec {
    minus: bool,
    plus: bool,
    sharp: bool,
    zero: bool,
    space: bool,
    width: Option<usize>,
    prec: Option<usize>,
}

/// Go `fmt.Sprintf` with the common verbs; output is bounded by `max` bytes.
pub fn sprintf(format: &str, args: &[Value], max: usize) -> Result<Vec<u8>, String> {
    let mut out: Vec<u8> = Vec::new();
    let mut argi = 0;
    let mut chars = format.char_indices().peekable();
    let too_big = || format!("printf result larger than {max} bytes");
    while let Some((_, c)) = chars.next() {
        if c != '%' {
            let mut buf = [0u8; 4];
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            continue;
        }
        let mut spec = Spec::default();
        while let Some(&(_, f)) = chars.peek() {
            match f {
                '-' => spec.minus = true,
                '+' => spec.plus = true,
                '#' => spec.sharp = true,
                '0' => spec.zero = true,
                ' ' => spec.space = true,
                _ => break,
            }
            chars.next();
        }
        let num = |chars: &mut std::iter::Peekable<std::str::CharIndices<'_>>| -> Option<usize> {
            let mut n: Option<usize> = None;
            while let Some(&(_, d)) = chars.peek() {
                let Some(dv) = d.to_digit(10) else { break };
                n = Some(n.unwrap_or(0).saturating_mul(10).saturating_add(dv as usize));
                chars.next();
            }
            n
        };
        spec.width = num(&mut chars);
        if let Some(&(_, '.')) = chars.peek() {
            chars.next();
            spec.prec = Some(num(&mut chars).unwrap_or(0));
        }
        if spec.width.unwrap_or(0) > max || spec.prec.unwrap_or(0) > max {
            return Err(too_big());
        }
        let Some((_, verb)) = chars.next() else {
            out.extend_from_slice(b"%!(NOVERB)");
            break;
        };
        if verb == '%' {
            out.push(b'%');
            continue;
        }
        let Some(arg) = args.get(argi) else {
            out.extend_from_slice(format!("%!{verb}(MISSING)").as_bytes());
            continue;
        };
        argi += 1;
        let body = format_one(verb, &spec, arg);
        out.extend(pad(&spec, body, verb));
        if out.len() > max {
            return Err(too_big());
        }
    }
    if argi < args.len() {
        out.extend_from_slice(b"%!(EXTRA ");
        for (i, a) in args[argi..].iter().enumerate() {
            if i > 0 {
                out.extend_from_slice(b", ");
            }
            out.extend_from_slice(format!("{}={}", a.type_name(), a.to_display()).as_bytes());
        }
        out.push(b')');
    }
    if out.len() > max {
        return Err(too_big());
    }
    Ok(out)
}

fn bad(verb: char, v: &Value) -> Vec<u8> {
    match v {
        Value::Nil => format!("%!{verb}(<nil>)").into_bytes(),
        _ => format!("%!{verb}({}={})", v.type_name(), v.to_display()).into_bytes(),
    }
}

fn sign(spec: &Spec, negative: bool) -> &'static str {
    if negative {
        "-"
    } else if spec.plus {
        "+"
    } else if spec.space {
        " "
    } else {
        ""
    }
}

fn format_int(verb: char, spec: &Spec, i: i64) -> Option<String> {
    let u = i.unsigned_abs();
    let digits = match verb {
        'd' | 'v' => u.to_string(),
        'x' => format!("{u:x}"),
        'X' => format!("{u:X}"),
        'o' => format!("{u:o}"),
        'O' => format!("0o{u:o}"),
        'b' => format!("{u:b}"),
        'c' => return Some(char::from_u32(u32::try_from(i).ok()?).unwrap_or('\u{FFFD}').to_string()),
        'q' => {
            let c = char::from_u32(u32::try_from(i).ok()?).unwrap_or('\u{FFFD}');
            let q = go_quote(&c.to_string());
            let inner = &q[1..q.len() - 1];
            return Some(format!(
                "'{}'",
                if inner == "\\\"" {
                    "\""
                } else if c == '\'' {
                    "\\'"
                } else {
                    inner
                }
            ));
        }
        'U' => return Some(format!("U+{u:04X}")),
        'e' | 'E' | 'f' | 'F' | 'g' | 'G' => return None,
        _ => return None,
    };
    let digits = match spec.prec {
        Some(p) if digits.len() < p => format!("{}{digits}", "0".repeat(p - digits.len())),
        _ => digits,
    };
    let prefix = match (spec.sharp, verb) {
        (true, 'x') => "0x",
        (true, 'X') => "0X",
        (true, 'o') => "0",
        _ => "",
    };
    Some(format!("{}{prefix}{digits}", sign(spec, i < 0)))
}

fn format_float(verb: char, spec: &Spec, f: f64) -> Option<String> {
    let body = match verb {
        'v' | 'g' | 'G' if spec.prec.is_none() => {
            let s = format_float_g(f.abs());
            if verb == 'G' { s.to_uppercase() } else { s }
        }
        'f' | 'F' => format!("{:.*}", spec.prec.unwrap_or(6), f.abs()),
        'e' | 'E' => {
            let s = format!("{:.*e}", spec.prec.unwrap_or(6), f.abs());
            let (m, e) = s.split_once('e').unwrap_or((&s, "0"));
            let e: i32 = e.parse().unwrap_or(0);
            let s = format!("{m}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs());
            if verb == 'E' { s.to_uppercase() } else { s }
        }
        'g' | 'G' | 'v' => {
            // %.Ng: N significant digits.
            let p = spec.prec.unwrap_or(6).max(1);
            let s = format!("{:.*e}", p - 1, f.abs());
            let (m, e) = s.split_once('e').unwrap_or((&s, "0"));
            let e: i32 = e.parse().unwrap_or(0);
            let s = if e < -4 || e >= p as i32 {
                let m = trim_zeros(m);
                format!("{m}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs())
            } else {
                trim_zeros(&format!("{:.*}", (p as i32 - 1 - e).max(0) as usize, f.abs())).to_string()
            };
            if verb == 'G' { s.to_uppercase() } else { s }
        }
        _ => return None,
    };
    Some(format!("{}{body}", sign(spec, f.is_sign_negative() && f != 0.0 || f < 0.0)))
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.') } else { s }
}

fn format_one(verb: char, spec: &Spec, v: &Value) -> Vec<u8> {
    if verb == 'T' {
        return if matches!(v, Value::Nil) { b"<nil>".to_vec() } else { v.type_name().as_bytes().to_vec() };
    }
    match v {
        Value::Str(_) | Value::Bytes(_) => {
            let b = v.to_bytes();
            match verb {
                's' | 'v' => {
                    if spec.sharp && verb == 'v' {
                        return go_quote(&String::from_utf8_lossy(&b)).into_bytes();
                    }
                    match spec.prec {
                        Some(p) => {
                            let s = String::from_utf8_lossy(&b);
                            s.chars().take(p).collect::<String>().into_bytes()
                        }
                        None => b,
                    }
                }
                'q' => {
                    let s = String::from_utf8_lossy(&b);
                    if spec.sharp && !s.contains('`') {
                        format!("`{s}`").into_bytes()
                    } else {
                        go_quote(&s).into_bytes()
                    }
                }
                'x' => hex_bytes(&b, false, spec),
                'X' => hex_bytes(&b, true, spec),
                _ => bad(verb, v),
            }
        }
        Value::Obj(o) => match verb {
            's' | 'v' => o.display().into_bytes(),
            'q' => go_quote(&o.display()).into_bytes(),
            _ => bad(verb, v),
        },
        Value::Int(i) | Value::Int64(i) => {
            format_int(verb, spec, *i).map(String::into_bytes).unwrap_or_else(|| bad(verb, v))
        }
        Value::Float(f) => format_float(verb, spec, *f).map(String::into_bytes).unwrap_or_else(|| bad(verb, v)),
        Value::Bool(b) => match verb {
            't' | 'v' => b.to_string().into_bytes(),
            _ => bad(verb, v),
        },
        Value::Nil => match verb {
            'v' => b"<nil>".to_vec(),
            _ => bad(verb, v),
        },
        Value::List(l) => {
            let mut out = vec![b'['];
            for (i, e) in l.iter().enumerate() {
                if i > 0 {
                    out.push(b' ');
                }
                out.extend(format_one(verb, spec, e));
            }
            out.push(b']');
            out
        }
        Value::Map(m) => {
            let mut out = b"map[".to_vec();
            for (i, (k, e)) in m.borrow().iter().enumerate() {
                if i > 0 {
                    out.push(b' ');
                }
                out.extend(format_one(verb, spec, &Value::Str(k.clone())));
                out.push(b':');
                out.extend(format_one(verb, spec, e));
            }
            out.push(b']');
            out
        }
    }
}

fn hex_bytes(b: &[u8], upper: bool, spec: &Spec) -> Vec<u8> {
    let mut s = if upper { hex::encode_upper(b) } else { hex::encode(b) };
    if spec.sharp {
        s = format!("{}{s}", if upper { "0X" } else { "0x" });
    }
    s.into_bytes()
}

fn pad(spec: &Spec, body: Vec<u8>, verb: char) -> Vec<u8> {
    let Some(w) = spec.width else { return body };
    let len = String::from_utf8_lossy(&body).chars().count();
    if len >= w {
        return body;
    }
    let fill = w - len;
    if spec.minus {
        let mut out = body;
        out.extend(std::iter::repeat_n(b' ', fill));
        return out;
    }
    let numeric = matches!(verb, 'd' | 'x' | 'X' | 'o' | 'b' | 'f' | 'F' | 'e' | 'E' | 'g' | 'G' | 'v');
    if spec.zero && numeric && spec.prec.is_none() {
        let sign_len = usize::from(matches!(body.first(), Some(b'-' | b'+' | b' ')));
        let mut out = body[..sign_len].to_vec();
        out.extend(std::iter::repeat_n(b'0', fill));
        out.extend_from_slice(&body[sign_len..]);
        return out;
    }
    let mut out: Vec<u8> = std::iter::repeat_n(b' ', fill).collect();
    out.extend(body);
    out
}
