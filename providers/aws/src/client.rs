//! AWS clients built from a `SecretsManager` config object: credentials (static
//! keys from a Secret, a ServiceAccount token exchanged through STS, or the process's default
//! chain), then the role chain (`additionalRoles`, then `role`).

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_credential_types::Credentials;
use aws_credential_types::provider::SharedCredentialsProvider;
use aws_sdk_secretsmanager::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode};
use keyward_provider_runtime::body::limit_error;
use keyward_provider_runtime::refs::{ClusterRefs, NamedKind, named_namespace, require_operator_owned};
use keyward_provider_runtime::{ProviderError, RequestContext};

use crate::api::SecretsManagerSpec;

/// Annotation naming the role a ServiceAccount's web identity assumes (as EKS IRSA).
pub const ROLE_ARN_ANNOTATION: &str = "eks.amazonaws.com/role-arn";
/// Audience of ServiceAccount tokens exchanged with STS.
pub const STS_AUDIENCE: &str = "sts.amazonaws.com";
/// Lifetime of the ServiceAccount tokens requested for web identity.
const TOKEN_SECONDS: i64 = 3600;
const SESSION_NAME: &str = "keyward-provider-aws";

/// Maps an SDK error (Secrets Manager, Parameter Store, STS). `ResourceNotFoundException` and
/// Parameter Store's `ParameterNotFound` / `ParameterVersionNotFound` are the typed "no secret".
pub fn map_sdk_error<E, R>(e: SdkError<E, R>, what: &str) -> ProviderError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug + 'static,
{
    // An answer refused by the size or time cap (capped.rs) says so, whatever the SDK wrapped it in.
    if let Some(refused) = limit_error(&e) {
        return refused.to_provider_error(&format!("{what}: the AWS endpoint"));
    }
    let code = e.code().map(str::to_string);
    let msg = format!("{what}: {}", DisplayErrorContext(&e));
    match e {
        SdkError::ServiceError(_) => map_error_code(code.as_deref().unwrap_or_default(), msg),
        SdkError::ConstructionFailure(_) => ProviderError::BadConfig(msg),
        _ => ProviderError::Unavailable(msg),
    }
}

/// Maps a service error code (an SDK error's, or an entry of a batch answer's `Errors`) to the
/// provider error a single call refused with that code gives.
pub fn map_error_code(code: &str, msg: String) -> ProviderError {
    match code {
        "ResourceNotFoundException" | "ParameterNotFound" | "ParameterVersionNotFound" => ProviderError::NoSecret(msg),
        "AccessDeniedException" | "AccessDenied" => ProviderError::PermissionDenied(msg),
        "UnrecognizedClientException"
        | "InvalidClientTokenId"
        | "InvalidSignatureException"
        | "SignatureDoesNotMatch"
        | "ExpiredTokenException"
        | "ExpiredToken"
        | "InvalidIdentityToken" => ProviderError::Unauthenticated(msg),
        "InvalidParameterException"
        | "InvalidRequestException"
        | "ValidationException"
        | "InvalidKeyId"
        | "InvalidAllowedPatternException"
        | "InvalidFilterKey"
        | "InvalidFilterOption"
        | "InvalidFilterValue"
        | "InvalidNextToken"
        | "InvalidPolicyTypeException"
        | "InvalidPolicyAttributeException"
        | "IncompatiblePolicyException"
        | "PoliciesLimitExceededException"
        | "ParameterPatternMismatchException"
        | "ParameterLimitExceeded"
        | "ParameterMaxVersionLimitExceeded"
        | "HierarchyLevelLimitExceededException"
        | "HierarchyTypeMismatchException"
        | "UnsupportedParameterType"
        | "TooManyTagsError" => ProviderError::InvalidArgument(msg),
        // A concurrent writer (the parameter appeared since it was read) or a busy service:
        // the next attempt may succeed.
        "ThrottlingException"
        | "InternalServiceError"
        | "InternalServerError"
        | "LimitExceededException"
        | "TooManyUpdates"
        | "ParameterAlreadyExists" => ProviderError::Unavailable(msg),
        _ => ProviderError::Internal(msg),
    }
}

/// The shared SDK configuration: region, an HTTPS client on rustls with ring (the system's
/// roots) whose answers are size- and time-capped (`capped.rs`), endpoint overrides from the
/// standard `AWS_ENDPOINT_URL*` environment of the provider process (set by the operator, never
/// by a config object).
fn loader(region: &str) -> aws_config::ConfigLoader {
    let http = crate::capped::CappedClient::wrap(
        aws_smithy_http_client::Builder::new().tls_provider(tls::Provider::Rustls(CryptoMode::Ring)).build_https(),
    );
    aws_config::defaults(BehaviorVersion::latest()).region(Region::new(region.to_string())).http_client(http)
}

