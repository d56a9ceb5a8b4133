//! The identity a configuration authenticates with, as an Azure SDK `TokenCredential`, built as
//! upstream builds it (release 2.9.0):
//!
//! - `ServicePrincipal`: `tenantId` and the client ID from a Secret, with the client secret
//!   (`azure_identity::ClientSecretCredential`) or a client certificate: a PEM certificate and
//!   private key from a Secret, presented as a signed JWT client assertion
//!   (`ClientAssertionCredential` with [`CertificateAssertion`]; the SDK's own certificate
//!   credential needs OpenSSL, which the provider does not link);
//! - `WorkloadIdentity` with `serviceAccountRef`: a token of that ServiceAccount from the
//!   TokenRequest API (audience `api://AzureADTokenExchange`), exchanged at Entra ID as a client
//!   assertion; client and tenant IDs from `authSecretRef`, `tenantId` or the ServiceAccount's
//!   `azure.workload.identity/*` annotations. Without `serviceAccountRef` the provider Pod's own
//!   federated token (`AZURE_CLIENT_ID`, `AZURE_TENANT_ID`, `AZURE_FEDERATED_TOKEN_FILE`):
//!   operator-owned configurations only;
//! - `ManagedIdentity`: the SDK's `ManagedIdentityCredential` (IMDS, or the endpoint of
//!   `IDENTITY_ENDPOINT` / `IDENTITY_HEADER` in the provider's environment), `identityId` as the
//!   user-assigned client ID: operator-owned configurations only.
//!
//! Tokens are requested at the configuration's cloud: `customCloudConfig.activeDirectoryEndpoint`,
//! else the provider process's `AZURE_AUTHORITY_HOST` (the operator's setting), else the
//! `environmentType`'s Entra ID.

use std::sync::Arc;

use azure_core::cloud::{CloudConfiguration, CustomConfiguration};
use azure_core::credentials::{Secret, TokenCredential};
use azure_core::http::{ClientMethodOptions, ClientOptions, ExponentialRetryOptions, RetryOptions};
use azure_identity::{
    ClientAssertion, ClientAssertionCredential, ClientAssertionCredentialOptions, ClientSecretCredential,
    ClientSecretCredentialOptions, ManagedIdentityCredential, ManagedIdentityCredentialOptions, UserAssignedId,
};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use keyward_crds::rules::NamedKind;
use keyward_provider_runtime::refs::{ClusterRefs, named_namespace};
use keyward_provider_runtime::{ProviderError, RequestContext};
use ring::rand::SystemRandom;
use ring::signature::{RSA_PKCS1_SHA256, RsaKeyPair};

use crate::api::{
    AzureAuthType, AzureEnvironmentType, AzureKeyVaultSpec, CLIENT_CERTIFICATE_FIELD, CLIENT_ID_FIELD,
    CLIENT_SECRET_FIELD, SERVICE_ACCOUNT_FIELD, TENANT_ID_FIELD,
};

/// The audience of a ServiceAccount token exchanged at Entra ID.
pub const TOKEN_EXCHANGE_AUDIENCE: &str = "api://AzureADTokenExchange";
/// The ServiceAccount annotation with a workload identity's client ID.
pub const CLIENT_ID_ANNOTATION: &str = "azure.workload.identity/client-id";
/// The ServiceAccount annotation with a workload identity's tenant ID.
pub const TENANT_ID_ANNOTATION: &str = "azure.workload.identity/tenant-id";
/// The operator's override of the default Entra ID authority host.
pub const AUTHORITY_HOST_ENV: &str = "AZURE_AUTHORITY_HOST";
/// Lifetime of a requested ServiceAccount token (the TokenRequest API's minimum).
const SA_TOKEN_SECONDS: i64 = 600;

/// Entra ID's authority host for a configuration.
pub fn authority_host(spec: &AzureKeyVaultSpec, env_override: Option<&str>) -> String {
    if let Some(custom) = &spec.custom_cloud_config {
        return custom.active_directory_endpoint.trim_end_matches('/').to_string();
    }
    match (env_override.filter(|h| !h.is_empty()), spec.environment()) {
        (Some(host), _) => host.trim_end_matches('/').to_string(),
        (None, AzureEnvironmentType::USGovernmentCloud) => "https://login.microsoftonline.us".into(),
        (None, AzureEnvironmentType::ChinaCloud) => "https://login.chinacloudapi.cn".into(),
        (None, _) => "https://login.microsoftonline.com".into(),
    }
}

