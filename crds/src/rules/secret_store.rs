//! SecretStore and ClusterSecretStore: which Keyward provider serves a store, the provider
//! configuration its `spec.provider` translates to, and the store's own rules.
//!
//! A store carries its provider configuration inline, where Keyward's providers read a
//! configuration object. [`store_backend`] is the one translation: the reconciler uses it to pick
//! the provider process (and to report a provider Keyward lacks), the provider processes use it to
//! turn the store they read into the configuration they already serve, and the webhook validates
//! that configuration with the provider kind's own rules.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::ProviderIdentityNamespaces;
use super::boundary::{ConfigOwner, Reach, check_boundary_with};
use super::reach::vault_reach;
use super::store_blocks::{open_bao_vault, validate_open_bao};
use super::stores::validate_vault;
use super::validate::check_conditions;
use super::{FieldError, ValidationErrors};
use crate::common::StoreKind;
use crate::registry::{AdmitSink, BlockError, ProviderKind, StoreBlock};
use crate::secret_store::{SecretStoreProvider, SecretStoreSpec};
use crate::vault::VaultSpec;

/// The providers a store may name that this crate translates, as written under `spec.provider`;
/// provider crates add theirs as rows with store blocks ([`ProviderKind::stores`]).
pub const SERVED_STORE_PROVIDERS: [&str; 2] = ["vault", "openBao"];

/// The provider kinds a caller knows beyond this crate's own: the rows of
/// `keyward_provider_registry::PROVIDER_KINDS` (webhook, reconciler), or a provider process's
/// own row. Only rows with store blocks serve stores.
pub type Plugins<'a> = &'a [&'static ProviderKind];

/// Every store key served: this crate's, then the plug-ins'.
fn served(plugins: Plugins<'_>) -> String {
    let keys =
        SERVED_STORE_PROVIDERS.iter().copied().chain(plugins.iter().flat_map(|p| p.stores.iter().map(|b| b.key)));
    keys.collect::<Vec<_>>().join(", ")
}

/// The Keyward provider configuration a store's `spec.provider` translates to.
#[derive(Debug, Clone, PartialEq)]
pub enum StoreBackend {
    /// Served by the Vault provider.
    Vault(Box<VaultSpec>),
    /// `openBao`: served by the Vault provider as the Vault configuration it is a subset of.
    OpenBao(Box<VaultSpec>),
    /// Served by a provider crate's kind: its spec is the store's `spec.provider.<key>` block as
    /// written (or as the row's [`StoreBlock::translate`] reads it), which the provider reads
    /// into its own type.
    Plugin {
        /// The kind's row.
        kind: &'static ProviderKind,
        /// The block's key under `spec.provider`.
        key: &'static str,
        /// The kind's spec.
        spec: serde_json::Value,
    },
}

impl StoreBackend {
    /// The provider process that serves it (the key of the reconciler's address table).
    pub fn provider_name(&self) -> &'static str {
        match self {
            StoreBackend::Vault(_) | StoreBackend::OpenBao(_) => "vault",
            StoreBackend::Plugin { kind, .. } => kind.provider,
        }
    }

    /// The key under `spec.provider` it was read from.
    pub fn store_key(&self) -> &'static str {
        match self {
            StoreBackend::Plugin { key, .. } => key,
            StoreBackend::OpenBao(_) => "openBao",
            other => other.provider_name(),
        }
    }
}

/// Why a store's `spec.provider` has no backend.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreProviderError {
    /// Nothing under `spec.provider`.
    #[error("spec.provider names no provider: set one of {served}")]
    Empty {
        /// The providers served.
        served: String,
    },
    /// More than one provider.
    #[error("spec.provider names {}: set exactly one provider", .0.join(" and "))]
    Several(Vec<String>),
    /// A provider Keyward does not serve for SecretStores.
    #[error(
        "spec.provider.{name} is not served by this controller: SecretStores and ClusterSecretStores are served \
         for the providers {served}; use one of those, or reach this provider through a Provider or ClusterProvider"
    )]
    NotSupported {
        /// What is not served (`gcpsm`, `vault.auth.gcp`).
        name: String,
        /// The providers served.
        served: String,
    },
    /// The blocks Keyward does not type passed the free-form JSON limits: none was kept.
    #[error("spec.provider: {0}")]
    Oversized(crate::free_json::Oversized),
    /// A block in upstream's shape that does not read as that shape (the store CRDs type it, so
    /// only an object the API server did not check gets here).
    #[error("spec.provider.{key}: not a {kind} store block: {message}")]
    Unreadable {
        /// The block's key.
        key: &'static str,
        /// The configuration kind serving it.
        kind: &'static str,
        /// Why it does not read.
        message: String,
    },
    /// A provider Keyward serves whose process this installation does not run.
    #[error(
        "spec.provider.{0} is served by Keyward's {0} provider, which this installation does not run: enable it \
         (chart value providers.{0}.enabled=true; reconciler flag --store-provider {0}=host:port)"
    )]
    NotEnabled(String),
}

impl StoreProviderError {
    /// The condition reason for a store that cannot be served.
    pub fn reason(&self) -> &'static str {
        match self {
            StoreProviderError::NotSupported { .. } | StoreProviderError::NotEnabled(_) => "ProviderNotSupported",
            _ => "InvalidProviderConfig",
        }
    }
}

/// The kind a store reference (`secretStoreRef`, `sourceRef.storeRef`, a PushSecret's
/// `secretStoreRefs[]`) means: an explicit kind is kept, an omitted one is a SecretStore, as
/// upstream. The kind stays omitted in the object (and on the wire, where the omission is
/// carried): this is where the omission is given its meaning.
pub fn store_ref_kind(kind: Option<StoreKind>) -> StoreKind {
    kind.unwrap_or(StoreKind::SecretStore)
}

