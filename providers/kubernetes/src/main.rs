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

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    keyward_provider_runtime::main("keyward-provider-kubernetes", &cli.runtime, |config| {
        keyward_provider_kubernetes::KubernetesProvider::new(config, cli.runtime.tenant_denied_networks.clone())
    })
}
