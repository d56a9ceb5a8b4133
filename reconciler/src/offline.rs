//! The reconciler as the `keyward` command line runs it, with no cluster to reconcile: its
//! flags, the refresh decision, the push interval and the render of a target Secret. The CLI
//! reaches the reconciler through this module only, so the modules behind it can move without
//! the CLI following (`scripts/check-module-cycles.py` holds it to that).

pub use crate::cli::Cli;
pub use crate::externalsecret::refresh::{Decision, RefreshState, decide, jitter, object_hash};
pub use crate::externalsecret::render::{Sources, render_in_pool};
pub use crate::externalsecret::target::{HashKey, data_hash, desired, with_rendered_metadata};
pub use crate::pushsecret::reconcile::push_interval;
pub use crate::renders::RenderPool;
