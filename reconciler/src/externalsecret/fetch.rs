//! Fetches every value an ExternalSecret names (data, dataFrom extract and find), from one or
//! several stores, decodes and rewrites them, and merges them into one map.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use futures::future::{BoxFuture, FutureExt};
use futures::{StreamExt, stream};
use keyward_crds::external_secret::{
    ConversionStrategy, DecodingStrategy, DeletionPolicy, ExternalSecretDataRemoteRef, ExternalSecretFind,
    ExternalSecretRewrite, GeneratorRef, MetadataPolicy, NullBytePolicy,
};
use keyward_crds::{ExternalSecret, SecretStoreRef, StoreKind};
use keyward_proto::ProviderError;
use keyward_proto::v1 as pb;
use kube::ResourceExt;

use super::decode::{decode, has_transform, rewrite_limited};
use crate::generators::{GeneratorError, generate_ref};
use crate::keys::{convert_key, map_keys};
use crate::renders::{RenderError, RenderPool};
use keyward_provider_client::{ClientError, ClientManager, Need, ProviderClient, Waitable};

/// The merged values, and the entries the provider reported as gone.
#[derive(Debug, Default)]
pub struct Fetched {
    /// Secret key → value.
    pub data: BTreeMap<String, Vec<u8>>,
    /// Entries that came back NOT_FOUND (only with deletionPolicy Delete or Merge).
    pub missing: Vec<String>,
    /// Number of entries (data + dataFrom).
    pub entries: usize,
}

impl Fetched {
    /// Whether every remote value is gone.
    pub fn all_gone(&self) -> bool {
        self.entries > 0 && self.data.is_empty() && !self.missing.is_empty()
    }
}

/// Why fetching failed.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The manifest cannot work as written; retrying without a change will not help.
    #[error("{0}")]
    Config(String),
    /// No client for a store (not found, denied, TLS missing, …).
    #[error("{store}: {error}")]
    Client {
        /// `Kind/name` of the store.
        store: String,
        /// Why.
        error: ClientError,
    },
    /// The provider answered with an error.
    #[error("{store}: {entry}: {error}")]
    Provider {
        /// `Kind/name` of the store.
        store: String,
        /// Which entry.
        entry: String,
        /// The error.
        error: ProviderError,
        /// The provider as it stood when the call failed (to wait on it).
        provider: Waitable,
    },
    /// A `generatorRef` gave no values (not found, refused for the namespace, invalid spec).
    #[error("{entry}.sourceRef.generatorRef: {error}")]
    Generator {
        /// Which entry.
        entry: String,
        /// Why.
        error: GeneratorError,
    },
    /// A `rewrite.transform` template failed, ran out of its budget, or found no render slot.
    #[error("{entry}: {error}")]
    Render {
        /// Which entry.
        entry: String,
        /// Why.
        error: RenderError,
    },
}

fn remote_ref(r: &ExternalSecretDataRemoteRef) -> pb::ExternalSecretDataRemoteRef {
    pb::ExternalSecretDataRemoteRef {
        key: r.key.clone(),
        version: r.version.clone().unwrap_or_default(),
        property: r.property.clone().unwrap_or_default(),
        // Decoding happens here in the reconciler; the provider is told "None" so it never
        // decodes a second time.
        decoding_strategy: "None".into(),
        metadata_policy: match r.metadata_policy {
            Some(MetadataPolicy::Fetch) => "Fetch".into(),
            _ => "None".into(),
        },
    }
}

fn find_ref(f: &ExternalSecretFind) -> pb::ExternalSecretFind {
    pb::ExternalSecretFind {
        path: f.path.clone().unwrap_or_default(),
        name: f.name.as_ref().map(|n| pb::FindName { regexp: n.regexp.clone().unwrap_or_default() }),
        tags: f.tags.clone().into_iter().collect(),
        conversion_strategy: "Default".into(),
        decoding_strategy: "None".into(),
    }
}

/// Clients used during one fetch, so several entries on one store resolve it once.
struct Clients<'a> {
    manager: &'a ClientManager,
    namespace: String,
    default_ref: Option<&'a SecretStoreRef>,
    by_store: HashMap<(StoreKind, String), ProviderClient>,
}

impl Clients<'_> {
    async fn get(
        &mut self,
        entry_ref: Option<&SecretStoreRef>,
        entry: &str,
    ) -> Result<(ProviderClient, String), FetchError> {
        let r = entry_ref.or(self.default_ref).ok_or_else(|| {
            FetchError::Config(format!("{entry} has no sourceRef.storeRef and spec.secretStoreRef is not set"))
        })?;
        let kind = keyward_crds::rules::store_ref_kind(r.kind);
        let store = format!("{kind}/{}", r.name);
        if let Some(c) = self.by_store.get(&(kind, r.name.clone())) {
            return Ok((c.clone(), store));
        }
        let (client, _) = self
            .manager
            .client_for(kind, &r.name, &self.namespace, Need::Read)
            .await
            .map_err(|error| FetchError::Client { store: store.clone(), error })?;
        self.by_store.insert((kind, r.name.clone()), client.clone());
        Ok((client, store))
    }
}