/// A store's `spec.refreshInterval` as a duration: an integer of seconds or a Go duration
/// string. `None` when unset or 0 (the reconciler's provider check interval applies).
pub fn store_refresh_interval(spec: &SecretStoreSpec) -> Result<Option<Duration>, String> {
    let interval = match &spec.refresh_interval {
        None => return Ok(None),
        Some(IntOrString::Int(i)) if *i < 0 => {
            return Err(format!("{i} is negative: give seconds or a duration such as \"1h\", or 0 for the default"));
        }
        Some(IntOrString::Int(i)) => Duration::from_secs(u64::from(i.unsigned_abs())),
        Some(IntOrString::String(s)) => match s.trim().parse::<i64>() {
            Ok(i) if i < 0 => {
                return Err(format!(
                    "{s:?} is negative: give seconds or a duration such as \"1h\", or 0 for the default"
                ));
            }
            Ok(i) => Duration::from_secs(i.unsigned_abs()),
            Err(_) => super::parse_go_duration(s).map_err(|e| e.to_string())?,
        },
    };
    Ok(Some(interval).filter(|d| !d.is_zero()))
}

/// A store's `spec.retrySettings`: how many times a failed provider call through the store is
/// retried, and the pause between tries. Either part unset keeps the reconciler's default for it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreRetry {
    /// `maxRetries` (negative counts as 0).
    pub max_retries: Option<u32>,
    /// `retryInterval`.
    pub retry_interval: Option<Duration>,
}

/// Most retries a store's `retrySettings.maxRetries` gets.
pub const MAX_STORE_RETRIES: u32 = 5;
/// Longest pause between retries a store's `retrySettings.retryInterval` gets.
pub const MAX_STORE_RETRY_INTERVAL: Duration = Duration::from_secs(5);

/// Reads `spec.retrySettings`; `None` when unset or when it sets nothing usable (an invalid
/// `retryInterval`, refused at admission, is ignored here). A tenant writes these numbers and a
/// retrying call holds a reconcile worker every namespace shares, so they are capped at
/// [`MAX_STORE_RETRIES`] and [`MAX_STORE_RETRY_INTERVAL`] ([`secret_store_warnings`] says so).
pub fn store_retry(spec: &SecretStoreSpec) -> Option<StoreRetry> {
    let r = spec.retry_settings.as_ref()?;
    let retry = StoreRetry {
        max_retries: r.max_retries.map(|n| u32::try_from(n).unwrap_or(0).min(MAX_STORE_RETRIES)),
        retry_interval: r
            .retry_interval
            .as_deref()
            .and_then(|i| super::parse_go_duration(i).ok())
            .map(|i| i.min(MAX_STORE_RETRY_INTERVAL)),
    };
    (retry != StoreRetry::default()).then_some(retry)
}

/// The warnings of `spec.retrySettings` above the caps [`store_retry`] applies.
fn retry_cap_warnings(spec: &SecretStoreSpec, out: &mut Vec<String>) {
    let Some(r) = &spec.retry_settings else { return };
    if r.max_retries.is_some_and(|n| i64::from(n) > i64::from(MAX_STORE_RETRIES)) {
        out.push(format!(
            "spec.retrySettings.maxRetries: capped at {MAX_STORE_RETRIES} by this controller (a retrying call holds a \
             worker every namespace shares)"
        ));
    }
    let interval = r.retry_interval.as_deref().and_then(|i| super::parse_go_duration(i).ok());
    if interval.is_some_and(|i| i > MAX_STORE_RETRY_INTERVAL) {
        out.push(format!(
            "spec.retrySettings.retryInterval: capped at {}s by this controller (a retrying call holds a worker \
             every namespace shares)",
            MAX_STORE_RETRY_INTERVAL.as_secs()
        ));
    }
}

/// Whether a store is served by the controller instance of class `controller_class` (empty when
/// the instance has none), as upstream: a store without `spec.controller` is served by every
/// instance, one naming a controller only by the instance of that class; every other instance
/// leaves the store, and what uses it, alone.
pub fn store_controller_matches(spec: &SecretStoreSpec, controller_class: &str) -> bool {
    spec.controller.as_deref().is_none_or(|c| c.is_empty() || c == controller_class)
}

/// Where Keyward still differs from upstream for this store, each naming the field: an unserved
/// provider, a Vault login Keyward does not serve, and what a provider crate's row warns of (AWS
/// session tags Keyward does not apply).
/// Admission returns them as warnings; the store still applies.
pub fn secret_store_warnings(spec: &SecretStoreSpec, plugins: Plugins<'_>) -> Vec<String> {
    let mut out = Vec::new();
    retry_cap_warnings(spec, &mut out);
    if let Some(v) = &spec.provider.vault {
        out.extend(super::vault_warnings(v).into_iter().map(|w| format!("spec.provider.vault{}", &w["spec".len()..])));
        if let Some(m) = v.auth.unserved() {
            out.push(format!(
                "spec.provider.vault.auth.{m}: without secretRef or workloadIdentity this is upstream's GCE login (the \
                 metadata server's identity), not served by this controller; the store reports Ready=False \
                 (ProviderNotSupported): name a service-account key (secretRef) or workloadIdentity"
            ));
        }
    }
    let row_warnings = plugin_warnings(&spec.provider, plugins);
    match store_backend(&spec.provider, plugins) {
        Err(StoreProviderError::NotSupported { name, .. }) if name.starts_with("vault.auth.") => {}
        // A row's own warning on the field says it already.
        Err(StoreProviderError::NotSupported { name, .. })
            if row_warnings.iter().any(|w| w.starts_with(&format!("spec.provider.{name}"))) => {}
        Err(e @ StoreProviderError::NotSupported { .. }) => out.push(e.to_string()),
        _ => {}
    }
    out.extend(row_warnings);
    out
}

