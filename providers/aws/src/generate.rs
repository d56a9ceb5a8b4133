//! The ECRAuthorizationToken and STSSessionToken generators: one call to Amazon ECR
//! (`GetAuthorizationToken`) or AWS STS (`GetSessionToken`), its answer returned as the
//! generated values under upstream's keys.
//!
//! A generator's `region`, `role` and `auth` are a SecretStore's `spec.provider.aws` of the
//! generator's namespace, and are reached exactly as one: the same validation, the same tenant
//! boundary (every Secret and ServiceAccount it names is read in that namespace; without
//! `auth`, the provider's own credentials are refused), the same credentials and role chain
//! ([`build_config`]) and the same capped, counted HTTP client. Nothing is requested before
//! the boundary is checked.
//!
//! The clients are cached as a store's are ([`ClientCache`]): per generator (kind, namespace,
//! name) and the content of its `region`, `role` and `auth` standing in for the generation a
//! request does not carry, so two generators, or two versions of one, never share a client,
//! and the generations of one generator read its credentials (and assume its role) once per
//! client, not once each.

use aws_sdk_secretsmanager::error::{ProvideErrorMetadata, SdkError};
use keyward_crds::generators::{EcrAuthorizationTokenSpec, StsSessionTokenSpec};
use std::hash::{Hash, Hasher};

use keyward_provider_runtime::refs::{CacheKey, check_reach};
use keyward_provider_runtime::{ProviderError, RequestContext, SecretMap};

use crate::SecretsManagerProvider;
use crate::api::{AwsAuth, SecretsManagerSpec, secrets_manager_reach, validate_secrets_manager};
use crate::client::{build_config, map_sdk_error};

/// The generator kind of Amazon ECR registry logins.
pub const ECR_KIND: &str = "ECRAuthorizationToken";
/// The generator kind of STS session tokens.
pub const STS_KIND: &str = "STSSessionToken";

/// Session durations STS accepts for GetSessionToken, in seconds.
const SESSION_DURATIONS: std::ops::RangeInclusive<i32> = 900..=129_600;

/// Generates the values of an ECRAuthorizationToken or STSSessionToken spec for `ctx` (the
/// generator, reached as a SecretStore of its namespace).
pub async fn generate(
    provider: &SecretsManagerProvider,
    ctx: &RequestContext,
    spec_json: &str,
) -> Result<SecretMap, ProviderError> {
    let what = format!("{} {}/{}", ctx.kind, ctx.source_namespace, ctx.name);
    let parse_error = |e: serde_json::Error| ProviderError::InvalidArgument(format!("{what}: spec: {e}"));
    match ctx.kind.as_str() {
        ECR_KIND => {
            let spec: EcrAuthorizationTokenSpec = serde_json::from_str(spec_json).map_err(parse_error)?;
            ecr(provider, ctx, &spec, &what).await
        }
        STS_KIND => {
            let spec: StsSessionTokenSpec = serde_json::from_str(spec_json).map_err(parse_error)?;
            sts(provider, ctx, &spec, &what).await
        }
        other => Err(ProviderError::Unsupported(format!(
            "the AWS provider generates {ECR_KIND} and {STS_KIND} values, not {other}"
        ))),
    }
}

