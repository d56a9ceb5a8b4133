//! The HashiCorp Vault provider: KV v1 and v2 secrets engines.
//!
//! Each request names a `Vault` config object (`provider.external-secrets.io/v2alpha1`), read
//! from `providerRef.namespace` when set, else from the source namespace, or a SecretStore or
//! ClusterSecretStore whose `spec.provider.vault` (or `openBao`, a subset of it) is the same
//! configuration as upstream writes it. Its server, CA, options and login method give a Vault
//! client, cached per config object, generation and owner for a few minutes; the token outlives the client (one login per token
//! lifetime however often the client is rebuilt), is renewed before it expires and replaced by
//! a new login when Vault refuses it. Secret and ServiceAccount references resolve in the config's
//! namespace; a tenant's config naming another namespace, or relying on the provider's own
//! ServiceAccount token, is refused.

pub mod client;
mod gcp;
mod generate;
mod iam;
pub mod kv;

use keyward_crds::Vault;
use keyward_crds::rules::StoreBackend;
use keyward_crds::vault::{VaultKvVersion, VaultSpec};
use keyward_gcp_identity::{Endpoints, TokenExchange};
use keyward_proto::v1::{
    ExternalSecretDataRemoteRef, ExternalSecretFind, PushSecretData, PushSecretRemoteRef, SecretStoreCapabilities,
};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use keyward_provider_runtime::body::FindAnswer;
use keyward_provider_runtime::json::{json_bytes, property, push_value, value_map};
use keyward_provider_runtime::keys;
use keyward_provider_runtime::netguard::DeniedNetworks;
use keyward_provider_runtime::read_cache::{ReadCache, Weighed};
use keyward_provider_runtime::refs::{CacheKey, ClientCache, ClusterRefs, check_reach};
use keyward_provider_runtime::{Generation, Provider, ProviderError, RequestContext, SecretMap};
use reqwest::Method;
use serde_json::{Map, Value, json};

use crate::client::{TokenCache, VaultClient};
use crate::kv::{
    Location, MANAGED_BY_KEY, MANAGED_BY_VALUE, check_kv_mount, custom_metadata, fetched_metadata, locate,
    locate_folder, parse_push_metadata, secret_data,
};

/// Most secrets a find walks through (listing stops there).
const FIND_LIMIT: usize = 10_000;

/// Most folders a find holds waiting to be listed. Folders are listed depth first, so a real
/// tree has few pending at once (the subfolders of each folder on the current path); without a
/// bound, a server answering every LIST with folder names and never a secret grows the stack by
/// everything it sends.
const MAX_PENDING_FOLDERS: usize = FIND_LIMIT;

/// Most LIST calls one find makes (one per folder walked). A real tree holds a secret under
/// every folder, so this is twice as many folders as the secrets a find keeps; without a bound,
/// a server answering each LIST with one more folder keeps the walk going forever.
const MAX_LISTS: usize = 2 * FIND_LIMIT;

#[derive(Clone)]
struct Target {
    client: VaultClient,
    mount: Option<String>,
    version: VaultKvVersion,
    /// `spec.checkAndSet.required`: KV v2 writes carry `options.cas`.
    cas: bool,
    key: CacheKey,
    /// Mounts named by keys (no spec.path) that Vault confirmed to be KV mounts of `version`,
    /// so the lookup is made once per client.
    kv_mounts: Arc<Mutex<HashSet<String>>>,
}

/// The Vault provider.
pub struct VaultProvider {
    refs: ClusterRefs,
    clients: ClientCache<Target>,
    /// Tokens outlive the clients: a rebuilt client reuses the token while it is valid.
    tokens: TokenCache,
    /// What a tenant's configuration may not reach.
    tenant_denied: DeniedNetworks,
    /// KV reads shared by the requests that read the same secret (every property of it).
    reads: ReadCache<SharedData>,
    /// Google's token calls of the GCP login, to the operator's `KEYWARD_GCP_*` endpoints.
    google: TokenExchange,
}

/// A secret's data map as the read cache shares it: parsed once, handed to every request that
/// reads it without a copy, and looked up property by property as it is.
#[derive(Clone)]
struct SharedData(Arc<Value>);

impl SharedData {
    fn new(data: Map<String, Value>) -> Self {
        SharedData(Arc::new(Value::Object(data)))
    }

    /// The data as JSON text (the same as the map's).
    fn bytes(&self) -> Result<Vec<u8>, ProviderError> {
        serde_json::to_vec(&*self.0).map_err(|e| ProviderError::Internal(e.to_string()))
    }
}

