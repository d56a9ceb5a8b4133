//! A `coordination.k8s.io/v1` Lease so that only one replica of the certificate loop acts.
//! Optimistic concurrency does the locking: every write carries the `resourceVersion` it read,
//! and a conflict means another replica won.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};

/// May `me` take or keep a lease held by `holder`, last renewed at `renewed` (unix seconds),
/// for `duration_secs`, at `now` (unix seconds)?
pub fn lease_is_available(holder: Option<&str>, renewed: Option<i64>, duration_secs: i64, me: &str, now: i64) -> bool {
    match holder {
        None | Some("") => true,
        Some(h) if h == me => true,
        Some(_) => renewed.is_none_or(|r| r + duration_secs < now),
    }
}

/// One replica's handle on the Lease.
#[derive(Clone)]
pub struct LeaseLock {
    api: Api<Lease>,
    name: String,
    identity: String,
    duration: Duration,
}

impl LeaseLock {
    /// The Lease `name` in `namespace`, held as `identity` for `duration` per renewal.
    pub fn new(client: Client, namespace: &str, name: &str, identity: &str, duration: Duration) -> Self {
        LeaseLock {
            api: Api::namespaced(client, namespace),
            name: name.to_string(),
            identity: identity.to_string(),
            duration,
        }
    }

    /// This replica's identity.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Takes the Lease if it is free or expired, renews it if held: `Ok(true)` when this replica
    /// is the leader now.
    pub async fn try_acquire_or_renew(&self) -> Result<bool, kube::Error> {
        let now = now_micro();
        let secs = i32::try_from(self.duration.as_secs()).unwrap_or(i32::MAX);
        let Some(mut lease) = self.api.get_opt(&self.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta { name: Some(self.name.clone()), ..Default::default() },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.identity.clone()),
                    lease_duration_seconds: Some(secs),
                    acquire_time: Some(now.clone()),
                    renew_time: Some(now),
                    lease_transitions: Some(0),
                    ..Default::default()
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(e) if is_conflict(&e) => Ok(false),
                Err(e) => Err(e),
            };
        };
        let spec = lease.spec.get_or_insert_with(Default::default);
        let holder = spec.holder_identity.clone();
        let renewed = spec.renew_time.as_ref().map(|t| t.0.as_second());
        let duration = spec.lease_duration_seconds.map(i64::from).unwrap_or(i64::from(secs));
        if !lease_is_available(holder.as_deref(), renewed, duration, &self.identity, now.0.as_second()) {
            return Ok(false);
        }
        if holder.as_deref() != Some(self.identity.as_str()) {
            spec.holder_identity = Some(self.identity.clone());
            spec.acquire_time = Some(now.clone());
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
        spec.lease_duration_seconds = Some(secs);
        spec.renew_time = Some(now);
        match self.api.replace(&self.name, &PostParams::default(), &lease).await {
            Ok(_) => Ok(true),
            Err(e) if is_conflict(&e) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Gives the Lease up (on shutdown) so another replica takes over at once.
    pub async fn release(&self) -> Result<(), kube::Error> {
        let Some(mut lease) = self.api.get_opt(&self.name).await? else { return Ok(()) };
        let Some(spec) = lease.spec.as_mut() else { return Ok(()) };
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        match self.api.replace(&self.name, &PostParams::default(), &lease).await {
            Ok(_) => Ok(()),
            Err(e) if is_conflict(&e) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

fn now_micro() -> MicroTime {
    let d = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
    let micros = i32::try_from(d.subsec_micros()).unwrap_or(0);
    MicroTime(Timestamp::new(secs, micros * 1000).unwrap_or(Timestamp::UNIX_EPOCH))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_free_or_own_lease_is_available() {
        assert!(lease_is_available(None, None, 15, "a", 100));
        assert!(lease_is_available(Some(""), Some(99), 15, "a", 100));
        assert!(lease_is_available(Some("a"), Some(99), 15, "a", 100));
    }

    #[test]
    fn another_holder_keeps_the_lease_until_it_expires() {
        assert!(!lease_is_available(Some("b"), Some(90), 15, "a", 100));
        assert!(!lease_is_available(Some("b"), Some(85), 15, "a", 100));
        assert!(lease_is_available(Some("b"), Some(84), 15, "a", 100));
        assert!(lease_is_available(Some("b"), None, 15, "a", 100));
    }
}
