//! Validating admission: every decision comes from `keyward_crds::rules` (one rule, one place)
//! applied to what the caches know. Nothing here does I/O.
//!
//! Keyward's own kinds go through one typed path: [`admit`] reads kube's dynamic object as the
//! kind's type and hands it to that kind's [`Admitted`] impl (`kinds.rs`). Provider
//! configuration kinds are checked by their registry row, generators by their spec rules
//! (`generators.rs`; a Webhook generator also by the webhook store row).

use std::collections::BTreeMap;

use keyward_crds::external_secret::GeneratorRef;
use keyward_crds::generators::{ClusterGenerator, GENERATOR_GROUP, GeneratorKind, GeneratorState};
use keyward_crds::rules::{
    CLUSTER_GENERATOR_KIND, ConfigOwner, NamespaceView, Reach, StoreSpec, ValidationErrors, auth_namespace,
    check_boundary_with, check_generator_namespace_admitted, check_namespace_admitted, check_push_override,
    config_owner, push_metadata_remote_namespace, unserved_generator_warning,
};
use keyward_crds::{
    ClusterExternalSecret, ClusterProvider, ClusterProviderCondition, ClusterProviderSpec, ClusterPushSecret,
    ClusterSecretStore, ExternalSecret, Provider, PushSecret, SecretStore, StoreKind,
};
use keyward_provider_registry::{ProviderKind, provider_kind};
use kube::core::DynamicObject;
use serde::de::DeserializeOwned;
use serde_json::Value;

mod generators;
mod kinds;
pub mod templates;

use crate::cache::{Labels, State};
use crate::review::{Decision, Operation, Request, RequestExt, typed};

/// The kinds Keyward admits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `external-secrets.io/v1` ExternalSecret.
    ExternalSecret,
    /// `external-secrets.io/v1` ClusterExternalSecret.
    ClusterExternalSecret,
    /// `external-secrets.io/v1alpha1` PushSecret.
    PushSecret,
    /// `external-secrets.io/v1alpha1` ClusterPushSecret.
    ClusterPushSecret,
    /// `external-secrets.io/v1` Provider.
    Provider,
    /// `external-secrets.io/v1` ClusterProvider.
    ClusterProvider,
    /// `external-secrets.io/v1` SecretStore.
    SecretStore,
    /// `external-secrets.io/v1` ClusterSecretStore.
    ClusterSecretStore,
    /// A `provider.external-secrets.io/v2alpha1` configuration kind of the registry.
    ProviderConfig(&'static ProviderKind),
    /// A namespaced generator of `generators.external-secrets.io/v1alpha1`, any kind of
    /// `GeneratorKind` (served or not): its spec rules; a Webhook's spec is also a SecretStore's
    /// `spec.provider.webhook` block, checked with that block's registry row.
    Generator(GeneratorKind),
    /// `generators.external-secrets.io/v1alpha1` ClusterGenerator: the spec it holds, checked
    /// as that kind's at `spec.generator.<kind>Spec`.
    ClusterGenerator,
    /// `generators.external-secrets.io/v1alpha1` GeneratorState: its free-form fields.
    GeneratorState,
}

impl Kind {
    /// The kind of a review's object, if Keyward handles it.
    pub fn from_gvk(group: &str, version: &str, kind: &str) -> Option<Kind> {
        match (group, version, kind) {
            ("external-secrets.io", "v1", "ExternalSecret") => Some(Kind::ExternalSecret),
            ("external-secrets.io", "v1", "ClusterExternalSecret") => Some(Kind::ClusterExternalSecret),
            ("external-secrets.io", "v1alpha1", "PushSecret") => Some(Kind::PushSecret),
            ("external-secrets.io", "v1alpha1", "ClusterPushSecret") => Some(Kind::ClusterPushSecret),
            ("external-secrets.io", "v1", "Provider") => Some(Kind::Provider),
            ("external-secrets.io", "v1", "ClusterProvider") => Some(Kind::ClusterProvider),
            ("external-secrets.io", "v1", "SecretStore") => Some(Kind::SecretStore),
            ("external-secrets.io", "v1", "ClusterSecretStore") => Some(Kind::ClusterSecretStore),
            (GENERATOR_GROUP, "v1alpha1", CLUSTER_GENERATOR_KIND) => Some(Kind::ClusterGenerator),
            (GENERATOR_GROUP, "v1alpha1", "GeneratorState") => Some(Kind::GeneratorState),
            (GENERATOR_GROUP, "v1alpha1", k) => GeneratorKind::parse(k).map(Kind::Generator),
            _ => provider_kind(group, version, kind).map(Kind::ProviderConfig),
        }
    }

