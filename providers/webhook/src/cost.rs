//! What evaluating a JSONPath over an answer would allocate, worked out before evaluating it.
//!
//! jsonpath-rust 1.x builds the normalized path (`$['key'][0]…`) of every node it reaches as a
//! string of its own, copied from its parent's, and copies a node's path again when a union
//! (`[a,b]`), a descendant segment (`..`) or a filter clones the nodes it works on. The answer is
//! capped in size, but the tenant writes both the JSONPath and, through `spec.url`, the server
//! that answers: `$.*[*]` over `{"<1 MiB key>": [0, 0, …]}` would make a million copies of the
//! key and take the process (every tenant's) down. This walks the parsed query over the parsed
//! answer the way the library does, adding up the paths and pointers it would allocate, and
//! stops as soon as that passes [`EVALUATION_BUDGET`]. The walk keeps only (node, path length)
//! pairs and stops at the budget, so it is bounded too.
//!
//! The same walk charges the CPU work inside filter runs against [`WORK_BUDGET`]: `match()` and
//! `search()` compile their pattern on every run (a pattern may come from the answer, or be a
//! literal run once per node), and comparisons and `length()` read whole values, once per node.
//! Neither allocates much, so the memory budget does not see them. The work is a budget of its
//! own because its unit is time, not bytes: ten thousand regex compiles, an honest filter, take
//! about as long as copying several hundred MiB, so one number could not fit both.
//!
//! Work is counted in steps of about a nanosecond of one core in the release build, measured
//! with jsonpath-rust 1.0.12 and regex 1 (x86-64):
//!
//! | work | measured | charged |
//! |---|---|---|
//! | compiling `x` / `^db-.*` (as the library rewrites it) | 3 / 45 µs | 30 000 + pattern |
//! | compiling `a{1000}` / `[a-z]{1000}` / `.{1000}` | 73 µs / 155 µs / 4.2 ms | 150 / 150 per character / 5 000 per atom |
//! | compiling `\w{100}` / `\p{L}{100}` | 26 / 21 ms | 300 000 per atom |
//! | compiling a pattern past the regex size limit (refused) | ≤ 58 ms | at most 60 000 000 |
//! | matching a 1 MiB haystack (copied first) | 2.2 ms | 3 per byte, and more for big patterns |
//! | comparing two equal 1 MiB strings | 39 µs | 1 per 16 bytes of the smaller |
//! | comparing objects of 100 000 members | 1.7 ms | 20 per node of the smaller |
//!
//! [`WORK_BUDGET`] is two seconds of that: `$[?match(@.name, '^db-.*')]` over 10 000 items
//! (356 ms measured) is charged about a sixth of it.

use std::collections::HashMap;

use jsonpath_rust::parser::model::{
    Comparable, Comparison, FnArg, JpQuery, Literal, Segment, Selector, SingularQuery, SingularQuerySegment, Test,
    TestFunction,
};
use jsonpath_rust::parser::model::{Filter, FilterAtom};
use serde_json::Value;

/// Most bytes one evaluation may allocate for paths and pointers. The answers a JSONPath is
/// meant for (a few KiB, a few hundred nodes) cost a few KiB to a few hundred KiB; a hostile
/// answer of the 4 MiB cap can cost terabytes.
pub const EVALUATION_BUDGET: u64 = 32 << 20;

/// What one pointer costs beyond its path's bytes: a reference and a `String`.
const POINTER_BYTES: u64 = 32;

/// Most steps (about a nanosecond of CPU each) the work inside one evaluation's filter runs may
/// take: two seconds of a blocking thread, the same order as a template render's budget. An
/// honest filter over a few KiB takes well under a millisecond.
pub const WORK_BUDGET: u64 = 2_000_000_000;

/// Compiling any pattern: parsing, building the automata and the matcher's caches (3 µs for
/// `x`, 45 µs for `^db-.*`, whose `.` the library rewrites as a class).
const REGEX_CALL: u64 = 30_000;

/// A plain character of a pattern (0.13-0.25 µs each in long patterns of literals and escapes).
const REGEX_CHAR: u64 = 150;

