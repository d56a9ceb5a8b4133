//! End to end: switching a running External Secrets install to Keyward in place, with Keyward's
//! reconciler and providers as local processes (the installed tier does the same with `helm
//! install`). `keyward_e2e::switch` leaves the install as upstream's controller does, under
//! upstream's CRDs, and checks the takeover: no target Secret rewritten, every ExternalSecret
//! Ready through its unchanged store, rotation in Vault and Parameter Store, the PushSecret
//! keeping what it pushed, the ClusterExternalSecret keeping its ExternalSecret.

use std::time::Duration;

use keyward_e2e::stores::{Moto, VaultDev};
use keyward_e2e::switch::{UpstreamInstall, apply_crds, upstream_crds};
use keyward_e2e::{control_plane, repo_root, with_temp_namespace};
use serde_json::json;

use crate::support::*;

const WAIT: Duration = Duration::from_secs(90);

fn keyward_crds() -> Vec<u8> {
    let dir = repo_root().join("crds/yaml");
    let mut all = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    for f in files.iter().filter(|f| f.extension().is_some_and(|e| e == "yaml")) {
        all.extend_from_slice(b"\n---\n");
        all.extend(std::fs::read(f).unwrap());
    }
    all
}

/// Puts Keyward's CRDs back when the test ends, passed or failed: the tests after it in this
/// binary use the same API server.
struct RestoreKeywardCrds(&'static keyward_e2e::ControlPlane);

impl Drop for RestoreKeywardCrds {
    fn drop(&mut self) {
        let cluster = self.0;
        let restored = std::panic::catch_unwind(|| apply_crds(cluster, &keyward_crds()));
        if restored.is_err() {
            eprintln!("Keyward's CRDs could not be put back: the tests after this one may fail");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_upstream_install_switches_in_place() {
    // Alone: it replaces Keyward's CRDs with upstream's, then puts them back.
    let _turn = exclusive().await;
    let vault = VaultDev::start();
    let moto = Moto::start();
    apply_crds(control_plane().await, &upstream_crds());
    let _restore = RestoreKeywardCrds(control_plane().await);
    with_temp_namespace(&[], |client, ns| {
        let (vault, moto) = (&vault, &moto);
        async move {
            let hash = keyward_reconciler::externalsecret::target::upstream_data_hash;
            let upstream = UpstreamInstall::leave(&client, &ns, vault, moto, json!({CLASS_LABEL: ns}), hash).await;

            // The switch: Keyward's CRDs over the same objects, then Keyward itself.
            apply_crds(control_plane().await, &keyward_crds());
            let pki = Pki::new();
            pki.install(&client, &ns).await;
            let vault_provider = ProviderProcess::start("keyward-provider-vault", pki.provider_dir(), None).await;
            let aws_env = moto.provider_env();
            let aws_env: Vec<(&str, &str)> = aws_env.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let aws_provider =
                ProviderProcess::start_with_env("keyward-provider-aws", pki.provider_dir(), &aws_env).await;
            let stores = [("vault", &vault_provider), ("aws", &aws_provider)];
            let reconciler = Reconciler::start_with_stores(&ns, &stores, &[]).await;

            upstream.assert_taken_over(vault, moto, WAIT).await;
            drop(reconciler);
        }
    })
    .await;
}
