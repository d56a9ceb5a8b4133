//! End to end: free-form JSON that tenants write is never held decoded by the shared processes.
//!
//! 25 GeneratorStates whose `spec.state`, 25 PushSecrets whose `data[0].metadata` and 25
//! SecretStores whose unserved `spec.provider.alibaba` are each `{pad: [0, 0, …]}` of 1.4 MB,
//! written while no webhook is registered (admission refuses them: this is the holding side).
//! Decoded whole, each was tens of MiB in the reconciler (and the SecretStores in every
//! provider process that watches stores): 25 of one kind took the reconciler past its chart
//! limit. Now the reconciler keeps of a GeneratorState only what its controller reads, of a
//! push's metadata and an unserved store block at most the free-form limits, and a provider
//! only the block it serves. Both processes list them all as they start (the path of every
//! restart) and stay under their chart limits, each PushSecret is reported naming its field,
//! and another namespace's ExternalSecret and GeneratorState, served by the same reconciler and
//! provider (through a SecretStore), are synced and collected.
//!
//! The bloated objects cost the API server and etcd seconds each for every read and write, so
//! the test writes each once and lists none whole: the states wait for a deadline far ahead and
//! the stores name another controller (so nothing writes their status); only the PushSecrets'
//! refusals write theirs. That both processes read them is seen in the API server's own count
//! of the LIST requests served, and in the reconciler's work on the victim's objects.

use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::events::v1::Event;
use keyward_crds::generators::GeneratorState;
use keyward_crds::{ExternalSecret, SecretStore};
use keyward_e2e::with_temp_namespace;
use kube::{Api, Client};
use serde_json::json;

use crate::support::*;

const WAIT: Duration = Duration::from_secs(180);
/// Objects of each kind, and the size of each one's free-form field.
const OBJECTS: usize = 25;
const PAD_BYTES: usize = 1_400_000;
/// The chart's memory limits (`charts/keyward/values.yaml`): the reconciler's, the Fake
/// provider's.
const RECONCILER_LIMIT_MIB: f64 = 512.0;
const FAKE_PROVIDER_LIMIT_MIB: f64 = 128.0;

/// `{"pad":[0,0,…]}` of about [`PAD_BYTES`], as text (never built as a tree here either).
fn pad() -> String {
    format!("{{\"pad\":[{}0]}}", "0,".repeat(PAD_BYTES / 2))
}

/// Creates `OBJECTS` objects at `path` (a collection URL), a few at once; `object(i)` is each
/// one's JSON text.
async fn create_many(client: &Client, path: &str, object: impl Fn(usize) -> String) {
    futures::stream::iter(0..OBJECTS)
        .for_each_concurrent(4, |i| {
            let request = http::Request::post(path)
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(object(i).into_bytes())
                .unwrap();
            async move {
                client.request_text(request).await.unwrap_or_else(|e| panic!("creating {path} #{i}: {e}"));
            }
        })
        .await;
}

