//! The one way provider tests start a provider binary: the real process on free loopback
//! ports, with a fresh PKI, the local control plane's kubeconfig, ready, and a client connected
//! over mTLS with the reconciler's identity.

use std::net::SocketAddr;
use std::time::Duration;

use keyward_e2e::{ChildProcess, spawn_provider_with};
use keyward_proto::v1::generator_provider_client::GeneratorProviderClient;
use keyward_proto::v1::secret_store_provider_client::SecretStoreProviderClient;
use tonic::transport::Channel;

use super::{TestPki, TestkitError, connect, connect_channel, wait_ready};

/// A provider process started by [`launch`]. Dropping it stops the process.
pub struct RunningProvider {
    /// The process (its log, pid, signals).
    pub child: ChildProcess,
    /// A client with the reconciler's identity.
    pub client: SecretStoreProviderClient<Channel>,
    /// The gRPC (mTLS) address.
    pub grpc: SocketAddr,
    /// The plain HTTP address of `/healthz`, `/readyz` and `/metrics`.
    pub health: SocketAddr,
    /// The PKI of its TLS directory (to issue other clients or rotate the server certificate).
    pub pki: TestPki,
}

/// Starts `binary` (a provider of this workspace, built on first use) with `env`, text logs.
pub async fn launch(binary: &str, env: &[(&str, &str)]) -> Result<RunningProvider, TestkitError> {
    launch_with(binary, env, &[]).await
}

/// [`launch`] with extra flags (`["--log-format", "json"]` in place of text logs, say).
pub async fn launch_with(binary: &str, env: &[(&str, &str)], args: &[&str]) -> Result<RunningProvider, TestkitError> {
    let pki = TestPki::new()?;
    let (child, grpc, health) = spawn_provider_with(binary, pki.tls_dir(), env, args).await;
    if let Err(e) = wait_ready(health, Duration::from_secs(30)).await {
        return Err(format!("{binary}: {e}\n{}", child.log()).into());
    }
    let id = pki.client()?;
    let client = connect(grpc, pki.ca.cert_pem(), Some(&id))
        .await
        .map_err(|e| format!("{binary}: connecting to {grpc}: {e}\n{}", child.log()))?;
    Ok(RunningProvider { child, client, grpc, health, pki })
}

impl RunningProvider {
    /// A `GeneratorProvider` client with the reconciler's identity, on a connection of its own.
    pub async fn generator_client(&self) -> Result<GeneratorProviderClient<Channel>, TestkitError> {
        let id = self.pki.client()?;
        Ok(GeneratorProviderClient::new(connect_channel(self.grpc, self.pki.ca.cert_pem(), Some(&id)).await?))
    }
}
