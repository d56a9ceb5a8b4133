//! Vault's AWS auth method, IAM type (`spec.auth.iam`): the provider signs an STS
//! `GetCallerIdentity` request with AWS credentials (SigV4) and posts it to
//! `auth/<path>/login`; Vault forwards it to STS and learns from STS's answer who signed.
//!
//! Credentials come from Secrets (`secretRef`), from a ServiceAccount token exchanged through
//! `AssumeRoleWithWebIdentity` (`jwt`), or, for the operator's configurations only, from the
//! provider's own AWS credentials chain; `role` is assumed with them before signing. What is read
//! from Kubernetes is read when the client is built; STS is called, and the request signed, at
//! each login, so the signature is fresh and assumed-role credentials never outlive their use.
//! The STS endpoint follows the standard `AWS_ENDPOINT_URL_STS` / `AWS_ENDPOINT_URL` environment
//! of the provider process (set by the operator, never by a configuration).

use std::time::SystemTime;

use aws_config::{BehaviorVersion, Region};
use aws_credential_types::Credentials;
use aws_credential_types::provider::ProvideCredentials;
use aws_sdk_sts::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode};
use base64::Engine;
use keyward_crds::vault::VaultIamAuth;
use keyward_provider_runtime::refs::{ClusterRefs, NamedKind, named_namespace, require_operator_owned};
use keyward_provider_runtime::{ProviderError, RequestContext};
use serde_json::{Value, json};

const FIELD: &str = "spec.auth.iam";
/// Region signed for when `region` is unset, as upstream.
const DEFAULT_REGION: &str = "us-east-1";
/// Mount path of the AWS auth method when `path` is unset, as upstream.
pub(crate) const DEFAULT_MOUNT: &str = "aws";
/// The only request Vault's AWS auth method accepts.
const GET_CALLER_IDENTITY: &str = "Action=GetCallerIdentity&Version=2011-06-15";
/// Header Vault compares with the auth method's `iam_server_id_header_value`.
const SERVER_ID_HEADER: &str = "X-Vault-AWS-IAM-Server-ID";
/// Annotation naming the role a ServiceAccount's web identity assumes (as EKS IRSA).
const ROLE_ARN_ANNOTATION: &str = "eks.amazonaws.com/role-arn";
/// Annotation naming the audience of the ServiceAccount's token (as EKS IRSA).
const AUDIENCE_ANNOTATION: &str = "eks.amazonaws.com/audience";
const STS_AUDIENCE: &str = "sts.amazonaws.com";
/// Lifetime of the ServiceAccount token; longer than a client is cached, so every login of a
/// client has a valid one.
const WEB_IDENTITY_TOKEN_SECONDS: i64 = 3600;
const SESSION_NAME: &str = "keyward-provider-vault";

/// Where the AWS credentials come from.
#[derive(Clone, Debug)]
enum Source {
    /// Access keys read from Secrets.
    Keys(Credentials),
    /// A ServiceAccount token and the role it assumes; `sa` (namespace/name) identifies it.
    WebIdentity { role: String, token: String, sa: String },
    /// The provider process's own credentials chain.
    Own,
}

/// An IAM login as configured, ready to be signed at each login.
#[derive(Clone, Debug)]
pub(crate) struct IamLogin {
    vault_role: String,
    region: String,
    server_id: Option<String>,
    source: Source,
    /// `role` and `externalID`: assumed with the credentials before signing.
    assume: Option<(String, Option<String>)>,
}