/// `.` (which the library rewrites as `[^\n\r]`) and other negated classes each compile to a
/// UTF-8 automaton of their own (4.2 µs per `.`); ASCII ranges cost their characters.
const REGEX_CLASS: u64 = 5_000;

/// `\w`, `\d`, `\s`, `\p{…}` and their negations are Unicode classes of hundreds of ranges
/// (250 µs per `\w`).
const REGEX_UNICODE_CLASS: u64 = 300_000;

/// A case-insensitive pattern (`(?i)`) compiles every letter to its case folds (8 times slower).
const REGEX_CASE_FOLD: u64 = 8;

/// The regex crate refuses a pattern whose compiled form passes its size limit (10 MiB); getting
/// there takes at most ~58 ms, so no compile is charged more, whatever its repetitions.
const REGEX_COMPILE_MAX: u64 = 60_000_000;

/// Copying the haystack and scanning it with the lazy DFA (2.2 ns per byte).
const REGEX_HAYSTACK_BYTE: u64 = 3;

/// When the lazy DFA gives up, the fallback costs the pattern's size per haystack byte: one step
/// per byte for every this many steps of compiling.
const REGEX_FALLBACK_DIVISOR: u64 = 4_096;

/// One comparison or function call on top of what it reads: the operands' conversions.
const CALL: u64 = 50;

/// Bytes of a string compared or counted per step (`memcmp`, `chars().count()`: 39 µs per MiB).
const SCAN_BYTES_PER_STEP: u64 = 16;

/// One element or member of an array or object compared (17 ns per object member).
const COMPARE_NODE: u64 = 20;

/// Containers at least this costly to compare keep their size in a table, so the walk never
/// sizes a big value twice however many filter runs compare it.
const MEMO_MIN: u64 = 64 * COMPARE_NODE;

/// Which budget evaluating would pass.
#[derive(Debug, PartialEq, Eq)]
pub enum OverBudget {
    /// Allocating more than [`EVALUATION_BUDGET`] for paths and pointers.
    Memory,
    /// Working more than [`WORK_BUDGET`] steps in filter runs.
    Work,
}

/// What an evaluation within both budgets costs.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub struct Cost {
    /// Bytes allocated for paths and pointers.
    pub bytes: u64,
    /// Steps of work in filter runs.
    pub work: u64,
}

/// Nodes the evaluator holds, each with the length of the path it built for it.
type Reached<'a> = Vec<(&'a Value, u64)>;

/// The bytes evaluating `query` over `doc` with jsonpath-rust would allocate for paths and
/// pointers and the work its filter runs would do, when within [`EVALUATION_BUDGET`] and
/// [`WORK_BUDGET`].
pub fn estimate(query: &JpQuery, doc: &Value) -> Result<Cost, OverBudget> {
    let mut estimate = Estimate { root: doc, spent: 0, work: 0, sizes: HashMap::new() };
    let root = estimate.root_pointer()?;
    estimate.query(&query.segments, root)?;
    Ok(Cost { bytes: estimate.spent, work: estimate.work })
}

struct Estimate<'a> {
    root: &'a Value,
    spent: u64,
    work: u64,
    /// [`Estimate::size`] of the big containers already sized, by address.
    sizes: HashMap<*const Value, u64>,
}

