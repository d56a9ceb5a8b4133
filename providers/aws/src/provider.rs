//! The provider process's calls: [`SecretsManagerProvider`].

use std::collections::BTreeMap;

use aws_sdk_secretsmanager::Client;
use aws_sdk_secretsmanager::primitives::Blob;
use aws_sdk_secretsmanager::types::{Filter, FilterNameStringType, Tag};
use keyward_proto::v1::{
    ExternalSecretDataRemoteRef, ExternalSecretFind, PushSecretData, PushSecretRemoteRef, SecretStoreCapabilities,
};
use keyward_provider_runtime::read_cache::ReadCache;
use keyward_provider_runtime::refs::{CacheKey, ClientCache, ClusterRefs};
use keyward_provider_runtime::{Provider, ProviderError, RequestContext, SecretMap};

use crate::api::{AwsService, KIND, SecretsManager};
use crate::client::{build_config, map_sdk_error};
use crate::mapping::{
    MANAGED_BY_KEY, MANAGED_BY_VALUE, Version, find_matches, parse_push_metadata, parse_version, secret_name,
};
use crate::{batch, generate};
use keyward_provider_runtime::body::FindAnswer;
use keyward_provider_runtime::json::{has_property, push_value, value_map, value_property, without_property};

/// Most secrets or parameters a find lists (listing stops there).
pub(crate) const FIND_LIMIT: usize = 10_000;

/// How a find of either service selects fewer, when what it matches passes one answer.
pub(crate) const NARROW_FIND: &str = "narrow it with find.path, find.name or find.tags";

/// A resolved request: the service, its client, the config's name prefix and delete options.
#[derive(Clone)]
pub(crate) struct Target {
    pub(crate) service: AwsService,
    pub(crate) client: Client,
    pub(crate) ssm: aws_sdk_ssm::Client,
    pub(crate) sdk: aws_config::SdkConfig,
    pub(crate) prefix: String,
    pub(crate) force_delete: bool,
    pub(crate) recovery_days: Option<i64>,
    pub(crate) key: CacheKey,
    /// Reads of distinct secrets batched together (`batch.rs`), per client and so per identity.
    pub(crate) batches: std::sync::Arc<batch::Batches>,
}

impl Target {
    /// The secret name of a remote key: the config's prefix, then the key as written. Names go
    /// into SDK request bodies, never into a URL path, so Secrets Manager reads `..` literally
    /// and a key cannot leave the prefix; the shared key rule still applies, so every provider
    /// refuses the same keys the webhook does.
    pub(crate) fn name(&self, key: &str) -> Result<String, ProviderError> {
        secret_name(&self.prefix, key)
    }

    /// Whether the store is Parameter Store (else Secrets Manager).
    pub(crate) fn parameter_store(&self) -> bool {
        self.service == AwsService::ParameterStore
    }
}

/// A secret as described by DescribeSecret.
struct Described {
    tags: BTreeMap<String, String>,
    deleted: bool,
}

impl Described {
    fn managed(&self) -> bool {
        self.tags.get(MANAGED_BY_KEY).map(String::as_str) == Some(MANAGED_BY_VALUE)
    }
}

/// The AWS provider (Secrets Manager and Parameter Store).
pub struct SecretsManagerProvider {
    pub(crate) refs: ClusterRefs,
    clients: ClientCache<Target>,
    /// The generators' clients (`generate.rs`), cached per generator as `clients` per store.
    pub(crate) generators: ClientCache<generate::GeneratorTarget>,
    /// Values read for GetSecret and GetSecretMap, shared by the requests that read the same
    /// secret or parameter (every property of it) within the age they accept.
    pub(crate) reads: ReadCache<Vec<u8>>,
}

impl SecretsManagerProvider {
    /// A provider reading its config objects and credentials with `client`.
    pub fn new(client: kube::Client) -> Self {
        SecretsManagerProvider {
            refs: ClusterRefs::new(client),
            clients: ClientCache::default(),
            generators: ClientCache::default(),
            reads: ReadCache::default(),
        }
    }

    async fn target(&self, ctx: &RequestContext) -> Result<Target, ProviderError> {
        // A SecretsManager config object, or the `spec.provider.aws` block of the store the
        // request names (translated by the row, with the service it names), checked with the
        // kind's rules and the tenant boundary, for the whole config at once so the message
        // lists every field.
        let config = self.refs.resolve_spec::<SecretsManager>(ctx, &KIND).await?;
        let spec = &config.spec;
        let service = spec.service();
        let key = CacheKey::of(ctx, config.generation);
        self.clients
            .get_or_build(&key, async {
                let sdk = build_config(&self.refs, ctx, spec).await?;
                let opts = spec.secrets_manager.clone().unwrap_or_default();
                let region = &spec.region;
                tracing::info!(
                    generation = key.generation,
                    region = %region,
                    service = service.as_str(),
                    config = %config.what,
                    "built an AWS client"
                );
                let (client, ssm) = (Client::new(&sdk), aws_sdk_ssm::Client::new(&sdk));
                Ok(Target {
                    service,
                    batches: batch::Batches::new(client.clone(), ssm.clone()),
                    client,
                    ssm,
                    sdk,
                    prefix: spec.prefix.clone().unwrap_or_default(),
                    force_delete: opts.force_delete_without_recovery,
                    recovery_days: opts.recovery_window_in_days,
                    key: key.clone(),
                })
            })
            .await
    }

