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

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    keyward_provider_runtime::main("keyward-provider-vault", &cli.runtime, |config| {
        kube::Client::try_from(config)
            .map(|c| keyward_provider_vault::VaultProvider::new(c, cli.runtime.tenant_denied_networks.clone()))
    })
}