/// The warnings of every block of `plugins` set in `provider` ([`StoreBlock::warnings`]), under
/// `spec.provider.<key>`.
fn plugin_warnings(provider: &SecretStoreProvider, plugins: Plugins<'_>) -> Vec<String> {
    let blocks = plugins.iter().flat_map(|kind| kind.stores);
    let warned =
        blocks.filter_map(|b| Some((b.key, b.warnings?, provider.other.get(b.key)?.value().unwrap_or_default())));
    warned
        .flat_map(|(key, warnings, value)| {
            warnings(&value).into_iter().map(move |w| {
                let rest = w.strip_prefix("spec").unwrap_or(&w);
                format!("spec.provider.{key}{rest}")
            })
        })
        .collect()
}

/// Translates a store's `spec.provider` into the provider configuration Keyward serves it with.
///
/// `vault` and `openBao` become a Vault configuration. A key of one of `plugins` is that kind's
/// spec as written, or as the row's [`crate::registry::StoreBlock::translate`] reads upstream's
/// block into it.
pub fn store_backend(provider: &SecretStoreProvider, plugins: Plugins<'_>) -> Result<StoreBackend, StoreProviderError> {
    if let Some(o) = provider.other.oversized() {
        return Err(StoreProviderError::Oversized(o));
    }
    let names = provider.names();
    let not_supported =
        |name: &str| StoreProviderError::NotSupported { name: name.to_string(), served: served(plugins) };
    match names.as_slice() {
        [] => Err(StoreProviderError::Empty { served: served(plugins) }),
        [_] => {
            if let Some(v) = &provider.vault {
                match v.auth.unserved() {
                    Some(m) => Err(not_supported(&format!("vault.auth.{m}"))),
                    None => Ok(StoreBackend::Vault(Box::new(v.clone()))),
                }
            } else if let Some(o) = &provider.open_bao {
                Ok(StoreBackend::OpenBao(Box::new(open_bao_vault(o))))
            } else if let Some((kind, block, value)) = plugin_block(provider, plugins) {
                let key = block.key;
                let translated = match block.translate {
                    Some(translate) => translate(&value),
                    None => Ok(value),
                };
                match translated {
                    Ok(spec) => Ok(StoreBackend::Plugin { kind, key, spec }),
                    Err(BlockError::Unreadable(message)) => {
                        Err(StoreProviderError::Unreadable { key, kind: kind.kind, message })
                    }
                    Err(BlockError::NotServed { what, .. }) => Err(not_supported(&format!("{key}.{what}"))),
                }
            } else {
                Err(not_supported(names[0]))
            }
        }
        _ => Err(StoreProviderError::Several(names.iter().map(|n| n.to_string()).collect())),
    }
}

/// The first block of `plugins` set in `provider`: its row, its [`StoreBlock`] and the block as
/// written.
fn plugin_block(
    provider: &SecretStoreProvider,
    plugins: Plugins<'_>,
) -> Option<(&'static ProviderKind, &'static StoreBlock, serde_json::Value)> {
    plugins.iter().find_map(|kind| {
        kind.stores.iter().find_map(|block| {
            // Kept within the limits when read: decoding it back cannot fail.
            let value = provider.other.get(block.key)?.value().unwrap_or_default();
            Some((*kind, block, value))
        })
    })
}

/// Validates a SecretStore's (`namespace`: its namespace) or a ClusterSecretStore's (`None`)
/// fields.
///
/// A provider Keyward does not serve is accepted (existing manifests must apply); the store then
/// reports `Ready=False` with reason `ProviderNotSupported`. A served provider is validated with
/// its configuration kind's rules. What a SecretStore may reach is [`secret_store_boundary`]'s
/// question, answered apart so admission can deny it as a policy (403), not a malformed field.
pub fn validate_secret_store(
    namespace: Option<&str>,
    spec: &SecretStoreSpec,
    plugins: Plugins<'_>,
) -> Result<(), ValidationErrors> {
    let mut errs = ValidationErrors::default();
    match store_backend(&spec.provider, plugins) {
        Ok(StoreBackend::Vault(v)) => prefixed(&mut errs, "spec.provider.vault", validate_vault(&v)),
        Ok(StoreBackend::OpenBao(_)) => {
            let o = spec.provider.open_bao.as_ref();
            prefixed(&mut errs, "spec.provider.openBao", o.map_or(Ok(()), validate_open_bao));
        }
        Ok(StoreBackend::Plugin { kind, key, spec: translated }) => {
            admit_block(&mut errs, kind, key, |out| admit_served(&spec.provider, kind, key, &translated, out));
        }
        // A Vault block with an unserved login (GCE) is still checked as a Vault block.
        Err(StoreProviderError::NotSupported { .. }) => {
            if let Some(v) = &spec.provider.vault {
                prefixed(&mut errs, "spec.provider.vault", validate_vault(v));
            }
            if let Some((kind, block, value)) = plugin_block(&spec.provider, plugins)
                && let Some(Err(BlockError::NotServed { checked: Some(checked), .. })) =
                    block.translate.map(|translate| translate(&value))
            {
                admit_block(&mut errs, kind, block.key, |out| (kind.admit)(&checked, out));
            }
        }
        Err(StoreProviderError::Oversized(o)) => errs.push("spec.provider", o.to_string()),
        Err(StoreProviderError::Unreadable { key, kind, message }) => {
            errs.push(format!("spec.provider.{key}"), format!("not a {kind} configuration: {message}"));
        }
        Err(e) => errs.push("spec.provider", e.to_string()),
    }
    if namespace.is_none() {
        check_conditions(&mut errs, &spec.conditions);
    }
    if let Some(r) = &spec.retry_settings
        && let Some(interval) = &r.retry_interval
        && let Err(e) = super::parse_go_duration(interval)
    {
        errs.push("spec.retrySettings.retryInterval", e.to_string());
    }
    if let Err(e) = store_refresh_interval(spec) {
        errs.push("spec.refreshInterval", e);
    }
    errs.into_result()
}

