//! `workloadIdentityFederation.credConfig`: an `external_account` credential configuration
//! (the JSON `gcloud iam workload-identity-pools create-cred-config` writes) in a ConfigMap, as
//! upstream reads it. Its `credential_source` is where the subject token comes from: a file or a
//! URL of the provider's own environment (its Pod's files, the addresses it reaches), so a
//! configuration naming one acts with the provider's identity, and only the operator's
//! configurations (and those of `--provider-identity-namespaces`) may; the tenant boundary
//! refuses it for any other before anything is read (`keyward_crds::rules::gcp_auth_reach`).
//!
//! Served sources: `file` and `url` (with `headers`), each with `format` `text` or `json`
//! (`subject_token_field_name`). Refused: `executable` (Keyward runs no program a configuration
//! names) and `environment_id` (AWS: use `awsSecurityCredentials`). The configuration's
//! `token_url` and the host of `service_account_impersonation_url` are not used: STS and IAM
//! Credentials are the operator's endpoints, as for every method; the impersonated account is
//! the e-mail in that URL.

use keyward_provider_runtime::{ProviderError, body};
use serde_json::Value;

/// Where the subject token comes from.
#[derive(Debug, PartialEq)]
pub enum Source {
    /// A file of the provider's environment.
    File(String),
    /// A URL, with headers.
    Url(String, Vec<(String, String)>),
}

/// What a credential configuration says.
#[derive(Debug, PartialEq)]
pub struct ExternalAccount {
    /// The workload identity provider's resource name.
    pub audience: String,
    /// The subject token's type (`urn:ietf:params:oauth:token-type:jwt`, …).
    pub subject_token_type: String,
    /// The Google service account to impersonate, when the configuration names one.
    pub impersonate: String,
    /// The subject token's source.
    pub source: Source,
    /// The JSON member holding the token, when the source answers JSON.
    pub json_field: Option<String>,
}

/// Reads a credential configuration; errors name `field`.
///
/// # Errors
/// `FAILED_PRECONDITION` when it is not an `external_account` configuration with a served
/// source.
pub fn parse(text: &str, field: &str) -> Result<ExternalAccount, ProviderError> {
    let bad = |m: String| ProviderError::BadConfig(format!("{field}: {m}"));
    let json: Value =
        serde_json::from_str(text).map_err(|e| bad(format!("the credential configuration is not JSON: {e}")))?;
    if json["type"] != "external_account" {
        return Err(bad(format!("the credential configuration's type is {}, not \"external_account\"", json["type"])));
    }
    let text_of = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let source = &json["credential_source"];
    let source_kind = if source.get("executable").is_some() {
        return Err(bad("credential_source.executable is not served: Keyward runs no program a configuration names; \
                        use serviceAccountRef or a file or url source"
            .into()));
    } else if source.get("environment_id").is_some() {
        return Err(bad("credential_source.environment_id (AWS) is not served: use awsSecurityCredentials".into()));
    } else if let Some(path) = source["file"].as_str().filter(|p| !p.is_empty()) {
        Source::File(path.to_string())
    } else if let Some(url) = source["url"].as_str().filter(|u| !u.is_empty()) {
        let headers = source["headers"]
            .as_object()
            .map(|h| h.iter().map(|(k, v)| (k.clone(), text_of(v))).collect())
            .unwrap_or_default();
        Source::Url(url.to_string(), headers)
    } else {
        return Err(bad("credential_source names neither a file nor a url".into()));
    };
    let json_field = match source["format"]["type"].as_str().unwrap_or("text") {
        "text" => None,
        "json" => match source["format"]["subject_token_field_name"].as_str().filter(|f| !f.is_empty()) {
            Some(f) => Some(f.to_string()),
            None => return Err(bad("credential_source.format json needs subject_token_field_name".into())),
        },
        other => return Err(bad(format!("credential_source.format.type {other:?} is neither text nor json"))),
    };
    let impersonate = match json["service_account_impersonation_url"].as_str().filter(|u| !u.is_empty()) {
        None => String::new(),
        Some(url) => url
            .rsplit_once("/serviceAccounts/")
            .and_then(|(_, rest)| rest.strip_suffix(":generateAccessToken"))
            .filter(|e| keyward_crds::rules::looks_like_email(e))
            .map(str::to_string)
            .ok_or_else(|| bad(format!("service_account_impersonation_url {url:?} names no service account")))?,
    };
    Ok(ExternalAccount {
        audience: text_of(&json["audience"]),
        subject_token_type: text_of(&json["subject_token_type"]),
        impersonate,
        source: source_kind,
        json_field,
    })
}