/// One provider call of a fetch, planned before any call is made.
struct Planned {
    entry: String,
    /// `Kind/name` of the store; empty for a generator.
    store: String,
    /// `None` for a generator: it runs here, no provider is called.
    client: Option<ProviderClient>,
    request: Request,
    strategy: Option<DecodingStrategy>,
    /// Key conversion of a map answer (extract, find).
    conversion: Option<ConversionStrategy>,
    /// Whether a value with NUL bytes fails the sync.
    null_bytes: Option<NullBytePolicy>,
}

enum Request {
    /// `data[i]`: one value under this Secret key.
    Value { secret_key: String, remote: pb::ExternalSecretDataRemoteRef },
    /// `dataFrom[i].extract`.
    Extract { remote: pb::ExternalSecretDataRemoteRef, rewrite: Vec<ExternalSecretRewrite> },
    /// `dataFrom[i].find`.
    Find { find: pb::ExternalSecretFind, rewrite: Vec<ExternalSecretRewrite> },
    /// `dataFrom[i].sourceRef.generatorRef`.
    Generate { generator: GeneratorRef, rewrite: Vec<ExternalSecretRewrite> },
}

/// Why one planned call gave no answer.
enum CallError {
    /// The provider answered with an error; the provider as it stood then.
    Provider(ProviderError, Waitable),
    /// The generator gave no values.
    Generator(GeneratorError),
}

/// What generating needs, shared by the calls of one fetch.
struct GeneratorContext<'a> {
    client: &'a kube::Client,
    manager: &'a ClientManager,
    namespace: &'a str,
}

enum Answer {
    Value(Vec<u8>),
    Map(HashMap<String, Vec<u8>>),
}

impl Answer {
    /// Bytes of keys and values.
    fn bytes(&self) -> usize {
        match self {
            Answer::Value(v) => v.len(),
            Answer::Map(m) => m.iter().map(|(k, v)| k.len() + v.len()).sum(),
        }
    }
}

impl Planned {
    /// The remote secret a store call reads (store, key, version): entries that share it share
    /// one store read.
    fn shared_read(&self) -> Option<(&str, &str, &str)> {
        match &self.request {
            Request::Value { remote, .. } | Request::Extract { remote, .. } => {
                Some((self.store.as_str(), remote.key.as_str(), remote.version.as_str()))
            }
            Request::Find { .. } | Request::Generate { .. } => None,
        }
    }

    /// The answer, or the error (for a provider, with its state captured right when it failed).
    async fn call(&self, generators: &GeneratorContext<'_>, max_age: Duration) -> Result<Answer, CallError> {
        // Planning gives every store entry a client and no generator one.
        let no_store = || CallError::Generator(GeneratorError::Invalid(format!("{}: no store to call", self.entry)));
        let client = match (&self.request, &self.client) {
            (Request::Generate { generator, .. }, _) => {
                let generated = generate_ref(generators.client, generators.manager, generators.namespace, generator)
                    .await
                    .map_err(CallError::Generator)?;
                return Ok(Answer::Map(generated.into_iter().collect()));
            }
            (_, Some(client)) => client,
            (_, None) => return Err(no_store()),
        };
        let answer = match &self.request {
            Request::Value { remote, .. } => client.get_secret(remote.clone(), max_age).await.map(Answer::Value),
            Request::Extract { remote, .. } => client.get_secret_map(remote.clone(), max_age).await.map(Answer::Map),
            Request::Find { find, .. } => client.get_all_secrets(find.clone()).await.map(Answer::Map),
            Request::Generate { .. } => return Err(no_store()),
        };
        answer.map_err(|e| CallError::Provider(e, client.waitable()))
    }
}