/// A plug-in kind's field errors in its block `key`, as `read` reports them, under
/// `spec.provider.<key>`.
fn admit_block(
    errs: &mut ValidationErrors,
    kind: &ProviderKind,
    key: &str,
    read: impl FnOnce(&mut AdmitSink<'_>) -> Result<(), serde_json::Error>,
) {
    let prefix = format!("spec.provider.{key}");
    if let Err(e) = read(&mut |result, _| prefixed(errs, &prefix, result)) {
        errs.push(prefix, format!("not a {} configuration: {e}", kind.kind));
    }
}

/// Admission's reading of a served plug-in block: the block's own, of the block as written
/// ([`StoreBlock::admit`]), else the kind's, of its translated spec.
fn admit_served(
    provider: &SecretStoreProvider,
    kind: &ProviderKind,
    key: &str,
    translated: &serde_json::Value,
    out: &mut AdmitSink<'_>,
) -> Result<(), serde_json::Error> {
    match kind.stores.iter().find(|b| b.key == key).and_then(|b| b.admit) {
        Some(admit) => admit(&provider.other.get(key).map(|b| b.value().unwrap_or_default()).unwrap_or_default(), out),
        None => (kind.admit)(translated, out),
    }
}

/// The tenant boundary of a SecretStore in `namespace`: its configuration names objects of its
/// own namespace only, whereas a ClusterSecretStore's is the operator's (upstream honours
/// `namespace` in a store's references for ClusterSecretStores only). The providers check the
/// same again on every request.
/// A namespace `identity` lists may use the provider's own identity, as upstream lets every
/// SecretStore.
pub fn secret_store_boundary(
    namespace: &str,
    spec: &SecretStoreSpec,
    plugins: Plugins<'_>,
    identity: &ProviderIdentityNamespaces,
) -> Result<(), ValidationErrors> {
    let mut errs = ValidationErrors::default();
    let Ok(backend) = store_backend(&spec.provider, plugins) else { return Ok(()) };
    let prefix = format!("spec.provider.{}", backend.store_key());
    let mut judge = |reach: &Reach<'_>| {
        let boundary = check_boundary_with(ConfigOwner::Tenant, namespace, reach, identity)
            .map_err(|e| ValidationErrors(e.0.into_iter().map(boundary_error).collect()));
        prefixed(&mut errs, &prefix, boundary);
    };
    match &backend {
        StoreBackend::Vault(v) | StoreBackend::OpenBao(v) => judge(&vault_reach(v)),
        // A block that does not read is validate_secret_store's field error.
        StoreBackend::Plugin { kind, key, spec: translated } => {
            _ = admit_served(&spec.provider, kind, key, translated, &mut |_, reach| judge(reach));
        }
    }
    errs.into_result()
}

fn boundary_error(e: FieldError) -> FieldError {
    // The boundary explains itself in terms of ClusterProviders; a store owner's way out is a
    // ClusterSecretStore.
    let message = e.message.replace(
        "through a ClusterProvider with authenticationScope ProviderNamespace",
        "through a ClusterSecretStore",
    );
    FieldError { field: e.field, message }
}

