//! `external-secrets.io/v1` ExternalSecret: which remote values become which Secret.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{Condition, LocalObjectReference, SecretStoreRef};

/// Default refresh interval, as upstream.
pub const DEFAULT_REFRESH_INTERVAL: &str = "1h";
/// Annotation whose change forces an immediate refresh (Periodic and OnChange; CreatedOnce,
/// as upstream, syncs once per ExternalSecret whatever changes).
pub const FORCE_SYNC_ANNOTATION: &str = "force-sync";

fn default_refresh_interval() -> String {
    DEFAULT_REFRESH_INTERVAL.to_string()
}

/// ExternalSecret describes which values to fetch from a store and the Secret to write them to.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "external-secrets.io",
    version = "v1",
    kind = "ExternalSecret",
    doc = "ExternalSecret fetches values from a Provider or ClusterProvider and writes them to a Kubernetes Secret.",
    plural = "externalsecrets",
    shortname = "es",
    category = "external-secrets",
    namespaced,
    status = "ExternalSecretStatus",
    printcolumn = r#"{"name":"StoreType","type":"string","jsonPath":".spec.secretStoreRef.kind"}"#,
    printcolumn = r#"{"name":"Store","type":"string","jsonPath":".spec.secretStoreRef.name"}"#,
    printcolumn = r#"{"name":"Refresh Interval","type":"string","jsonPath":".spec.refreshInterval"}"#,
    printcolumn = r#"{"name":"Status","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].reason"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Last Sync","type":"date","jsonPath":".status.refreshTime"}"#,
    // `kubectl get es --field-selector spec.secretStoreRef.name=x`, as upstream.
    selectable = ".spec.secretStoreRef.name",
    selectable = ".spec.secretStoreRef.kind",
    selectable = ".spec.target.name",
    selectable = ".spec.refreshInterval"
)]
#[serde(rename_all = "camelCase")]
pub struct ExternalSecretSpec {
    /// The store used for every entry that does not name its own `sourceRef.storeRef`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_store_ref: Option<SecretStoreRef>,
    /// The Secret to create or update.
    #[serde(default)]
    pub target: ExternalSecretTarget,
    /// How often to fetch the values again, as a Go duration (`1h`, `15m`, `30s`); `0` disables
    /// periodic refresh.
    #[serde(default = "default_refresh_interval")]
    pub refresh_interval: String,
    /// When to refresh: `Periodic` (every refreshInterval), `OnChange` (when the spec changes) or
    /// `CreatedOnce` (once per ExternalSecret, and again only when its target Secret is gone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_policy: Option<RefreshPolicy>,
    /// Times when periodic refreshes may (`allow`) or may not (`deny`) run, in UTC. Spec changes,
    /// `force-sync` and a missing target are synced whatever the windows say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync_windows: Option<SyncWindows>,
    /// Values fetched one by one, each written under its own `secretKey`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub data: Vec<ExternalSecretData>,
    /// Values fetched as maps (extract, find) and merged into the Secret.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub data_from: Vec<ExternalSecretDataFrom>,
}

/// When an ExternalSecret is refreshed.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum RefreshPolicy {
    /// Refresh every `refreshInterval`.
    Periodic,
    /// Refresh only when the ExternalSecret's spec or force-sync annotation changes.
    OnChange,
    /// Sync once per ExternalSecret; later only to re-create a deleted target Secret. Spec,
    /// annotation and remote changes are not followed.
    CreatedOnce,
}

/// The Secret an ExternalSecret writes.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExternalSecretTarget {
    /// Name of the Secret; defaults to the ExternalSecret's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Who owns the Secret: `Owner` (created and owned), `Orphan` (created, not owned), `Merge`
    /// (merged into an existing Secret) or `None` (no Secret is written).
    #[serde(default)]
    pub creation_policy: CreationPolicy,
    /// What happens to the Secret when the remote values are gone: `Retain`, `Delete` or `Merge`.
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,
    /// Template that renders the Secret from the fetched values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<ExternalSecretTemplate>,
    /// Make the Secret immutable once written.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub immutable: bool,
    /// Upstream's non-Secret target (a ConfigMap or any namespaced kind). Accepted so existing
    /// manifests apply; Keyward writes Secrets only, so such an ExternalSecret reports
    /// `Ready=False` and writes nothing (upstream's default, where generic targets are off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest: Option<ManifestReference>,
}

