//! The process plumbing every Keyward binary shares, so each rule lives in one place:
//!
//! - [`log`]: the `--log-format` and `--log-level` flags and the tracing subscriber they set up;
//! - [`signal`]: the shutdown signals (SIGTERM, SIGINT);
//! - [`health`]: the plain HTTP operations server with `/healthz`, `/readyz` and `/metrics`;
//! - [`metrics`]: what every process exposes (`process_*`, `keyward_build_info`, the Lease
//!   status) and counters kept under a name without `_total`;
//! - `lease` (feature `lease`): leader election with a `coordination.k8s.io/v1` Lease;
//! - [`runtime`]: the builder every server binary starts through, which puts the parts above
//!   together one way (crypto provider, logging, admin listener, shutdown drain, Lease loop);
//! - [`duration`]: the one grammar of every duration flag.

pub mod duration;
pub mod generic_targets;
pub mod health;
#[cfg(feature = "lease")]
pub mod lease;
pub mod log;
pub mod metrics;
pub mod runtime;
pub mod signal;

pub use duration::parse_duration;
pub use generic_targets::GenericTargetArgs;
pub use health::{Health, Readiness};
pub use log::{JsonLayout, LogArgs, LogFormat, LogStream, LogStyle, init_logging};
pub use runtime::{Admin, Builder, Runtime, StartError, install_crypto_provider};
pub use signal::{shutdown_signal, shutdown_token};
/// What a runtime's work is stopped with (`tokio_util`'s), so binaries need not name that crate.
pub use tokio_util::sync::CancellationToken;
