//! What each provider configuration kind reaches beyond itself, for the tenant boundary
//! ([`super::check_boundary`]): the Secrets, ServiceAccounts and ConfigMaps it names, and the
//! settings that make the provider use its own identity. A new configuration kind adds its list
//! here, and the webhook, the reconciler and the providers judge it like every other.

use super::boundary::{Ambient, NamedKind, NamedObject, Reach};
use crate::SecretKeySelector;
use crate::provider_config::{CaProvider, CaProviderType, ServiceAccountSelector};
use crate::vault::VaultSpec;

/// A Secret key reference, as named.
pub fn secret<'a>(field: &'a str, s: &'a SecretKeySelector) -> NamedObject<'a> {
    NamedObject { field, kind: NamedKind::Secret, name: &s.name, namespace: s.namespace.as_deref() }
}

/// A ServiceAccount reference, as named.
pub fn service_account<'a>(field: &'a str, sa: &'a ServiceAccountSelector) -> NamedObject<'a> {
    NamedObject { field, kind: NamedKind::ServiceAccount, name: &sa.name, namespace: sa.namespace.as_deref() }
}

/// A CA reference: a Secret or a ConfigMap, as named.
pub fn ca_provider<'a>(field: &'a str, p: &'a CaProvider) -> NamedObject<'a> {
    let kind = match p.type_ {
        CaProviderType::Secret => NamedKind::Secret,
        CaProviderType::ConfigMap => NamedKind::ConfigMap,
    };
    NamedObject { field, kind, name: &p.name, namespace: p.namespace.as_deref() }
}

/// What a Vault `kubernetes` login without a ServiceAccount or Secret uses: the provider's own
/// ServiceAccount token.
pub const VAULT_OWN_TOKEN: &str = "spec.auth.kubernetes without serviceAccountRef or secretRef";

/// What a Vault `iam` login without secretRef or jwt uses: the provider's own AWS credentials
/// chain.
pub const VAULT_OWN_AWS_IDENTITY: &str = "spec.auth.iam without secretRef or jwt";

/// What a Vault `gcp` login without secretRef or workloadIdentity would use (upstream's GCE
/// login): the provider's own Google identity.
pub const VAULT_OWN_GCP_IDENTITY: &str =
    "spec.auth.gcp without secretRef or workloadIdentity (the provider's own Google identity)";

/// The service-account key Secret of a Vault `gcp` login.
pub const VAULT_GCP_KEY_FIELD: &str = "spec.auth.gcp.secretRef.secretAccessKeySecretRef";

/// The Workload Identity ServiceAccount of a Vault `gcp` login.
pub const VAULT_GCP_WI_FIELD: &str = "spec.auth.gcp.workloadIdentity.serviceAccountRef";

/// What a Vault configuration without a login method uses, as upstream allows: the provider's
/// own `VAULT_TOKEN`, or none when a Vault Agent in front of Vault logs in for it.
pub const VAULT_NO_LOGIN: &str = "spec.auth without a login method (the provider's own VAULT_TOKEN or Vault Agent)";

/// A `Vault` configuration: its CA, client certificate and login credentials.
pub fn vault_reach(spec: &VaultSpec) -> Reach<'_> {
    let mut named = Vec::new();
    let mut ambient = Vec::new();
    if let Some(p) = &spec.ca_provider {
        named.push(ca_provider("spec.caProvider", p));
    }
    if let Some(tls) = &spec.tls {
        named.extend(tls.cert_secret_ref.as_ref().map(|s| secret("spec.tls.certSecretRef", s)));
        named.extend(tls.key_secret_ref.as_ref().map(|s| secret("spec.tls.keySecretRef", s)));
    }
    let auth = &spec.auth;
    named.extend(auth.token_secret_ref.as_ref().map(|s| secret("spec.auth.tokenSecretRef", s)));
    if let Some(a) = &auth.app_role {
        named.extend(a.role_ref.as_ref().map(|s| secret("spec.auth.appRole.roleRef", s)));
        named.push(secret("spec.auth.appRole.secretRef", &a.secret_ref));
    }
    if let Some(k) = &auth.kubernetes {
        named.extend(
            k.service_account_ref.as_ref().map(|sa| service_account("spec.auth.kubernetes.serviceAccountRef", sa)),
        );
        named.extend(k.secret_ref.as_ref().map(|s| secret("spec.auth.kubernetes.secretRef", s)));
        if k.service_account_ref.is_none() && k.secret_ref.is_none() {
            ambient.push(Ambient { field: "spec.auth.kubernetes", what: VAULT_OWN_TOKEN });
        }
    }
    if let Some(j) = &auth.jwt {
        named.extend(j.secret_ref.as_ref().map(|s| secret("spec.auth.jwt.secretRef", s)));
        named.extend(j.kubernetes_service_account_token.as_ref().map(|t| {
            service_account("spec.auth.jwt.kubernetesServiceAccountToken.serviceAccountRef", &t.service_account_ref)
        }));
    }
    named.extend(auth.user_pass.as_ref().map(|u| secret("spec.auth.userPass.secretRef", &u.secret_ref)));
    named.extend(auth.ldap.as_ref().map(|u| secret("spec.auth.ldap.secretRef", &u.secret_ref)));
    if let Some(c) = &auth.cert {
        named.push(secret("spec.auth.cert.clientCert", &c.client_cert));
        named.push(secret("spec.auth.cert.secretRef", &c.secret_ref));
    }
    if let Some(iam) = &auth.iam {
        if let Some(s) = &iam.secret_ref {
            named.push(secret("spec.auth.iam.secretRef.accessKeyIDSecretRef", &s.access_key_id_secret_ref));
            named.push(secret("spec.auth.iam.secretRef.secretAccessKeySecretRef", &s.secret_access_key_secret_ref));
            named.extend(
                s.session_token_secret_ref.as_ref().map(|t| secret("spec.auth.iam.secretRef.sessionTokenSecretRef", t)),
            );
        }
        named.extend(
            iam.jwt.as_ref().map(|j| service_account("spec.auth.iam.jwt.serviceAccountRef", &j.service_account_ref)),
        );
        if iam.secret_ref.is_none() && iam.jwt.is_none() {
            ambient.push(Ambient { field: "spec.auth.iam", what: VAULT_OWN_AWS_IDENTITY });
        }
    }
    if let Some(g) = &auth.gcp {
        named.extend(g.secret_ref.as_ref().map(|s| secret(VAULT_GCP_KEY_FIELD, &s.secret_access_key_secret_ref)));
        named.extend(g.workload_identity.as_ref().map(|w| service_account(VAULT_GCP_WI_FIELD, &w.service_account_ref)));
        named.extend(g.service_account_ref.as_ref().map(|sa| service_account("spec.auth.gcp.serviceAccountRef", sa)));
        if g.is_gce() {
            ambient.push(Ambient { field: "spec.auth.gcp", what: VAULT_OWN_GCP_IDENTITY });
        }
    }
    if auth.methods().is_empty() {
        ambient.push(Ambient { field: "spec.auth", what: VAULT_NO_LOGIN });
    }
    Reach { named, ambient, allow_remote_namespace_override: false }
}

