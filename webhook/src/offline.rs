//! Admission as the `keyward` command line runs it, without a webhook server: the validation and
//! defaulting over a cache state filled from the cluster or from manifest files, and the
//! template warnings. The CLI reaches the webhook through this module only, so the modules
//! behind it can move without the CLI following (`scripts/check-module-cycles.py` holds it to
//! that).

pub use crate::cache::State;
pub use crate::mutate::mutate;
pub use crate::review::{Operation, Request, request_for};
pub use crate::validate::templates::template_warnings;
pub use crate::validate::{Kind, validate};
pub use crate::watch::{cluster_provider_spec, cluster_secret_store_conditions};
