//! The client manager: resolves a store reference to a Provider or ClusterProvider, enforces
//! the namespace conditions and auth-scope rules before any client exists, loads the TLS
//! material, and hands out cached clients over pooled connections.

mod breaker;
mod cache;
mod client;
mod connect;
mod error;
mod lookup;
mod metrics;
mod object;
mod pool;
mod recovery;
mod resolve;
mod retry;
mod tls;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use keyward_crds::StoreKind;

pub use breaker::{Breaker, BreakerConfig};
pub use cache::{CacheKey, ClientCache, Lookup as CacheLookup, Stamp};
pub use client::{CallSettings, ProviderClient};
pub use connect::TonicConnector;
pub use error::ClientError;
pub use lookup::{KubeLookup, Lookup};
pub use metrics::{ClientMetrics, GrpcLabels, StoreLabels, TotalCounter};
pub use object::ObjectKey;
pub use pool::{Connector, Pool, PoolConfig, PoolError, PoolKey, PoolStats};
pub use recovery::{ProviderId, Recovery, Waitable};
pub use resolve::{Resolved, StoreObject, StoreProviders, resolve, resolve_for_check};
pub use retry::RetryPolicy;
pub use tls::{CA_KEY, CERT_KEY, KEY_KEY, TLS_SECRET_NAME, TlsMaterial};

use client::ClientCore;

/// What the caller is going to do with the client; checked against the store's capabilities.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Read values (ExternalSecret).
    Read,
    /// Write values (PushSecret).
    Write,
}

/// Which cluster-scoped kinds this instance processes (the reconciler's
/// `--process-cluster-store` and `--process-cluster-generator`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClusterKinds {
    /// ClusterSecretStores: with them off, what uses one is left alone.
    pub stores: bool,
    /// ClusterGenerators: with them off, none is read.
    pub generators: bool,
}

impl Default for ClusterKinds {
    fn default() -> Self {
        ClusterKinds { stores: true, generators: true }
    }
}

/// Manager settings.
#[derive(Debug, Clone, Copy)]
pub struct ManagerConfig {
    /// Connection pool.
    pub pool: PoolConfig,
    /// Circuit breaker of each provider.
    pub breaker: BreakerConfig,
    /// Deadline and retries of each call.
    pub call: CallSettings,
    /// Objects requeued per second, at most, when their provider comes back.
    pub recovery_rate: u32,
}

impl Default for ManagerConfig {
    fn default() -> Self {
        ManagerConfig {
            pool: PoolConfig::default(),
            breaker: BreakerConfig::default(),
            call: CallSettings::default(),
            recovery_rate: 500,
        }
    }
}

/// Hands out provider clients. Shared by every controller.
pub struct ClientManager {
    lookup: Arc<dyn Lookup>,
    pool: Arc<Pool>,
    cache: Mutex<ClientCache<Arc<ClientCore>>>,
    breakers: Mutex<HashMap<String, Arc<Breaker>>>,
    recovery: Arc<Recovery>,
    config: ManagerConfig,
    stores: StoreProviders,
    metrics: Arc<ClientMetrics>,
    /// This instance's `--controller-class` (stores naming another controller are left alone).
    controller_class: Option<String>,
    /// Which cluster-scoped kinds this instance processes (`--process-cluster-*`).
    cluster_kinds: ClusterKinds,
}

impl ClientManager {
    /// A manager reading through `lookup` and connecting through `connector`.
    pub fn new(
        lookup: Arc<dyn Lookup>,
        connector: Box<dyn Connector>,
        config: ManagerConfig,
        metrics: Arc<ClientMetrics>,
    ) -> Self {
        ClientManager {
            lookup,
            pool: Pool::new(config.pool, connector),
            cache: Mutex::new(ClientCache::default()),
            breakers: Mutex::new(HashMap::new()),
            recovery: Arc::new(Recovery::new(config.recovery_rate, metrics.clone())),
            config,
            stores: StoreProviders::default(),
            metrics,
            controller_class: None,
            cluster_kinds: ClusterKinds::default(),
        }
    }

    /// Serves SecretStores and ClusterSecretStores through these provider processes.
    pub fn with_store_providers(mut self, stores: StoreProviders) -> Self {
        self.stores = stores;
        self
    }

    /// The controller class of this instance: a SecretStore or ClusterSecretStore whose
    /// `spec.controller` names another is not served (`StoreObject::served_by`).
    pub fn with_controller_class(mut self, class: Option<String>) -> Self {
        self.controller_class = class;
        self
    }

