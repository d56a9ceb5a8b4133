//! Mutating admission, dispatched by kind. Each kind's changes live in their own module and
//! come back as typed RFC 6902 operations; this module only routes and wraps them.
//!
//! Pods and workloads (secret injection and reload hashes) are routed to [`crate::inject`]
//! before the Keyward kinds.

pub mod defaults;

use json_patch::{Patch, PatchOperation};

use crate::cache::State;
use crate::review::{Decision, Request, json_of};
use crate::validate::{Kind, is_write, kind_and_object};

/// Answers a mutating review.
pub fn mutate(req: &Request, state: &State) -> Decision {
    if !is_write(req) {
        return Decision::allow();
    }
    if crate::inject::handles(req) {
        return crate::inject::mutate(req, state);
    }
    let (kind, object) = match kind_and_object(req) {
        Ok(found) => found,
        Err(denied) => return denied,
    };
    let object = &json_of(object);
    let ops: Vec<PatchOperation> = match kind {
        Kind::ExternalSecret => defaults::external_secret(object),
        Kind::Provider | Kind::ClusterProvider => defaults::provider_ref(object),
        // A store reference without a kind stays without one (ExternalSecret and PushSecret): the
        // omission has a meaning of its own, resolved where the reference is used.
        // A ClusterExternalSecret's ExternalSecrets (a ClusterPushSecret's PushSecrets) are
        // defaulted when they are written.
        Kind::PushSecret
        | Kind::ClusterExternalSecret
        | Kind::ClusterPushSecret
        | Kind::SecretStore
        | Kind::ClusterSecretStore
        | Kind::ProviderConfig(_)
        | Kind::Generator(_)
        | Kind::ClusterGenerator
        | Kind::GeneratorState => Vec::new(),
    };
    Decision { patch: Some(Patch(ops)), ..Decision::allow() }
}
