//! Temporary namespaces that clean up after the test.

use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures::FutureExt;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client};
use rand::Rng;

use crate::control_plane;

/// Label put on every namespace made by [`with_temp_namespace`], so webhook configurations
/// in tests can select them.
pub const E2E_LABEL: &str = "keyward.dev/e2e";

/// Runs `test` with a client and a new namespace carrying `labels`; deletes the namespace
/// afterwards unless `KEYWARD_E2E_KEEP=1`. When the test panics, the namespace is kept in the
/// same way, the tail of the API server log is printed, and the panic goes on.
pub async fn with_temp_namespace<F, Fut, T>(labels: &[(&str, &str)], test: F) -> T
where
    F: FnOnce(Client, String) -> Fut,
    Fut: Future<Output = T>,
{
    let cp = control_plane().await;
    let client = cp.client().await;
    let name = format!("kw-{:08x}", rand::rng().random::<u32>());
    let mut all_labels: std::collections::BTreeMap<String, String> =
        labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    all_labels.insert(E2E_LABEL.to_string(), "true".to_string());
    let ns = Namespace {
        metadata: kube::api::ObjectMeta { name: Some(name.clone()), labels: Some(all_labels), ..Default::default() },
        ..Default::default()
    };
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces.create(&PostParams::default(), &ns).await.expect("create test namespace");
    wait_for_default_service_account(&client, &name).await;

    let result = AssertUnwindSafe(test(client.clone(), name.clone())).catch_unwind().await;
    let keep = std::env::var("KEYWARD_E2E_KEEP").is_ok_and(|v| v == "1");
    match result {
        Ok(value) => {
            if !keep {
                let _ = namespaces.delete(&name, &DeleteParams::default()).await;
            }
            value
        }
        Err(panic) => {
            eprintln!("--- test in namespace {name} failed; kube-apiserver log tail:");
            eprintln!("{}", cp.log_tail("kube-apiserver", 15));
            if !keep {
                let _ = namespaces.delete(&name, &DeleteParams::default()).await;
            }
            std::panic::resume_unwind(panic)
        }
    }
}

/// Pods need the namespace's `default` ServiceAccount, which the controller manager creates.
async fn wait_for_default_service_account(client: &Client, ns: &str) {
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    for _ in 0..100 {
        if sas.get_opt("default").await.ok().flatten().is_some() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("the default ServiceAccount of namespace {ns} did not appear: is kube-controller-manager running?");
}

/// Deletes object `name` and waits until the API server no longer has it, so that what is
/// created next under the same name is a new object (a new UID).
pub async fn delete_and_wait<K>(api: &Api<K>, name: &str)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.delete(name, &DeleteParams::default()).await.unwrap_or_else(|e| panic!("delete {name}: {e}"));
    for _ in 0..100 {
        if api.get_opt(name).await.unwrap_or_else(|e| panic!("get {name}: {e}")).is_none() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("{name} was not deleted within 5 s");
}
