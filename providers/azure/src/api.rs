//! `provider.external-secrets.io/v2alpha1` **AzureKeyVault**: the configuration of the Azure
//! Key Vault provider (always built; the webhook and the reconciler read it with
//! `default-features = false`).
//!
//! The spec is upstream External Secrets' `spec.provider.azurekv` block field for field (same
//! JSON names, release 2.9.0), so a SecretStore's block is read as the spec without translation:
//! the vault (`vaultUrl`), the cloud (`environmentType`, `customCloudConfig`), and how to
//! authenticate (`authType`: a service principal's client secret or certificate from Secrets, a
//! Kubernetes ServiceAccount federated with Entra ID, or the provider's own managed identity).

use keyward_crds::SecretKeySelector;
pub use keyward_crds::generators::AzureEnvironmentType;
use keyward_crds::provider_config::ServiceAccountSelector;
use keyward_crds::rules::{
    Ambient, FieldError, NamedKind, NamedObject, Reach, ValidationErrors, check_key_selector, check_server_url,
};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Configuration of the Azure Key Vault provider: which vault, which cloud, which identity.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "provider.external-secrets.io",
    version = "v2alpha1",
    kind = "AzureKeyVault",
    doc = "AzureKeyVault configures the Azure Key Vault provider: the vault URL, the Azure cloud and the identity it authenticates with (a service principal, a federated ServiceAccount or the provider's managed identity).",
    plural = "azurekeyvaults",
    category = "external-secrets",
    namespaced,
    printcolumn = r#"{"name":"Vault","type":"string","jsonPath":".spec.vaultUrl"}"#,
    printcolumn = r#"{"name":"Auth","type":"string","jsonPath":".spec.authType"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct AzureKeyVaultSpec {
    /// How to authenticate: `ServicePrincipal` (default; `tenantId` and `authSecretRef`),
    /// `ManagedIdentity` (the provider's own identity) or `WorkloadIdentity` (a ServiceAccount
    /// federated with Entra ID).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_type: Option<AzureAuthType>,
    /// The vault's URL, `https://<name>.vault.azure.net`.
    #[serde(default)]
    pub vault_url: String,
    /// The Entra ID tenant to authenticate in. Required for `ServicePrincipal`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<String>,
    /// The Azure cloud (`PublicCloud` by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment_type: Option<AzureEnvironmentType>,
    /// The service principal's credentials, or a workload identity's client and tenant IDs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_secret_ref: Option<AzureKvAuth>,
    /// The ServiceAccount whose token is exchanged at Entra ID (`WorkloadIdentity`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_ref: Option<ServiceAccountSelector>,
    /// The client ID of the managed identity to use when the provider has several.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity_id: Option<String>,
    /// Upstream's choice between its two Go SDKs. Keyward always uses Microsoft's SDK; the field
    /// is kept so upstream's manifests apply unchanged (`customCloudConfig` requires it, as
    /// upstream).
    #[serde(default, rename = "useAzureSDK", skip_serializing_if = "Option::is_none")]
    pub use_azure_sdk: Option<bool>,
    /// Endpoints of a cloud other than the standard ones (Azure Stack, Azure China's AKS OIDC
    /// issuer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_cloud_config: Option<AzureCustomCloudConfig>,
}

/// How the provider authenticates to the vault.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum AzureAuthType {
    /// A service principal: `tenantId`, and a client ID with a client secret or certificate from
    /// Secrets.
    #[default]
    ServicePrincipal,
    /// The provider's own managed identity (operator-owned configurations only).
    ManagedIdentity,
    /// A Kubernetes ServiceAccount token exchanged at Entra ID as a client assertion.
    WorkloadIdentity,
}

