//! `keyward-provider-webhook`: secrets from HTTP APIs (upstream's generic webhook provider), over
//! mTLS gRPC.

use clap::Parser;

/// Keyward's webhook provider: reads and pushes values with the HTTP requests Webhook
/// configurations (or SecretStores with spec.provider.webhook) describe.
#[derive(Parser, Debug)]
#[command(name = "keyward-provider-webhook", version)]
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
        kube::Client::try_from(config).map(|c| keyward_provider_webhook::WebhookProvider::new(c, denied))
    })
    .await
    .map_err(|e| anyhow::anyhow!(e))
}
