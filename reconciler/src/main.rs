//! `keyward-reconciler`: see `keyward_reconciler::cli::Cli` for flags.

use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    keyward_reconciler::run::run(keyward_reconciler::cli::Cli::parse()).await
}
