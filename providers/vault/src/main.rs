//! `keyward-provider-vault`: HashiCorp Vault KV secrets engines as an external store, over mTLS
//! gRPC.

use clap::Parser;

/// Keyward's Vault provider: reads and writes the KV secrets a Vault config object describes.
#[derive(Parser, Debug)]
#[command(name = "keyward-provider-vault", version)]
struct Cli {
    #[command(flatten)]
    runtime: keyward_provider_runtime::RuntimeArgs,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    keyward_provider_runtime::install_crypto_provider();
    let cli = Cli::parse();
    cli.runtime.init_logging();
    let config = kube::Config::infer()
        .await
        .map_err(|e| anyhow::anyhow!("no Kubernetes configuration (kubeconfig or in-cluster): {e}"))?;
    let provider = keyward_provider_vault::VaultProvider::new(kube::Client::try_from(config)?);
    keyward_provider_runtime::serve(
        provider,
        cli.runtime.server_options(),
        keyward_provider_runtime::shutdown_signal(),
    )
    .await?;
    Ok(())
}