/// The subject token from the source, read through the runtime's size cap.
///
/// # Errors
/// `FAILED_PRECONDITION` when the file or URL gives no token, `UNAVAILABLE` when the URL cannot
/// be reached.
pub async fn subject_token(
    account: &ExternalAccount,
    http: &reqwest::Client,
    field: &str,
) -> Result<String, ProviderError> {
    let bad = |m: String| ProviderError::BadConfig(format!("{field}: {m}"));
    let raw = match &account.source {
        Source::File(path) => {
            let bytes =
                tokio::fs::read(path).await.map_err(|e| bad(format!("credential_source.file {path:?}: {e}")))?;
            if u64::try_from(bytes.len()).map_or(true, |n| n > body::MAX_RESPONSE_BYTES) {
                return Err(bad(format!("credential_source.file {path:?} is larger than a token")));
            }
            bytes
        }
        Source::Url(url, headers) => {
            let mut req = http.get(url);
            for (k, v) in headers {
                req = req.header(k, v);
            }
            let res = req
                .send()
                .await
                .map_err(|e| ProviderError::Unavailable(format!("{field}: credential_source.url {url}: {e}")))?;
            let status = res.status();
            let (_, bytes) = body::read_limited(http::Response::from(res), body::MAX_RESPONSE_BYTES)
                .await
                .map_err(|e| ProviderError::Unavailable(format!("{field}: credential_source.url {url}: {e}")))?;
            if !status.is_success() {
                return Err(bad(format!("credential_source.url {url} answered {status}")));
            }
            bytes.to_vec()
        }
    };
    let text = String::from_utf8_lossy(&raw);
    let token = match &account.json_field {
        None => text.trim().to_string(),
        Some(f) => serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|v| v[f.as_str()].as_str().map(str::to_string))
            .unwrap_or_default(),
    };
    if token.is_empty() {
        return Err(bad("the credential source gave no subject token".into()));
    }
    Ok(token)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config(source: Value) -> String {
        json!({"type": "external_account", "audience": "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/k",
               "subject_token_type": "urn:ietf:params:oauth:token-type:jwt", "token_url": "https://sts.googleapis.com/v1/token",
               "service_account_impersonation_url": "https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/sa@p.iam.gserviceaccount.com:generateAccessToken",
               "credential_source": source})
        .to_string()
    }

    #[test]
    fn file_and_url_sources_are_read_as_google_writes_them() {
        let file = parse(&config(json!({"file": "/var/run/token", "format": {"type": "text"}})), "f").expect("file");
        assert_eq!(file.source, Source::File("/var/run/token".into()));
        assert_eq!(file.impersonate, "sa@p.iam.gserviceaccount.com");
        assert_eq!(file.json_field, None);
        let url = parse(
            &config(json!({"url": "http://169.254.169.254/token", "headers": {"Metadata": "True"},
                           "format": {"type": "json", "subject_token_field_name": "access_token"}})),
            "f",
        )
        .expect("url");
        assert_eq!(
            url.source,
            Source::Url("http://169.254.169.254/token".into(), vec![("Metadata".into(), "True".into())])
        );
        assert_eq!(url.json_field.as_deref(), Some("access_token"));
    }

    #[test]
    fn other_sources_are_refused_naming_the_field() {
        for (source, says) in [
            (json!({"executable": {"command": "/bin/sh"}}), "executable is not served"),
            (json!({"environment_id": "aws1", "region_url": "http://169.254.169.254"}), "awsSecurityCredentials"),
            (json!({}), "neither a file nor a url"),
            (json!({"file": "/t", "format": {"type": "json"}}), "subject_token_field_name"),
        ] {
            let e = parse(&config(source), "spec.auth.workloadIdentityFederation.credConfig").expect_err("refused");
            let message = tonic::Status::from(e).message().to_string();
            assert!(
                message.starts_with("spec.auth.workloadIdentityFederation.credConfig: ") && message.contains(says),
                "{message}"
            );
        }
        let e = parse(r#"{"type": "service_account"}"#, "f").expect_err("a key");
        assert!(tonic::Status::from(e).message().contains("external_account"));
    }
}
