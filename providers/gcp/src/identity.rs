//! The Google identity an `auth` block names (a GCPSecretManager configuration's, a
//! GCRAccessToken's), in upstream's order: the service-account key Secret, GKE Workload
//! Identity, Workload Identity Federation, else the provider's own identity. The Secret Manager
//! client takes it as credentials ([`GcpProvider::credentials`]); a GCRAccessToken takes it as an
//! access token ([`GcpProvider::access_token`]). What the block names is read in the namespace
//! the tenant boundary allows (`named_namespace`), and the provider's own identity only where
//! the operator allows it.

use google_cloud_auth::credentials::Credentials;
use keyward_crds::gcp::{AwsCredentialsConfig, ConfigMapReference, GCPSMAuth, GCPWorkloadIdentityFederation};
use keyward_crds::rules::CRED_CONFIG_IDENTITY;
use keyward_crds::rules::NamedKind;
use keyward_provider_runtime::refs::{named_namespace, require_operator_owned};
use keyward_provider_runtime::{ProviderError, RequestContext, client_cache};

use crate::GcpProvider;
use crate::api::{KEY_FIELD, OWN_IDENTITY, WI_FIELD, WIF_AWS_FIELD, WIF_CONFIG_FIELD, WIF_SA_FIELD, looks_like_email};
use crate::auth::{self, BearerToken, GCP_SA_ANNOTATION, Token};
use crate::external_account;

/// Lifetime asked of ServiceAccount tokens (upstream: 15 minutes).
const SA_TOKEN_SECONDS: i64 = 900;

/// What an `auth` block resolves to.
enum Identity {
    /// A service-account key file (JSON).
    Key(Vec<u8>),
    /// A token of an exchange (STS, then IAM Credentials when impersonating).
    Token(Token),
    /// The provider's own Application Default Credentials.
    Own,
}

