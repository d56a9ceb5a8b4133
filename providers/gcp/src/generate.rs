//! The GCRAccessToken generator: an OAuth access token of the generator's Google identity, the
//! password of a Google Container Registry (or Artifact Registry) login, as upstream generates
//! it (release 2.9.0): `username` `oauth2accesstoken`, `password` the token, `expiry` its expiry
//! in Unix seconds.
//!
//! The generator's `auth` is a GCPSecretManager configuration's, so it is checked by the same
//! rule (`keyward_crds::rules::validate_gcr_access_token`), bounded by the same tenant boundary
//! (its Secrets, ConfigMap and ServiceAccounts are read in the generator's namespace; the
//! provider's own identity only for namespaces the operator lists) and resolved by the same code
//! ([`crate::identity`]), with the same field names in messages.

use keyward_crds::generators::GcrAccessTokenSpec;
use keyward_crds::rules::{gcp_auth_reach, validate_gcr_access_token};
use keyward_provider_runtime::refs::check_reach;
use keyward_provider_runtime::{ProviderError, RequestContext, SecretMap};

use crate::GcpProvider;
use crate::api::OWN_IDENTITY;

/// The generator kind.
pub const GCR_KIND: &str = "GCRAccessToken";
/// The user name of every Google registry token login.
pub const TOKEN_USERNAME: &str = "oauth2accesstoken";

/// Generates the values of a GCRAccessToken spec for `ctx` (the generator).
pub async fn generate(
    provider: &GcpProvider,
    ctx: &RequestContext,
    spec_json: &str,
) -> Result<SecretMap, ProviderError> {
    if ctx.kind != GCR_KIND {
        return Err(ProviderError::Unsupported(format!(
            "the GCP provider generates {GCR_KIND} values, not {}",
            ctx.kind
        )));
    }
    let what = format!("{GCR_KIND} {}/{}", ctx.source_namespace, ctx.name);
    let spec: GcrAccessTokenSpec =
        serde_json::from_str(spec_json).map_err(|e| ProviderError::InvalidArgument(format!("{what}: spec: {e}")))?;
    let errs = validate_gcr_access_token("spec", &spec);
    if !errs.is_empty() {
        let list: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
        return Err(ProviderError::BadConfig(format!("{what}: {}", list.join("; "))));
    }
    check_reach(ctx, &gcp_auth_reach(&spec.auth, OWN_IDENTITY))?;
    let token = provider.access_token(ctx, &spec.auth, &spec.project_id).await.map_err(|e| with_what(e, &what))?;
    let expiry = token.expires.duration_since(std::time::SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    Ok(SecretMap::from([
        ("username".to_string(), TOKEN_USERNAME.as_bytes().to_vec()),
        ("password".to_string(), token.value.into_bytes()),
        ("expiry".to_string(), expiry.to_string().into_bytes()),
    ]))
}

/// `e` with its message prefixed by the generator, unless it names it already.
fn with_what(e: ProviderError, what: &str) -> ProviderError {
    let status = tonic::Status::from(e);
    if status.message().starts_with(what) {
        return ProviderError::from(status);
    }
    ProviderError::from(tonic::Status::new(status.code(), format!("{what}: {}", status.message())))
}
