//! `keyward-provider-barbican`: OpenStack Barbican secrets (upstream's barbican provider), over
//! mTLS gRPC.

use clap::Parser;

/// Keyward's Barbican provider: reads the payloads of Barbican secrets with the Keystone
/// credentials a Barbican configuration (or a SecretStore's spec.provider.barbican) names.
#[derive(Parser, Debug)]
#[command(name = "keyward-provider-barbican", version)]
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
        let client = kube::Client::try_from(config)?;
        keyward_provider_barbican::BarbicanProvider::new(client, denied).map_err(|e| anyhow::anyhow!(e))
    })
    .await
    .map_err(|e| anyhow::anyhow!(e))
}
