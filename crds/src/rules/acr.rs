//! An ACRAccessToken's spec: what the Azure provider needs before it asks Entra ID and the
//! registry anything, checked at admission (naming the field) and again by the provider before
//! each generation. Who may use which identity (the tenant boundary) is the provider's check, as
//! for every generator that calls a store.

use super::{FieldError, check_key_selector, check_server_url};
use crate::generators::acr::{AcrAccessTokenSpec, AcrAuth, AzureEnvironmentType};

/// The identity an ACRAccessToken authenticates with: the first of `auth`'s methods in
/// upstream's order (service principal, managed identity, workload identity).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcrIdentity {
    /// `auth.servicePrincipal`.
    ServicePrincipal,
    /// `auth.managedIdentity`.
    ManagedIdentity,
    /// `auth.workloadIdentity`.
    WorkloadIdentity,
}

/// The method `auth` selects, as upstream picks it; `None` when none is set.
pub fn acr_identity(auth: &AcrAuth) -> Option<AcrIdentity> {
    if auth.service_principal.is_some() {
        Some(AcrIdentity::ServicePrincipal)
    } else if auth.managed_identity.is_some() {
        Some(AcrIdentity::ManagedIdentity)
    } else if auth.workload_identity.is_some() {
        Some(AcrIdentity::WorkloadIdentity)
    } else {
        None
    }
}

/// The field errors of an ACRAccessToken spec at `path` (`spec`, or a ClusterGenerator's
/// `spec.generator.acrAccessTokenSpec`).
pub fn validate_acr_access_token(path: &str, spec: &AcrAccessTokenSpec) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Err(m) = check_registry(&spec.registry) {
        errs.push(FieldError::new(format!("{path}.registry"), m));
    }
    match spec.environment_type.unwrap_or_default() {
        AzureEnvironmentType::GermanCloud => errs.push(FieldError::new(
            format!("{path}.environmentType"),
            "GermanCloud (Microsoft Cloud Deutschland) was discontinued on October 29, 2021: use another cloud",
        )),
        AzureEnvironmentType::AzureStackCloud => errs.push(FieldError::new(
            format!("{path}.environmentType"),
            "AzureStackCloud has no endpoints an ACRAccessToken can name (as upstream, which has no token audience \
             for it): use PublicCloud, USGovernmentCloud or ChinaCloud",
        )),
        _ => {}
    }
    if spec.scope.as_deref().is_some_and(|s| s.trim().is_empty() || s.chars().any(char::is_control)) {
        errs.push(FieldError::new(
            format!("{path}.scope"),
            "must be a scope such as repository:my-repository:pull, or be left out",
        ));
    }
    let auth = format!("{path}.auth");
    match acr_identity(&spec.auth) {
        None => errs.push(FieldError::new(
            auth,
            "is required: set one of servicePrincipal, managedIdentity or workloadIdentity",
        )),
        Some(AcrIdentity::ServicePrincipal) => {
            if spec.tenant_id.as_deref().is_none_or(str::is_empty) {
                errs.push(FieldError::new(format!("{path}.tenantId"), "is required for auth.servicePrincipal"));
            }
            let secret_ref = spec.auth.service_principal.as_ref().map(|s| &s.secret_ref);
            let field = format!("{auth}.servicePrincipal.secretRef");
            for (key, sel) in [
                ("clientId", secret_ref.and_then(|r| r.client_id.as_ref())),
                ("clientSecret", secret_ref.and_then(|r| r.client_secret.as_ref())),
            ] {
                match sel {
                    Some(sel) => check_key_selector(&mut errs, &format!("{field}.{key}"), sel),
                    None => errs.push(FieldError::new(format!("{field}.{key}"), "is required")),
                }
            }
        }
        Some(AcrIdentity::WorkloadIdentity) => {
            let sa = spec.auth.workload_identity.as_ref().and_then(|w| w.service_account_ref.as_ref());
            if sa.is_some_and(|sa| sa.name.is_empty()) {
                errs.push(FieldError::new(format!("{auth}.workloadIdentity.serviceAccountRef.name"), "is required"));
            }
        }
        Some(AcrIdentity::ManagedIdentity) => {}
    }
    errs
}

