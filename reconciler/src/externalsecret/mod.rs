//! The ExternalSecret controller.

pub mod decode;
pub mod fetch;
pub mod reconcile;
pub mod refresh;
pub mod render;
pub mod target;

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use keyward_crds::ExternalSecret;
use kube::core::PartialObjectMeta;
use kube::runtime::controller::{Action, Config as ControllerConfig, Controller};
use kube::runtime::{WatchStreamExt, predicates, reflector, watcher};
use kube::{Api, ResourceExt};

use crate::context::Context;
use target::MANAGED_LABEL;

fn error_policy(es: Arc<ExternalSecret>, error: &reconcile::Error, ctx: Arc<Context>) -> Action {
    let key = format!("ExternalSecret/{}/{}", es.namespace().unwrap_or_default(), es.name_any());
    tracing::warn!(object = %key, %error, "reconcile failed");
    Action::requeue(ctx.failure_delay(&key))
}

/// Runs the controller until `shutdown` resolves.
pub async fn run(
    ctx: Arc<Context>,
    es_api: Api<ExternalSecret>,
    secrets_api: Api<PartialObjectMeta<Secret>>,
    es_watch: watcher::Config,
    concurrency: u16,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let (reader, writer) = reflector::store();
    let es_stream = watcher(es_api, es_watch)
        .default_backoff()
        .reflect(writer)
        .applied_objects()
        .predicate_filter(crate::predicate::spec_change, Default::default());
    // Only Secrets carrying the managed label, and only their metadata: enough to notice a
    // deleted or foreign-edited target, without caching any Secret data.
    let secret_stream = watcher(secrets_api, watcher::Config::default().labels(&format!("{MANAGED_LABEL}=true")))
        .default_backoff()
        .touched_objects()
        .predicate_filter(predicates::resource_version, Default::default());
    Controller::for_stream(es_stream, reader)
        .owns_stream(secret_stream)
        .with_config(ControllerConfig::default().concurrency(concurrency))
        .graceful_shutdown_on(shutdown)
        .run(reconcile::reconcile, error_policy, ctx)
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(error = %e, "ExternalSecret controller event");
            }
        })
        .await;
}