impl Weighed for SharedData {
    fn weight(&self) -> usize {
        // The map's own weight, its header and the reference counts around it.
        let map = self.0.as_object().map_or(0, Weighed::weight);
        map.saturating_add(std::mem::size_of::<Value>() + 2 * std::mem::size_of::<usize>())
    }
}

fn data_bytes(data: &Map<String, Value>) -> Result<Vec<u8>, ProviderError> {
    serde_json::to_vec(data).map_err(|e| ProviderError::Internal(e.to_string()))
}

/// GetSecret with a property: that property of the secret's data (`data`, a JSON object),
/// resolved as the runtime resolves properties of JSON values (the key as written, else a dotted
/// path) without encoding the data as JSON and parsing it again for every property.
fn data_property(data: &SharedData, name: &str, prop: &str) -> Result<Vec<u8>, ProviderError> {
    property(&data.0, prop)
        .map(json_bytes)
        .ok_or_else(|| ProviderError::NoSecret(format!("secret {name:?} has no property {prop:?}")))
}

/// The LIST walk of a find: folders still to list and the secrets found, within
/// [`MAX_PENDING_FOLDERS`], [`MAX_LISTS`] and [`FIND_LIMIT`].
struct Walk {
    /// `mount/path` of the walk's root, for messages.
    name: String,
    /// The find's path: only secrets whose path starts with it are found, and only folders that
    /// can hold such secrets are listed, so a narrow find in a large mount walks little of it.
    within: String,
    folders: Vec<String>,
    found: Vec<String>,
    lists: usize,
}

impl Walk {
    fn new(name: String, root: String, within: String) -> Self {
        Walk { name, within, folders: vec![root], found: Vec::new(), lists: 0 }
    }

    /// Whether `folder` can hold a secret whose path starts with `within`.
    fn may_hold(&self, folder: &str) -> bool {
        let folder = format!("{folder}/");
        folder.starts_with(&self.within) || self.within.starts_with(&folder)
    }

    /// The next folder to list, counted as a LIST call; `None` when the walk is done.
    fn next_folder(&mut self) -> Result<Option<String>, ProviderError> {
        if self.folders.is_empty() {
            return Ok(None);
        }
        if self.lists >= MAX_LISTS {
            return Err(ProviderError::Unavailable(format!(
                "the find under {} needs more than {MAX_LISTS} LIST calls, more than a find makes",
                self.name
            )));
        }
        self.lists += 1;
        Ok(self.folders.pop())
    }

    /// A name listed in `folder`: a subfolder to walk or a secret found. `false` once the walk
    /// has found [`FIND_LIMIT`] secrets and stops.
    fn add(&mut self, folder: &str, listed: &str) -> Result<bool, ProviderError> {
        let full = if folder.is_empty() { listed.to_string() } else { format!("{folder}/{listed}") };
        // A name Vault lists is checked like a key before it becomes a request path.
        if let Err(e) = keys::check_key(&full) {
            tracing::warn!(error = %e, "skipping a listed name the key rule refuses");
            return Ok(true);
        }
        match full.strip_suffix('/') {
            Some(sub) if !self.may_hold(sub) => {}
            Some(sub) => {
                if self.folders.len() >= MAX_PENDING_FOLDERS {
                    return Err(ProviderError::Unavailable(format!(
                        "the find under {} has more than {MAX_PENDING_FOLDERS} folders waiting to be listed, \
                         more than a find walks",
                        self.name
                    )));
                }
                self.folders.push(sub.to_string());
            }
            None if full.starts_with(&self.within) => self.found.push(full),
            None => {}
        }
        if self.found.len() >= FIND_LIMIT {
            tracing::warn!(limit = FIND_LIMIT, "find stopped at the limit");
            return Ok(false);
        }
        Ok(true)
    }

    /// The secrets found, sorted.
    fn finish(mut self) -> Vec<String> {
        self.found.sort();
        self.found
    }
}

/// Where Google's APIs are for the GCP login: the process's `KEYWARD_GCP_*` environment (as
/// the GCP provider's), Google's own where unset.
fn google_endpoints() -> Endpoints {
    Endpoints::from_env().unwrap_or_else(|e| {
        tracing::warn!(error = %e, "the KEYWARD_GCP_* endpoints are unusable; the GCP login calls Google's own");
        Endpoints::google()
    })
}

