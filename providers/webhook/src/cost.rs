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

use jsonpath_rust::parser::model::{
    Comparable, Comparison, FnArg, JpQuery, Segment, Selector, SingularQuery, SingularQuerySegment, Test, TestFunction,
};
use jsonpath_rust::parser::model::{Filter, FilterAtom};
use serde_json::Value;

/// Most bytes one evaluation may allocate for paths and pointers. The answers a JSONPath is
/// meant for (a few KiB, a few hundred nodes) cost a few KiB to a few hundred KiB; a hostile
/// answer of the 4 MiB cap can cost terabytes.
pub const EVALUATION_BUDGET: u64 = 32 << 20;

/// What one pointer costs beyond its path's bytes: a reference and a `String`.
const POINTER_BYTES: u64 = 32;

/// Evaluating would allocate more than [`EVALUATION_BUDGET`].
#[derive(Debug, PartialEq, Eq)]
pub struct OverBudget;

/// Nodes the evaluator holds, each with the length of the path it built for it.
type Reached<'a> = Vec<(&'a Value, u64)>;

/// The bytes evaluating `query` over `doc` with jsonpath-rust would allocate for paths and
/// pointers, when within [`EVALUATION_BUDGET`].
pub fn estimate(query: &JpQuery, doc: &Value) -> Result<u64, OverBudget> {
    let mut estimate = Estimate { root: doc, spent: 0 };
    let root = estimate.root_pointer()?;
    estimate.query(&query.segments, root)?;
    Ok(estimate.spent)
}

struct Estimate<'a> {
    root: &'a Value,
    spent: u64,
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
        if self.spent > EVALUATION_BUDGET { Err(OverBudget) } else { Ok(()) }
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

    fn comparison(&mut self, cmp: &Comparison, item: &'a Value) -> Result<(), OverBudget> {
        let (lhs, rhs) = cmp.vals();
        self.charge(0)?;
        let lhs = self.comparable(lhs, item)?;
        let rhs = self.comparable(rhs, item)?;
        // `>=` and `<=` compare copies of both sides twice.
        if matches!(cmp, Comparison::Gte(..) | Comparison::Lte(..)) {
            self.charge_copy(&lhs)?;
            self.charge_copy(&rhs)?;
        }
        Ok(())
    }

    fn comparable(&mut self, comparable: &Comparable, item: &'a Value) -> Result<Reached<'a>, OverBudget> {
        match comparable {
            Comparable::Literal(_) => Ok(Vec::new()),
            Comparable::Function(f) => self.function(f, item),
            Comparable::SingularQuery(SingularQuery::Current(segments)) => self.singular(segments, vec![(item, 0)]),
            Comparable::SingularQuery(SingularQuery::Root(segments)) => {
                let root = self.root_pointer()?;
                self.singular(segments, root)
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

    fn test(&mut self, test: &Test, item: &'a Value) -> Result<Reached<'a>, OverBudget> {
        match test {
            Test::RelQuery(segments) => self.query(segments, vec![(item, 0)]),
            Test::AbsQuery(query) => {
                let root = self.root_pointer()?;
                self.query(&query.segments, root)
            }
            Test::Function(f) => self.function(f, item),
        }
    }

    /// A function's arguments; its result is a value, except `value()` of one node, which
    /// is a copy of that node's pointer.
    fn function(&mut self, function: &TestFunction, item: &'a Value) -> Result<Reached<'a>, OverBudget> {
        let args: Vec<&FnArg> = match function {
            TestFunction::Length(arg) => vec![arg],
            TestFunction::Value(arg) | TestFunction::Count(arg) => vec![arg],
            TestFunction::Search(a, b) | TestFunction::Match(a, b) => vec![a, b],
            TestFunction::Custom(_, args) => args.iter().collect(),
        };
        let mut last = Vec::new();
        for arg in args {
            self.charge(0)?;
            last = match arg {
                FnArg::Literal(_) => Vec::new(),
                FnArg::Test(test) => self.test(test, item)?,
                FnArg::Filter(filter) => self.filter_item(filter, item).map(|()| Vec::new())?,
            };
        }
        match function {
            TestFunction::Value(_) if last.len() == 1 => {
                self.charge_copy(&last)?;
                Ok(last)
            }
            _ => Ok(Vec::new()),
        }
    }
}