async fn ecr(
    provider: &SecretsManagerProvider,
    ctx: &RequestContext,
    spec: &EcrAuthorizationTokenSpec,
    what: &str,
) -> Result<SecretMap, ProviderError> {
    // As upstream: "public" is ECR Public, any other scope (or none) the private registry.
    if spec.scope.as_deref() == Some("public") {
        return Err(ProviderError::BadConfig(format!(
            "{what}: spec.scope \"public\" (Amazon ECR Public) is not served by Keyward; leave scope out for a \
             private registry"
        )));
    }
    let config = store_config(&spec.region, spec.role.as_deref(), spec.auth.as_ref());
    let target = target(provider, ctx, &config, what).await?;
    let call = format!("{what}: GetAuthorizationToken");
    let out = target.ecr.get_authorization_token().send().await.map_err(|e| target.fail(provider, e, &call))?;
    let [data] = out.authorization_data() else {
        return Err(ProviderError::Internal(format!(
            "{call}: expected one authorization token, ECR answered {}",
            out.authorization_data().len()
        )));
    };
    let missing = |field: &str| ProviderError::Internal(format!("{call}: the answer has no {field}"));
    let token = data.authorization_token().ok_or_else(|| missing("authorizationToken"))?;
    let endpoint = data.proxy_endpoint().ok_or_else(|| missing("proxyEndpoint"))?;
    let expires = data.expires_at().ok_or_else(|| missing("expiresAt"))?;
    ecr_values(token, endpoint, expires.secs()).map_err(|m| ProviderError::Internal(format!("{call}: {m}")))
}

async fn sts(
    provider: &SecretsManagerProvider,
    ctx: &RequestContext,
    spec: &StsSessionTokenSpec,
    what: &str,
) -> Result<SecretMap, ProviderError> {
    if spec.auth.as_ref().is_some_and(|a| a.jwt.is_some()) {
        return Err(ProviderError::BadConfig(format!(
            "{what}: spec.auth.jwt: web identity credentials cannot ask STS for a session token; use \
             spec.auth.secretRef"
        )));
    }
    let params = spec.request_parameters.clone().unwrap_or_default();
    if let Some(d) = params.session_duration.filter(|d| !SESSION_DURATIONS.contains(d)) {
        return Err(ProviderError::InvalidArgument(format!(
            "{what}: spec.requestParameters.sessionDuration {d} is not between {} and {} seconds",
            SESSION_DURATIONS.start(),
            SESSION_DURATIONS.end()
        )));
    }
    let config = store_config(&spec.region, spec.role.as_deref(), spec.auth.as_ref());
    let target = target(provider, ctx, &config, what).await?;
    let call = format!("{what}: GetSessionToken");
    let out = target
        .sts
        .get_session_token()
        .set_duration_seconds(params.session_duration)
        .set_serial_number(params.serial_number.filter(|s| !s.is_empty()))
        .set_token_code(params.token_code.filter(|s| !s.is_empty()))
        .send()
        .await
        .map_err(|e| target.fail(provider, e, &call))?;
    let c =
        out.credentials().ok_or_else(|| ProviderError::Internal(format!("{call}: the answer has no credentials")))?;
    Ok(sts_values(c.access_key_id(), c.secret_access_key(), c.session_token(), c.expiration().secs()))
}

/// The SecretStore `spec.provider.aws` block a generator's fields stand for. An `auth` with
/// no method set is no `auth` (upstream writes `auth: {}` for "unset").
fn store_config(region: &str, role: Option<&str>, auth: Option<&AwsAuth>) -> SecretsManagerSpec {
    SecretsManagerSpec {
        region: region.to_string(),
        role: role.filter(|r| !r.is_empty()).map(str::to_string),
        auth: auth.filter(|a| a.secret_ref.is_some() || a.jwt.is_some()).cloned(),
        ..Default::default()
    }
}

/// A generator's cached clients: both services', built from one SDK configuration (one
/// credentials read, one role assumed).
#[derive(Clone)]
pub(crate) struct GeneratorTarget {
    ecr: aws_sdk_ecr::Client,
    sts: aws_sdk_sts::Client,
    key: CacheKey,
}

impl GeneratorTarget {
    /// An SDK error of `call`, mapped; refused credentials evict the cached clients so the next
    /// generation reads them again.
    fn fail<E, R>(&self, provider: &SecretsManagerProvider, e: SdkError<E, R>, call: &str) -> ProviderError
    where
        E: ProvideErrorMetadata + std::error::Error + 'static,
        R: std::fmt::Debug + 'static,
    {
        provider.generators.evict_if_refused(&self.key, map_sdk_error(e, call))
    }
}

