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

use keyward_provider_client::{ClientError, ClientManager, StoreObject};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake_api;
    use serde_json::json;

    fn store(kind: &str, name: &str) -> serde_json::Value {
        json!({"apiVersion": "external-secrets.io/v1", "kind": kind, "metadata": {"name": name},
               "spec": {"provider": {"fake": {"data": []}}}})
    }

    fn selector(value: serde_json::Value) -> Selector {
        parse_label_selector(&serde_json::from_value(value).unwrap()).unwrap()
    }

    /// A labelSelector is sent to the API server as written, and an omitted kind lists
    /// SecretStores of the PushSecret's namespace only.
    #[tokio::test]
    async fn an_omitted_kind_lists_secret_stores_of_the_namespace_by_labels() {
        let (client, requests) = fake_api::client(|_, path| {
            assert!(path.starts_with("/apis/external-secrets.io/v1/namespaces/team-a/secretstores?"), "{path}");
            let items = vec![store("SecretStore", "a"), store("SecretStore", "b")];
            (200, fake_api::list("external-secrets.io/v1", "SecretStoreList", items))
        });
        let sel = selector(json!({"matchLabels": {"push": "yes"},
                                  "matchExpressions": [{"key": "tier", "operator": "In", "values": ["b", "a"]}]}));
        let targets = by_labels(&client, "team-a", &sel, None).await.unwrap();
        let keys: Vec<&str> = targets.iter().map(|t| t.key.as_str()).collect();
        assert_eq!(keys, ["SecretStore/a", "SecretStore/b"]);
        assert!(targets.iter().all(|t| t.requested_kind.is_none()));
        assert_eq!(
            requests.all(),
            [
                "GET /apis/external-secrets.io/v1/namespaces/team-a/secretstores?&labelSelector=push%3Dyes%2Ctier+in+%28a%2Cb%29"
            ]
        );
    }

    /// Cluster-scoped kinds are listed cluster-wide, and only the kind written is listed.
    #[tokio::test]
    async fn a_cluster_kind_lists_that_kind_cluster_wide() {
        let (client, requests) = fake_api::client(|_, _| {
            (
                200,
                fake_api::list(
                    "external-secrets.io/v1",
                    "ClusterSecretStoreList",
                    vec![store("ClusterSecretStore", "c")],
                ),
            )
        });
        let sel = selector(json!({"matchExpressions": [{"key": "shared", "operator": "Exists"}]}));
        let targets = by_labels(&client, "team-a", &sel, Some(StoreKind::ClusterSecretStore)).await.unwrap();
        assert_eq!(targets.iter().map(|t| t.key.as_str()).collect::<Vec<_>>(), ["ClusterSecretStore/c"]);
        assert_eq!(requests.all(), ["GET /apis/external-secrets.io/v1/clustersecretstores?&labelSelector=shared"]);
    }

    /// The API server's refusal is the caller's error, not an empty list.
    #[tokio::test]
    async fn a_refused_list_is_an_error() {
        let (client, _) = fake_api::client(|_, _| fake_api::status(403, "Forbidden", "secretstores is forbidden"));
        let err = by_labels(&client, "team-a", &selector(json!({})), None).await.unwrap_err();
        assert!(err.to_string().contains("secretstores is forbidden"), "{err}");
    }
}
