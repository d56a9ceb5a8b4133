//! Values a PushSecret's `selector.generatorRef` generated, kept in a Secret the PushSecret
//! owns so they are pushed again unchanged: upstream generates once per refresh, and a
//! reconcile that is not a refresh (a restart, a retry, a store coming back) must not rotate
//! the remote value.
//!
//! The Secret is `<pushsecret>-generated` in the PushSecret's namespace, with a controller
//! owner reference (the garbage collector deletes it with the PushSecret). New values are
//! generated, and written there before anything is pushed, when the Secret is missing, when the
//! PushSecret's spec changed since (its generation), or when `refreshInterval` has passed since
//! they were generated (`0`: never on time).

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::jiff::Timestamp;
use keyward_crds::PushSecret;
use keyward_crds::external_secret::GeneratorRef;
use keyward_crds::rules::parse_go_duration;
use kube::api::{Patch, PatchParams};
use kube::{Api, Resource, ResourceExt};

use crate::context::Context;
use crate::externalsecret::target::FIELD_MANAGER;
use crate::generators::generate_ref;

/// The PushSecret generation the values were generated for.
pub const GENERATION_ANNOTATION: &str = "keyward.dev/generated-for-generation";
/// When the values were generated (RFC 3339).
pub const GENERATED_AT_ANNOTATION: &str = "keyward.dev/generated-at";

/// Longest PushSecret name that gets `<name>-generated`; longer ones use their uid.
const MAX_NAMED: usize = 253 - "-generated".len();

/// The name of the Secret that keeps a PushSecret's generated values.
pub fn state_secret_name(ps_name: &str, uid: &str) -> String {
    if ps_name.len() <= MAX_NAMED { format!("{ps_name}-generated") } else { format!("pushsecret-{uid}-generated") }
}

/// What the kept values were generated for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kept {
    /// The PushSecret generation.
    pub generation: i64,
    /// When.
    pub generated_at: Timestamp,
}

/// Whether the kept values are still the ones to push (otherwise new ones are generated).
pub fn still_current(kept: Option<Kept>, generation: i64, interval: Duration, now: Timestamp) -> bool {
    let Some(kept) = kept else { return false };
    if kept.generation != generation {
        return false;
    }
    if interval.is_zero() {
        return true;
    }
    let age = Duration::try_from(now.duration_since(kept.generated_at)).unwrap_or(Duration::ZERO);
    age < interval
}

fn kept(secret: &Secret) -> Option<Kept> {
    let a = secret.metadata.annotations.as_ref()?;
    Some(Kept {
        generation: a.get(GENERATION_ANNOTATION)?.parse().ok()?,
        generated_at: a.get(GENERATED_AT_ANNOTATION)?.parse().ok()?,
    })
}

/// The values to push for `generator`, and the name of the Secret that keeps them.
pub async fn generated_source(
    ps: &PushSecret,
    ctx: &Context,
    ns: &str,
    generator: &GeneratorRef,
) -> Result<(String, HashMap<String, Vec<u8>>), String> {
    let uid = ps.uid().unwrap_or_default();
    let name = state_secret_name(&ps.name_any(), &uid);
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), ns);
    let existing = secrets.get_opt(&name).await.map_err(|e| format!("reading Secret {name:?}: {e}"))?;
    if let Some(s) = &existing
        && !s.owner_references().iter().any(|o| o.controller == Some(true) && o.uid == uid)
    {
        return Err(format!(
            "Secret {name:?} exists and is not this PushSecret's: it keeps the generated values of \
             selector.generatorRef; rename or delete that Secret"
        ));
    }
    let generation = ps.metadata.generation.unwrap_or_default();
    let interval = parse_go_duration(&ps.spec.refresh_interval).map_err(|e| format!("spec.refreshInterval: {e}"))?;
    let now = Timestamp::now();
    if let Some(s) = &existing
        && still_current(kept(s), generation, interval, now)
    {
        let data = s.data.clone().unwrap_or_default().into_iter().map(|(k, v)| (k, v.0)).collect();
        return Ok((name, data));
    }
    let generated = generate_ref(&ctx.client, &ctx.manager, ns, generator)
        .await
        .map_err(|e| format!("selector.generatorRef: {e}"))?;
    // Kept before anything is pushed: a push that fails half way is retried with these values.
    let body = state_secret(ps, &name, ns, &uid, generation, now, &generated);
    secrets
        .patch(&name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&body))
        .await
        .map_err(|e| format!("writing Secret {name:?} with the generated values: {e}"))?;
    Ok((name, generated.into_iter().collect()))
}

fn state_secret(
    ps: &PushSecret,
    name: &str,
    ns: &str,
    uid: &str,
    generation: i64,
    at: Timestamp,
    data: &BTreeMap<String, Vec<u8>>,
) -> Secret {
    let owner = OwnerReference {
        api_version: PushSecret::api_version(&()).to_string(),
        kind: PushSecret::kind(&()).to_string(),
        name: ps.name_any(),
        uid: uid.to_string(),
        controller: Some(true),
        block_owner_deletion: None,
    };
    Secret {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(ns.to_string()),
            annotations: Some(BTreeMap::from([
                (GENERATION_ANNOTATION.to_string(), generation.to_string()),
                (GENERATED_AT_ANNOTATION.to_string(), at.to_string()),
            ])),
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        type_: Some("Opaque".into()),
        data: Some(data.iter().map(|(k, v)| (k.clone(), ByteString(v.clone()))).collect()),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_values_are_pushed_until_a_refresh_is_due() {
        let at: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let kept = Some(Kept { generation: 3, generated_at: at });
        let hour = Duration::from_secs(3600);
        let later = |s: i64| at + jiff_seconds(s);
        assert!(still_current(kept, 3, hour, later(10)), "a restart or retry within the interval");
        assert!(!still_current(kept, 3, hour, later(3600)), "the interval has passed");
        assert!(!still_current(kept, 4, hour, later(10)), "the spec changed");
        assert!(!still_current(None, 3, hour, later(10)), "nothing kept yet");
        assert!(still_current(kept, 3, Duration::ZERO, later(10_000_000)), "refreshInterval 0: never on time");
        assert!(still_current(kept, 3, hour, at - jiff_seconds(5)), "a clock behind the stamp");
    }

    fn jiff_seconds(s: i64) -> k8s_openapi::jiff::SignedDuration {
        k8s_openapi::jiff::SignedDuration::from_secs(s)
    }

    #[test]
    fn the_state_secret_is_named_after_the_push_secret_within_the_name_limit() {
        assert_eq!(state_secret_name("db", "u-1"), "db-generated");
        let long = "a".repeat(250);
        assert_eq!(state_secret_name(&long, "u-1"), "pushsecret-u-1-generated");
        assert!(state_secret_name(&"a".repeat(MAX_NAMED), "u").len() <= 253);
    }

    #[test]
    fn annotations_round_trip() {
        let ps = PushSecret::new("p", Default::default());
        let at: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let s = state_secret(&ps, "p-generated", "ns", "uid", 7, at, &BTreeMap::new());
        assert_eq!(kept(&s), Some(Kept { generation: 7, generated_at: at }));
        let owner = &s.metadata.owner_references.unwrap()[0];
        assert_eq!((owner.kind.as_str(), owner.uid.as_str(), owner.controller), ("PushSecret", "uid", Some(true)));
    }
}