/// Endpoints of a non-standard cloud.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AzureCustomCloudConfig {
    /// Entra ID's (Azure AD's) authority host, where tokens are requested.
    #[serde(default)]
    pub active_directory_endpoint: String,
    /// The Key Vault service endpoint (informational: the vault is `vaultUrl`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_vault_endpoint: Option<String>,
    /// The DNS suffix of Key Vault URLs (informational).
    #[serde(default, rename = "keyVaultDNSSuffix", skip_serializing_if = "Option::is_none")]
    pub key_vault_dns_suffix: Option<String>,
    /// The Resource Manager endpoint (not used by the Key Vault provider).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_manager_endpoint: Option<String>,
}

/// Credentials from Secrets.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AzureKvAuth {
    /// The client ID of the service principal (or of the workload identity's application).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<SecretKeySelector>,
    /// The tenant ID of a workload identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<SecretKeySelector>,
    /// The service principal's client secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<SecretKeySelector>,
    /// The service principal's client certificate and private key, PEM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_certificate: Option<SecretKeySelector>,
}

/// The field of the client ID Secret.
pub const CLIENT_ID_FIELD: &str = "spec.authSecretRef.clientId";
/// The field of the tenant ID Secret.
pub const TENANT_ID_FIELD: &str = "spec.authSecretRef.tenantId";
/// The field of the client secret Secret.
pub const CLIENT_SECRET_FIELD: &str = "spec.authSecretRef.clientSecret";
/// The field of the client certificate Secret.
pub const CLIENT_CERTIFICATE_FIELD: &str = "spec.authSecretRef.clientCertificate";
/// The field of the ServiceAccount.
pub const SERVICE_ACCOUNT_FIELD: &str = "spec.serviceAccountRef";
/// What `ManagedIdentity` uses: the provider process's managed identity.
pub const OWN_MANAGED_IDENTITY: &str = "authType ManagedIdentity (the provider's own managed identity)";
/// What `WorkloadIdentity` without `serviceAccountRef` uses: the provider Pod's own federated
/// token (`AZURE_FEDERATED_TOKEN_FILE`).
pub const OWN_WORKLOAD_IDENTITY: &str =
    "authType WorkloadIdentity without serviceAccountRef (the provider Pod's own federated token)";

impl AzureKeyVaultSpec {
    /// The authentication type, upstream's default when unset.
    pub fn auth(&self) -> AzureAuthType {
        self.auth_type.unwrap_or_default()
    }

    /// The cloud, upstream's default when unset.
    pub fn environment(&self) -> AzureEnvironmentType {
        self.environment_type.unwrap_or_default()
    }
}

/// Whether `url` is an `https://` URL with a host (Azure's SDK sends bearer tokens over HTTPS
/// only).
pub fn check_https_url(url: &str) -> Result<(), String> {
    check_server_url(url, true)
}

