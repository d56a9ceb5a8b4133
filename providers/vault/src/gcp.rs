//! Vault's GCP auth method, IAM type (`spec.auth.gcp`): a Google service account signs a JWT
//! (`sub` the account, `aud` `vault/<role>`, `exp` ten minutes ahead, within the role's
//! `max_jwt_exp`, 15 minutes by default) through IAM Credentials `signJwt`, and the provider
//! posts it with the role to `auth/<path>/login`; Vault checks the signature against the
//! account's public keys at Google and that the account is bound to the role.
//!
//! The account and its token come from the credentials the GCP Secret Manager provider reads
//! (`keyward_gcp_identity`, the same code): a service-account key (`secretRef`), or GKE
//! Workload Identity (`workloadIdentity`, whose ServiceAccount names the Google service account
//! in its `iam.gke.io/gcp-service-account` annotation); the account signs for itself, so it
//! needs `iam.serviceAccounts.signJwt` on itself (`roles/iam.serviceAccountTokenCreator`).
//! What identifies the credentials is read when the client is built; the token and the
//! signature are made at each login, so a login never carries a stale JWT. Upstream's GCE
//! login (neither field: the metadata server's identity document) is not served. Google's
//! endpoints are the operator's (`KEYWARD_GCP_*` of the provider process), never a
//! configuration's.

use std::time::{Duration, SystemTime};

use keyward_crds::gcp::GCPSMAuth;
use keyward_crds::rules::{NamedKind, VAULT_GCP_KEY_FIELD, VAULT_GCP_WI_FIELD, VAULT_OWN_GCP_IDENTITY};
use keyward_crds::vault::VaultGcpAuth;
use keyward_gcp_identity::exchange::GCP_SA_ANNOTATION;
use keyward_gcp_identity::{Fields, Resolver, TokenExchange};
use keyward_provider_runtime::refs::{ClusterRefs, named_namespace};
use keyward_provider_runtime::{ProviderError, RequestContext};
use serde_json::{Value, json};

/// How the login's credentials are named in messages and by the tenant boundary (federation is
/// not part of Vault's `gcp` block).
const FIELDS: Fields = Fields {
    key: VAULT_GCP_KEY_FIELD,
    wi: VAULT_GCP_WI_FIELD,
    wif_sa: "spec.auth.gcp.workloadIdentityFederation.serviceAccountRef",
    wif_aws: "spec.auth.gcp.workloadIdentityFederation.awsSecurityCredentials.awsCredentialsSecretRef",
    wif_config: "spec.auth.gcp.workloadIdentityFederation.credConfig",
    own: VAULT_OWN_GCP_IDENTITY,
};
/// How long the signed JWT is valid (as Vault's own GCP login helper).
const JWT_LIFETIME: Duration = Duration::from_secs(600);

/// A GCP login as configured, signed afresh at each login.
#[derive(Clone)]
pub(crate) struct GcpLogin {
    role: String,
    auth: GCPSMAuth,
    project: String,
    ctx: RequestContext,
    refs: ClusterRefs,
    exchange: TokenExchange,
    identity: Vec<Vec<u8>>,
}

impl GcpLogin {
    /// Reads what identifies the credentials `gcp` names (the key, or the ServiceAccount and
    /// the account it is annotated with), refusing upstream's GCE login.
    pub(crate) async fn read(
        refs: &ClusterRefs,
        ctx: &RequestContext,
        gcp: &VaultGcpAuth,
        exchange: &TokenExchange,
    ) -> Result<GcpLogin, ProviderError> {
        let identity = if let Some(s) = &gcp.secret_ref {
            let key = refs.selected_secret_key(ctx, VAULT_GCP_KEY_FIELD, &s.secret_access_key_secret_ref, "").await?;
            vec![b"key".to_vec(), key]
        } else if let Some(wi) = &gcp.workload_identity {
            let sa = &wi.service_account_ref;
            let ns =
                named_namespace(ctx, VAULT_GCP_WI_FIELD, NamedKind::ServiceAccount, &sa.name, sa.namespace.as_deref())?;
            let account = refs.service_account_annotation(ns, &sa.name, GCP_SA_ANNOTATION, VAULT_GCP_WI_FIELD).await?;
            let mut parts = vec![b"workload-identity".to_vec(), format!("{ns}/{}", sa.name).into_bytes()];
            for p in [&account.unwrap_or_default(), &wi.cluster_project_id, &wi.cluster_location, &wi.cluster_name] {
                parts.push(p.clone().into_bytes());
            }
            parts
        } else {
            return Err(ProviderError::Unsupported(
                "spec.auth.gcp without secretRef or workloadIdentity is upstream's GCE login (the metadata server's \
                 identity document), which this provider does not serve: name a service-account key (secretRef) or \
                 workloadIdentity"
                    .into(),
            ));
        };
        let project = [&gcp.project_id, &exchange.endpoints().project_id]
            .into_iter()
            .find(|p| !p.is_empty())
            .cloned()
            .unwrap_or_default();
        Ok(GcpLogin {
            role: gcp.role.clone(),
            auth: gcp.credentials(),
            project,
            ctx: ctx.clone(),
            refs: refs.clone(),
            exchange: exchange.clone(),
            identity,
        })
    }

    /// What identifies these credentials for the token cache: the same parts give the same
    /// Vault identity.
    pub(crate) fn identity_parts(&self) -> Vec<Vec<u8>> {
        let mut parts = vec![b"gcp".to_vec(), self.role.clone().into_bytes(), self.project.clone().into_bytes()];
        parts.extend(self.identity.iter().cloned());
        parts
    }

    /// The body of `POST auth/<path>/login`: a token of the account, a JWT it signs now.
    pub(crate) async fn login_body(&self) -> Result<Value, ProviderError> {
        let resolver = Resolver { refs: &self.refs, exchange: &self.exchange, fields: FIELDS };
        let (email, token) = resolver.account_token(&self.ctx, &self.auth, &self.project).await?;
        let claims = login_claims(&email, &self.role, SystemTime::now());
        let jwt = self.exchange.sign_jwt(&token.value, &email, &claims).await?;
        Ok(json!({"role": self.role, "jwt": jwt}))
    }
}

/// The claims Vault's GCP auth method checks: the account, the role's audience, an expiry
/// within [`JWT_LIFETIME`] of `now`.
fn login_claims(email: &str, role: &str, now: SystemTime) -> Value {
    let exp = (now + JWT_LIFETIME).duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    json!({"sub": email, "aud": format!("vault/{role}"), "exp": exp})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_name_the_account_the_role_and_expire_within_fifteen_minutes() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let c = login_claims("sa@p.iam.gserviceaccount.com", "reader", now);
        assert_eq!(c["sub"], "sa@p.iam.gserviceaccount.com");
        assert_eq!(c["aud"], "vault/reader");
        let exp = c["exp"].as_u64().unwrap();
        assert!(exp > 1_000_000 && exp <= 1_000_000 + 15 * 60, "{exp}");
    }
}
