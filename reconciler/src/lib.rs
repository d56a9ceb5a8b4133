#![cfg_attr(test, allow(clippy::unwrap_used))]
//! Keyward's reconciler: the ExternalSecret, ClusterExternalSecret, PushSecret,
//! ClusterPushSecret, Provider and ClusterProvider controllers. They reach providers through
//! the client manager of `keyward-provider-client`.

pub mod caches;
pub mod class;
pub mod cli;
pub mod clusterexternalsecret;
pub mod clusterpushsecret;
pub mod conditions;
pub mod context;
pub mod controller_metrics;
pub mod events;
pub mod externalsecret;
#[cfg(test)]
pub(crate) mod fake_api;
pub mod fanout;
pub mod generators;
pub mod keys;
pub mod metrics;
pub mod object_metrics;
pub mod offline;
pub mod predicate;
pub mod provider;
pub mod pushsecret;
pub mod reload;
pub mod renders;
pub mod run;
pub mod shard;
pub mod slots;
pub mod tracked;
