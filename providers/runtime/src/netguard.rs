//! Which addresses a tenant's configuration may not reach: the provider pod's own loopback, and
//! link-local and cloud metadata addresses (the provider's own cloud identity lives there).
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

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;
use std::sync::Arc;

use keyward_crds::rules::ConfigOwner;

use crate::{ProviderError, RequestContext};

#[cfg(feature = "kube-target")]
mod kube_target;
#[cfg(feature = "kube-target")]
pub use kube_target::{CallNames, kube_client};

/// The default of `--tenant-denied-networks` (every provider binary's flag).
pub const DEFAULT_TENANT_DENIED_NETWORKS: &str =
    "127.0.0.0/8,::1/128,169.254.0.0/16,fe80::/10,0.0.0.0/8,::/128,fd00:ec2::254/128";

/// An IP network (`10.0.0.0/8`, `::1/128`; a bare address is a /32 or /128).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpNet {
    addr: IpAddr,
    prefix: u8,
}

impl IpNet {
    /// Whether `ip` is in this network (IPv4-mapped IPv6 addresses count as IPv4).
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, canonical(ip)) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(self.prefix)).unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX.checked_shl(128 - u32::from(self.prefix)).unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

impl fmt::Display for IpNet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

impl FromStr for IpNet {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        let (addr, prefix) = s.split_once('/').map_or((s, None), |(a, p)| (a, Some(p)));
        let addr: IpAddr = addr.parse().map_err(|_| format!("{s:?} is not an IP network (10.0.0.0/8, ::1/128)"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => p.parse::<u8>().ok().filter(|p| *p <= max).ok_or_else(|| format!("{s:?}: bad prefix length"))?,
        };
        Ok(IpNet { addr: canonical(addr), prefix })
    }
}

/// IPv4-mapped IPv6 addresses (`::ffff:127.0.0.1`) as the IPv4 address they reach.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// Networks a request may not reach (empty: any address).
#[derive(Clone, Debug, Default)]
pub struct DeniedNetworks(Arc<Vec<IpNet>>);

/// A refused address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{host} resolves to {ip}, in the denied network {net}: a tenant's configuration may not reach the provider's own \
     loopback, link-local or cloud metadata addresses"
)]
pub struct Denied {
    /// The host as written.
    pub host: String,
    /// The address.
    pub ip: IpAddr,
    /// The network it is in.
    pub net: IpNet,
}

impl DeniedNetworks {
    /// A list of networks.
    pub fn new(nets: Vec<IpNet>) -> Self {
        DeniedNetworks(Arc::new(nets))
    }

    /// A comma-separated list (`--tenant-denied-networks`); empty denies nothing.
    pub fn parse(list: &str) -> Result<Self, String> {
        let nets =
            list.split(',').filter(|s| !s.trim().is_empty()).map(IpNet::from_str).collect::<Result<Vec<_>, _>>()?;
        Ok(DeniedNetworks::new(nets))
    }

    /// Nothing denied (an operator's configuration).
    pub fn none() -> Self {
        DeniedNetworks::default()
    }

    /// Whether nothing is denied.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Refuses `ip` when it is in a denied network.
    pub fn check(&self, host: &str, ip: IpAddr) -> Result<(), Denied> {
        match self.0.iter().find(|n| n.contains(ip)) {
            Some(net) => Err(Denied { host: host.to_string(), ip, net: *net }),
            None => Ok(()),
        }
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
            "fe80::1",
            "0.0.0.0",
            "::",
            "::ffff:127.0.0.1",
            "fd00:ec2::254",
        ] {
            assert!(d.check("h", ip.parse().expect("ip")).is_err(), "{ip} must be denied");
        }
        for ip in ["10.0.0.1", "192.168.1.1", "8.8.8.8", "2001:db8::1", "fd00::1", "::ffff:10.0.0.1"] {
            assert!(d.check("h", ip.parse().expect("ip")).is_ok(), "{ip} must be allowed");
        }
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