/// SDK client options: the provider's transport, the authority host, few and short retries (the
/// reconciler retries with its own backoff).
pub fn client_options(transport: &crate::transport::Transport, authority: &str) -> ClientOptions {
    let mut cloud = CustomConfiguration::default();
    cloud.authority_host = authority.to_string();
    ClientOptions {
        transport: Some(azure_core::http::Transport::new(Arc::new(transport.clone()))),
        cloud: Some(Arc::new(CloudConfiguration::Custom(cloud))),
        retry: RetryOptions::exponential(ExponentialRetryOptions {
            initial_delay: azure_core::time::Duration::milliseconds(200),
            max_retries: 2,
            max_total_elapsed: azure_core::time::Duration::seconds(10),
            max_delay: azure_core::time::Duration::seconds(2),
        }),
        ..Default::default()
    }
}

fn sdk_error(what: &str) -> impl Fn(azure_core::Error) -> ProviderError + '_ {
    move |e| ProviderError::BadConfig(format!("{what}: {e}"))
}

/// The credential of `spec`, read as the request's tenant boundary allows.
pub async fn credential(
    refs: &ClusterRefs,
    ctx: &RequestContext,
    spec: &AzureKeyVaultSpec,
    options: ClientOptions,
    authority: &str,
) -> Result<Arc<dyn TokenCredential>, ProviderError> {
    match spec.auth() {
        AzureAuthType::ServicePrincipal => service_principal(refs, ctx, spec, options, authority).await,
        AzureAuthType::WorkloadIdentity => workload_identity(refs, ctx, spec, options).await,
        AzureAuthType::ManagedIdentity => {
            let user_assigned_id = spec.identity_id.clone().filter(|s| !s.is_empty()).map(UserAssignedId::ClientId);
            let options = ManagedIdentityCredentialOptions { user_assigned_id, client_options: options };
            Ok(ManagedIdentityCredential::new(Some(options)).map_err(sdk_error("spec.authType ManagedIdentity"))?)
        }
    }
}

async fn service_principal(
    refs: &ClusterRefs,
    ctx: &RequestContext,
    spec: &AzureKeyVaultSpec,
    client_options: ClientOptions,
    authority: &str,
) -> Result<Arc<dyn TokenCredential>, ProviderError> {
    let missing = |f: &str| ProviderError::BadConfig(format!("{f}: is required for authType ServicePrincipal"));
    // Admitted without them, as upstream; refused here, when the credential is built.
    let tenant = spec.tenant_id.clone().filter(|t| !t.is_empty()).ok_or_else(|| missing("spec.tenantId"))?;
    let auth = spec.auth_secret_ref.as_ref().ok_or_else(|| missing("spec.authSecretRef"))?;
    let client_id = refs
        .selected_secret_text(ctx, CLIENT_ID_FIELD, auth.client_id.as_ref().ok_or_else(|| missing(CLIENT_ID_FIELD))?)
        .await?;
    if let Some(sel) = &auth.client_secret {
        let secret = refs.selected_secret_text(ctx, CLIENT_SECRET_FIELD, sel).await?;
        let options = ClientSecretCredentialOptions { client_options };
        return Ok(ClientSecretCredential::new(&tenant, client_id, Secret::new(secret), Some(options))
            .map_err(sdk_error("spec.authSecretRef"))?);
    }
    let sel = auth.client_certificate.as_ref().ok_or_else(|| missing("spec.authSecretRef.clientSecret"))?;
    let pem = refs.selected_secret_key(ctx, CLIENT_CERTIFICATE_FIELD, sel, "").await?;
    let audience = format!("{authority}/{tenant}/oauth2/v2.0/token");
    let assertion = CertificateAssertion::from_pem(&pem, client_id.clone(), audience)?;
    let options = ClientAssertionCredentialOptions { client_options };
    Ok(ClientAssertionCredential::new(tenant, client_id, assertion, Some(options))
        .map_err(sdk_error("spec.authSecretRef"))?)
}

