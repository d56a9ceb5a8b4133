//! Calls a provider makes to its store, counted: what users pay for (AWS bills per 10,000
//! calls) and what rate-limited stores feel.
//!
//! Exposed on `/metrics` as upstream's `externalsecret_provider_api_calls_count{provider, call,
//! status}` (`status` is `success` or `error`), so upstream's dashboards and alerts read it
//! unchanged: a counter under upstream's name, which has no `_total`
//! ([`keyward_process::metrics::Unsuffixed`]).
//!
//! Each provider counts at the one place its requests leave (its HTTP client's send, the
//! target cluster's client, the AWS SDK's connector), so no call is missed and none is counted
//! twice; the provider names (`HashiCorp/Vault`, `AWS/SecretsManager`, …) and call names are
//! upstream's where upstream has them.

use std::sync::OnceLock;

use keyward_process::metrics::Unsuffixed;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

/// The metric's name, upstream's.
pub const METRIC: &str = "externalsecret_provider_api_calls_count";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    provider: &'static str,
    call: String,
    status: &'static str,
}

type Calls = Family<CallLabels, Counter>;

/// One family per process: every client of every configuration counts into it.
fn calls() -> &'static Calls {
    static CALLS: OnceLock<Calls> = OnceLock::new();
    CALLS.get_or_init(Calls::default)
}

/// Counts one call of `provider` to its store: `call` names the operation, `ok` whether it
/// succeeded (an answer the store gave, even "not found", is a success of the call; a refused,
/// failed or error answer is not).
pub fn record(provider: &'static str, call: &str, ok: bool) {
    let status = if ok { "success" } else { "error" };
    calls().get_or_create(&CallLabels { provider, call: call.to_string(), status }).inc();
}

/// How many calls of `provider` named `call` ended with `ok` (for tests).
pub fn count(provider: &'static str, call: &str, ok: bool) -> u64 {
    let status = if ok { "success" } else { "error" };
    calls().get_or_create(&CallLabels { provider, call: call.to_string(), status }).get()
}

/// Adds the family to a process's registry.
pub(crate) fn register(registry: &mut Registry) {
    registry.register(METRIC, "Number of API calls towards the secret provider", Unsuffixed(calls().clone()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_are_exposed_under_upstreams_name_and_labels() {
        record("Test/Store", "GetSecretValue", true);
        record("Test/Store", "GetSecretValue", true);
        record("Test/Store", "GetSecretValue", false);
        assert_eq!(count("Test/Store", "GetSecretValue", true), 2);
        let mut registry = Registry::default();
        register(&mut registry);
        let text = keyward_process::health::encode(&registry).expect("encodes");
        assert!(text.contains("# TYPE externalsecret_provider_api_calls_count counter"), "{text}");
        assert!(
            text.contains(
                r#"externalsecret_provider_api_calls_count{provider="Test/Store",call="GetSecretValue",status="success"} 2"#
            ),
            "{text}"
        );
        assert!(
            text.contains(
                r#"externalsecret_provider_api_calls_count{provider="Test/Store",call="GetSecretValue",status="error"} 1"#
            ),
            "{text}"
        );
    }
}
