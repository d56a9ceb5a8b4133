//! `keyward-provider-aws`: AWS Secrets Manager and Parameter Store as external stores, over mTLS
//! gRPC.

use clap::Parser;

/// Keyward's AWS provider: reads and writes the secrets a SecretsManager config object, or a
/// SecretStore's spec.provider.aws (Secrets Manager or Parameter Store), describes. Endpoints can
/// be overridden with the SDK's standard AWS_ENDPOINT_URL (and AWS_ENDPOINT_URL_SECRETS_MANAGER,
/// AWS_ENDPOINT_URL_SSM, AWS_ENDPOINT_URL_STS) environment variables.
#[derive(Parser, Debug)]
#[command(name = "keyward-provider-aws", version)]
struct Cli {
    #[command(flatten)]
    runtime: keyward_provider_runtime::RuntimeArgs,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    keyward_provider_runtime::main("keyward-provider-aws", &cli.runtime, |config| {
        kube::Client::try_from(config).map(keyward_provider_aws::SecretsManagerProvider::new)
    })
}
