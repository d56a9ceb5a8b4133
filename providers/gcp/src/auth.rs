//! Google credentials for Google's Secret Manager client: a service-account key through
//! Google's auth crate (it signs a self-signed JWT for every token; no token endpoint is
//! called), a token of an exchange as a bearer token, or the provider's own Application Default
//! Credentials (operator configurations only). Which credentials a configuration names, the
//! exchanges behind them and where Google's endpoints are is `keyward_gcp_identity`'s, shared
//! with the Vault provider; it is re-exported here.

use std::time::{Duration, SystemTime};

use google_cloud_auth::credentials::{CacheableResource, Credentials, CredentialsProvider, EntityTag};
use http::{Extensions, HeaderMap, HeaderValue};
use keyward_provider_runtime::ProviderError;

pub use keyward_gcp_identity::exchange::*;

/// A bearer token obtained by an exchange, handed to Google's client as it is. The client that
/// holds it is built again before it expires (the runtime's client cache notes the expiry).
#[derive(Debug)]
pub struct BearerToken(HeaderMap);

impl BearerToken {
    /// Credentials sending `token`.
    ///
    /// # Errors
    /// When the token cannot be a header value.
    pub fn credentials(token: &str) -> Result<Credentials, ProviderError> {
        let mut value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
            ProviderError::Unavailable("the token service answered a token that is no header value".into())
        })?;
        value.set_sensitive(true);
        let mut headers = HeaderMap::new();
        headers.insert(http::header::AUTHORIZATION, value);
        Ok(Credentials::from(BearerToken(headers)))
    }
}

impl CredentialsProvider for BearerToken {
    async fn headers(
        &self,
        _: Extensions,
    ) -> Result<CacheableResource<HeaderMap>, google_cloud_auth::errors::CredentialsError> {
        Ok(CacheableResource::New { entity_tag: EntityTag::new(), data: self.0.clone() })
    }

    async fn universe_domain(&self) -> Option<String> {
        Some("googleapis.com".into())
    }
}

/// Credentials from a service-account key file (JSON). Only `"type": "service_account"` keys
/// are taken; the key's `token_uri` is not used (the auth crate signs its own tokens).
///
/// # Errors
/// `FAILED_PRECONDITION` naming `field` when the key is not a usable service-account key.
pub fn service_account(key: &[u8], field: &str) -> Result<Credentials, ProviderError> {
    let json = checked_key(key, field)?;
    use google_cloud_auth::credentials::service_account::{AccessSpecifier, Builder};
    Builder::new(json)
        .with_access_specifier(AccessSpecifier::from_scopes([CLOUD_PLATFORM]))
        .build()
        .map_err(|e| ProviderError::BadConfig(format!("{field}: the key cannot sign tokens: {e}")))
}

/// The provider's own Application Default Credentials.
///
/// # Errors
/// `FAILED_PRECONDITION` when the process has none.
pub fn own_identity() -> Result<Credentials, ProviderError> {
    google_cloud_auth::credentials::Builder::default().with_scopes([CLOUD_PLATFORM]).build().map_err(|e| {
        ProviderError::BadConfig(format!(
            "spec.auth is empty and the provider has no Google credentials of its own: {e}"
        ))
    })
}

/// An access token of the provider's own Application Default Credentials. Google's auth crate
/// does not say when the token it hands out expires, only that it renews it minutes before:
/// [`OWN_TOKEN_LEAST_LIFETIME`] is the expiry reported.
///
/// # Errors
/// `FAILED_PRECONDITION` when the process has none; `UNAVAILABLE` when no token is given.
pub async fn own_token() -> Result<Token, ProviderError> {
    let creds = google_cloud_auth::credentials::Builder::default()
        .with_scopes([CLOUD_PLATFORM])
        .build_access_token_credentials()
        .map_err(|e| {
            ProviderError::BadConfig(format!(
                "spec.auth is empty and the provider has no Google credentials of its own: {e}"
            ))
        })?;
    let token = creds
        .access_token()
        .await
        .map_err(|e| ProviderError::Unavailable(format!("the provider's own Google credentials gave no token: {e}")))?;
    Ok(Token { value: token.token, expires: SystemTime::now() + OWN_TOKEN_LEAST_LIFETIME })
}

/// The least lifetime left on a token of the provider's own identity.
pub const OWN_TOKEN_LEAST_LIFETIME: Duration = Duration::from_secs(60);
