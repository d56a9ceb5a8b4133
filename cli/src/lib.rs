#![cfg_attr(test, allow(clippy::unwrap_used))]
//! `keyward`: explains, syncs, renders, checks and surveys External Secrets objects the way
//! Keyward's webhook and reconciler see them. Every decision it prints comes from the code
//! those components run (`keyward_webhook::offline`, `keyward_reconciler`'s render and refresh
//! functions, `keyward_crds::rules`); this crate only gathers the inputs and prints.

mod admission;
mod args;
mod check;
mod cluster;
mod error;
mod explain;
mod manifests;
mod migrate;
mod migrate_values;
mod refresh;
mod render;
mod sync;
mod target;

use std::process::ExitCode;

use clap::Parser;

pub use args::{Cli, Command, Output};
pub use error::Error;

/// Exit code when a check or survey found something Keyward refuses or does not serve.
pub const EXIT_REFUSED: u8 = 1;
/// Exit code when the command could not run (bad arguments, unreadable files, no cluster).
pub const EXIT_ERROR: u8 = 2;

/// Runs the command line and reports errors on stderr.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("keyward: cannot start: {e}");
            return ExitCode::from(EXIT_ERROR);
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(EXIT_REFUSED),
        Err(e) => {
            eprintln!("keyward: {e}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}

/// Runs one command, printing its result on stdout; `Ok(false)` when it found something that
/// is refused or not served.
pub async fn run(cli: Cli) -> Result<bool, Error> {
    let out = cli.output;
    match cli.command {
        Command::Explain { target, namespace } => explain::run(&target, namespace.as_deref(), out).await,
        Command::Sync { target, namespace } => sync::run(&target, namespace.as_deref()).await,
        Command::Render { file, data, namespace, time_limit } => {
            render::run(&file, &data, namespace.as_deref(), time_limit).await
        }
        Command::Check { files, namespace } => check::run(&files, &namespace, out),
        Command::Migrate { values: Some(file) } => migrate_values::run(&file, out),
        Command::Migrate { values: None } => migrate::run(out).await,
    }
}
