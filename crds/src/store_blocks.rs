//! Upstream's `spec.provider.openBao` block of a SecretStore or ClusterSecretStore, as upstream
//! writes it. It has no configuration kind of its own: it is a subset of the Vault block and is
//! served by the Vault provider (`crate::rules::store_backend` translates it).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::SecretKeySelector;
use crate::provider_config::CaProvider;
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
