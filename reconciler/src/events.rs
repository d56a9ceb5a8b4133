//! Events (`events.k8s.io/v1`) with repeats counted on one object: a repeat of an event (same
//! object and version, type, reason, action and note) within [`WINDOW`] of its last occurrence
//! patches the first Event's `series` (count and last time) instead of creating a new Event.
//!
//! What is remembered of an Event to count its repeats is a 64-bit fingerprint of what makes it a
//! repeat, when it was created (its name is the object's name and that time, so it is not kept),
//! its last time and its count: under a hundred bytes, none of them a string. kube's `Recorder` does
//! the same counting but keeps two full copies of every Event it published (the key and the
//! object, each with a cloned `ObjectReference`), some 2.5 KiB each, and every first sync
//! publishes one Event per ExternalSecret: at 10,000 that was 25 MiB of the reconciler's peak.
//! Expired entries are swept at most once per [`SWEEP_EVERY`], not on every publish.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Mutex, MutexGuard};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

/// How long after its last occurrence a repeat still counts on the same Event (client-go's and
/// kube's window).
pub const WINDOW: SignedDuration = SignedDuration::from_mins(6);

/// How often expired entries are swept out.
const SWEEP_EVERY: SignedDuration = SignedDuration::from_secs(30);

/// Who publishes events (`reportingController`, `reportingInstance`).
#[derive(Debug, Clone)]
pub struct Reporter {
    /// `reportingController`.
    pub controller: String,
    /// `reportingInstance` (the controller's name when unset).
    pub instance: Option<String>,
}

/// One event to publish.
#[derive(Debug, Clone, Copy)]
pub struct Note<'a> {
    /// `Warning` rather than `Normal`.
    pub warning: bool,
    /// `reason`.
    pub reason: &'a str,
    /// `action`.
    pub action: &'a str,
    /// `note` (at most 1 kB: the caller cuts it).
    pub note: &'a str,
}

/// An Event published within the window: what a repeat needs to count on it.
#[derive(Debug)]
struct Published {
    /// When it was created: with the object's name, its name ([`event_name`]).
    created: Timestamp,
    last: Timestamp,
    count: i32,
}

/// Publishes events and counts repeats.
pub struct Recorder {
    client: Client,
    reporter: Reporter,
    published: Mutex<Window>,
}

/// The published Events within the window, by fingerprint, and when they were last swept.
#[derive(Debug)]
struct Window {
    by_key: HashMap<u64, Published>,
    swept: Timestamp,
}

impl Recorder {
    /// A recorder publishing as `reporter`.
    pub fn new(client: Client, reporter: Reporter) -> Self {
        let published = Mutex::new(Window { by_key: HashMap::new(), swept: Timestamp::now() });
        Recorder { client, reporter, published }
    }

    fn published(&self) -> MutexGuard<'_, Window> {
        // Updates are single statements; a poisoned lock still holds a consistent map.
        self.published.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Events remembered for counting repeats.
    pub fn remembered(&self) -> usize {
        self.published().by_key.len()
    }

    /// Publishes `event` about `regarding` in its namespace (`default` for a cluster-scoped
    /// object): a new Event, or the count of a repeat on the Event it repeats.
    pub async fn publish(&self, event: Note<'_>, regarding: &ObjectReference) -> Result<(), kube::Error> {
        let now = Timestamp::now();
        let key = fingerprint(&event, regarding);
        let namespace = regarding.namespace.as_deref().unwrap_or("default");
        let api: Api<Event> = Api::namespaced(self.client.clone(), namespace);
        let repeat = {
            let mut published = self.published();
            if now.duration_since(published.swept) >= SWEEP_EVERY {
                published.by_key.retain(|_, p| p.last + WINDOW > now);
                published.swept = now;
            }
            published.by_key.get(&key).filter(|p| p.last + WINDOW > now).map(|p| (p.created, p.count + 1))
        };
        if let Some((created, count)) = repeat {
            // A repeat has the same object, so the same name: the fingerprint covers it.
            let name = event_name(self.object(regarding), created);
            let series = EventSeries { count, last_observed_time: MicroTime(now) };
            match api.patch(&name, &PatchParams::default(), &Patch::Merge(json!({ "series": series }))).await {
                Ok(_) => {
                    self.remember(key, created, now, count);
                    return Ok(());
                }
                // Deleted meanwhile (an Event's own time to live, or by hand): a new one.
                Err(kube::Error::Api(status)) if status.is_not_found() => {}
                Err(e) => return Err(e),
            }
        }
        api.create(&PostParams::default(), &self.event(event, regarding, now)).await?;
        self.remember(key, now, now, 1);
        Ok(())
    }

    fn remember(&self, key: u64, created: Timestamp, last: Timestamp, count: i32) {
        self.published().by_key.insert(key, Published { created, last, count });
    }

    /// The name an Event's name starts with: the object's (the controller's for none).
    fn object<'a>(&'a self, regarding: &'a ObjectReference) -> &'a str {
        regarding.name.as_deref().unwrap_or(&self.reporter.controller)
    }

    fn event(&self, event: Note<'_>, regarding: &ObjectReference, now: Timestamp) -> Event {
        let controller = &self.reporter.controller;
        Event {
            metadata: ObjectMeta {
                name: Some(event_name(self.object(regarding), now)),
                namespace: regarding.namespace.clone(),
                ..Default::default()
            },
            action: Some(event.action.to_string()),
            reason: Some(event.reason.to_string()),
            note: Some(event.note.to_string()),
            type_: Some(if event.warning { "Warning" } else { "Normal" }.into()),
            event_time: Some(MicroTime(now)),
            regarding: Some(regarding.clone()),
            reporting_controller: Some(controller.clone()),
            reporting_instance: Some(self.reporter.instance.clone().unwrap_or_else(|| controller.clone())),
            ..Default::default()
        }
    }
}

/// What makes an event a repeat of another: the object (its version included: an event about a
/// changed object is a new one), type, reason, action and note.
fn fingerprint(event: &Note<'_>, regarding: &ObjectReference) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    let r = regarding;
    (&r.api_version, &r.kind, &r.namespace, &r.name, &r.uid, &r.resource_version).hash(&mut h);
    (event.warning, event.reason, event.action, event.note).hash(&mut h);
    h.finish()
}

/// `<object>.<nanoseconds in hex>`, within the 253 characters of a name: a long object name is
/// cut, and the cut never ends in `-` or `.` (a name's parts must end in a letter or digit).
fn event_name(object: &str, now: Timestamp) -> String {
    let suffix = format!("{:x}", now.as_nanosecond());
    let room = 253 - 1 - suffix.len();
    let mut end = object.len().min(room);
    while !object.is_char_boundary(end) {
        end -= 1;
    }
    let head = object[..end].trim_end_matches(['-', '.']);
    format!("{head}.{suffix}")
}

#[cfg(test)]
mod tests;