/// Moves a configuration kind's `spec.…` errors under the store's `spec.provider.<name>`.
fn prefixed(errs: &mut ValidationErrors, prefix: &str, result: Result<(), ValidationErrors>) {
    for e in result.err().map(|e| e.0).unwrap_or_default() {
        let rest = e.field.strip_prefix("spec").unwrap_or(&e.field);
        errs.push(format!("{prefix}{rest}"), e.message);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::test_spec::TestSpec;

    /// A provider crate's kind whose block is any object and always valid: the store the tests
    /// of what is not about a provider use.
    static INLINE: ProviderKind = ProviderKind {
        kind: "Inline",
        plural: "inlines",
        provider: "inline",
        stores: &[StoreBlock::spec("inline")],
        admit: crate::registry::admit_spec::<Inline>,
        crd: <crate::Provider as kube::CustomResourceExt>::crd,
    };

    #[derive(serde::Serialize, serde::Deserialize, Clone, Debug)]
    struct Inline {}

    impl crate::registry::ProviderSpec for Inline {
        fn validate(&self) -> Result<(), ValidationErrors> {
            Ok(())
        }
        fn reach(&self) -> Reach<'_> {
            Reach::default()
        }
    }

    fn spec(yaml: &str) -> SecretStoreSpec {
        serde_yaml::from_str(yaml).expect("test manifest parses")
    }

    /// Field errors, then (for a SecretStore) boundary errors, as admission reports them.
    fn errors(ns: Option<&str>, yaml: &str) -> Vec<String> {
        let s = spec(yaml);
        let boundary = ns.map(|ns| secret_store_boundary(ns, &s, &[&INLINE], &ProviderIdentityNamespaces::NONE));
        [validate_secret_store(ns, &s, &[&INLINE])]
            .into_iter()
            .chain(boundary)
            .filter_map(Result::err)
            .flat_map(|e| e.0.iter().map(ToString::to_string).collect::<Vec<_>>())
            .collect()
    }

    #[test]
    fn vault_translates_as_written() {
        let s = spec(
            "provider:\n  vault:\n    server: https://vault:8200\n    path: secret\n    version: v2\n    \
             auth: {userPass: {path: userpass, username: u, secretRef: {name: p, key: password}}}\n",
        );
        let StoreBackend::Vault(v) = store_backend(&s.provider, &[]).expect("served") else { panic!("vault") };
        assert_eq!(v.path.as_deref(), Some("secret"));
        assert_eq!(v.auth.methods(), ["userPass"]);
    }

    #[test]
    fn vault_stores_are_validated_and_bounded_by_their_kinds_rules() {
        assert_eq!(
            errors(
                Some("a"),
                "provider: {vault: {server: 'ftp://v', auth: {ldap: {username: '', secretRef: {name: p}}}}}"
            ),
            [
                "spec.provider.vault.server: \"ftp://v\" must be an http:// or https:// URL",
                "spec.provider.vault.auth.ldap.username: must not be empty",
                "spec.provider.vault.auth.ldap.secretRef.key: must not be empty: name the key inside the Secret",
            ]
        );
        let headers = errors(
            Some("a"),
            "provider: {vault: {server: 'http://v', headers: {X-Vault-Token: t, 'a b': c}, \
             auth: {tokenSecretRef: {name: t, key: k}}}}",
        );
        assert_eq!(headers.len(), 2, "{headers:?}");
        assert!(
            headers[1].contains("is not an HTTP header name") && headers[0].contains("set by the provider"),
            "{headers:?}"
        );
        // A SecretStore names Secrets of its own namespace only; a ClusterSecretStore may name others.
        let cross = "provider: {vault: {server: 'http://v', auth: {cert: {clientCert: {name: c, key: tls.crt, namespace: b}, \
                     secretRef: {name: c, key: tls.key}}}}}";
        let denied = errors(Some("a"), cross);
        assert_eq!(denied.len(), 1, "{denied:?}");
        assert!(denied[0].starts_with("spec.provider.vault.auth.cert.clientCert"), "{denied:?}");
        assert!(errors(None, cross).is_empty());
    }

    #[test]
    fn an_omitted_kind_means_a_secret_store_as_upstream() {
        assert_eq!(store_ref_kind(None), StoreKind::SecretStore);
        for kind in
            [StoreKind::SecretStore, StoreKind::ClusterSecretStore, StoreKind::Provider, StoreKind::ClusterProvider]
        {
            assert_eq!(store_ref_kind(Some(kind)), kind);
        }
    }

    #[test]
    fn refresh_interval_is_seconds_or_a_duration() {
        let interval = |yaml: &str| store_refresh_interval(&spec(&format!("provider: {{inline: {{}}}}\n{yaml}")));
        assert_eq!(interval(""), Ok(None));
        assert_eq!(interval("refreshInterval: 0"), Ok(None), "0 is the default");
        assert_eq!(interval("refreshInterval: '0'"), Ok(None));
        assert_eq!(interval("refreshInterval: 30"), Ok(Some(Duration::from_secs(30))));
        assert_eq!(interval("refreshInterval: '45'"), Ok(Some(Duration::from_secs(45))));
        assert_eq!(interval("refreshInterval: 1h"), Ok(Some(Duration::from_secs(3600))));
        assert_eq!(interval("refreshInterval: 1m30s"), Ok(Some(Duration::from_secs(90))));
        assert!(interval("refreshInterval: -5").unwrap_err().contains("negative"));
        assert!(interval("refreshInterval: '-5'").unwrap_err().contains("negative"));
        assert!(interval("refreshInterval: soon").unwrap_err().contains("is not a duration"));
        assert!(interval("refreshInterval: -1h").unwrap_err().contains("is not a duration"));
    }

    #[test]
    fn retry_settings_and_controller_class() {
        let s = spec("provider: {inline: {}}\nretrySettings: {maxRetries: 2, retryInterval: 3s}");
        assert_eq!(
            store_retry(&s),
            Some(StoreRetry { max_retries: Some(2), retry_interval: Some(Duration::from_secs(3)) })
        );
        let s = spec("provider: {inline: {}}\nretrySettings: {maxRetries: -1}");
        assert_eq!(store_retry(&s), Some(StoreRetry { max_retries: Some(0), retry_interval: None }));
        assert_eq!(store_retry(&spec("provider: {inline: {}}\nretrySettings: {}")), None);
        assert_eq!(store_retry(&spec("provider: {inline: {}}")), None);
        // A tenant's store cannot hold a shared worker for hours: capped, and warned of.
        let s = spec("provider: {inline: {}}\nretrySettings: {maxRetries: 1000, retryInterval: 1h}");
        assert_eq!(
            store_retry(&s),
            Some(StoreRetry { max_retries: Some(MAX_STORE_RETRIES), retry_interval: Some(MAX_STORE_RETRY_INTERVAL) })
        );
        let warnings = secret_store_warnings(&s, &[&INLINE]);
        assert!(warnings.iter().any(|w| w.starts_with("spec.retrySettings.maxRetries: capped at 5")), "{warnings:?}");
        assert!(
            warnings.iter().any(|w| w.starts_with("spec.retrySettings.retryInterval: capped at 5s")),
            "{warnings:?}"
        );
        let within = spec("provider: {inline: {}}\nretrySettings: {maxRetries: 5, retryInterval: 5s}");
        assert!(secret_store_warnings(&within, &[&INLINE]).is_empty(), "at the caps: no warning");

        let any = spec("provider: {inline: {}}");
        assert!(store_controller_matches(&any, ""), "no controller: every instance");
        assert!(store_controller_matches(&any, "dev"));
        assert!(store_controller_matches(&spec("provider: {inline: {}}\ncontroller: ''"), "dev"));
        let dev = spec("provider: {inline: {}}\ncontroller: dev");
        assert!(store_controller_matches(&dev, "dev"));
        assert!(!store_controller_matches(&dev, ""), "the instance without a class is not dev");
        assert!(!store_controller_matches(&dev, "prod"));
    }

    #[test]
    fn warnings_name_the_fields_keyward_does_not_serve() {
        let w = |yaml: &str| secret_store_warnings(&spec(yaml), &[&INLINE]);
        assert_eq!(w("provider: {inline: {}}"), Vec::<String>::new());
        assert_eq!(
            w("provider: {vault: {server: 'http://v', auth: {tokenSecretRef: {name: t, key: k}}}}"),
            Vec::<String>::new()
        );
        let gcpsm = w("provider: {gcpsm: {projectID: p}}");
        assert_eq!(gcpsm.len(), 1, "{gcpsm:?}");
        assert!(gcpsm[0].starts_with("spec.provider.gcpsm is not served by this controller"), "{gcpsm:?}");
        let gcp = w("provider: {vault: {server: 'http://v', auth: {iam: {vaultRole: r}, gcp: {role: g}}}}");
        assert_eq!(gcp.len(), 1, "one warning per unserved login, none repeated: {gcp:?}");
        assert!(gcp[0].starts_with("spec.provider.vault.auth.gcp: ") && gcp[0].contains("not served"), "{gcp:?}");
        assert_eq!(
            w("provider: {vault: {server: 'http://v', auth: {iam: {vaultRole: r, region: eu-west-1}}}}"),
            Vec::<String>::new(),
            "iam is served"
        );
    }

    /// A provider crate's kind, as its crate declares it: here the test spec served under
    /// `spec.provider.example`.
    static EXAMPLE: ProviderKind = ProviderKind {
        kind: "Example",
        plural: "examples",
        provider: "example",
        stores: &[StoreBlock::spec("example")],
        admit: crate::registry::admit_spec::<TestSpec>,
        crd: <crate::Provider as kube::CustomResourceExt>::crd,
    };

    #[test]
    fn a_plugin_kind_serves_its_store_key_with_its_own_rules() {
        let plugins: Plugins<'_> = &[&EXAMPLE];
        let s = spec("provider: {example: {remoteNamespace: r, auth: {token: {bearerToken: {name: t, key: k}}}}}");
        let b = store_backend(&s.provider, plugins).expect("served by the plug-in");
        assert_eq!((b.provider_name(), b.store_key()), ("example", "example"));
        let StoreBackend::Plugin { kind, spec: block, .. } = &b else { panic!("{b:?}") };
        assert_eq!((*kind, block["remoteNamespace"].as_str()), (&EXAMPLE, Some("r")));
        assert_eq!(validate_secret_store(Some("a"), &s, plugins), Ok(()));
        // Without the row the store is not served, and the message lists the plug-in when known.
        let e = store_backend(&s.provider, &[]).unwrap_err();
        assert!(matches!(&e, StoreProviderError::NotSupported { name, .. } if name == "example"), "{e:?}");
        let e = store_backend(&spec("provider: {gcpsm: {}}").provider, plugins).unwrap_err();
        assert!(e.to_string().contains("the providers vault, openBao, example;"), "{e}");
        // Its field errors and its reach come from the kind, under the store's key.
        let bad = spec("provider: {example: {auth: {token: {bearerToken: {name: t}}}}}");
        let errs = validate_secret_store(Some("a"), &bad, plugins).unwrap_err().to_string();
        assert!(errs.contains("spec.provider.example.auth.token.bearerToken.key: must not be empty"), "{errs}");
        let unreadable = spec("provider: {example: {remoteNamespace: [1]}}");
        let errs = validate_secret_store(Some("a"), &unreadable, plugins).unwrap_err().to_string();
        assert!(errs.contains("spec.provider.example: not a Example configuration"), "{errs}");
        let across = spec("provider: {example: {auth: {token: {bearerToken: {name: t, key: k, namespace: other}}}}}");
        let none = &ProviderIdentityNamespaces::NONE;
        let errs = secret_store_boundary("a", &across, plugins, none).unwrap_err().to_string();
        assert!(errs.contains("spec.provider.example.auth.token.bearerToken"), "{errs}");
        assert_eq!(secret_store_boundary("a", &s, plugins, none), Ok(()));
    }

    /// A kind whose store block is upstream's shape: `{n: <number>}` for the spec `{m: <number>}`.
    static SHAPED: ProviderKind = ProviderKind {
        kind: "Shaped",
        plural: "shapeds",
        provider: "shaped",
        stores: &[StoreBlock {
            schema: Some(|| None),
            translate: Some(|block| {
                let n = block
                    .get("n")
                    .and_then(serde_json::Value::as_i64)
                    .ok_or_else(|| BlockError::Unreadable("n: not a number".into()))?;
                Ok(serde_json::json!({ "m": n }))
            }),
            ..StoreBlock::spec("shaped")
        }],
        admit: crate::registry::admit_spec::<Inline>,
        crd: <crate::Provider as kube::CustomResourceExt>::crd,
    };

    #[test]
    fn an_upstream_block_is_translated_before_it_is_served_or_checked() {
        let plugins: Plugins<'_> = &[&SHAPED];
        let b = store_backend(&spec("provider: {shaped: {n: 3}}").provider, plugins).expect("served");
        assert_eq!((b.provider_name(), b.store_key()), ("shaped", "shaped"));
        assert_eq!(b, StoreBackend::Plugin { kind: &SHAPED, key: "shaped", spec: serde_json::json!({"m": 3}) });
        let bad = spec("provider: {shaped: {n: three}}");
        let e = store_backend(&bad.provider, plugins).unwrap_err();
        assert_eq!(e.to_string(), "spec.provider.shaped: not a Shaped store block: n: not a number");
        assert_eq!(e.reason(), "InvalidProviderConfig");
        let errs = validate_secret_store(Some("a"), &bad, plugins).unwrap_err().to_string();
        assert!(errs.contains("spec.provider.shaped: not a Shaped configuration: n: not a number"), "{errs}");
    }

    /// A kind serving two blocks: `twin` (its spec as written, with a warning on
    /// `remoteNamespace`) and `twinLegacy`, whose `unserved` field is not served (the rest is still
    /// checked as the spec).
    static TWIN: ProviderKind = ProviderKind {
        kind: "Twin",
        plural: "twins",
        provider: "twins",
        stores: &[
            StoreBlock {
                warnings: Some(|block| {
                    block
                        .get("remoteNamespace")
                        .map(|_| "spec.remoteNamespace: ignored here".to_string())
                        .into_iter()
                        .collect()
                }),
                ..StoreBlock::spec("twin")
            },
            StoreBlock {
                translate: Some(|block| {
                    let mut spec = block.clone();
                    match spec.as_object_mut().and_then(|o| o.remove("unserved")) {
                        Some(_) => Err(BlockError::NotServed { what: "unserved".into(), checked: Some(spec) }),
                        None => Ok(spec),
                    }
                }),
                warnings: Some(|block| {
                    block.get("unserved").map(|_| "spec.unserved: not served here".to_string()).into_iter().collect()
                }),
                ..StoreBlock::spec("twinLegacy")
            },
        ],
        admit: crate::registry::admit_spec::<TestSpec>,
        crd: <crate::Provider as kube::CustomResourceExt>::crd,
    };

    #[test]
    fn a_kind_serves_each_of_its_blocks_and_says_what_it_does_not_serve() {
        let plugins: Plugins<'_> = &[&TWIN];
        for key in ["twin", "twinLegacy"] {
            let s = spec(&format!("provider: {{{key}: {{remoteNamespace: r}}}}"));
            let b = store_backend(&s.provider, plugins).expect("served");
            assert_eq!((b.provider_name(), b.store_key()), ("twins", key));
            let StoreBackend::Plugin { kind, spec, .. } = &b else { panic!("{b:?}") };
            assert_eq!((*kind, spec["remoteNamespace"].as_str()), (&TWIN, Some("r")));
        }
        let e = store_backend(&spec("provider: {gcpsm: {}}").provider, plugins).unwrap_err();
        assert!(e.to_string().contains("the providers vault, openBao, twin, twinLegacy;"), "{e}");

        // Not served: the store reports ProviderNotSupported, admission still checks the rest.
        let unserved = spec("provider: {twinLegacy: {unserved: 1, auth: {token: {bearerToken: {name: t}}}}}");
        let e = store_backend(&unserved.provider, plugins).unwrap_err();
        assert!(matches!(&e, StoreProviderError::NotSupported { name, .. } if name == "twinLegacy.unserved"), "{e:?}");
        assert_eq!(e.reason(), "ProviderNotSupported");
        let errs = validate_secret_store(Some("a"), &unserved, plugins).unwrap_err().to_string();
        assert!(errs.contains("spec.provider.twinLegacy.auth.token.bearerToken.key: must not be empty"), "{errs}");

        // A row's warnings name the store's fields; its own warning on an unserved field is the
        // only one about it.
        let w = secret_store_warnings(&unserved, plugins);
        assert_eq!(w, ["spec.provider.twinLegacy.unserved: not served here"]);
        let w = secret_store_warnings(&spec("provider: {twin: {remoteNamespace: r}}"), plugins);
        assert_eq!(w, ["spec.provider.twin.remoteNamespace: ignored here"]);
        assert!(secret_store_warnings(&spec("provider: {twin: {}}"), plugins).is_empty());
    }

    /// A kind whose block `framed` is its spec plus a required `frame`, which the block's own
    /// admission checks before the kind's rules of the spec.
    static FRAMED: ProviderKind = ProviderKind {
        kind: "Framed",
        plural: "frameds",
        provider: "framed",
        stores: &[StoreBlock {
            translate: Some(|block| Ok(unframed(block))),
            admit: Some(|block, out| {
                let spec: TestSpec = serde_json::from_value(unframed(block))?;
                let mut errs = crate::registry::ProviderSpec::validate(&spec).err().unwrap_or_default();
                if block.get("frame").is_none() {
                    errs.push("spec.frame", "must be set");
                }
                out(errs.into_result(), &crate::registry::ProviderSpec::reach(&spec));
                Ok(())
            }),
            ..StoreBlock::spec("framed")
        }],
        admit: crate::registry::admit_spec::<TestSpec>,
        crd: <crate::Provider as kube::CustomResourceExt>::crd,
    };

    /// A `framed` block without its `frame`: the spec.
    fn unframed(block: &serde_json::Value) -> serde_json::Value {
        let mut spec = block.clone();
        spec.as_object_mut().map(|o| o.remove("frame"));
        spec
    }

    #[test]
    fn a_block_with_rules_of_its_own_is_admitted_by_them() {
        let plugins: Plugins<'_> = &[&FRAMED];
        let ok = spec("provider: {framed: {frame: 1, auth: {token: {bearerToken: {name: t, key: k}}}}}");
        let StoreBackend::Plugin { spec: translated, .. } = store_backend(&ok.provider, plugins).expect("served")
        else {
            panic!("a plug-in")
        };
        assert!(translated.get("frame").is_none(), "the provider gets the spec: {translated}");
        assert_eq!(validate_secret_store(Some("a"), &ok, plugins), Ok(()));
        let bad = spec("provider: {framed: {auth: {token: {bearerToken: {name: t}}}}}");
        let errs = validate_secret_store(Some("a"), &bad, plugins).unwrap_err().to_string();
        assert!(errs.contains("spec.provider.framed.frame: must be set"), "{errs}");
        assert!(errs.contains("spec.provider.framed.auth.token.bearerToken.key: must not be empty"), "{errs}");
        let across =
            spec("provider: {framed: {frame: 1, auth: {token: {bearerToken: {name: t, key: k, namespace: b}}}}}");
        let none = &ProviderIdentityNamespaces::NONE;
        let errs = secret_store_boundary("a", &across, plugins, none).unwrap_err().to_string();
        assert!(errs.contains("spec.provider.framed.auth.token.bearerToken.namespace"), "{errs}");
    }

    #[test]
    fn vault_gcp_logins_with_credentials_are_served_checked_and_bounded() {
        let key = "provider: {vault: {server: 'http://v', auth: {gcp: {role: r, \
                   secretRef: {secretAccessKeySecretRef: {name: sa, key: key.json}}}}}}";
        assert!(matches!(store_backend(&spec(key).provider, &[]), Ok(StoreBackend::Vault(_))));
        assert_eq!(errors(Some("a"), key), Vec::<String>::new());
        assert!(secret_store_warnings(&spec(key), &[]).is_empty());
        let wi = "provider: {vault: {server: 'http://v', auth: {gcp: {role: r, workloadIdentity: \
                  {serviceAccountRef: {name: sa, namespace: b}, clusterName: c, clusterLocation: l}}}}}";
        let errs = errors(Some("a"), wi);
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(
            errs[0].starts_with(
                "spec.provider.vault.auth.gcp.workloadIdentity.serviceAccountRef.namespace: \"b\" names ServiceAccount"
            ),
            "{errs:?}"
        );
        let bad = "provider: {vault: {server: 'http://v', auth: {gcp: {role: '', path: '../x', \
                   secretRef: {secretAccessKeySecretRef: {name: ''}}}}}}";
        let errs = errors(Some("a"), bad);
        for field in [
            "spec.provider.vault.auth.gcp.role",
            "spec.provider.vault.auth.gcp.path",
            "spec.provider.vault.auth.gcp.secretRef.secretAccessKeySecretRef.name",
        ] {
            assert!(errs.iter().any(|e| e.starts_with(&format!("{field}: "))), "{field}: {errs:?}");
        }
    }

    #[test]
    fn unserved_empty_and_several_providers() {
        let e = store_backend(&spec("provider: {gcpsm: {projectID: p}}").provider, &[]).unwrap_err();
        assert!(matches!(&e, StoreProviderError::NotSupported { name, .. } if name == "gcpsm"), "{e:?}");
        assert_eq!(e.reason(), "ProviderNotSupported");
        assert!(e.to_string().starts_with("spec.provider.gcpsm is not served by this controller"), "{e}");
        let e = store_backend(&spec("provider: {vault: {server: 'http://v', auth: {gcp: {role: r}}}}").provider, &[])
            .unwrap_err();
        assert!(matches!(&e, StoreProviderError::NotSupported { name, .. } if name == "vault.auth.gcp"), "{e:?}");
        let e = store_backend(&spec("provider: {}").provider, &[]).unwrap_err();
        assert!(matches!(e, StoreProviderError::Empty { .. }), "{e:?}");
        let e = store_backend(&spec("provider: {vault: {server: 'http://v'}, inline: {}}").provider, &[]).unwrap_err();
        assert_eq!(e.to_string(), "spec.provider names vault and inline: set exactly one provider");
        assert_eq!(e.reason(), "InvalidProviderConfig");
    }

    #[test]
    fn blocks_past_the_free_form_limits_are_refused_and_not_kept() {
        let bloated = format!("provider: {{gcpsm: {{pad: [{}0]}}}}", "0, ".repeat(5000));
        let s = spec(&bloated);
        assert_eq!(s.provider.other.keys().count(), 0, "nothing of it is held");
        let e = store_backend(&s.provider, &[]).unwrap_err();
        assert!(matches!(e, StoreProviderError::Oversized(_)), "{e:?}");
        assert_eq!(e.reason(), "InvalidProviderConfig");
        assert!(e.to_string().starts_with("spec.provider: free-form JSON of "), "{e}");
        let errs = errors(Some("a"), &bloated);
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(
            errs[0].starts_with("spec.provider: free-form JSON of ") && errs[0].contains("at most 65536"),
            "{errs:?}"
        );
        // A process keeps only the block it serves, and still sees what else is set.
        let mut two = spec("provider: {vault: {server: 'http://v'}, webhook: {url: u}, gcpsm: {projectID: p}}");
        two.provider.keep_only(&["webhook"]);
        assert_eq!(two.provider.vault, Some(Default::default()));
        assert!(two.provider.other.get("gcpsm").is_some_and(|g| g.is_null()));
        assert_eq!(
            two.provider.other.get("webhook").map(|w| w.value().unwrap()),
            Some(serde_json::json!({"url": "u"}))
        );
        assert!(matches!(store_backend(&two.provider, &[]), Err(StoreProviderError::Several(_))));
    }

    #[test]
    fn upstream_store_shapes_it_admits_are_admitted_with_a_warning() {
        // A Vault store without a login: the provider's identity, refused for a tenant by default.
        let vault = "provider: {vault: {server: 'http://v', path: secret}}";
        let denied = errors(Some("a"), vault);
        assert!(
            denied.len() == 1 && denied[0].starts_with("spec.provider.vault.auth: spec.auth without"),
            "{denied:?}"
        );
        assert!(errors(None, vault).is_empty(), "a ClusterSecretStore may");
    }

    #[test]
    fn validation_table() {
        // An unserved provider applies unchanged.
        assert_eq!(errors(Some("a"), "provider: {gcpsm: {projectID: p}}"), Vec::<String>::new());
        let cases = [
            (Some("a"), "provider: {}", "spec.provider: spec.provider names no provider"),
            (
                None,
                "provider: {inline: {}}\nconditions: [{namespaceRegexes: ['(']}]",
                "spec.conditions[0].namespaceRegexes[0]",
            ),
            (None, "provider: {inline: {}}\nconditions: [{}]", "spec.conditions[0]: set namespaceSelector"),
            (
                Some("a"),
                "provider: {inline: {}}\nretrySettings: {retryInterval: soon}",
                "spec.retrySettings.retryInterval",
            ),
            (Some("a"), "provider: {inline: {}}\nrefreshInterval: -1", "spec.refreshInterval: -1 is negative"),
            (Some("a"), "provider: {inline: {}}\nrefreshInterval: hourly", "spec.refreshInterval: \"hourly\" is not"),
        ];
        for (ns, yaml, want) in cases {
            let got = errors(ns, yaml);
            assert!(got.iter().any(|e| e.contains(want)), "{yaml}: want {want:?}, got {got:?}");
        }
    }

    #[test]
    fn namespaces_in_references_only_for_cluster_secret_stores() {
        let plugins: Plugins<'_> = &[&EXAMPLE];
        let none = &ProviderIdentityNamespaces::NONE;
        let yaml = "provider: {example: {auth: {token: {bearerToken: {name: t, key: k, namespace: creds}}}}}";
        let got = secret_store_boundary("team-a", &spec(yaml), plugins, none).unwrap_err().0;
        assert_eq!(got.len(), 1, "{got:?}");
        let got = got[0].to_string();
        assert!(got.starts_with("spec.provider.example.auth.token.bearerToken.namespace: \"creds\" names"), "{got}");
        assert!(got.ends_with("or have the cluster operator serve this store through a ClusterSecretStore"), "{got}");
        assert_eq!(secret_store_boundary("creds", &spec(yaml), plugins, none), Ok(()), "its own namespace is fine");
        assert_eq!(validate_secret_store(None, &spec(yaml), plugins), Ok(()), "a ClusterSecretStore is the operator's");
    }
}
