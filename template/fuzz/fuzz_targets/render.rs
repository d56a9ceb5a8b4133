//! Parse and execute arbitrary template source with small limits: must finish quickly with Ok or
//! Err, never panic, and never produce more output than the limit.
#![no_main]

use std::collections::BTreeMap;

use keyward_template::{Limits, render};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else { return };
    let limits = Limits {
        max_template_bytes: 8192,
        max_output_bytes: 8192,
        max_depth: 32,
        max_range_iterations: 1000,
        max_steps: 100_000,
        // No wall-clock deadline: a fuzz input must behave the same on every run.
        deadline: None,
    };
    let values = BTreeMap::from([
        ("a".to_string(), b"{\"b\":[1,2]}".to_vec()),
        ("bin".to_string(), vec![0xff, 0x00, 0x80]),
    ]);
    if let Ok(out) = render(&[("fuzz", src)], &values, &limits) {
        assert!(out["fuzz"].len() <= limits.max_output_bytes);
    }
});
