//! What the tests of this binary share.

/// Turns ([`keyward_e2e::turns`]): the conformance suite's oversized-response case checks the
/// provider's peak RSS, so it runs alone.
pub use keyward_e2e::turns::{exclusive, shared};