impl IamLogin {
    /// Reads the credentials `iam` names (Secrets, a ServiceAccount's token and annotations).
    pub(crate) async fn read(
        refs: &ClusterRefs,
        ctx: &RequestContext,
        iam: &VaultIamAuth,
    ) -> Result<IamLogin, ProviderError> {
        let source = match (&iam.secret_ref, &iam.jwt) {
            (Some(_), Some(_)) => {
                return Err(ProviderError::BadConfig(format!("{FIELD}: set secretRef or jwt, not both")));
            }
            (Some(s), None) => {
                let field = format!("{FIELD}.secretRef");
                let id = refs
                    .selected_secret_text(ctx, &format!("{field}.accessKeyIDSecretRef"), &s.access_key_id_secret_ref)
                    .await?;
                let secret = refs
                    .selected_secret_text(
                        ctx,
                        &format!("{field}.secretAccessKeySecretRef"),
                        &s.secret_access_key_secret_ref,
                    )
                    .await?;
                let token = match &s.session_token_secret_ref {
                    Some(t) => {
                        Some(refs.selected_secret_text(ctx, &format!("{field}.sessionTokenSecretRef"), t).await?)
                    }
                    None => None,
                };
                Source::Keys(Credentials::new(id, secret, token, None, "keyward-secret-ref"))
            }
            (None, Some(j)) => {
                let field = "spec.auth.iam.jwt.serviceAccountRef";
                let sa = &j.service_account_ref;
                let ns = named_namespace(ctx, field, NamedKind::ServiceAccount, &sa.name, sa.namespace.as_deref())?;
                let role = refs.service_account_annotation(ns, &sa.name, ROLE_ARN_ANNOTATION, field).await?;
                let role = role.filter(|r| !r.is_empty()).ok_or_else(|| {
                    ProviderError::BadConfig(format!(
                        "{field}: ServiceAccount {ns}/{} has no {ROLE_ARN_ANNOTATION} annotation: annotate it with \
                         the role its web identity assumes",
                        sa.name
                    ))
                })?;
                let audience = refs.service_account_annotation(ns, &sa.name, AUDIENCE_ANNOTATION, field).await?;
                let mut audiences = vec![audience.filter(|a| !a.is_empty()).unwrap_or_else(|| STS_AUDIENCE.into())];
                audiences.extend(sa.audiences.iter().cloned());
                let token =
                    refs.service_account_token(ns, &sa.name, &audiences, WEB_IDENTITY_TOKEN_SECONDS, field).await?;
                Source::WebIdentity { role, token, sa: format!("{ns}/{}", sa.name) }
            }
            (None, None) => {
                require_operator_owned(ctx, keyward_crds::rules::VAULT_OWN_AWS_IDENTITY)?;
                Source::Own
            }
        };
        Ok(IamLogin {
            vault_role: iam.vault_role.clone(),
            region: iam.region.clone().filter(|r| !r.is_empty()).unwrap_or_else(|| DEFAULT_REGION.into()),
            server_id: iam.vault_aws_iam_server_id.clone().filter(|s| !s.is_empty()),
            source,
            assume: iam.role.clone().filter(|r| !r.is_empty()).map(|r| (r, iam.external_id.clone())),
        })
    }

    /// What identifies these credentials for the token cache: the same parts give the same
    /// Vault identity. A ServiceAccount is identified by its name (its token changes with every
    /// client), keys by their values.
    pub(crate) fn identity_parts(&self) -> Vec<Vec<u8>> {
        let mut parts = vec![
            b"iam".to_vec(),
            self.vault_role.clone().into_bytes(),
            self.region.clone().into_bytes(),
            self.server_id.clone().unwrap_or_default().into_bytes(),
        ];
        match &self.source {
            Source::Keys(c) => {
                parts.push(b"keys".to_vec());
                parts.push(c.access_key_id().as_bytes().to_vec());
                parts.push(c.secret_access_key().as_bytes().to_vec());
                parts.push(c.session_token().unwrap_or_default().as_bytes().to_vec());
            }
            Source::WebIdentity { role, sa, .. } => {
                parts.push(b"web-identity".to_vec());
                parts.push(role.clone().into_bytes());
                parts.push(sa.clone().into_bytes());
            }
            Source::Own => parts.push(b"own".to_vec()),
        }
        let (role, external_id) = self.assume.clone().unwrap_or_default();
        parts.push(role.into_bytes());
        parts.push(external_id.unwrap_or_default().into_bytes());
        parts
    }