/// The cached clients of a generator's credentials, checked as a SecretStore's: its rules,
/// then the tenant boundary, before anything is read or requested. Built on the first
/// generation, and again when what they were built from changes, as a store's.
async fn target(
    provider: &SecretsManagerProvider,
    ctx: &RequestContext,
    config: &SecretsManagerSpec,
    what: &str,
) -> Result<GeneratorTarget, ProviderError> {
    validate_secrets_manager(config).map_err(|e| ProviderError::BadConfig(format!("{what}: {e}")))?;
    check_reach(ctx, &secrets_manager_reach(config))?;
    let key = cache_key(ctx, config);
    provider
        .generators
        .get_or_build(&key, async {
            let sdk = build_config(&provider.refs, ctx, config).await?;
            tracing::info!(generator = %what, region = %config.region, "built AWS clients for a generator");
            Ok(GeneratorTarget {
                ecr: aws_sdk_ecr::Client::new(&sdk),
                sts: aws_sdk_sts::Client::new(&sdk),
                key: key.clone(),
            })
        })
        .await
}

/// The cache key of a generator's clients: the generator (kind, namespace, name, as a store's
/// key has them) at a generation standing for the content of its `region`, `role` and `auth`
/// (a request carries no `metadata.generation`), so an edited generator builds new clients.
fn cache_key(ctx: &RequestContext, config: &SecretsManagerSpec) -> CacheKey {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    serde_json::to_string(config).unwrap_or_default().hash(&mut h);
    CacheKey::of(ctx, Some(h.finish() as i64))
}

/// An ECR answer under upstream's keys: the token is base64 of `user:password`.
fn ecr_values(token: &str, proxy_endpoint: &str, expires_at: i64) -> Result<SecretMap, String> {
    use base64::Engine as _;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(token.trim())
        .map_err(|e| format!("the authorization token is not base64: {e}"))?;
    let decoded = String::from_utf8(decoded).map_err(|_| "the authorization token is not UTF-8".to_string())?;
    let (user, password) = decoded
        .split_once(':')
        .filter(|(_, p)| !p.contains(':'))
        .ok_or_else(|| "the authorization token is not of the form user:password".to_string())?;
    Ok(SecretMap::from([
        ("username".to_string(), user.as_bytes().to_vec()),
        ("password".to_string(), password.as_bytes().to_vec()),
        ("proxy_endpoint".to_string(), proxy_endpoint.as_bytes().to_vec()),
        ("expires_at".to_string(), expires_at.to_string().into_bytes()),
    ]))
}

/// STS session credentials under upstream's keys; `expiration` in Unix seconds.
fn sts_values(access_key_id: &str, secret_access_key: &str, session_token: &str, expiration: i64) -> SecretMap {
    SecretMap::from([
        ("access_key_id".to_string(), access_key_id.as_bytes().to_vec()),
        ("secret_access_key".to_string(), secret_access_key.as_bytes().to_vec()),
        ("session_token".to_string(), session_token.as_bytes().to_vec()),
        ("expiration".to_string(), expiration.to_string().into_bytes()),
    ])
}

#[cfg(test)]
mod tests {
    use base64::Engine as _;

    use super::*;

    fn text(values: &SecretMap, key: &str) -> String {
        String::from_utf8(values[key].clone()).unwrap_or_default()
    }

    #[test]
    fn an_ecr_token_is_split_into_user_and_password() {
        let token = base64::engine::general_purpose::STANDARD.encode("AWS:c2VjcmV0LXBhc3N3b3Jk");
        let values = ecr_values(&token, "https://123456789012.dkr.ecr.eu-west-1.amazonaws.com", 1_700_000_000)
            .unwrap_or_default();
        let mut keys: Vec<&str> = values.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(keys, ["expires_at", "password", "proxy_endpoint", "username"]);
        assert_eq!(text(&values, "username"), "AWS");
        assert_eq!(text(&values, "password"), "c2VjcmV0LXBhc3N3b3Jk");
        assert_eq!(text(&values, "proxy_endpoint"), "https://123456789012.dkr.ecr.eu-west-1.amazonaws.com");
        assert_eq!(text(&values, "expires_at"), "1700000000");
    }

