//! The operations of the GCP Secret Manager provider (`keyward_provider_runtime::Provider`), as
//! upstream's gcpsm provider does them, through Google's client. A remote key is a secret ID of
//! the configuration's project (and location); a version is `latest`, a number or an alias.

use std::collections::HashMap;
use std::sync::Arc;

use google_cloud_gax::error::rpc::Code;
use google_cloud_gax::retry_policy::{Aip194Strict, RetryPolicyExt};
use google_cloud_secretmanager_v1::client::SecretManagerService;
use google_cloud_secretmanager_v1::model::{self as sm, replication};
use keyward_proto::v1::{
    ExternalSecretDataRemoteRef, ExternalSecretFind, PushSecretData, PushSecretRemoteRef, SecretStoreCapabilities,
};
use keyward_provider_runtime::json::{
    find_regex, has_property, push_value, value_map, value_property, without_property,
};
use keyward_provider_runtime::refs::{CacheKey, ClientCache, ClusterRefs};
use keyward_provider_runtime::{Provider, ProviderError, RequestContext, SecretMap, body, store_calls};

use crate::api::{GCPSecretManager, KIND, SecretVersionSelectionPolicy, check_secret_id};
use crate::auth::{Endpoints, TokenExchange};
use crate::value::{self, PushMetadata};

/// The provider label of the store-calls metric (upstream's).
pub const PROVIDER_NAME: &str = "GCP/SecretManager";
/// Secrets listed per page.
const PAGE: i32 = 100;
/// Most secrets a find looks through.
const MAX_LISTED: usize = 10_000;

/// The GCP Secret Manager provider.
pub struct GcpProvider {
    pub(crate) refs: ClusterRefs,
    pub(crate) exchange: TokenExchange,
    /// Clients (credentials and endpoint) per configuration, generation and owner.
    clients: ClientCache<Arc<SecretManagerService>>,
}

/// What a request reached.
struct Target {
    sm: Arc<SecretManagerService>,
    /// `projects/<p>` or `projects/<p>/locations/<l>`.
    parent: String,
    regional: bool,
    policy: SecretVersionSelectionPolicy,
    key: CacheKey,
}

impl Target {
    fn secret(&self, id: &str) -> String {
        format!("{}/secrets/{id}", self.parent)
    }
}

/// The provider's error for Google's answer to `what`.
fn map_error(e: &google_cloud_secretmanager_v1::Error, what: &str) -> ProviderError {
    let Some(status) = e.status() else {
        return ProviderError::Unavailable(format!("Secret Manager, {what}: {e}"));
    };
    let msg = format!("Secret Manager answered {:?} to {what}: {}", status.code, status.message);
    match status.code {
        Code::NotFound => ProviderError::NoSecret(msg),
        Code::InvalidArgument | Code::OutOfRange | Code::AlreadyExists => ProviderError::InvalidArgument(msg),
        Code::FailedPrecondition => ProviderError::BadConfig(msg),
        Code::PermissionDenied => ProviderError::PermissionDenied(msg),
        Code::Unauthenticated => ProviderError::Unauthenticated(msg),
        Code::DeadlineExceeded => ProviderError::DeadlineExceeded(msg),
        _ => ProviderError::Unavailable(msg),
    }
}

fn code(e: &google_cloud_secretmanager_v1::Error) -> Option<Code> {
    e.status().map(|s| s.code)
}

/// Counts a call in the store-calls metric (a missing secret is an answer, as for the others).
fn counted<T>(call: &str, r: google_cloud_secretmanager_v1::Result<T>) -> google_cloud_secretmanager_v1::Result<T> {
    let ok = match &r {
        Ok(_) => true,
        Err(e) => code(e) == Some(Code::NotFound),
    };
    store_calls::record(PROVIDER_NAME, call, ok);
    r
}

/// A key as a secret ID.
fn secret_id(key: &str) -> Result<&str, ProviderError> {
    check_secret_id(key).map(|()| key).map_err(|e| {
        ProviderError::InvalidArgument(format!("remote key {key:?} is not a Secret Manager secret ID: it {e}"))
    })
}

