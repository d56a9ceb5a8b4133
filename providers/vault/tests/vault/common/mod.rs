//! The Vault provider as a process for the integration tests: spawned with fresh mTLS material,
//! ready, and a client connected with the reconciler's identity.

use std::time::Duration;

use keyward_e2e::{ChildProcess, spawn_provider};
use keyward_proto::v1::secret_store_provider_client::SecretStoreProviderClient;
use keyward_provider_runtime::testkit::{TestPki, connect, wait_ready};
use tonic::transport::Channel;

/// Turns ([`keyward_e2e::turns`]): each test starts its own Vault dev server and provider; the
/// conformance suite's oversized-response case checks the provider's peak RSS, so it runs alone.
pub use keyward_e2e::turns::{exclusive, shared};

pub struct Running {
    pub child: ChildProcess,
    pub client: SecretStoreProviderClient<Channel>,
    _pki: TestPki,
}

pub async fn start_provider() -> Running {
    let pki = TestPki::new().unwrap();
    let (child, grpc, health) = spawn_provider("keyward-provider-vault", pki.tls_dir(), &[]).await;
    if let Err(e) = wait_ready(health, Duration::from_secs(30)).await {
        panic!("{e}\n{}", child.log());
    }
    let id = pki.client().unwrap();
    let client = connect(grpc, pki.ca.cert_pem(), Some(&id)).await.unwrap();
    Running { child, client, _pki: pki }
}

/// [`start_provider`] with extra environment for the provider process (the AWS endpoints of the
/// AWS auth method, say).
pub async fn start_provider_with_env(env: &[(&str, &str)]) -> Running {
    let pki = TestPki::new().unwrap();
    let (child, grpc, health) = spawn_provider("keyward-provider-vault", pki.tls_dir(), env).await;
    if let Err(e) = wait_ready(health, Duration::from_secs(30)).await {
        panic!("{e}\n{}", child.log());
    }
    let id = pki.client().unwrap();
    let client = connect(grpc, pki.ca.cert_pem(), Some(&id)).await.unwrap();
    Running { child, client, _pki: pki }
}
