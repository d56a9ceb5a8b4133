//! The real-cluster quickstart (`docs/quickstart.md`) run as written on the one-node cluster: its
//! fenced blocks whose info string carries the word `quickstart-test` are taken from the page in
//! order — `sh` blocks run with bash (`set -euo pipefail`), a `yaml` block is written to the file
//! its first line names (`# demo.yaml`) — from a directory holding the page's relative paths
//! (`charts/`, `dist/`), with the image `make images` built already imported (the page's import
//! step is the node's, done by [`image`]) and `helm`, `kubectl` and `keyward` on `PATH`. The
//! demo Secret must hold the source's value, then the rotated one, before the page's removal runs.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use keyward_chart_tests::installed::{eventually, image};
use keyward_chart_tests::tools_dir;
use keyward_e2e::{node_cluster, repo_root};

use super::{NS, RELEASE, output, pods, turn};

/// The word in a fence's info string that marks a block the test runs.
const MARK: &str = "quickstart-test";

/// A marked block: the heading of its section, its language and its text.
#[derive(Debug)]
struct Block {
    section: String,
    lang: String,
    text: String,
}

/// The marked blocks of `markdown`, in order.
fn blocks(markdown: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut section = String::new();
    let mut open: Option<(bool, String, String)> = None;
    for line in markdown.lines() {
        if let Some((marked, lang, text)) = open.as_mut() {
            if line.trim_start() == "```" {
                if *marked {
                    out.push(Block { section: section.clone(), lang: lang.clone(), text: std::mem::take(text) });
                }
                open = None;
            } else {
                text.push_str(line);
                text.push('\n');
            }
        } else if let Some(info) = line.trim_start().strip_prefix("```") {
            let words: Vec<&str> = info.split_whitespace().collect();
            open = Some((words.contains(&MARK), words.first().unwrap_or(&"").to_string(), String::new()));
        } else if line.starts_with('#') {
            section = line.trim_start_matches('#').trim().to_string();
        }
    }
    assert!(open.is_none(), "an unclosed fence in the quickstart");
    out
}

/// Runs `block` in `dir` (a `sh` block) or writes it there (a `yaml` block); returns what it
/// printed.
fn run_block(block: &Block, dir: &Path, kubeconfig: &Path) -> String {
    if block.lang == "yaml" {
        let file = block.text.lines().next().and_then(|l| l.strip_prefix("# ")).map(str::trim);
        let file =
            file.unwrap_or_else(|| panic!("a marked yaml block names its file on its first line:\n{}", block.text));
        std::fs::write(dir.join(file), &block.text).expect("write the block's file");
        return String::new();
    }
    assert_eq!(block.lang, "sh", "marked blocks are sh or yaml: {block:?}");
    let path = format!(
        "{}:{}:{}",
        dir.join("bin").display(),
        tools_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("timeout")
        .args(["300", "bash", "-c"])
        .arg(format!("set -euo pipefail\n{}", block.text))
        .current_dir(dir)
        .env("PATH", path)
        .env("KUBECONFIG", kubeconfig)
        .env("HELM_CONFIG_HOME", dir.join("helm/config"))
        .env("HELM_CACHE_HOME", dir.join("helm/cache"))
        .env("HELM_DATA_HOME", dir.join("helm/data"))
        .output()
        .expect("run bash");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success(),
        "quickstart, section {:?}: the block failed:\n{}\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        block.section,
        block.text
    );
    stdout.into_owned()
}

/// The demo Secret's `username`, decoded.
fn demo_username(kc: &Path) -> String {
    let b64 = output(kc, &["get", "secret", "database", "-n", "demo", "-o", "jsonpath={.data.username}"]);
    BASE64.decode(b64).map(|v| String::from_utf8_lossy(&v).into_owned()).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quickstart_runs_as_written_and_syncs_the_demo_secret() {
    let _serial = turn().await;
    let cluster = node_cluster().await;
    let kc = cluster.kubeconfig();
    image(cluster);
    let page = std::fs::read_to_string(repo_root().join("docs/quickstart.md")).expect("docs/quickstart.md");
    let blocks = blocks(&page);
    let sections: Vec<&str> = blocks.iter().map(|b| b.section.as_str()).collect();
    assert!(sections.iter().any(|s| s.starts_with("3.")), "the install is marked: {sections:?}");
    assert_eq!(sections.last(), Some(&"Removing it"), "the removal is marked, and last: {sections:?}");

    // The page's relative paths, from a directory of the test's own (the page writes demo.yaml).
    let dir = tempfile::tempdir().expect("tempdir");
    for path in ["charts", "dist"] {
        std::os::unix::fs::symlink(repo_root().join(path), dir.path().join(path)).expect("symlink");
    }
    // The CLI as the page installs it: `keyward`, and `kubectl-keyward` for `kubectl keyward`.
    std::fs::create_dir(dir.path().join("bin")).expect("bin");
    for cli in ["keyward", "kubectl-keyward"] {
        std::os::unix::fs::symlink(repo_root().join("dist").join(cli), dir.path().join("bin").join(cli)).expect("cli");
    }

    let started = std::time::Instant::now();
    let (removal, steps) = blocks.split_last().expect("marked blocks");
    let printed: String = steps.iter().map(|b| run_block(b, dir.path(), kc)).collect();
    // The page's own checks printed the synced value, then the rotated one.
    let values: Vec<&str> = printed.lines().filter(|l| *l == "app" || *l == "app2").collect();
    assert_eq!(values, ["app", "app2"], "the page's checks print the demo Secret's username:\n{printed}");
    assert_eq!(demo_username(kc), "app2", "the demo Secret holds the rotated value");
    let ready = output(
        kc,
        &[
            "get",
            "externalsecret",
            "database",
            "-n",
            "demo",
            "-o",
            r#"jsonpath={.status.conditions[?(@.type=="Ready")].status}"#,
        ],
    );
    assert_eq!(ready, "True");

    run_block(removal, dir.path(), kc);
    eventually(
        "the page's removal leaves no Keyward Pod",
        Duration::from_secs(120),
        || pods(kc, NS, &format!("app.kubernetes.io/instance={RELEASE}")).is_empty().then_some(()),
        || output(kc, &["get", "pods", "-n", NS]),
    )
    .await;
    // A figure for the docs, not an assertion.
    eprintln!("quickstart, install to removal: {:?}", started.elapsed());
    // The release namespace the page's install created (its removal keeps it).
    output(kc, &["delete", "namespace", NS, "--wait=true", "--timeout=120s", "--ignore-not-found"]);
}
