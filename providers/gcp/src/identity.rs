//! The Google identity of a configuration's (or a GCRAccessToken's) `auth`, resolved by
//! `keyward_gcp_identity` (shared with the Vault provider's GCP login), as Secret Manager
//! client credentials ([`GcpProvider::credentials`]) or as an access token
//! ([`GcpProvider::access_token`]). The provider's own identity is Google's auth crate's
//! Application Default Credentials, where the tenant boundary allowed it.

use google_cloud_auth::credentials::Credentials;
use keyward_crds::gcp::GCPSMAuth;
use keyward_gcp_identity::{Fields, Identity, Resolver};
use keyward_provider_runtime::{ProviderError, RequestContext, client_cache};

use crate::GcpProvider;
use crate::api::{KEY_FIELD, OWN_IDENTITY};
use crate::auth::{self, BearerToken, Token};

impl GcpProvider {
    fn resolver(&self) -> Resolver<'_> {
        Resolver { refs: &self.refs, exchange: &self.exchange, fields: Fields::gcpsm(OWN_IDENTITY) }
    }

    /// Credentials of `auth` for Google's client.
    pub(crate) async fn credentials(
        &self,
        ctx: &RequestContext,
        auth: &GCPSMAuth,
        project: &str,
    ) -> Result<Credentials, ProviderError> {
        match self.resolver().identity(ctx, auth, project).await? {
            Identity::Key(json) => auth::service_account(&json, KEY_FIELD),
            Identity::Token(token) => {
                client_cache::note_expiry(token.expires);
                BearerToken::credentials(&token.value)
            }
            Identity::Own => auth::own_identity(),
        }
    }

    /// An access token of `auth`: a key's through the OAuth token endpoint, an exchange's as
    /// it is, the provider's own through its credentials.
    pub(crate) async fn access_token(
        &self,
        ctx: &RequestContext,
        auth: &GCPSMAuth,
        project: &str,
    ) -> Result<Token, ProviderError> {
        match self.resolver().access_token(ctx, auth, project).await? {
            Some(token) => Ok(token),
            None => auth::own_token().await,
        }
    }
}