    /// Which upstream kinds this instance processes: with ClusterSecretStores off, what uses
    /// one is left alone; with ClusterGenerators off, none is read.
    pub fn with_cluster_kinds(mut self, kinds: ClusterKinds) -> Self {
        self.cluster_kinds = kinds;
        self
    }

    /// Which cluster-scoped kinds this instance processes.
    pub fn cluster_kinds(&self) -> ClusterKinds {
        self.cluster_kinds
    }

    /// Whether this instance serves every store the references name (kind as written, an
    /// omitted one is a SecretStore). A store naming another controller in `spec.controller`
    /// is that controller's, and so is what uses it: the caller leaves the object alone, as
    /// upstream; so is a ClusterSecretStore while `--process-cluster-store=false`. A store that
    /// cannot be found counts as served (the sync reports it).
    pub async fn serves_stores(&self, refs: &[(Option<StoreKind>, &str)], manifest_ns: &str) -> bool {
        for &(kind, name) in refs {
            let kind = keyward_crds::rules::store_ref_kind(kind);
            if kind == StoreKind::ClusterSecretStore && !self.cluster_kinds.stores && !name.is_empty() {
                return false;
            }
            if !matches!(kind, StoreKind::SecretStore | StoreKind::ClusterSecretStore) || name.is_empty() {
                continue;
            }
            if let Ok(store) = self.find_store(kind, name, manifest_ns).await
                && !store.served_by(self.controller_class.as_deref())
            {
                return false;
            }
        }
        true
    }

    /// The current labels of a namespace, as ClusterProvider conditions see them (the namespace
    /// watch, else the API); `None` when it does not exist. ClusterGenerator conditions read them
    /// here too, so both kinds decide on the same labels.
    pub async fn namespace_labels(
        &self,
        name: &str,
    ) -> Result<Option<std::collections::BTreeMap<String, String>>, String> {
        self.lookup.namespace_labels(name).await
    }

    /// Where SecretStores and ClusterSecretStores are served.
    pub fn store_providers(&self) -> &StoreProviders {
        &self.stores
    }

    /// Finds the store a reference points at.
    pub async fn find_store(&self, kind: StoreKind, name: &str, manifest_ns: &str) -> Result<StoreObject, ClientError> {
        let api_err = |message| ClientError::Api { what: format!("{kind} {name}"), message };
        let found = match kind {
            StoreKind::Provider => {
                self.lookup.provider(manifest_ns, name).await.map_err(api_err)?.map(StoreObject::Provider)
            }
            StoreKind::ClusterProvider => {
                self.lookup.cluster_provider(name).await.map_err(api_err)?.map(StoreObject::ClusterProvider)
            }
            StoreKind::SecretStore => {
                self.lookup.secret_store(manifest_ns, name).await.map_err(api_err)?.map(StoreObject::SecretStore)
            }
            StoreKind::ClusterSecretStore => {
                self.lookup.cluster_secret_store(name).await.map_err(api_err)?.map(StoreObject::ClusterSecretStore)
            }
        };
        found.ok_or_else(|| ClientError::StoreNotFound {
            kind,
            name: name.to_string(),
            namespace: matches!(kind, StoreKind::Provider | StoreKind::SecretStore).then(|| manifest_ns.to_string()),
        })
    }

    /// A client of the store `kind`/`name` for a manifest in `manifest_ns`.
    pub async fn client_for(
        &self,
        kind: StoreKind,
        name: &str,
        manifest_ns: &str,
        need: Need,
    ) -> Result<(ProviderClient, StoreObject), ClientError> {
        let store = self.find_store(kind, name, manifest_ns).await?;
        let client = self.client_for_store(&store, manifest_ns, need).await?;
        Ok((client, store))
    }

    /// A client of a store already looked up, for a manifest in `manifest_ns`. The rules are
    /// enforced on every call, cached client or not: namespace labels may have changed.
    pub async fn client_for_store(
        &self,
        store: &StoreObject,
        manifest_ns: &str,
        need: Need,
    ) -> Result<ProviderClient, ClientError> {
        if !store.served_by(self.controller_class.as_deref()) {
            return Err(ClientError::NotServed {
                kind: store.kind(),
                name: store.name(),
                controller: store.store_spec().and_then(|s| s.controller.clone()).unwrap_or_default(),
                class: self.controller_class.clone(),
            });
        }
        check_capabilities(store, need)?;
        let labels = if store.needs_namespace_labels() {
            let labels = self
                .lookup
                .namespace_labels(manifest_ns)
                .await
                .map_err(|message| ClientError::Api { what: format!("namespace {manifest_ns}"), message })?;
            Some(labels.ok_or_else(|| ClientError::NamespaceNotFound(manifest_ns.to_string()))?)
        } else {
            None
        };
        let resolved = resolve(store, manifest_ns, labels.as_ref(), &self.stores)?;
        self.client_from_resolved(store, resolved, manifest_ns).await
    }