/// Whether a FAILED_PRECONDITION says the version is disabled or destroyed (upstream's test).
fn disabled_or_destroyed(e: &google_cloud_secretmanager_v1::Error) -> bool {
    e.status().is_some_and(|s| {
        s.code == Code::FailedPrecondition
            && (s.message.contains("DESTROYED state") || s.message.contains("DISABLED state"))
    })
}

impl GcpProvider {
    /// A provider reading configurations with `client`, calling Google at `endpoints`.
    pub fn new(client: kube::Client, endpoints: Endpoints) -> Self {
        GcpProvider {
            refs: ClusterRefs::new(client),
            exchange: TokenExchange::new(endpoints, PROVIDER_NAME),
            clients: ClientCache::default(),
        }
    }

    async fn target(&self, ctx: &RequestContext) -> Result<Target, ProviderError> {
        let config = self.refs.resolve_spec::<GCPSecretManager>(ctx, &KIND).await?;
        let key = CacheKey::of(ctx, config.generation);
        let spec = config.spec;
        let eps = self.exchange.endpoints();
        let project = [
            &spec.project_id,
            spec.auth.workload_identity.as_ref().map_or(&String::new(), |w| &w.cluster_project_id),
            &eps.project_id,
        ]
        .into_iter()
        .find(|p| !p.is_empty())
        .cloned()
        .ok_or_else(|| ProviderError::BadConfig(format!("{}: spec.projectID is required", config.what)))?;
        let sm = self
            .clients
            .get_or_build(&key, async {
                let creds =
                    self.credentials(ctx, &spec.auth, &project).await.map_err(|e| with_config(e, &config.what))?;
                let endpoint = eps.secret_manager_for(&spec.location);
                SecretManagerService::builder()
                    .with_endpoint(endpoint.clone())
                    .with_credentials(creds)
                    .with_retry_policy(Aip194Strict.with_attempt_limit(3))
                    .with_attempt_timeout(body::REQUEST_TIMEOUT)
                    .build()
                    .await
                    .map(Arc::new)
                    .map_err(|e| ProviderError::BadConfig(format!("a Secret Manager client for {endpoint}: {e}")))
            })
            .await?;
        let parent = if spec.location.is_empty() {
            format!("projects/{project}")
        } else {
            format!("projects/{project}/locations/{}", spec.location)
        };
        Ok(Target {
            sm,
            parent,
            regional: !spec.location.is_empty(),
            policy: spec.secret_version_selection_policy.unwrap_or_default(),
            key,
        })
    }

    /// The payload of `version` of secret `id` (`LatestOrFetch`: the newest enabled version
    /// when `latest` is disabled or destroyed and no version was asked for).
    async fn access(&self, t: &Target, id: &str, version: &str) -> Result<Vec<u8>, ProviderError> {
        let asked = if version.is_empty() { "latest" } else { version };
        check_secret_id(asked).map_err(|e| ProviderError::InvalidArgument(format!("version {asked:?} {e}")))?;
        let name = format!("{}/versions/{asked}", t.secret(id));
        let r = counted("AccessSecretVersion", t.sm.access_secret_version().set_name(&name).send().await);
        let answer = match r {
            Err(e)
                if version.is_empty()
                    && t.policy == SecretVersionSelectionPolicy::LatestOrFetch
                    && disabled_or_destroyed(&e) =>
            {
                let Some(newest) = self.newest_enabled(t, id).await? else {
                    return Err(map_error(&e, &format!("reading secret {id}")));
                };
                counted("AccessSecretVersion", t.sm.access_secret_version().set_name(&newest).send().await)
            }
            other => other,
        };
        let answer = answer.map_err(|e| {
            self.clients.evict_if_refused(&t.key, map_error(&e, &format!("reading version {asked} of secret {id}")))
        })?;
        Ok(answer.payload.map(|p| p.data.to_vec()).unwrap_or_default())
    }

