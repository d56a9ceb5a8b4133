use keyward_crds::SecretStoreSpec;
use keyward_crds::rules::{
    ConfigOwner, ProviderIdentityNamespaces, SERVED_STORE_PROVIDERS, StoreBackend, StoreProviderError, check_boundary,
    secret_store_boundary, secret_store_warnings, store_backend, validate_secret_store,
};

use super::*;

fn aws(yaml: &str) -> Result<(), ValidationErrors> {
    validate_secrets_manager(&serde_yaml::from_str(yaml).expect("test manifest parses"))
}

fn fields(r: Result<(), ValidationErrors>) -> Vec<String> {
    r.err().map(|e| e.0.into_iter().map(|f| format!("{}: {}", f.field, f.message)).collect()).unwrap_or_default()
}

fn spec(yaml: &str) -> SecretStoreSpec {
    serde_yaml::from_str(yaml).expect("test manifest parses")
}

const ROWS: &[&ProviderKind] = &[&KIND];

#[test]
fn secrets_manager_table() {
    let ok = "region: eu-west-1\nauth: {secretRef: {accessKeyIDSecretRef: {name: aws, key: id}, \
              secretAccessKeySecretRef: {name: aws, key: secret}}}\n";
    assert_eq!(fields(aws(ok)), Vec::<String>::new());
    assert_eq!(fields(aws("region: us-east-1\nrole: arn:aws:iam::1:role/r")), Vec::<String>::new());
    // Upstream's AWS guide names a role by its name; upstream admits it and STS refuses it.
    assert_eq!(fields(aws("region: eu-central-1\nrole: team-b\nadditionalRoles: [hop]")), Vec::<String>::new());
    let cases = [
        ("region: ''", "spec.region: \"\" is not an AWS region"),
        ("region: EU West", "spec.region"),
        ("region: us-east-1\nrole: ''", "spec.role: must not be empty"),
        ("region: us-east-1\nrole: arn:aws:iam::1:role/r\nadditionalRoles: ['']", "spec.additionalRoles[0]"),
        ("region: us-east-1\nauth: {}", "spec.auth: set exactly one of secretRef or jwt"),
        (
            "region: us-east-1\nauth: {secretRef: {accessKeyIDSecretRef: {name: a}, secretAccessKeySecretRef: {name: a, key: s}}}",
            "spec.auth.secretRef.accessKeyIDSecretRef.key: must not be empty",
        ),
        ("region: us-east-1\nauth: {jwt: {serviceAccountRef: {name: ''}}}", "spec.auth.jwt.serviceAccountRef.name"),
        ("region: us-east-1\nsecretsManager: {recoveryWindowInDays: 3}", "3 is not between 7 and 30"),
        ("region: us-east-1\nsecretsManager: {recoveryWindowInDays: 7, forceDeleteWithoutRecovery: true}", "not both"),
        ("region: us-east-1\nservice: CertificateManager", "spec.service: CertificateManager is not served"),
    ];
    for (yaml, want) in cases {
        let got = fields(aws(yaml));
        assert!(got.iter().any(|f| f.contains(want)), "{yaml}: want {want:?}, got {got:?}");
    }
}

#[test]
fn upstream_field_names_round_trip() {
    let yaml = "region: eu-west-1\nexternalID: x\nauth: {secretRef: {accessKeyIDSecretRef: {name: a, key: b}, \
                secretAccessKeySecretRef: {name: a, key: c}}}\nsecretsManager: {forceDeleteWithoutRecovery: true}\n";
    let spec: SecretsManagerSpec = serde_yaml::from_str(yaml).expect("parses");
    assert_eq!(spec.external_id.as_deref(), Some("x"));
    let back = serde_json::to_value(&spec).expect("json");
    assert_eq!(back["auth"]["secretRef"]["accessKeyIDSecretRef"]["key"], "b");
    assert_eq!(back["externalID"], "x");
    assert!(back.get("service").is_none(), "a configuration object's spec carries no service");
}

