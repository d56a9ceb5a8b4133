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

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    keyward_provider_runtime::main("keyward-provider-barbican", &cli.runtime, |config| {
        let client = kube::Client::try_from(config)?;
        keyward_provider_barbican::BarbicanProvider::new(client, cli.runtime.tenant_denied_networks.clone())
            .map_err(|e| anyhow::anyhow!(e))
    })
}
