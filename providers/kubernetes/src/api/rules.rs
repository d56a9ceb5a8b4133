//! The rules of a `Kubernetes` configuration: its field errors, and what it reaches beyond
//! itself (the tenant boundary, `keyward_crds::rules::check_boundary`).

use keyward_crds::rules::{
    Reach, ValidationErrors, check_ca, check_secret_key, is_dns_label, named_ca_provider, named_secret,
    named_service_account,
};

use super::spec::KubernetesSpec;

/// Validates a Kubernetes provider configuration.
pub fn validate_kubernetes(spec: &KubernetesSpec) -> Result<(), ValidationErrors> {
    check_kubernetes(spec, true)
}

/// [`validate_kubernetes`]; `credentials_required` false for an upstream store, which upstream
/// admits without `auth` or `authRef` and fails at its first sync (the row's warning says so).
pub fn check_kubernetes(spec: &KubernetesSpec, credentials_required: bool) -> Result<(), ValidationErrors> {
    let mut errs = ValidationErrors::default();
    match (&spec.auth, &spec.auth_ref) {
        (Some(_), Some(_)) => errs.push("spec", "set exactly one of auth or authRef, not both"),
        (None, None) if credentials_required => errs.push("spec", "set exactly one of auth or authRef"),
        (None, None) => {}
        (None, Some(r)) => check_secret_key(&mut errs, "spec.authRef", r, false),
        (Some(auth), None) => {
            let methods = auth.methods();
            match methods.len() {
                0 => errs.push("spec.auth", "set exactly one of cert, token or serviceAccount"),
                1 => {}
                _ => errs.push(
                    "spec.auth",
                    format!("{} are set; set exactly one of cert, token or serviceAccount", methods.join(" and ")),
                ),
            }
            if let Some(c) = &auth.cert {
                check_secret_key(&mut errs, "spec.auth.cert.clientCert", &c.client_cert, true);
                check_secret_key(&mut errs, "spec.auth.cert.clientKey", &c.client_key, true);
            }
            if let Some(t) = &auth.token {
                check_secret_key(&mut errs, "spec.auth.token.bearerToken", &t.bearer_token, true);
            }
            if let Some(sa) = &auth.service_account
                && sa.name.is_empty()
            {
                errs.push("spec.auth.serviceAccount.name", "must not be empty: name the ServiceAccount");
            }
        }
    }
    if let Some(url) = &spec.server.url
        && !url.starts_with("https://")
    {
        errs.push("spec.server.url", format!("{url:?} must be an https:// URL"));
    }
    check_ca(&mut errs, "spec.server", spec.server.ca_bundle.as_deref(), spec.server.ca_provider.as_ref());
    if !is_dns_label(&spec.remote_namespace) {
        errs.push("spec.remoteNamespace", format!("{:?} is not a valid namespace name", spec.remote_namespace));
    }
    errs.into_result()
}

/// A `Kubernetes` configuration's reach: its CA, credentials and kubeconfig references.
pub fn kubernetes_reach(spec: &KubernetesSpec) -> Reach<'_> {
    let mut named = Vec::new();
    if let Some(p) = &spec.server.ca_provider {
        named.push(named_ca_provider("spec.server.caProvider", p));
    }
    if let Some(auth) = &spec.auth {
        if let Some(c) = &auth.cert {
            named.push(named_secret("spec.auth.cert.clientCert", &c.client_cert));
            named.push(named_secret("spec.auth.cert.clientKey", &c.client_key));
        }
        if let Some(t) = &auth.token {
            named.push(named_secret("spec.auth.token.bearerToken", &t.bearer_token));
        }
        if let Some(sa) = &auth.service_account {
            named.push(named_service_account("spec.auth.serviceAccount", sa));
        }
    }
    if let Some(r) = &spec.auth_ref {
        named.push(named_secret("spec.authRef", r));
    }
    Reach { named, ambient: Vec::new(), allow_remote_namespace_override: spec.allow_remote_namespace_override }
}

#[cfg(test)]
#[path = "rules_tests.rs"]
mod tests;