fn boundary_fields(owner: ConfigOwner, ns: &str, reach: &Reach<'_>) -> Vec<String> {
    check_boundary(owner, ns, reach).err().map(|e| e.0.into_iter().map(|e| e.field).collect()).unwrap_or_default()
}

#[test]
fn every_reference_of_a_secrets_manager_config_is_checked() {
    let keys: SecretsManagerSpec = serde_json::from_value(serde_json::json!({"region": "eu-west-1",
        "auth": {"secretRef": {"accessKeyIDSecretRef": {"name": "k", "key": "id", "namespace": "x"},
                               "secretAccessKeySecretRef": {"name": "k", "key": "secret"},
                               "sessionTokenSecretRef": {"name": "k", "key": "token", "namespace": "y"}}}}))
    .expect("spec");
    assert_eq!(
        boundary_fields(ConfigOwner::Tenant, "team-a", &secrets_manager_reach(&keys)),
        ["spec.auth.secretRef.accessKeyIDSecretRef.namespace", "spec.auth.secretRef.sessionTokenSecretRef.namespace"]
    );
    let jwt: SecretsManagerSpec = serde_json::from_value(serde_json::json!({"region": "eu-west-1",
        "auth": {"jwt": {"serviceAccountRef": {"name": "app", "namespace": "z"}}}}))
    .expect("spec");
    assert_eq!(
        boundary_fields(ConfigOwner::Tenant, "team-a", &secrets_manager_reach(&jwt)),
        ["spec.auth.jwt.serviceAccountRef.namespace"]
    );
    let ambient: SecretsManagerSpec = serde_json::from_value(serde_json::json!({"region": "eu-west-1"})).expect("spec");
    assert_eq!(boundary_fields(ConfigOwner::Tenant, "team-a", &secrets_manager_reach(&ambient)), ["spec.auth"]);
    assert!(boundary_fields(ConfigOwner::Operator, "keyward", &secrets_manager_reach(&ambient)).is_empty());
}

/// `spec.provider.aws` is served by the row: the configuration it translates to carries the
/// service it names, and its region, prefix and credentials as written.
#[test]
fn an_aws_block_translates_with_its_service() {
    let s = spec(
        "provider:\n  aws:\n    service: ParameterStore\n    region: eu-west-1\n    prefix: /team/\n    \
         auth: {secretRef: {accessKeyIDSecretRef: {name: k, key: id}, secretAccessKeySecretRef: {name: k, key: s}}}\n",
    );
    let b = store_backend(&s.provider, ROWS).expect("served");
    assert_eq!((b.provider_name(), b.store_key()), ("aws", "aws"));
    let StoreBackend::Plugin { spec: translated, .. } = b else { panic!("aws: {b:?}") };
    let a: SecretsManagerSpec = serde_json::from_value(translated).expect("a SecretsManager spec");
    assert_eq!(
        (a.service(), a.region.as_str(), a.prefix.as_deref()),
        (AwsService::ParameterStore, "eu-west-1", Some("/team/"))
    );
    let sm = store_backend(&spec("provider: {aws: {service: SecretsManager, region: r}}").provider, ROWS);
    let Ok(StoreBackend::Plugin { spec: translated, .. }) = sm else { panic!("{sm:?}") };
    assert_eq!(translated["service"], "SecretsManager");
    // Without the row the block is not served, and the message lists every store key served:
    // keyward_crds' own, then the rows'.
    let own = SERVED_STORE_PROVIDERS.join(", ");
    let e = store_backend(&s.provider, &[]).unwrap_err();
    assert!(e.to_string().contains(&format!("served for the providers {own};")), "{e}");
    let e = store_backend(&spec("provider: {}").provider, ROWS).unwrap_err();
    assert_eq!(e.to_string(), format!("spec.provider names no provider: set one of {own}, aws"));
}

