//! The ACRAccessToken generator: an Entra ID token of the generator's identity, exchanged at the
//! Azure Container Registry for a refresh token (`POST /oauth2/exchange`) and, when the spec has
//! a `scope`, that one for an access token of the scope (`POST /oauth2/token`), as upstream
//! generates it (release 2.9.0). The values are upstream's `username` (the fixed user of token
//! logins) and `password` (the token).
//!
//! The identity is a Key Vault configuration's (`spec.auth.servicePrincipal` is its
//! `authSecretRef` with `tenantId`, `workloadIdentity` its `serviceAccountRef`,
//! `managedIdentity` its `identityId`), so it is built by [`crate::auth`] and judged by the same
//! tenant boundary: a generator belongs to its namespace, so its Secrets and ServiceAccount are
//! read there and the provider's own managed identity is refused (unless the operator lets the
//! namespace use it). The registry is a server the tenant names: it is reached through the
//! tenant transport's address guard, size caps and store-calls metric, like a vault URL.

use azure_core::http::Url;
use keyward_crds::generators::{AcrAccessTokenSpec, AzureEnvironmentType};
use keyward_crds::rules::{AcrIdentity, ConfigOwner, acr_identity, validate_acr_access_token};
use keyward_provider_runtime::refs::check_reach;
use keyward_provider_runtime::{ProviderError, RequestContext, SecretMap};

use crate::api::{AzureAuthType, AzureKeyVaultSpec, AzureKvAuth, azure_reach};
use crate::{AzureProvider, auth, map_error};

/// The generator kind.
pub const ACR_KIND: &str = "ACRAccessToken";
/// The user name of every ACR token login.
pub const TOKEN_USERNAME: &str = "00000000-0000-0000-0000-000000000000";

/// The Key Vault configuration fields a generator's spec stands for, and the generator's own
/// names for them, so messages name the field the generator's author wrote.
const FIELDS: [(&str, &str); 5] = [
    ("spec.authSecretRef.clientId", "spec.auth.servicePrincipal.secretRef.clientId"),
    ("spec.authSecretRef.clientSecret", "spec.auth.servicePrincipal.secretRef.clientSecret"),
    ("spec.authSecretRef", "spec.auth.servicePrincipal.secretRef"),
    ("spec.serviceAccountRef", "spec.auth.workloadIdentity.serviceAccountRef"),
    ("spec.authType", "spec.auth"),
];

/// Generates the values of an ACRAccessToken spec for `ctx` (the generator).
pub async fn generate(
    provider: &AzureProvider,
    ctx: &RequestContext,
    spec_json: &str,
) -> Result<SecretMap, ProviderError> {
    if ctx.kind != ACR_KIND {
        return Err(ProviderError::Unsupported(format!(
            "the Azure provider generates {ACR_KIND} values, not {}",
            ctx.kind
        )));
    }
    let what = format!("{ACR_KIND} {}/{}", ctx.source_namespace, ctx.name);
    let spec: AcrAccessTokenSpec =
        serde_json::from_str(spec_json).map_err(|e| ProviderError::InvalidArgument(format!("{what}: spec: {e}")))?;
    let errs = validate_acr_access_token("spec", &spec);
    if !errs.is_empty() {
        let list: Vec<String> = errs.iter().map(|e| format!("{}: {}", e.field, e.message)).collect();
        return Err(ProviderError::BadConfig(format!("{what}: {}", list.join("; "))));
    }
    let config = identity_config(&spec);
    check_reach(ctx, &azure_reach(&config)).map_err(generator_fields)?;
    let transport = provider.transport(ctx.owner() == ConfigOwner::Operator);
    let authority = auth::authority_host(&config, provider.authority_override());
    let options = auth::client_options(transport, &authority);
    let credential = auth::credential(provider.refs(), ctx, &config, options, &authority)
        .await
        .map_err(|e| generator_fields(with_what(e, &what)))?;
    let scope = management_scope(config.environment());
    let token = credential
        .get_token(&[scope], None)
        .await
        .map_err(|e| generator_fields(map_error(e, &format!("{what}: an Entra ID token for {scope}"))))?;
    let service = spec.registry.as_str();
    let registry = Registry { transport, host: service, what: &what };
    let tenant = spec.tenant_id.as_deref().unwrap_or_default();
    let exchange = [
        ("grant_type", "access_token"),
        ("service", service),
        ("tenant", tenant),
        ("access_token", token.token.secret()),
    ];
    let refresh = registry.token("exchange", &exchange, "refresh_token").await?;
    let password = match spec.scope.as_deref() {
        None => refresh,
        Some(scope) => {
            let form = [
                ("grant_type", "refresh_token"),
                ("service", service),
                ("scope", scope),
                ("refresh_token", refresh.as_str()),
            ];
            registry.token("token", &form, "access_token").await?
        }
    };
    Ok(SecretMap::from([
        ("username".to_string(), TOKEN_USERNAME.as_bytes().to_vec()),
        ("password".to_string(), password.into_bytes()),
    ]))
}