/// Fetches everything `es` asks for. Stores are resolved first (from caches, no provider call),
/// so a manifest error is reported before anything is fetched; then the provider calls run, at
/// most `concurrency` at once, and their answers are merged in manifest order (a later entry
/// wins a key, as when they ran one after another).
/// Transform rewrites (templates) run on the render pool. Store answers up to `max_age` old
/// are accepted (`refresh::read_max_age`).
pub async fn fetch(
    client: &kube::Client,
    manager: &ClientManager,
    renders: &RenderPool,
    es: &ExternalSecret,
    concurrency: usize,
    max_age: Duration,
) -> Result<Fetched, FetchError> {
    let spec = &es.spec;
    let tolerate_missing = spec.target.deletion_policy != DeletionPolicy::Retain;
    let mut clients = Clients {
        manager,
        namespace: es.namespace().unwrap_or_default(),
        default_ref: spec.secret_store_ref.as_ref(),
        by_store: HashMap::new(),
    };
    let mut planned = Vec::with_capacity(spec.data.len() + spec.data_from.len());
    for (i, d) in spec.data.iter().enumerate() {
        let entry = format!("data[{i}] ({})", d.secret_key);
        let (client, store) = clients.get(d.source_ref.as_ref().map(|s| &s.store_ref), &entry).await?;
        let request = Request::Value { secret_key: d.secret_key.clone(), remote: remote_ref(&d.remote_ref) };
        let (strategy, null_bytes) = (d.remote_ref.decoding_strategy, d.remote_ref.null_byte_policy);
        let client = Some(client);
        planned.push(Planned { entry, store, client, request, strategy, conversion: None, null_bytes });
    }
    for (i, d) in spec.data_from.iter().enumerate() {
        let entry = format!("dataFrom[{i}]");
        let source = d.source_ref.as_ref();
        if let Some(generator) = source.and_then(|s| s.generator_ref.as_ref()) {
            // As upstream: the generated keys are rewritten, or else converted with the default
            // strategy; there is nothing to decode.
            let request = Request::Generate { generator: generator.clone(), rewrite: d.rewrite.clone() };
            let (store, client) = (String::new(), None);
            planned.push(Planned { entry, store, client, request, strategy: None, conversion: None, null_bytes: None });
            continue;
        }
        let (request, strategy, conversion, null_bytes) = if let Some(extract) = &d.extract {
            let request = Request::Extract { remote: remote_ref(extract), rewrite: d.rewrite.clone() };
            (request, extract.decoding_strategy, extract.conversion_strategy, extract.null_byte_policy)
        } else if let Some(find) = &d.find {
            let request = Request::Find { find: find_ref(find), rewrite: d.rewrite.clone() };
            (request, find.decoding_strategy, find.conversion_strategy, find.null_byte_policy)
        } else {
            return Err(FetchError::Config(format!("{entry} needs extract or find")));
        };
        let (client, store) = clients.get(source.and_then(|s| s.store_ref.as_ref()), &entry).await?;
        let client = Some(client);
        planned.push(Planned { entry, store, client, request, strategy, conversion, null_bytes });
    }

    let generators = GeneratorContext { client, manager, namespace: &clients.namespace };
    // Entries reading one remote secret (other properties of it) go after the first that reads
    // it, and accept its answer: one store read, even when this sync must read anew (max_age 0).
    // The first entry's read was made after `started`, so an age of the time since then admits
    // it and nothing read before this sync began (the provider also keeps older answers per
    // property; those stay out). Ages travel in milliseconds for this.
    let started = Instant::now();
    let mut reading = HashSet::new();
    let (first, then): (Vec<usize>, Vec<usize>) =
        (0..planned.len()).partition(|&i| planned[i].shared_read().is_none_or(|read| reading.insert(read)));
    let mut fetched = 0;
    let mut answers = call_all(&planned, &first, &generators, max_age, concurrency, &mut fetched).await?;
    if !then.is_empty() {
        let since = started.elapsed();
        answers.extend(call_all(&planned, &then, &generators, max_age.max(since), concurrency, &mut fetched).await?);
    }
    answers.sort_by_key(|(i, _)| *i);
    let mut out = Fetched { entries: planned.len(), ..Default::default() };
    for (p, (_, answer)) in planned.into_iter().zip(answers) {
        match (answer, p.request) {
            (Ok(Answer::Value(value)), Request::Value { secret_key, .. }) => {
                let value = decode(p.strategy, &secret_key, value).map_err(FetchError::Config)?;
                check_null_bytes(p.null_bytes, &secret_key, &value).map_err(FetchError::Config)?;
                out.data.insert(secret_key, value);
            }
            (
                Ok(Answer::Map(map)),
                Request::Extract { rewrite: rw, .. }
                | Request::Find { rewrite: rw, .. }
                | Request::Generate { rewrite: rw, .. },
            ) => {
                // As upstream: the keys are rewritten as the provider gave them (so a rewrite
                // sees `path/to/x`); without a rewrite they are converted; then the values decoded.
                let rewritten = if rw.is_empty() {
                    map_keys(map, |k| convert_key(p.conversion, k))
                        .map_err(|e| FetchError::Config(format!("{}: conversionStrategy: {e}", p.entry)))?
                } else {
                    let map: BTreeMap<String, Vec<u8>> = map.into_iter().collect();
                    let rewritten = if has_transform(&rw) {
                        // Transforms are templates: tenant input, rendered off the async workers.
                        renders.run(&clients.namespace, move |limits| rewrite_limited(&rw, map, limits)).await
                    } else {
                        rewrite_limited(&rw, map, &keyward_template::Limits::default())
                    };
                    rewritten.map_err(|error| FetchError::Render { entry: p.entry.clone(), error })?
                };
                for (k, v) in rewritten {
                    let v = decode(p.strategy, &k, v).map_err(FetchError::Config)?;
                    check_null_bytes(p.null_bytes, &k, &v).map_err(FetchError::Config)?;
                    out.data.insert(k, v);
                }
            }
            (Ok(_), _) => return Err(FetchError::Config(format!("{}: unexpected answer", p.entry))),
            (Err(CallError::Provider(error, _)), _) if tolerate_missing && error.is_not_found() => {
                out.missing.push(p.entry)
            }
            (Err(CallError::Provider(error, provider)), _) => {
                return Err(FetchError::Provider { store: p.store, entry: p.entry, error, provider });
            }
            (Err(CallError::Generator(error)), _) => return Err(FetchError::Generator { entry: p.entry, error }),
        }
    }
    Ok(out)
}