    /// Refused credentials evict the cached client so the next call builds it again.
    pub(crate) fn fail(&self, target: &Target, e: ProviderError) -> ProviderError {
        self.clients.evict_if_refused(&target.key, e)
    }

    /// The raw value of a secret version.
    pub(crate) async fn value(&self, target: &Target, name: &str, version: &Version) -> Result<Vec<u8>, ProviderError> {
        let mut req = target.client.get_secret_value().secret_id(name);
        req = match version {
            Version::Current => req,
            Version::Stage(s) => req.version_stage(s),
            Version::Id(id) => req.version_id(id),
        };
        let out = match req.send().await {
            Ok(out) => out,
            Err(e) => {
                let e = self.fail(target, map_sdk_error(e, &format!("secret {name:?}")));
                // Secrets Manager refuses reads of a secret scheduled for deletion as an invalid
                // request; for the deletion policies that secret is gone.
                if matches!(e, ProviderError::InvalidArgument(_))
                    && self.describe(target, name).await.ok().flatten().is_some_and(|d| d.deleted)
                {
                    return Err(ProviderError::NoSecret(format!("secret {name:?} is scheduled for deletion")));
                }
                return Err(e);
            }
        };
        if let Some(s) = out.secret_string() {
            return Ok(s.as_bytes().to_vec());
        }
        if let Some(b) = out.secret_binary() {
            return Ok(b.as_ref().to_vec());
        }
        Err(ProviderError::NoSecret(format!("secret {name:?} has no value in the requested version")))
    }

    /// [`Self::value`] for GetSecret and GetSecretMap, shared ([`ReadCache::read`]) and batched
    /// with reads of other secrets (`batch.rs`).
    async fn shared_value(
        &self,
        ctx: &RequestContext,
        target: &Target,
        name: &str,
        version: &str,
    ) -> Result<Vec<u8>, ProviderError> {
        let parsed = parse_version(version);
        let object = target.key.object();
        self.reads.read("GetSecretValue", ctx, &object, name, version, self.batched_value(target, name, &parsed)).await
    }

