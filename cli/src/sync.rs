//! `keyward sync`: the `force-sync` annotation, set to now with a merge patch. The reconciler
//! reconciles an object whose annotations changed: an ExternalSecret syncs (its hash covers the
//! annotation), a PushSecret pushes, and a ClusterExternalSecret copies the annotation to the
//! ExternalSecrets it manages, which then sync.

use jiff::Timestamp;
use keyward_crds::ExternalSecret;
use keyward_crds::external_secret::{FORCE_SYNC_ANNOTATION, RefreshPolicy};
use kube::api::{Patch, PatchParams};
use serde_json::json;

use crate::Error;
use crate::cluster::{api, connect};
use crate::target::{Kind, Target};

/// The merge patch that sets the annotation to `value`.
pub fn patch(value: &str) -> serde_json::Value {
    json!({ "metadata": { "annotations": { FORCE_SYNC_ANNOTATION: value } } })
}

/// Sets the annotation on `target`.
pub async fn run(target: &str, namespace: Option<&str>) -> Result<bool, Error> {
    let target = Target::parse(target)?;
    let (client, default_ns) = connect().await?;
    let ns = target.kind.namespaced().then(|| namespace.unwrap_or(&default_ns).to_string());
    let objects = api(&client, &target.kind.api_resource(), ns.as_deref());
    // Whole seconds: the value is read by people (`kubectl get -o yaml`), not compared.
    let now = Timestamp::now();
    let now = Timestamp::from_second(now.as_second()).unwrap_or(now).to_string();
    let what = match &ns {
        Some(ns) => format!("{} in namespace {ns}", target.display()),
        None => target.display(),
    };
    let patched = objects
        .patch(&target.name, &PatchParams::default(), &Patch::Merge(patch(&now)))
        .await
        .map_err(|e| Error::api(what.clone(), e))?;
    println!("{what}: annotation {FORCE_SYNC_ANNOTATION}={now} set");
    if target.kind == Kind::ExternalSecret
        && let Ok(es) = serde_json::from_value::<ExternalSecret>(serde_json::to_value(&patched).unwrap_or_default())
        && es.spec.refresh_policy == Some(RefreshPolicy::CreatedOnce)
    {
        // Said rather than silently doing nothing: the reconciler ignores it for CreatedOnce.
        println!(
            "note: refreshPolicy CreatedOnce ignores {FORCE_SYNC_ANNOTATION} once synced; delete the target Secret to \
             write it again"
        );
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_patch_sets_only_the_annotation() {
        assert_eq!(super::patch("t").to_string(), r#"{"metadata":{"annotations":{"force-sync":"t"}}}"#);
    }
}
