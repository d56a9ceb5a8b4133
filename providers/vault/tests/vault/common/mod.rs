//! The Vault provider as a process for the integration tests: spawned with fresh mTLS material,
//! ready, and a client connected with the reconciler's identity.

use std::time::Duration;

use keyward_e2e::{ChildProcess, spawn_provider};
use keyward_proto::v1::secret_store_provider_client::SecretStoreProviderClient;
use keyward_provider_runtime::testkit::{TestPki, connect, wait_ready};
use tokio::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use tonic::transport::Channel;

/// The tests of this binary run side by side (the harness's threads) against one control plane;
/// each starts its own Vault dev server and provider process. The conformance suite measures:
/// its oversized-response case floods the provider with 300 MB answers from servers in this
/// process and checks the provider's peak RSS, so it runs alone ([`exclusive`]); every other
/// test takes [`shared`] and runs beside the others. Tokio's lock works across the tests'
/// runtimes; a test that panics drops its guard.
static SERIAL: RwLock<()> = RwLock::const_new(());

/// Runs alone: no other test of this binary runs while the guard lives.
pub async fn exclusive() -> RwLockWriteGuard<'static, ()> {
    SERIAL.write().await
}

/// Runs beside the other [`shared`] tests, never beside an [`exclusive`] one.
pub async fn shared() -> RwLockReadGuard<'static, ()> {
    SERIAL.read().await
}

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