fn with_credentials(conf: &SdkConfig, creds: Credentials) -> SdkConfig {
    conf.to_builder().credentials_provider(SharedCredentialsProvider::new(creds)).build()
}

fn sts_credentials(c: Option<&aws_sdk_sts::types::Credentials>, what: &str) -> Result<Credentials, ProviderError> {
    let c = c.ok_or_else(|| ProviderError::Unavailable(format!("{what}: STS returned no credentials")))?;
    let expiry = std::time::SystemTime::try_from(*c.expiration()).ok();
    // The client holds these credentials as they are: it is built again before they expire.
    if let Some(at) = expiry {
        keyward_provider_runtime::refs::note_expiry(at);
    }
    Ok(Credentials::new(c.access_key_id(), c.secret_access_key(), Some(c.session_token().to_string()), expiry, "sts"))
}

/// Builds the SDK configuration `spec` describes for a request.
pub async fn build_config(
    refs: &ClusterRefs,
    ctx: &RequestContext,
    spec: &SecretsManagerSpec,
) -> Result<SdkConfig, ProviderError> {
    let auth = spec.auth.as_ref();
    let mut role_used = false;
    let mut conf = if let Some(s) = auth.and_then(|a| a.secret_ref.as_ref()) {
        let id = refs
            .selected_secret_text(ctx, "spec.auth.secretRef.accessKeyIDSecretRef", &s.access_key_id_secret_ref)
            .await?;
        let secret = refs
            .selected_secret_text(ctx, "spec.auth.secretRef.secretAccessKeySecretRef", &s.secret_access_key_secret_ref)
            .await?;
        let token = match &s.session_token_secret_ref {
            Some(t) => Some(refs.selected_secret_text(ctx, "spec.auth.secretRef.sessionTokenSecretRef", t).await?),
            None => None,
        };
        let creds = Credentials::new(id, secret, token, None, "keyward-secret-ref");
        loader(&spec.region).credentials_provider(creds).load().await
    } else if let Some(j) = auth.and_then(|a| a.jwt.as_ref()) {
        let field = "spec.auth.jwt.serviceAccountRef";
        let sa = &j.service_account_ref;
        let ns = named_namespace(ctx, field, NamedKind::ServiceAccount, &sa.name, sa.namespace.as_deref())?;
        let annotated = refs.service_account_annotation(ns, &sa.name, ROLE_ARN_ANNOTATION, field).await?;
        let role = match annotated.or_else(|| spec.role.clone()) {
            Some(r) => r,
            None => {
                return Err(ProviderError::BadConfig(format!(
                    "{field}: ServiceAccount {ns}/{} has no {ROLE_ARN_ANNOTATION} annotation and spec.role is unset: \
                     name the role the web identity assumes",
                    sa.name
                )));
            }
        };
        role_used = spec.role.as_deref() == Some(role.as_str());
        let audiences = if sa.audiences.is_empty() { vec![STS_AUDIENCE.to_string()] } else { sa.audiences.clone() };
        let token = refs.service_account_token(ns, &sa.name, &audiences, TOKEN_SECONDS, field).await?;
        let anonymous = loader(&spec.region).no_credentials().load().await;
        let sts = aws_sdk_sts::Client::new(&anonymous);
        let what = format!("AssumeRoleWithWebIdentity {role}");
        let out = sts
            .assume_role_with_web_identity()
            .role_arn(&role)
            .role_session_name(SESSION_NAME)
            .web_identity_token(token)
            .send()
            .await
            .map_err(|e| map_sdk_error(e, &what))?;
        let creds = sts_credentials(out.credentials(), &what)?;
        loader(&spec.region).credentials_provider(creds).load().await
    } else {
        require_operator_owned(ctx, "a SecretsManager config without spec.auth")?;
        loader(&spec.region).load().await
    };

    let chain = spec
        .additional_roles
        .iter()
        .map(|r| (r, false))
        .chain(spec.role.iter().filter(|_| !role_used).map(|r| (r, true)));
    for (role, last) in chain {
        let sts = aws_sdk_sts::Client::new(&conf);
        let what = format!("AssumeRole {role}");
        let mut req = sts.assume_role().role_arn(role).role_session_name(SESSION_NAME);
        if last {
            if let Some(id) = &spec.external_id {
                req = req.external_id(id);
            }
            for t in &spec.session_tags {
                let tag = aws_sdk_sts::types::Tag::builder()
                    .key(&t.key)
                    .value(&t.value)
                    .build()
                    .map_err(|e| ProviderError::BadConfig(format!("spec.sessionTags: {e}")))?;
                req = req.tags(tag);
            }
            for k in &spec.transitive_tag_keys {
                req = req.transitive_tag_keys(k);
            }
        }
        let out = req.send().await.map_err(|e| map_sdk_error(e, &what))?;
        conf = with_credentials(&conf, sts_credentials(out.credentials(), &what)?);
    }
    Ok(conf)
}
