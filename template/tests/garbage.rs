//! Bounded randomized test: the parser and evaluator never panic or hang on garbage input.

use std::collections::BTreeMap;

use keyward_template::{Limits, Template, render};

const PIECES: &[&str] = &[
    "{{",
    "}}",
    "{{- ",
    " -}}",
    "{{/*",
    "*/}}",
    "if ",
    "else ",
    "end",
    "range ",
    "with ",
    "define ",
    "template ",
    "block ",
    "break",
    "continue",
    " . ",
    ".a",
    ".a.b",
    "$",
    "$x",
    "$x := ",
    " = ",
    ",",
    "(",
    ")",
    " | ",
    "\"s\"",
    "\"",
    "`raw`",
    "`",
    "'c'",
    "'",
    "1",
    "-2",
    "0x1f",
    "1.5e3",
    "nil",
    "true",
    "len ",
    "index ",
    "printf \"%d\" ",
    "upper ",
    "default ",
    "dict ",
    "list ",
    "toJson ",
    "fromJson ",
    "until 5 ",
    "repeat 3 ",
    "x",
    " ",
    "\n",
    "é",
    "\u{0}",
    "{",
    "}",
    "-",
    ":",
    "=",
    "\\",
    "%",
];

/// xorshift64*: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn limits() -> Limits {
    Limits {
        max_template_bytes: 4096,
        max_output_bytes: 4096,
        max_depth: 16,
        max_range_iterations: 200,
        max_steps: 20_000,
        deadline: None,
    }
}

#[test]
fn random_templates_never_panic() {
    let data = BTreeMap::from([("a".to_string(), b"{\"b\":1}".to_vec())]);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut parsed = 0;
    for _ in 0..4000 {
        let n = 1 + rng.below(24);
        let src: String = (0..n).map(|_| PIECES[rng.below(PIECES.len())]).collect();
        let first = render(&[("g", src.as_str())], &data, &limits());
        let second = render(&[("g", src.as_str())], &data, &limits());
        assert_eq!(first, second, "not deterministic: {src:?}");
        match first {
            Ok(out) => assert!(out["g"].len() <= 4096),
            Err(e) => {
                assert_eq!(e.template, "g");
                assert!(!e.to_string().is_empty());
            }
        }
        if Template::parse("g", &src, &limits()).is_ok() {
            parsed += 1;
        }
    }
    // The generator must reach the evaluator, not only produce syntax errors.
    assert!(parsed > 400, "only {parsed} of 4000 random templates parsed");
}

const ALPHABET: &[u8] = b"{}-.$()|\"'`/* \nai1:=,";

#[test]
fn random_bytes_never_panic() {
    let mut rng = Rng(42);
    for _ in 0..2000 {
        let bytes: Vec<u8> = (0..rng.below(64)).map(|_| ALPHABET[rng.below(ALPHABET.len())]).collect();
        let src = String::from_utf8_lossy(&bytes);
        let _ = render(&[("g", &src)], &BTreeMap::new(), &limits());
    }
}
