use super::*;

fn annotations(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn pod(containers: &[&str]) -> PodSpec {
    PodSpec {
        containers: containers.iter().map(|n| Container { name: n.to_string(), ..Default::default() }).collect(),
        ..Default::default()
    }
}

fn synced(es: &str) -> TargetState {
    TargetState::Synced { secret: format!("{es}-secret") }
}

fn request(pairs: &[(&str, &str)]) -> InjectionRequest {
    parse_injection_request(&annotations(pairs)).expect("valid").expect("requested")
}

#[test]
fn parse_table() {
    assert_eq!(parse_injection_request(&annotations(&[])), Ok(None));
    let r = request(&[(INJECT_ANNOTATION, " db, api ,db")]);
    assert_eq!(r.external_secrets, vec!["db", "api"]);
    assert_eq!((r.mode, r.optional, r.containers), (InjectMode::Env, false, None));
    let r = request(&[
        (INJECT_ANNOTATION, "db"),
        (INJECT_MODE_ANNOTATION, "volume"),
        (INJECT_POLICY_ANNOTATION, "optional"),
        (INJECT_CONTAINERS_ANNOTATION, "app,sidecar"),
    ]);
    assert_eq!((r.mode, r.optional), (InjectMode::Volume, true));
    assert_eq!(r.containers, Some(vec!["app".to_string(), "sidecar".to_string()]));
    let bad = [
        (vec![(INJECT_ANNOTATION, " , ")], "is empty"),
        (vec![(INJECT_ANNOTATION, "db"), (INJECT_MODE_ANNOTATION, "file")], "use \"env\" or \"volume\""),
        (vec![(INJECT_ANNOTATION, "db"), (INJECT_POLICY_ANNOTATION, "maybe")], "use \"required\" or \"optional\""),
    ];
    for (pairs, want) in bad {
        let err = parse_injection_request(&annotations(&pairs)).unwrap_err();
        assert!(err.contains(want), "{err}");
    }
}

#[test]
fn env_injection_reaches_every_container_once() {
    let req = request(&[(INJECT_ANNOTATION, "db,api")]);
    let out = inject("team-a", &pod(&["app", "sidecar"]), &req, synced).expect("injected");
    for c in &out.spec.containers {
        let names: Vec<_> =
            c.env_from.iter().flatten().filter_map(|e| e.secret_ref.as_ref()).map(|s| &s.name).collect();
        assert_eq!(names, vec!["db-secret", "api-secret"], "{}", c.name);
    }
    assert_eq!(out.annotation, "db=db-secret,api=api-secret");
    // Reinvocation adds nothing.
    let again = inject("team-a", &out.spec, &req, synced).expect("injected");
    assert_eq!(again.spec, out.spec);
}

#[test]
fn only_listed_containers_and_user_env_kept() {
    let mut spec = pod(&["app", "sidecar"]);
    spec.containers[0].env_from =
        Some(vec![EnvFromSource { config_map_ref: Some(Default::default()), ..Default::default() }]);
    let req = request(&[(INJECT_ANNOTATION, "db"), (INJECT_CONTAINERS_ANNOTATION, "app")]);
    let out = inject("ns", &spec, &req, synced).expect("injected");
    assert_eq!(out.spec.containers[0].env_from.as_ref().map(Vec::len), Some(2), "user's envFrom kept first");
    assert!(out.spec.containers[0].env_from.as_ref().is_some_and(|e| e[0].config_map_ref.is_some()));
    assert_eq!(out.spec.containers[1].env_from, None, "sidecar untouched");
    let missing = request(&[(INJECT_ANNOTATION, "db"), (INJECT_CONTAINERS_ANNOTATION, "nope")]);
    let err = inject("ns", &spec, &missing, synced).unwrap_err();
    assert!(err.contains("container \"nope\""), "{err}");
}

#[test]
fn volume_injection_resolves_name_clashes_without_overwriting() {
    let mut spec = pod(&["app"]);
    spec.volumes = Some(vec![Volume { name: "keyward-db".into(), ..Default::default() }]);
    spec.containers[0].volume_mounts =
        Some(vec![VolumeMount { name: "keyward-db".into(), mount_path: "/data".into(), ..Default::default() }]);
    let req = request(&[(INJECT_ANNOTATION, "db"), (INJECT_MODE_ANNOTATION, "volume")]);
    let out = inject("ns", &spec, &req, synced).expect("injected");
    let volumes = out.spec.volumes.clone().unwrap_or_default();
    assert_eq!(volumes.len(), 2);
    assert_eq!(volumes[0], Volume { name: "keyward-db".into(), ..Default::default() }, "user's volume untouched");
    assert_eq!(volumes[1].name, "keyward-db-1");
    assert_eq!(volumes[1].secret.as_ref().and_then(|s| s.secret_name.as_deref()), Some("db-secret"));
    let mounts = out.spec.containers[0].volume_mounts.clone().unwrap_or_default();
    assert_eq!(mounts[1].mount_path, "/var/run/secrets/keyward/db");
    assert_eq!((mounts[1].name.as_str(), mounts[1].read_only), ("keyward-db-1", Some(true)));
    let again = inject("ns", &out.spec, &req, synced).expect("injected");
    assert_eq!(again.spec, out.spec, "idempotent");
}

#[test]
fn unsynced_and_missing_are_denied_unless_optional() {
    let not_synced =
        |_: &str| TargetState::NotSynced { secret: "db".into(), why: "SecretSyncedError: provider unavailable".into() };
    let req = request(&[(INJECT_ANNOTATION, "db")]);
    let err = inject("team-a", &pod(&["app"]), &req, not_synced).unwrap_err();
    assert!(err.contains("ExternalSecret \"db\" in namespace \"team-a\" has not synced its Secret \"db\""), "{err}");
    assert!(err.contains("SecretSyncedError: provider unavailable"), "{err}");
    let err = inject("team-a", &pod(&["app"]), &req, |_| TargetState::Missing).unwrap_err();
    assert!(err.contains("does not exist in namespace \"team-a\""), "{err}");

    let optional = request(&[(INJECT_ANNOTATION, "db"), (INJECT_POLICY_ANNOTATION, "optional")]);
    let out = inject("team-a", &pod(&["app"]), &optional, |_| TargetState::Missing).expect("admitted");
    let secret_ref = out.spec.containers[0].env_from.as_ref().and_then(|e| e[0].secret_ref.clone());
    assert_eq!(secret_ref, Some(SecretEnvSource { name: "db".into(), optional: Some(true) }));
}

#[test]
fn a_secret_kept_through_an_outage_is_injected_with_a_warning() {
    let failing = ("False", "SecretSyncedError", "provider unavailable");
    // Synced before, failing now, its Secret still bound: the Pod starts with the last good data.
    let stale = target_state("db".into(), Some(failing), Some("db"));
    assert!(
        matches!(&stale, TargetState::Stale { secret, why } if secret == "db" && why.contains("provider unavailable"))
    );
    let req = request(&[(INJECT_ANNOTATION, "db")]);
    let out = inject("team-a", &pod(&["app"]), &req, |_| stale.clone()).expect("admitted");
    let secret_ref = out.spec.containers[0].env_from.as_ref().and_then(|e| e[0].secret_ref.clone());
    assert_eq!(secret_ref, Some(SecretEnvSource { name: "db".into(), optional: None }), "a required reference");
    assert_eq!(out.warnings.len(), 1);
    assert!(out.warnings[0].contains("keeps the data of its last good sync"), "{:?}", out.warnings);

    // Never synced, bound to another Secret, the Secret gone, or another reason: not admitted.
    for (ready, bound) in [
        (Some(failing), None),
        (Some(failing), Some("other")),
        (Some(("False", "SecretMissing", "creationPolicy Merge")), Some("db")),
        (Some(("False", "SecretDeleted", "gone")), Some("db")),
        (None, None),
    ] {
        let state = target_state("db".into(), ready, bound);
        assert!(matches!(state, TargetState::NotSynced { .. }), "{ready:?} {bound:?}: {state:?}");
        assert!(inject("team-a", &pod(&["app"]), &req, |_| state.clone()).is_err());
    }
    assert_eq!(target_state("db".into(), Some(("True", "SecretSynced", "")), None), synced_as("db"));
}

fn synced_as(secret: &str) -> TargetState {
    TargetState::Synced { secret: secret.into() }
}

#[test]
fn secrets_used_covers_every_reference_kind() {
    use k8s_openapi::api::core::v1::{
        EnvVar, EnvVarSource, ProjectedVolumeSource, SecretKeySelector, SecretProjection, VolumeProjection,
    };
    let mut spec = pod(&["app"]);
    spec.containers[0].env = Some(vec![EnvVar {
        name: "X".into(),
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector { name: "from-env".into(), key: "k".into(), ..Default::default() }),
            ..Default::default()
        }),
        ..Default::default()
    }]);
    spec.containers[0].env_from = Some(vec![EnvFromSource {
        secret_ref: Some(SecretEnvSource { name: "from-envfrom".into(), optional: None }),
        ..Default::default()
    }]);
    spec.volumes = Some(vec![
        Volume {
            name: "a".into(),
            secret: Some(SecretVolumeSource { secret_name: Some("from-volume".into()), ..Default::default() }),
            ..Default::default()
        },
        Volume {
            name: "b".into(),
            projected: Some(ProjectedVolumeSource {
                sources: Some(vec![VolumeProjection {
                    secret: Some(SecretProjection { name: "from-projected".into(), ..Default::default() }),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        },
    ]);
    let ann = annotations(&[(INJECT_ANNOTATION, "db,unknown")]);
    let used = secrets_used(&spec, &ann, |es| (es == "db").then(|| "db-target".to_string()));
    let want: BTreeSet<String> = ["from-env", "from-envfrom", "from-volume", "from-projected", "db-target"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(used, want);
}

#[test]
fn secrets_hash_changes_only_with_data() {
    assert_eq!(secrets_hash([]), None);
    let a = secrets_hash([("db", "h1"), ("api", "h2")]);
    assert_eq!(a, secrets_hash([("api", "h2"), ("db", "h1")]), "order does not matter");
    assert_ne!(a, secrets_hash([("db", "h1"), ("api", "h3")]), "a rotated Secret changes the hash");
    assert_ne!(a, secrets_hash([("db", "h1")]), "a dropped Secret changes the hash");
    assert_eq!(a.as_ref().map(String::len), Some(32));
}

#[test]
fn template_secrets_hash_counts_only_managed_secrets_it_uses() {
    let mut spec = pod(&["app"]);
    spec.containers[0].env_from = Some(vec![
        EnvFromSource {
            secret_ref: Some(SecretEnvSource { name: "api-secret".into(), optional: None }),
            ..Default::default()
        },
        EnvFromSource {
            secret_ref: Some(SecretEnvSource { name: "hand-made".into(), optional: None }),
            ..Default::default()
        },
    ]);
    let injected = annotations(&[(INJECT_ANNOTATION, "db")]);
    let target_of = |es: &str| (es == "db").then(|| "db-secret".to_string());
    let managed = |hashes: &'static [(&'static str, &'static str)]| {
        move |secret: &str| hashes.iter().find(|(s, _)| *s == secret).map(|(_, h)| h.to_string())
    };
    let hash =
        template_secrets_hash(&spec, &injected, target_of, managed(&[("db-secret", "h1"), ("api-secret", "h2")]));
    assert_eq!(
        hash,
        secrets_hash([("db-secret", "h1"), ("api-secret", "h2")]),
        "injected and referenced, not hand-made"
    );
    let without_injection = template_secrets_hash(&spec, &BTreeMap::new(), target_of, managed(&[("db-secret", "h1")]));
    assert_eq!(without_injection, None, "no managed Secret used, no hash");
}

#[test]
fn rollout_data_hash_only_for_secrets_the_external_secret_creates() {
    use crate::ExternalSecret;
    use crate::external_secret::{CreationPolicy, ExternalSecretStatus};
    let mut es = ExternalSecret::new("db", Default::default());
    assert_eq!(es.rollout_data_hash(), None, "never synced");
    es.status = Some(ExternalSecretStatus { synced_data_hash: Some("h1".into()), ..Default::default() });
    assert_eq!(es.rollout_data_hash(), Some("h1"));
    es.spec.target.creation_policy = CreationPolicy::Orphan;
    assert_eq!(es.rollout_data_hash(), Some("h1"));
    for policy in [CreationPolicy::Merge, CreationPolicy::None] {
        es.spec.target.creation_policy = policy;
        assert_eq!(es.rollout_data_hash(), None, "{policy:?}");
    }
}

#[test]
fn inject_annotation_limits_refuse_huge_lists_quickly() {
    let names = |n: usize| (0..n).map(|i| format!("es-{i}")).collect::<Vec<_>>();
    let long_list = names(100_000).join(",");
    let one_mib_name = "x".repeat(1 << 20);
    for (value, want) in [
        (long_list.as_str(), format!("at most {MAX_INJECT_ANNOTATION_BYTES} bytes are allowed")),
        (one_mib_name.as_str(), format!("at most {MAX_INJECT_ANNOTATION_BYTES} bytes are allowed")),
        (&*names(MAX_INJECT_NAMES + 1).join(","), format!("at most {MAX_INJECT_NAMES} are allowed")),
    ] {
        let ann = annotations(&[(INJECT_ANNOTATION, value), (INJECT_POLICY_ANNOTATION, "optional")]);
        let started = std::time::Instant::now();
        let err = parse_injection_request(&ann).unwrap_err();
        let took = started.elapsed();
        assert!(took < std::time::Duration::from_millis(100), "{took:?}");
        assert!(err.contains(INJECT_ANNOTATION) && err.contains(&want), "{err}");
    }
}

#[test]
fn inject_annotation_at_the_limits_parses_without_duplicates() {
    let names: Vec<String> = (0..MAX_INJECT_NAMES).map(|i| format!("es-{i}")).collect();
    // Every name twice, the second round reversed: duplicates do not count against the limit
    // and the first occurrence fixes the order.
    let value: Vec<&str> = names.iter().chain(names.iter().rev()).map(String::as_str).collect();
    let r = request(&[(INJECT_ANNOTATION, &value.join(", "))]);
    assert_eq!(r.external_secrets, names);
    // The longest names Kubernetes allows, as many as allowed, fit in the byte limit.
    let longest: Vec<String> = (0..MAX_INJECT_NAMES).map(|i| format!("{i:0>253}")).collect();
    let r = request(&[(INJECT_ANNOTATION, &longest.join(","))]);
    assert_eq!(r.external_secrets, longest);
}

#[test]
fn injection_stays_linear_in_what_the_pod_already_holds() {
    // A Pod that already holds volumes named like every candidate for the injected volume,
    // and many envFrom entries and mounts: each check is a set lookup, not a scan.
    let n = 50_000;
    let mut spec = pod(&["app"]);
    let mut volumes = vec![Volume { name: "keyward-db".into(), ..Default::default() }];
    volumes.extend((1..n).map(|i| Volume { name: format!("keyward-db-{i}"), ..Default::default() }));
    spec.volumes = Some(volumes);
    spec.containers[0].volume_mounts = Some(
        (0..n).map(|i| VolumeMount { name: "x".into(), mount_path: format!("/m/{i}"), ..Default::default() }).collect(),
    );
    spec.containers[0].env_from = Some(
        (0..n)
            .map(|i| EnvFromSource {
                secret_ref: Some(SecretEnvSource { name: format!("s-{i}"), optional: None }),
                ..Default::default()
            })
            .collect(),
    );
    let names: Vec<String> = (1..MAX_INJECT_NAMES).map(|i| format!("es-{i}")).collect();
    let list = format!("db,{}", names.join(","));
    let volume = request(&[
        (INJECT_ANNOTATION, &list),
        (INJECT_MODE_ANNOTATION, "volume"),
        (INJECT_POLICY_ANNOTATION, "optional"),
    ]);
    let env = request(&[(INJECT_ANNOTATION, &list), (INJECT_POLICY_ANNOTATION, "optional")]);
    let started = std::time::Instant::now();
    let out = inject("ns", &spec, &volume, |_| TargetState::Missing).expect("admitted");
    let took = started.elapsed();
    assert!(took < std::time::Duration::from_secs(5), "{took:?}");
    let volumes = out.spec.volumes.as_deref().unwrap_or_default();
    assert_eq!(volumes.len(), n + MAX_INJECT_NAMES);
    assert_eq!(volumes[n].name, format!("keyward-db-{n}"), "the first free name");
    assert_eq!(volumes[n].secret.as_ref().and_then(|s| s.secret_name.as_deref()), Some("db"));
    let mounts = out.spec.containers[0].volume_mounts.as_deref().unwrap_or_default();
    assert_eq!(mounts.len(), n + MAX_INJECT_NAMES);
    assert_eq!(
        (mounts[n].name.as_str(), mounts[n].mount_path.as_str()),
        (volumes[n].name.as_str(), "/var/run/secrets/keyward/db")
    );
    let started = std::time::Instant::now();
    let again = inject("ns", &out.spec, &volume, |_| TargetState::Missing).expect("admitted");
    assert!(started.elapsed() < std::time::Duration::from_secs(5), "{:?}", started.elapsed());
    assert_eq!(again.spec, out.spec, "idempotent");

    let started = std::time::Instant::now();
    let out = inject("ns", &spec, &env, |_| TargetState::Missing).expect("admitted");
    assert!(started.elapsed() < std::time::Duration::from_secs(5), "{:?}", started.elapsed());
    let env_from = out.spec.containers[0].env_from.as_deref().unwrap_or_default();
    assert_eq!(env_from.len(), n + MAX_INJECT_NAMES);
    assert_eq!(env_from[n].secret_ref, Some(SecretEnvSource { name: "db".into(), optional: Some(true) }));
}