    /// A client for the Provider controller's own Validate / Capabilities calls.
    pub async fn check_client(&self, store: &StoreObject) -> Result<ProviderClient, ClientError> {
        let resolved = resolve_for_check(store, &self.stores)?;
        let key_ns = resolved.auth_namespace.clone();
        self.client_from_resolved(store, resolved, &key_ns).await
    }

    async fn client_from_resolved(
        &self,
        store: &StoreObject,
        resolved: Resolved,
        manifest_ns: &str,
    ) -> Result<ProviderClient, ClientError> {
        let tls =
            self.lookup.tls_material(&resolved.tls_namespace).await.map_err(ClientError::Tls)?.ok_or_else(|| {
                ClientError::Tls(format!(
                    "Secret {}/{TLS_SECRET_NAME} not found (it is looked up in the namespace of the provider's \
                     service address, else in the auth namespace)",
                    resolved.tls_namespace
                ))
            })?;
        let key =
            CacheKey { kind: resolved.kind, name: resolved.name.clone(), manifest_namespace: manifest_ns.to_string() };
        let stamp =
            Stamp { uid: store.uid(), generation: store.generation(), tls_fingerprint: tls.fingerprint.clone() };
        let labels = StoreLabels { kind: resolved.kind.as_str().to_string(), name: resolved.name.clone() };
        let cached = self.lock_cache().get(&key, &stamp);
        let core = match cached {
            CacheLookup::Hit(core) => {
                self.metrics.cache_hits.get_or_create(&labels).inc();
                core
            }
            CacheLookup::Miss | CacheLookup::Stale => {
                self.metrics.cache_misses.get_or_create(&labels).inc();
                let pool_key = PoolKey { address: resolved.address.clone(), tls_fingerprint: tls.fingerprint.clone() };
                let tls = Arc::new(tls);
                // Sets up (lazily) the pooled connection now, so a bad address or unusable TLS
                // material is reported here rather than on the first call.
                self.pool.channel(&pool_key, &tls, Instant::now())?;
                let store_id = match store {
                    StoreObject::Provider(_) | StoreObject::SecretStore(_) => {
                        format!("{}/{manifest_ns}/{}", resolved.kind, resolved.name)
                    }
                    StoreObject::ClusterProvider(_) | StoreObject::ClusterSecretStore(_) => {
                        format!("{}/{}", resolved.kind, resolved.name)
                    }
                };
                // One breaker per identity the provider acts as: namespaces that authenticate
                // on their own (a Provider, a ClusterProvider with ManifestNamespace) have their
                // own, so one tenant's failing credentials cannot cut every other tenant off the
                // same ClusterProvider; ProviderNamespace users share the one identity.
                // The store's UID is part of the key: a store deleted and created again under
                // the same name (new credentials, perhaps another team's) starts closed.
                let provider = format!("{}/{}/{}", resolved.kind, resolved.name, resolved.auth_namespace);
                let breaker_key = format!("{provider}/{}", store.uid().unwrap_or_default());
                let core = Arc::new(ClientCore {
                    pool_key,
                    tls,
                    reference: resolved.reference,
                    source_namespace: manifest_ns.to_string(),
                    owner: resolved.owner,
                    breaker: self.breaker(&breaker_key),
                    provider: provider.into(),
                    store: store_id,
                });
                let mut cache = self.lock_cache();
                cache.insert(key, stamp, core.clone());
                self.metrics.cached_clients.set(cache.len() as i64);
                core
            }
        };
        self.publish_pool_stats();
        // A store's own retrySettings replace the defaults for calls through it.
        let mut settings = self.config.call;
        if let Some(retry) = store.store_spec().and_then(keyward_crds::rules::store_retry) {
            settings.retry = settings.retry.for_store(retry);
        }
        Ok(ProviderClient {
            core,
            pool: self.pool.clone(),
            settings,
            metrics: self.metrics.clone(),
            recovery: self.recovery.clone(),
        })
    }