/// `spec.target.manifest`: the kind of a non-Secret target.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManifestReference {
    /// API version of the target kind, e.g. `v1`.
    #[schemars(length(min = 1))]
    pub api_version: String,
    /// The target kind, e.g. `ConfigMap`.
    #[schemars(length(min = 1))]
    pub kind: String,
}

impl ManifestReference {
    /// Whether this names a Secret after all (upstream treats `v1` `Secret` as the default target).
    pub fn is_secret(&self) -> bool {
        self.api_version == "v1" && self.kind == "Secret"
    }
}

/// `spec.syncWindows`: when periodic refreshes run.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SyncWindows {
    /// `allow`: periodic refreshes run only inside a window; `deny`: never inside one.
    pub kind: SyncWindowKind,
    /// The windows (one to sixteen).
    #[schemars(length(min = 1, max = 16))]
    pub windows: Vec<SyncWindow>,
}

/// Whether sync windows allow or deny periodic refreshes.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SyncWindowKind {
    /// Refresh only inside a window.
    Allow,
    /// Refresh only outside every window.
    Deny,
}

/// One window: open for `duration` from each time `schedule` fires.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SyncWindow {
    /// A five-field cron schedule (minute hour day-of-month month day-of-week, UTC), a
    /// descriptor (`@daily`, `@hourly`, `@weekly`, `@monthly`, `@yearly`, `@annually`,
    /// `@midnight`) or `@every <duration>`.
    #[schemars(length(min = 1))]
    pub schedule: String,
    /// How long the window stays open after each firing, as a Go duration (`8h`, `30m`).
    pub duration: String,
}

/// Who owns the target Secret.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum CreationPolicy {
    /// Create the Secret and own it (it is garbage collected with the ExternalSecret).
    #[default]
    Owner,
    /// Create the Secret without an owner reference.
    Orphan,
    /// Merge the values into a Secret that already exists; never create it.
    Merge,
    /// Do not write any Secret.
    None,
    /// Create the Secret when it is missing (again after a deletion), else merge the values into
    /// it; no owner reference, so it stays when the ExternalSecret is deleted. Keys others wrote
    /// stay (the Secret is written with server-side apply, as for `Orphan`).
    CreateOrMerge,
}

impl CreationPolicy {
    /// Whether the ExternalSecret creates its Secret and so labels it as Keyward-managed. Only
    /// those Secrets count for rollouts on rotation: a merged-into Secret belongs to someone else.
    pub fn manages_target(self) -> bool {
        matches!(self, CreationPolicy::Owner | CreationPolicy::Orphan | CreationPolicy::CreateOrMerge)
    }
}

/// What happens to the target Secret when the provider has no values any more.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum DeletionPolicy {
    /// Keep the Secret and its last values.
    #[default]
    Retain,
    /// Delete the Secret.
    Delete,
    /// Remove only the keys this ExternalSecret wrote.
    Merge,
}

/// Template for the target Secret (Go text/template syntax, engine v2).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExternalSecretTemplate {
    /// Type of the Secret, for example `kubernetes.io/dockerconfigjson`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    /// Template engine version; only `v2` is supported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_version: Option<TemplateEngineVersion>,
    /// Labels and annotations of the Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<TemplateMetadata>,
    /// `Replace` the fetched data with the rendered data, or `Merge` both.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge_policy: Option<TemplateMergePolicy>,
    /// Keys of the Secret and the template that renders each one.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub data: BTreeMap<String, String>,
    /// Templates loaded from ConfigMaps, Secrets or literals.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub template_from: Vec<TemplateFrom>,
}

/// Template engine version.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum TemplateEngineVersion {
    /// Go text/template with Sprig functions.
    #[serde(rename = "v2")]
    V2,
}