/// One value from two sources, or an error naming both when they differ.
fn one_of(a: Option<String>, b: Option<String>, both: &str) -> Result<Option<String>, ProviderError> {
    match (a.filter(|s| !s.is_empty()), b.filter(|s| !s.is_empty())) {
        (Some(a), Some(b)) if a != b => Err(ProviderError::BadConfig(both.to_string())),
        (a, b) => Ok(a.or(b)),
    }
}

async fn workload_identity(
    refs: &ClusterRefs,
    ctx: &RequestContext,
    spec: &AzureKeyVaultSpec,
    client_options: ClientOptions,
) -> Result<Arc<dyn TokenCredential>, ProviderError> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let Some(sa) = &spec.service_account_ref else {
        // The provider Pod's own federated token; check_reach refused this for a tenant already.
        let (Some(client), Some(file)) = (env("AZURE_CLIENT_ID"), env("AZURE_FEDERATED_TOKEN_FILE")) else {
            return Err(ProviderError::BadConfig(
                "spec.authType WorkloadIdentity without serviceAccountRef: the provider process has no \
                 AZURE_CLIENT_ID and AZURE_FEDERATED_TOKEN_FILE"
                    .into(),
            ));
        };
        let tenant = spec.tenant_id.clone().or_else(|| env("AZURE_TENANT_ID")).unwrap_or_default();
        let options = ClientAssertionCredentialOptions { client_options };
        return Ok(ClientAssertionCredential::new(tenant, client, FileAssertion(file), Some(options))
            .map_err(sdk_error("spec.authType WorkloadIdentity"))?);
    };
    let ns = named_namespace(ctx, SERVICE_ACCOUNT_FIELD, NamedKind::ServiceAccount, &sa.name, sa.namespace.as_deref())?
        .to_string();
    let annotation = |a| refs.service_account_annotation(&ns, &sa.name, a, SERVICE_ACCOUNT_FIELD);
    let auth = spec.auth_secret_ref.as_ref();
    let secret_client = match auth.and_then(|a| a.client_id.as_ref()) {
        Some(sel) => Some(refs.selected_secret_text(ctx, CLIENT_ID_FIELD, sel).await?),
        None => None,
    };
    let client_id = one_of(
        secret_client,
        annotation(CLIENT_ID_ANNOTATION).await?,
        "different client IDs: spec.authSecretRef.clientId and the ServiceAccount's azure.workload.identity/client-id \
         annotation; keep one",
    )?
    .ok_or_else(|| {
        ProviderError::BadConfig(format!(
            "{SERVICE_ACCOUNT_FIELD}: no client ID: set spec.authSecretRef.clientId or the ServiceAccount annotation \
             {CLIENT_ID_ANNOTATION}"
        ))
    })?;
    let secret_tenant = match auth.and_then(|a| a.tenant_id.as_ref()) {
        Some(sel) => Some(refs.selected_secret_text(ctx, TENANT_ID_FIELD, sel).await?),
        None => None,
    };
    let configured = secret_tenant.or_else(|| spec.tenant_id.clone()).filter(|t| !t.is_empty());
    let tenant = one_of(
        configured,
        annotation(TENANT_ID_ANNOTATION).await?,
        "different tenant IDs: spec.tenantId or spec.authSecretRef.tenantId, and the ServiceAccount's \
         azure.workload.identity/tenant-id annotation; keep one",
    )?
    .or_else(|| env("AZURE_TENANT_ID"))
    .ok_or_else(|| ProviderError::BadConfig("no tenant ID: set spec.tenantId".into()))?;
    let mut audiences = vec![TOKEN_EXCHANGE_AUDIENCE.to_string()];
    audiences.extend(sa.audiences.iter().cloned());
    let assertion = ServiceAccountAssertion { refs: refs.clone(), namespace: ns, name: sa.name.clone(), audiences };
    let options = ClientAssertionCredentialOptions { client_options };
    Ok(ClientAssertionCredential::new(tenant, client_id, assertion, Some(options))
        .map_err(sdk_error("spec.authType WorkloadIdentity"))?)
}

