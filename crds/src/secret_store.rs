//! `external-secrets.io/v1` SecretStore and ClusterSecretStore, in the shape External Secrets
//! Operator users already write. Keyward serves them through its out-of-process providers:
//! `spec.provider.vault` and `openBao` are typed as upstream has them and translated into the
//! Vault provider configuration ([`crate::rules::store_backend`]); a provider crate's block
//! (`kubernetes`, `crd`, `webhook`, …) is its registry row's; every other
//! upstream provider is accepted as an opaque object so existing manifests apply, and reported
//! `Ready=False` (`ProviderNotSupported`).

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

use crate::free_json::FreeJsonMap;
use crate::provider::{ClusterProviderCondition, ProviderStatus};
use crate::store_blocks::OpenBaoStoreProvider;
use crate::vault::VaultSpec;

/// API version of SecretStore and ClusterSecretStore.
pub const SECRET_STORE_API_VERSION: &str = "external-secrets.io/v1";

/// A namespaced store: ExternalSecrets and PushSecrets of its namespace use it, and everything
/// its provider configuration names stays in that namespace.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "external-secrets.io",
    version = "v1",
    kind = "SecretStore",
    doc = "SecretStore is the upstream External Secrets store of one namespace, served by Keyward's providers.",
    plural = "secretstores",
    shortname = "ss",
    category = "external-secrets",
    namespaced,
    status = "ProviderStatus",
    printcolumn = r#"{"name":"AGE","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"STATUS","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].reason"}"#,
    printcolumn = r#"{"name":"CAPABILITIES","type":"string","jsonPath":".status.capabilities"}"#,
    printcolumn = r#"{"name":"READY","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct SecretStoreSpec {
    /// Which controller instance serves this store (matched against the reconciler's
    /// `--controller-class`); empty means the default one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller: Option<String>,
    /// The provider and its configuration; exactly one entry.
    pub provider: SecretStoreProvider,
    /// How often a failed provider call is retried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_settings: Option<SecretStoreRetrySettings>,
    /// How often the store is checked again: an integer of seconds or a Go duration (`1h`,
    /// `30s`), as upstream; empty or 0 uses the reconciler's provider check interval
    /// (`rules::store_refresh_interval`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_interval: Option<IntOrString>,
    /// Namespaces allowed to use a ClusterSecretStore; any one condition admits. Ignored on a
    /// SecretStore (as upstream), which only its own namespace uses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<ClusterProviderCondition>,
}

/// A cluster-scoped store that ExternalSecrets and PushSecrets of every admitted namespace use.
/// Its provider configuration is the cluster operator's: it may name objects in other namespaces.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "external-secrets.io",
    version = "v1",
    kind = "ClusterSecretStore",
    doc = "ClusterSecretStore is the upstream External Secrets store for admitted namespaces, served by Keyward's providers.",
    plural = "clustersecretstores",
    shortname = "css",
    category = "external-secrets",
    status = "ProviderStatus",
    printcolumn = r#"{"name":"AGE","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"STATUS","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].reason"}"#,
    printcolumn = r#"{"name":"CAPABILITIES","type":"string","jsonPath":".status.capabilities"}"#,
    printcolumn = r#"{"name":"READY","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSecretStoreSpec {
    /// The same fields as a SecretStore's; `conditions` limit the namespaces that may use it
    /// (without conditions every namespace may).
    #[serde(flatten)]
    pub store: SecretStoreSpec,
}

/// `spec.provider`: one provider and its configuration. `vault` and `openBao` are typed; every
/// other block (a provider crate's, such as `kubernetes` or `webhook`, or an upstream provider
/// Keyward does not serve) is kept as written, all of them together within the free-form JSON
/// limits ([`FreeJsonMap`]), and an unserved one is reported as not supported. Read by hand
/// (below): serde's `flatten` would decode the other blocks into a tree first.
#[derive(Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct SecretStoreProvider {
    /// HashiCorp Vault KV secrets engines (served by the Vault provider).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vault: Option<VaultSpec>,
    /// OpenBao's KV engines (served by the Vault provider).
    #[serde(rename = "openBao", default, skip_serializing_if = "Option::is_none")]
    pub open_bao: Option<OpenBaoStoreProvider>,
    /// Every other provider (`webhook`, `gcpsm`, …), kept as written within the limits.
    #[serde(flatten)]
    #[schemars(skip)]
    pub other: FreeJsonMap,
}