impl VaultProvider {
    /// A provider reading its config objects and credentials with `client`; tenants'
    /// configurations may not reach `tenant_denied`.
    pub fn new(client: kube::Client, tenant_denied: DeniedNetworks) -> Self {
        VaultProvider {
            refs: ClusterRefs::new(client),
            clients: ClientCache::default(),
            tokens: TokenCache::default(),
            tenant_denied,
            reads: ReadCache::default(),
            google: TokenExchange::new(google_endpoints(), client::PROVIDER_NAME),
        }
    }

    async fn target(&self, ctx: &RequestContext) -> Result<Target, ProviderError> {
        let config = self
            .refs
            .resolve_config::<Vault, VaultSpec, _>(
                ctx,
                |v| v.spec,
                |b| match b {
                    // OpenBao speaks Vault's API: its block is the Vault configuration it is a
                    // subset of.
                    StoreBackend::Vault(v) | StoreBackend::OpenBao(v) => Ok(*v),
                    other => Err(other),
                },
                keyward_crds::rules::validate_vault,
            )
            .await?;
        self.target_of(ctx, &config.spec, config.generation, &config.what).await
    }

    /// The cached client of a checked configuration `spec` (its `generation`, `what` for
    /// logs): SecretStores, Vault objects and VaultDynamicSecret generators alike.
    async fn target_of(
        &self,
        ctx: &RequestContext,
        spec: &VaultSpec,
        generation: Generation,
        what: &str,
    ) -> Result<Target, ProviderError> {
        // The tenant boundary, for the whole config at once so the message lists every field.
        check_reach(ctx, &keyward_crds::rules::vault_reach(spec))?;
        let key = CacheKey::of(ctx, generation);
        self.clients
            .get_or_build(&key, async {
                let denied = self.tenant_denied.for_request(ctx);
                let client =
                    VaultClient::build(&self.refs, ctx, spec, &self.tokens, &key, &denied, &self.google).await?;
                tracing::info!(generation = key.generation, config = %what, server = %spec.server, "built a Vault client");
                Ok(Target {
                    client,
                    mount: spec.path.clone(),
                    version: spec.version,
                    cas: spec.check_and_set.as_ref().is_some_and(|c| c.required),
                    key: key.clone(),
                    kv_mounts: Arc::default(),
                })
            })
            .await
    }

    /// Forgets the client cached for a configuration at `generation` (whatever its UID), so the
    /// next request builds it again (as the cache does when what it was built from changes). For
    /// tests of what survives a rebuild: the token does.
    #[doc(hidden)]
    pub fn forget_client(&self, ctx: &RequestContext, generation: Option<i64>) {
        let key = CacheKey::of(ctx, generation);
        self.clients.evict_matching(|k| CacheKey { uid: String::new(), ..k.clone() } == key);
    }

    /// Where a remote key lives, confined to a KV mount: with `spec.path`, under the mount the
    /// operator named; without, the key's first segment must be a mount Vault confirms is a KV
    /// engine of the configured version. Nothing is read or written before that.
    async fn located(&self, target: &Target, key: &str) -> Result<Location, ProviderError> {
        let loc = locate(target.mount.as_deref(), target.version, key)?;
        self.confirm_kv(target, &loc).await?;
        Ok(loc)
    }

    async fn confirm_kv(&self, target: &Target, loc: &Location) -> Result<(), ProviderError> {
        let known = |m: &str| target.kv_mounts.lock().is_ok_and(|set| set.contains(m));
        if target.mount.is_some() || known(&loc.mount) {
            return Ok(());
        }
        let what = format!("looking up the mount {:?}", loc.mount);
        let api = format!("sys/internal/ui/mounts/{}", keys::url_path([loc.mount.as_str()]));
        let body = match target.client.ok(Method::GET, &api, None, &[], &what).await {
            Ok(body) => body,
            // No such mount (or none the token may see).
            Err(e) if e.is_not_found() || e.code() == tonic::Code::InvalidArgument => {
                return Err(ProviderError::InvalidArgument(format!("{e}; remote keys name a secret of a KV mount")));
            }
            Err(e) => return Err(self.fail(target, e)),
        };
        check_kv_mount(&body, &loc.mount, loc.version)?;
        if let Ok(mut set) = target.kv_mounts.lock() {
            set.insert(loc.mount.clone());
        }
        Ok(())
    }

    /// Refused credentials evict the cached client so the next call reads them again.
    fn fail(&self, target: &Target, e: ProviderError) -> ProviderError {
        self.clients.evict_if_refused(&target.key, e)
    }

