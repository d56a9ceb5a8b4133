//! The one SigV4 signer of Keyward's hand-built AWS requests: an STS `GetCallerIdentity` POST,
//! signed with AWS credentials, is how a workload proves its AWS identity to a third party that
//! forwards the request to STS. Google's STS reads it as Workload Identity Federation's AWS
//! subject token ([`crate::exchange::aws_subject_token`]); Vault's AWS auth method as an IAM
//! login (the Vault provider's `iam` module). The AWS provider's own calls are signed by the SDK.

use std::time::SystemTime;

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use keyward_provider_runtime::ProviderError;

/// Signs `POST url` with `headers` and `body` for STS of `region` at `time`, and returns the
/// headers the signature adds (`authorization`, `x-amz-date`, `x-amz-security-token` with
/// session credentials), names in lower case. Every header given is signed, so a header that
/// names the audience (Google's target resource, Vault's server ID) binds the request to it.
///
/// # Errors
/// `INTERNAL` naming `what` when the request cannot be signed (a URL or header the signer
/// refuses).
pub fn sign_sts_post(
    creds: &Credentials,
    region: &str,
    url: &str,
    headers: &[(String, String)],
    body: &[u8],
    time: SystemTime,
    what: &str,
) -> Result<Vec<(String, String)>, ProviderError> {
    let fail = |e: &dyn std::fmt::Display| ProviderError::Internal(format!("{what}: {e}"));
    let identity = creds.clone().into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name("sts")
        .time(time)
        .settings(SigningSettings::default())
        .build()
        .map_err(|e| fail(&e))?
        .into();
    let signable = SignableRequest::new(
        "POST",
        url,
        headers.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        SignableBody::Bytes(body),
    )
    .map_err(|e| fail(&e))?;
    let (signed, _) = sign(signable, &params).map_err(|e| fail(&e))?.into_parts();
    Ok(signed.headers().map(|(k, v)| (k.to_ascii_lowercase(), v.to_string())).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn signs_every_given_header_and_the_session_token() {
        // 2015-08-30T12:36:00Z, the time of AWS's SigV4 test suite.
        let time = SystemTime::UNIX_EPOCH + Duration::from_secs(1_440_938_160);
        let creds = Credentials::new("ASIAEXAMPLE", "secret", Some("session-1".into()), None, "test");
        let given = [("x-audience".to_string(), "a".to_string())];
        let url = "https://sts.eu-west-1.amazonaws.com/";
        let signed = sign_sts_post(&creds, "eu-west-1", url, &given, b"x=1", time, "test").expect("signed");
        let header = |name: &str| signed.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
        assert_eq!(header("x-amz-date"), Some("20150830T123600Z"));
        assert_eq!(header("x-amz-security-token"), Some("session-1"));
        let auth = header("authorization").expect("authorization");
        assert!(auth.contains("Credential=ASIAEXAMPLE/20150830/eu-west-1/sts/aws4_request"), "{auth}");
        assert!(auth.contains("SignedHeaders=host;x-amz-date;x-amz-security-token;x-audience"), "{auth}");
        // The body is signed: another body, another signature.
        let other = sign_sts_post(&creds, "eu-west-1", url, &given, b"x=2", time, "test").expect("signed");
        assert_ne!(signed, other);
        let e = sign_sts_post(&creds, "eu-west-1", "not a url", &given, b"", time, "signing X").expect_err("bad URL");
        assert!(e.to_string().contains("signing X"), "{e}");
    }
}
