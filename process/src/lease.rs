//! Leader election with a `coordination.k8s.io/v1` Lease, one implementation for every Keyward
//! process that must act alone: the reconciler and the certificate loop (feature `lease`).
//!
//! Optimistic concurrency does the locking: every write carries the `resourceVersion` it read,
//! and a conflict means another replica won. The holder renews well inside the lease duration,
//! steps down when it could not renew in time (so two holders never overlap), and gives the
//! Lease up on shutdown so a standby takes over within one retry period instead of waiting for
//! the lease to expire.

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};
use prometheus_client::metrics::gauge::Gauge;

/// An identity that differs between processes when none is configured: the host name and the
/// process id. In a container the PID is often 1, so the chart passes the Pod name instead.
pub fn default_identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    format!("{}-{}", host.trim(), std::process::id())
}

/// What to do with the Lease as it stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// No Lease object: create it, holding it.
    Create,
    /// We hold it: renew.
    Renew,
    /// Nobody holds it, or the holder let it expire: take it over.
    TakeOver,
    /// Someone else holds a live Lease.
    Wait {
        /// The holder.
        holder: String,
    },
}

/// Decides from the Lease spec, who we are, and the time now.
pub fn decide(spec: Option<&LeaseSpec>, me: &str, now: Timestamp) -> Step {
    let Some(spec) = spec else { return Step::Create };
    let holder = spec.holder_identity.clone().unwrap_or_default();
    if holder.is_empty() {
        return Step::TakeOver;
    }
    if holder == me {
        return Step::Renew;
    }
    let duration = i64::from(spec.lease_duration_seconds.unwrap_or(15));
    let renewed = spec.renew_time.as_ref().or(spec.acquire_time.as_ref()).map(|t| t.0);
    match renewed {
        Some(t) if now.as_second() < t.as_second() + duration => Step::Wait { holder },
        _ => Step::TakeOver,
    }
}

/// One replica's handle on the Lease.
#[derive(Clone)]
pub struct LeaseLock {
    api: Api<Lease>,
    name: String,
    identity: String,
    duration: Duration,
    retry: Duration,
    /// `leader_election_master_status` of this Lease, when reported.
    status: Option<Gauge>,
    /// Labels the Lease is created with (a group of Leases is listed by them).
    labels: std::collections::BTreeMap<String, String>,
    /// The renew time of this replica's last successful write, and when the API server took it.
    renewed: std::sync::Arc<std::sync::Mutex<Option<Renewal>>>,
}

/// A successful write of the Lease by this replica.
#[derive(Debug, Clone, Copy)]
pub struct Renewal {
    /// The `renewTime` it wrote.
    pub renew_time: Timestamp,
    /// When the API server acknowledged it (this process's clock).
    pub acknowledged: std::time::Instant,
}

fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

impl LeaseLock {
    /// The Lease `namespace/name`, held as `identity` for `duration` per renewal; renewed (or
    /// retried) every fifth of the duration.
    pub fn new(client: Client, namespace: &str, name: &str, identity: &str, duration: Duration) -> Self {
        LeaseLock {
            api: Api::namespaced(client, namespace),
            name: name.to_string(),
            identity: identity.to_string(),
            duration,
            retry: (duration / 5).max(Duration::from_millis(500)),
            status: None,
            labels: Default::default(),
            renewed: Default::default(),
        }
    }

    /// Creates the Lease with the label `key=value`, so a group of Leases (the reconciler's
    /// shard members) can be watched by a selector.
    pub fn with_label(mut self, key: &str, value: &str) -> Self {
        self.labels.insert(key.to_string(), value.to_string());
        self
    }

