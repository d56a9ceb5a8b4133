//! `keyward-provider-aws`: AWS Secrets Manager as an external store, over mTLS gRPC.

use clap::Parser;

/// Keyward's AWS Secrets Manager provider: reads and writes the secrets a SecretsManager config
/// object describes. Endpoints can be overridden with the SDK's standard AWS_ENDPOINT_URL
/// (and AWS_ENDPOINT_URL_SECRETS_MANAGER, AWS_ENDPOINT_URL_STS) environment variables.
#[derive(Parser, Debug)]
#[command(name = "keyward-provider-aws", version)]
struct Cli {
    #[command(flatten)]
    runtime: keyward_provider_runtime::RuntimeArgs,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    keyward_provider_runtime::install_crypto_provider();
    let cli = Cli::parse();
    cli.runtime.init_logging();
    let config = kube::Config::infer()
        .await
        .map_err(|e| anyhow::anyhow!("no Kubernetes configuration (kubeconfig or in-cluster): {e}"))?;
    let provider = keyward_provider_aws::SecretsManagerProvider::new(kube::Client::try_from(config)?);
    keyward_provider_runtime::serve(
        provider,
        cli.runtime.server_options(),
        keyward_provider_runtime::shutdown_signal(),
    )
    .await?;
    Ok(())
}
