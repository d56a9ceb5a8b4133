//! `keyward-provider-fake`: serves the static entries of `Fake` config objects over mTLS gRPC.

use clap::Parser;

/// Keyward's Fake provider: static values from Fake config objects, pushes kept in memory.
#[derive(Parser, Debug)]
#[command(name = "keyward-provider-fake", version)]
struct Cli {
    #[command(flatten)]
    runtime: keyward_provider_runtime::RuntimeArgs,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    keyward_provider_runtime::main("keyward-provider-fake", &cli.runtime, |config| {
        kube::Client::try_from(config).map(keyward_provider_fake::FakeProvider::start)
    })
}
