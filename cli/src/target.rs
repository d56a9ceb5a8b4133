//! `KIND/NAME` on the command line, as kubectl spells it.

use keyward_crds::{ClusterExternalSecret, ExternalSecret, PushSecret};
use kube::discovery::ApiResource;

use crate::Error;

/// The kinds `explain` and `sync` act on: those whose refresh the reconciler drives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(clippy::enum_variant_names)] // the kinds' own names
pub enum Kind {
    /// `externalsecret`, `externalsecrets`, `es`.
    ExternalSecret,
    /// `pushsecret`, `pushsecrets`, `ps`.
    PushSecret,
    /// `clusterexternalsecret`, `clusterexternalsecrets`, `ces` (cluster-scoped).
    ClusterExternalSecret,
}

impl Kind {
    /// The kind as written in manifests.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::ExternalSecret => "ExternalSecret",
            Kind::PushSecret => "PushSecret",
            Kind::ClusterExternalSecret => "ClusterExternalSecret",
        }
    }

    /// Whether its objects live in a namespace.
    pub fn namespaced(self) -> bool {
        self != Kind::ClusterExternalSecret
    }

    /// Group, version and plural, from the CRD types.
    pub fn api_resource(self) -> ApiResource {
        match self {
            Kind::ExternalSecret => ApiResource::erase::<ExternalSecret>(&()),
            Kind::PushSecret => ApiResource::erase::<PushSecret>(&()),
            Kind::ClusterExternalSecret => ApiResource::erase::<ClusterExternalSecret>(&()),
        }
    }

    fn parse(s: &str) -> Option<Kind> {
        // `externalsecret.external-secrets.io` is how kubectl prints a fully qualified kind.
        let s = s.to_ascii_lowercase();
        let s = s.strip_suffix(".external-secrets.io").unwrap_or(&s);
        match s {
            "externalsecret" | "externalsecrets" | "es" => Some(Kind::ExternalSecret),
            "pushsecret" | "pushsecrets" | "ps" => Some(Kind::PushSecret),
            "clusterexternalsecret" | "clusterexternalsecrets" | "ces" => Some(Kind::ClusterExternalSecret),
            _ => None,
        }
    }
}

/// An object named on the command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// Its kind.
    pub kind: Kind,
    /// Its name.
    pub name: String,
}

impl Target {
    /// Parses `KIND/NAME`.
    pub fn parse(s: &str) -> Result<Target, Error> {
        let usage = || {
            Error::Usage(format!(
                "{s:?}: name an object as KIND/NAME, KIND one of externalsecret (es), pushsecret (ps), \
                 clusterexternalsecret (ces)"
            ))
        };
        let (kind, name) = s.split_once('/').ok_or_else(usage)?;
        let kind = Kind::parse(kind).ok_or_else(usage)?;
        if name.is_empty() || name.contains('/') {
            return Err(usage());
        }
        Ok(Target { kind, name: name.to_string() })
    }

    /// `kind/name` for messages, as kubectl prints it.
    pub fn display(&self) -> String {
        format!("{}/{}", self.kind.as_str().to_ascii_lowercase(), self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_parse_as_kubectl_spells_them() {
        for (s, kind) in [
            ("es/db", Kind::ExternalSecret),
            ("ExternalSecret/db", Kind::ExternalSecret),
            ("externalsecrets.external-secrets.io/db", Kind::ExternalSecret),
            ("ps/db", Kind::PushSecret),
            ("pushsecret/db", Kind::PushSecret),
            ("ces/db", Kind::ClusterExternalSecret),
            ("clusterexternalsecrets/db", Kind::ClusterExternalSecret),
        ] {
            assert_eq!(Target::parse(s).unwrap(), Target { kind, name: "db".into() }, "{s}");
        }
        for bad in ["db", "secret/db", "es/", "es/a/b", "/db"] {
            let e = Target::parse(bad).unwrap_err().to_string();
            assert!(e.contains("KIND/NAME"), "{bad}: {e}");
        }
    }
}
