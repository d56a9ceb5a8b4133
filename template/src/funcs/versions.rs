//! Sprig's `semver` and `semverCompare` (rules in [`crate::semver`]).

use std::rc::Rc;

use super::{FnCtx, FnResult, Func, s, want};
use crate::object::Obj;
use crate::semver::{Version, satisfies};
use crate::value::Value;

pub const FUNCS: &[(&str, Func)] = &[("semver", semver), ("semverCompare", semver_compare)];

/// `semver v`: a version whose fields are `Major`, `Minor`, `Patch`, `Prerelease`,
/// `Metadata` and `Original`.
fn semver(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    Ok(Value::Obj(Rc::new(Obj::Version(Version::parse(&s(&a[0]))?))))
}

/// `semverCompare constraint version`.
fn semver_compare(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 2)?;
    Ok(Value::Bool(satisfies(&s(&a[0]), &s(&a[1]))?))
}
