//! `provider.external-secrets.io/v2alpha1` **Barbican**: the configuration of the OpenStack
//! Barbican provider (always built; the webhook and the reconciler read it with
//! `default-features = false`).
//!
//! The spec is upstream External Secrets' `spec.provider.barbican` block field for field (same
//! JSON names), so a SecretStore's block translates 1:1: Keystone's v3 URL (`authURL`), the
//! project (`tenantName`) and domain (`domainName`) to log in to, the region of Barbican's
//! catalog endpoint (`region`), and the user name (literal or from a Secret) and password (from a
//! Secret).

use keyward_crds::SecretKeySelector;
use keyward_crds::rules::{
    FieldError, NamedKind, NamedObject, Reach, ValidationErrors, check_key_selector, check_server_url,
};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Configuration of the Barbican provider: where Keystone is and whom to log in as.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "provider.external-secrets.io",
    version = "v2alpha1",
    kind = "Barbican",
    doc = "Barbican configures the OpenStack Barbican provider: the Keystone v3 endpoint, project, domain and credentials it logs in with, and the region of Barbican's endpoint.",
    plural = "barbicans",
    category = "external-secrets",
    namespaced,
    printcolumn = r#"{"name":"AuthURL","type":"string","jsonPath":".spec.authURL"}"#,
    printcolumn = r#"{"name":"Tenant","type":"string","jsonPath":".spec.tenantName"}"#,
    printcolumn = r#"{"name":"Region","type":"string","jsonPath":".spec.region"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
pub struct BarbicanSpec {
    /// Keystone's identity endpoint, `http(s)://host:port/v3` (`/v3` is added when the URL has
    /// no version).
    #[serde(rename = "authURL", default, skip_serializing_if = "String::is_empty")]
    pub auth_url: String,
    /// The project (tenant) the token is scoped to; Barbican's secrets belong to projects.
    #[serde(rename = "tenantName", default, skip_serializing_if = "String::is_empty")]
    pub tenant_name: String,
    /// The domain of the user and of the project.
    #[serde(rename = "domainName", default, skip_serializing_if = "String::is_empty")]
    pub domain_name: String,
    /// The region of Barbican's (`key-manager`) endpoint in Keystone's catalog; any region
    /// when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub region: String,
    /// The credentials.
    pub auth: BarbicanAuth,
}

/// The credentials of the Keystone login.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct BarbicanAuth {
    /// The user name: a literal or a Secret key.
    pub username: BarbicanProviderUsernameRef,
    /// The password, from a Secret key.
    pub password: BarbicanProviderPasswordRef,
}

/// The user name: exactly one of `value` and `secretRef`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1, "maxProperties" = 1))]
pub struct BarbicanProviderUsernameRef {
    /// The user name itself.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
    /// A Secret key holding the user name. Its namespace is honoured only for a configuration
    /// owned by the cluster operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretKeySelector>,
}

/// The password, from a Secret.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BarbicanProviderPasswordRef {
    /// A Secret key holding the password. Its namespace is honoured only for a configuration
    /// owned by the cluster operator.
    #[serde(default)]
    pub secret_ref: Option<SecretKeySelector>,
}

/// The field of the user name's Secret reference.
pub const USERNAME_FIELD: &str = "spec.auth.username.secretRef";
/// The field of the password's Secret reference.
pub const PASSWORD_FIELD: &str = "spec.auth.password.secretRef";

/// Whether `url` is an `http://` or `https://` URL with a host (and a numeric port, if any).
pub fn check_http_url(url: &str) -> Result<(), String> {
    check_server_url(url, false)
}

/// The field errors of a `Barbican` configuration, with paths as in the configuration object
/// (`spec.authURL`, `spec.auth.username`, …).
pub fn validate_barbican(spec: &BarbicanSpec) -> Result<(), ValidationErrors> {
    let mut errs = Vec::new();
    if spec.auth_url.is_empty() {
        errs.push(FieldError::new("spec.authURL", "is required: Keystone's v3 endpoint, https://host:5000/v3"));
    } else if let Err(e) = check_http_url(&spec.auth_url) {
        errs.push(FieldError::new("spec.authURL", format!("{:?} {e}", spec.auth_url)));
    }
    // Keystone scopes a password login to a project named within a domain, and finds the user
    // by name within a domain: without either there is no token with a catalog.
    if spec.tenant_name.is_empty() {
        errs.push(FieldError::new("spec.tenantName", "is required: the project whose secrets are read"));
    }
    if spec.domain_name.is_empty() {
        errs.push(FieldError::new("spec.domainName", "is required: the domain of the user and the project"));
    }
    let user = &spec.auth.username;
    match (user.value.is_empty(), &user.secret_ref) {
        (true, None) => errs.push(FieldError::new("spec.auth.username", "requires either value or secretRef")),
        (false, Some(_)) => errs.push(FieldError::new("spec.auth.username", "takes value or secretRef, not both")),
        (true, Some(sel)) => check_key_selector(&mut errs, USERNAME_FIELD, sel),
        (false, None) => {}
    }
    match &spec.auth.password.secret_ref {
        None => errs.push(FieldError::new(PASSWORD_FIELD, "is required")),
        Some(sel) => check_key_selector(&mut errs, PASSWORD_FIELD, sel),
    }
    ValidationErrors(errs).into_result()
}

fn secret<'a>(field: &'a str, s: &'a SecretKeySelector) -> NamedObject<'a> {
    NamedObject { field, kind: NamedKind::Secret, name: &s.name, namespace: s.namespace.as_deref() }
}

