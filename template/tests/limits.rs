//! Limit violations end with clear errors instead of hanging or exhausting memory.

use std::collections::BTreeMap;

use keyward_template::{Limits, render};

fn run_with(src: &str, limits: &Limits) -> Result<String, keyward_template::TemplateError> {
    let data = BTreeMap::from([("v".to_string(), b"value".to_vec())]);
    render(&[("t", src)], &data, limits).map(|m| String::from_utf8_lossy(&m["t"]).into_owned())
}

fn limit_err(src: &str, limits: &Limits, want: &str) {
    match run_with(src, limits) {
        Ok(out) => panic!("{src}: expected limit error, got {} bytes", out.len()),
        Err(e) => {
            assert!(e.is_limit(), "{src}: not a limit error: {e}");
            assert!(e.to_string().contains(want), "{src}: {e} does not contain {want:?}");
        }
    }
}

fn small() -> Limits {
    Limits {
        max_template_bytes: 4096,
        max_output_bytes: 1000,
        max_depth: 10,
        max_range_iterations: 100,
        max_steps: 100_000,
        deadline: None,
    }
}

#[test]
fn template_size() {
    limit_err(&"x".repeat(5000), &small(), "template larger than 4096 bytes");
}

#[test]
fn output_size() {
    limit_err(&"0123456789".repeat(101), &small(), "output larger than 1000 bytes");
    limit_err("{{ range until 99 }}{{ $.v }}{{ $.v }}{{ $.v }}{{ end }}", &small(), "output larger than 1000 bytes");
    limit_err("{{ repeat 100000000000 \"ab\" }}", &small(), "function result larger than 1000 bytes");
    limit_err("{{ indent 100000000 \"a\\nb\" }}", &small(), "function result larger than 1000 bytes");
    limit_err("{{ printf \"%999999999d\" 1 }}", &small(), "printf result larger than 1000 bytes");
    limit_err("{{ replace \"\" (repeat 500 \"x\") \"abcdef\" }}", &small(), "larger than 1000 bytes");
    limit_err("{{ regexReplaceAll \"\" \"abcdefghij\" (repeat 200 \"y\") }}", &small(), "larger than 1000 bytes");
    // The total of all templates of one render is bounded too.
    let data = BTreeMap::new();
    let half = "x".repeat(600);
    let err = render(&[("a", half.as_str()), ("b", half.as_str())], &data, &small()).expect_err("total");
    assert!(err.to_string().contains("in total"), "{err}");
}

#[test]
fn range_iterations() {
    limit_err("{{ range until 1000 }}{{ end }}", &small(), "until 1000 exceeds 100 items");
    limit_err("{{ range until 50 }}{{ range until 50 }}{{ end }}{{ end }}", &small(), "more than 100 range iterations");
    limit_err("{{ range 1000000000 }}{{ end }}", &small(), "more than 100 range iterations");
}

#[test]
fn nesting_depth() {
    let deep = format!("{}x{}", "{{ if true }}".repeat(20), "{{ end }}".repeat(20));
    limit_err(&deep, &small(), "nesting deeper than 10 levels");
    let parens = format!("{{{{ {}1{} }}}}", "(".repeat(50), ")".repeat(50));
    limit_err(&parens, &small(), "nesting deeper than 10 levels");
    // Unbounded recursion through `template`.
    limit_err(
        "{{ define \"r\" }}{{ template \"r\" . }}{{ end }}{{ template \"r\" . }}",
        &small(),
        "nesting deeper than 10",
    );
    // Deep parenthesis nesting with the default limits is a limit error, not a stack overflow.
    let parens = format!("{{{{ {}1{} }}}}", "(".repeat(5000), ")".repeat(5000));
    limit_err(&parens, &Limits { max_template_bytes: 1 << 20, ..Limits::default() }, "nesting deeper than 64");
}

