//! `cluster.sh down` gives the host back exactly as `cluster.sh up` with `NODE=1` found it:
//! firewall ruleset, network links, the sysctls the node turns on, and the kubelet's cgroups.
//! Needs root, as the one-node cluster does. Runs as its own test binary, so it never meets the
//! installed tier's node (Cargo runs test binaries one at a time), though that node may still be
//! on its way down when this binary starts: each test waits for the machine to be free first.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use keyward_e2e::repo_root;

/// What the node may change on the host, read the same way before and after.
fn host_state() -> String {
    let mut state = String::new();
    let mut read = |what: &str, program: &str, args: &[&str]| {
        let out = Command::new(program).args(args).output().unwrap_or_else(|e| panic!("run {program}: {e}"));
        state.push_str(&format!("== {what}\n{}\n", String::from_utf8_lossy(&out.stdout)));
    };
    read("nft ruleset", "nft", &["list", "ruleset"]);
    read("links", "ip", &["-o", "link", "show"]);
    read("addresses", "ip", &["-o", "addr", "show"]);
    read("routes", "ip", &["route", "show"]);
    state.push_str(&format!("== node record present: {}\n", Path::new(NODE_RECORD).exists()));
    for sysctl in ["net/ipv4/ip_forward", "net/bridge/bridge-nf-call-iptables", "net/bridge/bridge-nf-call-ip6tables"] {
        let value = std::fs::read_to_string(format!("/proc/sys/{sysctl}")).unwrap_or_default();
        state.push_str(&format!("== {sysctl} = {}", value));
    }
    let cgroups = std::fs::read_dir("/sys/fs/cgroup")
        .map(|dirs| {
            dirs.flatten()
                .flat_map(|d| std::fs::read_dir(d.path()).into_iter().flatten().flatten())
                .filter(|e| e.path().is_dir())
                .map(|e| e.path().display().to_string())
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    let mut cgroups = cgroups;
    cgroups.sort();
    state.push_str(&format!("== cgroups\n{}\n", cgroups.join("\n")));
    state
}

fn cluster(dir: &std::path::Path, verb: &str) -> (bool, String) {
    let out = Command::new("bash")
        .arg(repo_root().join("e2e/scripts/cluster.sh"))
        .arg(verb)
        .env("KEYWARD_CLUSTER_DIR", dir)
        .env("NODE", "1")
        .output()
        .expect("run cluster.sh");
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

/// Where `cluster.sh` records the node that holds the machine (e2e/scripts/node.sh).
const NODE_RECORD: &str = "/run/keyward-node";

/// One node per machine: the tests of this binary take turns, and each waits until no other
/// node holds the machine (a node whose test binary just exited is torn down by its watchdog).
static ONE_NODE: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn take_the_machine() -> std::sync::MutexGuard<'static, ()> {
    let guard = ONE_NODE.lock().unwrap_or_else(|e| e.into_inner());
    let deadline = Instant::now() + Duration::from_secs(300);
    while Path::new(NODE_RECORD).exists() {
        let holder = std::fs::read_to_string(NODE_RECORD).unwrap_or_default();
        assert!(Instant::now() < deadline, "another node holds this machine: {holder}");
        std::thread::sleep(Duration::from_secs(1));
    }
    guard
}

fn ip(args: &[&str]) {
    let status = Command::new("ip").args(args).status().expect("run ip");
    assert!(status.success(), "ip {args:?}");
}

#[test]
fn cluster_down_restores_the_host_exactly() {
    let _one = take_the_machine();
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("cluster");
    let before = host_state();
    let (ok, out) = cluster(&data, "up");
    assert!(ok, "cluster.sh up with NODE=1 failed:\n{out}");
    let during = host_state();
    let (ok, out) = cluster(&data, "down");
    assert!(ok, "cluster.sh down failed:\n{out}");
    let after = host_state();
    // The check can fail: the running node did change the host.
    assert_ne!(before, during, "the node changes nothing on the host? then this test checks nothing");
    assert!(during.contains("kw-br0"), "the node's bridge is up while it runs");
    assert_eq!(before, after, "the host differs after cluster.sh down");
    assert!(!data.exists(), "the data directory is removed");
}

/// A bridge left by a node whose `up` never saved its host state (it died half-way, or its
/// directory was removed) is taken back by the next `up`; while the recorded node is alive,
/// `up` is refused before anything starts, and the host stays as it was.
#[test]
fn a_leftover_bridge_is_taken_back_and_a_recorded_node_is_refused() {
    let _one = take_the_machine();
    let base = tempfile::tempdir().expect("tempdir");
    let first = base.path().join("first");
    std::fs::create_dir_all(first.join("node/host")).expect("a node's saved host state");
    let before = host_state();
    std::fs::write(NODE_RECORD, first.display().to_string()).expect("record the first node");
    ip(&["link", "add", "kw-br0", "type", "bridge"]);
    let leftover = host_state();

    let data = base.path().join("second");
    let (ok, out) = cluster(&data, "up");
    assert!(!ok, "a second node on one machine was started:\n{out}");
    assert!(out.contains("one node per machine"), "{out}");
    assert_eq!(host_state(), leftover, "a refused up changes nothing on the host");

    std::fs::remove_dir_all(&first).expect("the recorded node's directory goes, its record stays");
    let (ok, out) = cluster(&data, "up");
    assert!(ok, "up after a node that did not finish failed:\n{out}");
    assert!(out.contains("removing kw-br0"), "{out}");
    let (ok, out) = cluster(&data, "down");
    assert!(ok, "cluster.sh down failed:\n{out}");
    assert_eq!(host_state(), before, "the leftover bridge is gone and the rest is restored");
}
