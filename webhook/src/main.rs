//! `keyward-webhook`: Keyward's admission webhook.

use clap::Parser;
use keyward_webhook::cli::{Args, run};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    // The process runtime: crypto provider, logging, admin server, shutdown drain.
    let rt = args.runtime().await?;
    if let Err(e) = run(args, rt).await {
        tracing::error!(error = format!("{e:#}"), "keyward-webhook failed");
        return Err(e);
    }
    Ok(())
}