/// The field errors of an `AzureKeyVault` configuration (or a store's `spec.provider.azurekv`),
/// with paths as in the configuration object.
pub fn validate_azure(spec: &AzureKeyVaultSpec) -> Result<(), ValidationErrors> {
    let mut errs = Vec::new();
    if spec.vault_url.is_empty() {
        errs.push(FieldError::new("spec.vaultUrl", "is required: https://<vault-name>.vault.azure.net"));
    } else if let Err(e) = check_https_url(&spec.vault_url) {
        errs.push(FieldError::new("spec.vaultUrl", format!("{:?} {e}", spec.vault_url)));
    }
    let auth = spec.auth_secret_ref.as_ref();
    for (field, sel) in [
        (CLIENT_ID_FIELD, auth.and_then(|a| a.client_id.as_ref())),
        (TENANT_ID_FIELD, auth.and_then(|a| a.tenant_id.as_ref())),
        (CLIENT_SECRET_FIELD, auth.and_then(|a| a.client_secret.as_ref())),
        (CLIENT_CERTIFICATE_FIELD, auth.and_then(|a| a.client_certificate.as_ref())),
    ] {
        if let Some(sel) = sel {
            check_key_selector(&mut errs, field, sel);
        }
    }
    match spec.auth() {
        // A missing tenantId or authSecretRef is admitted, as upstream's webhook admits it (its
        // documentation prints a store with only vaultUrl): the store check and every sync report
        // it (Ready=False) when the provider builds the credential.
        AzureAuthType::ServicePrincipal => match auth {
            None => {}
            Some(a) => {
                if a.client_id.is_none() {
                    errs.push(FieldError::new(CLIENT_ID_FIELD, "is required for authType ServicePrincipal"));
                }
                match (&a.client_secret, &a.client_certificate) {
                    (Some(_), Some(_)) => errs.push(FieldError::new(
                        "spec.authSecretRef",
                        "sets both clientSecret and clientCertificate: use one",
                    )),
                    (None, None) => errs.push(FieldError::new(
                        "spec.authSecretRef",
                        "needs clientSecret or clientCertificate for authType ServicePrincipal",
                    )),
                    _ => {}
                }
            }
        },
        AzureAuthType::WorkloadIdentity => {
            if spec.service_account_ref.as_ref().is_some_and(|sa| sa.name.is_empty()) {
                errs.push(FieldError::new("spec.serviceAccountRef.name", "is required"));
            }
            if auth.is_some_and(|a| a.client_id.is_none()) {
                // As upstream: an authSecretRef with a workload identity exists to give the client ID.
                errs.push(FieldError::new(CLIENT_ID_FIELD, "is required when authSecretRef is set"));
            }
        }
        AzureAuthType::ManagedIdentity => {}
    }
    match spec.environment() {
        AzureEnvironmentType::GermanCloud => errs.push(FieldError::new(
            "spec.environmentType",
            "GermanCloud (Microsoft Cloud Deutschland) was discontinued on October 29, 2021: use AzureStackCloud with \
             customCloudConfig or another cloud",
        )),
        AzureEnvironmentType::AzureStackCloud if spec.custom_cloud_config.is_none() => {
            errs.push(FieldError::new("spec.customCloudConfig", "is required when environmentType is AzureStackCloud"))
        }
        _ => {}
    }
    if let Some(custom) = &spec.custom_cloud_config {
        if spec.use_azure_sdk != Some(true) {
            errs.push(FieldError::new("spec.useAzureSDK", "must be true when customCloudConfig is set (as upstream)"));
        }
        if custom.active_directory_endpoint.is_empty() {
            errs.push(FieldError::new("spec.customCloudConfig.activeDirectoryEndpoint", "is required"));
        } else if let Err(e) = check_https_url(&custom.active_directory_endpoint) {
            errs.push(FieldError::new(
                "spec.customCloudConfig.activeDirectoryEndpoint",
                format!("{:?} {e}", custom.active_directory_endpoint),
            ));
        }
    }
    ValidationErrors(errs).into_result()
}

fn secret<'a>(field: &'a str, s: &'a SecretKeySelector) -> NamedObject<'a> {
    NamedObject { field, kind: NamedKind::Secret, name: &s.name, namespace: s.namespace.as_deref() }
}

/// What an `AzureKeyVault` configuration reaches: the Secrets of `authSecretRef`, the
/// ServiceAccount of a workload identity, and the provider's own identity for
/// `ManagedIdentity` and a `WorkloadIdentity` without `serviceAccountRef`.
pub fn azure_reach(spec: &AzureKeyVaultSpec) -> Reach<'_> {
    let mut named = Vec::new();
    let mut ambient = Vec::new();
    if let Some(a) = &spec.auth_secret_ref {
        named.extend(a.client_id.as_ref().map(|s| secret(CLIENT_ID_FIELD, s)));
        named.extend(a.tenant_id.as_ref().map(|s| secret(TENANT_ID_FIELD, s)));
        named.extend(a.client_secret.as_ref().map(|s| secret(CLIENT_SECRET_FIELD, s)));
        named.extend(a.client_certificate.as_ref().map(|s| secret(CLIENT_CERTIFICATE_FIELD, s)));
    }
    match spec.auth() {
        AzureAuthType::ManagedIdentity => ambient.push(Ambient { field: "spec.authType", what: OWN_MANAGED_IDENTITY }),
        AzureAuthType::WorkloadIdentity => match &spec.service_account_ref {
            Some(sa) => named.push(NamedObject {
                field: SERVICE_ACCOUNT_FIELD,
                kind: NamedKind::ServiceAccount,
                name: &sa.name,
                namespace: sa.namespace.as_deref(),
            }),
            None => ambient.push(Ambient { field: "spec.authType", what: OWN_WORKLOAD_IDENTITY }),
        },
        AzureAuthType::ServicePrincipal => {}
    }
    Reach { named, ambient, allow_remote_namespace_override: false }
}

