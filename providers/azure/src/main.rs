//! `keyward-provider-azure`: Azure Key Vault secrets, keys and certificates (upstream's azurekv
//! provider), over mTLS gRPC.

use clap::Parser;

/// Keyward's Azure Key Vault provider: reads and writes a vault's secrets, keys and certificates
/// with the identity an AzureKeyVault configuration (or a SecretStore's spec.provider.azurekv)
/// names.
#[derive(Parser, Debug)]
#[command(name = "keyward-provider-azure", version)]
struct Cli {
    #[command(flatten)]
    runtime: keyward_provider_runtime::RuntimeArgs,
    /// Names pinned to addresses (`name=ip,…`), as a Pod's hostAliases, for a provider run
    /// outside a Pod; a tenant's configuration still reaches only addresses the denied networks
    /// allow.
    #[arg(long, env = "KEYWARD_AZURE_HOST_ALIASES", default_value = "")]
    host_aliases: String,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    keyward_provider_runtime::main("keyward-provider-azure", &cli.runtime, |config| {
        let aliases =
            keyward_provider_azure::transport::parse_aliases(&cli.host_aliases).map_err(|e| anyhow::anyhow!(e))?;
        let client = kube::Client::try_from(config)?;
        keyward_provider_azure::AzureProvider::new(client, cli.runtime.tenant_denied_networks.clone(), &aliases)
            .map_err(|e| anyhow::anyhow!(e))
    })
}
