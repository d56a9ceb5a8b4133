//! The provider gRPC contract (`provider.v1.SecretStoreProvider`), generated at build time,
//! and the typed error both sides of it use.

#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod v1 {
    tonic::include_proto!("provider.v1");
}

mod error;

pub use error::ProviderError;

/// Encoded file descriptor set of the contract, for gRPC reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/provider_v1_descriptor.bin"));

/// Fully qualified gRPC service name.
pub const SERVICE_NAME: &str = "provider.v1.SecretStoreProvider";

#[cfg(test)]
mod roundtrip_tests;