    /// A client of the `provider` process (a row name of the provider registry, as in
    /// `StoreProviders`) for generating `kind` values for a manifest in `namespace`. It reaches
    /// the provider over the same pooled mTLS connection and TLS material as the SecretStores
    /// that provider serves; the namespace is the tenant boundary every call carries.
    pub async fn generator_client(
        &self,
        provider: &str,
        kind: &str,
        namespace: &str,
    ) -> Result<ProviderClient, ClientError> {
        let not_enabled =
            || ClientError::GeneratorProviderNotEnabled { kind: kind.to_string(), provider: provider.to_string() };
        let address = self.stores.addresses.get(provider).cloned().ok_or_else(not_enabled)?;
        let tls_namespace = keyward_crds::rules::tls_secret_namespace(&address, &self.stores.tls_namespace);
        let tls = self.lookup.tls_material(&tls_namespace).await.map_err(ClientError::Tls)?.ok_or_else(|| {
            ClientError::Tls(format!(
                "Secret {tls_namespace}/{TLS_SECRET_NAME} not found (for the {provider} provider)"
            ))
        })?;
        let pool_key = PoolKey { address, tls_fingerprint: tls.fingerprint.clone() };
        let tls = Arc::new(tls);
        self.pool.channel(&pool_key, &tls, Instant::now())?;
        // One breaker per namespace: one tenant's failing generator cannot cut off another's.
        let breaker_key = format!("{kind}/{provider}/{namespace}");
        let core = Arc::new(ClientCore {
            pool_key,
            tls,
            reference: keyward_proto::v1::ProviderReference::default(),
            source_namespace: namespace.to_string(),
            owner: keyward_crds::rules::ConfigOwner::Tenant,
            breaker: self.breaker(&breaker_key),
            provider: breaker_key.into(),
            store: format!("{kind} generators of namespace {namespace}"),
        });
        self.publish_pool_stats();
        Ok(ProviderClient {
            core,
            pool: self.pool.clone(),
            settings: self.config.call,
            metrics: self.metrics.clone(),
            recovery: self.recovery.clone(),
        })
    }

    /// This instance's controller class (`--controller-class`), if any.
    pub fn controller_class(&self) -> Option<&str> {
        self.controller_class.as_deref()
    }

    fn lock_cache(&self) -> std::sync::MutexGuard<'_, ClientCache<Arc<ClientCore>>> {
        // Cache operations are single statements; a poisoned lock leaves a consistent map.
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn breaker(&self, key: &str) -> Arc<Breaker> {
        let mut breakers = self.breakers.lock().unwrap_or_else(|e| e.into_inner());
        breakers.entry(key.to_string()).or_insert_with(|| Arc::new(Breaker::new(self.config.breaker))).clone()
    }

    /// Objects waiting for their provider to come back, and their paced requeue.
    pub fn recovery(&self) -> &Arc<Recovery> {
        &self.recovery
    }

    /// Forgets every client of a deleted store.
    pub fn forget_store(&self, kind: StoreKind, name: &str) {
        let mut cache = self.lock_cache();
        cache.remove_store(kind, name);
        self.metrics.cached_clients.set(cache.len() as i64);
        drop(cache);
        // Its breakers too (one per identity and UID), so deleted stores leave nothing behind.
        let prefix = format!("{kind}/{name}/");
        self.breakers.lock().unwrap_or_else(|e| e.into_inner()).retain(|key, _| !key.starts_with(&prefix));
    }

    /// Evicts idle and expired connections; called periodically.
    pub fn evict_idle(&self) -> usize {
        let gone = self.pool.evict(Instant::now());
        self.publish_pool_stats();
        gone
    }

    /// Current pool counters.
    pub fn pool_stats(&self) -> PoolStats {
        self.pool.stats()
    }

    fn publish_pool_stats(&self) {
        let stats = self.pool.stats();
        self.metrics.pool_open.set(stats.open as i64);
        self.metrics.pool_created.set(stats.created);
        self.metrics.pool_evicted.set(stats.evicted);
    }

    /// Releases every pooled connection and drops every client.
    pub fn close(&self) {
        self.pool.close();
        self.lock_cache().clear();
        self.metrics.cached_clients.set(0);
        self.publish_pool_stats();
    }
}

fn check_capabilities(store: &StoreObject, need: Need) -> Result<(), ClientError> {
    // A store whose capabilities are not known yet is given the benefit of the doubt; the
    // provider itself still refuses what it cannot do.
    let Some(capabilities) = store.capabilities() else {
        return Ok(());
    };
    let (ok, what) = match need {
        Need::Read => (capabilities.can_read(), "read secrets for an ExternalSecret"),
        Need::Write => (capabilities.can_write(), "write secrets for a PushSecret"),
    };
    if ok {
        Ok(())
    } else {
        Err(ClientError::Capability { kind: store.kind(), name: store.name(), capabilities, need: what })
    }
}

#[cfg(test)]
mod tests;
