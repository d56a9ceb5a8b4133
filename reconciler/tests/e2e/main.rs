//! The reconciler's end-to-end tests, in one test binary: real reconciler, provider and webhook
//! processes against one local control plane (`keyward_e2e::control_plane`, started once for the
//! binary). One module per area; `cargo test -p keyward-reconciler --test e2e <module>` runs one
//! of them (the name is a filter).
//!
//! The test harness runs tests of one binary at the same time, all against that one API server.
//! Each test's first line takes a turn (`support::shared` or `support::exclusive`): a test that
//! measures or disturbs what the others share (the API server's counters, the API server itself,
//! the CRDs, cluster-scoped objects a reconciler watches, a cluster-wide reconciler, timing
//! budgets) runs alone; the others run side by side in their own namespaces.

#![allow(clippy::unwrap_used)]

mod support;

mod api_cost;
mod apiserver_restart;
mod aws_generators;
mod azure_guides;
mod cluster_external_secret;
mod cluster_push_secret;
mod controller_switches;
mod creation_policies;
mod dashboard;
mod escape;
mod externalsecret;
mod gcp_generators;
mod gcp_guides;
mod generator_limits;
mod generators;
mod generic_targets;
mod injection;
mod kubernetes;
mod leader;
mod mfa_generators;
mod openbao_crd_stores;
mod plugin_store;
mod push_kubernetes;
mod pushsecret;
mod recovery;
mod rotation;
mod secret_stores;
mod sharding;
mod store_calls;
mod stores;
mod switch;
mod sync_windows;
mod template_budget;
mod templates;
mod tenant_json;
mod upstream_docs;
mod upstream_guides;
mod vault_generators;
mod webhook_generators;
