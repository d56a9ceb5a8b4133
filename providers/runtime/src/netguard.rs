//! Which addresses a tenant's configuration may not reach: the provider Pod's own addresses and
//! loopback (its health and metrics server), and link-local and cloud metadata addresses (the
//! provider's own cloud identity lives there), however an address is written: an IPv6 form of an
//! IPv4 address (mapped, compatible, NAT64) is judged as that address too ([`ipv4_forms`]).
//!
//! Every server address a configuration chooses (a Vault `server`, a Kubernetes `server.url`,
//! Keystone's `authURL` and the Barbican endpoint its catalog names, a webhook's rendered URL)
//! is the tenant's to write, so every provider that connects to one goes through this guard:
//! [`DeniedNetworks::for_request`] is the tenant list, or nothing for the operator's own
//! configurations.
//!
//! Host names are resolved by the provider's own resolver (reqwest: [`GuardedResolver`]; kube:
//! [`kube_client`]), which checks every address a name resolves to and hands the client only
//! checked addresses, so the connection goes to an address that was checked (a second DNS answer
//! cannot swap it). IP literals in URLs (and in redirects) are checked before a request is sent
//! ([`DeniedNetworks::check_host`]).

use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;
use std::sync::Arc;

use keyward_crds::rules::ConfigOwner;

use crate::{ProviderError, RequestContext};

mod address;
#[cfg(feature = "kube-target")]
mod kube_target;
pub use address::{IpNet, an_own_address, ipv4_forms, is_own_address};
#[cfg(feature = "kube-target")]
pub use kube_target::{CallNames, kube_client};

/// The entry of a list that denies the provider's own interface addresses (other than
/// loopback, an entry of its own): its health and metrics server listens on all of them.
pub const OWN_ADDRESSES: &str = "own-addresses";

/// The entry of a list that stands for [`DEFAULT_TENANT_DENIED_NETWORKS`], so a list can add
/// the cluster's own networks without restating the default (`default,10.96.0.0/12`).
pub const DEFAULT_ENTRY: &str = "default";

/// The default of `--tenant-denied-networks` (every provider binary's flag): the provider's own
/// addresses, loopback, "this network", link-local (the metadata service of most clouds,
/// 169.254.169.254, and EKS Pod Identity, 169.254.170.23), AWS's IPv6 metadata and Pod Identity
/// network (`fd00:ec2::254`, `fd00:ec2::23`), Alibaba Cloud's metadata service (node RAM-role
/// credentials) and Azure's WireServer. An IPv6 form of an IPv4 address is checked as that
/// address too ([`ipv4_forms`]).
pub const DEFAULT_TENANT_DENIED_NETWORKS: &str = "own-addresses,127.0.0.0/8,::1/128,169.254.0.0/16,fe80::/10,\
0.0.0.0/8,::/128,fd00:ec2::/64,100.100.100.200/32,168.63.129.16/32";

/// What a list denies.
#[derive(Debug, Default)]
struct Rules {
    nets: Vec<IpNet>,
    own: bool,
}

/// Networks a request may not reach (empty: any address).
#[derive(Clone, Debug, Default)]
pub struct DeniedNetworks(Arc<Rules>);

/// A refused address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{host} resolves to {ip}, in the denied network {net}{}: a tenant's configuration may not reach the provider's \
     own addresses, loopback, link-local or cloud metadata addresses, nor the networks the operator denied",
    self.detail()
)]
pub struct Denied {
    /// The host as written.
    pub host: String,
    /// The address.
    pub ip: IpAddr,
    /// The network it is in (the address itself for one of the provider's own).
    pub net: IpNet,
    /// The IPv4 address an IPv6 form reaches, when that is what is denied.
    pub via: Option<std::net::Ipv4Addr>,
    /// Whether it is one of the provider's own interface addresses.
    pub own: bool,
}

impl Denied {
    fn detail(&self) -> String {
        match (self.via, self.own) {
            (Some(v4), true) => format!(" (as {v4}, the provider's own address)"),
            (Some(v4), false) => format!(" (as {v4})"),
            (None, true) => " (the provider's own address)".to_string(),
            (None, false) => String::new(),
        }
    }
}

