//! Microsoft's own Python clients (`azure-keyvault-secrets` with `azure-identity`) against the
//! Key Vault protocol test server: what keeps the server what Microsoft's clients expect
//! (`e2e/tools/azure-client/check_server.py`).

use std::process::Command;

use crate::common::{self, CLIENT_ID, CLIENT_SECRET};
use keyward_e2e::repo_root;
use keyward_e2e::stores::azure::TENANT;
use keyward_e2e::stores::cached_tool;

#[tokio::test(flavor = "multi_thread")]
async fn microsofts_python_clients_work_against_the_test_server() {
    let _guard = common::shared().await;
    let venv = tokio::task::spawn_blocking(|| cached_tool("install-azure-client.sh")).await.expect("install");
    let server = common::azure();
    let mut cmd = Command::new(venv.join("bin/python"));
    cmd.arg(repo_root().join("e2e/tools/azure-client/check_server.py"))
        .args([server.vault_url(), server.authority_host(), TENANT.to_string(), CLIENT_ID.into(), CLIENT_SECRET.into()])
        .env("REQUESTS_CA_BUNDLE", server.ca_file());
    let out = tokio::task::spawn_blocking(move || cmd.output()).await.expect("join").expect("run python");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the Python clients failed:\n{stdout}\n{stderr}\nrequests: {:?}", server.requests());
    assert!(stdout.contains("ok"), "{stdout}");
}
