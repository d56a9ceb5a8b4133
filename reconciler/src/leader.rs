//! Leader election with a `coordination.k8s.io` Lease: one active reconciler per lease. The
//! leader renews well inside the lease duration and gives the lease up on shutdown, so a
//! standby takes over within one retry period instead of waiting for expiry.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};
use tokio_util::sync::CancellationToken;

/// An identity that differs between replicas when none is configured: the host name (the Pod
/// name in a container) and the process id.
pub fn default_identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    format!("{}-{}", host.trim(), std::process::id())
}

/// What the elector should do with the lease as it stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// No lease object: create it, holding it.
    Create,
    /// We hold it: renew.
    Renew,
    /// Nobody holds it, or the holder let it expire: take it over.
    TakeOver,
    /// Someone else holds a live lease.
    Wait {
        /// The holder.
        holder: String,
    },
}

/// Decides from the lease spec, who we are, and the time now.
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

/// Lease-based elector.
#[derive(Clone)]
pub struct Elector {
    api: Api<Lease>,
    name: String,
    identity: String,
    duration: Duration,
    retry: Duration,
}

impl Elector {
    /// An elector for lease `namespace/name`, as `identity`.
    pub fn new(client: Client, namespace: &str, name: &str, identity: &str, duration: Duration) -> Self {
        Elector {
            api: Api::namespaced(client, namespace),
            name: name.to_string(),
            identity: identity.to_string(),
            duration,
            retry: (duration / 5).max(Duration::from_millis(500)),
        }
    }

    /// One round: returns whether we hold the lease afterwards.
    pub async fn try_once(&self) -> Result<bool, kube::Error> {
        let now = Timestamp::now();
        let current = self.api.get_opt(&self.name).await?;
        let step = decide(current.as_ref().and_then(|l| l.spec.as_ref()), &self.identity, now);
        let secs = i32::try_from(self.duration.as_secs()).unwrap_or(15);
        match step {
            Step::Wait { .. } => Ok(false),
            Step::Create => {
                let lease = Lease {
                    metadata: ObjectMeta { name: Some(self.name.clone()), ..Default::default() },
                    spec: Some(LeaseSpec {
                        holder_identity: Some(self.identity.clone()),
                        lease_duration_seconds: Some(secs),
                        acquire_time: Some(MicroTime(now)),
                        renew_time: Some(MicroTime(now)),
                        lease_transitions: Some(0),
                        ..Default::default()
                    }),
                };
                match self.api.create(&PostParams::default(), &lease).await {
                    Ok(_) => Ok(true),
                    Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
                    Err(e) => Err(e),
                }
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
                match self.api.replace(&self.name, &PostParams::default(), &lease).await {
                    Ok(_) => Ok(true),
                    Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
                    Err(e) => Err(e),
                }
            }
        }
    }

    /// Waits until we lead (or `cancel` fires: returns false).
    pub async fn acquire(&self, cancel: &CancellationToken) -> bool {
        loop {
            match self.try_once().await {
                Ok(true) => return true,
                Ok(false) => {}
                Err(e) => tracing::warn!(error = %e, "leader election"),
            }
            tokio::select! {
                _ = cancel.cancelled() => return false,
                _ = tokio::time::sleep(self.retry) => {}
            }
        }
    }

    /// Renews until the lease is lost (returns) or `cancel` fires (releases it and returns).
    pub async fn hold(&self, cancel: &CancellationToken) {
        let mut last_ok = tokio::time::Instant::now();
        loop {
            tokio::select! {
                _ = cancel.cancelled() => {
                    self.release().await;
                    return;
                }
                _ = tokio::time::sleep(self.retry) => {}
            }
            match self.try_once().await {
                Ok(true) => last_ok = tokio::time::Instant::now(),
                Ok(false) => {
                    tracing::error!("leadership lost to another instance");
                    return;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "renewing the lease failed");
                    // Step down before the lease can expire, so two leaders never overlap.
                    if last_ok.elapsed() > self.duration * 2 / 3 {
                        tracing::error!("could not renew the lease in time; stepping down");
                        return;
                    }
                }
            }
        }
    }

    /// Gives the lease up so a standby takes over at once.
    pub async fn release(&self) {
        let Ok(Some(mut lease)) = self.api.get_opt(&self.name).await else { return };
        let Some(spec) = lease.spec.as_mut() else { return };
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return;
        }
        spec.holder_identity = None;
        spec.renew_time = None;
        if let Err(e) = self.api.replace(&self.name, &PostParams::default(), &lease).await {
            tracing::warn!(error = %e, "releasing the lease failed");
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
    }
}
