//! The PushSecret controller.

pub mod generated;
pub mod plan;
pub mod reconcile;
pub mod stores;

use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt;
use keyward_crds::PushSecret;
use kube::ResourceExt;
use kube::runtime::controller::{Config as ControllerConfig, Controller};
use kube::runtime::reflector::ObjectRef;

use crate::caches::{self, Caches, Change};
use crate::context::{Context, ObjectKey};
use crate::tracked::{self, Tracked};

/// Registers the controller on the shared caches and returns it; it runs until `shutdown`
/// resolves. It is triggered when a PushSecret's spec changes and when the provider it failed
/// on answers again; everything else is a timer.
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
                    trigger.send(caches::key(ps));
                }
            }
            Change::Gone(ps) => {
                seen.remove(&caches::key(ps));
                ctx.forget(&ObjectKey::push_secret(&ps.namespace().unwrap_or_default(), &ps.name_any()));
            }
        });
    }
    // PushSecrets that waited on a provider are requeued when it answers again.
    let recovered = ctx.manager.recovery().requeues::<PushSecret>();
    let metrics = ctx.metrics.controllers.controller(PushSecret::CONTROLLER, concurrency);
    Controller::for_shared_stream(futures::stream::pending(), caches.push_secrets.store())
        // Sharded, a namespace this replica gains is reconciled at once.
        .reconcile_on(metrics.queued(futures::stream::select(
            futures::stream::select(triggers, recovered),
            crate::shard::members::gained(ctx.shard(), caches.push_secrets.store()),
        )))
        .with_config(ControllerConfig::default().concurrency(concurrency))
        .graceful_shutdown_on(shutdown)
        .run(
            move |obj, ctx| tracked::reconcile(metrics.clone(), obj, ctx, reconcile::reconcile),
            tracked::error_policy,
            ctx,
        )
        .for_each(|r| async move {
            if let Err(e) = r {
                tracing::debug!(error = %e, "PushSecret controller event");
            }
        })
}
