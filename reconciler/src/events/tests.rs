//! Events against the fake API server: a repeat counts on the first Event, anything else is a new
//! Event, and what is remembered per Event is small and leaves with its window.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::Value;

use super::*;
use crate::fake_api;

const EVENTS: &str = "/apis/events.k8s.io/v1/namespaces/team-a/events";

fn es(name: &str, version: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some("external-secrets.io/v1".into()),
        kind: Some("ExternalSecret".into()),
        namespace: Some("team-a".into()),
        name: Some(name.into()),
        uid: Some(format!("uid-{name}")),
        resource_version: Some(version.into()),
        ..Default::default()
    }
}

fn failed(note: &str) -> Note<'_> {
    Note { warning: true, reason: "UpdateFailed", action: "Sync", note }
}

/// A recorder on a fake API server that accepts every create and patch, or answers patches 404
/// while `gone` is set.
fn recorder(gone: Arc<AtomicBool>) -> (Recorder, fake_api::Requests) {
    let (client, requests) = fake_api::client(move |method, _| match method.as_str() {
        "PATCH" if gone.load(Ordering::SeqCst) => fake_api::not_found("events \"x\" not found"),
        _ => (200, serde_json::json!({})),
    });
    (Recorder::new(client, Reporter { controller: "keyward-test".into(), instance: None }), requests)
}

fn path(line: &str) -> String {
    line.split_once(' ').map(|(m, p)| format!("{m} {}", p.split('?').next().unwrap_or(p))).unwrap_or_default()
}

#[tokio::test]
async fn a_repeat_counts_on_the_first_event_and_anything_else_is_a_new_one() {
    let (recorder, requests) = recorder(Arc::default());
    recorder.publish(failed("store down"), &es("db", "7")).await.unwrap();
    let first = requests.body(0);
    let name = first["metadata"]["name"].as_str().unwrap().to_string();
    assert!(name.starts_with("db."), "{name}");
    assert_eq!(first["note"], "store down");
    assert_eq!(first["type"], "Warning");
    assert_eq!(first["reportingInstance"], "keyward-test");
    assert_eq!(first["regarding"]["resourceVersion"], "7");

    recorder.publish(failed("store down"), &es("db", "7")).await.unwrap();
    recorder.publish(failed("store down"), &es("db", "7")).await.unwrap();
    // Another note, another version of the object, another object: new Events.
    recorder.publish(failed("store refused"), &es("db", "7")).await.unwrap();
    recorder.publish(failed("store down"), &es("db", "8")).await.unwrap();
    recorder.publish(failed("store down"), &es("api", "7")).await.unwrap();

    let lines: Vec<String> = requests.all().iter().map(|l| path(l)).collect();
    let patch = format!("PATCH {EVENTS}/{name}");
    let post = format!("POST {EVENTS}");
    assert_eq!(lines, [&post, &patch, &patch, &post, &post, &post].map(String::clone));
    assert_eq!(requests.body(1)["series"]["count"], 2);
    assert_eq!(requests.body(2)["series"]["count"], 3);
    assert!(requests.body(2)["series"]["lastObservedTime"].is_string());
    // A series patch carries the series alone.
    assert_eq!(requests.body(2).as_object().map(|o| o.len()), Some(1));
    assert_eq!(recorder.remembered(), 4);
}

#[tokio::test]
async fn a_repeat_of_a_deleted_event_creates_it_again() {
    let gone = Arc::new(AtomicBool::new(false));
    let (recorder, requests) = recorder(gone.clone());
    recorder.publish(failed("store down"), &es("db", "7")).await.unwrap();
    gone.store(true, Ordering::SeqCst);
    recorder.publish(failed("store down"), &es("db", "7")).await.unwrap();
    gone.store(false, Ordering::SeqCst);
    recorder.publish(failed("store down"), &es("db", "7")).await.unwrap();
    let lines: Vec<String> = requests.all().iter().map(|l| path(l)).collect();
    let recreated = requests.body(2)["metadata"]["name"].as_str().unwrap().to_string();
    assert_eq!(lines[..3], [format!("POST {EVENTS}"), lines[1].clone(), format!("POST {EVENTS}")]);
    assert!(lines[1].starts_with("PATCH"), "{lines:?}");
    // The repeat after that counts on the new Event, from one.
    assert_eq!(lines[3], format!("PATCH {EVENTS}/{recreated}"));
    assert_eq!(requests.body(3)["series"]["count"], 2);
}

#[tokio::test]
async fn events_past_their_window_are_forgotten() {
    let (recorder, requests) = recorder(Arc::default());
    recorder.publish(failed("store down"), &es("db", "7")).await.unwrap();
    recorder.publish(failed("store down"), &es("api", "7")).await.unwrap();
    {
        let mut window = recorder.published();
        let long_ago = Timestamp::now() - WINDOW - SignedDuration::from_secs(1);
        window.by_key.values_mut().for_each(|p| p.last = long_ago);
        window.swept = long_ago;
    }
    // Past its window a repeat is a new Event, and the sweep drops what expired.
    recorder.publish(failed("store down"), &es("db", "7")).await.unwrap();
    assert_eq!(path(&requests.all()[2]), format!("POST {EVENTS}"));
    assert_eq!(recorder.remembered(), 1);
}

#[tokio::test]
async fn a_cluster_scoped_object_has_its_events_in_default() {
    let (recorder, requests) = recorder(Arc::default());
    let ces =
        ObjectReference { kind: Some("ClusterExternalSecret".into()), name: Some("all".into()), ..Default::default() };
    recorder.publish(failed("x"), &ces).await.unwrap();
    assert_eq!(path(&requests.all()[0]), "POST /apis/events.k8s.io/v1/namespaces/default/events");
    assert_eq!(requests.body(0)["metadata"].get("namespace"), None::<&Value>);
}

#[test]
fn event_names_stay_valid_for_the_longest_object_names() {
    let now = Timestamp::now();
    let long = format!("{}-{}", "a".repeat(240), "b".repeat(12));
    let name = event_name(&long, now);
    assert!(name.len() <= 253, "{}", name.len());
    let cut = event_name(&format!("{}-.{}", "a".repeat(234), "b".repeat(17)), now);
    assert!(cut.len() <= 253 && !cut.contains("-.") && !cut.contains(".."), "{cut}");
    assert_eq!(event_name("db", now), format!("db.{:x}", now.as_nanosecond()));
}