#[test]
fn growing_values() {
    // Doubling a list: shared structure keeps memory small, printing it hits the limit.
    limit_err(
        "{{ $l := list 1 }}{{ range until 60 }}{{ $l = list $l $l }}{{ end }}{{ $l }}",
        &small(),
        "value larger than 1000 bytes",
    );
    // Doubling a dict through `set` (which copies) also stops.
    limit_err(
        "{{ $d := dict \"a\" 1 }}{{ range until 60 }}{{ $_ := set $d (toString .) (deepCopy $d) }}{{ end }}",
        &small(),
        "value larger than 1000 bytes",
    );
    // A value nested deeper than max_depth.
    limit_err(
        "{{ $l := list }}{{ range until 50 }}{{ $l = list $l }}{{ end }}{{ $l }}",
        &small(),
        "nested deeper than 10",
    );
}

#[test]
fn evaluation_steps() {
    let limits = Limits { max_steps: 1000, max_range_iterations: 1_000_000, ..Limits::default() };
    limit_err("{{ range 100000 }}{{ if true }}{{ end }}{{ end }}", &limits, "more than 1000 evaluation steps");
}

#[test]
fn within_limits_is_fine() {
    let out = run_with("{{ range until 10 }}{{ $.v }}{{ end }}", &small()).expect("renders");
    assert_eq!(out, "value".repeat(10));
}

/// A tenant's template asking for huge sequences, strings or keys ends with a clear error at
/// once, before anything large is built or computed (with the default limits).
#[test]
fn hostile_uses_of_the_sprig_functions() {
    let d = Limits::default();
    limit_err("{{ seq 1 1000000000 }}", &d, "a sequence of 1000000000 numbers exceeds 100000 items");
    limit_err("{{ seq 9223372036854775806 }}", &d, "exceeds 100000 items");
    // As in Go, the end plus one wraps around: an empty sequence.
    assert_eq!(run_with("{{ seq 9223372036854775807 }}", &d).expect("renders"), "");
    limit_err("{{ untilStep 0 1000000000 1 }}", &d, "exceeds 100000 items");
    limit_err("{{ untilStep -9223372036854775808 9223372036854775807 1 }}", &d, "exceeds 100000 items");
    let loops = "{{ range until 60000 }}{{ end }}{{ range untilStep 0 60000 1 }}{{ end }}";
    limit_err(loops, &d, "more than 100000 range iterations");
    limit_err("{{ randAlpha 1000000000 }}", &d, "function result larger than 1048576 bytes");
    limit_err("{{ randBytes 1000000000 }}", &d, "function result larger than 1048576 bytes");
    limit_err("{{ wrapWith 1 (repeat 600000 \"-\") (repeat 600000 \"x\") }}", &d, "larger than 1048576 bytes");
    let e = run_with("{{ genCA \"x\" 100000000000 }}", &d).expect_err("validity out of range");
    assert!(e.to_string().contains("days of validity are out of range"), "{e}");
    let e = run_with("{{ randBytes -1 }}", &d).expect_err("negative count");
    assert!(e.to_string().contains("len out of range"), "{e}");
    // Out-of-range math has Go's results, not a crash.
    assert_eq!(
        run_with("{{ addf 1e308 1e308 }} {{ round 1.5 400 }} {{ divf 1 1e-300 }}", &d).expect("renders"),
        "+Inf NaN 1e+300"
    );
}

/// Key generation and scrypt are charged before they run: a budget that cannot pay for one
/// refuses it at once instead of computing it.
#[test]
fn expensive_generators_are_charged_before_they_run() {
    let started = std::time::Instant::now();
    for (src, budget) in [
        ("{{ genPrivateKey \"rsa\" }}", 7_000_000),
        ("{{ genPrivateKey \"\" }}", 7_000_000),
        ("{{ derivePassword 1 \"long\" \"p\" \"u\" \"s\" }}", 1_500_000),
        ("{{ genCA \"x\" 1 }}", 1_000_000),
        ("{{ genSelfSignedCert \"x\" nil nil 1 }}", 1_000_000),
        ("{{ genSignedCert \"x\" nil nil 1 (dict \"Cert\" \"\" \"Key\" \"\") }}", 1_000_000),
    ] {
        let limits = Limits { max_steps: budget, ..Limits::default() };
        let e = run_with(src, &limits).expect_err(src);
        assert!(e.is_over_budget(), "{src}: {e}");
    }
    // Debug builds take seconds for one RSA-4096 key or one scrypt: none of them ran.
    assert!(started.elapsed() < std::time::Duration::from_secs(2), "{:?}", started.elapsed());
}
