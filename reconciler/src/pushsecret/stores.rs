//! Which stores a PushSecret pushes to: by name (an omitted kind tries a Provider first, then a
//! ClusterProvider, and the omission is remembered) or by label selector (of one kind, or with
//! the kind omitted, the Providers, ClusterProviders and SecretStores the selector matches).

use std::sync::Arc;

use keyward_crds::push_secret::PushSecretStoreRef;
use keyward_crds::{ClusterProvider, ClusterSecretStore, Provider, SecretStore, StoreKind};
use kube::api::ListParams;
use kube::{Api, Client};

use crate::clientmanager::{ClientError, ClientManager, StoreObject};
use crate::selector::to_query;

/// A store to push to.
#[derive(Debug, Clone)]
pub struct Target {
    /// The store object.
    pub store: StoreObject,
    /// The kind as written in the manifest (`None` when omitted).
    pub requested_kind: Option<StoreKind>,
    /// `Kind/Name`, the key of `status.syncedPushSecrets`.
    pub key: String,
}

/// Resolves every `secretStoreRefs` entry.
pub async fn resolve_targets(
    client: &Client,
    manager: &ClientManager,
    namespace: &str,
    refs: &[PushSecretStoreRef],
) -> Result<Vec<Target>, String> {
    let mut out: Vec<Target> = Vec::new();
    for (i, r) in refs.iter().enumerate() {
        let found = match (&r.name, &r.label_selector) {
            (Some(name), _) => vec![
                by_name(manager, namespace, name, r.kind).await.map_err(|e| format!("secretStoreRefs[{i}]: {e}"))?,
            ],
            (None, Some(selector)) => by_labels(client, namespace, &to_query(selector), r.kind)
                .await
                .map_err(|e| format!("secretStoreRefs[{i}]: listing stores: {e}"))?,
            (None, None) => return Err(format!("secretStoreRefs[{i}] needs a name or a labelSelector")),
        };
        for t in found {
            if !out.iter().any(|o| o.key == t.key) {
                out.push(t);
            }
        }
    }
    Ok(out)
}

fn target(store: StoreObject, requested_kind: Option<StoreKind>) -> Target {
    let key = format!("{}/{}", store.kind(), store.name());
    Target { store, requested_kind, key }
}

async fn by_name(
    manager: &ClientManager,
    namespace: &str,
    name: &str,
    kind: Option<StoreKind>,
) -> Result<Target, ClientError> {
    match kind {
        Some(k) => Ok(target(manager.find_store(k, name, namespace).await?, kind)),
        None => match manager.find_store(StoreKind::Provider, name, namespace).await {
            Ok(s) => Ok(target(s, None)),
            Err(ClientError::StoreNotFound { .. }) => {
                Ok(target(manager.find_store(StoreKind::ClusterProvider, name, namespace).await?, None))
            }
            Err(e) => Err(e),
        },
    }
}

async fn by_labels(
    client: &Client,
    namespace: &str,
    selector: &str,
    kind: Option<StoreKind>,
) -> Result<Vec<Target>, kube::Error> {
    let params = ListParams::default().labels(selector);
    let mut out = Vec::new();
    if matches!(kind, None | Some(StoreKind::Provider)) {
        let api: Api<Provider> = Api::namespaced(client.clone(), namespace);
        for p in api.list(&params).await? {
            out.push(target(StoreObject::Provider(Arc::new(p)), kind));
        }
    }
    if matches!(kind, None | Some(StoreKind::ClusterProvider)) {
        let api: Api<ClusterProvider> = Api::all(client.clone());
        for p in api.list(&params).await? {
            out.push(target(StoreObject::ClusterProvider(Arc::new(p)), kind));
        }
    }
    // An omitted kind means SecretStore upstream, so its SecretStores are selected too.
    if matches!(kind, None | Some(StoreKind::SecretStore)) {
        let api: Api<SecretStore> = Api::namespaced(client.clone(), namespace);
        for s in api.list(&params).await? {
            out.push(target(StoreObject::SecretStore(Arc::new(s)), kind));
        }
    }
    if kind == Some(StoreKind::ClusterSecretStore) {
        let api: Api<ClusterSecretStore> = Api::all(client.clone());
        for s in api.list(&params).await? {
            out.push(target(StoreObject::ClusterSecretStore(Arc::new(s)), kind));
        }
    }
    Ok(out)
}
