//! The Google identity an `auth` block names (a GCPSecretManager configuration's, a
//! GCRAccessToken's, a Vault configuration's `auth.gcp`), in upstream's order: the
//! service-account key Secret, GKE Workload Identity, Workload Identity Federation, else the
//! provider's own identity. What the block names is read in the namespace the tenant boundary
//! allows (`named_namespace`), and the provider's own identity only where the operator allows
//! it; what the caller does with the identity (credentials of Google's client, an access token,
//! a signed JWT) is its own.

use keyward_crds::gcp::{AwsCredentialsConfig, ConfigMapReference, GCPSMAuth, GCPWorkloadIdentityFederation};
use keyward_crds::rules::{
    CRED_CONFIG_IDENTITY, GCP_KEY_FIELD, GCP_WI_FIELD, GCP_WIF_AWS_FIELD, GCP_WIF_CONFIG_FIELD, GCP_WIF_SA_FIELD,
    NamedKind, looks_like_email,
};
use keyward_provider_runtime::refs::{ClusterRefs, named_namespace, require_operator_owned};
use keyward_provider_runtime::{ProviderError, RequestContext};

use crate::exchange::{self, GCP_SA_ANNOTATION, Token, TokenExchange};
use crate::external_account;

/// Lifetime asked of ServiceAccount tokens (upstream: 15 minutes).
const SA_TOKEN_SECONDS: i64 = 900;

/// What an `auth` block resolves to.
pub enum Identity {
    /// A service-account key file (JSON).
    Key(Vec<u8>),
    /// A token of an exchange (STS, then IAM Credentials when impersonating).
    Token(Token),
    /// The provider's own identity (Application Default Credentials): the boundary allowed it.
    Own,
}

/// The fields of an `auth` block, as messages and the tenant boundary name them.
#[derive(Clone, Copy, Debug)]
pub struct Fields {
    /// The key Secret (`….secretRef.secretAccessKeySecretRef`).
    pub key: &'static str,
    /// Workload Identity's ServiceAccount (`….workloadIdentity.serviceAccountRef`).
    pub wi: &'static str,
    /// Federation's ServiceAccount.
    pub wif_sa: &'static str,
    /// Federation's AWS credentials Secret.
    pub wif_aws: &'static str,
    /// Federation's credential configuration.
    pub wif_config: &'static str,
    /// What the provider's own identity is called in refusals.
    pub own: &'static str,
}

impl Fields {
    /// The fields of a GCPSecretManager configuration's (and a GCRAccessToken's) `spec.auth`;
    /// `own` names the provider's own identity.
    pub const fn gcpsm(own: &'static str) -> Fields {
        Fields {
            key: GCP_KEY_FIELD,
            wi: GCP_WI_FIELD,
            wif_sa: GCP_WIF_SA_FIELD,
            wif_aws: GCP_WIF_AWS_FIELD,
            wif_config: GCP_WIF_CONFIG_FIELD,
            own,
        }
    }

    /// `….workloadIdentity` (the ServiceAccount field's parent).
    fn wi_block(&self) -> &'static str {
        self.wi.strip_suffix(".serviceAccountRef").unwrap_or(self.wi)
    }
}

/// Resolves `auth` blocks with the provider's reads of the cluster and its token calls.
pub struct Resolver<'a> {
    /// The provider's reads of what configurations name.
    pub refs: &'a ClusterRefs,
    /// The token calls, to the operator's endpoints.
    pub exchange: &'a TokenExchange,
    /// How the block's fields are named.
    pub fields: Fields,
}