impl keyward_crds::registry::ProviderSpec for AzureKeyVaultSpec {
    fn validate(&self) -> Result<(), ValidationErrors> {
        validate_azure(self)
    }

    fn reach(&self) -> Reach<'_> {
        azure_reach(self)
    }
}

/// The registry row of `AzureKeyVault`: served by `keyward-provider-azure`, and by it also the
/// SecretStores with `spec.provider.azurekv`.
pub static KIND: keyward_crds::registry::ProviderKind = keyward_crds::registry::ProviderKind {
    kind: "AzureKeyVault",
    plural: "azurekeyvaults",
    provider: "azure",
    stores: &[keyward_crds::registry::StoreBlock::spec("azurekv")],
    admit: keyward_crds::registry::admit_spec::<AzureKeyVaultSpec>,
    crd: <AzureKeyVault as kube::CustomResourceExt>::crd,
};

#[cfg(test)]
mod tests {
    use super::*;
    use keyward_crds::registry::ProviderSpec;
    use serde_json::json;

    fn spec(v: serde_json::Value) -> AzureKeyVaultSpec {
        serde_json::from_value(v).expect("upstream's block")
    }

    fn fields(spec: &AzureKeyVaultSpec) -> Vec<String> {
        match spec.validate() {
            Ok(()) => Vec::new(),
            Err(e) => e.0.into_iter().map(|f| f.field).collect(),
        }
    }

    /// The blocks of upstream's docs (release 2.9.0), as written.
    #[test]
    fn upstream_blocks_read_validate_and_round_trip() {
        let sp = json!({
            "tenantId": "2ed1d494-6c5a-4c5d-aa24-479446fb844d",
            "vaultUrl": "https://kvtestpushsecret.vault.azure.net",
            "authSecretRef": {
                "clientId": {"name": "azure-secret-sp", "key": "ClientID"},
                "clientSecret": {"name": "azure-secret-sp", "key": "ClientSecret"}
            }
        });
        let s = spec(sp.clone());
        assert_eq!(serde_json::to_value(&s).expect("json"), sp, "the same JSON names");
        assert_eq!(fields(&s), Vec::<String>::new());
        assert_eq!(s.auth(), AzureAuthType::ServicePrincipal);
        let named: Vec<_> = s.reach().named.iter().map(|n| n.field).collect();
        assert_eq!(named, [CLIENT_ID_FIELD, CLIENT_SECRET_FIELD]);

        let mi = spec(json!({"authType": "ManagedIdentity", "identityId": "00000000-0000-0000-0000-000000000000",
            "vaultUrl": "https://my-keyvault-name.vault.azure.net"}));
        assert_eq!(fields(&mi), Vec::<String>::new());
        assert_eq!(mi.reach().ambient.len(), 1, "the provider's own identity");

        let wi = spec(json!({"authType": "WorkloadIdentity", "vaultUrl": "https://xx-xxxx-xx.vault.azure.net",
            "serviceAccountRef": {"name": "workload-identity-sa"}}));
        assert_eq!(fields(&wi), Vec::<String>::new());
        let reach = wi.reach();
        assert!(reach.ambient.is_empty());
        assert_eq!(reach.named[0].kind, NamedKind::ServiceAccount);
        let mounted = spec(json!({"authType": "WorkloadIdentity", "vaultUrl": "https://xx-xxxx-xx.vault.azure.net"}));
        assert_eq!(mounted.reach().ambient[0].what, OWN_WORKLOAD_IDENTITY);

        let stack = spec(json!({
            "vaultUrl": "https://my-vault.vault.local.azurestack.external/",
            "environmentType": "AzureStackCloud", "useAzureSDK": true,
            "customCloudConfig": {"activeDirectoryEndpoint": "https://login.microsoftonline.com/",
                "keyVaultEndpoint": "https://vault.local.azurestack.external/",
                "resourceManagerEndpoint": "https://management.local.azurestack.external/"},
            "authType": "ServicePrincipal", "tenantId": "t",
            "authSecretRef": {"clientId": {"name": "azure-secret", "key": "client-id"},
                "clientSecret": {"name": "azure-secret", "key": "client-secret"}}
        }));
        assert_eq!(fields(&stack), Vec::<String>::new());
    }