#[test]
fn aws_stores_are_validated_and_bounded_by_the_kinds_rules() {
    let bad = spec("provider: {aws: {service: SecretsManager, region: 'EU West', role: ''}}");
    let errs = fields(validate_secret_store(Some("a"), &bad, ROWS));
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert!(errs[0].starts_with("spec.provider.aws.region: "), "{errs:?}");
    assert!(errs[1].starts_with("spec.provider.aws.role: must not be empty"), "{errs:?}");
    let irsa = spec("provider: {aws: {service: SecretsManager, region: eu-west-1}}");
    assert_eq!(validate_secret_store(Some("a"), &irsa, ROWS), Ok(()));
    let ambient = fields(secret_store_boundary("a", &irsa, ROWS, &ProviderIdentityNamespaces::NONE));
    assert!(ambient.len() == 1 && ambient[0].starts_with("spec.provider.aws.auth"), "{ambient:?}");
    assert!(ambient[0].contains("--provider-identity-namespaces a"), "names the operator's switch: {ambient:?}");
    // The operator's switch: a listed namespace's SecretStore may use the provider's identity.
    let listed = ProviderIdentityNamespaces::parse("a").expect("list");
    assert_eq!(secret_store_boundary("a", &irsa, ROWS, &listed), Ok(()));
    assert!(secret_store_boundary("b", &irsa, ROWS, &listed).is_err(), "another namespace is not listed");
    // A ClusterSecretStore's configuration is the operator's.
    assert_eq!(validate_secret_store(None, &irsa, ROWS), Ok(()));
}

#[test]
fn certificate_manager_and_session_tags_are_not_served() {
    let acm = spec("provider: {aws: {service: CertificateManager, region: r}}");
    let e = store_backend(&acm.provider, ROWS).unwrap_err();
    assert!(
        matches!(&e, StoreProviderError::NotSupported { name, .. } if name == "aws.service: CertificateManager"),
        "{e:?}"
    );
    assert_eq!(e.reason(), "ProviderNotSupported");
    let w = |s: &SecretStoreSpec| secret_store_warnings(s, ROWS);
    let warned = w(&acm);
    assert!(warned.len() == 1 && warned[0].starts_with("spec.provider.aws.service: CertificateManager"), "{warned:?}");
    let tags = w(&spec(
        "provider: {aws: {service: SecretsManager, region: r, sessionTagsPolicy: Simple, customSessionTags: {team: a}}}",
    ));
    assert_eq!(tags.len(), 2, "{tags:?}");
    assert!(tags[0].starts_with("spec.provider.aws.sessionTagsPolicy: \"Simple\" is not applied"), "{tags:?}");
    assert!(tags[1].starts_with("spec.provider.aws.customSessionTags: not applied"), "{tags:?}");
    assert_eq!(w(&spec("provider: {aws: {service: SecretsManager, region: r, sessionTagsPolicy: None}}")), [""; 0]);
}

#[test]
fn an_aws_block_beside_another_is_refused() {
    let e = store_backend(&spec("provider: {aws: {service: SecretsManager, region: x}, inline: {}}").provider, ROWS)
        .unwrap_err();
    assert_eq!(e.to_string(), "spec.provider names aws and inline: set exactly one provider");
    assert_eq!(e.reason(), "InvalidProviderConfig");
}

/// The row types `spec.provider.aws` in the store CRDs with upstream's block: the service, the
/// configuration's fields and the session tag settings.
#[test]
fn the_block_schema_is_upstreams() {
    let schema = (KIND.stores[0].schema.expect("own schema"))().expect("typed");
    let props = schema.properties.expect("properties");
    for field in ["service", "region", "role", "auth", "prefix", "sessionTagsPolicy", "customSessionTags"] {
        assert!(props.contains_key(field), "{field}");
    }
    assert_eq!(schema.required, Some(vec!["region".to_string(), "service".to_string()]));
}
