//! The certificate loop's metrics (feature `cli`): when each certificate it keeps expires, how
//! its passes end, whether this replica acts, and the process' own metrics.
//!
//! Only the acting replica reports expiries: a standby's would be as old as its last pass, and
//! a rotated certificate would look about to expire there.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use time::OffsetDateTime;

use crate::manager::Report;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SecretLabels {
    secret: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: &'static str,
}

/// What the loop reports.
#[derive(Debug)]
pub struct LoopMetrics {
    expiry: Family<SecretLabels, Gauge>,
    passes: Family<ResultLabels, Counter>,
    last_success: Gauge,
    leader: Gauge,
}

impl LoopMetrics {
    /// Registers the loop's metrics, `leader_election_master_status{name=lease}` and the
    /// process' own in `registry`.
    pub fn new(registry: &mut Registry, lease: &str) -> Self {
        keyward_process::metrics::register_process(registry, "certs", env!("CARGO_PKG_VERSION"));
        let leader = keyward_process::metrics::register_leader_status(registry, lease);
        let m = LoopMetrics {
            expiry: Family::default(),
            passes: Family::default(),
            last_success: Gauge::default(),
            leader,
        };
        for result in ["success", "error"] {
            m.passes.get_or_create(&ResultLabels { result }).inc_by(0);
        }
        registry.register(
            "keyward_certs_certificate_expiry_timestamp_seconds",
            "Unix time the certificate in each Secret the loop keeps expires (the CA's and every leaf's)",
            m.expiry.clone(),
        );
        registry.register("keyward_certs_passes", "Passes of the certificate loop, by result", m.passes.clone());
        registry.register(
            "keyward_certs_last_success_timestamp_seconds",
            "Unix time of the last pass that succeeded",
            m.last_success.clone(),
        );
        m
    }

    /// Records a pass that succeeded and what it left in place.
    pub fn passed(&self, report: &Report) {
        self.passes.get_or_create(&ResultLabels { result: "success" }).inc();
        self.last_success.set(OffsetDateTime::now_utc().unix_timestamp());
        self.expiry.clear();
        for (secret, not_after) in &report.expiries {
            self.expiry.get_or_create(&SecretLabels { secret: secret.clone() }).set(not_after.unix_timestamp());
        }
    }

    /// Records a pass that failed.
    pub fn failed(&self) {
        self.passes.get_or_create(&ResultLabels { result: "error" }).inc();
    }

    /// Records whether this replica holds the Lease; a standby reports no expiries.
    pub fn leading(&self, leading: bool) {
        self.leader.set(i64::from(leading));
        if !leading {
            self.expiry.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiries_follow_the_last_pass_and_leadership() {
        let mut registry = Registry::default();
        let m = LoopMetrics::new(&mut registry, "keyward-certs");
        let at = |s: i64| OffsetDateTime::from_unix_timestamp(s).unwrap();
        m.leading(true);
        m.passed(&Report {
            expiries: vec![("keyward-ca".into(), at(2_000_000_000)), ("keyward-webhook-tls".into(), at(1_900_000_000))],
            ..Report::default()
        });
        m.failed();
        let text = keyward_process::health::encode(&registry).unwrap();
        for line in [
            "keyward_certs_certificate_expiry_timestamp_seconds{secret=\"keyward-ca\"} 2000000000",
            "keyward_certs_certificate_expiry_timestamp_seconds{secret=\"keyward-webhook-tls\"} 1900000000",
            "keyward_certs_passes_total{result=\"success\"} 1",
            "keyward_certs_passes_total{result=\"error\"} 1",
            "leader_election_master_status{name=\"keyward-certs\"} 1",
            "keyward_build_info{component=\"certs\",",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
        m.leading(false);
        let text = keyward_process::health::encode(&registry).unwrap();
        assert!(!text.contains("keyward_certs_certificate_expiry_timestamp_seconds{"), "{text}");
        assert!(text.contains("leader_election_master_status{name=\"keyward-certs\"} 0"), "{text}");
    }
}