    /// The name of the newest enabled version of secret `id`, if any.
    async fn newest_enabled(&self, t: &Target, id: &str) -> Result<Option<String>, ProviderError> {
        let mut newest: Option<(i64, i32, String)> = None;
        let mut token = String::new();
        loop {
            let page = counted(
                "ListSecretVersions",
                t.sm.list_secret_versions()
                    .set_parent(t.secret(id))
                    .set_filter("state:ENABLED")
                    .set_page_size(PAGE)
                    .set_page_token(&token)
                    .send()
                    .await,
            )
            .map_err(|e| map_error(&e, &format!("listing the versions of secret {id}")))?;
            for v in page.versions {
                let at = v.create_time.map_or((0, 0), |c| (c.seconds(), c.nanos()));
                if v.state == sm::secret_version::State::Enabled
                    && newest.as_ref().is_none_or(|(s, n, _)| (at.0, at.1) > (*s, *n))
                {
                    newest = Some((at.0, at.1, v.name));
                }
            }
            if page.next_page_token.is_empty() {
                return Ok(newest.map(|(_, _, n)| n));
            }
            token = page.next_page_token;
        }
    }

    async fn get_meta(&self, t: &Target, id: &str) -> Result<Option<sm::Secret>, ProviderError> {
        match counted("GetSecret", t.sm.get_secret().set_name(t.secret(id)).send().await) {
            Ok(s) => Ok(Some(s)),
            Err(e) if code(&e) == Some(Code::NotFound) => Ok(None),
            Err(e) => Err(self.clients.evict_if_refused(&t.key, map_error(&e, &format!("reading secret {id}")))),
        }
    }

    async fn read(&self, ctx: &RequestContext, r: &ExternalSecretDataRemoteRef) -> Result<Vec<u8>, ProviderError> {
        let id = secret_id(&r.key)?;
        let t = self.target(ctx).await?;
        if r.metadata_policy.eq_ignore_ascii_case("Fetch") {
            let s = self
                .get_meta(&t, id)
                .await?
                .ok_or_else(|| ProviderError::NoSecret(format!("secret {id} does not exist")))?;
            return value::metadata(id, &r.property, &s.annotations, &s.labels);
        }
        let value = self.access(&t, id, &r.version).await?;
        if r.property.is_empty() {
            return Ok(value);
        }
        let (property, id) = (r.property.clone(), id.to_string());
        body::off_thread(move || value_property(&value, &id, &property)).await
    }

    async fn add_version(&self, t: &Target, id: &str, data: Vec<u8>) -> Result<(), ProviderError> {
        let payload = sm::SecretPayload::new().set_data(data);
        counted(
            "AddSecretVersion",
            t.sm.add_secret_version().set_parent(t.secret(id)).set_payload(payload).send().await,
        )
        .map(|_| ())
        .map_err(|e| map_error(&e, &format!("adding a version to secret {id}")))
    }

    /// Creates secret `id` as upstream does: labelled managed-by, with the metadata's
    /// replication (automatic by default; none for a regional secret) and topics.
    async fn create(&self, t: &Target, id: &str, meta: &PushMetadata) -> Result<sm::Secret, ProviderError> {
        let mut secret = sm::Secret::new()
            .set_labels([(value::MANAGED_BY.0, value::MANAGED_BY.1)])
            .set_topics(meta.topics.iter().map(|n| sm::Topic::new().set_name(n)));
        if !t.regional {
            secret = secret.set_replication(replication_of(meta));
        }
        counted(
            "CreateSecret",
            t.sm.create_secret().set_parent(&t.parent).set_secret_id(id).set_secret(secret).send().await,
        )
        .map_err(|e| map_error(&e, &format!("creating secret {id}")))
    }
}