    /// The body of `POST auth/<path>/login`: fresh credentials, a freshly signed request.
    pub(crate) async fn login_body(&self) -> Result<Value, ProviderError> {
        let creds = self.credentials().await?;
        let url = sts_url(&self.region, |name| std::env::var(name).ok())?;
        signed_login(&self.vault_role, &url, &self.region, self.server_id.as_deref(), &creds, SystemTime::now())
    }

    /// The credentials to sign with: the source's, then `role` assumed with them.
    async fn credentials(&self) -> Result<Credentials, ProviderError> {
        let base = match &self.source {
            Source::Keys(c) => c.clone(),
            Source::WebIdentity { role, token, .. } => {
                let anonymous = loader(&self.region).no_credentials().load().await;
                let what = format!("{FIELD}.jwt: AssumeRoleWithWebIdentity {role}");
                let out = aws_sdk_sts::Client::new(&anonymous)
                    .assume_role_with_web_identity()
                    .role_arn(role)
                    .role_session_name(SESSION_NAME)
                    .web_identity_token(token)
                    .send()
                    .await
                    .map_err(|e| sts_error(e, &what))?;
                sts_credentials(out.credentials(), &what)?
            }
            Source::Own => {
                let conf = loader(&self.region).load().await;
                let provider = conf.credentials_provider().ok_or_else(|| {
                    ProviderError::BadConfig(format!("{FIELD}: the provider process has no AWS credentials chain"))
                })?;
                provider.provide_credentials().await.map_err(|e| {
                    ProviderError::Unauthenticated(format!(
                        "{FIELD} without secretRef or jwt: the provider process's AWS credentials: {}",
                        DisplayErrorContext(&e)
                    ))
                })?
            }
        };
        let Some((role, external_id)) = &self.assume else { return Ok(base) };
        let conf = loader(&self.region).credentials_provider(base).load().await;
        let what = format!("{FIELD}.role: AssumeRole {role}");
        let mut req = aws_sdk_sts::Client::new(&conf).assume_role().role_arn(role).role_session_name(SESSION_NAME);
        if let Some(id) = external_id.as_deref().filter(|id| !id.is_empty()) {
            req = req.external_id(id);
        }
        let out = req.send().await.map_err(|e| sts_error(e, &what))?;
        sts_credentials(out.credentials(), &what)
    }
}

/// The SDK configuration for STS calls: region, an HTTPS client on rustls with ring (the
/// system's roots, as the AWS provider's), endpoints from the process's `AWS_ENDPOINT_URL*`.
fn loader(region: &str) -> aws_config::ConfigLoader {
    let http =
        aws_smithy_http_client::Builder::new().tls_provider(tls::Provider::Rustls(CryptoMode::Ring)).build_https();
    aws_config::defaults(BehaviorVersion::latest()).region(Region::new(region.to_string())).http_client(http)
}

fn sts_credentials(c: Option<&aws_sdk_sts::types::Credentials>, what: &str) -> Result<Credentials, ProviderError> {
    let c = c.ok_or_else(|| ProviderError::Unavailable(format!("{what}: STS returned no credentials")))?;
    let expiry = SystemTime::try_from(*c.expiration()).ok();
    Ok(Credentials::new(c.access_key_id(), c.secret_access_key(), Some(c.session_token().to_string()), expiry, "sts"))
}

/// An STS refusal is a credentials problem (denied when STS says so); no answer at all is an
/// unavailable STS.
fn sts_error<E, R>(e: SdkError<E, R>, what: &str) -> ProviderError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    let code = e.code().map(str::to_string);
    let msg = format!("{what}: {}", DisplayErrorContext(&e));
    match e {
        SdkError::ServiceError(_) if code.as_deref() == Some("AccessDenied") => ProviderError::PermissionDenied(msg),
        SdkError::ServiceError(_) => ProviderError::Unauthenticated(msg),
        SdkError::ConstructionFailure(_) => ProviderError::BadConfig(msg),
        _ => ProviderError::Unavailable(msg),
    }
}