#[cfg(test)]
mod tests {
    use super::super::boundary::{ConfigOwner, check_boundary};
    use super::*;

    fn fields(owner: ConfigOwner, ns: &str, reach: &Reach<'_>) -> Vec<String> {
        check_boundary(owner, ns, reach).err().map(|e| e.0.into_iter().map(|e| e.field).collect()).unwrap_or_default()
    }

    #[test]
    fn every_reference_of_a_vault_config_is_checked() {
        let spec: VaultSpec = serde_json::from_value(serde_json::json!({
            "server": "https://vault:8200",
            "caProvider": {"type": "Secret", "name": "ca", "key": "ca.crt", "namespace": "a"},
            "tls": {"certSecretRef": {"name": "c", "namespace": "b"}, "keySecretRef": {"name": "k", "namespace": "team-a"}},
            "auth": {
                "tokenSecretRef": {"name": "t", "key": "token", "namespace": "c"},
                "appRole": {"roleRef": {"name": "r", "key": "id", "namespace": "d"},
                            "secretRef": {"name": "s", "key": "id", "namespace": "e"}},
                "kubernetes": {"role": "app"},
                "jwt": {"kubernetesServiceAccountToken": {"serviceAccountRef": {"name": "sa", "namespace": "f"}}},
            },
        }))
        .expect("spec");
        assert_eq!(
            fields(ConfigOwner::Tenant, "team-a", &vault_reach(&spec)),
            [
                "spec.caProvider.namespace",
                "spec.tls.certSecretRef.namespace",
                "spec.auth.tokenSecretRef.namespace",
                "spec.auth.appRole.roleRef.namespace",
                "spec.auth.appRole.secretRef.namespace",
                "spec.auth.jwt.kubernetesServiceAccountToken.serviceAccountRef.namespace",
                "spec.auth.kubernetes",
            ]
        );
        assert!(fields(ConfigOwner::Operator, "keyward", &vault_reach(&spec)).is_empty());
        // A kubernetes login with its own ServiceAccount names it, and uses nothing of the provider's.
        let own: VaultSpec = serde_json::from_value(serde_json::json!({"server": "https://vault:8200",
            "auth": {"kubernetes": {"role": "app", "serviceAccountRef": {"name": "app"}}}}))
        .expect("spec");
        assert!(fields(ConfigOwner::Tenant, "team-a", &vault_reach(&own)).is_empty());
        // An IAM login names its key Secrets or its ServiceAccount; without either it uses the
        // provider's own AWS identity.
        let iam = |auth: serde_json::Value| -> VaultSpec {
            serde_json::from_value(serde_json::json!({"server": "https://vault:8200", "auth": {"iam": auth}}))
                .expect("spec")
        };
        let keys = iam(serde_json::json!({"vaultRole": "app", "secretRef": {
            "accessKeyIDSecretRef": {"name": "k", "key": "id"},
            "secretAccessKeySecretRef": {"name": "k", "key": "secret", "namespace": "x"},
            "sessionTokenSecretRef": {"name": "k", "key": "token", "namespace": "y"}}}));
        assert_eq!(
            fields(ConfigOwner::Tenant, "team-a", &vault_reach(&keys)),
            [
                "spec.auth.iam.secretRef.secretAccessKeySecretRef.namespace",
                "spec.auth.iam.secretRef.sessionTokenSecretRef.namespace"
            ]
        );
        let jwt =
            iam(serde_json::json!({"vaultRole": "app", "jwt": {"serviceAccountRef": {"name": "a", "namespace": "z"}}}));
        assert_eq!(
            fields(ConfigOwner::Tenant, "team-a", &vault_reach(&jwt)),
            ["spec.auth.iam.jwt.serviceAccountRef.namespace"]
        );
        let own = iam(serde_json::json!({"vaultRole": "app"}));
        assert_eq!(fields(ConfigOwner::Tenant, "team-a", &vault_reach(&own)), ["spec.auth.iam"]);
        assert!(fields(ConfigOwner::Operator, "keyward", &vault_reach(&own)).is_empty());
    }
}
