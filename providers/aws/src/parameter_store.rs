//! AWS Systems Manager Parameter Store, for stores with `service: ParameterStore`.
//!
//! Behaviour follows upstream External Secrets' Parameter Store provider: values are read with
//! decryption (SecureString parameters arrive decrypted), `remoteRef.version` selects
//! `name:version` (a version number or a label), pushes create `String` parameters unless the
//! push metadata says otherwise and tag them `managed-by: external-secrets`, and pushes and
//! deletes leave parameters without that tag alone. As for Secrets Manager, the store's
//! `prefix` goes before every name, keys pass the shared key rule, property pushes merge into a
//! JSON value, and finds return names without the prefix, stopping at [`crate::FIND_LIMIT`]
//! listed parameters and one answer's worth of names and values ([`FindAnswer`]).

use std::collections::{BTreeMap, HashMap};

use aws_sdk_ssm::types::{ParameterStringFilter, ParameterTier, ParameterType, ResourceTypeForTagging, Tag};
use base64::Engine;
use keyward_proto::v1::{ExternalSecretDataRemoteRef, ExternalSecretFind, PushSecretData, PushSecretRemoteRef};
use keyward_provider_runtime::body::FindAnswer;
use keyward_provider_runtime::json::{
    find_regex, has_property, push_metadata_spec, push_value, value_map, value_property, without_property,
};
use keyward_provider_runtime::{ProviderError, RequestContext, SecretMap};
use serde::Deserialize;

use crate::client::map_sdk_error;
use crate::mapping::{MANAGED_BY_KEY, MANAGED_BY_VALUE, find_matches};
use crate::{FIND_LIMIT, NARROW_FIND, SecretsManagerProvider, Target};

/// Description of a parameter a push creates without one in its metadata (upstream's).
const DEFAULT_DESCRIPTION: &str = "secret 'managed-by:external-secrets'";
/// GetParameters takes at most this many names.
const GET_PARAMETERS_BATCH: usize = 10;

/// The push metadata of a Parameter Store push (upstream's `PushSecretMetadataSpec` for
/// Parameter Store), in the `PushSecretMetadata` envelope:
///
/// ```json
/// {"apiVersion": "kubernetes.external-secrets.io/v1alpha1", "kind": "PushSecretMetadata",
///  "spec": {"secretType": "SecureString", "kmsKeyID": "alias/k", "tier": {"type": "Advanced",
///           "policies": [...]}, "encodeAsDecoded": true, "tags": {"team": "a"}, "description": "…"}}
/// ```
#[derive(Debug, Default, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ParameterPushMetadata {
    /// `String` (default), `StringList` or `SecureString`.
    #[serde(default)]
    pub secret_type: Option<String>,
    /// KMS key of a SecureString parameter (AWS's `alias/aws/ssm` when unset).
    #[serde(default, rename = "kmsKeyID")]
    pub kms_key_id: Option<String>,
    /// Tier and policies.
    #[serde(default)]
    pub tier: Option<ParameterTierSpec>,
    /// Without a secret key, the whole Secret is pushed as a JSON object: its values Base64
    /// (upstream's default), or as text with `encodeAsDecoded`.
    #[serde(default)]
    pub encode_as_decoded: bool,
    /// Tags of the parameter (`managed-by` is the provider's own and may not be given).
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
    /// Description of the parameter.
    #[serde(default)]
    pub description: Option<String>,
}

/// `tier` of the push metadata.
#[derive(Debug, Default, Clone, PartialEq, Deserialize)]
pub struct ParameterTierSpec {
    /// `Standard` (default), `Advanced` or `Intelligent-Tiering`.
    #[serde(default, rename = "type")]
    pub type_: Option<String>,
    /// Parameter policies (a JSON array, or its text).
    #[serde(default)]
    pub policies: Option<serde_json::Value>,
}

impl ParameterPushMetadata {
    /// The parameter type a push writes.
    pub fn parameter_type(&self) -> ParameterType {
        ParameterType::from(self.secret_type.as_deref().unwrap_or("String"))
    }

