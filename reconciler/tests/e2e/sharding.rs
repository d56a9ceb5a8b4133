//! End to end: three reconcilers with `--shard` split 3,000 ExternalSecrets over 30 namespaces
//! by their shard Leases. Each syncs only the namespaces the rendezvous hash gives it and
//! together they sync every one once; one is killed (SIGKILL, no Lease released) while a
//! rotation is being synced and the others take its namespaces over within the shard Lease's
//! duration and the settle time, the rotation reaching every Secret; a fourth joins and takes a
//! share, another rotation reaching every Secret while the namespaces move.
//!
//! `KEYWARD_E2E_SHARD_OBJECTS` scales the 3,000 down while developing.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use keyward_crds::Provider;
use keyward_provider_fake::api::Fake;
use keyward_reconciler::shard::{SHARD_LABEL, owner};
use kube::Api;
use kube::api::ListParams;

use crate::cluster_external_secret::Cleanup;
use crate::support::*;

const NAMESPACES: usize = 30;
const WAIT: Duration = Duration::from_secs(600);
/// A killed replica's namespaces move after its shard Lease (`--shard-lease-duration 6s`, long
/// enough for renewals on a busy machine) expired, the settle time (three renewals of a fifth
/// of it) and a look (a quarter renewal).
const HANDOVER: Duration = Duration::from_millis(6000 + 3600 + 300);

fn objects() -> usize {
    std::env::var("KEYWARD_E2E_SHARD_OBJECTS").ok().and_then(|n| n.parse().ok()).unwrap_or(3000)
}

fn ids(names: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    v.sort();
    v
}

/// Syncs per namespace of one reconciler (`externalsecret_sync_calls_total` summed).
async fn syncs(r: &Reconciler) -> BTreeMap<String, f64> {
    let mut per_ns = BTreeMap::new();
    for line in r.metrics().await.lines().filter(|l| l.starts_with("externalsecret_sync_calls_total{")) {
        let Some(ns) = line.split("namespace=\"").nth(1).and_then(|rest| rest.split('"').next()) else { continue };
        let v: f64 = line.rsplit(' ').next().and_then(|v| v.parse().ok()).unwrap_or(0.0);
        *per_ns.entry(ns.to_string()).or_default() += v;
    }
    per_ns
}

/// The namespaces of `namespaces` each replica synced between two snapshots.
fn synced_between(
    before: &[BTreeMap<String, f64>],
    after: &[BTreeMap<String, f64>],
    namespaces: &[String],
) -> Vec<BTreeSet<String>> {
    before
        .iter()
        .zip(after)
        .map(|(b, a)| {
            namespaces
                .iter()
                .filter(|ns| a.get(*ns).copied().unwrap_or(0.0) > b.get(*ns).copied().unwrap_or(0.0))
                .cloned()
                .collect()
        })
        .collect()
}

async fn snapshot(rs: &[&Reconciler]) -> Vec<BTreeMap<String, f64>> {
    let mut out = Vec::new();
    for r in rs {
        out.push(syncs(r).await);
    }
    out
}

/// Every replica synced exactly the namespaces `members` give it, and only those.
fn assert_shares(names: &[&str], synced: &[BTreeSet<String>], namespaces: &[String], members: &[String], when: &str) {
    for (name, got) in names.iter().zip(synced) {
        let want: BTreeSet<String> =
            namespaces.iter().filter(|ns| owner(ns, members) == Some(*name)).cloned().collect();
        assert!(!want.is_empty(), "{when}: {name} owns no namespace of {members:?}");
        assert_eq!(got, &want, "{when}: {name} synced other namespaces than its share");
    }
}

async fn all_hold(client: &kube::Client, namespaces: &[String], per_ns: usize, want: &str) -> bool {
    for ns in namespaces {
        if managed_values(client, ns, want).await.0 < per_ns {
            return false;
        }
    }
    true
}

async fn rotate(client: &kube::Client, namespaces: &[String], per_ns: usize, value: &str) {
    for ns in namespaces {
        apply(&Api::<Fake>::namespaced(client.clone(), ns), fake_config("cfg", &[("k", value)])).await;
    }
    for ns in namespaces {
        force_sync(client, ns, per_ns, value).await;
    }
}

/// Whether `r` logged that its view settled on exactly `members` (comma-separated, sorted).
fn settled_on(r: &Reconciler, members: &str) -> bool {
    r.process.log().lines().filter(|l| l.contains("shard view settled")).any(|l| {
        let value = l.split("members=").nth(1).and_then(|v| v.split_whitespace().next()).unwrap_or("");
        value.trim_matches('"') == members
    })
}

async fn wait_settled(rs: &[&Reconciler], members: &str) {
    eventually(&format!("views settled on {members}"), WAIT, || async {
        rs.iter().all(|r| settled_on(r, members)).then_some(())
    })
    .await;
}

