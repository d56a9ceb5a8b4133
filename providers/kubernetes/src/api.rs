//! `provider.external-secrets.io/v2alpha1` **Kubernetes**: the configuration of the Kubernetes
//! provider (always built; the webhook and the reconciler read it with `default-features =
//! false`), upstream's `spec.provider.kubernetes` and `spec.provider.crd` store blocks, and the
//! kind's registry row ([`KIND`]).
//!
//! Both blocks are upstream's shapes, which the row's [`StoreBlock`]s type in the store CRDs and
//! translate: `kubernetes` into the kind's spec ([`store_spec`]), `crd` into a [`CrdReadSpec`]
//! (the connection as a Kubernetes spec, the kind read and the allow rules), which the provider
//! tells apart by the block it was read from ([`KubernetesConfig`]).

mod crd_block;
mod rules;
mod spec;

use keyward_crds::registry::{BlockError, ProviderKind, ProviderSpec, StoreBlock, admit_spec};
use keyward_crds::rules::{Reach, ValidationErrors};
use keyward_crds::store_schema::field_schema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use crd_block::{
    CrdReadSpec, CrdResource, CrdStoreProvider, CrdWhitelist, CrdWhitelistRule, crd_object_ref, crd_read_spec,
    crd_whitelist_allows, validate_crd,
};
pub use rules::{check_kubernetes, kubernetes_reach, validate_kubernetes};
pub use spec::{
    CertAuth, Kubernetes, KubernetesAuth, KubernetesServer, KubernetesSpec, KubernetesStoreProvider, TokenAuth,
};

impl ProviderSpec for KubernetesSpec {
    fn validate(&self) -> Result<(), ValidationErrors> {
        validate_kubernetes(self)
    }
    fn reach(&self) -> Reach<'_> {
        kubernetes_reach(self)
    }
}

/// The store CRDs' `spec.provider` fields of the row's blocks, for their schemas and
/// descriptions.
#[derive(JsonSchema)]
#[allow(dead_code)]
struct StoreFields {
    /// Secrets of a Kubernetes cluster (served by the Kubernetes provider).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    kubernetes: Option<KubernetesStoreProvider>,
    /// Fields of objects of one kind, ConfigMaps and custom resources (served by the Kubernetes
    /// provider).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    crd: Option<CrdStoreProvider>,
}

/// The `Kubernetes` configuration a `kubernetes` store block stands for: `remoteNamespace`
/// defaults to `default` as upstream; `allowRemoteNamespaceOverride` does not exist upstream and
/// stays off.
pub fn store_spec(k: &KubernetesStoreProvider) -> KubernetesSpec {
    KubernetesSpec {
        server: k.server.clone(),
        auth: k.auth.clone(),
        auth_ref: k.auth_ref.clone(),
        remote_namespace: k
            .remote_namespace
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(spec::default_remote_namespace),
        allow_remote_namespace_override: false,
    }
}

fn unreadable(e: serde_json::Error) -> BlockError {
    BlockError::Unreadable(e.to_string())
}

fn translate_kubernetes(block: &serde_json::Value) -> Result<serde_json::Value, BlockError> {
    let block = KubernetesStoreProvider::deserialize(block).map_err(unreadable)?;
    serde_json::to_value(store_spec(&block)).map_err(unreadable)
}

/// A `kubernetes` block's admission: the kind's rules, with credentials not required (upstream
/// admits a store without `auth` or `authRef` and fails it at its first sync; [`warnings`] says
/// so), and its reach.
fn admit_kubernetes(
    block: &serde_json::Value,
    out: &mut keyward_crds::registry::AdmitSink<'_>,
) -> Result<(), serde_json::Error> {
    let spec = store_spec(&KubernetesStoreProvider::deserialize(block)?);
    out(check_kubernetes(&spec, false), &kubernetes_reach(&spec));
    Ok(())
}

/// A `kubernetes` block without credentials: admitted, as upstream, and said to be unusable.
fn warnings(block: &serde_json::Value) -> Vec<String> {
    let set = |field: &str| block.get(field).is_some_and(|v| !v.is_null());
    if set("auth") || set("authRef") {
        return Vec::new();
    }
    vec![
        "spec: neither auth nor authRef is set, so the store cannot read and reports Ready=False (as upstream, \
         which admits it and fails at the first sync): set one"
            .to_string(),
    ]
}

/// What the provider serves a request with: a `Kubernetes` configuration (an object, or a
/// store's `kubernetes` block), or a store's `crd` block.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub enum KubernetesConfig {
    /// Secrets of `remoteNamespace`.
    Secrets(KubernetesSpec),
    /// Objects of one kind, through the same kind of connection.
    Crd(CrdReadSpec),
}

impl KubernetesConfig {
    /// The configuration read from store block `key` (already translated by the row).
    pub fn from_block(key: &str, spec: serde_json::Value) -> Result<Self, serde_json::Error> {
        match key {
            CRD_KEY => serde_json::from_value(spec).map(KubernetesConfig::Crd),
            _ => serde_json::from_value(spec).map(KubernetesConfig::Secrets),
        }
    }

    /// How the target cluster is reached.
    pub fn connection(&self) -> &KubernetesSpec {
        match self {
            KubernetesConfig::Secrets(spec) => spec,
            KubernetesConfig::Crd(crd) => &crd.connection,
        }
    }
}

impl ProviderSpec for KubernetesConfig {
    fn validate(&self) -> Result<(), ValidationErrors> {
        match self {
            KubernetesConfig::Secrets(spec) => validate_kubernetes(spec),
            KubernetesConfig::Crd(crd) => validate_crd(crd),
        }
    }
    fn reach(&self) -> Reach<'_> {
        kubernetes_reach(self.connection())
    }
}

/// The key of upstream's block that reads objects of one kind.
pub const CRD_KEY: &str = "crd";

/// What a ClusterSecretStore's `kubernetes` or `crd` block must give a namespace, as upstream:
/// the CA that verifies the server, and the operator's client certificate or token sent to it.
const PINNED: &[&str] = &["server.caProvider", "auth.cert.clientCert", "auth.token.bearerToken"];

/// The registry row of `Kubernetes`: served by `keyward-provider-kubernetes`, and by it also the
/// SecretStores with `spec.provider.kubernetes` and `spec.provider.crd` (upstream's blocks,
/// translated).
pub static KIND: ProviderKind = ProviderKind {
    kind: "Kubernetes",
    plural: "kubernetes",
    provider: "kubernetes",
    stores: &[
        StoreBlock {
            schema: Some(|| field_schema::<StoreFields>("kubernetes")),
            translate: Some(translate_kubernetes),
            warnings: Some(warnings),
            admit: Some(admit_kubernetes),
            pinned: PINNED,
            ..StoreBlock::spec("kubernetes")
        },
        StoreBlock {
            schema: Some(|| field_schema::<StoreFields>(CRD_KEY)),
            translate: Some(crd_block::translate),
            admit: Some(crd_block::admit),
            pinned: PINNED,
            ..StoreBlock::spec(CRD_KEY)
        },
    ],
    admit: admit_spec::<KubernetesSpec>,
    crd: <Kubernetes as kube::CustomResourceExt>::crd,
};

#[cfg(test)]
mod tests;