/// The replication a push asks for: user-managed replicas at the metadata's locations, with its
/// KMS key; else automatic (with the key, when one is named).
fn replication_of(meta: &PushMetadata) -> sm::Replication {
    let cmek = (!meta.cmek_key_name.is_empty())
        .then(|| sm::CustomerManagedEncryption::new().set_kms_key_name(&meta.cmek_key_name));
    let locations = meta.locations();
    if locations.is_empty() {
        let mut auto = replication::Automatic::new();
        if let Some(c) = cmek {
            auto = auto.set_customer_managed_encryption(c);
        }
        return sm::Replication::new().set_automatic(auto);
    }
    let replicas = locations.into_iter().map(|l| {
        let r = replication::user_managed::Replica::new().set_location(l);
        match &cmek {
            Some(c) => r.set_customer_managed_encryption(c.clone()),
            None => r,
        }
    });
    sm::Replication::new().set_user_managed(replication::UserManaged::new().set_replicas(replicas))
}

/// A configuration error names the configuration.
fn with_config(e: ProviderError, what: &str) -> ProviderError {
    match e {
        ProviderError::BadConfig(m) => ProviderError::BadConfig(format!("{what}: {m}")),
        other => other,
    }
}

/// A `find.path` is a prefix of secret IDs: the same characters.
fn check_path(path: &str) -> Result<(), ProviderError> {
    if path.is_empty() {
        return Ok(());
    }
    check_secret_id(path)
        .map_err(|e| ProviderError::InvalidArgument(format!("find.path {path:?} is no secret ID prefix: it {e}")))
}

/// Secret Manager's list filter for a find: each tag as `labels.<k>=<v>` (ANDed) and the path
/// as `name:<path>`, as upstream writes it.
fn list_filter(find: &ExternalSecretFind) -> Result<String, ProviderError> {
    let mut terms = Vec::new();
    let mut tags: Vec<_> = find.tags.iter().collect();
    tags.sort();
    for (k, v) in tags {
        for s in [k, v] {
            if s.is_empty() || !s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
            {
                return Err(ProviderError::InvalidArgument(format!(
                    "find.tags {k:?}={v:?}: label keys and values hold lowercase letters, digits, - and _"
                )));
            }
        }
        terms.push(format!("labels.{k}={v}"));
    }
    if !find.path.is_empty() {
        terms.push(format!("name:{}", find.path));
    }
    Ok(terms.join(" "))
}

#[tonic::async_trait]
impl Provider for GcpProvider {
    async fn get_secret(
        &self,
        ctx: &RequestContext,
        r: &ExternalSecretDataRemoteRef,
    ) -> Result<Vec<u8>, ProviderError> {
        self.read(ctx, r).await
    }

    async fn get_secret_map(
        &self,
        ctx: &RequestContext,
        r: &ExternalSecretDataRemoteRef,
    ) -> Result<SecretMap, ProviderError> {
        let mut whole = r.clone();
        whole.property.clear();
        let value = self.read(ctx, &whole).await?;
        let (key, property) = (r.key.clone(), r.property.clone());
        body::off_thread(move || value_map(&value, &key, &property)).await
    }

