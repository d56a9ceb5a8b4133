//! Provider configuration objects, of every kind in `keyward_provider_registry::PROVIDER_KINDS`,
//! watched by metadata only: a Provider or ClusterProvider is checked again when the
//! configuration it names changes or goes. One watch per registered kind, built from the row, so
//! a new provider kind needs nothing here.

use std::collections::HashMap;

use futures::StreamExt;
use keyward_crds::registry::{PROVIDER_CONFIG_GROUP, PROVIDER_CONFIG_VERSION, ProviderKind};
use kube::core::PartialObjectMeta;
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};

use crate::provider::refs::ConfigObject;

type Hook = Box<dyn Fn(ConfigObject<'_>) + Send + Sync>;

/// The watches of the registered configuration kinds and the hooks told of their changes.
pub struct ConfigWatches {
    kinds: &'static [&'static ProviderKind],
    hooks: Vec<Hook>,
}

impl Default for ConfigWatches {
    fn default() -> Self {
        ConfigWatches { kinds: keyward_provider_registry::PROVIDER_KINDS, hooks: Vec::new() }
    }
}

impl ConfigWatches {
    /// Runs `hook` for every configuration object applied, deleted, or missing from a re-list.
    pub fn hook(&mut self, hook: impl Fn(ConfigObject<'_>) + Send + Sync + 'static) {
        self.hooks.push(Box::new(hook));
    }

    /// Starts one metadata watch per kind, in every namespace.
    pub fn start(self, client: &Client) -> Vec<tokio::task::JoinHandle<()>> {
        let hooks: std::sync::Arc<Vec<Hook>> = std::sync::Arc::new(self.hooks);
        self.kinds.iter().map(|kind| tokio::spawn(watch_kind(client.clone(), kind, hooks.clone()))).collect()
    }
}

async fn watch_kind(client: Client, kind: &'static ProviderKind, hooks: std::sync::Arc<Vec<Hook>>) {
    let gvk = GroupVersionKind::gvk(PROVIDER_CONFIG_GROUP, PROVIDER_CONFIG_VERSION, kind.kind);
    let resource = ApiResource::from_gvk_with_plural(&gvk, kind.plural);
    let api: Api<PartialObjectMeta<DynamicObject>> = Api::all_with(client, &resource);
    let stream = watcher(api, watcher::Config::default()).default_backoff();
    let mut stream = std::pin::pin!(stream);
    let tell = |namespace: &str, name: &str| {
        for hook in hooks.iter() {
            hook(ConfigObject { kind: kind.kind, namespace, name });
        }
    };
    // UIDs and generations by namespace and name, so a re-list after the watch was down tells
    // what changed or went meanwhile (and only that), an object deleted and re-created under the
    // same name (generation 1 again) included.
    type Seen = HashMap<(String, String), (Option<String>, Option<i64>)>;
    let mut known: Seen = HashMap::new();
    let mut relisting: Option<Seen> = None;
    let key = |obj: &PartialObjectMeta<DynamicObject>| (obj.namespace().unwrap_or_default(), obj.name_any());
    let seen = |obj: &PartialObjectMeta<DynamicObject>| (obj.metadata.uid.clone(), obj.metadata.generation);
    while let Some(event) = stream.next().await {
        match event {
            Err(e) => tracing::warn!(kind = kind.kind, error = %e, "watch failed; retrying"),
            Ok(watcher::Event::Init) => relisting = Some(HashMap::new()),
            Ok(watcher::Event::InitApply(obj)) => {
                relisting.get_or_insert_default().insert(key(&obj), seen(&obj));
            }
            Ok(watcher::Event::InitDone) => {
                let now = relisting.take().unwrap_or_default();
                let changed = now.iter().filter(|(k, g)| known.get(*k) != Some(*g)).map(|(k, _)| k);
                let gone = known.keys().filter(|k| !now.contains_key(*k));
                for (ns, name) in changed.chain(gone) {
                    tell(ns, name);
                }
                known = now;
            }
            Ok(watcher::Event::Apply(obj)) => {
                let k = key(&obj);
                tell(&k.0, &k.1);
                known.insert(k, seen(&obj));
            }
            Ok(watcher::Event::Delete(obj)) => {
                let k = key(&obj);
                tell(&k.0, &k.1);
                known.remove(&k);
            }
        }
    }
}
