//! Checks one store (Provider, ClusterProvider, SecretStore, ClusterSecretStore):
//! Capabilities, then Validate, over gRPC. Ready only when the provider itself answered; a store
//! naming a provider Keyward does not serve is not Ready, with the reason the ExternalSecrets
//! using it report too (`ProviderNotSupported`).

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

/// Runs the check and builds the status.
pub async fn check(ctx: &Context, store: &StoreObject, previous: &ProviderStatus, generation: Option<i64>) -> Checked {
    let outcome = run(ctx, store).await;
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

type Failure = (&'static str, String, Option<Capabilities>);

async fn run(ctx: &Context, store: &StoreObject) -> Result<(Capabilities, String), Failure> {
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
    let v = client.validate().await.map_err(|e| ("ProviderUnreachable", format!("Validate: {e}"), Some(caps)))?;
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
