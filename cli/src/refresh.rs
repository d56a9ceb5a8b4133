//! When an object is refreshed next, from the reconciler's own decision
//! (`keyward_reconciler::offline::decide`) over what the object's status says.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use keyward_crds::external_secret::RefreshPolicy;
use keyward_crds::rules::{WindowGate, parse_go_duration, window_gate};
use keyward_crds::{ClusterExternalSecret, ExternalSecret, PushSecret};
use keyward_reconciler::offline::{Decision, RefreshState, decide, jitter, object_hash};
use kube::ResourceExt;
use serde::Serialize;

/// When the next refresh happens, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "when", rename_all = "camelCase")]
pub enum NextRefresh {
    /// Due now: the reconciler syncs at its next look.
    Now {
        /// Why.
        why: String,
    },
    /// At a time (RFC 3339).
    At {
        /// When.
        time: String,
        /// Why then.
        why: String,
    },
    /// On a period of its own.
    Every {
        /// The period.
        interval: String,
        /// What happens each period.
        why: String,
    },
    /// Not until the object changes.
    Never {
        /// Why.
        why: String,
    },
}

impl std::fmt::Display for NextRefresh {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NextRefresh::Now { why } => write!(f, "now ({why})"),
            NextRefresh::At { time, why } => write!(f, "{time} ({why})"),
            NextRefresh::Every { interval, why } => write!(f, "every {interval} ({why})"),
            NextRefresh::Never { why } => write!(f, "never ({why})"),
        }
    }
}

fn after(t: Timestamp, d: Duration) -> String {
    SignedDuration::try_from(d)
        .ok()
        .and_then(|d| t.checked_add(d).ok())
        .map_or_else(|| "far away".into(), |t| t.to_string())
}

fn human(d: Duration) -> String {
    SignedDuration::try_from(d).map_or_else(|_| format!("{d:?}"), |d| format!("{d:#}"))
}

/// The first `start + k·period` (k ≥ 1) that is not before `now`: a refresh that changes
/// nothing writes no status, so `status.refreshTime` can be several periods old.
fn next_period(start: Timestamp, period: Duration, now: Timestamp) -> String {
    let elapsed = Duration::try_from(now.duration_since(start)).unwrap_or(Duration::ZERO);
    if period.is_zero() {
        return now.to_string();
    }
    let periods = elapsed.as_secs_f64() / period.as_secs_f64();
    let k = (periods.floor() as u32).saturating_add(1);
    after(start, period.saturating_mul(k))
}

/// An ExternalSecret's next refresh; `target_missing` is whether the Secret it manages is
/// missing now.
pub fn external_secret(es: &ExternalSecret, target_missing: bool, now: Timestamp) -> NextRefresh {
    let interval = match parse_go_duration(&es.spec.refresh_interval) {
        Ok(d) => d,
        Err(e) => {
            return NextRefresh::Never {
                why: format!("spec.refreshInterval: {e}; the reconciler reports it and waits"),
            };
        }
    };
    let status = es.status.clone().unwrap_or_default();
    let refreshed = status.refresh_time.as_ref().map(|t| t.0);
    let since = refreshed.map(|t| Duration::try_from(now.duration_since(t)).unwrap_or(Duration::ZERO));
    let hash = object_hash(es);
    let uid = es.uid().unwrap_or_else(|| es.name_any());
    let jitter = jitter(&uid, interval);
    let window = es.spec.sync_windows.as_ref().map_or(WindowGate::Open, |w| window_gate(w, now));
    let state = RefreshState {
        policy: es.spec.refresh_policy,
        interval,
        since_last_refresh: since,
        synced_hash: status.synced_resource_version.as_deref(),
        current_hash: &hash,
        target_missing,
        jitter,
        window,
    };
    let policy = es.spec.refresh_policy.unwrap_or(RefreshPolicy::Periodic);
    match decide(state) {
        Decision::Never => NextRefresh::Never {
            why: match policy {
                RefreshPolicy::CreatedOnce => {
                    "refreshPolicy CreatedOnce: it synced once; only a deleted target Secret is written again".into()
                }
                RefreshPolicy::OnChange => {
                    "refreshPolicy OnChange: only a spec change or the force-sync annotation syncs".into()
                }
                RefreshPolicy::Periodic => {
                    "refreshInterval 0: only a spec change or the force-sync annotation syncs".into()
                }
            },
        },
        Decision::Wait(d) => {
            let due = interval + jitter;
            let why = if since.is_some_and(|s| s >= due) {
                "due, held until spec.syncWindows open".to_string()
            } else {
                format!(
                    "refreshInterval {} after status.refreshTime, plus {} of spread",
                    human(interval),
                    human(jitter)
                )
            };
            NextRefresh::At { time: after(now, d), why }
        }
        Decision::Sync => match (refreshed, status.synced_resource_version.as_deref()) {
            _ if target_missing => NextRefresh::Now { why: "its target Secret is missing".into() },
            (None, _) | (_, None) => NextRefresh::Now { why: "it has not synced yet".into() },
            (_, Some(synced)) if synced != hash => NextRefresh::Now {
                why: "its spec, labels or annotations (force-sync included) changed since the last sync".into(),
            },
            (Some(t), Some(_)) => NextRefresh::At {
                time: next_period(t, interval + jitter, now),
                why: format!(
                    "every {} from status.refreshTime, which only a sync that changed something updates",
                    human(interval + jitter)
                ),
            },
        },
    }
}