/// How rendered template data combines with the fetched data.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum TemplateMergePolicy {
    /// Only the rendered keys end up in the Secret.
    Replace,
    /// Rendered keys are added to the fetched keys.
    Merge,
}

/// Labels and annotations of the templated Secret.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateMetadata {
    /// Annotations of the Secret.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Labels of the Secret.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Finalizers of the Secret, as written (not templated). They are applied with the Secret,
    /// so removing one here removes it from the Secret; removing them from a Secret being
    /// deleted is whoever added them for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub finalizers: Vec<String>,
}

/// A template source.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateFrom {
    /// Templates from keys of a ConfigMap in the same namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<TemplateRef>,
    /// Templates from keys of a Secret in the same namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<TemplateRef>,
    /// Where the rendered output goes: `Data` (default), `Annotations` or `Labels` (any case).
    /// Upstream also takes a path into a `spec.target.manifest` object here; Keyward keeps such
    /// a path as written and serves Secret targets only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// An inline template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub literal: Option<String>,
    /// How this entry's rendered values are decoded before they are written (keys never are);
    /// unset means `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values_decoding_strategy: Option<DecodingStrategy>,
}

impl TemplateFrom {
    /// The part of the Secret this entry renders into (`Data` when unset); `None` for a path
    /// that names no part of a Secret.
    pub fn secret_target(&self) -> Option<TemplateTarget> {
        match self.target.as_deref() {
            None | Some("") => Some(TemplateTarget::Data),
            Some(t) if t.eq_ignore_ascii_case("Data") => Some(TemplateTarget::Data),
            Some(t) if t.eq_ignore_ascii_case("Annotations") => Some(TemplateTarget::Annotations),
            Some(t) if t.eq_ignore_ascii_case("Labels") => Some(TemplateTarget::Labels),
            Some(_) => None,
        }
    }
}

/// Part of the Secret a template renders into.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum TemplateTarget {
    /// The Secret's data.
    Data,
    /// The Secret's annotations.
    Annotations,
    /// The Secret's labels.
    Labels,
}

/// Keys of a ConfigMap or Secret that hold templates.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateRef {
    /// Name of the ConfigMap or Secret.
    pub name: String,
    /// Keys to use as templates.
    #[serde(default)]
    pub items: Vec<TemplateRefItem>,
}

/// One key holding a template.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateRefItem {
    /// Key of the ConfigMap or Secret.
    pub key: String,
    /// `Values`: render the value under the same key; `KeysAndValues`: render a YAML map whose
    /// keys and values both become Secret entries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_as: Option<TemplateScope>,
}

/// How a template item is applied.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum TemplateScope {
    /// Render the value only.
    Values,
    /// Render keys and values.
    KeysAndValues,
}

/// One Secret key filled from one remote value.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExternalSecretData {
    /// Key in the target Secret.
    pub secret_key: String,
    /// The remote value to fetch.
    pub remote_ref: ExternalSecretDataRemoteRef,
    /// A store for this entry only, instead of `spec.secretStoreRef`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_ref: Option<StoreSourceRef>,
}

/// Where a remote value lives in the store.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExternalSecretDataRemoteRef {
    /// Key of the value in the store (for the Kubernetes provider: the remote Secret's name).
    pub key: String,
    /// Fetch the value's metadata (`Fetch`) instead of its data (`None`, default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata_policy: Option<MetadataPolicy>,
    /// A property inside the value (for the Kubernetes provider: a key of the remote Secret).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub property: Option<String>,
    /// Version of the value, where the store keeps versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// How keys are converted: `Default` keeps them, `Unicode` escapes invalid characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversion_strategy: Option<ConversionStrategy>,
    /// How values are decoded: `None` (default), `Base64`, `Base64URL` or `Auto`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decoding_strategy: Option<DecodingStrategy>,
    /// `Fail` fails the sync when a fetched value (after decoding) contains a NUL byte;
    /// `Ignore` (default) writes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub null_byte_policy: Option<NullBytePolicy>,
}

/// Whether to fetch the data or the metadata of a remote value.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum MetadataPolicy {
    /// Fetch the data.
    None,
    /// Fetch the metadata (labels and annotations).
    Fetch,
}