    async fn current_value(&self, target: &Target, name: &str) -> Result<Option<Vec<u8>>, ProviderError> {
        match self.value(target, name, &Version::Current).await {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn describe(&self, target: &Target, name: &str) -> Result<Option<Described>, ProviderError> {
        match target.client.describe_secret().secret_id(name).send().await {
            Ok(out) => Ok(Some(Described {
                tags: out
                    .tags()
                    .iter()
                    .filter_map(|t| Some((t.key()?.to_string(), t.value().unwrap_or_default().to_string())))
                    .collect(),
                deleted: out.deleted_date().is_some(),
            })),
            Err(e) => match map_sdk_error(e, &format!("secret {name:?}")) {
                ProviderError::NoSecret(_) => Ok(None),
                other => Err(self.fail(target, other)),
            },
        }
    }

    async fn delete(&self, target: &Target, name: &str) -> Result<(), ProviderError> {
        let mut req = target.client.delete_secret().secret_id(name);
        if target.force_delete {
            req = req.force_delete_without_recovery(true);
        } else if let Some(days) = target.recovery_days {
            req = req.recovery_window_in_days(days);
        }
        match req.send().await {
            Ok(_) => Ok(()),
            Err(e) => match map_sdk_error(e, &format!("deleting secret {name:?}")) {
                ProviderError::NoSecret(_) => Ok(()),
                other => Err(self.fail(target, other)),
            },
        }
    }

    async fn put(&self, target: &Target, name: &str, value: Vec<u8>, as_string: bool) -> Result<(), ProviderError> {
        let mut req = target.client.put_secret_value().secret_id(name);
        req = if as_string { req.secret_string(utf8(value, name)?) } else { req.secret_binary(Blob::new(value)) };
        req.send().await.map_err(|e| self.fail(target, map_sdk_error(e, &format!("writing secret {name:?}"))))?;
        Ok(())
    }
}

fn utf8(value: Vec<u8>, name: &str) -> Result<String, ProviderError> {
    String::from_utf8(value).map_err(|_| {
        ProviderError::InvalidArgument(format!(
            "the value pushed to {name:?} is not UTF-8; use secretPushFormat: binary"
        ))
    })
}

fn tag(k: &str, v: &str) -> Tag {
    Tag::builder().key(k).value(v).build()
}

#[tonic::async_trait]
impl Provider for SecretsManagerProvider {
    async fn get_secret(
        &self,
        ctx: &RequestContext,
        remote_ref: &ExternalSecretDataRemoteRef,
    ) -> Result<Vec<u8>, ProviderError> {
        let target = self.target(ctx).await?;
        if target.parameter_store() {
            return self.ps_get_secret(ctx, &target, remote_ref).await;
        }
        let name = target.name(&remote_ref.key)?;
        if remote_ref.metadata_policy.eq_ignore_ascii_case("Fetch") {
            let d = self
                .describe(&target, &name)
                .await?
                .ok_or_else(|| ProviderError::NoSecret(format!("secret {name:?} not found")))?;
            return match remote_ref.property.as_str() {
                "" => serde_json::to_vec(&d.tags).map_err(|e| ProviderError::Internal(e.to_string())),
                p => d
                    .tags
                    .get(p)
                    .map(|v| v.clone().into_bytes())
                    .ok_or_else(|| ProviderError::NoSecret(format!("secret {name:?} has no tag {p:?}"))),
            };
        }
        let raw = self.shared_value(ctx, &target, &name, &remote_ref.version).await?;
        if remote_ref.property.is_empty() { Ok(raw) } else { value_property(&raw, &name, &remote_ref.property) }
    }

    async fn get_secret_map(
        &self,
        ctx: &RequestContext,
        remote_ref: &ExternalSecretDataRemoteRef,
    ) -> Result<SecretMap, ProviderError> {
        let target = self.target(ctx).await?;
        if target.parameter_store() {
            return self.ps_get_secret_map(ctx, &target, remote_ref).await;
        }
        let name = target.name(&remote_ref.key)?;
        let raw = self.shared_value(ctx, &target, &name, &remote_ref.version).await?;
        value_map(&raw, &name, &remote_ref.property)
    }

    async fn get_all_secrets(
        &self,
        ctx: &RequestContext,
        find: &ExternalSecretFind,
    ) -> Result<SecretMap, ProviderError> {
        let regex = keyward_provider_runtime::json::find_regex(find)?;
        let target = self.target(ctx).await?;
        if target.parameter_store() {
            return self.ps_get_all_secrets(&target, find).await;
        }
        // The name filter narrows the listing to the prefix; everything is checked again here.
        let prefix = target.name(&find.path)?;
        let mut list = target.client.list_secrets().max_results(100);
        if !prefix.is_empty() {
            list = list.filters(Filter::builder().key(FilterNameStringType::Name).values(prefix).build());
        }
        let mut pages = list.into_paginator().send();
        let mut names = Vec::new();
        let mut walked = 0usize;
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| self.fail(&target, map_sdk_error(e, "listing secrets")))?;
            walked += page.secret_list().len();
            for s in page.secret_list() {
                let Some(full) = s.name() else { continue };
                let Some(name) = full.strip_prefix(&target.prefix) else { continue };
                if s.deleted_date().is_some() {
                    continue;
                }
                let tags: BTreeMap<String, String> = s
                    .tags()
                    .iter()
                    .filter_map(|t| Some((t.key()?.to_string(), t.value().unwrap_or_default().to_string())))
                    .collect();
                if find_matches(name, &tags, regex.as_ref(), &find.path, &find.tags) {
                    names.push((name.to_string(), full.to_string()));
                }
            }
            if walked >= FIND_LIMIT {
                tracing::warn!(limit = FIND_LIMIT, "find stopped at the limit");
                break;
            }
        }
        let mut found = FindAnswer::new("the secrets this find matches".into(), NARROW_FIND);
        for (name, full) in names {
            // A secret deleted between the listing and the read is skipped.
            if let Some(v) = self.current_value(&target, &full).await? {
                found.keep(name, v)?;
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
        let target = self.target(ctx).await?;
        if target.parameter_store() {
            return self.ps_push_secret(&target, secret_data, data).await;
        }
        let meta = parse_push_metadata(&data.metadata)?;
        let name = target.name(&data.remote_key)?;
        match self.describe(&target, &name).await? {
            None => {
                let value = push_value(None, secret_data, data, &name)?;
                let mut req = target.client.create_secret().name(&name).tags(tag(MANAGED_BY_KEY, MANAGED_BY_VALUE));
                for (k, v) in &meta.tags {
                    req = req.tags(tag(k, v));
                }
                if let Some(d) = &meta.description {
                    req = req.description(d);
                }
                if let Some(k) = &meta.kms_key_id {
                    req = req.kms_key_id(k);
                }
                req = if meta.as_string() {
                    req.secret_string(utf8(value, &name)?)
                } else {
                    req.secret_binary(Blob::new(value))
                };
                req.send()
                    .await
                    .map_err(|e| self.fail(&target, map_sdk_error(e, &format!("creating secret {name:?}"))))?;
                tracing::info!(remote_key = %name, created = true, "pushed");
                Ok(())
            }
            Some(d) if d.deleted => Err(ProviderError::BadConfig(format!(
                "secret {name:?} is scheduled for deletion; restore it or wait until it is gone before pushing to it"
            ))),
            Some(d) if !d.managed() => Err(ProviderError::PermissionDenied(format!(
                "secret {name:?} exists but is not tagged {MANAGED_BY_KEY}={MANAGED_BY_VALUE}, so a push does not \
                 overwrite it"
            ))),
            Some(d) => {
                let current = self.current_value(&target, &name).await?;
                let value = push_value(current.as_deref(), secret_data, data, &name)?;
                if current.as_deref() != Some(value.as_slice()) {
                    self.put(&target, &name, value, meta.as_string()).await?;
                }
                let missing: Vec<Tag> =
                    meta.tags.iter().filter(|(k, v)| d.tags.get(*k) != Some(*v)).map(|(k, v)| tag(k, v)).collect();
                if !missing.is_empty() {
                    target
                        .client
                        .tag_resource()
                        .secret_id(&name)
                        .set_tags(Some(missing))
                        .send()
                        .await
                        .map_err(|e| self.fail(&target, map_sdk_error(e, &format!("tagging secret {name:?}"))))?;
                }
                tracing::info!(remote_key = %name, created = false, "pushed");
                Ok(())
            }
        }
    }

    async fn delete_secret(&self, ctx: &RequestContext, remote_ref: &PushSecretRemoteRef) -> Result<(), ProviderError> {
        let target = self.target(ctx).await?;
        if target.parameter_store() {
            return self.ps_delete_secret(&target, remote_ref).await;
        }
        let name = target.name(&remote_ref.remote_key)?;
        let Some(d) = self.describe(&target, &name).await? else {
            return Ok(());
        };
        if d.deleted {
            return Ok(());
        }
        if !d.managed() {
            tracing::info!(remote_key = %name, "not deleting a secret that is not tagged {MANAGED_BY_KEY}={MANAGED_BY_VALUE}");
            return Ok(());
        }
        if !remote_ref.property.is_empty() {
            let Some(current) = self.current_value(&target, &name).await? else {
                return Ok(());
            };
            if let Some(rest) = without_property(&current, &name, &remote_ref.property)? {
                if rest != current {
                    let as_string = std::str::from_utf8(&rest).is_ok();
                    self.put(&target, &name, rest, as_string).await?;
                }
                return Ok(());
            }
        }
        self.delete(&target, &name).await
    }

    async fn secret_exists(
        &self,
        ctx: &RequestContext,
        remote_ref: &PushSecretRemoteRef,
    ) -> Result<bool, ProviderError> {
        let target = self.target(ctx).await?;
        if target.parameter_store() {
            return self.ps_secret_exists(&target, remote_ref).await;
        }
        let name = target.name(&remote_ref.remote_key)?;
        match self.describe(&target, &name).await? {
            None => Ok(false),
            Some(d) if d.deleted => Ok(false),
            Some(_) if remote_ref.property.is_empty() => Ok(true),
            Some(_) => {
                let Some(raw) = self.current_value(&target, &name).await? else {
                    return Ok(false);
                };
                Ok(has_property(&raw, &remote_ref.property))
            }
        }
    }

    async fn validate(&self, ctx: &RequestContext) -> Result<Vec<String>, ProviderError> {
        let target = self.target(ctx).await?;
        let sts = aws_sdk_sts::Client::new(&target.sdk);
        let who = sts
            .get_caller_identity()
            .send()
            .await
            .map_err(|e| self.fail(&target, map_sdk_error(e, "GetCallerIdentity")))?;
        tracing::info!(arn = who.arn().unwrap_or_default(), "validated credentials");
        Ok(vec![])
    }

    async fn generate(&self, ctx: &RequestContext, spec_json: &str) -> Result<SecretMap, ProviderError> {
        generate::generate(self, ctx, spec_json).await
    }

    async fn object(&self, ctx: &RequestContext) -> keyward_provider_runtime::Generation {
        self.refs.generation_of::<SecretsManager>(ctx).await
    }

    fn capabilities(&self) -> SecretStoreCapabilities {
        SecretStoreCapabilities::ReadWrite
    }
}
