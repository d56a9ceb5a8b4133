//! Which stores a PushSecret pushes to: by name or by label selector, of the kind written, or
//! with the kind omitted of a SecretStore, as upstream (`keyward_crds::rules::store_ref_kind`);
//! the omission is remembered.

use std::sync::Arc;

use keyward_crds::push_secret::PushSecretStoreRef;
use keyward_crds::rules::{parse_label_selector, store_ref_kind};
use keyward_crds::{ClusterProvider, ClusterSecretStore, Provider, SecretStore, StoreKind};
use kube::api::ListParams;
use kube::core::Selector;
use kube::{Api, Client};

use crate::clientmanager::{ClientError, ClientManager, StoreObject};

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
            (None, Some(selector)) => {
                let selector = parse_label_selector(selector)
                    .map_err(|e| format!("secretStoreRefs[{i}].labelSelector is invalid: {e}"))?;
                by_labels(client, namespace, &selector, r.kind)
                    .await
                    .map_err(|e| format!("secretStoreRefs[{i}]: listing stores: {e}"))?
            }
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
    Ok(target(manager.find_store(store_ref_kind(kind), name, namespace).await?, kind))
}

async fn by_labels(
    client: &Client,
    namespace: &str,
    selector: &Selector,
    kind: Option<StoreKind>,
) -> Result<Vec<Target>, kube::Error> {
    let params = ListParams::default().labels_from(selector);
    let mut out = Vec::new();
    let kind_meant = store_ref_kind(kind);
    if kind_meant == StoreKind::Provider {
        let api: Api<Provider> = Api::namespaced(client.clone(), namespace);
        for p in api.list(&params).await? {
            out.push(target(StoreObject::Provider(Arc::new(p)), kind));
        }
    }
    if kind_meant == StoreKind::ClusterProvider {
        let api: Api<ClusterProvider> = Api::all(client.clone());
        for p in api.list(&params).await? {
            out.push(target(StoreObject::ClusterProvider(Arc::new(p)), kind));
        }
    }
    if kind_meant == StoreKind::SecretStore {
        let api: Api<SecretStore> = Api::namespaced(client.clone(), namespace);
        for s in api.list(&params).await? {
            out.push(target(StoreObject::SecretStore(Arc::new(s)), kind));
        }
    }
    if kind_meant == StoreKind::ClusterSecretStore {
        let api: Api<ClusterSecretStore> = Api::all(client.clone());
        for s in api.list(&params).await? {
            out.push(target(StoreObject::ClusterSecretStore(Arc::new(s)), kind));
        }
    }
    Ok(out)
}
