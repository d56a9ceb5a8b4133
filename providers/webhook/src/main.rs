//! `keyward-provider-webhook`: secrets from HTTP APIs (upstream's generic webhook provider), over
//! mTLS gRPC.

use clap::Parser;
use keyward_provider_webhook::netguard::{DEFAULT_TENANT_DENIED_NETWORKS, DeniedNetworks};

/// Keyward's webhook provider: reads and pushes values with the HTTP requests Webhook
/// configurations (or SecretStores with spec.provider.webhook) describe.
#[derive(Parser, Debug)]
#[command(name = "keyward-provider-webhook", version)]
struct Cli {
    #[command(flatten)]
    runtime: keyward_provider_runtime::RuntimeArgs,
    /// Networks a tenant's configuration may not reach, comma-separated (CIDRs or addresses):
    /// every address a URL's host resolves to is checked before connecting. An operator's
    /// configuration (a ClusterProvider with authenticationScope ProviderNamespace) may reach
    /// any. Empty: no check.
    #[arg(
        long,
        env = "KEYWARD_WEBHOOK_TENANT_DENIED_NETWORKS",
        default_value = DEFAULT_TENANT_DENIED_NETWORKS,
        value_parser = DeniedNetworks::parse
    )]
    tenant_denied_networks: DeniedNetworks,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    keyward_provider_runtime::install_crypto_provider();
    let cli = Cli::parse();
    cli.runtime.init_logging();
    let denied = cli.tenant_denied_networks.clone();
    keyward_provider_runtime::serve_in_cluster(&cli.runtime, |config| {
        kube::Client::try_from(config).map(|c| keyward_provider_webhook::WebhookProvider::new(c, denied))
    })
    .await
    .map_err(|e| anyhow::anyhow!(e))
}
