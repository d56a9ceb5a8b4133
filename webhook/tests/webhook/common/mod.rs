//! What the tests of this binary share.

/// Turns ([`keyward_e2e::turns`]): the load test bursts near-limit reviews and checks peak RSS and
/// that every review is answered, so it runs alone; the end-to-end test and the garbage reviews
/// (plain `#[test]`s: [`shared_blocking`]) run side by side.
pub use keyward_e2e::turns::{exclusive, shared, shared_blocking};
