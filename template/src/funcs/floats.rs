//! Sprig's floating-point math (`addf`, `mulf`, …, computed in exact decimal as Sprig does with
//! `shopspring/decimal`, so `addf 1.1 2.2` is 3.3), rounding, and integer sequences.

use num_bigint::{BigInt, Sign};
use num_traits::{Signed, Zero};

use super::{FnCtx, FnError, FnResult, Func, float, int, s, want, want_at_least, want_between};
use crate::value::Value;

pub const FUNCS: &[(&str, Func)] = &[
    ("addf", addf),
    ("add1f", add1f),
    ("subf", subf),
    ("mulf", mulf),
    ("divf", divf),
    ("maxf", maxf),
    ("minf", minf),
    ("ceil", ceil),
    ("floor", floor),
    ("round", round),
    ("seq", seq),
    ("untilStep", until_step),
    ("toDecimal", to_decimal),
];

/// A decimal `m × 10^e`, exact (float inputs have at most 17 digits and exponents within
/// ±324, so the numbers stay small).
#[derive(Clone)]
struct Dec {
    m: BigInt,
    e: i32,
}

fn pow10(n: i32) -> BigInt {
    BigInt::from(10u8).pow(n.unsigned_abs())
}

impl Dec {
    /// `decimal.NewFromFloat`: the shortest decimal that reads back as `f`.
    fn from_f64(f: f64) -> Result<Dec, FnError> {
        if !f.is_finite() {
            return Err(FnError::Msg(format!("Cannot create a Decimal from {}", crate::value::format_float_g(f))));
        }
        if f == 0.0 {
            return Ok(Dec { m: BigInt::zero(), e: 0 });
        }
        let sci = format!("{:e}", f.abs());
        let (mant, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
        let digits: String = mant.chars().filter(char::is_ascii_digit).collect();
        let exp: i32 = exp.parse().unwrap_or(0);
        let m: BigInt = digits.parse().unwrap_or_default();
        Ok(Dec { m: if f < 0.0 { -m } else { m }, e: exp - (digits.len() as i32 - 1) })
    }

    /// `Float64()`: the nearest float.
    fn to_f64(&self) -> f64 {
        format!("{}e{}", self.m, self.e).parse().unwrap_or(0.0)
    }

    /// Both mantissas at the smaller exponent.
    fn align(a: &Dec, b: &Dec) -> (BigInt, BigInt, i32) {
        let e = a.e.min(b.e);
        (&a.m * pow10(a.e - e), &b.m * pow10(b.e - e), e)
    }

    fn add(a: &Dec, b: &Dec) -> Dec {
        let (x, y, e) = Dec::align(a, b);
        Dec { m: x + y, e }
    }

    fn sub(a: &Dec, b: &Dec) -> Dec {
        let (x, y, e) = Dec::align(a, b);
        Dec { m: x - y, e }
    }

    fn mul(a: &Dec, b: &Dec) -> Dec {
        Dec { m: &a.m * &b.m, e: a.e + b.e }
    }

    /// `Div`: the quotient to 16 decimals, rounded half away from zero.
    fn div(a: &Dec, b: &Dec) -> Dec {
        const PREC: i32 = 16;
        let e = a.e - b.e + PREC;
        let (aa, bb) = if e < 0 { (a.m.clone(), &b.m * pow10(-e)) } else { (&a.m * pow10(e), b.m.clone()) };
        // Truncating division, as Go's big.Int QuoRem.
        let (q, r) = (&aa / &bb, &aa % &bb);
        let q = if (r.abs() * 2u8) < bb.abs() {
            q
        } else if (a.m.sign() == Sign::Minus) != (b.m.sign() == Sign::Minus) {
            q - 1u8
        } else {
            q + 1u8
        };
        Dec { m: q, e: -PREC }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Add,
    Sub,
    Mul,
    Div,
}

impl Op {
    fn dec(self, a: &Dec, b: &Dec) -> Dec {
        match self {
            Op::Add => Dec::add(a, b),
            Op::Sub => Dec::sub(a, b),
            Op::Mul => Dec::mul(a, b),
            Op::Div => Dec::div(a, b),
        }
    }
}

/// Sprig's `execDecimalOp`: fold the arguments in exact decimal, then the nearest float.
fn decimal_op(first: f64, rest: &[Value], op: Op) -> FnResult {
    let mut acc = Dec::from_f64(first)?;
    for v in rest {
        let d = Dec::from_f64(float(v))?;
        if d.m.is_zero() && op == Op::Div {
            return Err(FnError::Msg("decimal division by 0".into()));
        }
        acc = op.dec(&acc, &d);
    }
    Ok(Value::Float(acc.to_f64()))
}

fn addf(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    decimal_op(0.0, &a, Op::Add)
}

fn add1f(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    decimal_op(float(&a[0]), &[Value::Int(1)], Op::Add)
}

fn subf(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want_at_least(&a, 1)?;
    decimal_op(float(&a[0]), &a[1..], Op::Sub)
}

fn mulf(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want_at_least(&a, 1)?;
    decimal_op(float(&a[0]), &a[1..], Op::Mul)
}

fn divf(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want_at_least(&a, 1)?;
    decimal_op(float(&a[0]), &a[1..], Op::Div)
}

/// Go's `math.Max` / `math.Min`: NaN wins, and +0 is larger than -0.
fn go_max(x: f64, y: f64, max: bool) -> f64 {
    if x.is_nan() || y.is_nan() {
        return f64::NAN;
    }
    if x == 0.0 && y == 0.0 {
        let negative = if max {
            x.is_sign_negative() && y.is_sign_negative()
        } else {
            x.is_sign_negative() || y.is_sign_negative()
        };
        return if negative { -0.0 } else { 0.0 };
    }
    if (x > y) == max { x } else { y }
}
fn maxf(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want_at_least(&a, 1)?;
    Ok(Value::Float(a[1..].iter().fold(float(&a[0]), |acc, v| go_max(acc, float(v), true))))
}

fn minf(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want_at_least(&a, 1)?;
    Ok(Value::Float(a[1..].iter().fold(float(&a[0]), |acc, v| go_max(acc, float(v), false))))
}

fn ceil(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    Ok(Value::Float(float(&a[0]).ceil()))
}

fn floor(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    Ok(Value::Float(float(&a[0]).floor()))
}

/// `round x places [roundOn]`: round up from `roundOn` (default .5) of the last place.
fn round(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want_between(&a, 2, 3)?;
    let round_on = a.get(2).map_or(0.5, float);
    let pow = 10f64.powf(int(&a[1]) as f64);
    let digit = pow * float(&a[0]);
    let frac = digit - digit.trunc();
    let r = if frac >= round_on { digit.ceil() } else { digit.floor() };
    Ok(Value::Float(r / pow))
}

/// Sprig's `untilStep`, with a bound on the number of items.
pub(crate) fn until_step_items(ctx: &FnCtx<'_>, start: i64, stop: i64, step: i64) -> Result<Vec<i64>, FnError> {
    let count = if (stop < start && step >= 0) || (stop >= start && step <= 0) {
        0
    } else {
        (i128::from(stop) - i128::from(start)).unsigned_abs().div_ceil(step.unsigned_abs().into())
    };
    if count > ctx.limits.max_range_iterations as u128 {
        return Err(FnError::Limit(format!(
            "a sequence of {count} numbers exceeds {} items",
            ctx.limits.max_range_iterations
        )));
    }
    let mut out = Vec::with_capacity(count as usize);
    let mut i = start;
    for _ in 0..count {
        out.push(i);
        i = i.wrapping_add(step);
    }
    Ok(out)
}

fn until_step(ctx: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 3)?;
    let items = until_step_items(ctx, int(&a[0]), int(&a[1]), int(&a[2]))?;
    Ok(Value::list(items.into_iter().map(Value::Int).collect()))
}

/// `seq [start [step]] end`: like the Unix `seq`, numbers joined by spaces.
fn seq(ctx: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    let p: Vec<i64> = a.iter().map(int).collect();
    let (start, end, step) = match p.as_slice() {
        [end] => (1, *end, if *end < 1 { -1 } else { 1 }),
        [start, end] => (*start, *end, if end < start { -1 } else { 1 }),
        [start, step, end] => {
            if end < start && *step > 0 {
                return Ok(Value::str(""));
            }
            (*start, *end, *step)
        }
        _ => return Ok(Value::str("")),
    };
    let increment = if p.len() == 3 { if end < start { -1 } else { 1 } } else { step };
    let items = until_step_items(ctx, start, end.wrapping_add(increment), step)?;
    let text: Vec<String> = items.iter().map(i64::to_string).collect();
    Ok(Value::Str(text.join(" ")))
}

/// `toDecimal s`: an octal number (`"0777"` is 511); 0 when it is not one.
fn to_decimal(_: &FnCtx<'_>, a: Vec<Value>) -> FnResult {
    want(&a, 1)?;
    let text = match &a[0] {
        Value::Str(t) => t.clone(),
        other => s(other),
    };
    Ok(Value::Int64(i64::from_str_radix(&text, 8).unwrap_or(0)))
}
