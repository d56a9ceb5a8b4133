//! `keyward-provider-fake`: serves the static entries of `Fake` config objects over mTLS gRPC.

use clap::Parser;

/// Keyward's Fake provider: static values from Fake config objects, pushes kept in memory.
#[derive(Parser, Debug)]
#[command(name = "keyward-provider-fake", version)]
struct Cli {
    #[command(flatten)]
    runtime: keyward_provider_runtime::RuntimeArgs,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    keyward_provider_runtime::install_crypto_provider();
    let cli = Cli::parse();
    cli.runtime.init_logging();
    keyward_provider_runtime::serve_in_cluster(&cli.runtime, |config| {
        kube::Client::try_from(config).map(keyward_provider_fake::FakeProvider::start)
    })
    .await
    .map_err(|e| anyhow::anyhow!(e))
}