impl DeniedNetworks {
    /// A list of networks.
    pub fn new(nets: Vec<IpNet>) -> Self {
        DeniedNetworks(Arc::new(Rules { nets, own: false }))
    }

    /// A comma-separated list (`--tenant-denied-networks`) of networks, [`OWN_ADDRESSES`] and
    /// [`DEFAULT_ENTRY`]; empty denies nothing.
    pub fn parse(list: &str) -> Result<Self, String> {
        let mut rules = Rules::default();
        for entry in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            match entry {
                OWN_ADDRESSES => rules.own = true,
                DEFAULT_ENTRY => {
                    let default = DeniedNetworks::parse(DEFAULT_TENANT_DENIED_NETWORKS)?;
                    rules.own |= default.0.own;
                    rules.nets.extend(default.0.nets.iter().copied());
                }
                net => rules.nets.push(IpNet::from_str(net)?),
            }
        }
        Ok(DeniedNetworks(Arc::new(rules)))
    }

    /// Nothing denied (an operator's configuration).
    pub fn none() -> Self {
        DeniedNetworks::default()
    }

    /// Whether nothing is denied.
    pub fn is_empty(&self) -> bool {
        self.0.nets.is_empty() && !self.0.own
    }

    /// Refuses `ip` when it, or an IPv4 address an IPv6 form of it reaches, is in a denied
    /// network or is one of the provider's own addresses.
    pub fn check(&self, host: &str, ip: IpAddr) -> Result<(), Denied> {
        let forms = std::iter::once((ip, None)).chain(ipv4_forms(ip).into_iter().map(|v4| (v4.into(), Some(v4))));
        for (form, via) in forms {
            if let Some(net) = self.0.nets.iter().find(|n| n.contains(form)) {
                return Err(Denied { host: host.to_string(), ip, net: *net, via, own: false });
            }
            if self.0.own && is_own_address(form) {
                return Err(Denied { host: host.to_string(), ip, net: IpNet::host(form), via, own: true });
            }
        }
        Ok(())
    }

    /// The networks a request's configuration may not reach: this list for a tenant's
    /// configuration, nothing for the operator's ([`RequestContext::owner`]).
    pub fn for_request(&self, ctx: &RequestContext) -> DeniedNetworks {
        if ctx.owner() == ConfigOwner::Operator { DeniedNetworks::none() } else { self.clone() }
    }

    /// Refuses a host that is a denied IP literal (`[::1]` too); names are checked when
    /// resolved.
    pub fn check_host(&self, host: &str) -> Result<(), Denied> {
        match host.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>() {
            Ok(ip) => self.check(host, ip),
            Err(_) => Ok(()),
        }
    }

    /// Refuses a URL whose host is a denied IP literal (names are checked when resolved).
    #[cfg(feature = "reqwest")]
    pub fn check_url(&self, url: &reqwest::Url) -> Result<(), Denied> {
        // The URL parser writes IP hosts canonically (`2130706433` becomes `127.0.0.1`).
        self.check_host(url.host_str().unwrap_or_default())
    }

    /// Resolves `host` and checks every address; the checked addresses (port `port`).
    pub async fn resolve(
        &self,
        host: &str,
        port: u16,
    ) -> Result<Vec<SocketAddr>, Box<dyn std::error::Error + Send + Sync>> {
        let host_only = host.trim_start_matches('[').trim_end_matches(']');
        let addrs: Vec<SocketAddr> = if let Ok(ip) = host_only.parse::<IpAddr>() {
            vec![SocketAddr::new(ip, port)]
        } else {
            tokio::net::lookup_host((host_only, port)).await?.collect()
        };
        if addrs.is_empty() {
            return Err(format!("{host} resolves to no address").into());
        }
        for a in &addrs {
            self.check(host, a.ip())?;
        }
        Ok(addrs)
    }
}

