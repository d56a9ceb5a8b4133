//! What the ExternalSecret and PushSecret controllers do around each reconcile: record
//! controller-runtime's metrics, log a failure and pick its backoff, and, when the object was
//! deleted while its reconcile (or error policy) ran, drop again what that run recorded for it
//! (metric series, per-object state), which would otherwise live for the life of the process.

use std::future::Future;
use std::sync::Arc;

use keyward_crds::{ExternalSecret, PushSecret};
use kube::runtime::controller::Action;
use kube::runtime::reflector::Store;
use kube::{Resource, ResourceExt};

use crate::caches::Packed;
use crate::context::{Caches, Context, ObjectKey};
use crate::controller_metrics::ControllerMetrics;

/// A namespaced kind with per-object state in [`Context`].
pub trait Tracked: Resource<DynamicType = ()> + Clone + Send + Sync + 'static {
    /// Its [`ObjectKey::kind`].
    const KIND: &'static str;
    /// Its controller's name in controller-runtime's metrics (the lowercase kind).
    const CONTROLLER: &'static str;
    /// Its cache.
    fn store(caches: &Caches) -> &Store<Self>;
}

impl Tracked for Packed<ExternalSecret> {
    const KIND: &'static str = "ExternalSecret";
    const CONTROLLER: &'static str = "externalsecret";
    fn store(caches: &Caches) -> &Store<Self> {
        &caches.external_secrets
    }
}

impl Tracked for PushSecret {
    const KIND: &'static str = "PushSecret";
    const CONTROLLER: &'static str = "pushsecret";
    fn store(caches: &Caches) -> &Store<Self> {
        &caches.push_secrets
    }
}

/// The key of `obj`'s per-object state.
pub fn key<K: Tracked>(obj: &K) -> ObjectKey {
    ObjectKey::new(K::KIND, &obj.namespace().unwrap_or_default(), &obj.name_any())
}

/// One reconcile of `obj`, observed in its controller's metrics; then, if `obj` was deleted
/// meanwhile, what the reconcile recorded for it is dropped again.
pub async fn reconcile<K, E, Fut>(
    controller: Arc<ControllerMetrics>,
    obj: Arc<K>,
    ctx: Arc<Context>,
    reconcile: impl FnOnce(Arc<K>, Arc<Context>) -> Fut,
) -> Result<Action, E>
where
    K: Tracked,
    Fut: Future<Output = Result<Action, E>>,
{
    let key = key(obj.as_ref());
    // Sharded: another replica works this namespace (or will, once the handover settled); it
    // is triggered again if this replica gains the namespace.
    if !ctx.owns(key.namespace()) {
        return Ok(Action::await_change());
    }
    let name = obj.name_any();
    let result = controller.observe(Some(key.namespace()), &name, reconcile(obj, ctx.clone())).await;
    ctx.forget_if_gone(&key, K::store(&ctx.caches));
    result
}

/// The error policy: logs the failure and retries after the object's backoff.
pub fn error_policy<K: Tracked, E: std::fmt::Display>(obj: Arc<K>, error: &E, ctx: Arc<Context>) -> Action {
    let key = key(obj.as_ref());
    tracing::warn!(object = %key, %error, "reconcile failed");
    let action = Action::requeue(ctx.failure_delay(&key));
    ctx.metrics.controllers.requeued(K::CONTROLLER, key.namespace(), key.name(), &action);
    ctx.forget_if_gone(&key, K::store(&ctx.caches));
    action
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_name_the_kind_namespace_and_name() {
        let mut es = ExternalSecret::new("db", Default::default());
        es.metadata.namespace = Some("team".into());
        assert_eq!(key(&Packed::pack(&es)), ObjectKey::external_secret("team", "db"));
        let mut ps = PushSecret::new("db", Default::default());
        ps.metadata.namespace = Some("team".into());
        assert_eq!(key(&ps), ObjectKey::push_secret("team", "db"));
    }
}