    /// The data map of a secret (a version of it, for KV v2).
    async fn read(&self, target: &Target, loc: &Location, version: &str) -> Result<Map<String, Value>, ProviderError> {
        let what = format!("secret {}/{}", loc.mount, loc.path);
        let query: Vec<(&str, String)> = match (loc.version, version) {
            (_, "") => vec![],
            (VaultKvVersion::V2, v) => vec![("version", v.to_string())],
            (VaultKvVersion::V1, _) => {
                return Err(ProviderError::InvalidArgument(format!("{what}: KV v1 secrets have no versions")));
            }
        };
        let body =
            target.client.ok(Method::GET, &loc.data(), None, &query, &what).await.map_err(|e| self.fail(target, e))?;
        // A deleted or destroyed KV v2 version answers with metadata and no data.
        secret_data(loc.version, &body).ok_or_else(|| ProviderError::NoSecret(format!("{what} has no data (deleted)")))
    }

    /// [`Self::read`] for GetSecret and GetSecretMap: one store call for every request of the
    /// same configuration that reads this secret within the age it accepts.
    async fn read_shared(
        &self,
        ctx: &RequestContext,
        target: &Target,
        loc: &Location,
        version: &str,
    ) -> Result<SharedData, ProviderError> {
        let key = format!("{}/{}", loc.mount, loc.path);
        let read = async { self.read(target, loc, version).await.map(SharedData::new) };
        self.reads.read("ReadSecretData", ctx, &target.key.object(), &key, version, read).await
    }