    /// This replica's last successful write of the Lease, if any: a watcher of the Lease can
    /// tell by it whether its view lags behind (the reconciler's shard membership does).
    pub fn last_renewal(&self) -> Option<Renewal> {
        *self.renewed.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How often the Lease is renewed (or its acquisition retried): a fifth of its duration.
    pub fn retry(&self) -> Duration {
        self.retry
    }

    /// Reports in `gauge` whether this replica holds the Lease (1) or not (0); see
    /// [`crate::metrics::register_leader_status`].
    pub fn with_status(mut self, gauge: Gauge) -> Self {
        gauge.set(0);
        self.status = Some(gauge);
        self
    }

    fn report(&self, leading: bool) {
        if let Some(g) = &self.status {
            g.set(i64::from(leading));
        }
    }

    /// The Lease's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// This replica's identity.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Takes the Lease if it is free or expired, renews it if held: `Ok(true)` when this replica
    /// holds it now.
    pub async fn try_acquire_or_renew(&self) -> Result<bool, kube::Error> {
        let now = Timestamp::now();
        let current = self.api.get_opt(&self.name).await?;
        let step = decide(current.as_ref().and_then(|l| l.spec.as_ref()), &self.identity, now);
        let secs = i32::try_from(self.duration.as_secs()).unwrap_or(15);
        let written = match step {
            Step::Wait { .. } => return Ok(false),
            Step::Create => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.name.clone()),
                        labels: (!self.labels.is_empty()).then(|| self.labels.clone()),
                        ..Default::default()
                    },
                    spec: Some(LeaseSpec {
                        holder_identity: Some(self.identity.clone()),
                        lease_duration_seconds: Some(secs),
                        acquire_time: Some(MicroTime(now)),
                        renew_time: Some(MicroTime(now)),
                        lease_transitions: Some(0),
                        ..Default::default()
                    }),
                };
                self.api.create(&PostParams::default(), &lease).await
            }
            Step::Renew | Step::TakeOver => {
                let Some(mut lease) = current else { return Ok(false) };
                let spec = lease.spec.get_or_insert_with(Default::default);
                if step == Step::TakeOver {
                    spec.acquire_time = Some(MicroTime(now));
                    spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
                    spec.holder_identity = Some(self.identity.clone());
                }
                spec.renew_time = Some(MicroTime(now));
                spec.lease_duration_seconds = Some(secs);
                // replace carries the resourceVersion we read: a concurrent writer makes it 409.
                self.api.replace(&self.name, &PostParams::default(), &lease).await
            }
        };
        match written {
            Ok(_) => {
                let renewal = Renewal { renew_time: now, acknowledged: std::time::Instant::now() };
                *self.renewed.lock().unwrap_or_else(|e| e.into_inner()) = Some(renewal);
                Ok(true)
            }
            Err(e) if is_conflict(&e) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Waits until this replica holds the Lease (`true`), or `stop` resolves (`false`).
    pub async fn acquire(&self, stop: impl Future<Output = ()>) -> bool {
        tokio::pin!(stop);
        loop {
            match self.try_acquire_or_renew().await {
                Ok(true) => {
                    self.report(true);
                    return true;
                }
                Ok(false) => {}
                Err(e) => tracing::warn!(error = %e, lease = %self.name, "leader election"),
            }
            tokio::select! {
                _ = &mut stop => return false,
                _ = tokio::time::sleep(self.retry) => {}
            }
        }
    }

    /// Renews until the Lease is lost (returns), or `stop` resolves (releases it and returns).
    /// Steps down when it could not renew for two thirds of the duration, before another
    /// replica may take over.
    pub async fn hold(&self, stop: impl Future<Output = ()>) {
        self.hold_until_lost(stop).await;
        self.report(false);
    }

    async fn hold_until_lost(&self, stop: impl Future<Output = ()>) {
        tokio::pin!(stop);
        let mut last_ok = tokio::time::Instant::now();
        loop {
            tokio::select! {
                _ = &mut stop => {
                    if let Err(e) = self.release().await {
                        tracing::warn!(error = %e, lease = %self.name, "releasing the lease failed");
                    }
                    return;
                }
                _ = tokio::time::sleep(self.retry) => {}
            }
            match self.try_acquire_or_renew().await {
                Ok(true) => last_ok = tokio::time::Instant::now(),
                Ok(false) => {
                    tracing::warn!(lease = %self.name, "the lease was taken over");
                    return;
                }
                Err(e) => {
                    tracing::warn!(error = %e, lease = %self.name, "renewing the lease failed");
                    if last_ok.elapsed() > self.duration * 2 / 3 {
                        tracing::error!(lease = %self.name, "could not renew the lease in time; stepping down");
                        return;
                    }
                }
            }
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
        spec.renew_time = None;
        match self.api.replace(&self.name, &PostParams::default(), &lease).await {
            Ok(_) => Ok(()),
            Err(e) if is_conflict(&e) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(holder: Option<&str>, renewed_secs_ago: i64) -> LeaseSpec {
        let now = Timestamp::now();
        LeaseSpec {
            holder_identity: holder.map(str::to_string),
            lease_duration_seconds: Some(15),
            renew_time: Some(MicroTime(now - k8s_openapi::jiff::SignedDuration::from_secs(renewed_secs_ago))),
            ..Default::default()
        }
    }

    #[test]
    fn decisions() {
        let now = Timestamp::now();
        assert_eq!(decide(None, "me", now), Step::Create);
        assert_eq!(decide(Some(&spec(Some("me"), 3)), "me", now), Step::Renew);
        assert_eq!(decide(Some(&spec(Some("other"), 3)), "me", now), Step::Wait { holder: "other".into() });
        assert_eq!(decide(Some(&spec(Some("other"), 16)), "me", now), Step::TakeOver, "expired");
        assert_eq!(decide(Some(&spec(None, 1)), "me", now), Step::TakeOver, "released");
        assert_eq!(decide(Some(&spec(Some(""), 1)), "me", now), Step::TakeOver, "released");
        let never_renewed = LeaseSpec { holder_identity: Some("other".into()), ..Default::default() };
        assert_eq!(decide(Some(&never_renewed), "me", now), Step::TakeOver, "no time at all");
    }

    #[test]
    fn identities_differ_between_processes_on_one_host() {
        assert!(default_identity().ends_with(&format!("-{}", std::process::id())));
    }
}