impl Resolver<'_> {
    /// An access token of `auth`: a key's through the OAuth token endpoint, an exchange's as
    /// it is; `None` for the provider's own identity (the caller has its own way to a token).
    ///
    /// # Errors
    /// What [`Resolver::identity`] and the token calls refuse.
    pub async fn access_token(
        &self,
        ctx: &RequestContext,
        auth: &GCPSMAuth,
        project: &str,
    ) -> Result<Option<Token>, ProviderError> {
        match self.identity(ctx, auth, project).await? {
            Identity::Key(json) => self.exchange.key_token(&json, self.fields.key).await.map(Some),
            Identity::Token(token) => Ok(Some(token)),
            Identity::Own => Ok(None),
        }
    }

    /// The Google service account `auth` acts as (its e-mail) and an access token of it, for
    /// calls made on that account itself (IAM Credentials `signJwt`): a key's account, or the
    /// account Workload Identity's ServiceAccount is annotated with (required: a federated
    /// Kubernetes identity is no service account). Other credentials name no account.
    ///
    /// # Errors
    /// `FAILED_PRECONDITION` when `auth` names no service account; as [`Resolver::identity`].
    pub async fn account_token(
        &self,
        ctx: &RequestContext,
        auth: &GCPSMAuth,
        project: &str,
    ) -> Result<(String, Token), ProviderError> {
        let f = self.fields;
        let email = if let Some(wi) = auth.workload_identity.as_ref().filter(|_| auth.secret_ref.is_none()) {
            let sa = &wi.service_account_ref;
            let ns = named_namespace(ctx, f.wi, NamedKind::ServiceAccount, &sa.name, sa.namespace.as_deref())?;
            let email = self.refs.service_account_annotation(ns, &sa.name, GCP_SA_ANNOTATION, f.wi).await?;
            Some(email.filter(|e| !e.is_empty()).ok_or_else(|| {
                ProviderError::BadConfig(format!(
                    "{}: ServiceAccount {ns}/{} has no {GCP_SA_ANNOTATION} annotation: annotate it with the Google \
                     service account to act as",
                    f.wi, sa.name
                ))
            })?)
        } else {
            None
        };
        match (self.identity(ctx, auth, project).await?, email) {
            (Identity::Key(json), _) => {
                let key = exchange::checked_key(&json, f.key)?;
                let email = key["client_email"].as_str().unwrap_or_default().to_string();
                Ok((email, self.exchange.key_token(&json, f.key).await?))
            }
            (Identity::Token(token), Some(email)) => Ok((email, token)),
            _ => Err(ProviderError::BadConfig(format!(
                "{} or {}: name a service-account key or a Workload Identity ServiceAccount",
                f.key, f.wi
            ))),
        }
    }

    /// What `auth` names, read and exchanged as far as a token (a key is returned as it is).
    ///
    /// # Errors
    /// `PERMISSION_DENIED` for what the tenant boundary refuses, `FAILED_PRECONDITION` for
    /// what is missing or malformed, and the exchanges' refusals.
    pub async fn identity(
        &self,
        ctx: &RequestContext,
        auth: &GCPSMAuth,
        project: &str,
    ) -> Result<Identity, ProviderError> {
        let f = self.fields;
        if let Some(s) = &auth.secret_ref {
            let json = self.refs.selected_secret_key(ctx, f.key, &s.secret_access_key_secret_ref, "").await?;
            return Ok(Identity::Key(json));
        }
        if let Some(wi) = &auth.workload_identity {
            let eps = self.exchange.endpoints();
            let cluster_project = if wi.cluster_project_id.is_empty() { project } else { &wi.cluster_project_id };
            let pick = |v: &str, fallback: &str, field: &str| {
                let v = if v.is_empty() { fallback } else { v };
                if v.is_empty() {
                    Err(ProviderError::BadConfig(format!(
                        "{}.{field} is required (the provider has no KEYWARD_GCP_CLUSTER_* default)",
                        f.wi_block()
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
            let ns = named_namespace(ctx, f.wi, NamedKind::ServiceAccount, &sa.name, sa.namespace.as_deref())?;
            let audience = format!("identitynamespace:{pool}:{provider}");
            return self.exchanged(ns, &sa.name, &audiences, &audience, "", f.wi).await.map(Identity::Token);
        }
        if let Some(fed) = &auth.workload_identity_federation {
            if let Some(sa) = &fed.service_account_ref {
                let mut audiences = vec![fed.audience.clone()];
                audiences.extend(sa.audiences.iter().cloned());
                let ns = named_namespace(ctx, f.wif_sa, NamedKind::ServiceAccount, &sa.name, sa.namespace.as_deref())?;
                let email = &fed.gcp_service_account_email;
                return self
                    .exchanged(ns, &sa.name, &audiences, &fed.audience, email, f.wif_sa)
                    .await
                    .map(Identity::Token);
            }
            if let Some(a) = &fed.aws_security_credentials {
                let subject = self.aws_subject(ctx, a, &fed.audience).await?;
                let email = &fed.gcp_service_account_email;
                let token = self.federated(&subject, exchange::AWS_TOKEN_TYPE, &fed.audience, email);
                return token.await.map(Identity::Token);
            }
            if let Some(c) = &fed.cred_config {
                return self.cred_config(ctx, c, fed).await.map(Identity::Token);
            }
        }
        // The boundary check refused this already for a tenant's configuration; checked again
        // here so no path reaches the process's identity for one.
        require_operator_owned(ctx, f.own)?;
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
        let field = self.fields.wif_config;
        let ns = named_namespace(ctx, field, NamedKind::ConfigMap, &c.name, c.namespace.as_deref())?;
        let text = self.refs.config_map_key(ns, &c.name, &c.key, field).await?;
        let account = external_account::parse(&text, field)?;
        if let external_account::Source::Url(url, _) = &account.source
            && !f.external_token_endpoint.is_empty()
            && *url != f.external_token_endpoint
        {
            return Err(ProviderError::BadConfig(format!(
                "{field}: credential_source.url {url:?} is not externalTokenEndpoint {:?}",
                f.external_token_endpoint
            )));
        }
        let subject = external_account::subject_token(&account, self.exchange.http(), field).await?;
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
        self.federated(&subject, exchange::JWT_TOKEN_TYPE, audience, &annotated).await
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
        let field = self.fields.wif_aws;
        let r = a
            .aws_credentials_secret_ref
            .as_ref()
            .ok_or_else(|| ProviderError::BadConfig(format!("{field} is required")))?;
        let ns = named_namespace(ctx, field, NamedKind::Secret, &r.name, r.namespace.as_deref())?;
        let secret = self.refs.secret(ns, &r.name, field).await?;
        let key = |k: &str| {
            let v =
                secret.data.as_ref().and_then(|d| d.get(k)).map(|v| String::from_utf8_lossy(&v.0).trim().to_string());
            v.filter(|v| !v.is_empty())
        };
        let (Some(id), Some(secret_key)) = (key("aws_access_key_id"), key("aws_secret_access_key")) else {
            return Err(ProviderError::BadConfig(format!(
                "{field}: Secret {ns}/{} needs the keys aws_access_key_id and aws_secret_access_key",
                r.name
            )));
        };
        let creds = aws_credential_types::Credentials::new(id, secret_key, key("aws_session_token"), None, "keyward");
        exchange::aws_subject_token(&creds, &a.region, audience, std::time::SystemTime::now())
    }
}