    /// The kind of a request.
    pub fn of(req: &Request) -> Option<Kind> {
        Kind::from_gvk(&req.kind.group, &req.kind.version, &req.kind.kind)
    }

    /// The kind name.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::ExternalSecret => "ExternalSecret",
            Kind::ClusterExternalSecret => "ClusterExternalSecret",
            Kind::PushSecret => "PushSecret",
            Kind::ClusterPushSecret => "ClusterPushSecret",
            Kind::Provider => "Provider",
            Kind::ClusterProvider => "ClusterProvider",
            Kind::SecretStore => "SecretStore",
            Kind::ClusterSecretStore => "ClusterSecretStore",
            Kind::ProviderConfig(p) => p.kind,
            Kind::Generator(k) => k.as_str(),
            Kind::ClusterGenerator => CLUSTER_GENERATOR_KIND,
            Kind::GeneratorState => "GeneratorState",
        }
    }

    /// Whether the decision depends on the namespace's labels.
    pub fn uses_namespace_labels(self) -> bool {
        matches!(self, Kind::ExternalSecret | Kind::PushSecret)
    }
}

/// Denial for a kind Keyward does not handle.
pub fn unknown_kind(req: &Request) -> Decision {
    let k = &req.kind;
    let group = if k.group.is_empty() { "core" } else { k.group.as_str() };
    Decision::deny(
        400,
        format!(
            "keyward-webhook does not handle {group}/{} {} (resource {:?}): remove it from the webhook configuration's rules",
            k.version, k.kind, req.resource.resource
        ),
    )
}

/// Whether the request changes an object's spec at all (reads, deletes and subresources pass).
pub fn is_write(req: &Request) -> bool {
    matches!(req.operation, Operation::Create | Operation::Update)
        && req.sub_resource.as_deref().unwrap_or_default().is_empty()
}

/// The Keyward kind of a write and the object it writes; a denial when Keyward does not handle
/// the kind or the request carries no object. Both webhooks start here.
pub fn kind_and_object(req: &Request) -> Result<(Kind, &DynamicObject), Decision> {
    let Some(kind) = Kind::of(req) else {
        return Err(unknown_kind(req));
    };
    let Some(object) = req.object.as_ref() else {
        return Err(Decision::deny(
            400,
            format!("the {} {} request carries no object", req.operation_name(), kind.as_str()),
        ));
    };
    Ok((kind, object))
}

/// Answers a validating review from the cached state.
pub fn validate(req: &Request, state: &State) -> Decision {
    if req.operation == Operation::Delete && Kind::of(req) == Some(Kind::ClusterProvider) {
        // Always allowed; its users are told what they lose.
        return Decision::allow().with_warnings(in_use_warning(state, &req.object_name()).into_iter().collect());
    }
    if !is_write(req) {
        return Decision::allow();
    }
    let (kind, object) = match kind_and_object(req) {
        Ok(found) => found,
        Err(denied) => return denied,
    };
    let name = req.object_name();
    let cx = Cx { req, state, ns: req.namespace(), name: &name };
    let mut check = Check::default();
    let read = match kind {
        Kind::ExternalSecret => admit::<ExternalSecret>(&cx, object, &mut check),
        Kind::ClusterExternalSecret => admit::<ClusterExternalSecret>(&cx, object, &mut check),
        Kind::PushSecret => admit::<PushSecret>(&cx, object, &mut check),
        Kind::ClusterPushSecret => admit::<ClusterPushSecret>(&cx, object, &mut check),
        Kind::Provider => admit::<Provider>(&cx, object, &mut check),
        Kind::ClusterProvider => admit::<ClusterProvider>(&cx, object, &mut check),
        Kind::SecretStore => admit::<SecretStore>(&cx, object, &mut check),
        Kind::ClusterSecretStore => admit::<ClusterSecretStore>(&cx, object, &mut check),
        Kind::ProviderConfig(p) => {
            let spec = object.data.get("spec").unwrap_or(&Value::Null);
            (p.admit)(spec, &mut |invalid, reach| {
                check.spec(invalid);
                check.boundary(state, cx.ns, reach);
            })
            .map_err(|e| Decision::deny(400, format!("the {} cannot be read: {e}", p.kind)))
        }
        Kind::Generator(k) => {
            generators::admit_generator(k, object.data.get("spec").unwrap_or(&Value::Null), &mut check)
                .map_err(|e| Decision::deny(400, e))
        }
        Kind::ClusterGenerator => admit::<ClusterGenerator>(&cx, object, &mut check),
        Kind::GeneratorState => admit::<GeneratorState>(&cx, object, &mut check),
    };
    match read {
        Ok(()) => check.finish(kind, &name),
        Err(denied) => denied,
    }
}