fn assertion_error(e: ProviderError) -> azure_core::Error {
    let message = e.to_string();
    azure_core::Error::with_error(azure_core::error::ErrorKind::Credential, e, message)
}

/// A ServiceAccount token from the TokenRequest API, asked for each time Entra ID is asked for a
/// token (the SDK keeps the access token until shortly before it expires).
struct ServiceAccountAssertion {
    refs: ClusterRefs,
    namespace: String,
    name: String,
    audiences: Vec<String>,
}

impl std::fmt::Debug for ServiceAccountAssertion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ServiceAccount {}/{}", self.namespace, self.name)
    }
}

#[async_trait::async_trait]
impl ClientAssertion for ServiceAccountAssertion {
    async fn secret(&self, _: Option<ClientMethodOptions<'_>>) -> azure_core::Result<String> {
        self.refs
            .service_account_token(
                &self.namespace,
                &self.name,
                &self.audiences,
                SA_TOKEN_SECONDS,
                SERVICE_ACCOUNT_FIELD,
            )
            .await
            .map_err(assertion_error)
    }
}

/// The provider Pod's own projected token, read from its file each time.
#[derive(Debug)]
struct FileAssertion(String);

#[async_trait::async_trait]
impl ClientAssertion for FileAssertion {
    async fn secret(&self, _: Option<ClientMethodOptions<'_>>) -> azure_core::Result<String> {
        let text = tokio::fs::read_to_string(&self.0).await.map_err(|e| {
            assertion_error(ProviderError::BadConfig(format!("reading AZURE_FEDERATED_TOKEN_FILE {}: {e}", self.0)))
        })?;
        Ok(text.trim().to_string())
    }
}

/// A client assertion signed with a service principal's certificate key (RS256, `x5t` the
/// certificate's SHA-1 thumbprint), as Entra ID's certificate credentials require.
pub struct CertificateAssertion {
    key: RsaKeyPair,
    thumbprint: String,
    client_id: String,
    audience: String,
}

impl std::fmt::Debug for CertificateAssertion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertificateAssertion").field("x5t", &self.thumbprint).finish_non_exhaustive()
    }
}

impl CertificateAssertion {
    /// From a PEM holding the certificate and its RSA private key (PKCS#8 or PKCS#1).
    ///
    /// # Errors
    /// `FAILED_PRECONDITION` naming the field when either is missing or unusable.
    pub fn from_pem(pem: &[u8], client_id: String, audience: String) -> Result<Self, ProviderError> {
        let bad = |m: &str| ProviderError::BadConfig(format!("{CLIENT_CERTIFICATE_FIELD}: {m}"));
        let (mut cert, mut key) = (None, None);
        for item in rustls_pemfile::read_all(&mut &pem[..]) {
            match item.map_err(|_| bad("is not PEM"))? {
                rustls_pemfile::Item::X509Certificate(c) if cert.is_none() => cert = Some(c.to_vec()),
                rustls_pemfile::Item::Pkcs8Key(k) => {
                    key = Some(RsaKeyPair::from_pkcs8(k.secret_pkcs8_der()).map_err(|e| bad(&format!("{e}")))?)
                }
                rustls_pemfile::Item::Pkcs1Key(k) => {
                    key = Some(RsaKeyPair::from_der(k.secret_pkcs1_der()).map_err(|e| bad(&format!("{e}")))?)
                }
                _ => {}
            }
        }
        let cert = cert.ok_or_else(|| bad("holds no CERTIFICATE"))?;
        let key = key.ok_or_else(|| bad("holds no RSA PRIVATE KEY or PRIVATE KEY"))?;
        let sha1 = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, &cert);
        Ok(CertificateAssertion { key, thumbprint: URL_SAFE_NO_PAD.encode(sha1.as_ref()), client_id, audience })
    }

    /// A signed assertion valid for ten minutes from `now` (seconds since the epoch).
    pub fn sign(&self, now: u64) -> Result<String, ProviderError> {
        let header = serde_json::json!({"alg": "RS256", "typ": "JWT", "x5t": self.thumbprint});
        let mut jti = [0u8; 16];
        ring::rand::SecureRandom::fill(&SystemRandom::new(), &mut jti)
            .map_err(|_| ProviderError::Internal("no randomness".into()))?;
        let claims = serde_json::json!({
            "aud": self.audience, "iss": self.client_id, "sub": self.client_id,
            "jti": hex::encode(jti), "nbf": now, "iat": now, "exp": now + 600,
        });
        let signing_input =
            format!("{}.{}", URL_SAFE_NO_PAD.encode(header.to_string()), URL_SAFE_NO_PAD.encode(claims.to_string()));
        let mut signature = vec![0u8; self.key.public().modulus_len()];
        self.key
            .sign(&RSA_PKCS1_SHA256, &SystemRandom::new(), signing_input.as_bytes(), &mut signature)
            .map_err(|_| ProviderError::Internal("signing the client assertion failed".into()))?;
        Ok(format!("{signing_input}.{}", URL_SAFE_NO_PAD.encode(signature)))
    }
}

