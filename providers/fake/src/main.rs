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
    let client = kube::Client::try_default()
        .await
        .map_err(|e| anyhow::anyhow!("cannot reach the Kubernetes API (kubeconfig or in-cluster config): {e}"))?;
    let provider = keyward_provider_fake::FakeProvider::start(client);
    keyward_provider_runtime::serve(
        provider,
        cli.runtime.server_options(),
        keyward_provider_runtime::shutdown_signal(),
    )
    .await?;
    Ok(())
}
