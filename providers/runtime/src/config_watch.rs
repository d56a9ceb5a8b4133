//! The configuration objects a provider reads on its calls — SecretStores, ClusterSecretStores
//! and its own configuration kinds — kept in memory by watches, so a periodic read costs the
//! API server nothing (feature `refs`).
//!
//! A kind's watch starts the first time the kind is asked for. The watch answers only calls
//! that accept an aged answer (a GetSecret, GetSecretMap or Validate with `max_age_millis` above
//! 0: syncs within a refresh window, periodic store checks): they accept a configuration a
//! moment behind the API server too. Every other call — a sync a spec edit or force-sync asked
//! for, a store's first check or one after its spec changed, pushes — reads the object with a
//! GET, as does any call the watch cannot answer: not listed yet (the first call waits a moment
//! for the list), unable to list (no list/watch permission), or an object it has not seen
//! (created a moment ago). Objects are kept without their managed fields; memory grows with
//! the number of configuration objects, not with calls.
//!
//! Secrets and ConfigMaps are watched as metadata only, kept as name and resourceVersion: that
//! is all [`crate::client_cache`] needs to see whether what a cached client was built from
//! changed ([`ConfigWatches::version_of`]).
//!
//! SecretStores and ClusterSecretStores are every tenant's, cluster-wide, and a store may carry
//! blocks for any provider. The watch keeps of each store only the `spec.provider` block this
//! process serves ([`ConfigWatches::lookup_store`]; the others keep their names, so a store
//! naming two providers is still refused), once the process said which it serves
//! ([`ConfigWatches::serve_store_keys`]); until then stores are read with a GET. The blocks
//! Keyward does not type arrive measured and bounded (`keyward_crds::free_json`), so even a
//! store listed before it is trimmed holds no more than those limits of them.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use futures::FutureExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use keyward_crds::{ClusterSecretStore, SecretStore, SecretStoreProvider};
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio_stream::StreamExt;

use crate::context::RequestContext;

/// How long the call that starts a kind's watch waits for its first list before reading with a
/// GET instead; later calls never wait.
const FIRST_LIST: Duration = Duration::from_secs(5);

/// The watches of one provider process, one per kind asked for.
#[derive(Default)]
pub struct ConfigWatches {
    stores: Mutex<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>,
    /// The `spec.provider.<key>` blocks this process serves, once a call said so.
    served: OnceLock<Vec<&'static str>>,
}

/// A store kind: its `spec.provider`, to keep only the served block of.
pub trait StoreObject {
    /// `spec.provider`.
    fn provider_mut(&mut self) -> &mut SecretStoreProvider;
}

impl StoreObject for SecretStore {
    fn provider_mut(&mut self) -> &mut SecretStoreProvider {
        &mut self.spec.provider
    }
}

impl StoreObject for ClusterSecretStore {
    fn provider_mut(&mut self) -> &mut SecretStoreProvider {
        &mut self.spec.store.provider
    }
}

impl ConfigWatches {
    /// The object `name` (in `namespace`; `None` for a cluster-scoped kind) as the watch of `K`
    /// has it, when `ctx` accepts a watched answer and the watch has one; `None` tells the
    /// caller to read it with a GET.
    pub async fn lookup<K>(
        &self,
        client: &Client,
        ctx: &RequestContext,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<K>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    {
        if ctx.max_age.is_zero() {
            return None;
        }
        let (store, started) = self.store::<K>(client, |o: &mut K| drop_managed_fields(o.meta_mut()));
        Self::watched(store, started, namespace, name).await
    }

    /// Says which `spec.provider.<key>` blocks this process serves (the first caller decides; a
    /// process serves one kind), so the store watches can keep only those blocks.
    pub fn serve_store_keys(&self, keys: impl IntoIterator<Item = &'static str>) {
        let _ = self.served.set(keys.into_iter().collect());
    }

    /// [`Self::lookup`] for a SecretStore or ClusterSecretStore, from a watch that keeps only
    /// the block this process serves; `None` (read it with a GET) until the process said which
    /// that is.
    pub async fn lookup_store<K>(
        &self,
        client: &Client,
        ctx: &RequestContext,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<K>
    where
        K: StoreObject + Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    {
        if ctx.max_age.is_zero() {
            return None;
        }
        let served = self.served.get()?.clone();
        let (store, started) = self.store::<K>(client, move |o: &mut K| {
            o.provider_mut().keep_only(&served);
            drop_managed_fields(o.meta_mut());
        });
        Self::watched(store, started, namespace, name).await
    }

    /// The object from a watch's store, once it has listed (the call that started the watch
    /// waits a moment for that).
    async fn watched<K>(store: Store<K>, started: bool, namespace: Option<&str>, name: &str) -> Option<K>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    {
        let listed = store.wait_until_ready();
        let ready = if started {
            matches!(tokio::time::timeout(FIRST_LIST, listed).await, Ok(Ok(())))
        } else {
            matches!(listed.now_or_never(), Some(Ok(())))
        };
        if !ready {
            return None;
        }
        let mut at = ObjectRef::new(name);
        if let Some(ns) = namespace {
            at = at.within(ns);
        }
        store.get(&at).map(|o| (*o).clone())
    }

    /// The resourceVersion of the `K` object `namespace/name` (a Secret or ConfigMap) as a
    /// metadata-only watch of `K` has it: `Some(None)` when the watch has listed and has no such
    /// object, `None` when the watch cannot tell (not listed yet, or not allowed to list). Never
    /// waits: the first call starts the watch and hears `None`.
    pub fn version_of<K>(&self, client: &Client, namespace: &str, name: &str) -> Option<Option<String>>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    {
        let (store, _) = self.store::<PartialObjectMeta<K>>(client, |o| keep_only_version(o.meta_mut()));
        if !matches!(store.wait_until_ready().now_or_never(), Some(Ok(()))) {
            return None;
        }
        Some(store.get(&ObjectRef::new(name).within(namespace)).and_then(|o| o.metadata.resource_version.clone()))
    }

    /// The store of `K`'s watch, and whether this call started the watch. `trim` takes from each
    /// object what the store need not keep.
    fn store<K>(&self, client: &Client, trim: impl FnMut(&mut K) + Send + 'static) -> (Store<K>, bool)
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    {
        let mut stores = self.stores.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(store) = stores.get(&TypeId::of::<K>()).and_then(|s| s.downcast_ref::<Store<K>>()) {
            return (store.clone(), false);
        }
        let (reader, writer) = reflector::store();
        let api: Api<K> = Api::all(client.clone());
        let kind = K::kind(&()).into_owned();
        let events =
            watcher(api, watcher::Config::default()).default_backoff().modify(trim).reflect(writer).applied_objects();
        tokio::spawn(async move {
            let mut events = std::pin::pin!(events);
            while let Some(event) = events.next().await {
                if let Err(e) = event {
                    // The calls go on with GETs; the watch retries with backoff.
                    tracing::warn!(kind = %kind, error = %e, "configuration watch failed; reading with GETs meanwhile");
                }
            }
        });
        stores.insert(TypeId::of::<K>(), Arc::new(reader.clone()));
        (reader, true)
    }
}

fn drop_managed_fields(meta: &mut ObjectMeta) {
    meta.managed_fields = None;
}

/// Keeps the name, namespace and resourceVersion.
fn keep_only_version(meta: &mut ObjectMeta) {
    *meta = ObjectMeta {
        name: meta.name.take(),
        namespace: meta.namespace.take(),
        resource_version: meta.resource_version.take(),
        ..ObjectMeta::default()
    };
}