/// The Key Vault configuration whose identity the generator's `auth` describes (no vault: only
/// the identity is built from it).
fn identity_config(spec: &AcrAccessTokenSpec) -> AzureKeyVaultSpec {
    let mut config = AzureKeyVaultSpec {
        tenant_id: spec.tenant_id.clone().filter(|t| !t.is_empty()),
        environment_type: spec.environment_type,
        ..Default::default()
    };
    match acr_identity(&spec.auth) {
        Some(AcrIdentity::ServicePrincipal) => {
            let secret_ref = spec.auth.service_principal.as_ref().map(|s| s.secret_ref.clone()).unwrap_or_default();
            config.auth_type = Some(AzureAuthType::ServicePrincipal);
            config.auth_secret_ref = Some(AzureKvAuth {
                client_id: secret_ref.client_id,
                client_secret: secret_ref.client_secret,
                ..Default::default()
            });
        }
        Some(AcrIdentity::ManagedIdentity) => {
            config.auth_type = Some(AzureAuthType::ManagedIdentity);
            config.identity_id = spec.auth.managed_identity.as_ref().and_then(|m| m.identity_id.clone());
        }
        Some(AcrIdentity::WorkloadIdentity) | None => {
            config.auth_type = Some(AzureAuthType::WorkloadIdentity);
            config.service_account_ref =
                spec.auth.workload_identity.as_ref().and_then(|w| w.service_account_ref.clone());
        }
    }
    config
}

/// The scope of the Entra ID token a registry exchanges: Azure Resource Manager's, per cloud.
pub fn management_scope(environment: AzureEnvironmentType) -> &'static str {
    match environment {
        AzureEnvironmentType::USGovernmentCloud => "https://management.usgovcloudapi.net/.default",
        AzureEnvironmentType::ChinaCloud => "https://management.chinacloudapi.cn/.default",
        _ => "https://management.azure.com/.default",
    }
}

/// `e` with its message prefixed by the generator, unless it names it already.
fn with_what(e: ProviderError, what: &str) -> ProviderError {
    let status = tonic::Status::from(e);
    if status.message().starts_with(what) {
        return ProviderError::from(status);
    }
    ProviderError::from(tonic::Status::new(status.code(), format!("{what}: {}", status.message())))
}

/// `e` naming the generator's fields instead of the Key Vault configuration's.
fn generator_fields(e: ProviderError) -> ProviderError {
    let status = tonic::Status::from(e);
    let mut message = status.message().to_string();
    for (store, generator) in FIELDS {
        message = message.replace(store, generator);
    }
    ProviderError::from(tonic::Status::new(status.code(), message))
}

/// One registry's token endpoints.
struct Registry<'a> {
    transport: &'a crate::transport::Transport,
    host: &'a str,
    what: &'a str,
}

