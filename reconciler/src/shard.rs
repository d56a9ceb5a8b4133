//! Sharded reconcilers (`--shard`): replicas split the namespaces among themselves with no
//! coordinator beyond the API server.
//!
//! Each replica holds a Lease of its own, `<lease-name>-shard-<identity>`, labelled
//! [`SHARD_LABEL`]`=<lease-name>` and renewed like the leader Lease. The live members are the
//! holders of those Leases that have not expired; a namespace belongs to the member of highest
//! rendezvous weight ([`owner`]), so a member that leaves hands only its own namespaces to the
//! others, spread among them, and one that joins takes a share from each.
//!
//! Handover, so two replicas never work a namespace at once ([`Assignment::owns`]): a replica
//! stops working a namespace as soon as its view of the members says it is no longer the owner;
//! it starts working a namespace it gained only once that view has held for the settle time
//! ([`Settling`]), by when the previous owner saw the change too (or its Lease had expired, and
//! a member that cannot renew steps down before then). A replica whose view of its own Lease is
//! stale (its watch fell behind) owns nothing. The reconciler watches every namespace and skips
//! on arrival what it does not own: the API cannot select by a hash (see docs/reconciler.md for
//! what it costs).

pub mod members;
pub mod metrics;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;

/// The label of every shard Lease: its value is the leader Lease's name (the group).
pub const SHARD_LABEL: &str = "keyward.dev/shard-of";

/// The name of `identity`'s shard Lease in group `group`: a valid object name whatever the
/// identity is spelt with.
pub fn lease_name(group: &str, identity: &str) -> String {
    let id: String = identity
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '.' { c.to_ascii_lowercase() } else { '-' })
        .collect();
    let name = format!("{group}-shard-{}", id.trim_matches(|c| c == '-' || c == '.'));
    name.chars().take(253).collect::<String>().trim_end_matches(['-', '.']).to_string()
}

/// A stable 64-bit hash (FNV-1a, then a SplitMix64 finaliser to spread it): every replica, of
/// any build, weighs alike, which `std`'s hasher does not promise.
fn stable_hash(parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            h = (h ^ 0xff).wrapping_mul(0x0100_0000_01b3);
        }
        for b in part.bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// The owner of `namespace` among `members`: the highest rendezvous weight (ties to the larger
/// name, so it is one member whatever the order); `None` without members.
pub fn owner<'a>(namespace: &str, members: &'a [String]) -> Option<&'a str> {
    members.iter().map(|m| (stable_hash(&[m, namespace]), m.as_str())).max().map(|(_, m)| m)
}

/// This replica's last write of its own shard Lease, as [`live_members`] weighs it.
#[derive(Debug, Clone, Copy)]
pub struct OwnRenewal {
    /// The renew time it wrote.
    pub written: Timestamp,
    /// How long ago the API server acknowledged it.
    pub acknowledged_ago: Duration,
}

/// The live members of a group, sorted: the holders of the shard Leases `leases` that have not
/// expired at `now`. Without `me` among them there are none, and none while the view lags: when
/// this replica's last renewal (`own`), acknowledged more than `fresh` ago, is not in the view
/// yet, its watch fell behind and what it sees of the others cannot be trusted. (The lag is
/// judged from the acknowledgement, not from the renew time, so a slow API server that delays
/// renewals does not make a replica drop its share; but none either once its last renewal is
/// two thirds of the Lease old, before the others may take its share over.)
pub fn live_members(
    leases: &[Arc<Lease>],
    me: &str,
    now: Timestamp,
    own: Option<OwnRenewal>,
    fresh: Duration,
) -> Vec<String> {
    let mut live = Vec::new();
    let mut me_fresh = false;
    for lease in leases {
        let Some(spec) = &lease.spec else { continue };
        let Some(holder) = spec.holder_identity.as_deref().filter(|h| !h.is_empty()) else { continue };
        let Some(renewed) = spec.renew_time.as_ref().or(spec.acquire_time.as_ref()).map(|t| t.0) else { continue };
        let age = now.as_millisecond() - renewed.as_millisecond();
        let duration_ms = i64::from(spec.lease_duration_seconds.unwrap_or(15)) * 1000;
        if age >= duration_ms {
            continue;
        }
        if holder == me {
            me_fresh = own.is_none_or(|o| {
                // Lease times are written in microseconds.
                let lags = renewed.as_microsecond() < o.written.as_microsecond() && o.acknowledged_ago > fresh;
                // Renewals are late (a slow API server): step back before the others may see
                // this Lease expire.
                let late = (now.as_millisecond() - o.written.as_millisecond()) * 3 >= duration_ms * 2;
                !lags && !late
            });
        }
        live.push(holder.to_string());
    }
    if !me_fresh {
        return Vec::new();
    }
    live.sort();
    live.dedup();
    live
}

/// What one replica may work: the members as it sees them now, and as they were once that view
/// held for the settle time.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Assignment {
    me: String,
    current: Arc<Vec<String>>,
    settled: Arc<Vec<String>>,
}

impl Assignment {
    /// Whether this replica works `namespace`: it is the owner both now and by the settled view
    /// (losing a namespace takes effect at once, gaining one after the settle time).
    pub fn owns(&self, namespace: &str) -> bool {
        owner(namespace, &self.current) == Some(self.me.as_str())
            && owner(namespace, &self.settled) == Some(self.me.as_str())
    }

    /// The members as this replica sees them now.
    pub fn members(&self) -> &[String] {
        &self.current
    }
}

/// The settling of one replica's view: [`Settling::observe`] is told the live members at every
/// look and gives the [`Assignment`] they make.
#[derive(Debug)]
pub struct Settling {
    me: String,
    settle: Duration,
    current: Arc<Vec<String>>,
    since: tokio::time::Instant,
    settled: Arc<Vec<String>>,
}

impl Settling {
    /// Replica `me`, whose gained namespaces wait `settle`; it owns nothing before it looked.
    pub fn new(me: &str, settle: Duration, now: tokio::time::Instant) -> Self {
        Settling { me: me.to_string(), settle, current: Arc::default(), since: now, settled: Arc::default() }
    }

    /// The members seen at `now`.
    pub fn observe(&mut self, members: Vec<String>, now: tokio::time::Instant) -> Assignment {
        if *self.current != members {
            self.current = Arc::new(members);
            self.since = now;
        }
        if self.settled != self.current && now.duration_since(self.since) >= self.settle {
            self.settled = self.current.clone();
        }
        Assignment { me: self.me.clone(), current: self.current.clone(), settled: self.settled.clone() }
    }
}

/// A replica's share, as the members loop keeps it (`None`: sharding is off and the replica
/// works everything).
#[derive(Clone, Debug)]
pub struct Shard(tokio::sync::watch::Receiver<Assignment>);

impl Shard {
    /// The share published on `rx`.
    pub fn new(rx: tokio::sync::watch::Receiver<Assignment>) -> Self {
        Shard(rx)
    }

    /// Whether this replica works `namespace` now.
    pub fn owns(&self, namespace: &str) -> bool {
        self.0.borrow().owns(namespace)
    }

    /// The share as it is now.
    pub fn assignment(&self) -> Assignment {
        self.0.borrow().clone()
    }

    /// The assignments as they change (each one once).
    pub fn changes(&self) -> tokio::sync::watch::Receiver<Assignment> {
        self.0.clone()
    }
}

#[cfg(test)]
mod tests;
