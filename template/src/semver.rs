//! Semantic versions and constraints with the rules of `github.com/Masterminds/semver/v3`
//! (v3.4.0, the version upstream's Sprig uses): loose versions (`v1.2`, `1.02.3`), and
//! constraints with `=`, `!=`, `>`, `<`, `>=`, `<=`, `~`, `~>`, `^`, wildcards (`1.2.x`), ranges
//! (`1 - 2`), `,` or spaces for AND and `||` for OR. A prerelease version satisfies a constraint
//! only when the constraint names a prerelease.

use std::cmp::Ordering;
use std::sync::OnceLock;

use regex::Regex;

/// A parsed version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Version {
    pub major: u64,
    pub minor: u64,
    pub patch: u64,
    pub pre: String,
    pub metadata: String,
    pub original: String,
}

const LOOSE: &str =
    r"v?([0-9]+)(\.[0-9]+)?(\.[0-9]+)?(-([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?(\+([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?";
const CV: &str = r"v?([0-9|x|X|\*]+)(\.[0-9|x|X|\*]+)?(\.[0-9|x|X|\*]+)?(-([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?(\+([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?";
const OPS: &str = r"=||!=|>|<|>=|=>|<=|=<|~|~>|\^";

struct Res {
    loose: Regex,
    constraint: Regex,
    range: Regex,
    find: Regex,
    valid: Regex,
}

fn res() -> &'static Res {
    static R: OnceLock<Option<Res>> = OnceLock::new();
    R.get_or_init(|| {
        Some(Res {
            loose: Regex::new(&format!("^{LOOSE}$")).ok()?,
            constraint: Regex::new(&format!(r"^\s*({OPS})\s*({CV})\s*$")).ok()?,
            range: Regex::new(&format!(r"\s*({CV})\s+-\s+({CV})\s*")).ok()?,
            find: Regex::new(&format!(r"({OPS})\s*({CV})")).ok()?,
            valid: Regex::new(&format!(r"^(\s*({OPS})\s*({CV})\s*)((?:\s+|,\s*)({OPS})\s*({CV})\s*)*$")).ok()?,
        })
    })
    .as_ref()
    .unwrap_or_else(|| unreachable!("the semver expressions are constants"))
}

const ALLOWED: &str = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-0123456789";

fn valid_pre(p: &str) -> Result<(), String> {
    for part in p.split('.') {
        if part.is_empty() {
            return Err("invalid prerelease string".into());
        }
        if part.bytes().all(|c| c.is_ascii_digit()) {
            if part.len() > 1 && part.starts_with('0') {
                return Err("version segment starts with 0".into());
            }
        } else if !part.chars().all(|c| ALLOWED.contains(c)) {
            return Err("invalid prerelease string".into());
        }
    }
    Ok(())
}

fn valid_meta(m: &str) -> Result<(), String> {
    if m.split('.').any(|p| p.is_empty() || !p.chars().all(|c| ALLOWED.contains(c))) {
        return Err("invalid metadata string".into());
    }
    Ok(())
}

fn segment(s: &str) -> Result<u64, String> {
    let s = s.trim_start_matches('.');
    s.parse::<u64>().map_err(|_| {
        format!(
            "error parsing version segment: strconv.ParseUint: parsing {}: value out of range",
            crate::quote::go_quote(s)
        )
    })
}

impl Version {
    /// `semver.NewVersion` (coercing: leading zeros and missing minor/patch accepted).
    pub fn parse(v: &str) -> Result<Version, String> {
        let m = res().loose.captures(v).ok_or("invalid semantic version")?;
        let get = |i: usize| m.get(i).map_or("", |x| x.as_str());
        let version = Version {
            major: segment(get(1))?,
            minor: if get(2).is_empty() { 0 } else { segment(get(2))? },
            patch: if get(3).is_empty() { 0 } else { segment(get(3))? },
            pre: get(5).to_string(),
            metadata: get(8).to_string(),
            original: v.to_string(),
        };
        if !version.pre.is_empty() {
            valid_pre(&version.pre)?;
        }
        if !version.metadata.is_empty() {
            valid_meta(&version.metadata)?;
        }
        Ok(version)
    }

    /// `1.2.3-pre+meta`.
    pub fn display(&self) -> String {
        let mut s = format!("{}.{}.{}", self.major, self.minor, self.patch);
        if !self.pre.is_empty() {
            s.push('-');
            s.push_str(&self.pre);
        }
        if !self.metadata.is_empty() {
            s.push('+');
            s.push_str(&self.metadata);
        }
        s
    }

    /// Precedence; metadata is ignored.
    pub fn compare(&self, o: &Version) -> Ordering {
        (self.major, self.minor, self.patch).cmp(&(o.major, o.minor, o.patch)).then_with(|| {
            match (self.pre.is_empty(), o.pre.is_empty()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                (false, false) => compare_pre(&self.pre, &o.pre),
            }
        })
    }
}

fn compare_pre(a: &str, b: &str) -> Ordering {
    let (sa, sb): (Vec<&str>, Vec<&str>) = (a.split('.').collect(), b.split('.').collect());
    for i in 0..sa.len().max(sb.len()) {
        let (x, y) = (sa.get(i).copied().unwrap_or(""), sb.get(i).copied().unwrap_or(""));
        let o = compare_part(x, y);
        if o != Ordering::Equal {
            return o;
        }
    }
    Ordering::Equal
}