/// What a `Barbican` configuration reaches in the cluster: the Secrets of its user name and
/// password. It uses no identity of the provider's own.
pub fn barbican_reach(spec: &BarbicanSpec) -> Reach<'_> {
    let mut named = Vec::new();
    named.extend(spec.auth.username.secret_ref.as_ref().map(|s| secret(USERNAME_FIELD, s)));
    named.extend(spec.auth.password.secret_ref.as_ref().map(|s| secret(PASSWORD_FIELD, s)));
    Reach { named, ambient: Vec::new(), allow_remote_namespace_override: false }
}

impl keyward_crds::registry::ProviderSpec for BarbicanSpec {
    fn validate(&self) -> Result<(), ValidationErrors> {
        validate_barbican(self)
    }

    fn reach(&self) -> Reach<'_> {
        barbican_reach(self)
    }
}

/// The registry row of `Barbican`: served by `keyward-provider-barbican`, and by it also the
/// SecretStores with `spec.provider.barbican`.
pub static KIND: keyward_crds::registry::ProviderKind = keyward_crds::registry::ProviderKind {
    kind: "Barbican",
    plural: "barbicans",
    provider: "barbican",
    stores: &[keyward_crds::registry::StoreBlock::spec("barbican")],
    admit: keyward_crds::registry::admit_spec::<BarbicanSpec>,
    crd: <Barbican as kube::CustomResourceExt>::crd,
};

#[cfg(test)]
mod tests {
    use super::*;
    use keyward_crds::registry::ProviderSpec;
    use serde_json::json;

    fn upstream_docs_block() -> serde_json::Value {
        json!({
            "authURL": "https://keystone.example.com:5000/v3",
            "tenantName": "my-project",
            "domainName": "default",
            "region": "RegionOne",
            "auth": {
                "username": {"secretRef": {"name": "barbican-secret", "key": "username"}},
                "password": {"secretRef": {"name": "barbican-secret", "key": "password"}}
            }
        })
    }

    fn fields(spec: &BarbicanSpec) -> Vec<String> {
        match spec.validate() {
            Ok(()) => Vec::new(),
            Err(e) => e.0.into_iter().map(|f| f.field).collect(),
        }
    }

    #[test]
    fn upstream_block_reads_and_round_trips() {
        let block = upstream_docs_block();
        let spec: BarbicanSpec = serde_json::from_value(block.clone()).expect("upstream's block");
        assert_eq!(spec.auth_url, "https://keystone.example.com:5000/v3");
        assert_eq!(spec.tenant_name, "my-project");
        assert_eq!(serde_json::to_value(&spec).expect("json"), block, "the same JSON names");
        assert_eq!(fields(&spec), Vec::<String>::new());
        let reach = spec.reach();
        let named: Vec<_> = reach.named.iter().map(|n| (n.field, n.name)).collect();
        assert_eq!(named, vec![(USERNAME_FIELD, "barbican-secret"), (PASSWORD_FIELD, "barbican-secret")]);
        assert!(reach.ambient.is_empty());
    }

    #[test]
    fn field_errors_name_the_fields() {
        let mut spec: BarbicanSpec = serde_json::from_value(upstream_docs_block()).expect("block");
        spec.auth_url = "ftp://keystone".into();
        spec.auth.username.value = "alice".into();
        spec.auth.password.secret_ref = Some(SecretKeySelector { name: "pw".into(), ..Default::default() });
        assert_eq!(fields(&spec), ["spec.authURL", "spec.auth.username", "spec.auth.password.secretRef.key"]);
        let empty = BarbicanSpec::default();
        assert_eq!(
            fields(&empty),
            [
                "spec.authURL",
                "spec.tenantName",
                "spec.domainName",
                "spec.auth.username",
                "spec.auth.password.secretRef"
            ]
        );
        let literal: BarbicanSpec = serde_json::from_value(json!({
            "authURL": "http://127.0.0.1:5000", "tenantName": "p", "domainName": "d",
            "auth": {"username": {"value": "u"}, "password": {"secretRef": {"name": "s", "key": "k"}}}
        }))
        .expect("block");
        assert_eq!(fields(&literal), Vec::<String>::new());
        assert_eq!(literal.reach().named.len(), 1);
    }

    #[test]
    fn urls() {
        for ok in ["https://keystone.example.com:5000/v3", "http://127.0.0.1:5000", "https://[::1]:5000/identity/v3"] {
            assert_eq!(check_http_url(ok), Ok(()), "{ok}");
        }
        for bad in [
            "keystone:5000",
            "https://",
            "https://user:pw@keystone/v3",
            "https://keystone:port/v3",
            "https://keystone/v3?x=1",
            "https://key stone/v3",
        ] {
            assert!(check_http_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_crd_is_namespaced_in_the_provider_group() {
        let crd = (KIND.crd)();
        assert_eq!(crd.spec.group, "provider.external-secrets.io");
        assert_eq!(crd.spec.names.plural, "barbicans");
        assert_eq!(crd.spec.scope, "Namespaced");
        let schema = serde_json::to_string(&crd.spec.versions[0].schema).expect("schema");
        assert!(schema.contains("authURL") && schema.contains("tenantName") && schema.contains("secretRef"));
        assert!(
            schema.contains("\"maxProperties\":1") && schema.contains("\"minProperties\":1"),
            "username: one of two"
        );
    }
}