    /// The tier, when other than Standard.
    pub fn tier(&self) -> Option<ParameterTier> {
        let t = self.tier.as_ref()?.type_.as_deref()?;
        (t != "Standard").then(|| ParameterTier::from(t))
    }

    /// The policies, as the text PutParameter takes.
    pub fn policies(&self) -> Option<String> {
        match self.tier.as_ref()?.policies.as_ref()? {
            serde_json::Value::Null => None,
            serde_json::Value::String(s) => Some(s.clone()),
            other => Some(other.to_string()),
        }
    }

    /// The tags a pushed parameter carries: the metadata's and `managed-by`.
    pub fn all_tags(&self) -> BTreeMap<String, String> {
        let mut tags = self.tags.clone();
        tags.insert(MANAGED_BY_KEY.to_string(), MANAGED_BY_VALUE.to_string());
        tags
    }
}

/// Parses Parameter Store push metadata; empty bytes (or `null`) mean none.
pub fn parse_parameter_metadata(bytes: &[u8]) -> Result<ParameterPushMetadata, ProviderError> {
    let spec: ParameterPushMetadata = push_metadata_spec(bytes)?;
    let bad = |m: String| Err(ProviderError::InvalidArgument(format!("push metadata {m}")));
    match spec.secret_type.as_deref() {
        None | Some("String" | "StringList" | "SecureString") => {}
        Some(other) => return bad(format!("secretType {other:?} is not String, StringList or SecureString")),
    }
    match spec.tier.as_ref().and_then(|t| t.type_.as_deref()) {
        None | Some("Standard" | "Advanced" | "Intelligent-Tiering") => {}
        Some(other) => return bad(format!("tier.type {other:?} is not Standard, Advanced or Intelligent-Tiering")),
    }
    if spec.tags.contains_key(MANAGED_BY_KEY) {
        return bad(format!("tags: cannot specify a {MANAGED_BY_KEY:?} tag (the provider sets it)"));
    }
    Ok(spec)
}

/// The name GetParameter reads for a `remoteRef.version`: `name:version` (a version number or
/// a label: letters, digits, `.`, `-`, `_`), the name itself without one.
pub fn with_version(name: &str, version: &str) -> Result<String, ProviderError> {
    if version.is_empty() {
        return Ok(name.to_string());
    }
    let ok = version.len() <= 100 && version.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
    if !ok {
        return Err(ProviderError::InvalidArgument(format!(
            "version {version:?} of parameter {name:?} is not a version number or label (letters, digits, '.', '-', \
             '_')"
        )));
    }
    Ok(format!("{name}:{version}"))
}

/// The whole source Secret as one JSON object (a push without a secret key), as upstream writes
/// it: values Base64, or as text with `encodeAsDecoded`.
pub fn whole_secret(secret_data: &SecretMap, encode_as_decoded: bool) -> Result<Vec<u8>, ProviderError> {
    let mut out = BTreeMap::new();
    for (k, v) in secret_data {
        let text = if encode_as_decoded {
            String::from_utf8(v.clone()).map_err(|_| {
                ProviderError::InvalidArgument(format!(
                    "key {k:?} of the source Secret is not UTF-8, so encodeAsDecoded cannot write it as text"
                ))
            })?
        } else {
            base64::engine::general_purpose::STANDARD.encode(v)
        };
        out.insert(k.clone(), text);
    }
    serde_json::to_vec(&out).map_err(|e| ProviderError::Internal(e.to_string()))
}

/// Where a find lists parameters: GetParametersByPath takes a hierarchy (`/…`); a name prefix
/// without a leading `/` is listed from the root and filtered here.
pub fn find_root(path: &str) -> &str {
    if path.starts_with('/') { path } else { "/" }
}

