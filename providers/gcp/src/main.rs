//! `keyward-provider-gcp`: GCP Secret Manager (upstream's gcpsm provider), over mTLS gRPC.

use clap::Parser;

/// Keyward's GCP Secret Manager provider: reads and writes Secret Manager secrets with the
/// credentials a GCPSecretManager configuration (or a SecretStore's spec.provider.gcpsm) names.
#[derive(Parser, Debug)]
#[command(name = "keyward-provider-gcp", version)]
struct Cli {
    #[command(flatten)]
    runtime: keyward_provider_runtime::RuntimeArgs,
    #[command(flatten)]
    endpoints: keyward_provider_gcp::auth::Endpoints,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let endpoints = cli.endpoints;
    keyward_provider_runtime::main("keyward-provider-gcp", &cli.runtime, |config| {
        let client = kube::Client::try_from(config)?;
        Ok::<_, kube::Error>(keyward_provider_gcp::GcpProvider::new(client, endpoints))
    })
}
