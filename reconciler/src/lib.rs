#![cfg_attr(test, allow(clippy::unwrap_used))]
//! Keyward's reconciler: the ExternalSecret, PushSecret, Provider and ClusterProvider
//! controllers, and the client manager they reach providers through.

pub mod clientmanager;
pub mod metrics;