/// The HTTP client's resolver: every address of a name is checked before the client may
/// connect to any of them.
#[derive(Clone, Debug)]
pub struct GuardedResolver(pub DeniedNetworks);

#[cfg(feature = "reqwest")]
impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let denied = self.0.clone();
        let host = name.as_str().to_string();
        Box::pin(async move {
            let addrs = denied.resolve(&host, 0).await?;
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// Most redirects a guarded client follows (as Go's client).
pub const MAX_REDIRECTS: usize = 10;

/// A reqwest client builder that reaches only what `denied` allows: names resolved by
/// [`GuardedResolver`], no proxy (the check needs the provider to resolve and connect itself),
/// and every redirect's URL checked (at most [`MAX_REDIRECTS`]). Callers check the first URL's
/// IP literal with [`DeniedNetworks::check_url`], and add their TLS and time limits. With
/// nothing denied (the operator's configurations) it is the plain client, proxies included.
#[cfg(feature = "reqwest")]
pub fn guarded_http(denied: &DeniedNetworks) -> reqwest::ClientBuilder {
    if denied.is_empty() {
        return reqwest::Client::builder().redirect(reqwest::redirect::Policy::limited(MAX_REDIRECTS));
    }
    let redirects = denied.clone();
    let policy = reqwest::redirect::Policy::custom(move |attempt| {
        if attempt.previous().len() >= MAX_REDIRECTS {
            return attempt.error(format!("stopped after {MAX_REDIRECTS} redirects"));
        }
        match redirects.check_url(attempt.url()) {
            Ok(()) => attempt.follow(),
            Err(d) => attempt.error(d),
        }
    });
    reqwest::Client::builder().dns_resolver(GuardedResolver(denied.clone())).no_proxy().redirect(policy)
}

/// The refusal in a failed request's causes, as the provider error a caller returns
/// (`PERMISSION_DENIED`), if the guard refused it.
pub fn denied_error(err: &(dyn std::error::Error + 'static)) -> Option<ProviderError> {
    denied_in(err).map(|d| ProviderError::PermissionDenied(d.to_string()))
}

/// The [`Denied`] somewhere in `err`'s chain of causes.
pub fn denied_in<'a>(err: &'a (dyn std::error::Error + 'static)) -> Option<&'a Denied> {
    let mut current = Some(err);
    while let Some(e) = current {
        if let Some(d) = e.downcast_ref::<Denied>() {
            return Some(d);
        }
        current = e.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn default() -> DeniedNetworks {
        DeniedNetworks::parse(DEFAULT_TENANT_DENIED_NETWORKS).expect("default parses")
    }

    #[test]
    fn the_default_denies_loopback_link_local_and_metadata() {
        let d = default();
        for ip in [
            "127.0.0.1",
            "127.9.9.9",
            "::1",
            "169.254.169.254",
            "169.254.170.23",
            "fe80::1",
            "0.0.0.0",
            "::",
            "::ffff:127.0.0.1",
            "fd00:ec2::254",
            "fd00:ec2::23",
            "100.100.100.200",
            "168.63.129.16",
            // IPv6 forms of denied IPv4 addresses: compatible, NAT64 (well-known and local-use).
            "::a9fe:a9fe",
            "::100.100.100.200",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b::168.63.129.16",
            "64:ff9b::7f00:1",
            "64:ff9b:1::a9fe:a9fe",
            "64:ff9b:1:a9fe:a9:fe00::",
        ] {
            assert!(d.check("h", ip.parse().expect("ip")).is_err(), "{ip} must be denied");
        }
        for ip in [
            "10.0.0.1",
            "192.168.1.1",
            "8.8.8.8",
            "2001:db8::1",
            "fd00::1",
            "::ffff:10.0.0.1",
            "64:ff9b::a00:1",
            "100.100.100.201",
            "fd00:ec3::23",
        ] {
            assert!(d.check("h", ip.parse().expect("ip")).is_ok(), "{ip} must be allowed");
        }
        let e = d.check("h", "64:ff9b::a9fe:a9fe".parse().expect("ip")).expect_err("NAT64 of the metadata service");
        assert!(e.to_string().contains("in the denied network 169.254.0.0/16 (as 169.254.169.254)"), "{e}");
        let e = d.check("metadata.internal", "169.254.169.254".parse().expect("ip")).expect_err("denied");
        assert!(
            e.to_string()
                .contains("metadata.internal resolves to 169.254.169.254, in the denied network 169.254.0.0/16"),
            "{e}"
        );
    }

    #[cfg(feature = "reqwest")]
    #[test]
    fn url_literals_are_read_canonically() {
        let d = default();
        let url = reqwest::Url::parse("http://[::ffff:7f00:1]:8080/x").expect("url");
        assert!(d.check_url(&url).is_err(), "a mapped loopback literal");
        let url = reqwest::Url::parse("http://2130706433/").expect("url");
        assert!(d.check_url(&url).is_err(), "a decimal IPv4 literal is loopback too");
    }

    #[test]
    fn the_providers_own_addresses_are_denied_and_the_default_entry_extends_a_list() {
        let Some(own) = an_own_address() else {
            eprintln!("this host has no address but loopback: nothing to check");
            return;
        };
        let e = default().check("h", own).expect_err("an own address");
        assert!(e.to_string().contains("(the provider's own address)"), "{e}");
        assert!(DeniedNetworks::parse("169.254.0.0/16").expect("list").check("h", own).is_ok(), "without the entry");
        let cluster = DeniedNetworks::parse("default, 10.96.0.0/12").expect("default and the Service network");
        assert!(cluster.check("h", own).is_err() && cluster.check("h", "10.96.0.1".parse().expect("ip")).is_err());
        assert!(cluster.check("h", "169.254.169.254".parse().expect("ip")).is_err());
    }

    /// The providers of local tests (the conformance suite's among them) deny what the default
    /// denies, but loopback: the stores of the tests listen there.
    #[cfg(feature = "testkit")]
    #[test]
    fn local_tests_deny_the_default_list_but_loopback() {
        let loopback = ["127.0.0.0/8", "::1/128", "0.0.0.0/8", "::/128"];
        let mut want: Vec<&str> = DEFAULT_TENANT_DENIED_NETWORKS.split(',').filter(|n| !loopback.contains(n)).collect();
        let mut local: Vec<&str> = keyward_e2e::LOCAL_DENIED_NETWORKS.split(',').collect();
        want.sort_unstable();
        local.sort_unstable();
        assert_eq!(local, want);
    }

    #[test]
    fn lists_parse_and_an_empty_list_denies_nothing() {
        assert!(DeniedNetworks::parse("").expect("empty").is_empty());
        assert!(DeniedNetworks::parse("10.0.0.0/33").is_err());
        assert!(DeniedNetworks::parse("nope").is_err());
        let d = DeniedNetworks::parse("10.0.0.0/8, 2001:db8::/32").expect("parses");
        assert!(d.check("h", "10.1.2.3".parse().expect("ip")).is_err());
        assert!(d.check("h", "2001:db8::5".parse().expect("ip")).is_err());
        assert!(d.check("h", "127.0.0.1".parse().expect("ip")).is_ok());
        assert_eq!("0.0.0.0/0".parse::<IpNet>().map(|n| n.contains("1.2.3.4".parse().expect("ip"))), Ok(true));
    }

    #[tokio::test]
    async fn names_and_literals_are_resolved_then_checked() {
        let d = default();
        let e = d.resolve("localhost", 80).await.expect_err("localhost is loopback");
        assert!(e.to_string().contains("denied network"), "{e}");
        assert!(d.resolve("[::1]", 80).await.is_err());
        assert!(d.check_host("[::ffff:7f00:1]").is_err(), "a mapped loopback literal");
        assert!(d.check_host("169.254.169.254").is_err());
        assert!(d.check_host("metadata.internal").is_ok(), "names are checked when resolved");
        assert_eq!(DeniedNetworks::none().resolve("127.0.0.1", 81).await.expect("allowed").len(), 1);
    }
}
