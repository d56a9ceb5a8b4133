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

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    keyward_provider_runtime::main("keyward-provider-webhook", &cli.runtime, |config| {
        kube::Client::try_from(config)
            .map(|c| keyward_provider_webhook::WebhookProvider::new(c, cli.runtime.tenant_denied_networks.clone()))
    })
}