/// `r`'s value of the gauge `name` (`None` if it writes none).
async fn gauge(r: &Reconciler, name: &str) -> Option<u64> {
    r.metrics().await.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

/// The shard gauges of each replica: it sees `members` and owns its share of every namespace of
/// the cluster (the namespaces other tests left may still be going away: listed at each look).
async fn assert_gauges(client: &kube::Client, names: &[&str], rs: &[&Reconciler], members: &[String]) {
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    eventually(&format!("the shard gauges of {names:?}"), Duration::from_secs(60), || async {
        let all = namespaces.list_metadata(&ListParams::default()).await.ok()?.items;
        let mut shares = 0;
        for (name, r) in names.iter().zip(rs) {
            let want = all
                .iter()
                .filter(|ns| owner(&ns.metadata.name.clone().unwrap_or_default(), members) == Some(*name))
                .count();
            let got = (gauge(r, "shard_members").await?, gauge(r, "shard_owned_namespaces").await?);
            if got != (members.len() as u64, want as u64) {
                eprintln!("{name}: gauges {got:?}, want ({}, {want})", members.len());
                return None;
            }
            shares += want;
        }
        // The shares cover every namespace once.
        (shares == all.len()).then_some(())
    })
    .await;
}

fn kill(r: &Reconciler) {
    let pid = r.process.pid().to_string();
    let status = std::process::Command::new("kill").args(["-KILL", &pid]).status().expect("kill");
    assert!(status.success());
}

#[tokio::test(flavor = "multi_thread")]
async fn sharded_reconcilers_split_namespaces_hand_over_a_dead_share_and_take_a_new_one() {
    // Alone: the reconcilers watch every namespace, and the handover is timed.
    let _turn = exclusive().await;
    let client = keyward_e2e::control_plane().await.client().await;
    let run = format!("{:08x}", rand::random::<u32>());
    let mut cleanup = Cleanup { run: run.clone(), label: "keyward.dev/shard-e2e", kinds: &[], namespaces: vec![] };
    let class = format!("shard-{run}");
    let per_ns = objects().div_ceil(NAMESPACES);
    let pki = Pki::new();
    let fake = ProviderProcess::start("keyward-provider-fake", pki.provider_dir(), None).await;
    let home = cleanup.namespace(&client, &[]).await;
    let mut namespaces = Vec::new();
    for _ in 0..NAMESPACES {
        let ns = cleanup.namespace(&client, &[]).await;
        pki.install(&client, &ns).await;
        apply(&Api::<Fake>::namespaced(client.clone(), &ns), fake_config("cfg", &[("k", "v1")])).await;
        apply(&Api::<Provider>::namespaced(client.clone(), &ns), provider("fake", &class, &fake.address(), "cfg"))
            .await;
        namespaces.push(ns);
    }

    let args = |id: &'static str| {
        vec!["--shard", "true", "--identity", id, "--shard-lease-duration", "6s", "--shutdown-grace", "3s"]
    };
    let r0 = Reconciler::start_cluster_wide(&class, &home, &args("r0")).await;
    let mut r1 = Reconciler::start_cluster_wide(&class, &home, &args("r1")).await;
    let r2 = Reconciler::start_cluster_wide(&class, &home, &args("r2")).await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), &home);
    let shard_leases = ListParams::default().labels(&format!("{SHARD_LABEL}=keyward-reconciler"));
    let held: BTreeSet<Option<String>> =
        leases.list(&shard_leases).await.unwrap().items.iter().map(|l| l.metadata.name.clone()).collect();
    let want: BTreeSet<Option<String>> =
        ["r0", "r1", "r2"].iter().map(|id| Some(format!("keyward-reconciler-shard-{id}"))).collect();
    assert_eq!(held, want, "one shard Lease per replica");
    // The first sync is the steady split: every view settled on the three.
    wait_settled(&[&r0, &r1, &r2], "r0,r1,r2").await;

    // First sync: each replica syncs its share, the shares cover every namespace once.
    let started = Instant::now();
    for ns in &namespaces {
        create_class_external_secrets(&client, ns, per_ns, &class).await;
    }
    eventually("every Secret synced", WAIT, || async {
        all_hold(&client, &namespaces, per_ns, "v1").await.then_some(())
    })
    .await;
    eprintln!(
        "first sync of {} ExternalSecrets by three sharded replicas: {:?}",
        per_ns * NAMESPACES,
        started.elapsed()
    );
    // Filtering on arrival: every replica caches every ExternalSecret, whatever its share.
    let peaks: Vec<String> =
        [&r0, &r1, &r2].iter().map(|r| format!("{:.0}", status_mib(r.process.pid(), "VmHWM"))).collect();
    eprintln!("peak RSS of the three replicas (MiB): {}", peaks.join(", "));
    let three = ids(&["r0", "r1", "r2"]);
    let none = vec![BTreeMap::new(); 3];
    let first = snapshot(&[&r0, &r1, &r2]).await;
    assert_shares(&["r0", "r1", "r2"], &synced_between(&none, &first, &namespaces), &namespaces, &three, "first sync");
    assert_gauges(&client, &["r0", "r1", "r2"], &[&r0, &r1, &r2], &three).await;

    // A rotation is being synced when r1 dies without releasing its Lease: r0 and r2 take its
    // namespaces once the Lease expired and their view settled, and every Secret rotates.
    let rotation = {
        let (client, namespaces) = (client.clone(), namespaces.clone());
        tokio::spawn(async move { rotate(&client, &namespaces, per_ns, "v2").await })
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    kill(&r1);
    let killed = Instant::now();
    let _ = r1.process.terminate(Duration::from_secs(5));
    wait_settled(&[&r0, &r2], "r0,r2").await;
    let handed_over = killed.elapsed();
    assert!(handed_over < HANDOVER + Duration::from_secs(3), "the dead share moved after {handed_over:?}");
    rotation.await.unwrap();
    eventually("every Secret rotated to v2", WAIT, || async {
        all_hold(&client, &namespaces, per_ns, "v2").await.then_some(())
    })
    .await;
    eprintln!("dead share moved after {handed_over:?}; rotation complete {:?} after the kill", killed.elapsed());
    let two = ids(&["r0", "r2"]);
    let before = snapshot(&[&r0, &r2]).await;
    rotate(&client, &namespaces, per_ns, "v3").await;
    eventually("every Secret rotated to v3", WAIT, || async {
        all_hold(&client, &namespaces, per_ns, "v3").await.then_some(())
    })
    .await;
    let after = snapshot(&[&r0, &r2]).await;
    assert_shares(&["r0", "r2"], &synced_between(&before, &after, &namespaces), &namespaces, &two, "after the kill");
    assert_gauges(&client, &["r0", "r2"], &[&r0, &r2], &two).await;

    // A fourth replica joins during a rotation: it takes a share, the others give it up, and the
    // rotation reaches every Secret.
    let before = snapshot(&[&r0, &r2]).await;
    let r3 = Reconciler::start_cluster_wide(&class, &home, &args("r3")).await;
    let rotation = {
        let (client, namespaces) = (client.clone(), namespaces.clone());
        tokio::spawn(async move { rotate(&client, &namespaces, per_ns, "v4").await })
    };
    wait_settled(&[&r0, &r2, &r3], "r0,r2,r3").await;
    rotation.await.unwrap();
    eventually("every Secret rotated to v4", WAIT, || async {
        all_hold(&client, &namespaces, per_ns, "v4").await.then_some(())
    })
    .await;
    let three = ids(&["r0", "r2", "r3"]);
    let moved = snapshot(&[&r0, &r2, &r3]).await;
    let steady = [before[0].clone(), before[1].clone(), BTreeMap::new()];
    let synced = synced_between(&steady, &moved, &namespaces);
    assert!(!synced[2].is_empty(), "r3 synced none");
    assert!(synced[2].iter().all(|ns| owner(ns, &three) == Some("r3")), "r3 synced only its share");
    rotate(&client, &namespaces, per_ns, "v5").await;
    eventually("every Secret rotated to v5", WAIT, || async {
        all_hold(&client, &namespaces, per_ns, "v5").await.then_some(())
    })
    .await;
    let after = snapshot(&[&r0, &r2, &r3]).await;
    assert_shares(
        &["r0", "r2", "r3"],
        &synced_between(&moved, &after, &namespaces),
        &namespaces,
        &three,
        "after the join",
    );
    drop(cleanup);
}

/// `n` ExternalSecrets `es-0` … of controller class `class` in `ns`, reading `k` from the
/// namespace's Provider `fake` into `value`.
async fn create_class_external_secrets(client: &kube::Client, ns: &str, n: usize, class: &str) {
    use futures::StreamExt;
    let ess: Api<keyward_crds::ExternalSecret> = Api::namespaced(client.clone(), ns);
    futures::stream::iter(0..n)
        .for_each_concurrent(16, |i| {
            let ess = ess.clone();
            async move {
                let body = serde_json::json!({"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
                    "metadata": {"name": format!("es-{i}"), "labels": {CLASS_LABEL: class}},
                    "spec": {"refreshInterval": "1h", "secretStoreRef": {"name": "fake", "kind": "Provider"},
                             "data": [{"secretKey": "value", "remoteRef": {"key": "k"}}]}});
                apply(&ess, body).await;
            }
        })
        .await;
}