/// Most bytes of answers one sync holds, all entries together: twice the largest answer a
/// provider sends (4 MiB, the gRPC message limit) and eight times what a Secret can hold, so a
/// large `extract` a template picks from still fits. Without it, 600 `data` entries reading one
/// 1 MiB value (a 30 KB manifest) held 600 MiB in the reconciler every tenant shares.
pub const MAX_FETCHED_BYTES: usize = 8 * 1024 * 1024;

/// Runs the planned calls at `indices`, at most `concurrency` at once; answers by index.
/// `fetched` counts the bytes of answers so far; past [`MAX_FETCHED_BYTES`] the calls still
/// running are dropped and the sync fails.
async fn call_all(
    planned: &[Planned],
    indices: &[usize],
    generators: &GeneratorContext<'_>,
    max_age: Duration,
    concurrency: usize,
    fetched: &mut usize,
) -> Result<Vec<(usize, Result<Answer, CallError>)>, FetchError> {
    // Boxed and collected first: a stream of futures borrowing `generators` through a closure
    // is not `Send` for every lifetime, which the controller needs.
    let calls: Vec<BoxFuture<'_, (usize, Result<Answer, CallError>)>> =
        indices.iter().map(|&i| planned[i].call(generators, max_age).map(move |answer| (i, answer)).boxed()).collect();
    let mut answers = stream::iter(calls).buffered(concurrency.max(1));
    let mut out = Vec::with_capacity(indices.len());
    while let Some((i, answer)) = answers.next().await {
        *fetched = fetched.saturating_add(answer.as_ref().map_or(0, Answer::bytes));
        if *fetched > MAX_FETCHED_BYTES {
            return Err(FetchError::Config(format!(
                "{}: the answers of this ExternalSecret's entries passed {} MiB together (a Secret holds at most 1 MiB); \
                 read fewer or smaller values, or the same value once",
                planned[i].entry,
                MAX_FETCHED_BYTES / (1024 * 1024)
            )));
        }
        out.push((i, answer));
    }
    Ok(out)
}

/// `nullBytePolicy: Fail`: a value with NUL bytes fails the sync (a text value was expected).
fn check_null_bytes(policy: Option<NullBytePolicy>, key: &str, value: &[u8]) -> Result<(), String> {
    if policy == Some(NullBytePolicy::Fail) && value.contains(&0) {
        return Err(format!(
            "fetched value for key {key:?} contains NUL bytes (nullBytePolicy Fail); use a text-safe format such as PEM \
             or Base64, or leave nullBytePolicy unset for intended binary data"
        ));
    }
    Ok(())
}

impl FetchError {
    /// Whether the failure may go away on its own (provider down, API hiccup).
    pub fn is_transient(&self) -> bool {
        match self {
            FetchError::Config(_) | FetchError::Render { .. } => false,
            FetchError::Generator { error, .. } => error.is_transient(),
            FetchError::Client { error, .. } => error.is_transient(),
            FetchError::Provider { error, .. } => error.is_transient(),
        }
    }

    /// The provider to wait on when it did not answer (a transient failure), so the object is
    /// requeued as soon as that provider answers again.
    pub fn waiting_on(&self) -> Option<Waitable> {
        match self {
            FetchError::Provider { error, provider, .. } if error.is_transient() => Some(provider.clone()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn null_byte_policy() {
        let binary = [b'a', 0, b'b'];
        assert!(check_null_bytes(None, "k", &binary).is_ok(), "default: binary data is written");
        assert!(check_null_bytes(Some(NullBytePolicy::Ignore), "k", &binary).is_ok());
        assert!(check_null_bytes(Some(NullBytePolicy::Fail), "k", b"text").is_ok());
        let err = check_null_bytes(Some(NullBytePolicy::Fail), "keystore", &binary).unwrap_err();
        assert!(err.contains("\"keystore\"") && err.contains("nullBytePolicy Fail"), "{err}");
    }
}
