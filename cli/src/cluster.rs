//! Reading the cluster: the client as kubectl would build it, objects, stores, events, and the
//! webhook's cache contents.

use k8s_openapi::api::core::v1::{Event, Namespace, Secret};
use keyward_crds::generators::ClusterGenerator;
use keyward_crds::{ClusterProvider, ClusterSecretStore, Provider, SecretStore, StoreKind};
use keyward_webhook::offline::State;
use kube::api::{DynamicObject, ListParams};
use kube::discovery::ApiResource;
use kube::{Api, Client, ResourceExt};
use serde_json::Value;

use crate::Error;
use crate::admission::record;

/// A client from the kubeconfig (or in-cluster configuration) and its default namespace.
pub async fn connect() -> Result<(Client, String), Error> {
    let config = kube::Config::infer().await.map_err(|e| Error::Config(e.to_string()))?;
    let namespace = config.default_namespace.clone();
    let client = Client::try_from(config).map_err(|e| Error::Config(e.to_string()))?;
    Ok((client, namespace))
}

/// The API of `resource`, in `namespace` or cluster-wide.
pub fn api(client: &Client, resource: &ApiResource, namespace: Option<&str>) -> Api<DynamicObject> {
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, resource),
        None => Api::all_with(client.clone(), resource),
    }
}

/// The API resource of a store kind.
pub fn store_resource(kind: StoreKind) -> ApiResource {
    match kind {
        StoreKind::SecretStore => ApiResource::erase::<SecretStore>(&()),
        StoreKind::ClusterSecretStore => ApiResource::erase::<ClusterSecretStore>(&()),
        StoreKind::Provider => ApiResource::erase::<Provider>(&()),
        StoreKind::ClusterProvider => ApiResource::erase::<ClusterProvider>(&()),
    }
}

/// Whether objects of a store kind live in a namespace.
pub fn store_namespaced(kind: StoreKind) -> bool {
    matches!(kind, StoreKind::SecretStore | StoreKind::Provider)
}

/// Every object of `resource` (in `namespace`, or everywhere); none when the kind is not
/// installed (an External Secrets cluster has no Provider CRDs).
pub async fn list(
    client: &Client,
    resource: &ApiResource,
    namespace: Option<&str>,
) -> Result<Vec<DynamicObject>, Error> {
    match api(client, resource, namespace).list(&ListParams::default()).await {
        Ok(l) => Ok(l.items),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(Vec::new()),
        Err(e) => Err(Error::api(format!("listing {}", resource.plural), e)),
    }
}

/// A listed object as JSON with its `apiVersion` and `kind`, which list items may leave out.
pub fn with_kind(o: &DynamicObject, resource: &ApiResource) -> Result<Value, Error> {
    let mut value = serde_json::to_value(o).map_err(|e| Error::Output(e.to_string()))?;
    value["apiVersion"] = resource.api_version.clone().into();
    value["kind"] = resource.kind.clone().into();
    Ok(value)
}

/// What the webhook's caches would hold now: namespace labels, ClusterProviders,
/// ClusterSecretStores, ClusterGenerators, and the Providers and SecretStores of `namespace`
/// (all namespaces when `None`).
pub async fn admission_state(client: &Client, namespace: Option<&str>) -> Result<State, Error> {
    let mut state = State::default();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let listed =
        namespaces.list_metadata(&ListParams::default()).await.map_err(|e| Error::api("listing namespaces", e))?;
    for n in listed.items {
        state.namespaces.insert(n.name_any(), n.metadata.labels.unwrap_or_default());
    }
    let mut sources: Vec<(ApiResource, Option<&str>)> = vec![(ApiResource::erase::<ClusterGenerator>(&()), None)];
    for kind in [StoreKind::ClusterProvider, StoreKind::ClusterSecretStore, StoreKind::Provider, StoreKind::SecretStore]
    {
        sources.push((store_resource(kind), if store_namespaced(kind) { namespace } else { None }));
    }
    for (resource, scope) in sources {
        for o in list(client, &resource, scope).await? {
            record(&mut state, &with_kind(&o, &resource)?, &o.namespace().unwrap_or_default());
        }
    }
    Ok(state)
}