fn compare_part(s: &str, o: &str) -> Ordering {
    if s == o {
        return Ordering::Equal;
    }
    if s.is_empty() {
        return Ordering::Less;
    }
    if o.is_empty() {
        return Ordering::Greater;
    }
    match (s.parse::<u64>(), o.parse::<u64>()) {
        (Err(_), Err(_)) => {
            if s > o {
                Ordering::Greater
            } else {
                Ordering::Less
            }
        }
        (Ok(_), Err(_)) => Ordering::Less,
        (Err(_), Ok(_)) => Ordering::Greater,
        (Ok(a), Ok(b)) => {
            if a > b {
                Ordering::Greater
            } else {
                Ordering::Less
            }
        }
    }
}

struct Constraint {
    con: Version,
    op: String,
    dirty: bool,
    minor_dirty: bool,
    patch_dirty: bool,
}

fn is_x(s: &str) -> bool {
    matches!(s, "x" | "*" | "X")
}

fn parse_constraint(c: &str) -> Result<Constraint, String> {
    if c.is_empty() {
        let con = Version::parse("0.0.0")?;
        return Ok(Constraint { con, op: String::new(), dirty: true, minor_dirty: false, patch_dirty: false });
    }
    let m = res().constraint.captures(c).ok_or_else(|| format!("improper constraint: {c}"))?;
    let get = |i: usize| m.get(i).map_or("", |x| x.as_str());
    let (major, minor, patch, pre) = (get(3), get(4), get(5), get(6));
    let (mut dirty, mut minor_dirty, mut patch_dirty) = (false, false, false);
    let ver = if is_x(major) || major.is_empty() {
        dirty = true;
        format!("0.0.0{pre}")
    } else if is_x(minor.trim_start_matches('.')) || minor.is_empty() {
        (dirty, minor_dirty) = (true, true);
        format!("{major}.0.0{pre}")
    } else if is_x(patch.trim_start_matches('.')) || patch.is_empty() {
        (dirty, patch_dirty) = (true, true);
        format!("{major}{minor}.0{pre}")
    } else {
        get(2).to_string()
    };
    let con = Version::parse(&ver).map_err(|_| "constraint parser error".to_string())?;
    Ok(Constraint { con, op: get(1).to_string(), dirty, minor_dirty, patch_dirty })
}

fn rewrite_range(i: &str) -> String {
    let mut out = i.to_string();
    for m in res().range.captures_iter(i) {
        let (whole, a, b) = (&m[0], &m[1], &m[11]);
        out = out.replacen(whole, &format!(">= {a}, <= {b} "), 1);
    }
    out
}

/// `semverCompare constraint version`: whether `version` satisfies `constraint`.
pub fn satisfies(constraint: &str, version: &str) -> Result<bool, String> {
    let c = rewrite_range(constraint);
    let mut ors = Vec::new();
    for part in c.split("||") {
        if !res().valid.is_match(part) {
            return Err(format!("improper constraint: {part}"));
        }
        let found: Vec<&str> = res().find.find_iter(part).map(|m| m.as_str()).collect();
        let found = if found.is_empty() { vec![part] } else { found };
        let parsed = found.into_iter().map(parse_constraint).collect::<Result<Vec<_>, _>>()?;
        let has_pre = parsed.iter().any(|p| !p.con.pre.is_empty());
        ors.push((parsed, has_pre));
    }
    let v = Version::parse(version)?;
    Ok(ors.iter().any(|(all, pre)| all.iter().all(|c| check(&v, c, *pre))))
}

fn check(v: &Version, c: &Constraint, include_pre: bool) -> bool {
    if !v.pre.is_empty() && !include_pre {
        return false;
    }
    let cmp = v.compare(&c.con);
    match c.op.as_str() {
        "" | "=" if c.dirty => tilde(v, c),
        "" | "=" => cmp == Ordering::Equal,
        "!=" => not_equal(v, c),
        ">" => {
            if !c.dirty || (v.major == c.con.major && !c.minor_dirty && !c.patch_dirty) {
                cmp == Ordering::Greater
            } else if v.major != c.con.major {
                v.major > c.con.major
            } else {
                c.patch_dirty && v.minor > c.con.minor
            }
        }
        "<" => cmp == Ordering::Less,
        ">=" | "=>" => cmp != Ordering::Less,
        "<=" | "=<" if !c.dirty => cmp != Ordering::Greater,
        "<=" | "=<" => !(v.major > c.con.major || (v.major == c.con.major && v.minor > c.con.minor && !c.minor_dirty)),
        "~" | "~>" => tilde(v, c),
        _ => caret(v, c),
    }
}

fn not_equal(v: &Version, c: &Constraint) -> bool {
    if c.dirty {
        if c.con.major != v.major {
            return true;
        }
        if c.con.minor != v.minor && !c.minor_dirty {
            return true;
        }
        if c.minor_dirty {
            return false;
        }
        if c.con.patch != v.patch && !c.patch_dirty {
            return true;
        }
        if c.patch_dirty {
            return (!v.pre.is_empty() || !c.con.pre.is_empty()) && compare_pre(&v.pre, &c.con.pre) != Ordering::Equal;
        }
    }
    v.compare(&c.con) != Ordering::Equal
}

fn tilde(v: &Version, c: &Constraint) -> bool {
    if v.compare(&c.con) == Ordering::Less {
        return false;
    }
    if c.con.major == 0 && c.con.minor == 0 && c.con.patch == 0 && !c.minor_dirty && !c.patch_dirty {
        return true;
    }
    v.major == c.con.major && (v.minor == c.con.minor || c.minor_dirty)
}

fn caret(v: &Version, c: &Constraint) -> bool {
    if v.compare(&c.con) == Ordering::Less {
        return false;
    }
    if c.con.major > 0 || c.minor_dirty {
        return v.major == c.con.major;
    }
    if v.major > 0 {
        return false;
    }
    if c.con.minor > 0 || c.patch_dirty {
        return v.minor == c.con.minor;
    }
    if v.minor > 0 {
        return false;
    }
    c.con.patch == v.patch
}
