//! The PushSecret controller.

pub mod reconcile;
pub mod stores;

use std::sync::Arc;

use futures::StreamExt;
use keyward_crds::PushSecret;
use kube::runtime::controller::{Action, Config as ControllerConfig, Controller};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Api, ResourceExt};

use crate::context::Context;

fn error_policy(ps: Arc<PushSecret>, error: &reconcile::Error, ctx: Arc<Context>) -> Action {
    let key = format!("PushSecret/{}/{}", ps.namespace().unwrap_or_default(), ps.name_any());
    tracing::warn!(object = %key, %error, "reconcile failed");
    Action::requeue(ctx.failure_delay(&key))
}

/// Runs the controller until `shutdown` resolves.
pub async fn run(
    ctx: Arc<Context>,
    api: Api<PushSecret>,
    wc: watcher::Config,
    concurrency: u16,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let (reader, writer) = reflector::store();
    let stream = watcher(api, wc)
        .default_backoff()
        .reflect(writer)
        .applied_objects()
        .predicate_filter(crate::predicate::spec_change, Default::default());
    Controller::for_stream(stream, reader)
        .with_config(ControllerConfig::default().concurrency(concurrency))
        .graceful_shutdown_on(shutdown)
        .run(reconcile::reconcile, error_policy, ctx)
        .for_each(|r| async move {
            if let Err(e) = r {
                tracing::debug!(error = %e, "PushSecret controller event");
            }
        })
        .await;
}
