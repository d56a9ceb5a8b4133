//! Checks one store (Provider, ClusterProvider, SecretStore, ClusterSecretStore):
//! Capabilities, then Validate, over gRPC. Ready only when the provider itself answered; a store
//! naming a provider Keyward does not serve is not Ready, with the reason the ExternalSecrets
//! using it report too (`ProviderNotSupported`).

use std::time::Duration;

use keyward_crds::{Capabilities, ProviderStatus};

use crate::conditions;
use crate::context::Context;
use keyward_provider_client::StoreObject;

/// What the check found.
pub struct Checked {
    /// The new status.
    pub status: ProviderStatus,
    /// Whether it is ready.
    pub ready: bool,
    /// The condition message.
    pub message: String,
}

/// Runs the check and builds the status; `interval` is the store's check interval.
pub async fn check(
    ctx: &Context,
    store: &StoreObject,
    previous: &ProviderStatus,
    generation: Option<i64>,
    interval: Duration,
) -> Checked {
    let outcome = run(ctx, store, config_max_age(store, previous, generation, interval)).await;
    let (ready, reason, message, capabilities) = match outcome {
        Ok((caps, message)) => (true, "Valid", message, Some(caps)),
        Err((reason, message, caps)) => (false, reason, message, caps.or(previous.capabilities)),
    };
    let status = ProviderStatus {
        conditions: vec![conditions::ready(&previous.conditions, ready, reason, message.clone(), generation)],
        capabilities,
    };
    Checked { status, ready, message }
}

/// How old a configuration the provider may validate (Validate's `max_age_millis`): a periodic
/// check of a SecretStore or ClusterSecretStore that passed at this generation accepts the
/// store as the provider's watch holds it, up to an interval old, so it costs the API server no
/// GET. A first check, a changed spec and a failing store read it anew (zero), and so does every
/// check of a Provider or ClusterProvider: its configuration is another object, which changes
/// (and triggers a check) without the store's generation moving.
fn config_max_age(
    store: &StoreObject,
    previous: &ProviderStatus,
    generation: Option<i64>,
    interval: Duration,
) -> Duration {
    let inline = matches!(store, StoreObject::SecretStore(_) | StoreObject::ClusterSecretStore(_));
    let passed_here = previous.conditions.iter().any(|c| {
        c.type_ == keyward_crds::common::CONDITION_READY && c.status == "True" && c.observed_generation == generation
    });
    if inline && passed_here && generation.is_some() { interval } else { Duration::ZERO }
}

type Failure = (&'static str, String, Option<Capabilities>);

async fn run(ctx: &Context, store: &StoreObject, max_age: Duration) -> Result<(Capabilities, String), Failure> {
    let client = ctx
        .manager
        .check_client(store)
        .await
        .map_err(|e| (e.reason().unwrap_or("ConfigError"), e.to_string(), None))?;
    let caps = client.capabilities().await.map_err(|e| ("ProviderUnreachable", format!("Capabilities: {e}"), None))?;
    // A ClusterProvider authenticating in each manifest's namespace has no namespace to
    // validate in here; it is validated at use, in the manifest's namespace.
    if client.reference().namespace.is_empty() {
        return Ok((
            caps,
            "provider answered Capabilities; configuration is validated in each manifest's namespace".into(),
        ));
    }
    let v =
        client.validate(max_age).await.map_err(|e| ("ProviderUnreachable", format!("Validate: {e}"), Some(caps)))?;
    if !v.valid {
        let why = if v.error.is_empty() { "no reason given".to_string() } else { v.error };
        return Err(("ValidationFailed", format!("provider refused the configuration: {why}"), Some(caps)));
    }
    let mut message = "provider answered Validate and Capabilities".to_string();
    if !v.warnings.is_empty() {
        message.push_str(&format!(" (warnings: {})", v.warnings.join("; ")));
    }
    Ok((caps, message))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use keyward_crds::common::Condition;
    use keyward_crds::{Provider, SecretStore};

    const HOUR: Duration = Duration::from_secs(3600);

    fn meta() -> ObjectMeta {
        ObjectMeta { name: Some("s".into()), namespace: Some("ns".into()), ..Default::default() }
    }

    fn secret_store() -> StoreObject {
        StoreObject::SecretStore(Arc::new(SecretStore { metadata: meta(), spec: Default::default(), status: None }))
    }

    fn provider() -> StoreObject {
        StoreObject::Provider(Arc::new(Provider { metadata: meta(), spec: Default::default(), status: None }))
    }

    fn status(ready: &str, generation: i64) -> ProviderStatus {
        ProviderStatus {
            conditions: vec![Condition {
                type_: "Ready".into(),
                status: ready.into(),
                reason: None,
                message: None,
                last_transition_time: None,
                observed_generation: Some(generation),
            }],
            capabilities: None,
        }
    }

    #[test]
    fn only_a_periodic_check_of_a_passing_inline_store_reads_an_aged_configuration() {
        let store = secret_store();
        assert_eq!(config_max_age(&store, &status("True", 2), Some(2), HOUR), HOUR, "periodic");
        assert_eq!(config_max_age(&store, &ProviderStatus::default(), Some(1), HOUR), Duration::ZERO, "first check");
        assert_eq!(config_max_age(&store, &status("True", 2), Some(3), HOUR), Duration::ZERO, "spec changed");
        assert_eq!(config_max_age(&store, &status("False", 2), Some(2), HOUR), Duration::ZERO, "failing");
        assert_eq!(config_max_age(&store, &status("True", 2), None, HOUR), Duration::ZERO, "no generation");
        assert_eq!(config_max_age(&provider(), &status("True", 2), Some(2), HOUR), Duration::ZERO, "a Provider");
    }
}
