//! Google's own Python client (`google-cloud-secret-manager`, REST transport, with google-auth)
//! against the Secret Manager protocol test server: what keeps the server what Google's clients
//! expect (`e2e/tools/gcp-client/check_server.py`).

use std::process::Command;

use crate::common::{self, PROJECT};
use keyward_e2e::repo_root;
use keyward_e2e::stores::cached_tool;

#[tokio::test(flavor = "multi_thread")]
async fn googles_python_client_works_against_the_test_server() {
    let _guard = common::shared().await;
    let venv = tokio::task::spawn_blocking(|| cached_tool("install-gcp-client.sh")).await.expect("install");
    let g = common::google().await;
    let key = g.server.service_account("python@keyward-test.iam.gserviceaccount.com", true);
    let dir = tempfile::tempdir().expect("temp dir");
    let key_file = dir.path().join("key.json");
    std::fs::write(&key_file, &key.json).expect("key file");
    let mut cmd = Command::new(venv.join("bin/python"));
    cmd.arg(repo_root().join("e2e/tools/gcp-client/check_server.py"))
        .arg(&g.server.url)
        .arg(&key_file)
        .arg(PROJECT)
        .env("REQUESTS_CA_BUNDLE", &g.ca_file);
    let out = tokio::task::spawn_blocking(move || cmd.output()).await.expect("join").expect("run python");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the Python client failed:\n{stdout}\n{stderr}\nrequests: {:?}", g.server.requests());
    assert!(stdout.contains("ok"), "{stdout}");
}