/// What a kind's rules see of the request besides the object.
struct Cx<'a> {
    req: &'a Request,
    state: &'a State,
    /// The object's namespace, empty for cluster-scoped kinds.
    ns: &'a str,
    name: &'a str,
}

impl Cx<'_> {
    /// The object's `spec` as the review carries it.
    fn spec(&self) -> Option<&Value> {
        self.req.object.as_ref().and_then(|o| o.data.get("spec"))
    }

    /// The object before an UPDATE, read as `K`; `None` on other operations or when unreadable.
    fn old<K: Admitted>(&self) -> Option<K> {
        let old = self.req.old_object.as_ref().filter(|_| self.req.operation == Operation::Update)?;
        typed(K::KIND.as_str(), old).ok()
    }
}

/// A Keyward kind admitted through its own type: [`admit`] reads the object as `Self` (kube's
/// admission request carries it dynamically) and the kind's rules add to the [`Check`].
trait Admitted: DeserializeOwned {
    /// The kind, for messages.
    const KIND: Kind;
    /// Adds what the rules say of this object in `cx` to `check`.
    fn check(&self, cx: &Cx<'_>, check: &mut Check);
}

/// The one typed path: reads `object` as `K` (a 400 naming the kind when it does not fit) and
/// applies `K`'s rules.
fn admit<K: Admitted>(cx: &Cx<'_>, object: &DynamicObject, check: &mut Check) -> Result<(), Decision> {
    let typed: K = typed(K::KIND.as_str(), object)?;
    typed.check(cx, check);
    Ok(())
}

/// What offers itself to namespaces by `spec.conditions`, for the messages about it.
struct Offer<'a> {
    /// `ClusterProvider`, `ClusterSecretStore` or `ClusterGenerator`.
    kind: &'a str,
    name: &'a str,
    /// What a namespace uses instead ("a Provider").
    local: &'a str,
}

/// Collects field errors, policy denials and warnings for one object.
#[derive(Default)]
struct Check {
    invalid: Vec<String>,
    denied: Vec<String>,
    warnings: Vec<String>,
}

impl Check {
    fn spec(&mut self, result: Result<(), ValidationErrors>) {
        if let Err(errs) = result {
            self.invalid.extend(errs.0.iter().map(ToString::to_string));
        }
    }

    /// A generator's spec that is a SecretStore block as written (`block`, at `path` in the
    /// object; upstream's Webhook generator and `spec.provider.webhook` share it), checked by the
    /// registry row of that block: its rules, with their field paths moved under `path`. Only
    /// the field rules: what the spec names is read in the namespace that uses the generator,
    /// and the provider checks that boundary on each generation (a ClusterGenerator's spec
    /// serves many namespaces).
    fn generator_store_block(&mut self, kind: GeneratorKind, path: &str, block: &Value) {
        let Some(row) = keyward_provider_registry::generator_store_block(kind) else {
            return;
        };
        let mut errs = Vec::new();
        let read = (row.admit)(block, &mut |result, _| {
            for e in result.err().map(|e| e.0).unwrap_or_default() {
                let rest = e.field.strip_prefix("spec").unwrap_or(&e.field);
                errs.push(format!("{path}{rest}: {}", e.message));
            }
        });
        if let Err(e) = read {
            errs.push(format!("{path}: not a {kind} generator spec: {e}"));
        }
        self.invalid.extend(errs);
    }