    /// Upstream's Azure guide prints a store with only `vaultUrl` (ServicePrincipal without
    /// tenantId or authSecretRef); upstream's webhook admits it and its client refuses it later.
    #[test]
    fn a_service_principal_without_credentials_is_admitted_as_upstream() {
        let store = spec(json!({"vaultUrl": "https://xx-xxxx-xx.vault.azure.net"}));
        assert_eq!(fields(&store), Vec::<String>::new());
    }

    #[test]
    fn field_errors_name_the_fields() {
        assert_eq!(fields(&AzureKeyVaultSpec::default()), ["spec.vaultUrl"]);
        let both = spec(json!({"vaultUrl": "http://vault", "tenantId": "t", "authSecretRef": {
            "clientId": {"name": "a"}, "clientSecret": {"name": "a", "key": "s"},
            "clientCertificate": {"name": "a", "key": "c"}}}));
        assert_eq!(fields(&both), ["spec.vaultUrl", "spec.authSecretRef.clientId.key", "spec.authSecretRef"]);
        let clouds = spec(json!({"authType": "ManagedIdentity", "vaultUrl": "https://v.vault.azure.net",
            "environmentType": "GermanCloud", "customCloudConfig": {"activeDirectoryEndpoint": ""}}));
        assert_eq!(
            fields(&clouds),
            ["spec.environmentType", "spec.useAzureSDK", "spec.customCloudConfig.activeDirectoryEndpoint"]
        );
        let stack = spec(json!({"authType": "ManagedIdentity", "vaultUrl": "https://v.vault.azure.net",
            "environmentType": "AzureStackCloud"}));
        assert_eq!(fields(&stack), ["spec.customCloudConfig"]);
    }

    #[test]
    fn urls() {
        for ok in ["https://v.vault.azure.net", "https://v.vault.azure.net:8443/", "https://[::1]:4443"] {
            assert_eq!(check_https_url(ok), Ok(()), "{ok}");
        }
        for bad in ["http://v.vault.azure.net", "https://", "https://u:p@v/", "https://v/?x=1", "https://v w"] {
            assert!(check_https_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_crd_is_namespaced_in_the_provider_group() {
        let crd = (KIND.crd)();
        assert_eq!(crd.spec.group, "provider.external-secrets.io");
        assert_eq!(crd.spec.names.plural, "azurekeyvaults");
        assert_eq!(crd.spec.scope, "Namespaced");
        let schema = serde_json::to_string(&crd.spec.versions[0].schema).expect("schema");
        for field in ["vaultUrl", "useAzureSDK", "keyVaultDNSSuffix", "authSecretRef", "WorkloadIdentity"] {
            assert!(schema.contains(field), "{field}");
        }
    }
}
