//! `cluster.sh down` gives the host back exactly as `cluster.sh up` with `NODE=1` found it:
//! firewall ruleset, network links, the sysctls the node turns on, and the kubelet's cgroups.
//! Needs root, as the one-node cluster does. Runs as its own test binary, so it never meets the
//! installed tier's node (Cargo runs test binaries one at a time).

use std::process::Command;

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

#[test]
fn cluster_down_restores_the_host_exactly() {
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