    async fn get_all_secrets(
        &self,
        ctx: &RequestContext,
        find: &ExternalSecretFind,
    ) -> Result<SecretMap, ProviderError> {
        check_path(&find.path)?;
        let name = find_regex(find)?;
        if name.is_none() && find.tags.is_empty() {
            return Err(ProviderError::InvalidArgument("a find needs find.name.regexp or find.tags".into()));
        }
        let filter = list_filter(find)?;
        let t = self.target(ctx).await?;
        let prefix = format!("{}/secrets/", t.parent);
        let mut ids = Vec::new();
        let mut token = String::new();
        loop {
            let page = counted(
                "ListSecrets",
                t.sm.list_secrets()
                    .set_parent(&t.parent)
                    .set_filter(&filter)
                    .set_page_size(PAGE)
                    .set_page_token(&token)
                    .send()
                    .await,
            )
            .map_err(|e| self.clients.evict_if_refused(&t.key, map_error(&e, "listing secrets")))?;
            for s in &page.secrets {
                // The answer names secrets by project number; the ID is the last segment.
                let id = s.name.rsplit('/').next().unwrap_or_default();
                let selected = check_secret_id(id).is_ok()
                    && id.starts_with(&find.path)
                    && name.as_ref().is_none_or(|n| n.is_match(id))
                    && find.tags.iter().all(|(k, v)| s.labels.get(k) == Some(v));
                if selected && (s.name.ends_with(&format!("/secrets/{id}")) || s.name.starts_with(&prefix)) {
                    ids.push(id.to_string());
                }
            }
            if ids.len() > MAX_LISTED {
                return Err(ProviderError::InvalidArgument(format!(
                    "the find selects more than {MAX_LISTED} secrets; narrow find.name.regexp, find.path or find.tags"
                )));
            }
            if page.next_page_token.is_empty() {
                break;
            }
            token = page.next_page_token;
        }
        let mut out = body::FindAnswer::new(format!("the secrets of {} the find selects", t.parent), "narrow the find");
        for id in ids {
            match self.access(&t, &id, "").await {
                Ok(v) => out.keep(id, v)?,
                // A secret without an enabled version has no value to give.
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out.into_secrets())
    }

    async fn push_secret(
        &self,
        ctx: &RequestContext,
        data: &SecretMap,
        push: &PushSecretData,
    ) -> Result<(), ProviderError> {
        let id = secret_id(&push.remote_key)?;
        let meta = PushMetadata::parse(&push.metadata)?;
        if !push.property.is_empty() && meta != PushMetadata::default() {
            return Err(ProviderError::InvalidArgument(
                "push metadata and a property cannot be given together (as upstream)".into(),
            ));
        }
        let t = self.target(ctx).await?;
        let secret = match self.get_meta(&t, id).await? {
            Some(s) => s,
            None => self.create(&t, id, &meta).await?,
        };
        if !value::managed(&secret.labels) {
            return Err(ProviderError::PermissionDenied(format!(
                "secret {id} is not managed by external-secrets (no label managed-by=external-secrets); it is left alone"
            )));
        }
        let (labels, annotations, topics) = if push.property.is_empty() {
            let annotations: HashMap<String, String> =
                meta.annotations.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            (meta.labels_over(&secret.labels), annotations, meta.topics.clone())
        } else {
            let topics = secret.topics.iter().map(|t| t.name.clone()).collect();
            (meta.labels_over(&secret.labels), secret.annotations.clone(), topics)
        };
        let labels = if push.property.is_empty() { labels } else { secret.labels.clone() };
        let current_topics: Vec<String> = secret.topics.iter().map(|t| t.name.clone()).collect();
        if labels != secret.labels || annotations != secret.annotations || topics != current_topics {
            let mut update = sm::Secret::new()
                .set_name(&secret.name)
                .set_etag(&secret.etag)
                .set_labels(labels)
                .set_annotations(annotations)
                .set_topics(topics.iter().map(|n| sm::Topic::new().set_name(n)));
            let mut paths = vec!["labels", "annotations"];
            if topics != current_topics {
                paths.push("topics");
            }
            if t.regional {
                update = update.set_replication(sm::Replication::new());
            }
            counted(
                "UpdateSecret",
                t.sm.update_secret()
                    .set_secret(update)
                    .set_update_mask(google_cloud_wkt::FieldMask::default().set_paths(paths))
                    .send()
                    .await,
            )
            .map_err(|e| map_error(&e, &format!("updating the labels of secret {id}")))?;
        }
        let current = match self.access(&t, id, "latest").await {
            Ok(v) => Some(v),
            Err(e) if e.is_not_found() => None,
            Err(e) => return Err(e),
        };
        let wanted = push_value(current.as_deref(), data, push, id)?;
        if current.as_deref() == Some(wanted.as_slice()) {
            return Ok(());
        }
        self.add_version(&t, id, wanted).await
    }

    async fn delete_secret(&self, ctx: &RequestContext, r: &PushSecretRemoteRef) -> Result<(), ProviderError> {
        let id = secret_id(&r.remote_key)?;
        let t = self.target(ctx).await?;
        let Some(secret) = self.get_meta(&t, id).await? else { return Ok(()) };
        // As upstream: a secret Keyward does not manage is left alone.
        if !value::managed(&secret.labels) {
            return Ok(());
        }
        if !r.property.is_empty() {
            let current = match self.access(&t, id, "latest").await {
                Ok(v) => v,
                Err(e) if e.is_not_found() => return Ok(()),
                Err(e) => return Err(e),
            };
            match without_property(&current, id, &r.property)? {
                Some(left) if left == current => return Ok(()),
                Some(left) => return self.add_version(&t, id, left).await,
                None => {}
            }
        }
        match counted("DeleteSecret", t.sm.delete_secret().set_name(&secret.name).set_etag(&secret.etag).send().await) {
            Ok(()) => Ok(()),
            Err(e) if code(&e) == Some(Code::NotFound) => Ok(()),
            Err(e) => Err(map_error(&e, &format!("deleting secret {id}"))),
        }
    }

    async fn secret_exists(&self, ctx: &RequestContext, r: &PushSecretRemoteRef) -> Result<bool, ProviderError> {
        let id = secret_id(&r.remote_key)?;
        let t = self.target(ctx).await?;
        if r.property.is_empty() {
            // Upstream: the secret exists when it has an enabled version.
            return match self.newest_enabled(&t, id).await {
                Ok(v) => Ok(v.is_some()),
                Err(e) if e.is_not_found() => Ok(false),
                Err(e) => Err(e),
            };
        }
        match self.access(&t, id, "latest").await {
            Ok(v) => Ok(has_property(&v, &r.property)),
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn validate(&self, ctx: &RequestContext) -> Result<Vec<String>, ProviderError> {
        // The configuration, its credentials, and one page of the project's secrets.
        let t = self.target(ctx).await?;
        counted("ListSecrets", t.sm.list_secrets().set_parent(&t.parent).set_page_size(1).send().await)
            .map(|_| Vec::new())
            .map_err(|e| self.clients.evict_if_refused(&t.key, map_error(&e, "listing secrets")))
    }

    /// Answers are kept per configuration object (UID and generation): a store re-created under
    /// the same name is served with its own credentials at once.
    async fn object(&self, ctx: &RequestContext) -> keyward_provider_runtime::Generation {
        self.refs.generation_of::<GCPSecretManager>(ctx).await
    }

    fn capabilities(&self) -> SecretStoreCapabilities {
        SecretStoreCapabilities::ReadWrite
    }

    async fn generate(&self, ctx: &RequestContext, spec_json: &str) -> Result<SecretMap, ProviderError> {
        crate::generate::generate(self, ctx, spec_json).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_as_upstream_writes_them() {
        let mut find = ExternalSecretFind { path: "db-".into(), ..Default::default() };
        find.tags.insert("env".into(), "prod".into());
        find.tags.insert("app".into(), "web".into());
        assert_eq!(list_filter(&find).expect("filter"), "labels.app=web labels.env=prod name:db-");
        find.tags.insert("x".into(), "a b".into());
        assert_eq!(list_filter(&find).unwrap_err().code(), tonic::Code::InvalidArgument);
        assert!(check_path("../x").is_err() && check_path("%2e%2e").is_err() && check_path("db_").is_ok());
    }

    #[test]
    fn replication_as_upstream() {
        let auto = replication_of(&PushMetadata::default());
        assert!(matches!(auto.replication, Some(replication::Replication::Automatic(_))));
        let meta = PushMetadata {
            replication_locations: vec!["us-east1".into()],
            cmek_key_name: "k".into(),
            ..Default::default()
        };
        let Some(replication::Replication::UserManaged(u)) = replication_of(&meta).replication else {
            panic!("user-managed")
        };
        assert_eq!(u.replicas[0].location, "us-east1");
        assert_eq!(u.replicas[0].customer_managed_encryption.as_ref().map(|c| c.kms_key_name.as_str()), Some("k"));
    }
}