/// How Secret keys are converted.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum ConversionStrategy {
    /// Keep keys as they are.
    Default,
    /// Replace characters that are invalid in Secret keys by their Unicode escape.
    Unicode,
}

/// How fetched values are decoded before they are written.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum DecodingStrategy {
    /// Decode standard Base64, or URL-safe Base64, and keep the raw value if neither works.
    Auto,
    /// Decode standard Base64.
    Base64,
    /// Decode URL-safe Base64.
    #[serde(rename = "Base64URL")]
    Base64Url,
    /// Keep the value as it is.
    None,
}

/// What a fetched value containing NUL bytes does.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum NullBytePolicy {
    /// Write it (binary data is intended).
    Ignore,
    /// Fail the sync, naming the key.
    Fail,
}

/// A per-entry store reference.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StoreSourceRef {
    /// The Provider or ClusterProvider for this entry.
    pub store_ref: SecretStoreRef,
}

/// Values fetched as a map and merged into the Secret.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExternalSecretDataFrom {
    /// Fetch one remote value and use its properties as Secret keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extract: Option<ExternalSecretDataRemoteRef>,
    /// Fetch every remote value matching a name regex or tags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub find: Option<ExternalSecretFind>,
    /// Rewrite the keys of the fetched map, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rewrite: Vec<ExternalSecretRewrite>,
    /// A store for this entry only (with extract or find), or a generator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_ref: Option<StoreGeneratorSourceRef>,
}

/// Criteria to find remote values.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExternalSecretFind {
    /// A root path to start from, where the store has paths.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Match remote names against a regular expression.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<FindName>,
    /// Match remote values carrying all these tags (for the Kubernetes provider: labels).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    /// How keys are converted: `Default` or `Unicode`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversion_strategy: Option<ConversionStrategy>,
    /// How values are decoded: `None` (default), `Base64`, `Base64URL` or `Auto`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decoding_strategy: Option<DecodingStrategy>,
    /// `Fail` fails the sync when a fetched value (after decoding) contains a NUL byte;
    /// `Ignore` (default) writes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub null_byte_policy: Option<NullBytePolicy>,
}

/// Name criteria of a find.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FindName {
    /// Regular expression (RE2 syntax, unanchored) that remote names must match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regexp: Option<String>,
}

/// One rewrite of the keys of a fetched map (one of merge, regexp, transform).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExternalSecretRewrite {
    /// Read every value as a JSON object and merge their members, into the top level
    /// (`Extract`) or into one key (`JSON`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge: Option<RewriteMerge>,
    /// Replace matches of `source` by `target` in every key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regexp: Option<RewriteRegexp>,
    /// Rewrite every key with a template that sees the key as `.value`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transform: Option<RewriteTransform>,
}

/// A merge rewrite. Values are merged in key order (alphabetical), then the `priority` keys in
/// the order listed, so a later key wins a conflicting member.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RewriteMerge {
    /// The key that receives the merged object; required with strategy `JSON`, ignored with
    /// `Extract`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub into: Option<String>,
    /// Keys merged last, in this order (the last one wins a conflict).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub priority: Vec<String>,
    /// A `priority` key missing from the map: `Strict` (default) fails, `IgnoreNotFound` skips it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_policy: Option<MergePriorityPolicy>,
    /// A member present in several values: `Error` (default) fails, `Ignore` lets the later win.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conflict_policy: Option<MergeConflictPolicy>,
    /// `Extract` (default): the merged members replace the map; `JSON`: the map is kept and the
    /// merged object is written, as JSON, under `into`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<MergeStrategy>,
}

/// What a missing `priority` key does.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum MergePriorityPolicy {
    /// Skip it.
    IgnoreNotFound,
    /// Fail the sync.
    Strict,
}

/// What a member found in several merged values does.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum MergeConflictPolicy {
    /// The later value wins.
    Ignore,
    /// Fail the sync, naming the members.
    Error,
}

