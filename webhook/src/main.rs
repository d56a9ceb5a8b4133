//! `keyward-webhook`: Keyward's admission webhook.

use clap::Parser;
use keyward_webhook::cli::{Args, LOG_STYLE, run};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // Pick the crypto provider explicitly, before anything touches rustls.
    if rustls::crypto::ring::default_provider().install_default().is_err() {
        anyhow::bail!("a rustls crypto provider was installed before keyward-webhook's");
    }
    let args = Args::parse();
    keyward_process::init_logging(&args.log, LOG_STYLE);
    if let Err(e) = run(args).await {
        tracing::error!(error = format!("{e:#}"), "keyward-webhook failed");
        return Err(e);
    }
    Ok(())
}