fn utf8(value: Vec<u8>, name: &str) -> Result<String, ProviderError> {
    String::from_utf8(value).map_err(|_| {
        ProviderError::InvalidArgument(format!("the value pushed to parameter {name:?} is not UTF-8 text"))
    })
}

fn tag(k: &str, v: &str) -> Result<Tag, ProviderError> {
    Tag::builder().key(k).value(v).build().map_err(|e| ProviderError::Internal(format!("tag {k:?}: {e}")))
}

/// A parameter as GetParameter returns it.
struct Parameter {
    value: String,
    kind: Option<ParameterType>,
}

/// What a find keeps: names without the prefix and values, within one answer.
struct Found<'a> {
    target: &'a Target,
    find: &'a ExternalSecretFind,
    regex: Option<regex::Regex>,
    answer: FindAnswer,
}

impl Found<'_> {
    fn keep(&mut self, full: &str, value: &str) -> Result<(), ProviderError> {
        let Some(name) = full.strip_prefix(&self.target.prefix) else {
            return Ok(());
        };
        let no_tags = BTreeMap::new();
        // Tags were filtered by the store.
        if !find_matches(name, &no_tags, self.regex.as_ref(), &self.find.path, &HashMap::new()) {
            return Ok(());
        }
        self.answer.keep(name.to_string(), value.as_bytes().to_vec())
    }
}

