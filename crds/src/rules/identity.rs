//! The operator's switch that lets chosen namespaces' own configurations use the provider's
//! identity (its ServiceAccount token, IRSA or another cloud credentials chain).
//!
//! By default only the operator's configurations may (a ClusterSecretStore, a ClusterProvider
//! with `authenticationScope: ProviderNamespace`): a tenant's would act as the provider, whose
//! identity the operator granted for every namespace. Upstream lets every SecretStore do it, and
//! single-tenant clusters rely on that; the operator opts namespaces in by name with
//! `--provider-identity-namespaces` (environment `KEYWARD_PROVIDER_IDENTITY_NAMESPACES`, chart
//! value `providerIdentityNamespaces`), given to the webhook and to every provider process, which
//! both apply [`super::check_boundary_with`].

use std::collections::BTreeSet;

/// The flag of the webhook and of every provider process.
pub const PROVIDER_IDENTITY_FLAG: &str = "--provider-identity-namespaces";

/// Namespaces whose own configurations may use the provider's identity. Empty by default:
/// none may.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProviderIdentityNamespaces {
    /// `*`: every namespace (upstream's behaviour, for a single-tenant cluster).
    all: bool,
    names: BTreeSet<String>,
}

impl ProviderIdentityNamespaces {
    /// None may (the default).
    pub const NONE: ProviderIdentityNamespaces = ProviderIdentityNamespaces { all: false, names: BTreeSet::new() };

    /// Reads a comma-separated list of namespace names; `*` admits every namespace.
    pub fn parse(list: &str) -> Result<Self, String> {
        let mut out = ProviderIdentityNamespaces::default();
        for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            if name == "*" {
                out.all = true;
            } else if super::validate::is_dns_label(name) {
                out.names.insert(name.to_string());
            } else {
                return Err(format!("{name:?} is not a namespace name (or * for every namespace)"));
            }
        }
        Ok(out)
    }

    /// Whether configurations living in `namespace` may use the provider's identity.
    pub fn admits(&self, namespace: &str) -> bool {
        !namespace.is_empty() && (self.all || self.names.contains(namespace))
    }
}

impl std::str::FromStr for ProviderIdentityNamespaces {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_a_star_and_nothing() {
        let some = ProviderIdentityNamespaces::parse("team-a, team-b,").expect("names");
        assert!(some.admits("team-a") && some.admits("team-b"));
        assert!(!some.admits("team-c") && !some.admits(""));
        let all = ProviderIdentityNamespaces::parse("*").expect("star");
        assert!(all.admits("anything") && !all.admits(""));
        assert!(!ProviderIdentityNamespaces::NONE.admits("team-a"));
        assert_eq!(ProviderIdentityNamespaces::parse("").expect("empty"), ProviderIdentityNamespaces::default());
        let e = ProviderIdentityNamespaces::parse("team-a,Team_B").unwrap_err();
        assert!(e.contains("\"Team_B\" is not a namespace name"), "{e}");
    }
}
