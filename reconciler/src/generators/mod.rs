//! Generators served in the reconciler itself (`generators.external-secrets.io/v1alpha1`):
//! Password, UUID, SSHKey and Fake, directly or through a ClusterGenerator. No store is called;
//! every value comes from the operating system's CSPRNG.
//!
//! Generator specs are tenant input: sizes are capped and impossible combinations refused with
//! what to change, and generation runs on blocking threads, a few at a time, so an RSA key never
//! holds an async worker other syncs need.

pub mod fake;
pub mod password;
pub mod source;
pub mod sshkey;
pub mod uuid;

use std::collections::BTreeMap;
use std::sync::LazyLock;

use keyward_crds::generators::{FakeSpec, PasswordSpec, SshKeySpec, UuidSpec};
use keyward_crds::rules::AnyGeneratorSpec;
use tokio::sync::Semaphore;

pub use source::{GeneratorError, generate_ref};

/// Why generating failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GenerateError {
    /// The spec asks for something that cannot or may not be generated.
    #[error("{0}")]
    Invalid(String),
    /// Generation itself failed.
    #[error("{0}")]
    Failed(String),
}

/// The values of one generator spec, under upstream's keys.
pub fn generate(spec: AnyGeneratorSpec<'_>) -> Result<BTreeMap<String, Vec<u8>>, GenerateError> {
    match spec {
        AnyGeneratorSpec::Password(s) => password::generate(s),
        AnyGeneratorSpec::Uuid(_) => Ok(uuid::generate()),
        AnyGeneratorSpec::SshKey(s) => sshkey::generate(s),
        AnyGeneratorSpec::Fake(s) => Ok(fake::generate(s)),
    }
}

/// Generations that run at once, across every controller: key generation is CPU work, and the
/// reconciler has the cores of a small pod.
const CONCURRENT_GENERATIONS: usize = 2;

static SLOTS: LazyLock<Semaphore> = LazyLock::new(|| Semaphore::new(CONCURRENT_GENERATIONS));

/// A generator spec owned, to move onto a blocking thread.
#[derive(Debug, Clone, PartialEq)]
pub enum OwnedSpec {
    /// A Password spec.
    Password(PasswordSpec),
    /// A UUID spec.
    Uuid(UuidSpec),
    /// An SSHKey spec.
    SshKey(SshKeySpec),
    /// A Fake spec.
    Fake(FakeSpec),
}

impl OwnedSpec {
    /// A copy of a borrowed spec.
    pub fn from_any(spec: AnyGeneratorSpec<'_>) -> Self {
        match spec {
            AnyGeneratorSpec::Password(s) => OwnedSpec::Password(s.clone()),
            AnyGeneratorSpec::Uuid(s) => OwnedSpec::Uuid(s.clone()),
            AnyGeneratorSpec::SshKey(s) => OwnedSpec::SshKey(s.clone()),
            AnyGeneratorSpec::Fake(s) => OwnedSpec::Fake(s.clone()),
        }
    }

    /// The spec, borrowed.
    pub fn as_any(&self) -> AnyGeneratorSpec<'_> {
        match self {
            OwnedSpec::Password(s) => AnyGeneratorSpec::Password(s),
            OwnedSpec::Uuid(s) => AnyGeneratorSpec::Uuid(s),
            OwnedSpec::SshKey(s) => AnyGeneratorSpec::SshKey(s),
            OwnedSpec::Fake(s) => AnyGeneratorSpec::Fake(s),
        }
    }
}

/// Runs `generate` on a blocking thread once a generation slot is free.
pub async fn generate_blocking(spec: OwnedSpec) -> Result<BTreeMap<String, Vec<u8>>, GenerateError> {
    let _slot = SLOTS.acquire().await.map_err(|e| GenerateError::Failed(format!("no generation slot: {e}")))?;
    tokio::task::spawn_blocking(move || generate(spec.as_any()))
        .await
        .map_err(|e| GenerateError::Failed(format!("generation did not finish: {e}")))?
}
