//! Parse arbitrary template source: must return Ok or Err, never panic or overflow the stack.
#![no_main]

use keyward_template::{Limits, Template};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(src) = std::str::from_utf8(data) {
        let _ = Template::parse("fuzz", src, &Limits::default());
    }
});