    /// A reference to a store by name; `kind` None is a PushSecret reference without a kind.
    /// Policy errors: the object is well formed but not allowed (403).
    fn policy(&mut self, result: Result<(), ValidationErrors>) {
        if let Err(errs) = result {
            self.denied.extend(errs.0.iter().map(ToString::to_string));
        }
    }

    /// A reference without a kind means a SecretStore, as upstream: when there is none of that
    /// name but a Provider of that name (what an omitted kind meant in Keyward before), say so.
    fn omitted_kind(&mut self, state: &State, ns: &str, path: &str, name: &str, kind: Option<StoreKind>) {
        if kind.is_none() && !state.secret_store_exists(ns, name) && state.provider_exists(ns, name) {
            self.warnings.push(omitted_kind_warning(path, name, ns));
        }
    }

    fn store_ref(&mut self, state: &State, ns: &str, path: &str, name: &str, kind: StoreKind) {
        match kind {
            k @ (StoreKind::ClusterProvider | StoreKind::ClusterSecretStore) => {
                self.cluster_store_use(state, ns, path, k, name)
            }
            StoreKind::Provider => {
                if !state.provider_exists(ns, name) {
                    self.warnings.push(format!(
                        "{path}: Provider {name:?} does not exist in namespace {ns:?} yet; nothing syncs until it does"
                    ));
                }
            }
            // A SecretStore is in the manifest's own namespace: nothing to admit; the reconciler
            // reports one that is missing or cannot be served.
            StoreKind::SecretStore => {}
        }
    }

    /// A reference to a cluster-scoped store (ClusterProvider or ClusterSecretStore): its
    /// namespace conditions decide, with one rule for both kinds (`check_namespace_admitted`).
    fn cluster_store_use(&mut self, state: &State, ns: &str, path: &str, kind: StoreKind, name: &str) {
        let cached = match kind {
            StoreKind::ClusterProvider => {
                state.cluster_providers.get(name).map(|c| c.as_ref().map(|spec| spec.conditions.as_slice()))
            }
            _ => state.cluster_secret_stores.get(name).map(|c| c.as_ref().map(Vec::as_slice)),
        };
        let local = if kind == StoreKind::ClusterProvider { "a Provider" } else { "a SecretStore" };
        let offer = Offer { kind: kind.as_str(), name, local };
        let admitted = self.offered_use(state, ns, path, offer, cached, |conditions, view| {
            check_namespace_admitted(kind, name, conditions, view).map_err(|d| (d.to_string(), d.detail()))
        });
        if admitted
            && kind == StoreKind::ClusterProvider
            && let Some(Ok(spec)) = state.cluster_providers.get(name)
            && let Err(e) = auth_namespace(StoreSpec::ClusterProvider { name, spec }, ns)
        {
            self.warnings.push(format!("{path}: {e}"));
        }
    }

    /// The tenant boundary of a provider configuration in namespace `ns`: what it names, its use
    /// of the provider's own identity, its push override.
    fn boundary(&mut self, state: &State, ns: &str, reach: &Reach<'_>) {
        if let Err(errs) = check_boundary_with(namespace_owner(state, ns), ns, reach, &state.provider_identity) {
            self.denied.extend(errs.0.iter().map(|e| {
                format!(
                    "{e} (a namespace counts as the operator's once a ClusterProvider with authenticationScope \
                     ProviderNamespace names it in spec.config.providerRef.namespace: create that first)"
                )
            }));
        }
    }

    /// A `generatorRef` to a ClusterGenerator: its namespace conditions decide, with the rule of
    /// ClusterProviders. Other kinds are checked by the spec rules (served kinds) and read by the
    /// reconciler in the manifest's own namespace; one of upstream's kinds Keyward does not serve
    /// is admitted with a warning.
    fn cluster_generator_use(&mut self, state: &State, ns: &str, path: &str, r: &GeneratorRef) {
        if let Some(w) = unserved_generator_warning(r) {
            self.warnings.push(format!("{path}: {w}"));
            return;
        }
        if r.kind != CLUSTER_GENERATOR_KIND || r.name.is_empty() {
            return;
        }
        let name = r.name.as_str();
        let cached = state.cluster_generators.get(name).map(|c| c.as_ref().map(Vec::as_slice));
        let offer = Offer { kind: CLUSTER_GENERATOR_KIND, name, local: "a generator" };
        self.offered_use(state, ns, path, offer, cached, |conditions, view| {
            check_generator_namespace_admitted(name, conditions, view).map_err(|d| (d.to_string(), d.detail()))
        });
    }

