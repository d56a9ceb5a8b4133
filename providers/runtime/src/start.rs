//! The whole `main` of a provider binary: the process runtime (crypto provider, logging, admin
//! server, shutdown drain), the process's Kubernetes configuration, and the provider served
//! until SIGTERM or SIGINT.

use std::process::ExitCode;
use std::time::Duration;

use keyward_process::Runtime;

use crate::cli::RuntimeArgs;
use crate::provider::Provider;
use crate::server::{Ops, serve_with};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// When the process's drain bound passes: the server's own bound on in-flight calls
/// (`--shutdown-timeout`) plus this, for the health server and the certificate watch to stop.
const DRAIN_MARGIN: Duration = Duration::from_secs(3);

/// Runs a provider binary whose flags are parsed: starts the process through
/// [`keyward_process::Runtime`], reads its Kubernetes configuration (a kubeconfig, else the
/// in-cluster one), builds the provider from it with `make`, and serves it with `args` until
/// SIGTERM or SIGINT. A failure is logged and makes the exit code 1.
pub fn main<P, E>(
    component: &'static str,
    args: &RuntimeArgs,
    make: impl FnOnce(kube::Config) -> Result<P, E>,
) -> ExitCode
where
    P: Provider,
    E: Into<BoxError>,
{
    let result = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(tokio) => tokio.block_on(run(component, args, make)),
        Err(e) => Err(format!("starting the Tokio runtime: {e}").into()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            if tracing::dispatcher::has_been_set() {
                tracing::error!(error = %e, "{component} failed");
            } else {
                eprintln!("{component} failed: {e}");
            }
            ExitCode::FAILURE
        }
    }
}

async fn run<P, E>(
    component: &'static str,
    args: &RuntimeArgs,
    make: impl FnOnce(kube::Config) -> Result<P, E>,
) -> Result<(), BoxError>
where
    P: Provider,
    E: Into<BoxError>,
{
    let rt = Runtime::builder(component)
        .log(&args.log, crate::cli::DEFAULT_LOG_FILTER)
        .admin(args.health_listen)
        .drain(args.shutdown_timeout + DRAIN_MARGIN)
        .build()
        .await?;
    let options = args.server_options()?;
    let config = kube::Config::infer()
        .await
        .map_err(|e| format!("no Kubernetes configuration (kubeconfig or in-cluster): {e}"))?;
    crate::client_cache::watch_referenced_objects(args.watch_referenced_objects);
    let provider = make(config).map_err(Into::into)?;
    let admin = rt.admin().clone();
    let served = rt
        .run(|stop| async move { serve_with(provider, options, stop.cancelled_owned(), Ops::Admin(&admin)).await })
        .await;
    // `None`: the drain bound passed first, which the server's own bound already logged.
    served.unwrap_or(Ok(())).map_err(Into::into)
}