/// A store as found: whether it exists and its Ready condition.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Found {
    /// Whether the store exists; `None` when it could not be read.
    pub exists: Option<bool>,
    /// Its Ready condition (`True`/`False`/`Unknown`, reason, message).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready: Option<Ready>,
    /// Why Keyward does not serve it (a SecretStore or ClusterSecretStore whose provider it
    /// does not serve).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_served: Option<String>,
    /// Why it could not be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A Ready condition, as read from any kind's status.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Ready {
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// Its reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Its message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The Ready condition in `status.conditions` of any object.
pub fn ready_condition(object: &Value) -> Option<Ready> {
    let conditions = object.pointer("/status/conditions")?.as_array()?;
    let ready = conditions.iter().find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))?;
    let text = |k: &str| ready.get(k).and_then(Value::as_str).map(str::to_string);
    Some(Ready { status: text("status").unwrap_or_default(), reason: text("reason"), message: text("message") })
}

/// Looks a store up.
pub async fn find_store(client: &Client, kind: StoreKind, name: &str, namespace: Option<&str>) -> Found {
    let ns = if store_namespaced(kind) { namespace } else { None };
    match api(client, &store_resource(kind), ns).get_opt(name).await {
        Ok(Some(o)) => {
            let value = serde_json::to_value(&o).unwrap_or_default();
            let not_served = match kind {
                StoreKind::SecretStore | StoreKind::ClusterSecretStore => {
                    crate::migrate::served_by(value.get("spec").unwrap_or(&Value::Null)).err()
                }
                StoreKind::Provider | StoreKind::ClusterProvider => None,
            };
            Found { exists: Some(true), ready: ready_condition(&value), not_served, ..Found::default() }
        }
        Ok(None) => Found { exists: Some(false), ..Found::default() },
        // No such kind installed: no such store either.
        Err(kube::Error::Api(s)) if s.code == 404 => Found { exists: Some(false), ..Found::default() },
        Err(e) => Found { error: Some(e.to_string()), ..Found::default() },
    }
}

/// Whether Secret `name` exists in `namespace`; `None` when it cannot be read.
pub async fn secret_exists(client: &Client, namespace: &str, name: &str) -> Option<bool> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    secrets.get_metadata_opt(name).await.ok().map(|s| s.is_some())
}

/// One Event about an object.
#[derive(Debug, Clone, serde::Serialize)]
pub struct EventLine {
    /// When it last happened (RFC 3339), when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
    /// `Normal` or `Warning`.
    #[serde(rename = "type")]
    pub type_: String,
    /// Its reason.
    pub reason: String,
    /// Its message.
    pub message: String,
    /// How many times it happened.
    pub count: i32,
}

/// The latest `limit` Events about `kind` `name`, oldest first.
pub async fn events(
    client: &Client,
    kind: &str,
    name: &str,
    namespace: Option<&str>,
    limit: usize,
) -> Result<Vec<EventLine>, Error> {
    let api: Api<Event> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let selector = format!("involvedObject.kind={kind},involvedObject.name={name}");
    let listed =
        api.list(&ListParams::default().fields(&selector)).await.map_err(|e| Error::api("listing events", e))?;
    let mut lines: Vec<EventLine> = listed
        .items
        .into_iter()
        .map(|e| {
            let time = e
                .last_timestamp
                .map(|t| t.0)
                .or(e.event_time.map(|t| t.0))
                .or(e.metadata.creation_timestamp.map(|t| t.0));
            EventLine {
                time: time.map(|t| t.to_string()),
                type_: e.type_.unwrap_or_default(),
                reason: e.reason.unwrap_or_default(),
                message: e.message.unwrap_or_default(),
                count: e.count.or(e.series.and_then(|s| s.count)).unwrap_or(1),
            }
        })
        .collect();
    // RFC 3339 in UTC sorts as text.
    lines.sort_by(|a, b| a.time.cmp(&b.time));
    let skip = lines.len().saturating_sub(limit);
    Ok(lines.split_off(skip))
}
