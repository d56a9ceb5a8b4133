//! Where the manager reads stores, namespace labels and TLS Secrets from. The Kubernetes
//! implementation answers from watched caches where it has them and falls back to the API;
//! unit tests use an in-memory one.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use keyward_crds::{ClusterProvider, ClusterSecretStore, Provider, SecretStore};
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Client};

use super::tls::{TLS_SECRET_NAME, TlsMaterial};

/// Read access to what resolution needs. Errors are messages for the status condition.
pub trait Lookup: Send + Sync {
    /// A Provider by namespace and name.
    fn provider<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Arc<Provider>>, String>>;
    /// A ClusterProvider by name.
    fn cluster_provider<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<Arc<ClusterProvider>>, String>>;
    /// A SecretStore by namespace and name.
    fn secret_store<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Arc<SecretStore>>, String>>;
    /// A ClusterSecretStore by name.
    fn cluster_secret_store<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Arc<ClusterSecretStore>>, String>>;
    /// The current labels of a namespace; `None` when it does not exist.
    fn namespace_labels<'a>(&'a self, name: &'a str)
    -> BoxFuture<'a, Result<Option<BTreeMap<String, String>>, String>>;
    /// The provider TLS material in a namespace; `None` when the Secret does not exist.
    fn tls_material<'a>(&'a self, namespace: &'a str) -> BoxFuture<'a, Result<Option<TlsMaterial>, String>>;
}

/// Reads from the API server, preferring watched caches.
#[derive(Clone)]
pub struct KubeLookup {
    client: Client,
    providers: Option<Store<Provider>>,
    cluster_providers: Option<Store<ClusterProvider>>,
    secret_stores: Option<Store<SecretStore>>,
    cluster_secret_stores: Option<Store<ClusterSecretStore>>,
    tls_secrets: Option<Store<Secret>>,
    namespaces: Option<Store<PartialObjectMeta<Namespace>>>,
}

impl KubeLookup {
    /// Reads everything straight from the API.
    pub fn new(client: Client) -> Self {
        KubeLookup {
            client,
            providers: None,
            cluster_providers: None,
            secret_stores: None,
            cluster_secret_stores: None,
            tls_secrets: None,
            namespaces: None,
        }
    }

    /// Answers from these caches first (objects missing from a cache are read from the API,
    /// so a store created a moment ago is still found).
    pub fn with_stores(
        mut self,
        providers: Store<Provider>,
        cluster_providers: Store<ClusterProvider>,
        tls_secrets: Store<Secret>,
        namespaces: Store<PartialObjectMeta<Namespace>>,
    ) -> Self {
        self.providers = Some(providers);
        self.cluster_providers = Some(cluster_providers);
        self.tls_secrets = Some(tls_secrets);
        self.namespaces = Some(namespaces);
        self
    }

    /// Answers SecretStore and ClusterSecretStore lookups from these caches first.
    pub fn with_secret_stores(
        mut self,
        secret_stores: Store<SecretStore>,
        cluster_secret_stores: Store<ClusterSecretStore>,
    ) -> Self {
        self.secret_stores = Some(secret_stores);
        self.cluster_secret_stores = Some(cluster_secret_stores);
        self
    }
}

fn msg(what: &str, e: kube::Error) -> String {
    format!("reading {what}: {e}")
}

impl Lookup for KubeLookup {
    fn provider<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Arc<Provider>>, String>> {
        Box::pin(async move {
            if let Some(p) = self.providers.as_ref().and_then(|s| s.get(&ObjectRef::new(name).within(namespace))) {
                return Ok(Some(p));
            }
            let api: Api<Provider> = Api::namespaced(self.client.clone(), namespace);
            api.get_opt(name)
                .await
                .map(|o| o.map(Arc::new))
                .map_err(|e| msg(&format!("Provider {namespace}/{name}"), e))
        })
    }

    fn cluster_provider<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<Arc<ClusterProvider>>, String>> {
        Box::pin(async move {
            if let Some(p) = self.cluster_providers.as_ref().and_then(|s| s.get(&ObjectRef::new(name))) {
                return Ok(Some(p));
            }
            let api: Api<ClusterProvider> = Api::all(self.client.clone());
            api.get_opt(name).await.map(|o| o.map(Arc::new)).map_err(|e| msg(&format!("ClusterProvider {name}"), e))
        })
    }

    fn secret_store<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Arc<SecretStore>>, String>> {
        Box::pin(async move {
            if let Some(p) = self.secret_stores.as_ref().and_then(|s| s.get(&ObjectRef::new(name).within(namespace))) {
                return Ok(Some(p));
            }
            let api: Api<SecretStore> = Api::namespaced(self.client.clone(), namespace);
            api.get_opt(name)
                .await
                .map(|o| o.map(Arc::new))
                .map_err(|e| msg(&format!("SecretStore {namespace}/{name}"), e))
        })
    }

    fn cluster_secret_store<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Arc<ClusterSecretStore>>, String>> {
        Box::pin(async move {
            if let Some(p) = self.cluster_secret_stores.as_ref().and_then(|s| s.get(&ObjectRef::new(name))) {
                return Ok(Some(p));
            }
            let api: Api<ClusterSecretStore> = Api::all(self.client.clone());
            api.get_opt(name).await.map(|o| o.map(Arc::new)).map_err(|e| msg(&format!("ClusterSecretStore {name}"), e))
        })
    }

    fn namespace_labels<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<BTreeMap<String, String>>, String>> {
        // From the namespace watch: a label change after admission reaches it within the
        // watch's delivery delay (typically milliseconds), before any later provider call. A
        // namespace the watch has not delivered yet is read from the API.
        Box::pin(async move {
            if let Some(ns) = self.namespaces.as_ref().and_then(|s| s.get(&ObjectRef::new(name))) {
                return Ok(Some(ns.metadata.labels.clone().unwrap_or_default()));
            }
            let api: Api<Namespace> = Api::all(self.client.clone());
            api.get_metadata_opt(name)
                .await
                .map(|o| o.map(|ns| ns.metadata.labels.unwrap_or_default()))
                .map_err(|e| msg(&format!("namespace {name}"), e))
        })
    }

    fn tls_material<'a>(&'a self, namespace: &'a str) -> BoxFuture<'a, Result<Option<TlsMaterial>, String>> {
        Box::pin(async move {
            let cached =
                self.tls_secrets.as_ref().and_then(|s| s.get(&ObjectRef::new(TLS_SECRET_NAME).within(namespace)));
            let secret = match cached {
                Some(s) => Some(s),
                None => {
                    let api: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
                    api.get_opt(TLS_SECRET_NAME)
                        .await
                        .map_err(|e| msg(&format!("Secret {namespace}/{TLS_SECRET_NAME}"), e))?
                        .map(Arc::new)
                }
            };
            match secret {
                None => Ok(None),
                Some(s) => TlsMaterial::from_secret_data(namespace, s.data.as_ref()).map(Some),
            }
        })
    }
}