/// The STS endpoint the request is signed for: `AWS_ENDPOINT_URL_STS`, else `AWS_ENDPOINT_URL`
/// (as the SDK resolves them), else the global endpoint for `us-east-1` and the regional one for
/// any other region (Vault's `sts_endpoint` and `sts_region` must match it).
fn sts_url(region: &str, env: impl Fn(&str) -> Option<String>) -> Result<String, ProviderError> {
    let configured = ["AWS_ENDPOINT_URL_STS", "AWS_ENDPOINT_URL"]
        .into_iter()
        .find_map(|name| env(name).filter(|v| !v.trim().is_empty()).map(|v| (name, v.trim().to_string())));
    let (origin, url) = match configured {
        Some((name, url)) => (name, url),
        None if region == DEFAULT_REGION => ("the default", "https://sts.amazonaws.com".to_string()),
        None => ("the default", format!("https://sts.{region}.amazonaws.com")),
    };
    // The request is for the endpoint's root; a URL without a host could not be signed.
    match reqwest::Url::parse(&url) {
        Ok(u) if u.host_str().is_some() && matches!(u.scheme(), "http" | "https") => {
            Ok(format!("{}/", url.trim_end_matches('/')))
        }
        _ => Err(ProviderError::BadConfig(format!(
            "{FIELD}: {origin} STS endpoint {url:?} is not an http(s) URL with a host"
        ))),
    }
}