    /// A reference to something cluster-scoped that `spec.conditions` offer to namespaces: one
    /// that does not exist yet or cannot be read is a warning; a namespace `check` refuses is
    /// denied with what to do instead (or "retry in a moment" while its labels are unknown and a
    /// condition selects by label). Why the conditions refuse is logged for the operator only.
    /// Whether the namespace is admitted.
    fn offered_use(
        &mut self,
        state: &State,
        ns: &str,
        path: &str,
        offer: Offer<'_>,
        cached: Option<Result<&[ClusterProviderCondition], &String>>,
        check: impl FnOnce(&[ClusterProviderCondition], NamespaceView<'_>) -> Result<(), (String, String)>,
    ) -> bool {
        let Offer { kind, name, local } = offer;
        let conditions = match cached {
            None => {
                self.warnings.push(format!("{path}: {kind} {name:?} does not exist yet; nothing syncs until it does"));
                return false;
            }
            Some(Err(why)) => {
                self.warnings.push(format!("{path}: {kind} {name:?} cannot be read: {why}"));
                return false;
            }
            Some(Ok(conditions)) => conditions,
        };
        let empty = Labels::new();
        let (labels, known) = match state.namespaces.get(ns) {
            Some(l) => (l, true),
            None => (&empty, false),
        };
        let Err((denied, detail)) = check(conditions, NamespaceView { name: ns, labels }) else {
            return true;
        };
        tracing::info!(kind, name, namespace = ns, detail = %detail, "namespace refused");
        if !known && conditions.iter().any(|c| c.namespace_selector.is_some()) {
            self.denied.push(format!(
                "{path}: the labels of namespace {ns:?} are not known to keyward-webhook yet, so the \
                 namespaceSelector of {kind} {name:?} cannot be checked; retry in a moment"
            ));
        } else {
            self.denied.push(format!(
                "{path}: {denied}. Use a {kind} whose spec.conditions admit namespace {ns:?}, ask its owner to \
                 admit it, or use {local} in this namespace"
            ));
        }
        false
    }

    /// Push entries that ask for their own remoteNamespace, through a store whose configuration
    /// is tenant-owned (a Provider, a ClusterProvider with ManifestNamespace): refused, whatever
    /// the configuration says. ClusterProviders not known yet are left to the reconciler.
    fn push_overrides(&mut self, state: &State, ns: &str, path: &str, store: &str, kind: StoreKind, ps: &PushSecret) {
        let (scope, config_ns) = match kind {
            StoreKind::ClusterProvider => match state.cluster_providers.get(store) {
                Some(Ok(spec)) => (Some(spec.authentication_scope), spec.config.provider_ref.namespace.as_deref()),
                _ => return,
            },
            _ => (None, Some(ns)),
        };
        let owner = config_owner(Some(kind), scope, config_ns);
        for (i, d) in ps.spec.data.iter().enumerate() {
            // Metadata past the limits is denied by the spec rules, naming the field.
            let requested = d.metadata.as_ref().and_then(|m| push_metadata_remote_namespace(m).ok().flatten());
            if let Err(e) = check_push_override(owner, requested.as_deref()) {
                self.denied.push(format!("spec.data[{i}].metadata (for {path}, {kind} {store:?}): {e}"));
            }
        }
    }

    fn finish(self, kind: Kind, name: &str) -> Decision {
        let warnings = self.warnings;
        if self.invalid.is_empty() && self.denied.is_empty() {
            return Decision::allow().with_warnings(warnings);
        }
        let code = if self.invalid.is_empty() { 403 } else { 400 };
        let verb = if self.invalid.is_empty() { "is not allowed" } else { "is invalid" };
        let all: Vec<String> = self.invalid.into_iter().chain(self.denied).collect();
        Decision::deny(code, format!("{} {name:?} {verb}: {}", kind.as_str(), all.join("; "))).with_warnings(warnings)
    }
}

/// Who owns the provider configurations of namespace `ns`, as far as admission can tell: the
/// operator when a ClusterProvider with `authenticationScope: ProviderNamespace` names it,
/// else its namespace owner. The provider and the reconciler decide again per request.
pub fn namespace_owner(state: &State, ns: &str) -> ConfigOwner {
    let named = state.cluster_providers.values().filter_map(|c| c.as_ref().ok()).any(|spec| {
        config_owner(
            Some(StoreKind::ClusterProvider),
            Some(spec.authentication_scope),
            spec.config.provider_ref.namespace.as_deref(),
        ) == ConfigOwner::Operator
            && spec.config.provider_ref.namespace.as_deref() == Some(ns)
    });
    if named { ConfigOwner::Operator } else { ConfigOwner::Tenant }
}

/// The warning for a store reference without a kind that names a Provider but no SecretStore.
pub fn omitted_kind_warning(path: &str, name: &str, ns: &str) -> String {
    format!(
        "{path}: no kind given, which means SecretStore {name:?}, as upstream; namespace {ns:?} has no SecretStore \
         {name:?} but a Provider {name:?}: set kind: Provider to use the Provider"
    )
}

/// Namespaces shown in a warning before "and N more".
const MAX_LISTED_NAMESPACES: usize = 10;

/// The warning for a ClusterProvider change that locks out objects already using it: every
/// namespace with users that the new conditions refuse (and the old ones admitted).
pub fn excluded_users_warning(
    state: &State,
    name: &str,
    new: &ClusterProviderSpec,
    old: Option<&ClusterProviderSpec>,
) -> Option<String> {
    let users = state.refs.users_of(name)?;
    let mut lost: BTreeMap<&str, (u32, u32)> = BTreeMap::new();
    for (ns, counts) in users {
        let Some(labels) = state.namespaces.get(ns) else { continue };
        let view = NamespaceView { name: ns, labels };
        if check_namespace_admitted(StoreKind::ClusterProvider, name, &new.conditions, view).is_ok() {
            continue;
        }
        if let Some(old) = old
            && check_namespace_admitted(StoreKind::ClusterProvider, name, &old.conditions, view).is_err()
        {
            continue;
        }
        let push = counts.push_secrets;
        if counts.external_secrets + push > 0 {
            lost.insert(ns, (counts.external_secrets, push));
        }
    }
    if lost.is_empty() {
        return None;
    }
    let total: u32 = lost.values().map(|(e, p)| e + p).sum();
    let mut parts: Vec<String> = lost
        .iter()
        .take(MAX_LISTED_NAMESPACES)
        .map(|(ns, (es, ps))| {
            let mut what = Vec::new();
            if *es > 0 {
                what.push(plural(*es, "ExternalSecret"));
            }
            if *ps > 0 {
                what.push(plural(*ps, "PushSecret"));
            }
            format!("{ns} ({})", what.join(", "))
        })
        .collect();
    if lost.len() > MAX_LISTED_NAMESPACES {
        parts.push(format!("and {} more", lost.len() - MAX_LISTED_NAMESPACES));
    }
    Some(format!(
        "ClusterProvider {name:?}: {} in {} lose access with these conditions: {}",
        plural(total, "object"),
        plural(lost.len() as u32, "namespace"),
        parts.join(", ")
    ))
}

/// The warning for deleting a ClusterProvider that objects still use.
pub fn in_use_warning(state: &State, name: &str) -> Option<String> {
    let users = state.refs.users_of(name)?;
    let total: u32 = users.values().map(|c| c.external_secrets + c.push_secrets).sum();
    (total > 0).then(|| {
        format!(
            "ClusterProvider {name:?} is still used by {} in {}; they stop syncing until it is back",
            plural(total, "object"),
            plural(users.len() as u32, "namespace")
        )
    })
}

fn plural(n: u32, word: &str) -> String {
    if n == 1 { format!("1 {word}") } else { format!("{n} {word}s") }
}