    async fn read_opt(&self, target: &Target, loc: &Location) -> Result<Option<Map<String, Value>>, ProviderError> {
        match self.read(target, loc, "").await {
            Ok(d) => Ok(Some(d)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// KV v2 custom metadata; `None` when the secret has no metadata at all.
    async fn metadata(&self, target: &Target, loc: &Location) -> Result<Option<Metadata>, ProviderError> {
        self.read_metadata(target, loc, custom_metadata).await
    }

    /// KV v2 metadata read by `pick` (custom only, or what a Fetch sees); `None` when the secret
    /// has no metadata at all.
    async fn read_metadata(
        &self,
        target: &Target,
        loc: &Location,
        pick: fn(&Value) -> Metadata,
    ) -> Result<Option<Metadata>, ProviderError> {
        let what = format!("metadata of {}/{}", loc.mount, loc.path);
        match target.client.ok(Method::GET, &loc.metadata(), None, &[], &what).await {
            Ok(body) => Ok(Some(pick(&body))),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(self.fail(target, e)),
        }
    }

    /// What `metadataPolicy: Fetch` reads: the system and custom metadata of a KV v2 secret
    /// ([`fetched_metadata`]).
    async fn fetch_metadata(&self, target: &Target, loc: &Location) -> Result<Metadata, ProviderError> {
        if loc.version == VaultKvVersion::V1 {
            return Err(ProviderError::InvalidArgument("metadataPolicy Fetch needs a KV v2 engine".into()));
        }
        self.read_metadata(target, loc, fetched_metadata)
            .await?
            .ok_or_else(|| ProviderError::NoSecret(format!("secret {}/{} not found", loc.mount, loc.path)))
    }

    async fn write(&self, target: &Target, loc: &Location, data: &Map<String, Value>) -> Result<(), ProviderError> {
        let what = format!("writing secret {}/{}", loc.mount, loc.path);
        let body = match loc.version {
            VaultKvVersion::V2 if target.cas => {
                json!({"data": data, "options": {"cas": self.current_version(target, loc).await?}})
            }
            VaultKvVersion::V2 => json!({"data": data}),
            VaultKvVersion::V1 => Value::Object(data.clone()),
        };
        match target.client.ok(Method::POST, &loc.data(), Some(&body), &[], &what).await {
            Ok(_) => Ok(()),
            Err(ProviderError::InvalidArgument(m)) if m.contains("check-and-set") && !target.cas => {
                Err(ProviderError::InvalidArgument(format!(
                    "{m} (the mount requires check-and-set: set spec.checkAndSet.required: true)"
                )))
            }
            Err(e) => Err(self.fail(target, e)),
        }
    }

    /// The version a KV v2 check-and-set write replaces: the secret's `current_version`, 0 when
    /// there is no secret yet.
    async fn current_version(&self, target: &Target, loc: &Location) -> Result<u64, ProviderError> {
        let what = format!("metadata of {}/{}", loc.mount, loc.path);
        match target.client.ok(Method::GET, &loc.metadata(), None, &[], &what).await {
            Ok(body) => Ok(body.pointer("/data/current_version").and_then(Value::as_u64).unwrap_or(0)),
            Err(e) if e.is_not_found() => Ok(0),
            Err(e) => Err(self.fail(target, e)),
        }
    }

    /// Paths of the secrets under `loc` (recursively), relative to the mount.
    async fn list(&self, target: &Target, loc: &Location, within: &str) -> Result<Vec<String>, ProviderError> {
        let list = Method::from_bytes(b"LIST").map_err(|e| ProviderError::Internal(e.to_string()))?;
        let name = format!("{}/{}", loc.mount, loc.path).trim_end_matches('/').to_string();
        let mut walk = Walk::new(name, loc.path.trim_end_matches('/').to_string(), within.to_string());
        while let Some(folder) = walk.next_folder()? {
            let at = loc.at(&folder)?;
            let what = format!("listing {}/{}", at.mount, at.path);
            let body = match target.client.ok(list.clone(), &at.list(), None, &[], &what).await {
                Ok(b) => b,
                Err(e) if e.is_not_found() => continue,
                Err(e) => return Err(self.fail(target, e)),
            };
            for k in
                body.pointer("/data/keys").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str)
            {
                if !walk.add(&folder, k)? {
                    return Ok(walk.found);
                }
            }
        }
        Ok(walk.finish())
    }

    /// Whether a push or delete may change the secret at `loc`: KV v1 has no metadata, so
    /// always; KV v2 when the secret does not exist or carries the managed-by marker.
    async fn owned(&self, target: &Target, loc: &Location) -> Result<bool, ProviderError> {
        if loc.version == VaultKvVersion::V1 {
            return Ok(true);
        }
        Ok(self.metadata(target, loc).await?.is_none_or(|m| managed(&m)))
    }
}

/// KV v2 metadata, key by key.
type Metadata = std::collections::BTreeMap<String, String>;

/// Whether custom metadata carries the marker of pushed secrets.
fn managed(custom: &Metadata) -> bool {
    custom.get(MANAGED_BY_KEY).map(String::as_str) == Some(MANAGED_BY_VALUE)
}

#[tonic::async_trait]
impl Provider for VaultProvider {
    async fn get_secret(
        &self,
        ctx: &RequestContext,
        remote_ref: &ExternalSecretDataRemoteRef,
    ) -> Result<Vec<u8>, ProviderError> {
        let target = self.target(ctx).await?;
        let loc = self.located(&target, &remote_ref.key).await?;
        if remote_ref.metadata_policy.eq_ignore_ascii_case("Fetch") {
            let meta = self.fetch_metadata(&target, &loc).await?;
            return match remote_ref.property.as_str() {
                "" => serde_json::to_vec(&meta).map_err(|e| ProviderError::Internal(e.to_string())),
                p => meta.get(p).map(|v| v.clone().into_bytes()).ok_or_else(|| {
                    ProviderError::NoSecret(format!("secret {}/{} has no metadata {p:?}", loc.mount, loc.path))
                }),
            };
        }
        let data = self.read_shared(ctx, &target, &loc, &remote_ref.version).await?;
        if remote_ref.property.is_empty() {
            data.bytes()
        } else {
            data_property(&data, &format!("{}/{}", loc.mount, loc.path), &remote_ref.property)
        }
    }

    async fn get_secret_map(
        &self,
        ctx: &RequestContext,
        remote_ref: &ExternalSecretDataRemoteRef,
    ) -> Result<SecretMap, ProviderError> {
        let target = self.target(ctx).await?;
        let loc = self.located(&target, &remote_ref.key).await?;
        let data = if remote_ref.metadata_policy.eq_ignore_ascii_case("Fetch") {
            // Upstream extracts the same map a Fetch without a property returns.
            serde_json::to_vec(&self.fetch_metadata(&target, &loc).await?)
                .map_err(|e| ProviderError::Internal(e.to_string()))?
        } else {
            self.read_shared(ctx, &target, &loc, &remote_ref.version).await?.bytes()?
        };
        value_map(&data, &format!("{}/{}", loc.mount, loc.path), &remote_ref.property)
    }

    async fn get_all_secrets(
        &self,
        ctx: &RequestContext,
        find: &ExternalSecretFind,
    ) -> Result<SecretMap, ProviderError> {
        let regex = keyward_provider_runtime::json::find_regex(find)?;
        let target = self.target(ctx).await?;
        if !find.tags.is_empty() && target.version == VaultKvVersion::V1 {
            return Err(ProviderError::Unsupported(
                "find.tags needs KV v2 custom metadata; this engine is KV v1".into(),
            ));
        }
        // Without spec.path the find path's first segment is the mount.
        if target.mount.is_none() && find.path.trim_matches('/').is_empty() {
            return Err(ProviderError::InvalidArgument(
                "find.path must name the KV mount when the Vault config has no spec.path".into(),
            ));
        }
        let root = locate_folder(target.mount.as_deref(), target.version, &find.path)?;
        self.confirm_kv(&target, &root).await?;
        let name = format!("{}/{}", root.mount, root.path);
        let mut found = FindAnswer::new(
            format!("the secrets under {} that find selects", name.trim_end_matches('/')),
            "select fewer",
        );
        for path in self.list(&target, &root.at("")?, &root.path).await? {
            if !path.starts_with(root.path.as_str()) || regex.as_ref().is_some_and(|r| !r.is_match(&path)) {
                continue;
            }
            let loc = root.at(&path)?;
            if !find.tags.is_empty() {
                // Upstream matches tags against what a Fetch sees: custom and system metadata.
                let meta = self.read_metadata(&target, &loc, fetched_metadata).await?.unwrap_or_default();
                if !find.tags.iter().all(|(k, v)| meta.get(k) == Some(v)) {
                    continue;
                }
            }
            // A secret deleted (or whose latest version was) since the listing is skipped.
            if let Some(data) = self.read_opt(&target, &loc).await? {
                let value = data_bytes(&data)?;
                found.keep(path, value)?;
            }
        }
        Ok(found.into_secrets())
    }

    async fn push_secret(
        &self,
        ctx: &RequestContext,
        secret_data: &SecretMap,
        data: &PushSecretData,
    ) -> Result<(), ProviderError> {
        let meta = parse_push_metadata(&data.metadata)?;
        let target = self.target(ctx).await?;
        let loc = self.located(&target, &data.remote_key).await?;
        let name = format!("{}/{}", loc.mount, loc.path);
        // KV v2: the custom metadata as it is (`None`: no such secret); KV v1 has none.
        let existing = match loc.version {
            VaultKvVersion::V2 => self.metadata(&target, &loc).await?,
            VaultKvVersion::V1 => None,
        };
        if existing.as_ref().is_some_and(|m| !managed(m)) {
            return Err(ProviderError::PermissionDenied(format!(
                "secret {name} exists but its custom metadata has no {MANAGED_BY_KEY}={MANAGED_BY_VALUE}, so a push \
                 does not overwrite it"
            )));
        }
        let current = self.read_opt(&target, &loc).await?;
        let current_bytes = current.as_ref().map(data_bytes).transpose()?;
        // A Vault secret is a map: a single value without a property goes under the source key,
        // unless it is a JSON object itself (then it is the map).
        let value = if !data.secret_key.is_empty() && data.property.is_empty() {
            let raw = secret_data.get(&data.secret_key).ok_or_else(|| {
                ProviderError::InvalidArgument(format!("the source Secret has no key {:?}", data.secret_key))
            })?;
            match serde_json::from_slice::<Value>(raw) {
                Ok(Value::Object(m)) => data_bytes(&m)?,
                _ => {
                    let text = String::from_utf8(raw.clone()).map_err(|_| {
                        ProviderError::InvalidArgument(format!("key {:?} is not UTF-8", data.secret_key))
                    })?;
                    data_bytes(&Map::from_iter([(data.secret_key.clone(), Value::String(text))]))?
                }
            }
        } else {
            push_value(current_bytes.as_deref(), secret_data, data, &name)?
        };
        let new: Map<String, Value> = keyward_provider_runtime::json::json_object(&value, &name)?;
        if current.as_ref() != Some(&new) {
            self.write(&target, &loc, &new).await?;
        }
        if loc.version == VaultKvVersion::V2 {
            // Writing custom metadata replaces all of it: keep what is there (other entries of
            // the same PushSecret, or other PushSecrets, may have set it) and add this entry's.
            let mut custom = existing.clone().unwrap_or_default();
            custom.extend(meta.custom_metadata.clone());
            custom.insert(MANAGED_BY_KEY.to_string(), MANAGED_BY_VALUE.to_string());
            if existing.as_ref() != Some(&custom) {
                let what = format!("writing the metadata of {name}");
                target
                    .client
                    .ok(Method::POST, &loc.metadata(), Some(&json!({"custom_metadata": custom})), &[], &what)
                    .await
                    .map_err(|e| self.fail(&target, e))?;
            }
        }
        tracing::info!(remote_key = %name, created = current.is_none(), "pushed");
        Ok(())
    }

    async fn delete_secret(&self, ctx: &RequestContext, remote_ref: &PushSecretRemoteRef) -> Result<(), ProviderError> {
        let target = self.target(ctx).await?;
        let loc = self.located(&target, &remote_ref.remote_key).await?;
        let name = format!("{}/{}", loc.mount, loc.path);
        let Some(mut current) = self.read_opt(&target, &loc).await? else {
            return Ok(());
        };
        if !self.owned(&target, &loc).await? {
            tracing::info!(remote_key = %name, "not deleting a secret without the {MANAGED_BY_KEY} marker");
            return Ok(());
        }
        if !remote_ref.property.is_empty() {
            if current.remove(&remote_ref.property).is_none() {
                return Ok(());
            }
            if !current.is_empty() {
                return self.write(&target, &loc, &current).await;
            }
        }
        // KV v2: the metadata, so every version goes.
        let path = if loc.version == VaultKvVersion::V2 { loc.metadata() } else { loc.data() };
        match target.client.ok(Method::DELETE, &path, None, &[], &format!("deleting {name}")).await {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(self.fail(&target, e)),
        }
    }

    async fn secret_exists(
        &self,
        ctx: &RequestContext,
        remote_ref: &PushSecretRemoteRef,
    ) -> Result<bool, ProviderError> {
        let target = self.target(ctx).await?;
        let loc = self.located(&target, &remote_ref.remote_key).await?;
        Ok(match self.read_opt(&target, &loc).await? {
            None => false,
            Some(_) if remote_ref.property.is_empty() => true,
            Some(d) => d.contains_key(&remote_ref.property),
        })
    }

    async fn validate(&self, ctx: &RequestContext) -> Result<Vec<String>, ProviderError> {
        let target = self.target(ctx).await?;
        target.client.lookup_self().await.map_err(|e| self.fail(&target, e))?;
        Ok(vec![])
    }

    async fn generate(&self, ctx: &RequestContext, spec_json: &str) -> Result<SecretMap, ProviderError> {
        generate::generate(self, ctx, spec_json).await
    }

    async fn object(&self, ctx: &RequestContext) -> keyward_provider_runtime::Generation {
        self.refs.generation_of::<Vault>(ctx).await
    }

    fn capabilities(&self) -> SecretStoreCapabilities {
        SecretStoreCapabilities::ReadWrite
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keyward_provider_runtime::json::value_property;
    use std::collections::HashMap;

    #[test]
    fn properties_of_the_cached_map_resolve_as_the_json_text_does() {
        let data = json!({
            "user": "app", "port": 5432, "ok": true, "none": null, "a.b": "literal",
            "a": {"b": "nested", "b.c": "dotted key"},
            "db": {"host": "h", "ports": [1, 2, {"x": "y"}]},
            "friends": [{"first": "Dale"}, {"first": "Roger"}],
        });
        let Value::Object(map) = data else { unreachable!() };
        let text = data_bytes(&map).unwrap();
        let shared = SharedData::new(map);
        assert_eq!(shared.bytes().unwrap(), text, "whole secret");
        let props = [
            "user",
            "port",
            "ok",
            "none",
            "a.b",
            "a",
            "a.b.c",
            "db",
            "db.host",
            "db.ports",
            "db.ports.1",
            "db.ports.2.x",
            "db.ports.3",
            "db.ports.x",
            "friends.1.first",
            "friends.2.first",
            "friends.x",
            "missing",
            "db.missing",
            "user.x",
            "",
            ".",
            "db.",
            ".db",
        ];
        for prop in props {
            let old = value_property(&text, "secret/s", prop);
            let new = data_property(&shared, "secret/s", prop);
            match (old, new) {
                (Ok(old), Ok(new)) => assert_eq!(old, new, "{prop:?}"),
                (Err(old), Err(new)) => {
                    assert_eq!((old.code(), old.to_string()), (new.code(), new.to_string()), "{prop:?}")
                }
                (old, new) => panic!("{prop:?}: {old:?} then, {new:?} now"),
            }
        }
        assert_eq!(data_property(&shared, "s", "a.b").unwrap(), b"literal", "a literal key wins");
        assert_eq!(data_property(&shared, "s", "db.ports.2.x").unwrap(), b"y");
        assert!(data_property(&shared, "s", "nope").unwrap_err().is_not_found());
    }

    #[test]
    fn property_reads_share_the_cached_map() {
        // A secret of many properties, each read as its own request: every read looks into the
        // one parsed map the cache holds, neither copying nor encoding it.
        let map: Map<String, Value> = (0..1000).map(|i| (format!("p{i}"), Value::String("x".repeat(4096)))).collect();
        let shared = SharedData::new(map);
        for i in 0..1000 {
            let copy = shared.clone();
            assert!(Arc::ptr_eq(&copy.0, &shared.0), "a cached answer handed out is the same map");
            assert_eq!(data_property(&copy, "s", &format!("p{i}")).unwrap().len(), 4096);
        }
        assert_eq!(Arc::strong_count(&shared.0), 1);
        assert!(shared.weight() >= 1000 * 4096, "the cache counts what the map holds");
    }

    #[test]
    fn a_walk_bounds_its_pending_folders() {
        let mut walk = Walk::new("secret/".into(), String::new(), String::new());
        assert_eq!(walk.next_folder().unwrap().as_deref(), Some(""));
        // A server listing folder after folder and never a secret.
        for i in 0..MAX_PENDING_FOLDERS {
            assert!(walk.add("", &format!("a{i}/")).unwrap());
        }
        let e = walk.add("", "one-more/").unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unavailable, "{e}");
        assert!(e.to_string().contains(&MAX_PENDING_FOLDERS.to_string()), "{e}");
        assert_eq!(walk.folders.len(), MAX_PENDING_FOLDERS);
        // Secrets still come while folders wait.
        assert!(walk.add("", "s").unwrap());
        assert_eq!(walk.found, ["s"]);
    }

    #[test]
    fn a_walk_bounds_its_list_calls() {
        // A server answering each LIST with one more folder, for ever.
        let mut walk = Walk::new("secret/".into(), String::new(), String::new());
        let mut lists = 0;
        let mut refused = None;
        while lists <= MAX_LISTS {
            match walk.next_folder() {
                Ok(Some(folder)) => {
                    lists += 1;
                    assert!(walk.add("", &format!("f{lists}/")).unwrap(), "{folder}");
                }
                Ok(None) => panic!("the walk ended"),
                Err(e) => {
                    refused = Some(e);
                    break;
                }
            }
        }
        let e = refused.expect("the walk goes on past the LIST limit");
        assert_eq!(lists, MAX_LISTS);
        assert_eq!(e.code(), tonic::Code::Unavailable, "{e}");
        assert!(e.to_string().contains(&MAX_LISTS.to_string()), "{e}");
    }

    #[test]
    fn a_walk_of_a_real_tree_finds_its_secrets() {
        let mut walk = Walk::new("secret/".into(), "team".into(), String::new());
        let tree: HashMap<&str, &[&str]> = [
            ("team", &["app/", "web/", "top"][..]),
            ("team/app", &["db", "cache/"]),
            ("team/app/cache", &["r"]),
            ("team/web", &["t", "../x"]),
        ]
        .into();
        while let Some(folder) = walk.next_folder().unwrap() {
            for name in tree[folder.as_str()] {
                assert!(walk.add(&folder, name).unwrap());
            }
        }
        assert_eq!(walk.lists, 4);
        assert_eq!(walk.finish(), ["team/app/cache/r", "team/app/db", "team/top", "team/web/t"]);
        // The secret limit stops the walk, as before.
        let mut walk = Walk::new("secret/".into(), String::new(), String::new());
        walk.next_folder().unwrap();
        for i in 0..FIND_LIMIT - 1 {
            assert!(walk.add("", &format!("s{i}")).unwrap());
        }
        assert!(!walk.add("", "last").unwrap());
    }

    #[test]
    fn a_walk_lists_only_folders_that_can_hold_the_find_path() {
        // find.path "team/ap" is a prefix: team/app/… and team/apps/… match, team/web/… and
        // other/… are never listed, however large they are.
        let mut walk = Walk::new("secret/".into(), String::new(), "team/ap".into());
        let tree: HashMap<&str, &[&str]> = [
            ("", &["team/", "other/", "team-top"][..]),
            ("team", &["app/", "apps/", "web/", "a"]),
            ("team/app", &["db"]),
            ("team/apps", &["x"]),
        ]
        .into();
        let mut listed = Vec::new();
        while let Some(folder) = walk.next_folder().unwrap() {
            listed.push(folder.clone());
            for name in tree[folder.as_str()] {
                assert!(walk.add(&folder, name).unwrap());
            }
        }
        listed.sort();
        assert_eq!(listed, ["", "team", "team/app", "team/apps"], "other/ and team/web/ are not listed");
        assert_eq!(walk.finish(), ["team/app/db", "team/apps/x"]);
    }
}