/// A registry is a host name (with a port, at most): the provider asks
/// `https://<registry>/oauth2/exchange`, as upstream does.
fn check_registry(registry: &str) -> Result<(), String> {
    let example = "write the registry's host name alone, for example example.azurecr.io";
    if registry.is_empty() {
        return Err(format!("is required: {example}"));
    }
    if registry.contains(['/', '?', '#', '@']) {
        return Err(format!("{registry:?} is not a host name: {example}"));
    }
    check_server_url(&format!("https://{registry}"), true).map_err(|e| format!("{registry:?} {e}: {example}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields(spec: serde_json::Value) -> Vec<String> {
        let spec: AcrAccessTokenSpec = serde_json::from_value(spec).expect("an ACRAccessToken spec");
        validate_acr_access_token("spec", &spec).into_iter().map(|e| e.field).collect()
    }

    /// Upstream's example (release 2.9.0) sets every method; the service principal is used.
    #[test]
    fn upstreams_example_is_valid_and_picks_the_service_principal() {
        let spec = json!({
            "tenantId": "11111111-2222-3333-4444-111111111111", "registry": "example.azurecr.io",
            "scope": "repository:foo:pull,push", "environmentType": "PublicCloud",
            "auth": {
                "servicePrincipal": {"secretRef": {"clientSecret": {"name": "az-secret", "key": "clientsecret"},
                                                   "clientId": {"name": "az-secret", "key": "clientid"}}},
                "managedIdentity": {"identityId": "11111111-2222-3333-4444-111111111111"},
                "workloadIdentity": {"serviceAccountRef": {"name": "my-service-account", "audiences": []}},
            },
        });
        assert_eq!(fields(spec.clone()), Vec::<String>::new());
        let parsed: AcrAccessTokenSpec = serde_json::from_value(spec).expect("spec");
        assert_eq!(acr_identity(&parsed.auth), Some(AcrIdentity::ServicePrincipal));
        let mi = json!({"tenantId": "t", "registry": "example.azurecr.io",
                        "auth": {"managedIdentity": {"identityId": "i"}}});
        assert_eq!(fields(mi), Vec::<String>::new());
    }

    #[test]
    fn errors_name_the_fields() {
        assert_eq!(fields(json!({"registry": "", "auth": {}})), ["spec.registry", "spec.auth"]);
        let sp = json!({"registry": "https://example.azurecr.io", "environmentType": "GermanCloud",
                        "auth": {"servicePrincipal": {"secretRef": {"clientId": {"name": "s"}}}}});
        assert_eq!(
            fields(sp),
            [
                "spec.registry",
                "spec.environmentType",
                "spec.tenantId",
                "spec.auth.servicePrincipal.secretRef.clientId.key",
                "spec.auth.servicePrincipal.secretRef.clientSecret",
            ]
        );
        let wi = json!({"registry": "r.azurecr.io:8443", "scope": " ",
                        "auth": {"workloadIdentity": {"serviceAccountRef": {"name": ""}}}});
        assert_eq!(fields(wi), ["spec.scope", "spec.auth.workloadIdentity.serviceAccountRef.name"]);
    }

    #[test]
    fn a_registry_is_a_host() {
        for ok in ["example.azurecr.io", "example.azurecr.io:443", "127.0.0.1:8443"] {
            assert_eq!(check_registry(ok), Ok(()), "{ok}");
        }
        for bad in ["", "example.azurecr.io/v2", "user@example.azurecr.io", "example.azurecr.io:http", "a b"] {
            assert!(check_registry(bad).is_err(), "{bad}");
        }
    }
}
