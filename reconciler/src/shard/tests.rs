use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::LeaseSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::SignedDuration;
use tokio::time::Instant;

use super::*;

fn names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("team-{i}")).collect()
}

fn members(ids: &[&str]) -> Vec<String> {
    ids.iter().map(|s| s.to_string()).collect()
}

#[test]
fn every_namespace_has_one_owner_whatever_the_order_and_shares_are_even() {
    let m = members(&["a", "b", "c"]);
    let reversed = members(&["c", "b", "a"]);
    let mut shares: HashMap<&str, usize> = HashMap::new();
    for ns in names(3000) {
        let o = owner(&ns, &m).unwrap();
        assert_eq!(owner(&ns, &reversed), Some(o));
        *shares.entry(o).or_default() += 1;
    }
    assert_eq!(shares.values().sum::<usize>(), 3000);
    for (m, n) in &shares {
        assert!((850..1150).contains(n), "{m} owns {n} of 3000");
    }
    assert_eq!(owner("team", &[]), None);
}

#[test]
fn a_member_leaving_moves_only_its_namespaces_and_one_joining_only_takes() {
    let three = members(&["a", "b", "c"]);
    let two = members(&["a", "c"]);
    let four = members(&["a", "b", "c", "d"]);
    let (mut moved_from_b, mut taken_by_d) = (0, 0);
    for ns in names(2000) {
        let before = owner(&ns, &three).unwrap();
        let after = owner(&ns, &two).unwrap();
        if before == "b" {
            moved_from_b += 1;
        } else {
            assert_eq!(before, after, "{ns} moved between members that stayed");
        }
        let joined = owner(&ns, &four).unwrap();
        if joined == "d" {
            taken_by_d += 1;
        } else {
            assert_eq!(before, joined, "{ns} moved between members that stayed");
        }
    }
    assert!(moved_from_b > 500 && taken_by_d > 350, "{moved_from_b} {taken_by_d}");
}

#[test]
fn the_weights_are_fixed_across_builds() {
    // The hash is part of the protocol between replicas (a rolling upgrade runs two builds).
    assert_eq!(stable_hash(&["a", "team"]), stable_hash(&["a", "team"]));
    assert_ne!(stable_hash(&["a", "team"]), stable_hash(&["at", "eam"]), "parts are separated");
    assert_eq!(owner("default", &members(&["keyward-0", "keyward-1", "keyward-2"])), Some("keyward-1"));
}

#[test]
fn shard_lease_names_are_object_names() {
    assert_eq!(lease_name("keyward-reconciler", "keyward-7d9-x2"), "keyward-reconciler-shard-keyward-7d9-x2");
    assert_eq!(lease_name("kw", "Host_1:42"), "kw-shard-host-1-42");
    assert!(lease_name("kw", &"x".repeat(400)).len() <= 253);
}

fn lease(holder: Option<&str>, renewed_ms_ago: i64, now: Timestamp) -> Arc<Lease> {
    Arc::new(Lease {
        spec: Some(LeaseSpec {
            holder_identity: holder.map(str::to_string),
            lease_duration_seconds: Some(5),
            renew_time: Some(MicroTime(now - SignedDuration::from_millis(renewed_ms_ago))),
            ..Default::default()
        }),
        ..Default::default()
    })
}

#[test]
fn live_members_are_unexpired_holders_and_none_while_this_replicas_view_lags() {
    let now = Timestamp::now();
    let fresh = Duration::from_secs(2);
    let leases = vec![
        lease(Some("me"), 3000, now),
        lease(Some("b"), 4900, now),
        lease(Some("expired"), 5000, now),
        lease(None, 10, now),
        lease(Some(""), 10, now),
    ];
    let seen = Some(OwnRenewal { written: now - SignedDuration::from_millis(3000), acknowledged_ago: fresh * 2 });
    assert_eq!(live_members(&leases, "me", now, seen, fresh), members(&["b", "me"]), "a slow renewal is no lag");
    let in_flight = Some(OwnRenewal { written: now, acknowledged_ago: fresh / 2 });
    assert_eq!(live_members(&leases, "me", now, in_flight, fresh), members(&["b", "me"]), "the watch is catching up");
    let lagging = Some(OwnRenewal { written: now, acknowledged_ago: fresh * 2 });
    assert!(live_members(&leases, "me", now, lagging, fresh).is_empty(), "a lagging view owns nothing");
    assert!(live_members(&leases[1..], "me", now, seen, fresh).is_empty(), "without its own Lease, nothing");
    let late = Some(OwnRenewal { written: now - SignedDuration::from_millis(3400), acknowledged_ago: fresh });
    let leases = vec![lease(Some("me"), 3400, now), lease(Some("b"), 100, now)];
    assert!(live_members(&leases, "me", now, late, fresh).is_empty(), "renewals too late to trust");
}

#[test]
fn gained_namespaces_wait_the_settle_time_lost_ones_stop_at_once() {
    let settle = Duration::from_secs(3);
    let t0 = Instant::now();
    let mut a = Settling::new("a", settle, t0);
    let ns = names(200);
    let alone = a.observe(members(&["a"]), t0);
    assert!(ns.iter().all(|n| !alone.owns(n)), "nothing before the view settled");
    let alone = a.observe(members(&["a"]), t0 + settle);
    assert!(ns.iter().all(|n| alone.owns(n)));
    let shared = a.observe(members(&["a", "b"]), t0 + settle + Duration::from_millis(1));
    let kept: Vec<_> = ns.iter().filter(|n| shared.owns(n)).collect();
    assert!(kept.iter().all(|n| owner(n, &members(&["a", "b"])) == Some("a")), "lost ones at once");
    assert!(!kept.is_empty() && kept.len() < ns.len());
}

/// Two replicas see a change at different times (less than the settle time apart): at no
/// moment do both own a namespace, and after the settle time every namespace has its owner.
#[test]
fn replicas_seeing_a_change_apart_never_own_a_namespace_together() {
    let settle = Duration::from_secs(3);
    let t0 = Instant::now();
    let ns = names(300);
    for (before, after) in [(vec!["a", "b"], vec!["a", "b", "c"]), (vec!["a", "b", "c"], vec!["a", "b"])] {
        let mut replicas: Vec<(&str, Settling)> =
            ["a", "b", "c"].into_iter().map(|me| (me, Settling::new(me, settle, t0))).collect();
        // Settled on `before` (a replica not in it sees it too: it is waiting to join).
        let start = t0 + settle;
        for (_, s) in &mut replicas {
            s.observe(members(&before), t0);
        }
        // Replica i sees `after` i·700 ms after the change; step by 100 ms.
        for step in 0..100u64 {
            let now = start + Duration::from_millis(step * 100);
            let views: Vec<Assignment> = replicas
                .iter_mut()
                .enumerate()
                .map(|(i, (me, s))| {
                    let sees_after = step * 100 >= i as u64 * 700;
                    let view = if sees_after { &after } else { &before };
                    // A replica outside the group holds no Lease: it sees itself out.
                    let view = if view.contains(me) { members(view) } else { Vec::new() };
                    s.observe(view, now)
                })
                .collect();
            for n in &ns {
                let owners = views.iter().filter(|v| v.owns(n)).count();
                assert!(owners <= 1, "{n} owned {owners} times at step {step}");
                if step == 99 {
                    assert_eq!(owners, 1, "{n} unowned after the settle time");
                }
            }
        }
    }
}
