//! `keyward-provider-kubernetes`: Secrets of a (remote) cluster as an external store, over
//! mTLS gRPC.

use clap::Parser;

/// Keyward's Kubernetes provider: reads and writes Secrets of the cluster a Kubernetes config
/// object describes.
#[derive(Parser, Debug)]
#[command(name = "keyward-provider-kubernetes", version)]
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
        keyward_provider_kubernetes::KubernetesProvider::new(config, denied)
    })
    .await
    .map_err(|e| anyhow::anyhow!(e))
}