/// A PushSecret's next push. The reconciler pushes again `refreshInterval` after each push it
/// reports (a `refreshInterval` that does not parse counts as 1h there), and never for 0.
pub fn push_secret(ps: &PushSecret, now: Timestamp) -> NextRefresh {
    let Some(interval) = keyward_reconciler::offline::push_interval(ps) else {
        return NextRefresh::Never { why: "refreshInterval 0: only a change of the PushSecret pushes again".into() };
    };
    match ps.status.as_ref().and_then(|s| s.refresh_time.as_ref()) {
        None => NextRefresh::Now { why: "it has not pushed yet".into() },
        Some(t) => NextRefresh::At {
            time: next_period(t.0, interval, now),
            why: format!("refreshInterval {} after status.refreshTime", human(interval)),
        },
    }
}

/// A ClusterExternalSecret's next look at its namespaces.
pub fn cluster_external_secret(ces: &ClusterExternalSecret) -> NextRefresh {
    match parse_go_duration(&ces.spec.refresh_time) {
        Ok(d) if d.is_zero() => {
            NextRefresh::Never { why: "refreshTime 0: namespaces are checked again only when something changes".into() }
        }
        Ok(d) => NextRefresh::Every {
            interval: human(d),
            why: "selected namespaces and their ExternalSecrets are checked again; each ExternalSecret refreshes on \
                  its own refreshInterval"
                .into(),
        },
        Err(e) => NextRefresh::Never { why: format!("spec.refreshTime: {e}") },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use keyward_crds::ExternalSecretStatus;

    fn es(yaml: &str) -> ExternalSecret {
        serde_yaml::from_str(yaml).unwrap()
    }

    fn now() -> Timestamp {
        "2026-12-05T12:00:00Z".parse().unwrap()
    }

    fn synced(mut es: ExternalSecret, at: &str) -> ExternalSecret {
        let hash = object_hash(&es);
        es.status = Some(ExternalSecretStatus {
            refresh_time: Some(Time(at.parse().unwrap())),
            synced_resource_version: Some(hash),
            ..Default::default()
        });
        es
    }

    const BASE: &str = "apiVersion: external-secrets.io/v1\nkind: ExternalSecret\nmetadata: {name: db, uid: u1}\n";

    #[test]
    fn periodic_refresh_is_an_interval_after_the_last_sync() {
        let e = synced(es(&format!("{BASE}spec: {{refreshInterval: 1h}}\n")), "2026-12-05T11:30:00Z");
        match external_secret(&e, false, now()) {
            NextRefresh::At { time, .. } => {
                assert!(time.as_str() >= "2026-12-05T12:30:00Z" && time.as_str() < "2026-12-05T12:36:00Z", "{time}")
            }
            other => panic!("{other:?}"),
        }
        // Three hours without a status change: the next whole period after now.
        let old = synced(es(&format!("{BASE}spec: {{refreshInterval: 1h}}\n")), "2026-12-05T09:00:00Z");
        let NextRefresh::At { time, .. } = external_secret(&old, false, now()) else { panic!() };
        assert!(time.as_str() > "2026-12-05T12:00:00Z" && time.as_str() < "2026-12-05T13:30:00Z", "{time}");
    }

    #[test]
    fn never_for_zero_intervals_and_created_once() {
        let zero = synced(es(&format!("{BASE}spec: {{refreshInterval: '0'}}\n")), "2026-12-05T11:00:00Z");
        assert!(
            matches!(external_secret(&zero, false, now()), NextRefresh::Never { why } if why.contains("refreshInterval 0"))
        );
        let once = synced(
            es(&format!("{BASE}spec: {{refreshInterval: 1m, refreshPolicy: CreatedOnce}}\n")),
            "2026-12-05T11:00:00Z",
        );
        assert!(
            matches!(external_secret(&once, false, now()), NextRefresh::Never { why } if why.contains("CreatedOnce"))
        );
        assert!(matches!(external_secret(&once, true, now()), NextRefresh::Now { .. }), "a missing target syncs");
    }

    #[test]
    fn unsynced_or_changed_objects_are_due_now() {
        let fresh = es(&format!("{BASE}spec: {{refreshInterval: 1h}}\n"));
        assert!(
            matches!(external_secret(&fresh, false, now()), NextRefresh::Now { why } if why.contains("not synced"))
        );
        let mut forced = synced(fresh, "2026-12-05T11:59:00Z");
        forced.annotations_mut().insert("force-sync".into(), "1".into());
        assert!(
            matches!(external_secret(&forced, false, now()), NextRefresh::Now { why } if why.contains("force-sync"))
        );
    }

    #[test]
    fn push_secrets_and_cluster_external_secrets() {
        let ps: PushSecret = serde_yaml::from_str(
            "apiVersion: external-secrets.io/v1alpha1\nkind: PushSecret\nmetadata: {name: p}\n\
             spec: {refreshInterval: 10m, secretStoreRefs: [], selector: {secret: {name: s}}}\n\
             status: {refreshTime: '2026-12-05T11:55:00Z'}\n",
        )
        .unwrap();
        assert_eq!(
            push_secret(&ps, now()),
            NextRefresh::At {
                time: "2026-12-05T12:05:00Z".into(),
                why: "refreshInterval 10m after status.refreshTime".into()
            }
        );
        let ces: ClusterExternalSecret = serde_yaml::from_str(
            "apiVersion: external-secrets.io/v1\nkind: ClusterExternalSecret\nmetadata: {name: c}\n\
             spec: {refreshTime: '0', externalSecretSpec: {}}\n",
        )
        .unwrap();
        assert!(matches!(cluster_external_secret(&ces), NextRefresh::Never { .. }));
    }
}
