//! Provider addresses (`host:port`) and the namespace of the TLS Secret used to reach them.

/// A parsed provider address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Address {
    /// Host name or IP address (IPv6 without brackets).
    pub host: String,
    /// TCP port.
    pub port: u16,
}

/// Parses `host:port` (or `[v6]:port`). The message says what is wrong.
pub fn parse_address(address: &str) -> Result<Address, String> {
    let hint = "expected host:port, for example keyward-provider-kubernetes.keyward.svc:8443";
    if address.contains("://") {
        return Err(format!("{address:?} must not have a scheme; {hint}"));
    }
    let (host, port) = if let Some(rest) = address.strip_prefix('[') {
        let (host, port) =
            rest.split_once("]:").ok_or_else(|| format!("{address:?} is not a valid address; {hint}"))?;
        if host.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(format!("{host:?} is not a valid IPv6 address; {hint}"));
        }
        (host, port)
    } else {
        address.rsplit_once(':').ok_or_else(|| format!("{address:?} has no port; {hint}"))?
    };
    let port: u16 = port
        .parse()
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| format!("port {port:?} of {address:?} is not a number between 1 and 65535"))?;
    if host.is_empty() {
        return Err(format!("{address:?} has no host; {hint}"));
    }
    if !address.starts_with('[') && !is_dns_name_or_ipv4(host) {
        return Err(format!("host {host:?} of {address:?} is not a DNS name or IP address; {hint}"));
    }
    Ok(Address { host: host.to_string(), port })
}

fn is_dns_name_or_ipv4(host: &str) -> bool {
    if host.parse::<std::net::Ipv4Addr>().is_ok() {
        return true;
    }
    host.len() <= 253
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

/// The cluster DNS domain a Service name may end in.
pub const CLUSTER_DOMAIN: &str = "cluster.local";

/// The namespace holding the TLS Secret used to reach a provider: the namespace in the
/// address when it is exactly a Service name (`svc.ns.svc:port` or
/// `svc.ns.svc.cluster.local:port`), else the auth namespace.
///
/// Only a whole Service name counts: a host that merely contains `.ns.svc.` (such as
/// `x.keyward.svc.example.com`) is somebody else's name, and taking its namespace would send the
/// reconciler's client certificate for `ns` to that host.
pub fn tls_secret_namespace(address: &str, auth_namespace: &str) -> String {
    if let Ok(addr) = parse_address(address) {
        let host = addr.host.to_ascii_lowercase();
        let host = host.strip_suffix('.').unwrap_or(&host);
        let service = host.strip_suffix(&format!(".{CLUSTER_DOMAIN}")).unwrap_or(host);
        let labels: Vec<&str> = service.split('.').collect();
        if let [_, ns, "svc"] = labels.as_slice() {
            return (*ns).to_string();
        }
    }
    auth_namespace.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_table() {
        let ok = [
            ("p.keyward.svc:8443", "p.keyward.svc", 8443),
            ("127.0.0.1:50051", "127.0.0.1", 50051),
            ("[::1]:9000", "::1", 9000),
            ("localhost:1", "localhost", 1),
        ];
        for (input, host, port) in ok {
            assert_eq!(parse_address(input), Ok(Address { host: host.into(), port }), "{input}");
        }
        let bad = [
            ("p.keyward.svc", "has no port"),
            ("https://p:443", "must not have a scheme"),
            ("p:0", "is not a number between 1 and 65535"),
            ("p:70000", "is not a number between 1 and 65535"),
            (":80", "has no host"),
            ("under_score:80", "is not a DNS name or IP address"),
            ("[zz]:80", "is not a valid IPv6 address"),
        ];
        for (input, want) in bad {
            let err = parse_address(input).unwrap_err();
            assert!(err.contains(want), "{input}: {err}");
        }
    }

    #[test]
    fn tls_namespace_table() {
        let cases = [
            ("prov.keyward.svc:8443", "auth", "keyward"),
            ("prov.keyward.svc.cluster.local:8443", "auth", "keyward"),
            ("prov.keyward:8443", "auth", "auth"),
            ("127.0.0.1:8443", "auth", "auth"),
            ("localhost:8443", "team-a", "team-a"),
            ("not an address", "auth", "auth"),
            // Names that only contain a Service name are not one.
            ("x.keyward.svc.evil.com:8443", "team-a", "team-a"),
            ("x.keyward.svc.cluster.local.evil.com:8443", "team-a", "team-a"),
            ("a.x.keyward.svc:8443", "team-a", "team-a"),
            ("x.keyward.svc.other.local:8443", "team-a", "team-a"),
            ("prov.Keyward.SVC:8443", "auth", "keyward"),
        ];
        for (address, auth, want) in cases {
            assert_eq!(tls_secret_namespace(address, auth), want, "{address}");
        }
    }
}