impl GcpProvider {
    /// Credentials of `auth` for Google's client.
    pub(crate) async fn credentials(
        &self,
        ctx: &RequestContext,
        auth: &GCPSMAuth,
        project: &str,
    ) -> Result<Credentials, ProviderError> {
        match self.identity(ctx, auth, project).await? {
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
        match self.identity(ctx, auth, project).await? {
            Identity::Key(json) => self.exchange.key_token(&json, KEY_FIELD).await,
            Identity::Token(token) => Ok(token),
            Identity::Own => auth::own_token().await,
        }
    }

    async fn identity(&self, ctx: &RequestContext, auth: &GCPSMAuth, project: &str) -> Result<Identity, ProviderError> {
        if let Some(s) = &auth.secret_ref {
            let json = self.refs.selected_secret_key(ctx, KEY_FIELD, &s.secret_access_key_secret_ref, "").await?;
            return Ok(Identity::Key(json));
        }
        if let Some(wi) = &auth.workload_identity {
            let eps = self.exchange.endpoints();
            let cluster_project = if wi.cluster_project_id.is_empty() { project } else { &wi.cluster_project_id };
            let pick = |v: &str, fallback: &str, field: &str| {
                let v = if v.is_empty() { fallback } else { v };
                if v.is_empty() {
                    Err(ProviderError::BadConfig(format!(
                        "spec.auth.workloadIdentity.{field} is required (the provider has no KEYWARD_GCP_CLUSTER_* default)"
                    )))
                } else {
                    Ok(v.to_string())
                }
            };
            let name = pick(&wi.cluster_name, &eps.cluster_name, "clusterName")?;
            let location = pick(&wi.cluster_location, &eps.cluster_location, "clusterLocation")?;
            let pool = format!("{cluster_project}.svc.id.goog");
            let provider = format!(
                "https://container.googleapis.com/v1/projects/{cluster_project}/locations/{location}/clusters/{name}"
            );
            let mut audiences = vec![pool.clone()];
            audiences.extend(wi.service_account_ref.audiences.iter().cloned());
            let sa = &wi.service_account_ref;
            let ns = named_namespace(ctx, WI_FIELD, NamedKind::ServiceAccount, &sa.name, sa.namespace.as_deref())?;
            let audience = format!("identitynamespace:{pool}:{provider}");
            return self.exchanged(ns, &sa.name, &audiences, &audience, "", WI_FIELD).await.map(Identity::Token);
        }
        if let Some(f) = &auth.workload_identity_federation {
            if let Some(sa) = &f.service_account_ref {
                let mut audiences = vec![f.audience.clone()];
                audiences.extend(sa.audiences.iter().cloned());
                let ns =
                    named_namespace(ctx, WIF_SA_FIELD, NamedKind::ServiceAccount, &sa.name, sa.namespace.as_deref())?;
                let email = &f.gcp_service_account_email;
                return self
                    .exchanged(ns, &sa.name, &audiences, &f.audience, email, WIF_SA_FIELD)
                    .await
                    .map(Identity::Token);
            }
            if let Some(a) = &f.aws_security_credentials {
                let subject = self.aws_subject(ctx, a, &f.audience).await?;
                let token = self.federated(&subject, auth::AWS_TOKEN_TYPE, &f.audience, &f.gcp_service_account_email);
                return token.await.map(Identity::Token);
            }
            if let Some(c) = &f.cred_config {
                return self.cred_config(ctx, c, f).await.map(Identity::Token);
            }
        }
        // The boundary check refused this already for a tenant's configuration; checked again
        // here so no path reaches the process's identity for one.
        require_operator_owned(ctx, OWN_IDENTITY)?;
        Ok(Identity::Own)
    }

    /// The token of a credential configuration: its source is the provider's own environment,
    /// so it is refused (before the ConfigMap is read) unless the configuration may act as the
    /// provider; then the subject token is exchanged for `audience` (or the configuration's) and
    /// `gcpServiceAccountEmail` (or the configuration's account) is impersonated.
    async fn cred_config(
        &self,
        ctx: &RequestContext,
        c: &ConfigMapReference,
        f: &GCPWorkloadIdentityFederation,
    ) -> Result<Token, ProviderError> {
        require_operator_owned(ctx, CRED_CONFIG_IDENTITY)?;
        let ns = named_namespace(ctx, WIF_CONFIG_FIELD, NamedKind::ConfigMap, &c.name, c.namespace.as_deref())?;
        let text = self.refs.config_map_key(ns, &c.name, &c.key, WIF_CONFIG_FIELD).await?;
        let account = external_account::parse(&text, WIF_CONFIG_FIELD)?;
        if let external_account::Source::Url(url, _) = &account.source
            && !f.external_token_endpoint.is_empty()
            && *url != f.external_token_endpoint
        {
            return Err(ProviderError::BadConfig(format!(
                "{WIF_CONFIG_FIELD}: credential_source.url {url:?} is not externalTokenEndpoint {:?}",
                f.external_token_endpoint
            )));
        }
        let subject = external_account::subject_token(&account, self.exchange.http(), WIF_CONFIG_FIELD).await?;
        let audience = if f.audience.is_empty() { &account.audience } else { &f.audience };
        let email =
            if f.gcp_service_account_email.is_empty() { &account.impersonate } else { &f.gcp_service_account_email };
        self.federated(&subject, &account.subject_token_type, audience, email).await
    }

    /// A ServiceAccount token exchanged at STS for `audience`, then impersonating `email` (or
    /// the account the ServiceAccount's annotation names) when there is one.
    async fn exchanged(
        &self,
        ns: &str,
        sa: &str,
        audiences: &[String],
        audience: &str,
        email: &str,
        field: &str,
    ) -> Result<Token, ProviderError> {
        let annotated = if email.is_empty() {
            self.refs.service_account_annotation(ns, sa, GCP_SA_ANNOTATION, field).await?.unwrap_or_default()
        } else {
            email.to_string()
        };
        if !annotated.is_empty() && !looks_like_email(&annotated) {
            return Err(ProviderError::BadConfig(format!(
                "{field}: ServiceAccount {ns}/{sa}'s {GCP_SA_ANNOTATION} {annotated:?} is not a service account's e-mail"
            )));
        }
        let subject = self.refs.service_account_token(ns, sa, audiences, SA_TOKEN_SECONDS, field).await?;
        self.federated(&subject, auth::JWT_TOKEN_TYPE, audience, &annotated).await
    }

    /// `subject` exchanged at STS for `audience`, then impersonating `email` when there is one.
    async fn federated(
        &self,
        subject: &str,
        token_type: &str,
        audience: &str,
        email: &str,
    ) -> Result<Token, ProviderError> {
        let federated = self.exchange.sts(subject, token_type, audience).await?;
        if email.is_empty() { Ok(federated) } else { self.exchange.impersonate(&federated.value, email).await }
    }

    /// The subject token of `awsSecurityCredentials`: a `GetCallerIdentity` request signed with
    /// the keys of the Secret it names (upstream's key names).
    async fn aws_subject(
        &self,
        ctx: &RequestContext,
        a: &AwsCredentialsConfig,
        audience: &str,
    ) -> Result<String, ProviderError> {
        let r = a
            .aws_credentials_secret_ref
            .as_ref()
            .ok_or_else(|| ProviderError::BadConfig(format!("{WIF_AWS_FIELD} is required")))?;
        let ns = named_namespace(ctx, WIF_AWS_FIELD, NamedKind::Secret, &r.name, r.namespace.as_deref())?;
        let secret = self.refs.secret(ns, &r.name, WIF_AWS_FIELD).await?;
        let key = |k: &str| {
            let v =
                secret.data.as_ref().and_then(|d| d.get(k)).map(|v| String::from_utf8_lossy(&v.0).trim().to_string());
            v.filter(|v| !v.is_empty())
        };
        let (Some(id), Some(secret_key)) = (key("aws_access_key_id"), key("aws_secret_access_key")) else {
            return Err(ProviderError::BadConfig(format!(
                "{WIF_AWS_FIELD}: Secret {ns}/{} needs the keys aws_access_key_id and aws_secret_access_key",
                r.name
            )));
        };
        let creds = aws_credential_types::Credentials::new(id, secret_key, key("aws_session_token"), None, "keyward");
        auth::aws_subject_token(&creds, &a.region, audience, std::time::SystemTime::now())
    }
}