impl Registry<'_> {
    /// POSTs `form` to `/oauth2/<endpoint>` and returns the answer's `field`.
    async fn token(&self, endpoint: &str, form: &[(&str, &str)], field: &str) -> Result<String, ProviderError> {
        let call = format!("{}: POST https://{}/oauth2/{endpoint}", self.what, self.host);
        let url = Url::parse(&format!("https://{}/oauth2/{endpoint}", self.host))
            .map_err(|e| ProviderError::BadConfig(format!("{call}: spec.registry: {e}")))?;
        let (status, body) = self.transport.post_form(url, form).await.map_err(|e| with_what(e, &call))?;
        if status != 200 {
            let answer: String = String::from_utf8_lossy(&body).chars().take(300).collect();
            let message = format!("{call}: the registry answered {status}: {answer}");
            return Err(match status {
                401 => ProviderError::Unauthenticated(message),
                403 => ProviderError::PermissionDenied(message),
                400 | 404 => ProviderError::BadConfig(message),
                429 | 500.. => ProviderError::Unavailable(message),
                _ => ProviderError::Internal(message),
            });
        }
        let answer: serde_json::Value = serde_json::from_slice(&body)
            .map_err(|e| ProviderError::Internal(format!("{call}: the answer is not JSON: {e}")))?;
        answer
            .get(field)
            .and_then(serde_json::Value::as_str)
            .filter(|t| !t.is_empty())
            .map(str::to_string)
            .ok_or_else(|| ProviderError::Internal(format!("{call}: the answer has no {field}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(v: serde_json::Value) -> AcrAccessTokenSpec {
        serde_json::from_value(v).expect("spec")
    }

    #[test]
    fn the_identity_is_a_key_vault_configurations() {
        let sp = identity_config(&spec(json!({"tenantId": "t", "registry": "r",
            "auth": {"servicePrincipal": {"secretRef": {"clientId": {"name": "s", "key": "id"},
                                                        "clientSecret": {"name": "s", "key": "secret"}}},
                     "managedIdentity": {}}})));
        assert_eq!(sp.auth(), AzureAuthType::ServicePrincipal, "upstream's order");
        assert_eq!(sp.tenant_id.as_deref(), Some("t"));
        let auth = sp.auth_secret_ref.clone().expect("authSecretRef");
        assert_eq!(auth.client_secret.and_then(|s| s.key).as_deref(), Some("secret"));
        let reach: Vec<&str> = azure_reach(&sp).named.iter().map(|n| n.field).collect();
        assert_eq!(reach, ["spec.authSecretRef.clientId", "spec.authSecretRef.clientSecret"]);

        let mi = identity_config(&spec(json!({"registry": "r", "auth": {"managedIdentity": {"identityId": "i"}}})));
        assert_eq!((mi.auth(), mi.identity_id.as_deref()), (AzureAuthType::ManagedIdentity, Some("i")));
        assert_eq!(azure_reach(&mi).ambient.len(), 1, "the provider's own identity");

        let wi = identity_config(&spec(json!({"registry": "r", "environmentType": "ChinaCloud",
            "auth": {"workloadIdentity": {"serviceAccountRef": {"name": "sa"}}}})));
        assert_eq!(wi.auth(), AzureAuthType::WorkloadIdentity);
        assert_eq!(wi.service_account_ref.map(|s| s.name).as_deref(), Some("sa"));
        assert_eq!(
            management_scope(wi.environment_type.unwrap_or_default()),
            "https://management.chinacloudapi.cn/.default"
        );
    }

    #[test]
    fn messages_name_the_generators_fields() {
        let e = generator_fields(ProviderError::PermissionDenied(
            "spec.authType: uses the provider's own credentials; spec.authSecretRef.clientId.namespace: no".into(),
        ));
        assert_eq!(e.code(), tonic::Code::PermissionDenied);
        let text = tonic::Status::from(e).message().to_string();
        assert_eq!(
            text,
            "spec.auth: uses the provider's own credentials; spec.auth.servicePrincipal.secretRef.clientId.namespace: no"
        );
        let once = with_what(with_what(ProviderError::BadConfig("x".into()), "G a/b"), "G a/b");
        assert_eq!(tonic::Status::from(once).message(), "G a/b: x");
    }
}