impl SecretsManagerProvider {
    /// A parameter's current value, decrypted; `None` when there is none.
    async fn parameter(&self, target: &Target, name: &str) -> Result<Option<Parameter>, ProviderError> {
        match target.ssm.get_parameter().name(name).with_decryption(true).send().await {
            Ok(out) => Ok(out
                .parameter()
                .map(|p| Parameter { value: p.value().unwrap_or_default().to_string(), kind: p.r#type().cloned() })),
            Err(e) => match map_sdk_error(e, &format!("parameter {name:?}")) {
                ProviderError::NoSecret(_) => Ok(None),
                other => Err(self.fail(target, other)),
            },
        }
    }

    async fn parameter_tags(&self, target: &Target, name: &str) -> Result<BTreeMap<String, String>, ProviderError> {
        let out = target
            .ssm
            .list_tags_for_resource()
            .resource_type(ResourceTypeForTagging::Parameter)
            .resource_id(name)
            .send()
            .await
            .map_err(|e| self.fail(target, map_sdk_error(e, &format!("tags of parameter {name:?}"))))?;
        Ok(out.tag_list().iter().map(|t| (t.key().to_string(), t.value().to_string())).collect())
    }

    /// The KMS key of a SecureString parameter.
    async fn parameter_key_id(&self, target: &Target, name: &str) -> Result<Option<String>, ProviderError> {
        let filter = ParameterStringFilter::builder()
            .key("Name")
            .option("Equals")
            .values(name)
            .build()
            .map_err(|e| ProviderError::Internal(e.to_string()))?;
        let out = target
            .ssm
            .describe_parameters()
            .parameter_filters(filter)
            .send()
            .await
            .map_err(|e| self.fail(target, map_sdk_error(e, &format!("describing parameter {name:?}"))))?;
        Ok(out.parameters().iter().find_map(|p| p.key_id()).map(str::to_string))
    }

    async fn put_parameter(
        &self,
        target: &Target,
        name: &str,
        value: &str,
        meta: &ParameterPushMetadata,
        kind: ParameterType,
        created: bool,
    ) -> Result<(), ProviderError> {
        let mut req = target
            .ssm
            .put_parameter()
            .name(name)
            .value(value)
            .r#type(kind.clone())
            .description(meta.description.as_deref().unwrap_or(DEFAULT_DESCRIPTION))
            .overwrite(!created);
        if let Some(k) = meta.kms_key_id.as_ref().filter(|_| kind == ParameterType::SecureString) {
            req = req.key_id(k);
        }
        if let Some(t) = meta.tier() {
            req = req.tier(t);
        }
        if let Some(p) = meta.policies() {
            req = req.policies(p);
        }
        if created {
            // Tags go with the creation (AWS refuses them together with overwrite).
            for (k, v) in meta.all_tags() {
                req = req.tags(tag(&k, &v)?);
            }
        }
        req.send().await.map_err(|e| self.fail(target, map_sdk_error(e, &format!("writing parameter {name:?}"))))?;
        Ok(())
    }

    /// GetSecret from Parameter Store.
    pub(crate) async fn ps_get_secret(
        &self,
        ctx: &RequestContext,
        target: &Target,
        remote_ref: &ExternalSecretDataRemoteRef,
    ) -> Result<Vec<u8>, ProviderError> {
        let name = target.name(&remote_ref.key)?;
        if remote_ref.metadata_policy.eq_ignore_ascii_case("Fetch") {
            if self.parameter(target, &name).await?.is_none() {
                return Err(ProviderError::NoSecret(format!("parameter {name:?} not found")));
            }
            let tags = self.parameter_tags(target, &name).await?;
            return match remote_ref.property.as_str() {
                "" => serde_json::to_vec(&tags).map_err(|e| ProviderError::Internal(e.to_string())),
                p => tags
                    .get(p)
                    .map(|v| v.clone().into_bytes())
                    .ok_or_else(|| ProviderError::NoSecret(format!("parameter {name:?} has no tag {p:?}"))),
            };
        }
        let raw = self.shared_ps_value(ctx, target, &name, &remote_ref.version).await?;
        if remote_ref.property.is_empty() { Ok(raw) } else { value_property(&raw, &name, &remote_ref.property) }
    }

    /// [`Self::ps_value`] for GetSecret and GetSecretMap, shared by the requests that read the
    /// same parameter within the age they accept, and batched with reads of other parameters
    /// (`batch.rs`).
    async fn shared_ps_value(
        &self,
        ctx: &RequestContext,
        target: &Target,
        name: &str,
        version: &str,
    ) -> Result<Vec<u8>, ProviderError> {
        let object = target.key.object();
        self.reads.read("GetParameter", ctx, &object, name, version, self.batched_ps_value(target, name, version)).await
    }

    /// The value of `name` at `version`, decrypted.
    pub(crate) async fn ps_value(&self, target: &Target, name: &str, version: &str) -> Result<Vec<u8>, ProviderError> {
        let selector = with_version(name, version)?;
        let out = target
            .ssm
            .get_parameter()
            .name(&selector)
            .with_decryption(true)
            .send()
            .await
            .map_err(|e| self.fail(target, map_sdk_error(e, &format!("parameter {selector:?}"))))?;
        out.parameter()
            .and_then(|p| p.value())
            .map(|v| v.as_bytes().to_vec())
            .ok_or_else(|| ProviderError::NoSecret(format!("parameter {selector:?} has no value")))
    }

    /// GetSecretMap from Parameter Store.
    pub(crate) async fn ps_get_secret_map(
        &self,
        ctx: &RequestContext,
        target: &Target,
        remote_ref: &ExternalSecretDataRemoteRef,
    ) -> Result<SecretMap, ProviderError> {
        let name = target.name(&remote_ref.key)?;
        let raw = self.shared_ps_value(ctx, target, &name, &remote_ref.version).await?;
        value_map(&raw, &name, &remote_ref.property)
    }

    /// GetAllSecrets from Parameter Store: without tags, GetParametersByPath (recursive,
    /// decrypted) under the prefix and `find.path`; with tags, DescribeParameters filtered by
    /// them (and the path), then the values. `find.name.regexp` and the path are checked here
    /// on the names without the prefix.
    pub(crate) async fn ps_get_all_secrets(
        &self,
        target: &Target,
        find: &ExternalSecretFind,
    ) -> Result<SecretMap, ProviderError> {
        let regex = find_regex(find)?;
        let path = target.name(&find.path)?;
        let answer = FindAnswer::new("the parameters this find matches".into(), NARROW_FIND);
        let mut found = Found { target, find, regex, answer };
        let mut walked = 0usize;
        if find.tags.is_empty() {
            let root = find_root(&path);
            let mut pages = target
                .ssm
                .get_parameters_by_path()
                .path(root)
                .recursive(true)
                .with_decryption(true)
                .into_paginator()
                .send();
            while let Some(page) = pages.next().await {
                let page = page
                    .map_err(|e| self.fail(target, map_sdk_error(e, &format!("listing parameters under {root:?}"))))?;
                for p in page.parameters() {
                    if let (Some(full), Some(value)) = (p.name(), p.value()) {
                        found.keep(full, value)?;
                    }
                }
                walked += page.parameters().len();
                if walked >= FIND_LIMIT {
                    tracing::warn!(limit = FIND_LIMIT, "find stopped at the limit");
                    break;
                }
            }
            return Ok(found.answer.into_secrets());
        }

        let mut filters = Vec::new();
        let mut tags: Vec<_> = find.tags.iter().collect();
        tags.sort();
        for (k, v) in tags {
            filters.push(
                ParameterStringFilter::builder()
                    .key(format!("tag:{k}"))
                    .option("Equals")
                    .values(v)
                    .build()
                    .map_err(|e| ProviderError::Internal(e.to_string()))?,
            );
        }
        // The hierarchy, as GetParametersByPath lists it without tags.
        let hierarchy = path.trim_end_matches('/');
        if path.starts_with('/') && !hierarchy.is_empty() {
            filters.push(
                ParameterStringFilter::builder()
                    .key("Path")
                    .option("Recursive")
                    .values(hierarchy)
                    .build()
                    .map_err(|e| ProviderError::Internal(e.to_string()))?,
            );
        }
        let mut pages = target.ssm.describe_parameters().set_parameter_filters(Some(filters)).into_paginator().send();
        let mut names = Vec::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| self.fail(target, map_sdk_error(e, "describing parameters")))?;
            names.extend(page.parameters().iter().filter_map(|p| p.name()).map(str::to_string));
            walked += page.parameters().len();
            if walked >= FIND_LIMIT {
                tracing::warn!(limit = FIND_LIMIT, "find stopped at the limit");
                break;
            }
        }
        names.retain(|full| {
            full.strip_prefix(&target.prefix)
                .is_some_and(|n| find_matches(n, &BTreeMap::new(), found.regex.as_ref(), &find.path, &HashMap::new()))
        });
        for batch in names.chunks(GET_PARAMETERS_BATCH) {
            let out = target
                .ssm
                .get_parameters()
                .set_names(Some(batch.to_vec()))
                .with_decryption(true)
                .send()
                .await
                .map_err(|e| self.fail(target, map_sdk_error(e, "reading parameters")))?;
            // A parameter deleted between the listing and the read is skipped.
            for p in out.parameters() {
                if let (Some(full), Some(value)) = (p.name(), p.value()) {
                    found.keep(full, value)?;
                }
            }
        }
        Ok(found.answer.into_secrets())
    }

    /// PushSecret to Parameter Store.
    pub(crate) async fn ps_push_secret(
        &self,
        target: &Target,
        secret_data: &SecretMap,
        data: &PushSecretData,
    ) -> Result<(), ProviderError> {
        let meta = parse_parameter_metadata(&data.metadata)?;
        let name = target.name(&data.remote_key)?;
        let existing = self.parameter(target, &name).await?;
        let tags = match &existing {
            Some(_) => Some(self.parameter_tags(target, &name).await?),
            None => None,
        };
        if tags.as_ref().is_some_and(|t| t.get(MANAGED_BY_KEY).map(String::as_str) != Some(MANAGED_BY_VALUE)) {
            return Err(ProviderError::PermissionDenied(format!(
                "parameter {name:?} exists but is not tagged {MANAGED_BY_KEY}={MANAGED_BY_VALUE}, so a push does not \
                 overwrite it"
            )));
        }
        let value = if data.secret_key.is_empty() {
            whole_secret(secret_data, meta.encode_as_decoded)?
        } else {
            push_value(existing.as_ref().map(|p| p.value.as_bytes()), secret_data, data, &name)?
        };
        let value = utf8(value, &name)?;
        let kind = meta.parameter_type();
        let (Some(current), Some(tags)) = (existing, tags) else {
            self.put_parameter(target, &name, &value, &meta, kind, true).await?;
            tracing::info!(remote_key = %name, created = true, "pushed parameter");
            return Ok(());
        };
        if current.value != value || current.kind.as_ref() != Some(&kind) {
            self.put_parameter(target, &name, &value, &meta, kind, false).await?;
        }
        // The tags become the metadata's (and managed-by), as upstream keeps them.
        let want = meta.all_tags();
        let stale: Vec<String> = tags.keys().filter(|k| !want.contains_key(*k)).cloned().collect();
        if !stale.is_empty() {
            target
                .ssm
                .remove_tags_from_resource()
                .resource_type(ResourceTypeForTagging::Parameter)
                .resource_id(&name)
                .set_tag_keys(Some(stale))
                .send()
                .await
                .map_err(|e| self.fail(target, map_sdk_error(e, &format!("untagging parameter {name:?}"))))?;
        }
        let changed: Vec<Tag> =
            want.iter().filter(|(k, v)| tags.get(*k) != Some(*v)).map(|(k, v)| tag(k, v)).collect::<Result<_, _>>()?;
        if !changed.is_empty() {
            target
                .ssm
                .add_tags_to_resource()
                .resource_type(ResourceTypeForTagging::Parameter)
                .resource_id(&name)
                .set_tags(Some(changed))
                .send()
                .await
                .map_err(|e| self.fail(target, map_sdk_error(e, &format!("tagging parameter {name:?}"))))?;
        }
        tracing::info!(remote_key = %name, created = false, "pushed parameter");
        Ok(())
    }

    /// DeleteSecret from Parameter Store: only parameters tagged managed-by; a property is
    /// taken out of the JSON value (the parameter goes with the last one).
    pub(crate) async fn ps_delete_secret(
        &self,
        target: &Target,
        remote_ref: &PushSecretRemoteRef,
    ) -> Result<(), ProviderError> {
        let name = target.name(&remote_ref.remote_key)?;
        let Some(current) = self.parameter(target, &name).await? else {
            return Ok(());
        };
        let tags = self.parameter_tags(target, &name).await?;
        if tags.get(MANAGED_BY_KEY).map(String::as_str) != Some(MANAGED_BY_VALUE) {
            tracing::info!(remote_key = %name, "not deleting a parameter that is not tagged {MANAGED_BY_KEY}={MANAGED_BY_VALUE}");
            return Ok(());
        }
        let rest = match remote_ref.property.as_str() {
            "" => None,
            prop => without_property(current.value.as_bytes(), &name, prop)?,
        };
        // What is left after taking the property out; the parameter goes with the last one.
        if let Some(rest) = rest {
            if rest != current.value.as_bytes() {
                let rest = utf8(rest, &name)?;
                let kind = current.kind.unwrap_or(ParameterType::String);
                // A SecureString keeps its KMS key (AWS's default key would replace it).
                let key_id = match kind {
                    ParameterType::SecureString => self.parameter_key_id(target, &name).await?,
                    _ => None,
                };
                let req =
                    target.ssm.put_parameter().name(&name).value(rest).r#type(kind).set_key_id(key_id).overwrite(true);
                req.send()
                    .await
                    .map_err(|e| self.fail(target, map_sdk_error(e, &format!("writing parameter {name:?}"))))?;
            }
            return Ok(());
        }
        match target.ssm.delete_parameter().name(&name).send().await {
            Ok(_) => Ok(()),
            Err(e) => match map_sdk_error(e, &format!("deleting parameter {name:?}")) {
                ProviderError::NoSecret(_) => Ok(()),
                other => Err(self.fail(target, other)),
            },
        }
    }

    /// SecretExists in Parameter Store.
    pub(crate) async fn ps_secret_exists(
        &self,
        target: &Target,
        remote_ref: &PushSecretRemoteRef,
    ) -> Result<bool, ProviderError> {
        let name = target.name(&remote_ref.remote_key)?;
        let Some(current) = self.parameter(target, &name).await? else {
            return Ok(false);
        };
        if remote_ref.property.is_empty() {
            return Ok(true);
        }
        Ok(has_property(current.value.as_bytes(), &remote_ref.property))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_select_name_colon_version() {
        assert_eq!(with_version("/app/db", "").unwrap(), "/app/db");
        assert_eq!(with_version("/app/db", "3").unwrap(), "/app/db:3");
        assert_eq!(with_version("/app/db", "prod-label_1.x").unwrap(), "/app/db:prod-label_1.x");
        for bad in ["1/2", "a:b", "x y", "../1", "%2e"] {
            let e = with_version("/app/db", bad).expect_err(bad);
            assert_eq!(e.code(), tonic::Code::InvalidArgument, "{bad}");
        }
    }

    #[test]
    fn push_metadata_as_upstream() {
        let none = parse_parameter_metadata(b"").unwrap();
        assert_eq!(none.parameter_type(), ParameterType::String, "String unless the metadata says otherwise");
        assert_eq!(none.tier(), None);
        assert_eq!(none.all_tags(), BTreeMap::from([(MANAGED_BY_KEY.into(), MANAGED_BY_VALUE.into())]));
        let m = parse_parameter_metadata(
            br#"{"apiVersion":"kubernetes.external-secrets.io/v1alpha1","kind":"PushSecretMetadata",
                "spec":{"secretType":"SecureString","kmsKeyID":"alias/k","encodeAsDecoded":true,
                        "tier":{"type":"Advanced","policies":[{"Type":"Expiration"}]},
                        "tags":{"team":"a"},"description":"d"}}"#,
        )
        .unwrap();
        assert_eq!(m.parameter_type(), ParameterType::SecureString);
        assert_eq!(m.kms_key_id.as_deref(), Some("alias/k"));
        assert_eq!(m.tier(), Some(ParameterTier::Advanced));
        assert_eq!(m.policies().as_deref(), Some(r#"[{"Type":"Expiration"}]"#));
        assert!(m.encode_as_decoded);
        assert_eq!(m.all_tags().len(), 2);
        assert!(parse_parameter_metadata(br#"{"spec":{"secretType":"Binary"}}"#).is_err());
        assert!(parse_parameter_metadata(br#"{"spec":{"tier":{"type":"Gold"}}}"#).is_err());
        let e = parse_parameter_metadata(br#"{"spec":{"tags":{"managed-by":"me"}}}"#).unwrap_err();
        assert!(e.to_string().contains("managed-by"), "{e}");
        assert!(parse_parameter_metadata(br#"{"kind":"Other"}"#).is_err());
    }

    #[test]
    fn whole_secrets_are_base64_unless_decoded() {
        let data: SecretMap = [("a".to_string(), b"x".to_vec()), ("b".to_string(), b"yz".to_vec())].into();
        assert_eq!(whole_secret(&data, false).unwrap(), br#"{"a":"eA==","b":"eXo="}"#);
        assert_eq!(whole_secret(&data, true).unwrap(), br#"{"a":"x","b":"yz"}"#);
        let binary: SecretMap = [("k".to_string(), vec![0xff])].into();
        assert!(whole_secret(&binary, true).is_err());
        assert_eq!(whole_secret(&binary, false).unwrap(), br#"{"k":"/w=="}"#);
    }

    #[test]
    fn finds_list_hierarchies() {
        assert_eq!(find_root("/team/app"), "/team/app");
        assert_eq!(find_root(""), "/");
        assert_eq!(find_root("team-a-"), "/", "a name prefix is filtered from the root");
    }
}
