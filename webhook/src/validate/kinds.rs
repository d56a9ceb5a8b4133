//! The rules of each Keyward kind that admission reads as its own type ([`Admitted`]). Every
//! decision comes from `keyward_crds::rules`; these impls only say which rules a kind gets.

use keyward_crds::rules::{
    cluster_secret_store_references, external_secret_warnings, generic_target_warning, push_secret_warnings,
    secret_store_boundary, secret_store_warnings, store_backend, store_ref_kind, validate_cluster_external_secret,
    validate_cluster_provider, validate_cluster_push_secret, validate_external_secret, validate_provider,
    validate_push_secret, validate_secret_store,
};
use keyward_crds::{
    ClusterExternalSecret, ClusterProvider, ClusterPushSecret, ClusterSecretStore, ExternalSecret, Provider,
    PushSecret, SecretStore,
};
use keyward_provider_registry::PROVIDER_KINDS;

use super::templates::{external_secret_template_warnings, push_secret_template_warnings};
use super::{Admitted, Check, Cx, Kind, excluded_users_warning};

impl Admitted for ExternalSecret {
    const KIND: Kind = Kind::ExternalSecret;

    fn check(&self, cx: &Cx<'_>, check: &mut Check) {
        check.spec(validate_external_secret(&self.spec));
        check.warnings.extend(external_secret_warnings("spec", &self.spec));
        check.warnings.extend(external_secret_template_warnings("spec", &self.spec));
        if let Some(m) = self.spec.target.manifest.as_ref().filter(|m| !m.is_secret()) {
            // The reconciler's rule: the same flags, the same message.
            check.warnings.push(generic_target_warning(&cx.state.generic_targets, &m.api_version, &m.kind));
        }
        for (path, r) in self.store_refs().into_iter().filter(|(_, r)| !r.name.is_empty()) {
            check.omitted_kind(cx.state, cx.ns, &path, &r.name, r.kind);
            check.store_ref(cx.state, cx.ns, &path, &r.name, store_ref_kind(r.kind));
        }
        for (i, d) in self.spec.data_from.iter().enumerate() {
            if let Some(g) = d.source_ref.as_ref().and_then(|s| s.generator_ref.as_ref()) {
                check.cluster_generator_use(cx.state, cx.ns, &format!("spec.dataFrom[{i}].sourceRef.generatorRef"), g);
            }
        }
    }
}

impl Admitted for ClusterExternalSecret {
    const KIND: Kind = Kind::ClusterExternalSecret;

    fn check(&self, cx: &Cx<'_>, check: &mut Check) {
        check.spec(validate_cluster_external_secret(&self.spec));
        check.warnings.extend(external_secret_warnings("spec.externalSecretSpec", &self.spec.external_secret_spec));
        check
            .warnings
            .extend(external_secret_template_warnings("spec.externalSecretSpec", &self.spec.external_secret_spec));
        check.warnings.extend(crate::cluster_external_secret::warnings(cx.state, self));
    }
}

impl Admitted for PushSecret {
    const KIND: Kind = Kind::PushSecret;

    fn check(&self, cx: &Cx<'_>, check: &mut Check) {
        check.spec(validate_push_secret(&self.spec));
        check.warnings.extend(push_secret_warnings("spec", &self.spec));
        check.warnings.extend(push_secret_template_warnings("spec", &self.spec));
        for (i, r) in self.spec.secret_store_refs.iter().enumerate() {
            if let Some(store) = r.name.as_deref().filter(|n| !n.is_empty()) {
                let path = format!("spec.secretStoreRefs[{i}]");
                check.omitted_kind(cx.state, cx.ns, &path, store, r.kind);
                check.store_ref(cx.state, cx.ns, &path, store, store_ref_kind(r.kind));
                check.push_overrides(cx.state, cx.ns, &path, store, store_ref_kind(r.kind), self);
            }
        }
        if let Some(g) = &self.spec.selector.generator_ref {
            check.cluster_generator_use(cx.state, cx.ns, "spec.selector.generatorRef", g);
        }
    }
}

/// The embedded PushSecret spec gets the PushSecret rule (in `validate_cluster_push_secret`);
/// what depends on a namespace (its stores' conditions, missing Providers) is warned per
/// selected namespace, and checked again when each PushSecret is written.
impl Admitted for ClusterPushSecret {
    const KIND: Kind = Kind::ClusterPushSecret;

    fn check(&self, cx: &Cx<'_>, check: &mut Check) {
        check.spec(validate_cluster_push_secret(&self.spec));
        check.warnings.extend(push_secret_template_warnings("spec.pushSecretSpec", &self.spec.push_secret_spec));
        check.warnings.extend(crate::cluster_external_secret::push_warnings(cx.state, self));
        if let Some(g) = &self.spec.push_secret_spec.selector.generator_ref
            && let Some(w) = keyward_crds::rules::unserved_generator_warning(g)
        {
            check.warnings.push(format!("spec.pushSecretSpec.selector.generatorRef: {w}"));
        }
    }
}

impl Admitted for Provider {
    const KIND: Kind = Kind::Provider;

    fn check(&self, cx: &Cx<'_>, check: &mut Check) {
        check.spec(validate_provider(cx.ns, &self.spec));
    }
}

impl Admitted for ClusterProvider {
    const KIND: Kind = Kind::ClusterProvider;

    fn check(&self, cx: &Cx<'_>, check: &mut Check) {
        check.spec(validate_cluster_provider(&self.spec));
        let old = cx.old::<ClusterProvider>().map(|o| o.spec);
        if let Some(w) = excluded_users_warning(cx.state, cx.name, &self.spec, old.as_ref()) {
            check.warnings.push(w);
        }
    }
}

impl Admitted for SecretStore {
    const KIND: Kind = Kind::SecretStore;

    fn check(&self, cx: &Cx<'_>, check: &mut Check) {
        check.spec(validate_secret_store(Some(cx.ns), &self.spec, PROVIDER_KINDS));
        check.policy(secret_store_boundary(cx.ns, &self.spec, PROVIDER_KINDS, &cx.state.provider_identity));
        check.warnings.extend(secret_store_warnings(&self.spec, PROVIDER_KINDS));
    }
}

impl Admitted for ClusterSecretStore {
    const KIND: Kind = Kind::ClusterSecretStore;

    fn check(&self, _: &Cx<'_>, check: &mut Check) {
        check.spec(validate_secret_store(None, &self.spec.store, PROVIDER_KINDS));
        // A store whose provider does not translate is validate_secret_store's to report.
        if let Ok(backend) = store_backend(&self.spec.store.provider, PROVIDER_KINDS) {
            check.spec(cluster_secret_store_references(&backend));
        }
        check.warnings.extend(secret_store_warnings(&self.spec.store, PROVIDER_KINDS));
    }
}
