//! Admission of ClusterPushSecrets: the embedded PushSecret spec gets the PushSecret rule
//! (denied naming the field under `spec.pushSecretSpec`), and the namespaces it selects are
//! warned about as for a ClusterExternalSecret.

use super::*;

const CPS: (&str, &str, &str) = ("external-secrets.io", "v1alpha1", "ClusterPushSecret");

fn cluster_push_secret(selectors: Value, refs: Value) -> Value {
    json!({"apiVersion": "external-secrets.io/v1alpha1", "kind": "ClusterPushSecret", "metadata": {"name": "shared-push"},
           "spec": {"namespaceSelectors": selectors,
                    "pushSecretSpec": {"secretStoreRefs": refs, "selector": {"secret": {"name": "source"}},
                                       "data": [{"match": {"secretKey": "k", "remoteRef": {"remoteKey": "r"}}}]}}})
}

#[test]
fn cluster_push_secret_embedded_spec_is_checked_with_the_push_secret_rules() {
    let c = caches();
    let every = json!([{"matchExpressions": [{"key": "env", "operator": "Exists"}]}]);
    let d = validate(CPS, "CREATE", None, cluster_push_secret(every.clone(), json!([])), &c);
    denied_with(
        &d,
        400,
        &[
            "ClusterPushSecret \"shared-push\" is invalid",
            "spec.pushSecretSpec.secretStoreRefs: list at least one store",
        ],
    );
    // A remote key leaving the store path: the PushSecret key rule, at the embedded field.
    let mut escaping = cluster_push_secret(every.clone(), json!([{"name": "open", "kind": "ClusterProvider"}]));
    escaping["spec"]["pushSecretSpec"]["data"][0]["match"]["remoteRef"]["remoteKey"] = json!("../other");
    let d = validate(CPS, "CREATE", None, escaping, &c);
    denied_with(&d, 400, &["spec.pushSecretSpec.data[0].match.remoteRef.remoteKey"]);
    let mut bad_name = cluster_push_secret(every, json!([{"name": "open", "kind": "ClusterProvider"}]));
    bad_name["spec"]["pushSecretName"] = json!("Not_A_Name");
    bad_name["spec"]["refreshTime"] = json!("often");
    let d = validate(CPS, "UPDATE", None, bad_name, &c);
    denied_with(&d, 400, &["spec.pushSecretName", "spec.refreshTime"]);
}

#[test]
fn cluster_push_secret_warns_about_refused_namespaces_and_an_empty_selection() {
    let c = caches();
    let every = json!([{"matchExpressions": [{"key": "env", "operator": "Exists"}]}]);
    let d = validate(
        CPS,
        "CREATE",
        None,
        cluster_push_secret(every.clone(), json!([{"name": "shared", "kind": "ClusterProvider"}])),
        &c,
    );
    assert!(d.allowed, "{d:?}");
    assert_eq!(
        d.warnings,
        ["ClusterPushSecret \"shared-push\": ClusterProvider \"shared\" does not allow namespace \"team-b\"; no \
          PushSecret is written there (they are listed in status.failedNamespaces). Use a ClusterProvider whose \
          spec.conditions admit them, or narrow the namespace selection"]
    );
    let d =
        validate(CPS, "CREATE", None, cluster_push_secret(every, json!([{"name": "local", "kind": "Provider"}])), &c);
    assert_eq!(
        d.warnings,
        ["ClusterPushSecret \"shared-push\": Provider \"local\" does not exist yet in namespace \"team-a\"; their \
          PushSecrets do not sync until it does"]
    );
    let d = validate(
        CPS,
        "CREATE",
        None,
        cluster_push_secret(json!([]), json!([{"name": "gone", "kind": "ClusterProvider"}])),
        &c,
    );
    assert!(d.allowed, "{d:?}");
    assert_eq!(
        d.warnings,
        [
            "ClusterPushSecret \"shared-push\" selects no namespace: set spec.namespaceSelectors",
            "spec.pushSecretSpec.secretStoreRefs[0]: ClusterProvider \"gone\" does not exist yet; nothing syncs until it does",
        ]
    );
    // Mutation leaves it as written (its PushSecrets are admitted when they are written).
    let obj = cluster_push_secret(json!([{}]), json!([{"name": "open"}]));
    let d = run(Mode::Mutate, &body(CPS, "CREATE", None, Some(obj), None), &c);
    assert!(d.allowed && d.patch.as_ref().is_some_and(|p| p.0.is_empty()), "{d:?}");
}
