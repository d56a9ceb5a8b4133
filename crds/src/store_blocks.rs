//! Upstream's `spec.provider.openBao` and `spec.provider.crd` blocks of a SecretStore or
//! ClusterSecretStore, as upstream writes them. Neither has a configuration kind of its own:
//! `openBao` is a subset of the Vault block and is served by the Vault provider, `crd` is the
//! Kubernetes block plus the resource it reads and is served by the Kubernetes provider
//! (`crate::rules::store_backend` translates both).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::SecretKeySelector;
use crate::provider_config::{CaProvider, KubernetesAuth, KubernetesServer, KubernetesSpec};
use crate::vault::{VaultAppRole, VaultKvVersion, VaultUserPassAuth};

/// Upstream's `spec.provider.openBao`: an OpenBao server's KV engine, reached as Vault is (OpenBao
/// speaks Vault's HTTP API).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OpenBaoStoreProvider {
    /// Address of the OpenBao server, for example `https://openbao.example.com:8200`.
    pub server: String,
    /// Mount path of the KV secrets engine, for example `secret`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Version of the KV secrets engine: `v1` or `v2` (default).
    #[serde(default)]
    pub version: VaultKvVersion,
    /// OpenBao namespace of every request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// PEM CA bundle that signs the server's certificate, Base64 encoded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_bundle: Option<String>,
    /// A Secret or ConfigMap key holding the CA bundle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_provider: Option<CaProvider>,
    /// How the provider logs in: exactly one of `appRole`, `tokenSecretRef` and `userPass`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<OpenBaoAuth>,
}

/// Upstream's OpenBao logins: the AppRole, token and userpass methods.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OpenBaoAuth {
    /// OpenBao namespace to log in to, when it differs from `spec.provider.openBao.namespace`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// An OpenBao token stored in a Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_secret_ref: Option<SecretKeySelector>,
    /// AppRole login with a role ID and a secret ID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_role: Option<VaultAppRole>,
    /// userpass login: a user name and its password.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_pass: Option<VaultUserPassAuth>,
}

/// Upstream's `spec.provider.crd`: fields of objects of one kind, custom resources and core ones
/// (ConfigMaps) alike, read through a Kubernetes API as the Kubernetes block reaches it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CrdStoreProvider {
    /// The cluster to read from; defaults to the cluster the provider runs in.
    #[serde(default)]
    pub server: KubernetesServer,
    /// Credentials: exactly one of `cert`, `token` or `serviceAccount`. Mutually exclusive with
    /// `authRef`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<KubernetesAuth>,
    /// A kubeconfig stored in a Secret key. Mutually exclusive with `auth`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_ref: Option<SecretKeySelector>,
    /// The kind of the objects read.
    #[serde(default)]
    pub resource: CrdResource,
    /// Which objects and properties may be read; everything the credentials can read when
    /// unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub whitelist: Option<CrdWhitelist>,
}

/// A kind by its API group, version and kind (`group: ""` for core kinds such as ConfigMap).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CrdResource {
    /// API group; empty for the core group.
    pub group: String,
    /// API version, for example `v1alpha1`.
    pub version: String,
    /// Kind, for example `Widget`.
    pub kind: String,
}

/// Allow rules: when any is set, a read must match at least one.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CrdWhitelist {
    /// The rules; a read matching none of them is refused.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<CrdWhitelistRule>,
}

/// One allow rule: every filter it sets must match.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CrdWhitelistRule {
    /// Regular expression matched against the object's name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Regular expression matched against the object's namespace (ClusterSecretStores only).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Regular expressions matched against the property read; a read without one matches only
    /// rules without properties.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub properties: Vec<String>,
}

/// What the Kubernetes provider serves a `crd` block with (`crate::rules::crd_read_spec`): the
/// connection as a Kubernetes configuration (its `remoteNamespace` unused), the kind and the
/// allow rules.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct CrdReadSpec {
    /// How the target cluster is reached.
    pub connection: KubernetesSpec,
    /// The kind read.
    pub resource: CrdResource,
    /// `whitelist.rules`.
    pub whitelist: Vec<CrdWhitelistRule>,
}
