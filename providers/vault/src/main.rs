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
    let denied = cli.runtime.tenant_denied_networks.clone();
    keyward_provider_runtime::serve_in_cluster(&cli.runtime, |config| {
        kube::Client::try_from(config).map(|c| keyward_provider_vault::VaultProvider::new(c, denied))
    })
    .await
    .map_err(|e| anyhow::anyhow!(e))
}