/// Waits until every one of the `OBJECTS` objects of `kind` in `ns` has a Warning event whose
/// note holds `want` (events are small: polling them costs the API server nothing like listing
/// the objects would).
async fn all_reported(client: &Client, ns: &str, kind: &str, want: &str) {
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    eventually(&format!("every {kind} reported with {want:?}"), WAIT, || async {
        let list = events.list(&Default::default()).await.ok()?.items;
        let reported: std::collections::BTreeSet<String> = list
            .into_iter()
            .filter(|e| e.type_.as_deref() == Some("Warning") && e.note.as_deref().is_some_and(|n| n.contains(want)))
            .filter_map(|e| e.regarding.filter(|r| r.kind.as_deref() == Some(kind))?.name)
            .collect();
        (reported.len() == OBJECTS).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn bloated_free_form_json_is_never_held_decoded() {
    // Alone: a reconciler of every namespace, and memory figures.
    let _turn = exclusive().await;
    with_temp_namespace(&[], |client, victim| async move {
        with_temp_namespace(&[], |_, tenant| async move {
            let class = format!("json-{victim}");
            let pad = pad();
            let started = Instant::now();
            let group = "generators.external-secrets.io/v1alpha1";
            create_many(&client, &format!("/apis/{group}/namespaces/{tenant}/generatorstates"), |i| {
                format!(
                    r#"{{"apiVersion":"{group}","kind":"GeneratorState","metadata":{{"name":"gs-{i}"}},
                        "spec":{{"garbageCollectionDeadline":"2999-01-01T00:00:00Z",
                                 "resource":{{"apiVersion":"{group}","kind":"Password"}},"state":{pad}}}}}"#
                )
            })
            .await;
            create_many(&client, &format!("/apis/external-secrets.io/v1alpha1/namespaces/{tenant}/pushsecrets"), |i| {
                format!(
                    r#"{{"apiVersion":"external-secrets.io/v1alpha1","kind":"PushSecret",
                        "metadata":{{"name":"ps-{i}","labels":{{"{CLASS_LABEL}":"{class}"}}}},
                        "spec":{{"secretStoreRefs":[{{"name":"fake","kind":"SecretStore"}}],
                                 "selector":{{"secret":{{"name":"source"}}}},
                                 "data":[{{"match":{{"secretKey":"k","remoteRef":{{"remoteKey":"r"}}}},"metadata":{pad}}}]}}}}"#
                )
            })
            .await;
            create_many(&client, &format!("/apis/external-secrets.io/v1/namespaces/{tenant}/secretstores"), |i| {
                format!(
                    r#"{{"apiVersion":"external-secrets.io/v1","kind":"SecretStore","metadata":{{"name":"ss-{i}"}},
                        "spec":{{"controller":"another-controller","provider":{{"alibaba":{pad}}}}}}}"#
                )
            })
            .await;
            eprintln!("{} objects of {PAD_BYTES} bytes written in {:?}", 3 * OBJECTS, started.elapsed());
            let lists_before = api_requests(&client).await;

            // The victim: an ExternalSecret through a SecretStore the same provider serves.
            let pki = Pki::new();
            pki.install(&client, &victim).await;
            let fake = ProviderProcess::start("keyward-provider-fake", pki.provider_dir(), None).await;
            let flags = [
                "--store-provider".to_string(),
                format!("fake={}", fake.address()),
                "--store-provider-tls-namespace".to_string(),
                victim.clone(),
            ];
            let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
            let mut reconciler = Reconciler::start_cluster_wide(&class, &victim, &flags).await;
            apply(
                &Api::<SecretStore>::namespaced(client.clone(), &victim),
                json!({"apiVersion": "external-secrets.io/v1", "kind": "SecretStore", "metadata": {"name": "fake"},
                       "spec": {"provider": {"fake": {"data": [{"key": "db", "value": "victim-value"}]}}}}),
            )
            .await;
            apply(
                &Api::<ExternalSecret>::namespaced(client.clone(), &victim),
                json!({"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
                       "metadata": {"name": "victim", "labels": {CLASS_LABEL: class}},
                       "spec": {"refreshInterval": "1h", "secretStoreRef": {"name": "fake", "kind": "SecretStore"},
                                "data": [{"secretKey": "value", "remoteRef": {"key": "db"}}]}}),
            )
            .await;
            let states: Api<GeneratorState> = Api::namespaced(client.clone(), &victim);
            apply(
                &states,
                json!({"apiVersion": "generators.external-secrets.io/v1alpha1", "kind": "GeneratorState",
                       "metadata": {"name": "expired"},
                       "spec": {"garbageCollectionDeadline": "2020-01-01T00:00:00Z", "state": {"id": "1"},
                                "resource": {"apiVersion": "generators.external-secrets.io/v1alpha1", "kind": "UUID"}}}),
            )
            .await;
            let secrets: Api<Secret> = Api::namespaced(client.clone(), &victim);
            wait_for_value(&secrets, "victim", "value", "victim-value", WAIT).await;
            eventually("the victim's GeneratorState collected", WAIT, || async {
                states.get_opt("expired").await.ok()?.is_none().then_some(())
            })
            .await;
            eprintln!("the victim's objects were served {:?} after the start", started.elapsed());

            // Both processes listed the bloated objects: the reconciler each kind, the provider
            // (its store watch, cluster-wide) the SecretStores; each PushSecret was refused
            // naming its field.
            eventually("the reconciler and the provider listed the bloated objects", WAIT, || async {
                let lists = delta(&lists_before, &api_requests(&client).await);
                let listed = |resource: &str| lists.get(&vec!["LIST".to_string(), resource.to_string()]).copied();
                let seen = listed("generatorstates") >= Some(1.0)
                    && listed("pushsecrets") >= Some(1.0)
                    && listed("secretstores") >= Some(2.0);
                seen.then_some(())
            })
            .await;
            all_reported(&client, &tenant, "PushSecret", "spec.data[0].metadata: free-form JSON of").await;

            let reconciler_peak = status_mib(reconciler.process.pid(), "VmHWM");
            let provider_peak = status_mib(fake.process.pid(), "VmHWM");
            let figures = format!(
                "peak RSS: reconciler {reconciler_peak:.0} MiB (limit {RECONCILER_LIMIT_MIB}), Fake provider \
                 {provider_peak:.0} MiB (limit {FAKE_PROVIDER_LIMIT_MIB}), with {OBJECTS} objects of {PAD_BYTES} \
                 bytes of each kind; {:?} in all",
                started.elapsed()
            );
            eprintln!("{figures}");
            assert!(reconciler_peak < RECONCILER_LIMIT_MIB, "{figures}");
            assert!(provider_peak < FAKE_PROVIDER_LIMIT_MIB, "{figures}");
            assert!(reconciler.process.is_running() && !reconciler.process.log().contains("panicked"));
            reconciler.process.terminate(Duration::from_secs(10));
        })
        .await;
    })
    .await;
}
