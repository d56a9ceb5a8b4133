//! A `generatorRef` resolved and generated: the namespaced generator in the manifest's
//! namespace, or the ClusterGenerator whose conditions admit that namespace.

use std::collections::BTreeMap;

use keyward_crds::external_secret::GeneratorRef;
use keyward_crds::generators::{ClusterGenerator, Fake, GeneratorKind, Password, SshKey, Uuid};
use keyward_crds::rules::{
    GeneratorNamespaceDenied, GeneratorTarget, NamespaceView, check_generator_namespace_admitted,
    cluster_generator_spec, generator_target,
};
use kube::{Api, Client};
use serde::de::DeserializeOwned;

use super::{GenerateError, OwnedSpec, generate_blocking};
use crate::clientmanager::ClientManager;

/// Why a `generatorRef` gave no values.
#[derive(Debug, thiserror::Error)]
pub enum GeneratorError {
    /// The reference or the generator's spec cannot work as written.
    #[error("{0}")]
    Invalid(String),
    /// The generator does not exist.
    #[error("{kind} {name:?} not found{}", .namespace.as_ref().map(|n| format!(" in namespace {n:?}")).unwrap_or_default())]
    NotFound {
        /// Its kind.
        kind: String,
        /// Its name.
        name: String,
        /// Its namespace; `None` for a ClusterGenerator.
        namespace: Option<String>,
    },
    /// The ClusterGenerator's conditions do not admit the namespace.
    #[error(transparent)]
    Denied(#[from] GeneratorNamespaceDenied),
    /// Reading from the API failed.
    #[error("reading {what}: {message}")]
    Api {
        /// What was read.
        what: String,
        /// Why it failed.
        message: String,
    },
    /// Generating failed or was refused.
    #[error(transparent)]
    Generate(#[from] GenerateError),
}

impl GeneratorError {
    /// Whether the failure may go away on its own (an API hiccup).
    pub fn is_transient(&self) -> bool {
        matches!(self, GeneratorError::Api { .. })
    }
}

/// Reads the generator `r` names for a manifest in `namespace`, checks a ClusterGenerator's
/// conditions against the namespace's current labels, and generates its values. The object is
/// read from the API each time: generators run only when a refresh is due.
pub async fn generate_ref(
    client: &Client,
    manager: &ClientManager,
    namespace: &str,
    r: &GeneratorRef,
) -> Result<BTreeMap<String, Vec<u8>>, GeneratorError> {
    let spec = resolve(client, manager, namespace, r).await?;
    Ok(generate_blocking(spec).await?)
}

/// The spec `r` points at, admitted for `namespace`.
pub async fn resolve(
    client: &Client,
    manager: &ClientManager,
    namespace: &str,
    r: &GeneratorRef,
) -> Result<OwnedSpec, GeneratorError> {
    let target = generator_target(r).map_err(GeneratorError::Invalid)?;
    let kind = match target {
        GeneratorTarget::Cluster => return cluster(client, manager, namespace, &r.name).await,
        GeneratorTarget::Namespaced(kind) => kind,
    };
    let (c, n, ns) = (client.clone(), r.name.as_str(), Some(namespace));
    Ok(match kind {
        GeneratorKind::Password => {
            OwnedSpec::Password(get(Api::<Password>::namespaced(c, namespace), "Password", n, ns).await?.spec)
        }
        GeneratorKind::Uuid => OwnedSpec::Uuid(get(Api::<Uuid>::namespaced(c, namespace), "UUID", n, ns).await?.spec),
        GeneratorKind::SshKey => {
            OwnedSpec::SshKey(get(Api::<SshKey>::namespaced(c, namespace), "SSHKey", n, ns).await?.spec)
        }
        GeneratorKind::Fake => OwnedSpec::Fake(get(Api::<Fake>::namespaced(c, namespace), "Fake", n, ns).await?.spec),
    })
}

async fn cluster(
    client: &Client,
    manager: &ClientManager,
    namespace: &str,
    name: &str,
) -> Result<OwnedSpec, GeneratorError> {
    let generator = get(Api::<ClusterGenerator>::all(client.clone()), "ClusterGenerator", name, None).await?;
    let labels = manager
        .namespace_labels(namespace)
        .await
        .map_err(|message| GeneratorError::Api { what: format!("namespace {namespace}"), message })?
        .unwrap_or_default();
    check_generator_namespace_admitted(
        name,
        &generator.spec.conditions,
        NamespaceView { name: namespace, labels: &labels },
    )
    .inspect_err(|denied| {
        // The namespace owner sees that it is refused; the operator sees why.
        tracing::info!(cluster_generator = name, namespace, detail = %denied.detail(), "namespace refused");
    })?;
    let spec = cluster_generator_spec(&generator.spec)
        .map_err(|e| GeneratorError::Invalid(format!("ClusterGenerator {name:?}: {e}")))?;
    Ok(OwnedSpec::from_any(spec))
}

/// One generator object; NOT_FOUND is an error of its own (a generator created later is picked
/// up by the retry).
async fn get<K>(api: Api<K>, kind: &str, name: &str, namespace: Option<&str>) -> Result<K, GeneratorError>
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    match api.get_opt(name).await {
        Ok(Some(k)) => Ok(k),
        Ok(None) => Err(GeneratorError::NotFound {
            kind: kind.to_string(),
            name: name.to_string(),
            namespace: namespace.map(String::from),
        }),
        Err(e) => Err(GeneratorError::Api { what: format!("{kind} {name:?}"), message: e.to_string() }),
    }
}