/// The login body for the signed `GetCallerIdentity` request: method, URL, body and headers,
/// each Base64 encoded as Vault expects (the headers as a JSON object of value lists).
fn signed_login(
    vault_role: &str,
    url: &str,
    region: &str,
    server_id: Option<&str>,
    creds: &Credentials,
    time: SystemTime,
) -> Result<Value, ProviderError> {
    let mut headers =
        vec![("content-type".to_string(), "application/x-www-form-urlencoded; charset=utf-8".to_string())];
    if let Some(id) = server_id {
        // Signed with the rest, so a request captured for one Vault is refused by another.
        headers.push((SERVER_ID_HEADER.to_string(), id.to_string()));
    }
    let signed = keyward_gcp_identity::sigv4::sign_sts_post(
        creds,
        region,
        url,
        &headers,
        GET_CALLER_IDENTITY.as_bytes(),
        time,
        &format!("{FIELD}: signing the request"),
    )?;
    let mut all = serde_json::Map::new();
    for (name, value) in headers.into_iter().chain(signed) {
        all.insert(name, json!([value]));
    }
    let b64 = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
    Ok(json!({
        "role": vault_role,
        "iam_http_request_method": "POST",
        "iam_request_url": b64(url.as_bytes()),
        "iam_request_body": b64(GET_CALLER_IDENTITY.as_bytes()),
        "iam_request_headers": b64(Value::Object(all).to_string().as_bytes()),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn decoded(body: &Value, field: &str) -> String {
        let text = body[field].as_str().expect("a string");
        String::from_utf8(base64::engine::general_purpose::STANDARD.decode(text).expect("base64")).expect("utf-8")
    }

    /// 2015-08-30T12:36:00Z, the time of AWS's SigV4 test suite.
    fn test_time() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_440_938_160)
    }

    #[test]
    fn the_login_carries_a_signed_get_caller_identity_request() {
        let creds = Credentials::new("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", None, None, "test");
        let body =
            signed_login("app", "https://sts.amazonaws.com/", "us-east-1", None, &creds, test_time()).expect("signed");
        assert_eq!(body["role"], "app");
        assert_eq!(body["iam_http_request_method"], "POST");
        assert_eq!(decoded(&body, "iam_request_url"), "https://sts.amazonaws.com/");
        assert_eq!(decoded(&body, "iam_request_body"), "Action=GetCallerIdentity&Version=2011-06-15");
        let headers: Value = serde_json::from_str(&decoded(&body, "iam_request_headers")).expect("json");
        assert_eq!(headers["x-amz-date"], json!(["20150830T123600Z"]));
        assert_eq!(headers["content-type"], json!(["application/x-www-form-urlencoded; charset=utf-8"]));
        let auth = headers["authorization"][0].as_str().expect("authorization");
        assert!(
            auth.starts_with(
                "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/sts/aws4_request, \
                 SignedHeaders=content-type;host;x-amz-date, Signature="
            ),
            "{auth}"
        );
        assert!(headers.get("x-amz-security-token").is_none(), "{headers}");
        // The signature covers the time: another second, another signature.
        let later = signed_login(
            "app",
            "https://sts.amazonaws.com/",
            "us-east-1",
            None,
            &creds,
            test_time() + Duration::from_secs(1),
        )
        .expect("signed");
        assert_ne!(body["iam_request_headers"], later["iam_request_headers"]);
    }

    #[test]
    fn the_server_id_and_session_token_are_signed_and_the_region_scopes_the_signature() {
        let creds = Credentials::new("ASIAEXAMPLE", "secret", Some("session-1".into()), None, "test");
        let body = signed_login(
            "app",
            "https://sts.eu-west-1.amazonaws.com/",
            "eu-west-1",
            Some("vault.example.com"),
            &creds,
            test_time(),
        )
        .expect("signed");
        let headers: Value = serde_json::from_str(&decoded(&body, "iam_request_headers")).expect("json");
        assert_eq!(headers[SERVER_ID_HEADER], json!(["vault.example.com"]));
        assert_eq!(headers["x-amz-security-token"], json!(["session-1"]));
        let auth = headers["authorization"][0].as_str().expect("authorization");
        assert!(auth.contains("Credential=ASIAEXAMPLE/20150830/eu-west-1/sts/aws4_request"), "{auth}");
        assert!(
            auth.contains("SignedHeaders=content-type;host;x-amz-date;x-amz-security-token;x-vault-aws-iam-server-id"),
            "{auth}"
        );
    }

    #[test]
    fn the_sts_endpoint_follows_the_process_environment_then_the_region() {
        let none = |_: &str| None;
        assert_eq!(sts_url("us-east-1", none).expect("url"), "https://sts.amazonaws.com/");
        assert_eq!(sts_url("eu-west-1", none).expect("url"), "https://sts.eu-west-1.amazonaws.com/");
        let general = |n: &str| (n == "AWS_ENDPOINT_URL").then(|| "http://127.0.0.1:5000".to_string());
        assert_eq!(sts_url("eu-west-1", general).expect("url"), "http://127.0.0.1:5000/");
        let both = |n: &str| match n {
            "AWS_ENDPOINT_URL_STS" => Some("http://sts.local:4566/".to_string()),
            _ => Some("http://other:1".to_string()),
        };
        assert_eq!(sts_url("us-east-1", both).expect("url"), "http://sts.local:4566/", "the STS-specific one wins");
        let bad = |n: &str| (n == "AWS_ENDPOINT_URL_STS").then(|| "sts.local".to_string());
        let e = sts_url("us-east-1", bad).expect_err("no scheme");
        assert!(e.to_string().contains("AWS_ENDPOINT_URL_STS STS endpoint \"sts.local\""), "{e}");
    }

    #[test]
    fn identity_parts_follow_the_credentials_not_the_token_of_the_moment() {
        let login = |source: Source, assume: Option<(String, Option<String>)>| IamLogin {
            vault_role: "app".into(),
            region: "us-east-1".into(),
            server_id: None,
            source,
            assume,
        };
        let keys = |secret: &str| Source::Keys(Credentials::new("AKID", secret, None, None, "test"));
        let base = login(keys("s1"), None).identity_parts();
        assert_eq!(base, login(keys("s1"), None).identity_parts());
        assert_ne!(base, login(keys("s2"), None).identity_parts(), "rotated keys");
        assert_ne!(base, login(keys("s1"), Some(("arn:aws:iam::1:role/r".into(), None))).identity_parts());
        let web = |token: &str| Source::WebIdentity {
            role: "arn:aws:iam::1:role/r".into(),
            token: token.into(),
            sa: "team-a/app".into(),
        };
        assert_eq!(login(web("t1"), None).identity_parts(), login(web("t2"), None).identity_parts());
    }
}
