//! Feeds arbitrary bytes to both admission endpoints' decoding and decision path: any input
//! must give a well-formed review or a "not a review" error, never a panic.
#![no_main]

use std::sync::OnceLock;

use keyward_webhook::cache::Caches;
use keyward_webhook::fixtures::sample_caches;
use keyward_webhook::server::{Mode, handle_body};
use libfuzzer_sys::fuzz_target;

static CACHES: OnceLock<Caches> = OnceLock::new();

fuzz_target!(|data: &[u8]| {
    let caches = CACHES.get_or_init(sample_caches);
    for mode in [Mode::Validate, Mode::Mutate] {
        if let Ok(out) = handle_body(mode, data, caches) {
            let review: serde_json::Value = serde_json::from_slice(&out).expect("answers are JSON");
            assert!(review["response"]["allowed"].is_boolean());
        }
    }
});