impl<'de> Deserialize<'de> for SecretStoreProvider {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Blocks;
        impl<'de> Visitor<'de> for Blocks {
            type Value = SecretStoreProvider;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("spec.provider: an object of provider blocks")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<SecretStoreProvider, A::Error> {
                let mut p = SecretStoreProvider::default();
                let other = FreeJsonMap::read_rest(map, |name, map| {
                    match name {
                        "vault" => p.vault = map.next_value()?,
                        "openBao" => p.open_bao = map.next_value()?,
                        _ => return Ok(false),
                    }
                    Ok(true)
                })?;
                p.other = other;
                Ok(p)
            }
        }
        d.deserialize_map(Blocks)
    }
}

impl SecretStoreProvider {
    /// Names of the providers that are set, served ones first, then the others sorted.
    pub fn names(&self) -> Vec<&str> {
        let mut names = Vec::new();
        if self.vault.is_some() {
            names.push("vault");
        }
        if self.open_bao.is_some() {
            names.push("openBao");
        }
        names.extend(self.other.keys());
        names
    }

    /// Drops every block but `keys` (and the blocks the same process serves with them,
    /// [`crate::rules::SHARED_STORE_KEYS`]) to its name: a provider process keeps only the blocks
    /// it serves, and still sees what else is set (a store naming two providers is refused).
    pub fn keep_only(&mut self, keys: &[&str]) {
        let served_with = |block: &str| {
            keys.iter().any(|key| block == *key || crate::rules::SHARED_STORE_KEYS.contains(&(block, *key)))
        };
        if !served_with("openBao") && self.open_bao.is_some() {
            self.open_bao = Some(OpenBaoStoreProvider::default());
        }
        if !keys.contains(&"vault") && self.vault.is_some() {
            self.vault = Some(VaultSpec::default());
        }
        self.other.keep_content(|name| keys.contains(&name));
    }
}

/// Upstream's `spec.retrySettings`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretStoreRetrySettings {
    /// Retries of one call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_retries: Option<i32>,
    /// Pause between retries, as a Go duration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_interval: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_manifests_round_trip_with_unserved_providers_kept_as_written() {
        let yaml = "provider:\n  vault:\n    server: http://v:8200\n    auth: {tokenSecretRef: {name: t, key: k}}\n\
                    refreshInterval: 30\nretrySettings: {maxRetries: 3, retryInterval: 5s}\ncontroller: dev\n";
        let spec: SecretStoreSpec = serde_yaml::from_str(yaml).expect("parses");
        assert_eq!(spec.provider.names(), vec!["vault"]);
        assert_eq!(spec.refresh_interval, Some(IntOrString::Int(30)));
        let s: SecretStoreSpec =
            serde_yaml::from_str("provider: {example: {data: []}}\nrefreshInterval: 1h\n").expect("parses");
        assert_eq!(s.refresh_interval, Some(IntOrString::String("1h".into())));
        assert_eq!(serde_json::to_value(&s).expect("json")["refreshInterval"], "1h", "kept as written");
        let back = serde_json::to_value(&spec).expect("json");
        assert_eq!(back["provider"]["vault"]["auth"]["tokenSecretRef"]["name"], "t");
        assert_eq!(back["retrySettings"]["retryInterval"], "5s");

        let cluster: ClusterSecretStoreSpec = serde_yaml::from_str(
            "provider:\n  example:\n    data: [{key: a, valueMap: {x: y}}]\nconditions: [{namespaces: [team-a]}]\n",
        )
        .expect("parses");
        assert_eq!(cluster.store.provider.names(), vec!["example"]);
        assert_eq!(cluster.store.conditions[0].namespaces, vec!["team-a"]);
        let back = serde_json::to_value(&cluster).expect("json");
        assert_eq!(back["provider"]["example"]["data"][0]["valueMap"]["x"], "y");
        assert_eq!(back["conditions"][0]["namespaces"][0], "team-a", "flattened, as upstream");
    }

    #[test]
    fn the_provider_schema_keeps_unknown_providers() {
        use kube::CustomResourceExt;
        let crd = serde_json::to_value(ClusterSecretStore::crd()).expect("json");
        let provider =
            &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["provider"];
        assert_eq!(provider["x-kubernetes-preserve-unknown-fields"], true, "{provider}");
        assert!(provider["properties"]["vault"]["properties"]["auth"].is_object(), "{provider}");
        let refresh = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["refreshInterval"];
        assert_eq!(refresh["x-kubernetes-int-or-string"], true, "{refresh}");
        assert_eq!(crd["spec"]["scope"], "Cluster");
        assert_eq!(serde_json::to_value(SecretStore::crd()).expect("json")["spec"]["scope"], "Namespaced");
    }
}