/// Where merged members go.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum MergeStrategy {
    /// Each member becomes a key of the map, replacing the map.
    Extract,
    /// The merged object is written as JSON under `into`; the other keys stay.
    #[serde(rename = "JSON")]
    Json,
}

/// A regular-expression rewrite.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RewriteRegexp {
    /// Regular expression to search for in each key.
    pub source: String,
    /// Replacement; `$1`, `${name}` refer to capture groups.
    pub target: String,
}

/// A template rewrite.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RewriteTransform {
    /// Template applied to each key.
    pub template: String,
}

/// Per-entry source of a dataFrom entry: a store (with extract or find) or a generator.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StoreGeneratorSourceRef {
    /// The Provider or ClusterProvider for this entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_ref: Option<SecretStoreRef>,
    /// A generator producing the values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generator_ref: Option<GeneratorRef>,
}

/// Reference to a generator object.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GeneratorRef {
    /// API version of the generator, for example `generators.external-secrets.io/v1alpha1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Kind of the generator.
    pub kind: String,
    /// Name of the generator.
    pub name: String,
}

/// Observed state of an ExternalSecret.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExternalSecretStatus {
    /// When the values were last fetched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_time: Option<Time>,
    /// A hash of the spec and annotations the last sync was made for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub synced_resource_version: Option<String>,
    /// Conditions; `Ready` has the reasons `SecretSynced`, `SecretSyncedError`, `SecretDeleted`
    /// and `SecretMissing`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The Secret this ExternalSecret writes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binding: Option<LocalObjectReference>,
    /// The data hash the last sync wrote to the target Secret (its
    /// `reconcile.external-secrets.io/data-hash` annotation). Workloads that reload on rotation
    /// are stamped with it at admission, without anyone reading the Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub synced_data_hash: Option<String>,
}

/// Reasons of the ExternalSecret `Ready` condition.
pub mod reason {
    /// The Secret holds the current values.
    pub const SECRET_SYNCED: &str = "SecretSynced";
    /// Fetching or writing failed; the Secret keeps its last good values.
    pub const SECRET_SYNCED_ERROR: &str = "SecretSyncedError";
    /// The Secret was deleted following the deletion policy.
    pub const SECRET_DELETED: &str = "SecretDeleted";
    /// The Secret does not exist (creation policy `None` or `Merge` without a Secret).
    pub const SECRET_MISSING: &str = "SecretMissing";
}

impl ExternalSecret {
    /// The data hash of its Secret when that Secret counts for rollouts on rotation: only a
    /// Secret this ExternalSecret creates (see [`CreationPolicy::manages_target`]).
    pub fn rollout_data_hash(&self) -> Option<&str> {
        if !self.spec.target.creation_policy.manages_target() {
            return None;
        }
        self.status.as_ref()?.synced_data_hash.as_deref()
    }

    /// Name of the target Secret: `spec.target.name`, else the ExternalSecret's own name.
    pub fn target_secret_name(&self) -> String {
        self.spec
            .target
            .name
            .clone()
            .filter(|n| !n.is_empty())
            .or_else(|| self.metadata.name.clone())
            .unwrap_or_default()
    }

    /// Every store reference this ExternalSecret uses, with the JSON path it is written at.
    pub fn store_refs(&self) -> Vec<(String, &SecretStoreRef)> {
        self.spec.store_refs()
    }
}

impl ExternalSecretSpec {
    /// Every store reference of this spec, with the JSON path it is written at.
    pub fn store_refs(&self) -> Vec<(String, &SecretStoreRef)> {
        let mut refs = Vec::new();
        if let Some(r) = &self.secret_store_ref {
            refs.push(("spec.secretStoreRef".to_string(), r));
        }
        for (i, d) in self.data.iter().enumerate() {
            if let Some(s) = &d.source_ref {
                refs.push((format!("spec.data[{i}].sourceRef.storeRef"), &s.store_ref));
            }
        }
        for (i, d) in self.data_from.iter().enumerate() {
            if let Some(r) = d.source_ref.as_ref().and_then(|s| s.store_ref.as_ref()) {
                refs.push((format!("spec.dataFrom[{i}].sourceRef.storeRef"), r));
            }
        }
        refs
    }
}
