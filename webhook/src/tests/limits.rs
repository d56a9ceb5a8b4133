//! Admission of tenant-written sizes: every generator spec's counts and lengths, and every
//! free-form JSON field (`keyward_crds::free_json`), denied naming the field.

use super::*;

const GEN: &str = "generators.external-secrets.io";

fn generator(kind: &str, name: &str, spec: Value) -> (Value, (&'static str, &'static str, &'static str)) {
    let kind: &'static str = Box::leak(kind.to_string().into_boxed_str());
    (
        json!({"apiVersion": "generators.external-secrets.io/v1alpha1", "kind": kind, "metadata": {"name": name},
            "spec": spec}),
        (GEN, "v1alpha1", kind),
    )
}

fn admit(kind: &'static str, spec: Value) -> Decision {
    let (object, gvk) = generator(kind, "g", spec);
    validate(gvk, "CREATE", Some("team-a"), object, &caches())
}

/// `{pad: [0, 0, …]}` past the free-form limits (values first).
fn bloat() -> Value {
    json!({"pad": vec![0; 5000]})
}

#[test]
fn generator_specs_are_denied_naming_the_field() {
    // The spec that wrapped in release builds and OOM-killed the shared reconciler.
    let wrapping = json!({"digits": 9_223_372_036_854_775_807_i64, "allowRepeat": true});
    denied_with(
        &admit("Password", wrapping.clone()),
        400,
        &["Password \"g\" is invalid", "spec.digits: digits (9223372036854775807) exceed the length (24)"],
    );
    denied_with(&admit("Password", json!({"length": 2000})), 400, &["spec.length: 2000 is above the limit of 1024"]);
    denied_with(
        &admit("Password", json!({"length": 80, "digits": 0, "symbols": 0})),
        400,
        &["spec.length: 80 letters without repeats"],
    );
    assert!(admit("Password", json!({"length": 32})).allowed);
    denied_with(&admit("SSHKey", json!({"keySize": 8192})), 400, &["spec.keySize: 8192 is not generated for rsa"]);
    assert!(admit("SSHKey", json!({"keyType": "ed25519"})).allowed);
    let big = "x".repeat(1024 * 1024);
    denied_with(&admit("Fake", json!({"data": {"k": big}})), 400, &["spec.data: holds more than one generation"]);
    assert!(admit("UUID", json!({})).allowed);
    let vault = json!({"path": "p", "provider": {"server": "http://v", "auth": {"tokenSecretRef": {"name": "t", "key": "k"}}},
                       "parameters": bloat()});
    denied_with(&admit("VaultDynamicSecret", vault), 400, &["spec.parameters: free-form JSON of "]);
    let mut webhook = json!({"url": "https://h/"});
    webhook["body"] = bloat();
    denied_with(&admit("Webhook", webhook), 400, &["spec: free-form JSON of "]);
    denied_with(&admit("Password", json!({"length": "long"})), 400, &["the Password cannot be read"]);

    // A ClusterGenerator's spec, at its own path.
    let cg = json!({"apiVersion": "generators.external-secrets.io/v1alpha1", "kind": "ClusterGenerator",
                    "metadata": {"name": "cg"}, "spec": {"kind": "Password", "generator": {"passwordSpec": wrapping}}});
    let d = validate((GEN, "v1alpha1", "ClusterGenerator"), "CREATE", None, cg, &caches());
    denied_with(&d, 400, &["ClusterGenerator \"cg\" is invalid", "spec.generator.passwordSpec.digits: "]);
}

#[test]
fn free_form_json_past_the_limits_is_denied_naming_the_field() {
    let c = caches();
    let (state, gvk) = generator("GeneratorState", "s", json!({"resource": {"kind": "Password"}, "state": bloat()}));
    denied_with(&validate(gvk, "CREATE", Some("team-a"), state, &c), 400, &["spec.state: free-form JSON of "]);
    let (state, gvk) = generator("GeneratorState", "s", json!({"resource": null, "state": {"id": "42"}}));
    assert!(validate(gvk, "CREATE", Some("team-a"), state, &c).allowed);

    let mut ps = push_secret(json!([{"name": "local", "kind": "Provider"}]));
    ps["spec"]["data"][0]["metadata"] = bloat();
    let d = validate(PS, "CREATE", Some("team-b"), ps, &c);
    denied_with(&d, 400, &["spec.data[0].metadata: free-form JSON of 10009 bytes, 5002 values, 2 levels deep"]);

    let unserved = json!({"provider": {"alibaba": bloat()}});
    let d = validate(SS, "CREATE", Some("team-b"), store("SecretStore", unserved.clone()), &c);
    denied_with(&d, 400, &["spec.provider: free-form JSON of ", "at most 65536 bytes, 4096 values and 16 levels"]);
    let d = validate(CSS, "CREATE", None, store("ClusterSecretStore", unserved), &c);
    denied_with(&d, 400, &["spec.provider: free-form JSON of "]);
    let deep = json!({"provider": {"alibaba": {"a": [[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]}}});
    let d = validate(SS, "CREATE", Some("team-b"), store("SecretStore", deep), &c);
    denied_with(&d, 400, &["19 levels deep"]);
}
