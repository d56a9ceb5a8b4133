//! The ExternalSecret controller.

pub mod decode;
pub mod fetch;
pub mod generic;
pub mod reconcile;
pub mod refresh;
pub mod render;
pub mod target;

use std::sync::Arc;

use futures::StreamExt;
use keyward_crds::ExternalSecret;
use kube::ResourceExt;
use kube::runtime::controller::{Config as ControllerConfig, Controller};
use kube::runtime::reflector::ObjectRef;

use crate::caches::{self, Caches, Change, Packed};
use crate::class::of_class;
use crate::context::{Context, ObjectKey};
use crate::tracked::{self, Tracked};

/// The controller's key of an ExternalSecret (the store keeps them packed).
fn packed_key(es: &ExternalSecret) -> ObjectRef<Packed<ExternalSecret>> {
    ObjectRef::new(&es.name_any()).within(&es.namespace().unwrap_or_default())
}

/// Registers the controller on the shared caches and returns it; it runs until `shutdown`
/// resolves. It is triggered when what an ExternalSecret asks for changes (not by its own
/// status writes), when its managed Secret disappears, and when the provider it failed on
/// answers again; everything else is a timer.
pub fn controller(
    caches: &mut Caches,
    ctx: Arc<Context>,
    class: Option<String>,
    concurrency: u16,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    let (trigger, triggers) = caches::triggers::<Packed<ExternalSecret>>();
    {
        let (trigger, ctx) = (trigger.clone(), ctx.clone());
        caches.external_secrets.hook(move |change| match change {
            Change::Applied(es) => {
                if !of_class(es, class.as_deref()) {
                    return;
                }
                let hash = crate::predicate::spec_change(es).unwrap_or_default();
                let key = ObjectKey::external_secret(&es.namespace().unwrap_or_default(), &es.name_any());
                if ctx.spec_changed(key, hash) {
                    trigger.send(packed_key(es));
                }
            }
            Change::Gone(es) => {
                ctx.forget(&ObjectKey::external_secret(&es.namespace().unwrap_or_default(), &es.name_any()));
            }
        });
    }
    // A managed Secret that disappears (deleted, or no longer labelled) is written again: an
    // owned one (Owner) by its owner, an unowned one (Orphan, CreateOrMerge) by the
    // ExternalSecrets of its namespace that target it.
    let external_secrets = caches.external_secrets.store();
    caches.managed_secrets.hook(move |change| {
        if let Change::Gone(secret) = change {
            let ns = secret.namespace().unwrap_or_default();
            let mut owners = secret.owner_references().iter().filter(|o| o.kind == "ExternalSecret").peekable();
            if owners.peek().is_none() {
                let name = secret.name_any();
                // Only the namespace's ExternalSecrets are decoded.
                for cached in
                    external_secrets.state().iter().filter(|es| es.namespace().as_deref() == Some(ns.as_str()))
                {
                    if cached.unpack().is_ok_and(|es| es.target_secret_name() == name) {
                        trigger.send(caches::key(cached.as_ref()));
                    }
                }
            }
            for owner in owners {
                trigger.send(ObjectRef::new(&owner.name).within(&ns));
            }
        }
    });
    // ExternalSecrets that waited on a provider are requeued when it answers again (paced by
    // the client manager's recovery), instead of when their own backoff runs out.
    let recovered = ctx.manager.recovery().requeues::<Packed<ExternalSecret>>();
    let metrics = ctx.metrics.controllers.controller(Packed::<ExternalSecret>::CONTROLLER, concurrency);
    Controller::for_shared_stream(futures::stream::pending(), caches.external_secrets.store())
        // Sharded, a namespace this replica gains is reconciled at once.
        .reconcile_on(metrics.queued(futures::stream::select(
            futures::stream::select(triggers, recovered),
            crate::shard::members::gained(ctx.shard(), caches.external_secrets.store()),
        )))
        .with_config(ControllerConfig::default().concurrency(concurrency))
        .graceful_shutdown_on(shutdown)
        .run(
            move |obj, ctx| tracked::reconcile(metrics.clone(), obj, ctx, reconcile::reconcile_cached),
            tracked::error_policy,
            ctx,
        )
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(error = %e, "ExternalSecret controller event");
            }
        })
}