/// What a filter run computes as an argument or a side of a comparison.
enum Operand<'a, 'q> {
    /// Nodes of the answer (one, for what the library reads as a value).
    Nodes(Reached<'a>),
    /// A literal of the query, copied on every run.
    Literal(&'q Literal),
    /// A number or boolean a function returned.
    Scalar,
}

impl Operand<'_, '_> {
    /// The string the library's `match()` and `search()` read: a string literal or a single
    /// string node (anything else makes them false without compiling).
    fn text(&self) -> Option<&str> {
        match self {
            Operand::Literal(Literal::String(s)) => Some(s),
            Operand::Nodes(nodes) if nodes.len() == 1 => nodes.first().and_then(|(v, _)| v.as_str()),
            _ => None,
        }
    }
}

/// Steps to compare or count a string of `len` bytes.
fn scan(len: usize) -> u64 {
    1 + len as u64 / SCAN_BYTES_PER_STEP
}

/// Steps to compile `pattern` with the regex crate: [`REGEX_CALL`] and each atom by its kind,
/// times the counted repetitions (`{n}`, `{n,m}`) around it, at most [`REGEX_COMPILE_MAX`].
/// Scanning stops at that maximum, so a long pattern is not read past it.
fn compile_work(pattern: &str) -> u64 {
    let fold = if pattern.contains("(?") { REGEX_CASE_FOLD } else { 1 };
    // The work of each open group so far, and of the last atom or group (what a repetition
    // repeats).
    let mut groups: Vec<u64> = vec![0];
    let mut last = 0u64;
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        let atom = match c {
            '\\' => match chars.next() {
                Some('p' | 'P') => {
                    if chars.peek() == Some(&'{') {
                        chars.by_ref().find(|&c| c == '}');
                    }
                    REGEX_UNICODE_CLASS
                }
                Some('w' | 'W' | 'd' | 'D' | 's' | 'S') => REGEX_UNICODE_CLASS,
                _ => REGEX_CHAR,
            },
            '.' => REGEX_CLASS,
            '[' => class_work(&mut chars),
            '(' => {
                groups.push(0);
                last = 0;
                continue;
            }
            ')' => match groups.pop() {
                Some(inner) if !groups.is_empty() => inner,
                // An unbalanced `)`: the regex does not compile; count it as a character.
                _ => {
                    groups.push(0);
                    REGEX_CHAR
                }
            },
            '{' => match repetition(&mut chars) {
                Some(times) => {
                    let more = last.saturating_mul(times.saturating_sub(1));
                    last = last.saturating_mul(times);
                    add_to_group(&mut groups, more);
                    if groups.iter().fold(0u64, |a, &b| a.saturating_add(b)) > REGEX_COMPILE_MAX {
                        break;
                    }
                    continue;
                }
                None => REGEX_CHAR,
            },
            '|' => {
                last = 0;
                continue;
            }
            '*' | '+' | '?' | '^' | '$' => continue,
            c => REGEX_CHAR * c.len_utf8() as u64,
        };
        last = atom;
        add_to_group(&mut groups, atom);
        if groups.iter().fold(0u64, |a, &b| a.saturating_add(b)) > REGEX_COMPILE_MAX {
            break;
        }
    }
    let atoms = groups.iter().fold(0u64, |a, &b| a.saturating_add(b));
    REGEX_CALL + atoms.saturating_mul(fold).min(REGEX_COMPILE_MAX)
}

fn add_to_group(groups: &mut [u64], work: u64) {
    if let Some(top) = groups.last_mut() {
        *top = top.saturating_add(work);
    }
}

/// A bracket class after its `[`, up to its `]`: a few ASCII ranges cost their characters, a
/// negated class or one holding a Unicode class compiles to a big automaton.
fn class_work(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> u64 {
    let mut work = REGEX_CHAR;
    let mut big = chars.peek() == Some(&'^');
    let mut first = true;
    while let Some(c) = chars.next() {
        match c {
            ']' if !first => break,
            '\\' => big |= matches!(chars.next(), Some('w' | 'W' | 'd' | 'D' | 's' | 'S' | 'p' | 'P')),
            _ => work = work.saturating_add(REGEX_CHAR),
        }
        first = c == '^' && first;
    }
    if big { REGEX_CLASS.max(work) } else { work }
}

/// The most times `{n}`, `{n,}` or `{n,m}` (after its `{`) repeats, or `None` when it is not
/// one: then the `{` counts as a character.
fn repetition(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> Option<u64> {
    let mut most = 0u64;
    let mut digits = 0;
    loop {
        match chars.peek().copied() {
            Some(d @ '0'..='9') => {
                chars.next();
                digits += 1;
                let n = most.saturating_mul(10).saturating_add(u64::from(d) - u64::from('0'));
                most = if digits == 1 { u64::from(d) - u64::from('0') } else { n };
            }
            Some(',') => {
                chars.next();
                digits = 0;
            }
            Some('}') => {
                chars.next();
                return Some(most.max(1));
            }
            _ => return None,
        }
    }
}

/// The length of `$[…]` minus the parent's: a name as the library escapes it, in quotes.
fn name_len(name: &str) -> u64 {
    let escaped: usize = name
        .chars()
        .map(|c| match c {
            '\u{8}' | '\u{c}' | '\n' | '\r' | '\t' | '\'' | '\\' => 2,
            c if c < '\u{20}' => 6,
            c => c.len_utf8(),
        })
        .sum();
    escaped as u64 + 4
}

/// The length of `[i]`.
fn index_len(i: usize) -> u64 {
    i.to_string().len() as u64 + 2
}

/// The children of a node with the length each adds to the path.
fn children(node: &Value) -> Box<dyn Iterator<Item = (&Value, u64)> + '_> {
    match node {
        Value::Array(items) => Box::new(items.iter().enumerate().map(|(i, v)| (v, index_len(i)))),
        Value::Object(members) => Box::new(members.iter().map(|(k, v)| (v, name_len(k)))),
        _ => Box::new(std::iter::empty()),
    }
}

fn is_container(node: &Value) -> bool {
    matches!(node, Value::Array(_) | Value::Object(_))
}

/// The indexes the library's slice selects in a list of `len`.
fn slice_indexes(len: usize, start: Option<i64>, end: Option<i64>, step: Option<i64>) -> Vec<usize> {
    let len = len as i64;
    let norm = |i: i64| if i >= 0 { i } else { len + i };
    let step = step.unwrap_or(1);
    let mut out = Vec::new();
    if step > 0 {
        let lower = norm(start.unwrap_or(0)).clamp(0, len);
        let upper = norm(end.unwrap_or(len)).clamp(0, len);
        out.extend((lower..upper).step_by(step as usize).map(|i| i as usize));
    } else if step < 0 {
        let lower = norm(end.unwrap_or(-len - 1)).clamp(-1, len - 1);
        let mut i = norm(start.unwrap_or(len - 1)).clamp(-1, len - 1);
        while lower < i {
            out.push(i as usize);
            i += step;
        }
    }
    out
}

impl<'a> Estimate<'a> {
    /// Counts one pointer whose path is `path_len` bytes long.
    fn charge(&mut self, path_len: u64) -> Result<(), OverBudget> {
        self.spent = self.spent.saturating_add(path_len).saturating_add(POINTER_BYTES);
        if self.spent > EVALUATION_BUDGET { Err(OverBudget::Memory) } else { Ok(()) }
    }

    /// Counts `steps` of work.
    fn work(&mut self, steps: u64) -> Result<(), OverBudget> {
        self.work = self.work.saturating_add(steps);
        if self.work > WORK_BUDGET { Err(OverBudget::Work) } else { Ok(()) }
    }

    /// Steps to compare `node` with a value at least as big: its strings' bytes and its nodes.
    fn size(&mut self, node: &'a Value) -> u64 {
        let children: Box<dyn Iterator<Item = (usize, &'a Value)>> = match node {
            Value::String(s) => return scan(s.len()),
            Value::Array(items) => Box::new(items.iter().map(|v| (0, v))),
            Value::Object(members) => Box::new(members.iter().map(|(k, v)| (k.len(), v))),
            _ => return 1,
        };
        let key = node as *const Value;
        if let Some(&size) = self.sizes.get(&key) {
            return size;
        }
        let mut size = COMPARE_NODE;
        for (key_len, child) in children {
            let key = if key_len > 0 { scan(key_len) } else { 0 };
            size = size.saturating_add(COMPARE_NODE).saturating_add(key).saturating_add(self.size(child));
        }
        if size >= MEMO_MIN {
            self.sizes.insert(key, size);
        }
        size
    }

    /// Steps to compare `operand` with a value at least as big.
    fn operand_size(&mut self, operand: &Operand<'a, '_>) -> u64 {
        match operand {
            Operand::Nodes(nodes) => nodes.iter().fold(1, |sum, &(node, _)| sum.saturating_add(self.size(node))),
            Operand::Literal(Literal::String(s)) => scan(s.len()),
            Operand::Literal(_) | Operand::Scalar => 1,
        }
    }

    /// Counts a copy of every pointer in `nodes`.
    fn charge_copy(&mut self, nodes: &Reached<'a>) -> Result<(), OverBudget> {
        nodes.iter().try_for_each(|&(_, len)| self.charge(len))
    }

    /// Counts a new pointer and keeps its node.
    fn reach(&mut self, out: &mut Reached<'a>, node: &'a Value, path_len: u64) -> Result<(), OverBudget> {
        self.charge(path_len)?;
        out.push((node, path_len));
        Ok(())
    }

    /// The pointer `$` queries from the root start with.
    fn root_pointer(&mut self) -> Result<Reached<'a>, OverBudget> {
        let mut out = Vec::new();
        self.reach(&mut out, self.root, 1)?;
        Ok(out)
    }

    fn query(&mut self, segments: &[Segment], from: Reached<'a>) -> Result<Reached<'a>, OverBudget> {
        segments.iter().try_fold(from, |nodes, segment| self.segment(segment, nodes))
    }

    fn segment(&mut self, segment: &Segment, nodes: Reached<'a>) -> Result<Reached<'a>, OverBudget> {
        match segment {
            Segment::Descendant(inner) => {
                let mut all = Vec::new();
                for (node, len) in nodes {
                    self.descendants(node, len, &mut all)?;
                }
                self.segment(inner, all)
            }
            Segment::Selector(selector) => self.selector(selector, nodes),
            // Each selector of a union works on its own copy of the nodes.
            Segment::Selectors(selectors) => {
                let mut out = Vec::new();
                for selector in selectors {
                    self.charge_copy(&nodes)?;
                    out.extend(self.selector(selector, nodes.clone())?);
                }
                Ok(out)
            }
        }
    }

    /// `..`: every container at or under `node` (a copy of its pointer), after a new pointer
    /// for each child on the way.
    fn descendants(&mut self, node: &'a Value, len: u64, out: &mut Reached<'a>) -> Result<(), OverBudget> {
        if !is_container(node) {
            return Ok(());
        }
        self.reach(out, node, len)?;
        for (child, step) in children(node) {
            self.charge(len + step)?;
            self.descendants(child, len + step, out)?;
        }
        Ok(())
    }

    fn selector(&mut self, selector: &Selector, nodes: Reached<'a>) -> Result<Reached<'a>, OverBudget> {
        let mut out = Vec::new();
        for (node, len) in nodes {
            match selector {
                Selector::Name(name) => self.by_name(node, len, name, &mut out)?,
                Selector::Index(i) => self.by_index(node, len, *i, &mut out)?,
                Selector::Wildcard => {
                    for (child, step) in children(node) {
                        self.reach(&mut out, child, len + step)?;
                    }
                }
                Selector::Slice(start, end, step) => {
                    if let Value::Array(items) = node {
                        for i in slice_indexes(items.len(), *start, *end, *step) {
                            if let Some(child) = items.get(i) {
                                self.reach(&mut out, child, len + index_len(i))?;
                            }
                        }
                    }
                }
                Selector::Filter(filter) => self.filter_children(filter, node, len, &mut out)?,
            }
        }
        Ok(out)
    }

    fn by_name(&mut self, node: &'a Value, len: u64, name: &str, out: &mut Reached<'a>) -> Result<(), OverBudget> {
        match node.get(name) {
            Some(child) if node.is_object() => self.reach(out, child, len + name_len(name)),
            _ => Ok(()),
        }
    }

    fn by_index(&mut self, node: &'a Value, len: u64, i: i64, out: &mut Reached<'a>) -> Result<(), OverBudget> {
        let Value::Array(items) = node else {
            return Ok(());
        };
        let at = if i >= 0 { usize::try_from(i).ok() } else { items.len().checked_sub(i.unsigned_abs() as usize) };
        match at.and_then(|at| items.get(at).map(|v| (at, v))) {
            Some((at, child)) => self.reach(out, child, len + index_len(at)),
            None => Ok(()),
        }
    }

    /// `[?…]`: the filter runs once per child (or once on the node itself when it is the
    /// current node of an enclosing filter, whose path is empty); every child is counted as
    /// selected, which is the most it can cost.
    fn filter_children(
        &mut self,
        filter: &Filter,
        node: &'a Value,
        len: u64,
        out: &mut Reached<'a>,
    ) -> Result<(), OverBudget> {
        if len == 0 {
            return self.filter_item(filter, node);
        }
        for (child, step) in children(node) {
            self.filter_item(filter, child)?;
            self.reach(out, child, len + step)?;
        }
        Ok(())
    }

    /// One run of a filter on `item`, the current node `@` (a pointer with an empty path).
    fn filter_item(&mut self, filter: &Filter, item: &'a Value) -> Result<(), OverBudget> {
        self.charge(0)?;
        match filter {
            Filter::Or(filters) | Filter::And(filters) => {
                for f in filters {
                    self.charge(0)?;
                    self.filter_item(f, item)?;
                }
                Ok(())
            }
            Filter::Atom(FilterAtom::Filter { expr, .. }) => self.filter_item(expr, item),
            Filter::Atom(FilterAtom::Test { expr, .. }) => {
                self.charge(0)?;
                self.test(expr, item).map(drop)
            }
            Filter::Atom(FilterAtom::Comparison(cmp)) => self.comparison(cmp, item),
        }
    }

    /// A comparison reads both sides whole, up to the end of the smaller; `>=` and `<=` compare
    /// copies of both sides twice.
    fn comparison(&mut self, cmp: &Comparison, item: &'a Value) -> Result<(), OverBudget> {
        let (lhs, rhs) = cmp.vals();
        self.charge(0)?;
        let lhs = self.comparable(lhs, item)?;
        let rhs = self.comparable(rhs, item)?;
        let read = self.operand_size(&lhs).min(self.operand_size(&rhs));
        let literals = [&lhs, &rhs].iter().map(|o| literal_copy(o)).fold(0u64, u64::saturating_add);
        let twice = matches!(cmp, Comparison::Gte(..) | Comparison::Lte(..));
        self.work(CALL.saturating_add(literals).saturating_add(if twice { read.saturating_mul(2) } else { read }))?;
        if twice {
            for side in [&lhs, &rhs] {
                if let Operand::Nodes(nodes) = side {
                    self.charge_copy(nodes)?;
                }
            }
        }
        Ok(())
    }

    fn comparable<'q>(&mut self, comparable: &'q Comparable, item: &'a Value) -> Result<Operand<'a, 'q>, OverBudget> {
        match comparable {
            Comparable::Literal(literal) => Ok(Operand::Literal(literal)),
            Comparable::Function(f) => self.function(f, item),
            Comparable::SingularQuery(SingularQuery::Current(segments)) => {
                self.singular(segments, vec![(item, 0)]).map(Operand::Nodes)
            }
            Comparable::SingularQuery(SingularQuery::Root(segments)) => {
                let root = self.root_pointer()?;
                self.singular(segments, root).map(Operand::Nodes)
            }
        }
    }

    fn singular(&mut self, segments: &[SingularQuerySegment], from: Reached<'a>) -> Result<Reached<'a>, OverBudget> {
        let mut nodes = from;
        for segment in segments {
            let mut out = Vec::new();
            for (node, len) in nodes {
                match segment {
                    SingularQuerySegment::Name(name) => self.by_name(node, len, name, &mut out)?,
                    SingularQuerySegment::Index(i) => self.by_index(node, len, *i, &mut out)?,
                }
            }
            nodes = out;
        }
        Ok(nodes)
    }

    fn test<'q>(&mut self, test: &'q Test, item: &'a Value) -> Result<Operand<'a, 'q>, OverBudget> {
        match test {
            Test::RelQuery(segments) => self.query(segments, vec![(item, 0)]).map(Operand::Nodes),
            Test::AbsQuery(query) => {
                let root = self.root_pointer()?;
                self.query(&query.segments, root).map(Operand::Nodes)
            }
            Test::Function(f) => self.function(f, item),
        }
    }

    /// A function's arguments and its own work; its result is a value, except `value()` of one
    /// node, which is a copy of that node's pointer.
    fn function<'q>(&mut self, function: &'q TestFunction, item: &'a Value) -> Result<Operand<'a, 'q>, OverBudget> {
        let args: Vec<&FnArg> = match function {
            TestFunction::Length(arg) => vec![arg],
            TestFunction::Value(arg) | TestFunction::Count(arg) => vec![arg],
            TestFunction::Search(a, b) | TestFunction::Match(a, b) => vec![a, b],
            TestFunction::Custom(_, args) => args.iter().collect(),
        };
        let mut operands = Vec::with_capacity(args.len());
        for arg in args {
            self.charge(0)?;
            let operand = match arg {
                FnArg::Literal(literal) => Operand::Literal(literal),
                FnArg::Test(test) => self.test(test, item)?,
                FnArg::Filter(filter) => self.filter_item(filter, item).map(|()| Operand::Scalar)?,
            };
            self.work(CALL.saturating_add(literal_copy(&operand)))?;
            operands.push(operand);
        }
        match (function, operands.as_mut_slice()) {
            (TestFunction::Search(..) | TestFunction::Match(..), [haystack, pattern]) => {
                self.regex(haystack, pattern)?;
                Ok(Operand::Scalar)
            }
            (TestFunction::Length(_), [Operand::Nodes(nodes)]) if nodes.len() == 1 => {
                let chars = nodes.first().and_then(|(v, _)| v.as_str()).map_or(1, |s| scan(s.len()));
                self.work(chars)?;
                Ok(Operand::Scalar)
            }
            (TestFunction::Value(_), [Operand::Nodes(nodes)]) if nodes.len() == 1 => {
                let nodes = std::mem::take(nodes);
                self.charge_copy(&nodes)?;
                Ok(Operand::Nodes(nodes))
            }
            (TestFunction::Custom(name, _), [lhs, rhs]) => {
                self.custom(name, lhs, rhs)?;
                Ok(Operand::Scalar)
            }
            _ => Ok(Operand::Scalar),
        }
    }

    /// `match()` and `search()` compile the pattern on every run, when both arguments are
    /// strings, and copy and scan the haystack with it.
    fn regex(&mut self, haystack: &Operand<'a, '_>, pattern: &Operand<'a, '_>) -> Result<(), OverBudget> {
        let (Some(haystack), Some(pattern)) = (haystack.text(), pattern.text()) else {
            return Ok(());
        };
        let compile = compile_work(pattern);
        self.work(compile)?;
        let per_byte = REGEX_HAYSTACK_BYTE.saturating_add(compile / REGEX_FALLBACK_DIVISOR);
        self.work(per_byte.saturating_mul(haystack.len() as u64))
    }

    /// The library's extensions: `in` and `nin` compare the first argument with every element of
    /// the second; `any_of`, `none_of` and `subset_of` compare every element of the first with
    /// every element of the second.
    fn custom(&mut self, name: &str, lhs: &Operand<'a, '_>, rhs: &Operand<'a, '_>) -> Result<(), OverBudget> {
        let elements = |o: &Operand<'a, '_>| match o {
            Operand::Nodes(nodes) if nodes.len() == 1 => nodes.first().and_then(|(v, _)| v.as_array()).map(Vec::len),
            _ => None,
        };
        let Some(rhs_len) = elements(rhs) else {
            return Ok(());
        };
        let rhs_size = self.operand_size(rhs).saturating_add(CALL.saturating_mul(rhs_len as u64));
        match name {
            "in" | "nin" => self.work(rhs_size),
            "any_of" | "none_of" | "subset_of" => {
                let lhs_len = elements(lhs).unwrap_or(0) as u64;
                self.work(lhs_len.saturating_mul(rhs_size))
            }
            _ => Ok(()),
        }
    }
}

/// Steps to copy a string literal, which the library does on every run.
fn literal_copy(operand: &Operand<'_, '_>) -> u64 {
    match operand {
        Operand::Literal(Literal::String(s)) => scan(s.len()),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cost(path: &str, doc: &Value) -> Result<Cost, OverBudget> {
        let query = jsonpath_rust::parser::parse_json_path(path).expect(path);
        estimate(&query, doc)
    }

    /// Asserts `path` over `doc` is refused for its work, and quickly.
    fn refused_for_work(path: &str, doc: &Value) {
        let started = std::time::Instant::now();
        assert_eq!(cost(path, doc), Err(OverBudget::Work), "{path}");
        assert!(started.elapsed() < std::time::Duration::from_millis(500), "{path}: {:?}", started.elapsed());
    }

    #[test]
    fn compiling_is_charged_by_what_the_pattern_compiles_to() {
        assert_eq!(compile_work("x"), REGEX_CALL + REGEX_CHAR);
        assert_eq!(compile_work("^db-.*"), REGEX_CALL + 3 * REGEX_CHAR + REGEX_CLASS);
        assert_eq!(compile_work("[a-z]{10}"), REGEX_CALL + 10 * 4 * REGEX_CHAR);
        assert_eq!(
            compile_work(r"\d{3}-(ab){2,4}"),
            REGEX_CALL + 3 * REGEX_UNICODE_CLASS + REGEX_CHAR + 4 * 2 * REGEX_CHAR
        );
        assert_eq!(compile_work("(?i)ab"), REGEX_CALL + 8 * 3 * REGEX_CHAR, "the flag counts as a character");
        // Past the regex crate's size limit, a compile fails in bounded time, however long.
        for pattern in [r"\w{1000}", "(a{1000}){1000}", &".".repeat(1 << 20)] {
            assert_eq!(compile_work(pattern), REGEX_CALL + REGEX_COMPILE_MAX, "{}", &pattern[..8]);
        }
    }

    #[test]
    fn patterns_taken_from_the_answer_are_charged_on_every_run() {
        // 1 000 runs of a 4 096-character pattern of `.`: about 17 ms each in the release build.
        let items: Vec<Value> = (0..1_000).map(|_| json!({"a": "x", "b": ".".repeat(4096)})).collect();
        refused_for_work("$[?match(@.a, @.b)]", &Value::Array(items));
        // One pattern of the answer compiled once per element of a long list.
        let doc = json!({"p": r"(\w{100}){100}", "list": vec!["a"; 100_000]});
        refused_for_work("$.list[?search(@, $.p)]", &doc);
    }

    #[test]
    fn a_literal_pattern_over_ten_thousand_small_items_is_well_within_the_budget() {
        let items: Vec<Value> = (0..10_000).map(|i| json!({"name": format!("db-{i}"), "value": "v"})).collect();
        let work = cost("$[?match(@.name, '^db-.*')]", &Value::Array(items)).expect("within budget").work;
        assert!(work >= 10_000 * compile_work("^db-.*"), "every run compiles: {work}");
        assert!(work < WORK_BUDGET / 4, "{work}");
    }

    #[test]
    fn comparisons_are_charged_by_the_size_of_what_they_compare() {
        // Two 1 MiB strings of the answer compared once per element of a long list.
        let big = "z".repeat(1 << 20);
        let doc = json!({"x": big, "y": big, "list": vec![0; 100_000]});
        refused_for_work("$.list[?$.x == $.y]", &doc);
        refused_for_work("$.list[?@ <= $.y && $.x >= $.y]", &doc);
        // Objects of 100 000 members (1.7 ms a comparison).
        let obj: serde_json::Map<String, Value> = (0..100_000).map(|i| (format!("k{i}"), json!(i))).collect();
        let doc = json!({"x": obj, "y": obj, "list": vec![0; 10_000]});
        refused_for_work("$.list[?$.x == $.y]", &doc);
        // Every element of a list looked up in another (100 000 × 100 000 comparisons).
        refused_for_work("$.list[?in(@, $.all)]", &json!({"all": vec![0; 100_000], "list": vec![0; 100_000]}));
        refused_for_work("$.list[?length($.x) > 1]", &json!({"x": big, "list": vec![0; 100_000]}));
        // Large strings each compared once cost what reading the answer does.
        let items: Vec<Value> = (0..4).map(|_| json!({"x": "q".repeat(1 << 20), "y": "q".repeat(1 << 20)})).collect();
        let work = cost("$[?@.x == @.y]", &Value::Array(items)).expect("within budget").work;
        assert!(work > 4 * (1 << 20) / SCAN_BYTES_PER_STEP, "{work}");
        assert!(work < WORK_BUDGET / 100, "{work}");
    }

    #[test]
    fn filters_over_small_answers_cost_little_work() {
        let doc = json!({"items": [{"name": "db-a", "n": 1}, {"name": "web", "n": 2}], "min": 1});
        for path in ["$.items[?@.n >= $.min]", "$.items[?search(@.name, 'db')]", "$.items[?length(@.name) == 3]"] {
            let work = cost(path, &doc).expect(path).work;
            assert!(work < 1 << 20, "{path}: {work}");
        }
    }
}