    #[test]
    fn malformed_ecr_tokens_are_refused() {
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        assert!(ecr_values("not base64!", "e", 0).unwrap_err().contains("not base64"));
        assert!(ecr_values(&b64("no-colon"), "e", 0).unwrap_err().contains("user:password"));
        assert!(ecr_values(&b64("a:b:c"), "e", 0).unwrap_err().contains("user:password"));
    }

    #[test]
    fn session_credentials_use_upstreams_keys() {
        let values = sts_values("ASIAEXAMPLE", "secret", "token", 1_700_000_900);
        assert_eq!(text(&values, "access_key_id"), "ASIAEXAMPLE");
        assert_eq!(text(&values, "secret_access_key"), "secret");
        assert_eq!(text(&values, "session_token"), "token");
        assert_eq!(text(&values, "expiration"), "1700000900");
        assert_eq!(values.len(), 4);
    }

    #[test]
    fn cache_keys_never_join_two_generators_or_two_versions_of_one() {
        use keyward_provider_runtime::StoreRefKind;
        let ctx = |kind: &str, ns: &str, name: &str| RequestContext {
            api_version: keyward_crds::generators::GENERATOR_API_VERSION.to_string(),
            kind: kind.into(),
            name: name.into(),
            namespace: ns.into(),
            store_ref_kind: StoreRefKind::SecretStore,
            authentication_scope: None,
            source_namespace: ns.into(),
            max_age: std::time::Duration::ZERO,
            provider_identity: Default::default(),
        };
        let auth = |secret: &str| -> AwsAuth {
            let sel = |key: &str| serde_json::json!({"name": secret, "key": key});
            serde_json::from_value(serde_json::json!({"secretRef":
                {"accessKeyIDSecretRef": sel("id"), "secretAccessKeySecretRef": sel("secret")}}))
            .unwrap_or_default()
        };
        let a = store_config("eu-west-1", None, Some(&auth("keys")));
        let key = cache_key(&ctx(ECR_KIND, "team", "ecr"), &a);
        assert_eq!(key, cache_key(&ctx(ECR_KIND, "team", "ecr"), &a), "the same generator, the same key");
        assert!(!key.operator, "a generator is never the operator's");
        assert_eq!((key.kind.as_str(), key.namespace.as_str(), key.name.as_str()), (ECR_KIND, "team", "ecr"));
        for other in [
            cache_key(&ctx(ECR_KIND, "team", "ecr-b"), &a),
            cache_key(&ctx(ECR_KIND, "other", "ecr"), &a),
            cache_key(&ctx(STS_KIND, "team", "ecr"), &a),
            cache_key(&ctx(ECR_KIND, "team", "ecr"), &store_config("eu-west-1", None, Some(&auth("keys-b")))),
            cache_key(&ctx(ECR_KIND, "team", "ecr"), &store_config("us-east-1", None, Some(&auth("keys")))),
            cache_key(
                &ctx(ECR_KIND, "team", "ecr"),
                &store_config("eu-west-1", Some("arn:aws:iam::123456789012:role/r"), Some(&auth("keys"))),
            ),
        ] {
            assert_ne!(key, other);
        }
    }

    #[test]
    fn a_generator_reads_as_a_store_block_and_an_empty_auth_is_none() {
        let c = store_config("eu-west-1", Some(""), Some(&AwsAuth::default()));
        assert_eq!((c.region.as_str(), c.role, c.auth), ("eu-west-1", None, None));
        let c = store_config("eu-west-1", Some("arn:aws:iam::123456789012:role/r"), None);
        assert_eq!(c.role.as_deref(), Some("arn:aws:iam::123456789012:role/r"));
        // Without auth, the provider's own credentials: refused for a tenant's generator.
        assert!(!secrets_manager_reach(&c).ambient.is_empty());
    }
}
