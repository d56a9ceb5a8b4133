//! The address rule of the guard: which networks an address is in, counting every IPv4 address
//! an IPv6 form of it reaches (IPv4-mapped, IPv4-compatible, NAT64), and whether it is one of the
//! provider's own interface addresses.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// An IP network (`10.0.0.0/8`, `::1/128`; a bare address is a /32 or /128).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpNet {
    addr: IpAddr,
    prefix: u8,
}

impl IpNet {
    /// The network of one address.
    pub fn host(ip: IpAddr) -> IpNet {
        IpNet { addr: ip, prefix: if ip.is_ipv4() { 32 } else { 128 } }
    }

    /// Whether `ip` itself is in this network (IPv4-mapped IPv6 addresses count as IPv4; the
    /// other IPv6 forms of an IPv4 address are [`ipv4_forms`]).
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
        // `::ffff:10.0.0.0/104` is the IPv4 network 10.0.0.0/8; a mapped address with a shorter
        // prefix covers more than IPv4-mapped space and stays IPv6.
        match canonical(addr) {
            IpAddr::V4(v4) if addr.is_ipv6() && prefix >= 96 => Ok(IpNet { addr: IpAddr::V4(v4), prefix: prefix - 96 }),
            IpAddr::V4(_) if addr.is_ipv6() => Ok(IpNet { addr, prefix }),
            canonical => Ok(IpNet { addr: canonical, prefix }),
        }
    }
}

/// IPv4-mapped IPv6 addresses (`::ffff:127.0.0.1`) as the IPv4 address they reach.
pub(super) fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// NAT64's well-known prefix (RFC 6052), always a /96.
const NAT64_WELL_KNOWN: u128 = 0x0064_ff9b_0000_0000_0000_0000_0000_0000;
/// NAT64's local-use prefix (RFC 8215), `64:ff9b:1::/48`; a network's translator may use any
/// RFC 6052 prefix length inside it.
const NAT64_LOCAL_USE: u128 = 0x0064_ff9b_0001_0000_0000_0000_0000_0000;

/// The IPv4 addresses an IPv6 address may reach: the one it maps (`::ffff:a.b.c.d`), the
/// deprecated IPv4-compatible form (`::a.b.c.d`), and what a NAT64 translator sends
/// `64:ff9b::a.b.c.d` to, or an address of `64:ff9b:1::/48` read with each RFC 6052 prefix
/// length that fits in it (/48, /56, /64, /96). An IPv4 address has none.
pub fn ipv4_forms(ip: IpAddr) -> Vec<Ipv4Addr> {
    let IpAddr::V6(v6) = ip else { return Vec::new() };
    let bits = u128::from(v6);
    let b = v6.octets();
    let last = Ipv4Addr::new(b[12], b[13], b[14], b[15]);
    if bits >> 32 == 0xffff || bits >> 32 == 0 || bits >> 32 == NAT64_WELL_KNOWN >> 32 {
        return vec![last];
    }
    if bits >> 80 == NAT64_LOCAL_USE >> 80 {
        // RFC 6052 skips bits 64..71 (octet 8) in every layout.
        return vec![
            Ipv4Addr::new(b[6], b[7], b[9], b[10]),
            Ipv4Addr::new(b[7], b[9], b[10], b[11]),
            Ipv4Addr::new(b[9], b[10], b[11], b[12]),
            last,
        ];
    }
    Vec::new()
}

/// Whether `ip` is an address of one of this process's network interfaces, other than
/// loopback (its own entry of the list, which local tests leave out): the provider's health
/// and metrics server listens on every interface, so its Pod address is its own server. An
/// address is this host's exactly when a socket can be bound to it; nothing is sent.
pub fn is_own_address(ip: IpAddr) -> bool {
    let ip = canonical(ip);
    if ip.is_loopback() || ip.is_unspecified() || ip.is_multicast() {
        return false;
    }
    std::net::UdpSocket::bind((ip, 0)).is_ok()
}

/// An address of this host's interfaces other than loopback, if it has one: the source
/// address of a route to a documentation address (a UDP socket's `connect` sends nothing).
pub fn an_own_address() -> Option<IpAddr> {
    let probe = |bind: IpAddr, to: IpAddr| {
        let socket = std::net::UdpSocket::bind((bind, 0)).ok()?;
        socket.connect((to, 9)).ok()?;
        let local = socket.local_addr().ok()?.ip();
        is_own_address(local).then_some(local)
    };
    probe(Ipv4Addr::UNSPECIFIED.into(), Ipv4Addr::new(198, 51, 100, 1).into())
        .or_else(|| probe(Ipv6Addr::UNSPECIFIED.into(), "2001:db8::1".parse::<Ipv6Addr>().ok()?.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }

    #[test]
    fn ipv6_forms_reach_their_ipv4_address() {
        let metadata = Ipv4Addr::new(169, 254, 169, 254);
        for form in ["::ffff:169.254.169.254", "::169.254.169.254", "64:ff9b::169.254.169.254", "64:ff9b::a9fe:a9fe"] {
            assert_eq!(ipv4_forms(ip(form)), [metadata], "{form}");
        }
        // 64:ff9b:1::/48 with a /48, /56, /64 and /96 translator prefix (RFC 6052 layouts).
        for form in
            ["64:ff9b:1:a9fe:a9:fe00::", "64:ff9b:1:a9:fe:a9fe::", "64:ff9b:1::a9:fea9:fe00:0", "64:ff9b:1::a9fe:a9fe"]
        {
            assert!(ipv4_forms(ip(form)).contains(&metadata), "{form}: {:?}", ipv4_forms(ip(form)));
        }
        for none in ["2001:db8::a9fe:a9fe", "fd00:ec2::254", "10.0.0.1", "64:ff9b:2::a9fe:a9fe"] {
            assert!(ipv4_forms(ip(none)).is_empty(), "{none}");
        }
    }

    #[test]
    fn mapped_networks_parse_as_ipv4() {
        let net: IpNet = "::ffff:10.0.0.0/104".parse().expect("mapped network");
        assert_eq!(net.to_string(), "10.0.0.0/8");
        assert!(net.contains(ip("10.1.2.3")) && !net.contains(ip("11.0.0.1")));
        // Shorter than the mapped space: an IPv6 network, which no IPv4 address is in.
        let wide: IpNet = "::ffff:0.0.0.0/80".parse().expect("wide");
        assert!(!wide.contains(ip("10.1.2.3")));
        assert!("::ffff:10.0.0.0/129".parse::<IpNet>().is_err());
    }

    #[test]
    fn own_addresses_are_those_a_socket_binds_to_and_never_loopback() {
        assert!(!is_own_address(ip("127.0.0.1")), "loopback has its own entry");
        assert!(!is_own_address(ip("0.0.0.0")));
        assert!(!is_own_address(ip("198.51.100.77")), "a documentation address is nobody's");
        if let Some(own) = an_own_address() {
            assert!(is_own_address(own), "{own}");
        }
    }
}