#[async_trait::async_trait]
impl ClientAssertion for CertificateAssertion {
    async fn secret(&self, _: Option<ClientMethodOptions<'_>>) -> azure_core::Result<String> {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        self.sign(now).map_err(assertion_error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(v: serde_json::Value) -> AzureKeyVaultSpec {
        serde_json::from_value(v).expect("spec")
    }

    #[test]
    fn authority_hosts() {
        let public = spec(serde_json::json!({"vaultUrl": "https://v.vault.azure.net"}));
        assert_eq!(authority_host(&public, None), "https://login.microsoftonline.com");
        assert_eq!(authority_host(&public, Some("https://127.0.0.1:9/")), "https://127.0.0.1:9");
        let china = spec(serde_json::json!({"vaultUrl": "https://v", "environmentType": "ChinaCloud"}));
        assert_eq!(authority_host(&china, None), "https://login.chinacloudapi.cn");
        let custom = spec(serde_json::json!({"vaultUrl": "https://v", "useAzureSDK": true,
            "customCloudConfig": {"activeDirectoryEndpoint": "https://login.partner.microsoftonline.cn/"}}));
        assert_eq!(authority_host(&custom, Some("https://ignored")), "https://login.partner.microsoftonline.cn");
    }

    #[test]
    fn one_source_of_an_id() {
        assert_eq!(one_of(Some("a".into()), None, "both").expect("one"), Some("a".into()));
        assert_eq!(one_of(Some(String::new()), Some("b".into()), "both").expect("one"), Some("b".into()));
        assert!(one_of(Some("a".into()), Some("b".into()), "both").is_err());
        assert_eq!(one_of(Some("a".into()), Some("a".into()), "both").expect("the same"), Some("a".into()));
    }

    #[test]
    fn a_certificate_assertion_is_a_signed_jwt_naming_the_certificate() {
        let key = rcgen::KeyPair::from_pem(&keyward_e2e::stores::azure::rsa_key_pem()).expect("RSA key");
        let cert = rcgen::CertificateParams::new(vec!["sp".into()]).expect("params").self_signed(&key).expect("cert");
        let pem = format!("{}{}", cert.pem(), key.serialize_pem());
        let a =
            CertificateAssertion::from_pem(pem.as_bytes(), "client".into(), "https://login/t/oauth2/v2.0/token".into())
                .expect("assertion");
        let jwt = a.sign(1_000).expect("signed");
        let parts: Vec<&str> = jwt.split('.').collect();
        assert_eq!(parts.len(), 3);
        let header: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[0]).expect("b64")).expect("json");
        let sha1 = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, cert.der());
        assert_eq!(header["x5t"], URL_SAFE_NO_PAD.encode(sha1.as_ref()));
        let claims: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).expect("b64")).expect("json");
        assert_eq!((claims["iss"].as_str(), claims["exp"].as_u64()), (Some("client"), Some(1_600)));
        assert!(CertificateAssertion::from_pem(cert.pem().as_bytes(), "c".into(), "a".into()).is_err(), "no key");
    }
}
