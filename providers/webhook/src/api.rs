//! `provider.external-secrets.io/v2alpha1` **Webhook**: the configuration of the generic
//! webhook provider (always built; the webhook and the reconciler read it with
//! `default-features = false`).
//!
//! The spec is upstream External Secrets' `spec.provider.webhook` block field for field (same
//! JSON names), so a SecretStore's block translates 1:1: an HTTP request rendered from Go
//! templates (`url`, `headers`, `body`, `result.jsonPath`) with the remote reference and the
//! Secrets of `secrets[]` as data, and a JSONPath that picks the value out of the answer.

use std::collections::BTreeMap;

use keyward_crds::SecretKeySelector;
use keyward_crds::provider_config::CaProvider;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use crate::rules::{validate_webhook, webhook_reach};

/// Configuration of the webhook provider: the HTTP request that fetches (or pushes) a value.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "provider.external-secrets.io",
    version = "v2alpha1",
    kind = "Webhook",
    doc = "Webhook configures the generic webhook provider: an HTTP request rendered from templates, and a JSONPath that picks the value out of the answer.",
    plural = "webhooks",
    category = "external-secrets",
    namespaced,
    printcolumn = r#"{"name":"URL","type":"string","jsonPath":".spec.url"}"#,
    printcolumn = r#"{"name":"Method","type":"string","jsonPath":".spec.method"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct WebhookSpec {
    /// HTTP method: `GET` by default for reads (`POST` for pushes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// URL to call, a template: `{{ .remoteRef.key }}`, `{{ .remoteRef.property }}`,
    /// `{{ .remoteRef.version }}` (URL-query-escaped), for pushes `{{ .remoteRef.remoteKey }}`,
    /// and `{{ .<secret>.<key> }}` of `secrets`. The scheme (`http://` or `https://`) must be
    /// written literally.
    pub url: String,
    /// Request headers; values are templates.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Authentication protocol (`ntlm` is read but not supported by Keyward).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<WebhookAuth>,
    /// Request body, a template. For pushes, empty means the pushed value itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// Time limit of one request (a Go duration such as `5s`); at most 15s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// How the value is picked out of the answer.
    #[serde(default, skip_serializing_if = "WebhookResult::is_empty")]
    pub result: WebhookResult,
    /// Secrets whose keys the templates see as `{{ .<name>.<key> }}` (every key of the Secret).
    /// The Secrets must carry the label `external-secrets.io/type: webhook`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<WebhookSecret>,
    /// PEM CA bundle (Base64) that signs the server's certificate; the system roots when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_bundle: Option<String>,
    /// A Secret or ConfigMap key holding the CA bundle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_provider: Option<CaProvider>,
}

/// Authentication protocol of the request.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookAuth {
    /// NTLM with a user name and password from Secrets. Not supported by Keyward's provider: a
    /// configuration setting it is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ntlm: Option<NtlmProtocol>,
}

/// NTLM credentials.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NtlmProtocol {
    /// Secret key holding the user name.
    pub username_secret: SecretKeySelector,
    /// Secret key holding the password.
    pub password_secret: SecretKeySelector,
}

/// How the value is picked out of the answer.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookResult {
    /// JSONPath of the value in the (JSON) answer, for example `$.data.password`; a template.
    /// Unset: the whole answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json_path: Option<String>,
}

impl WebhookResult {
    fn is_empty(&self) -> bool {
        self.json_path.is_none()
    }
}

/// A Secret the templates see.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookSecret {
    /// Name of the Secret's data in templates: `{{ .<name>.<key> }}`.
    pub name: String,
    /// The Secret (its `key` is not used: every key is exposed). Its namespace is honoured only
    /// for a configuration owned by the cluster operator.
    pub secret_ref: SecretKeySelector,
}

impl WebhookSpec {
    /// The method of a read: `method`, else `GET`.
    pub fn read_method(&self) -> String {
        self.method.as_deref().filter(|m| !m.is_empty()).unwrap_or("GET").to_ascii_uppercase()
    }

    /// The method of a push: `method`, else `POST`.
    pub fn push_method(&self) -> String {
        self.method.as_deref().filter(|m| !m.is_empty()).unwrap_or("POST").to_ascii_uppercase()
    }

    /// The JSONPath template, when one is set.
    pub fn json_path(&self) -> Option<&str> {
        self.result.json_path.as_deref().filter(|p| !p.is_empty())
    }
}

/// The generator kind (`generators.external-secrets.io/v1alpha1`) whose spec is this block,
/// generated by the webhook provider.
pub const GENERATOR_KIND: &str = "Webhook";

/// The label every Secret named in `secrets` (or `auth`) must carry, as upstream.
pub const SECRET_TYPE_LABEL: &str = "external-secrets.io/type";
/// Its value.
pub const SECRET_TYPE_VALUE: &str = "webhook";

impl keyward_crds::registry::ProviderSpec for WebhookSpec {
    fn validate(&self) -> Result<(), keyward_crds::rules::ValidationErrors> {
        validate_webhook(self)
    }

    fn reach(&self) -> keyward_crds::rules::Reach<'_> {
        webhook_reach(self)
    }
}

/// The registry row of `Webhook`: served by `keyward-provider-webhook`, and by it also the
/// SecretStores with `spec.provider.webhook`.
pub static KIND: keyward_crds::registry::ProviderKind = keyward_crds::registry::ProviderKind {
    kind: "Webhook",
    plural: "webhooks",
    provider: "webhook",
    stores: &[keyward_crds::registry::StoreBlock {
        // What a ClusterSecretStore must give a namespace, as upstream: the Secrets whose data the
        // operator's templates send, and the operator's NTLM login.
        pinned: &["secrets[].secretRef", "auth.ntlm.usernameSecret", "auth.ntlm.passwordSecret"],
        ..keyward_crds::registry::StoreBlock::spec("webhook")
    }],
    admit: keyward_crds::registry::admit_spec::<WebhookSpec>,
    crd: <Webhook as kube::CustomResourceExt>::crd,
};
