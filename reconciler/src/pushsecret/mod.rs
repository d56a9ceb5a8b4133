//! The PushSecret controller.

pub mod plan;
pub mod reconcile;
pub mod stores;

use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt;
use keyward_crds::PushSecret;
use kube::ResourceExt;
use kube::runtime::controller::{Action, Config as ControllerConfig, Controller};
use kube::runtime::reflector::ObjectRef;

use crate::caches::{self, Caches, Change};
use crate::context::{Context, ObjectKey};

/// The controller's name in controller-runtime style metrics.
const CONTROLLER: &str = "pushsecret";

fn error_policy(ps: Arc<PushSecret>, error: &reconcile::Error, ctx: Arc<Context>) -> Action {
    let key = ObjectKey::push_secret(&ps.namespace().unwrap_or_default(), &ps.name_any());
    tracing::warn!(object = %key, %error, "reconcile failed");
    let delay = ctx.failure_delay(&key);
    ctx.forget_if_gone(&key, &ctx.caches.push_secrets);
    Action::requeue(delay)
}

/// One reconcile; then, if the PushSecret was deleted meanwhile, what the reconcile recorded for
/// it (metric series, per-object state) is dropped again.
async fn reconcile_tracked(ps: Arc<PushSecret>, ctx: Arc<Context>) -> Result<Action, reconcile::Error> {
    let key = ObjectKey::push_secret(&ps.namespace().unwrap_or_default(), &ps.name_any());
    let result = reconcile::reconcile(ps, ctx.clone()).await;
    ctx.forget_if_gone(&key, &ctx.caches.push_secrets);
    result
}

/// Registers the controller on the shared caches and returns it; it runs until `shutdown`
/// resolves.
pub fn controller(
    caches: &mut Caches,
    ctx: Arc<Context>,
    concurrency: u16,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    let (trigger, triggers) = caches::triggers::<PushSecret>();
    {
        let ctx = ctx.clone();
        let mut seen: HashMap<ObjectRef<PushSecret>, u64> = HashMap::new();
        caches.push_secrets.hook(move |change| match change {
            Change::Applied(ps) => {
                let hash = crate::predicate::spec_change(ps).unwrap_or_default();
                if seen.insert(caches::key(ps), hash) != Some(hash) {
                    trigger.send(ObjectRef::from_obj(ps));
                }
            }
            Change::Gone(ps) => {
                seen.remove(&caches::key(ps));
                ctx.forget(&ObjectKey::push_secret(&ps.namespace().unwrap_or_default(), &ps.name_any()));
            }
        });
    }
    ctx.metrics
        .max_concurrent
        .get_or_create(&crate::metrics::ControllerLabels { controller: CONTROLLER.into() })
        .set(i64::from(concurrency));
    Controller::for_shared_stream(futures::stream::pending(), caches.push_secrets.store())
        .reconcile_on(triggers)
        .with_config(ControllerConfig::default().concurrency(concurrency))
        .graceful_shutdown_on(shutdown)
        .run(
            |obj, ctx| async move {
                let metrics = ctx.metrics.clone();
                crate::metrics::observe(&metrics, CONTROLLER, reconcile_tracked(obj, ctx)).await
            },
            error_policy,
            ctx,
        )
        .for_each(|r| async move {
            if let Err(e) = r {
                tracing::debug!(error = %e, "PushSecret controller event");
            }
        })
}
